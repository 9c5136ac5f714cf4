// Service-level objectives (docs/PLANNER.md): bounds on the latency distributions a run reports, written as
// `<metric>_<statistic>=<bound>` — "ttft_p99=500ms,itl_p99=50ms,e2el_mean=20s". Metrics and their definitions
// are vllm bench serve's (vllm/benchmarks/serve.py calculate_metrics): TTFT, TPOT, ITL, E2EL, plus the queue
// time (first scheduled − send). A run meets an SLO set when every bound holds; a distribution with no samples
// never meets a bound (nothing was measured, so nothing is promised).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/metrics/metrics.h"

namespace servesim::planner {

enum class SloMetric { kTtft, kTpot, kItl, kE2el, kQueue };

enum class SloStatistic { kMean, kP50, kP90, kP99, kMax };

struct SloBound {
    std::string name;  // "ttft_p99", as written
    SloMetric metric = SloMetric::kTtft;
    SloStatistic statistic = SloStatistic::kP99;
    double bound_ms = 0;  // the statistic must be ≤ this
};

struct SloSpec {
    std::vector<SloBound> bounds;
    [[nodiscard]] std::string describe() const;  // "ttft_p99 ≤ 500 ms, itl_p99 ≤ 50 ms"
};

// Parses "name=bound[,name=bound…]". Bounds take a unit: ms or s (a bare number is ms, as vllm bench serve's
// --goodput takes ms). `where` names the source in messages ("--slo"). Unknown metrics or statistics, a bound that
// is not a positive finite number, a repeated name, or an empty list → ConfigError listing what is allowed.
[[nodiscard]] SloSpec parse_slo(std::string_view text, std::string_view where);

// The statistic of a summary's distribution; nullopt when the distribution has no samples.
[[nodiscard]] std::optional<double> slo_value(const metrics::Summary& s, SloMetric metric, SloStatistic statistic);

struct SloVerdict {
    bool met = true;
    std::vector<std::string> violations;  // "ttft_p99 612.4 ms > 500 ms", "itl_p99 not measured"
};

[[nodiscard]] SloVerdict check_slo(const SloSpec& slo, const metrics::Summary& s);

// The names allowed in an SLO, for messages and help: "ttft, tpot, itl, e2el, queue" × "mean, p50, p90, p99, max".
[[nodiscard]] std::string slo_names_help();

}  // namespace servesim::planner
