// The commands that put a simulated configuration on real GPUs (issue 39, docs/OUTPUTS.md "launch.sh"): the
// `vllm serve` line of the engine settings servesim simulated, resolved as it resolved them (vLLM's defaults for the
// GPU made explicit, so another release's defaults cannot change what runs), and, when the workload is vllm bench
// serve's own (`type: bench_serve`), the `vllm bench serve` line that sends the same load and saves what
// `servesim validate` reads back. Flags are vLLM's (vllm/engine/arg_utils.py EngineArgs, vllm/benchmarks/serve.py).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/app/experiment.h"

namespace servesim::app {

struct LaunchCommands {
    std::string serve;                 // vllm serve MODEL --flag value ...
    std::optional<std::string> bench;  // vllm bench serve ... (bench_serve workloads only)
    std::string bench_note;            // why there is no bench line, when there is none
    std::string validate;              // the servesim validate line that checks the prediction
    std::vector<std::string> notes;    // what the lines cannot carry (replicas, servesim-only settings)
};

// The model as `vllm serve` takes it: the Hugging Face repo id when the model is a preset with a known repo (or was
// given as one), else the path the scenario named (a config.json's folder).
[[nodiscard]] std::string vllm_model_argument(const ExperimentConfig& config, const std::string& model_name);

[[nodiscard]] LaunchCommands launch_commands(const ExperimentResult& r);

// launch.sh: one commented block per experiment (its name, model, GPU, vLLM release, replicas), then its lines.
[[nodiscard]] std::string format_launch_script(const std::vector<ExperimentResult>& results);

}  // namespace servesim::app
