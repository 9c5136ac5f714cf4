// `servesim inspect`: the command line of vLLM's start-up arithmetic for a model on a GPU (tools/app/output_inspect.h),
// a scenario's replicas on their topology, one step's cost term by term (tools/app/step_costs.h) and the kernel table's
// checks (tools/app/kernel_checks.h).
#pragma once

#include <string>
#include <vector>

namespace servesim::cli {

// `args`: the words after `inspect`. Returns the exit status; throws ConfigError for bad input (the caller prints it, exit 2).
int cmd_inspect(const std::vector<std::string>& args);

}  // namespace servesim::cli
