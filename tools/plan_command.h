// `servesim plan`: the command line of the capacity planner (tools/app/plan.h, docs/PLANNER.md).
#pragma once

namespace servesim::cli {

// argv[0] is "plan". Returns the exit status; throws ConfigError for bad input (the caller prints it, exit 2).
int cmd_plan(int argc, char** argv);

}  // namespace servesim::cli
