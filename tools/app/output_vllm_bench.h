// `--format vllm-bench` (and bench.json in --out): the result JSON `vllm bench serve --save-result` writes
// (vllm/benchmarks/serve.py benchmark and calculate_metrics), and numpy's percentile it computes them with.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/app/experiment.h"

namespace servesim::app {

// `--format vllm-bench`: the result JSON `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py
// benchmark and calculate_metrics), one object per experiment run. `percentile_metrics` ⊆ {ttft, tpot, itl, e2el}
// (--percentile-metrics, default ttft,tpot,itl), `metric_percentiles` in [0, 100] (--metric-percentiles, default 99).
// `save_detailed` (--save-detailed): the per-request lists vllm bench serve --save-detailed keeps (input_lens,
// output_lens, ttfts, itls, start_times, errors; no generated_texts: servesim makes no text), the peak output
// throughput that needs every token's time, and ITL statistics computed from those lists, exactly as the tool does;
// the run must have kept each request's gaps (ExperimentConfig::keep_request_itls).
struct BenchOptions {
    std::vector<std::string> percentile_metrics = {"ttft", "tpot", "itl"};
    std::vector<double> metric_percentiles = {99};
    bool save_detailed = false;
};

// Parses the two flags' comma-separated values; a bad name or number throws ConfigError naming the flag.
[[nodiscard]] BenchOptions parse_bench_options(const std::string& percentile_metrics,
                                               const std::string& metric_percentiles);

[[nodiscard]] nlohmann::ordered_json to_vllm_bench(const ExperimentResult& r, const BenchOptions& options);

// One experiment run: its object; several (experiments, sweep points, replicates): an array of them.
[[nodiscard]] std::string format_vllm_bench(const std::vector<ExperimentResult>& results, const BenchOptions& options);

// The block vllm bench serve prints when it ends ("============ Serving Benchmark Result ============", its
// counts, throughputs and the mean/median/percentile lines of each selected metric), from the same figures as the
// result JSON; one block per experiment run, each headed by the run's name when there are several. A figure with no
// sample prints "—" where the tool would print 0.
[[nodiscard]] std::string format_vllm_bench_console(const std::vector<ExperimentResult>& results,
                                                    const BenchOptions& options);
// The percentiles the vllm-bench result can give (pooled ITLs: p50, p90, p95 and p99 only, any with save_detailed);
// called before simulating, so a request it cannot answer is refused before the run, not after it.
void check_bench_percentiles(const BenchOptions& options);

// numpy's np.percentile (method "linear") over ascending, non-empty `sorted`.
[[nodiscard]] double np_percentile(const std::vector<double>& sorted, double q);

}  // namespace servesim::app
