// Executors: where the runs of a batch execute. run_experiments (experiment.h) prepares every run, hands the batch to
// an executor and gathers the results in list order, so output never depends on which executor ran them, on how
// many processes took part or on their threads. LocalExecutor runs the batch on this process's threads (the
// default); MpiExecutor (tools/mpi/mpi_executor.h, built when CMake finds MPI) farms runs out to MPI ranks, each
// with its threads (docs/MPI.md). Every rank of an MPI job runs the same command (SPMD): each loads the scenario
// and prepares the same runs, and rank 0 — the root — hands out run indices and alone writes the outputs.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/app/experiment.h"

namespace servesim::app {

// A run that failed on another rank, with the failure rethrown on the root as the error type it had there.
enum class FailureKind { kConfig, kInvariant, kOther };

// Thrown on a non-root rank when the root ended the batch because a run failed: the root reports it; this rank
// only exits (with status 1).
class RunAbandoned : public std::runtime_error {
public:
    RunAbandoned() : std::runtime_error("the batch was abandoned: a run failed (the root rank reports it)") {}
};

class Executor {
public:
    virtual ~Executor() = default;

    // The process that writes outputs: the only one of a local run, rank 0 of an MPI job.
    [[nodiscard]] virtual bool is_root() const = 0;
    [[nodiscard]] virtual int num_ranks() const = 0;

    // Runs prepared[i] for each i of `todo` with `jobs` threads per process. On the root, results[i] is set (its
    // config and plan those of prepared[i]) and on_result(i) is called, one call at a time, as each run finishes.
    // When a run fails, no further run starts, those already running finish (and are reported through on_result),
    // and the first failure is rethrown on the root (from another rank: the same error type, its message prefixed
    // with the experiment and the rank). Other ranks take part until the root is done; `todo` and `results` are
    // the root's alone there. LocalExecutor also stops starting runs once a signal arrived (interrupt.h): those
    // running finish, then it throws Interrupted when some were not started.
    virtual void run(const std::vector<PreparedExperiment>& prepared, const std::vector<std::size_t>& todo, int jobs,
                     std::vector<ExperimentResult>& results, const std::function<void(std::size_t)>& on_result) = 0;

    // After run(): gives every rank the root's results (a plan's ranks choose the next round's probes from them).
    virtual void share(const std::vector<PreparedExperiment>& prepared, std::vector<ExperimentResult>& results) = 0;

    // Fault injection, for the fault tests only (docs/MPI.md "Faults and --resume"): called before each run; a hook
    // that throws fails that run, one that aborts crashes this process, as a crashed rank. Only test code sets it
    // (tests/tools/fault_injection.h, compiled into the test suites and the test-only binary servesim-faults); the
    // released servesim has none.
    std::function<void(const ExperimentConfig&)> fault_hook;

protected:
    void before_run(const ExperimentConfig& run) const {
        if (fault_hook) {
            fault_hook(run);
        }
    }
};

// This process's threads: each takes the next run of `todo` as it frees up.
class LocalExecutor final : public Executor {
public:
    [[nodiscard]] bool is_root() const override { return true; }
    [[nodiscard]] int num_ranks() const override { return 1; }
    void run(const std::vector<PreparedExperiment>& prepared, const std::vector<std::size_t>& todo, int jobs,
             std::vector<ExperimentResult>& results, const std::function<void(std::size_t)>& on_result) override;
    void share(const std::vector<PreparedExperiment>&, std::vector<ExperimentResult>&) override {}
};

// "experiment 'NAME'" or "experiment 'NAME' (seed S)" when it has replicates: a run as messages name it.
[[nodiscard]] std::string describe_run(const ExperimentConfig& run);


}  // namespace servesim::app
