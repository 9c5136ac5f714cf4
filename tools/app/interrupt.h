// Interrupts (SIGINT, SIGTERM) during a sweep or plan (docs/MPI.md "Interrupts"): while an InterruptGuard is alive,
// the first of these signals only raises a flag; the executor (executor.h) checks it before it starts each run, so
// the runs in flight finish and are kept in the partial-results file, no further run starts, and the batch ends
// with Interrupted, which PartialResultsScope (partial_results.h) reports with the file and the --resume command.
// A second signal has its default action (the process ends at once; the runs already kept stay in the file).
// This is servesim's own behaviour (vLLM's bench tools have no resumable batches to follow).
#pragma once

#include <csignal>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace servesim::app {

// Thrown by an executor that stopped starting runs because a signal arrived: `signal` is SIGINT or SIGTERM.
class Interrupted : public std::runtime_error {
  public:
    Interrupted(int signal, std::size_t not_started);

    [[nodiscard]] int signal() const { return signal_; }

  private:
    int signal_;
};

// "SIGINT", "SIGTERM" (else "signal N").
[[nodiscard]] std::string signal_name(int signal);

// Installs the handlers (sigaction, SA_RESTART) for SIGINT and SIGTERM and clears the flag; the
// destructor puts the previous handlers back and clears the flag again. One guard at a time (the flag is per process).
class InterruptGuard {
  public:
    InterruptGuard();
    ~InterruptGuard();
    InterruptGuard(const InterruptGuard&) = delete;
    InterruptGuard& operator=(const InterruptGuard&) = delete;

  private:
    struct sigaction old_int_ {};

    struct sigaction old_term_ {};
};

// The signal received while a guard was alive (its number), or 0: what executors check between runs.
[[nodiscard]] int pending_interrupt();

}  // namespace servesim::app
