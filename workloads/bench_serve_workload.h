// `type: bench_serve` — the client `vllm bench serve` is (vllm/benchmarks/serve.py, vllm/benchmarks/datasets.py):
// it samples the whole dataset first (random, prefix_repetition, custom JSONL, ShareGPT-like lengths, optionally
// every turn of a ShareGPT conversation), orders it as the tool does (Python's random.shuffle after
// random.seed(seed)), precomputes every send time (serve.py get_request: cumulative gamma gaps rescaled so the last
// request leaves at num_prompts / request_rate), and sends open loop; a max_concurrency semaphore holds a request
// until a slot frees, so a request leaves at max(its scheduled time, the finish that frees its slot).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/content.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "workloads/workload.h"

namespace servesim::workloads {

// --ramp-up-strategy: the rate moves from start to end over the requests (serve.py _get_current_request_rate).
struct BenchServeRampUp {
    bool exponential = false;  // linear otherwise
    double start_rps = 1;
    double end_rps = 1;
};

struct BenchServeConfig {
    double request_rate_per_s = 0;            // +inf: every request at t = 0 (the tool's default)
    std::optional<BenchServeRampUp> ramp_up;  // replaces request_rate
    double burstiness = 1.0;                  // gamma shape; +inf: constant gaps
    std::optional<std::int64_t> max_concurrency;
    // `request_timeout`: the client gives up on a request this long after its send (the tool's aiohttp session has
    // total = 6 h, endpoint_request_func.py AIOHTTP_TIMEOUT, and no flag for it); none by default.
    std::optional<core::Duration> request_timeout;
    std::int64_t num_prompts = 1000;
    std::uint64_t seed = 0;  // the tool's --seed (shuffles, oversampling)
    std::string dataset_name = "random";
    std::string dataset_path;  // resolved; custom and sharegpt
    bool disable_shuffle = false;
    bool no_oversample = false;
    // random
    std::int64_t random_input_len = 1024;
    std::int64_t random_output_len = 128;
    double random_input_range_ratio = 0;
    double random_output_range_ratio = 0;
    std::int64_t random_prefix_len = 0;
    // prefix_repetition
    std::int64_t prefix_repetition_prefix_len = 256;
    std::int64_t prefix_repetition_suffix_len = 256;
    std::int64_t prefix_repetition_num_prefixes = 10;
    std::int64_t prefix_repetition_output_len = 128;
    // custom: -1 takes each line's output_tokens
    std::int64_t custom_output_len = 256;
    // sharegpt
    std::optional<std::int64_t> sharegpt_output_len;
    bool sharegpt_include_multi_turn = false;
    std::optional<std::int64_t> sharegpt_max_turns;
};

// `seed` is the experiment's master seed, used when the mapping has no `seed` key.
[[nodiscard]] BenchServeConfig parse_bench_serve_workload(const YamlMap& m, std::uint64_t seed);

// One sampled request, in the order the tool sends it.
struct BenchServeRequest {
    core::TokenContent prompt;
    std::int64_t output_tokens = 1;
};

// The dataset as the tool samples and orders it. `lengths_rng` draws the random dataset's lengths (same law as
// datasets.py, our own draws); shuffles and oversampling use PythonRandom(config.seed), as the tool does.
[[nodiscard]] std::vector<BenchServeRequest> sample_bench_serve_dataset(const BenchServeConfig& config,
                                                                        core::RngStream& lengths_rng);

// serve.py get_request: the send time of each of `num_requests` requests (not counting the semaphore); with a
// ramp-up, request i's gap is drawn at the ramp's rate for i and the times are not rescaled.
[[nodiscard]] std::vector<core::SimTime> bench_serve_schedule(std::int64_t num_requests,
                                                              double request_rate_per_s,
                                                              double burstiness,
                                                              core::RngStream& gaps_rng,
                                                              const std::optional<BenchServeRampUp>& ramp_up = {});

[[nodiscard]] std::unique_ptr<Workload> make_bench_serve_workload(const BenchServeConfig& config, std::uint64_t seed);

}  // namespace servesim::workloads
