// The command line speaks vLLM: every engine key of engine_keys.h is also its vLLM flag on `run`, `sweep` and
// `inspect` (--max-num-seqs 128, --kv-cache-dtype fp8, -tp 2, --no-enable-prefix-caching, --max_num_seqs=128 as
// vLLM's FlexibleArgumentParser also takes underscores), and a run without a scenario file takes `vllm bench serve`'s
// random-dataset flags (--request-rate, --num-prompts, --random-input-len, …; vllm/benchmarks/serve.py and
// vllm/benchmarks/datasets/datasets.py). Flags become scenario overrides (scenario.h Override) that name the flag
// in any error about their value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/app/scenario.h"

namespace servesim::app {

struct EngineFlags {
    std::vector<Override> overrides;  // engine.<key> for each engine flag, cluster.replicas for --data-parallel-size
    std::vector<std::string> rest;    // every other argument, in order
};

// Takes the engine flags (and -tp, -dp aliases) out of `args`, checking each value with its kind's parser; a bad
// value throws ConfigError "command line: --max-num-seqs: …".
[[nodiscard]] EngineFlags take_engine_flags(const std::vector<std::string>& args);

// The "vLLM engine flags" help block: one line per flag with its value forms and help.
[[nodiscard]] std::string engine_flags_help();

// `vllm bench serve` flags with the random dataset, for a run without a scenario file. Unset = vLLM's default
// (1,000 prompts of 1,024 input and 128 output tokens, all sent at t = 0).
struct BenchServeFlags {
    std::optional<std::string> request_rate;
    std::optional<std::string> burstiness;
    std::optional<std::string> num_prompts;
    std::optional<std::string> random_input_len;
    std::optional<std::string> random_output_len;
    std::optional<std::string> random_range_ratio;
    std::optional<std::string> random_prefix_len;
    std::optional<std::string> max_concurrency;

    [[nodiscard]] bool any() const;
};

// The scenario a run without a file simulates: `model` (a preset or Hugging Face repo id), `gpu`, `cost_model` and
// an open-loop synthetic workload built from `bench` (Poisson arrivals at --request-rate, or gamma with
// --burstiness). Returns the scenario text (named "command line" in messages) and the overrides that carry the
// flags, so that a bad value names its flag.
struct ScenarioLessRun {
    std::string text;
    std::vector<Override> overrides;
};

[[nodiscard]] ScenarioLessRun scenario_less_run(const std::string& model, const std::optional<std::string>& gpu,
                                                const std::optional<std::string>& cost_model,
                                                const BenchServeFlags& bench);

// "--seed": a whole number in [0, 2^63 − 1] (the range of scenario seeds); anything else names the flag.
[[nodiscard]] std::uint64_t parse_seed_flag(const std::string& text);

}  // namespace servesim::app
