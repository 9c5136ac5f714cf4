// The local executor (this process's threads); see executor.h. The MPI executor is tools/mpi/mpi_executor.cpp.
#include "tools/app/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "tools/app/interrupt.h"

namespace servesim::app {

std::string describe_run(const ExperimentConfig& run) {
    return run.replicates > 1 ? fmt::format("experiment '{}' (seed {})", run.name, run.seed)
                              : fmt::format("experiment '{}'", run.name);
}

void LocalExecutor::run(const std::vector<PreparedExperiment>& prepared, const std::vector<std::size_t>& todo,
                        int jobs, std::vector<ExperimentResult>& results,
                        const std::function<void(std::size_t)>& on_result) {
    std::mutex mu;
    std::size_t next = 0;
    std::exception_ptr failure;
    std::size_t failed = 0;
    auto worker = [&] {
        while (true) {
            std::size_t i = 0;
            {
                std::lock_guard<std::mutex> lock(mu);
                // A signal (interrupt.h) stops the batch as a failure does: no further run starts.
                if (failure || next >= todo.size() || pending_interrupt() != 0) {
                    return;
                }
                i = todo[next++];
            }
            try {
                before_run(prepared[i].config);
                ExperimentResult r = run_experiment(prepared[i]);
                std::lock_guard<std::mutex> lock(mu);
                results[i] = std::move(r);
                on_result(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!failure) {
                    failure = std::current_exception();
                    failed = i;
                }
            }
        }
    };
    const int n = std::max(1, std::min<int>(jobs, static_cast<int>(todo.size())));
    std::vector<std::thread> threads;
    for (int t = 1; t < n; ++t) {
        threads.emplace_back(worker);
    }
    worker();
    for (auto& t : threads) {
        t.join();
    }
    if (failure) {
        // The same error type, naming the run: "experiment 'x' (seed 8) failed: why".
        const std::string run = describe_run(prepared[failed].config) + " failed: ";
        try {
            std::rethrow_exception(failure);
        } catch (const ConfigError& e) {
            throw ConfigError(run + e.what());
        } catch (const InvariantError& e) {
            throw InvariantError(run + e.what());
        } catch (const std::exception& e) {
            throw std::runtime_error(run + e.what());
        }
    }
    if (next < todo.size()) {
        throw Interrupted(pending_interrupt(), todo.size() - next);
    }
}

}  // namespace servesim::app
