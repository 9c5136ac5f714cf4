// SERVESIM_FAIL_RUN read before each run (fault_injection.h); test builds only.
#include "tests/tools/fault_injection.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace servesim::test {

std::function<void(const app::ExperimentConfig&)> fault_from_environment() {
    return [](const app::ExperimentConfig& run) {
        const char* env = std::getenv("SERVESIM_FAIL_RUN");
        if (env == nullptr) {
            return;
        }
        std::string target = env;
        const bool crash = target.starts_with("abort:");
        if (crash) {
            target = target.substr(6);
        }
        if (target != run.name && target != fmt::format("{}@{}", run.name, run.seed)) {
            return;
        }
        if (crash) {
            std::abort();
        }
        throw std::runtime_error(fmt::format("fault injected by SERVESIM_FAIL_RUN={}", env));
    };
}

}  // namespace servesim::test
