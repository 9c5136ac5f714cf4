// MPI for `mpirun -n N servesim sweep|plan …` and `srun servesim …` (docs/MPI.md); built only when CMake finds MPI.
// MpiSession starts MPI when a launcher started this process (Open MPI's mpirun, or srun through PMI/PMIx) and
// stops it at exit; started any other way the binary never touches MPI. MpiExecutor is a task farm: rank 0 hands
// run indices out one at a time to whichever thread of whichever rank is free (runs differ in cost, so a static
// split would leave ranks idle), also running some on its own threads; results come back to rank 0 as
// result_codec.h bytes and land in their list slot, so the output is byte-identical to a one-process run whatever
// the rank and thread counts. Only each process's main thread calls MPI (MPI_THREAD_FUNNELED); it polls with short
// sleeps rather than blocking in MPI, whose blocking calls spin and would take a core from the simulation threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/app/executor.h"

namespace servesim::mpi {

class MpiSession {
public:
    MpiSession(int& argc, char**& argv);  // MPI_Init_thread when launched by mpirun or srun
    ~MpiSession();                        // MPI_Finalize
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    [[nodiscard]] bool active() const { return active_; }
    [[nodiscard]] int rank() const { return rank_; }
    [[nodiscard]] int size() const { return size_; }
    // Ends every rank of the job with `status` (a failure the other ranks cannot know of).
    [[noreturn]] void abort(int status) const;

private:
    bool active_ = false;
    int rank_ = 0;
    int size_ = 1;
};

class MpiExecutor final : public app::Executor {
public:
    explicit MpiExecutor(const MpiSession& session) : session_(session), runs_per_rank_(session.size(), 0) {}
    // On rank 0, after runs: "servesim: MPI: 12 runs on 2 ranks (rank 0: 5, rank 1: 7)" on stderr.
    ~MpiExecutor() override;
    MpiExecutor(const MpiExecutor&) = delete;
    MpiExecutor& operator=(const MpiExecutor&) = delete;
    [[nodiscard]] bool is_root() const override { return session_.rank() == 0; }
    [[nodiscard]] int num_ranks() const override { return session_.size(); }
    void run(const std::vector<app::PreparedExperiment>& prepared, const std::vector<std::size_t>& todo, int jobs,
             std::vector<app::ExperimentResult>& results,
             const std::function<void(std::size_t)>& on_result) override;
    void share(const std::vector<app::PreparedExperiment>& prepared,
               std::vector<app::ExperimentResult>& results) override;
    // A run failed and every rank was told (the error run() threw on the root, RunAbandoned elsewhere): the ranks
    // end together, without MPI_Abort.
    [[nodiscard]] bool failed_cleanly() const { return failed_cleanly_; }

private:
    void run_root(const std::vector<app::PreparedExperiment>& prepared, const std::vector<std::size_t>& todo,
                  int jobs, std::vector<app::ExperimentResult>& results,
                  const std::function<void(std::size_t)>& on_result);
    void run_worker(const std::vector<app::PreparedExperiment>& prepared, int jobs);

    const MpiSession& session_;
    bool failed_cleanly_ = false;
    std::vector<std::int64_t> runs_per_rank_;  // the root's count of the runs each rank reported
};

}  // namespace servesim::mpi
