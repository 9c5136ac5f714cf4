// Percentiles and means of latency samples, with one named method everywhere: linear interpolation between closest
// ranks (numpy's default "linear", the method vllm bench serve's np.percentile uses). Samples come as plain values or,
// where long runs of equal values are the rule (pooled ITLs), as runs; both give the same Distribution bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// q in [0, 100] over n > 0 ascending samples, the i-th given by value_at(i).
template <typename ValueAt>
[[nodiscard]] double percentile_by_rank(std::size_t n, double q, ValueAt value_at) {
    const double rank = q / 100.0 * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, n - 1);
    const double frac = rank - static_cast<double>(lo);
    return value_at(lo) + (value_at(hi) - value_at(lo)) * frac;
}

// q in [0, 100]; `sorted` ascending and non-empty.
[[nodiscard]] inline double percentile_sorted(const std::vector<double>& sorted, double q) {
    return percentile_by_rank(sorted.size(), q, [&](std::size_t i) { return sorted[i]; });
}

// `count` consecutive samples equal to `value`.
struct SampleRun {
    double value = 0;
    std::int64_t count = 0;
};

// Appends one sample, extending the last run when it has the same value: every request decoding through a step sees
// the same inter-token gap, so pooled ITLs shrink ~batch-size-fold and sorting them no longer weighs on a run.
inline void append_sample(std::vector<SampleRun>& runs, double value) {
    if (!runs.empty() && runs.back().value == value) {
        ++runs.back().count;
    } else {
        runs.push_back(SampleRun{value, 1});
    }
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

// summarize_values over the samples the runs expand to, with the same result bit for bit: the expanded samples
// sorted are the runs sorted by value (equal doubles are identical; samples are never NaN), and the sum adds every
// sample one at a time in that order.
[[nodiscard]] inline Distribution summarize_runs(std::vector<SampleRun> runs) {
    Distribution d;
    std::sort(runs.begin(), runs.end(), [](const SampleRun& a, const SampleRun& b) { return a.value < b.value; });
    std::vector<std::size_t> end_rank;  // end_rank[r] = number of samples in runs [0, r]
    end_rank.reserve(runs.size());
    std::size_t n = 0;
    double sum = 0;
    for (const SampleRun& r : runs) {
        for (std::int64_t i = 0; i < r.count; ++i) {
            sum += r.value;
        }
        n += static_cast<std::size_t>(r.count);
        end_rank.push_back(n);
    }
    if (n == 0) {
        return d;
    }
    const auto value_at = [&](std::size_t i) {
        const auto it = std::upper_bound(end_rank.begin(), end_rank.end(), i);
        return runs[static_cast<std::size_t>(it - end_rank.begin())].value;
    };
    d.count = n;
    d.mean = sum / static_cast<double>(n);
    d.p50 = percentile_by_rank(n, 50, value_at);
    d.p90 = percentile_by_rank(n, 90, value_at);
    d.p99 = percentile_by_rank(n, 99, value_at);
    d.max = value_at(n - 1);
    return d;
}

}  // namespace servesim::metrics
