// Percentiles and means of latency samples, with one named method everywhere: linear interpolation between closest
// ranks (numpy's default "linear", the method vllm bench serve's np.percentile uses).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace servesim::metrics {

struct Distribution {
    double p50 = 0;
    double p90 = 0;
    double p99 = 0;
    double mean = 0;
    double max = 0;
    std::size_t count = 0;
};

// q in [0, 100]; `sorted` ascending and non-empty.
[[nodiscard]] inline double percentile_sorted(const std::vector<double>& sorted, double q) {
    const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    const double frac = rank - static_cast<double>(lo);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

// Empty input gives all zeros and count 0 (reported as such, never NaN). Sums in sorted order: deterministic.
[[nodiscard]] inline Distribution summarize_values(std::vector<double> values) {
    Distribution d;
    if (values.empty()) {
        return d;
    }
    std::sort(values.begin(), values.end());
    double sum = 0;
    for (double v : values) {
        sum += v;
    }
    d.count = values.size();
    d.mean = sum / static_cast<double>(values.size());
    d.p50 = percentile_sorted(values, 50);
    d.p90 = percentile_sorted(values, 90);
    d.p99 = percentile_sorted(values, 99);
    d.max = values.back();
    return d;
}

}  // namespace servesim::metrics
