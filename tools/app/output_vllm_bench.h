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
struct BenchOptions {
    std::vector<std::string> percentile_metrics = {"ttft", "tpot", "itl"};
    std::vector<double> metric_percentiles = {99};
};

// Parses the two flags' comma-separated values; a bad name or number throws ConfigError naming the flag.
[[nodiscard]] BenchOptions parse_bench_options(const std::string& percentile_metrics,
                                               const std::string& metric_percentiles);

[[nodiscard]] nlohmann::ordered_json to_vllm_bench(const ExperimentResult& r, const BenchOptions& options);

// One experiment run: its object; several (experiments, sweep points, replicates): an array of them.
[[nodiscard]] std::string format_vllm_bench(const std::vector<ExperimentResult>& results, const BenchOptions& options);
// The percentiles the vllm-bench result can give (pooled ITLs: p50, p90 and p99 only); called before simulating, so a
// request it cannot answer is refused before the run, not after it.
void check_bench_percentiles(const BenchOptions& options);

// numpy's np.percentile (method "linear") over ascending, non-empty `sorted`.
[[nodiscard]] double np_percentile(const std::vector<double>& sorted, double q);

}  // namespace servesim::app
