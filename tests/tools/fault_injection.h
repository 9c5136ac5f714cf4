// The fault tests' hook (docs/MPI.md "Faults and --resume"), test code only: compiled into the test suites and the
// test-only binary servesim-faults (tools/CMakeLists.txt), never into the released servesim. It reads the
// environment variable SERVESIM_FAIL_RUN before each run: NAME or NAME@SEED makes that experiment's runs (that
// seed's) throw std::runtime_error instead of running; "abort:NAME[@SEED]" ends the process with std::abort, as a
// crashed MPI rank. Unset, it does nothing.
#pragma once

#include <functional>

#include "tools/app/experiment.h"

namespace servesim::test {

// The hook to put in app::Executor::fault_hook.
[[nodiscard]] std::function<void(const app::ExperimentConfig&)> fault_from_environment();

}  // namespace servesim::test
