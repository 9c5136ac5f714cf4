// libFuzzer entry point for one target, chosen at compile time (-DSERVESIM_FUZZ_TARGET="scenario"); built by
// tools/fuzz.sh with clang's -fsanitize=fuzzer, never by the normal build.
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const auto* target = [] {
        for (const auto& t : servesim::fuzz::fuzz_targets()) {
            if (t.name == std::string_view(SERVESIM_FUZZ_TARGET)) {
                return &t;
            }
        }
        std::abort();
    }();
    target->run(data, size);
    return 0;
}
