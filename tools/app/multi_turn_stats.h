// `--format multi-turn-bench`: the statistics summary that vLLM's multi-turn benchmark client prints at the end of a
// run (benchmarks/multi_turn/benchmark_serving_multi_turn.py, process_statistics and send_turn), computed from the
// per-request records of each experiment run, so that a simulated run can be laid next to a measured one. The
// summary is a pandas describe() of the per-request metrics, transposed: one row per metric, columns count, mean,
// std (sample, ddof = 1), min, the 25/50/75/90 % quantiles (99, 99.9 and 99.99 % once there are 100, 1,000 and
// 10,000 samples; linear interpolation as pandas' quantile), max; plus runtime_sec and requests_per_sec. The
// definitions, and where servesim's streaming differs from an HTTP client's, are in docs/OUTPUTS.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/metrics/metrics.h"
#include "tools/app/experiment.h"

namespace servesim::app {

// One row of the table: describe() of one per-request metric.
struct MultiTurnStatsRow {
    std::string metric;               // ttft_ms, tpot_ms, latency_ms, input_num_turns, ...
    std::int64_t count = 0;
    double mean = 0;
    std::optional<double> std_dev;    // sample standard deviation (ddof = 1); none with a single sample (pandas NaN)
    double min = 0;
    std::vector<double> quantiles;    // at MultiTurnStats::quantiles_percent, in that order
    double max = 0;
};

struct MultiTurnStats {
    double runtime_sec = 0;       // end of the last-started request − start of the first-started one
    std::optional<double> requests_per_sec;  // samples / runtime_sec; none when runtime_sec is 0
    std::vector<double> quantiles_percent;  // 25, 50, 75, 90 [, 99 [, 99.9 [, 99.99]]]
    std::vector<MultiTurnStatsRow> rows;    // in the tool's column order of RequestStats
};

// The statistics of one run's measured finished requests; nullopt when there is none (the tool prints "No samples to
// process" and no table). `warmup_fraction` in [0, 1): the first int(fraction · n) samples by send time are left out
// (--warmup-percentages); which quantiles are shown still follows the number of all samples, as in the tool.
[[nodiscard]] std::optional<MultiTurnStats> multi_turn_stats(const std::vector<metrics::RequestRecord>& requests,
                                                             double warmup_fraction = 0);

// The tool's --warmup-percentages: comma-separated percentages, "%" optional, each in [0, 100); returns fractions,
// ascending. Anything else throws ConfigError naming the flag.
[[nodiscard]] std::vector<double> parse_warmup_percentages(const std::string& text);

// One summary per experiment run (every sweep point and every replicate run), each headed by its name and seed, with
// one statistics table per warm-up fraction (ascending, as parse_warmup_percentages gives them).
// `mode: order_only` results have no timings and are refused with a ConfigError.
[[nodiscard]] std::string format_multi_turn_bench(const std::vector<ExperimentResult>& results,
                                                  const std::vector<double>& warmup_fractions = {0.0});

}  // namespace servesim::app
