// `servesim plan`: the command line of the capacity planner (tools/app/plan.h, docs/PLANNER.md).
#pragma once

#include <functional>
#include <string>

#include "tools/app/executor.h"

namespace servesim::cli {

// argv[0] is "plan". Returns the exit status; throws ConfigError for bad input (the caller prints it, exit 2).
// `plot(out_dir)` draws the plan's PNGs (--plot with --out). Each round's probes run on `executor` (every MPI rank
// runs the plan; rank 0 alone writes it).
int cmd_plan(int argc, char** argv, const std::function<int(const std::string&)>& plot, app::Executor& executor);

}  // namespace servesim::cli
