// Percentiles and means of latency samples, with one named method everywhere: linear interpolation between closest
// ranks (numpy's default "linear", the method vllm bench serve's np.percentile uses). Exact: samples kept as plain
// values or, where long runs of equal values are the rule (pooled ITLs), as runs; both give the same Distribution
// bit for bit. Streaming: QuantileSketch, fixed memory whatever the sample count, every percentile within 0.1 %
// (relative) of the exact one; count, mean, min and max exact. docs/DESIGN-NOTES.md states the default and the bound.
#pragma once

#include <boost/histogram.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace servesim::metrics {

struct Distribution {
    double p50 = 0;
    double p90 = 0;
    double p95 = 0;  // printed for ITL only (itl_ms_p95, issue 39); kept for all, it costs one rank lookup
    double p99 = 0;
    double mean = 0;
    double max = 0;
    std::size_t count = 0;
    double min = 0;
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

// Appends `count` samples equal to `value`, extending the last run when it has the same value: every request decoding
// through a step sees the same inter-token gap, so pooled ITLs shrink ~batch-size-fold and sorting them no longer
// weighs on a run.
inline void append_samples(std::vector<SampleRun>& runs, double value, std::int64_t count) {
    if (count <= 0) {
        return;
    }
    if (!runs.empty() && runs.back().value == value) {
        runs.back().count += count;
    } else {
        runs.push_back(SampleRun{value, count});
    }
}

// One sample.
inline void append_sample(std::vector<SampleRun>& runs, double value) { append_samples(runs, value, 1); }

// Empty input gives all zeros and count 0 (reported as such, never NaN). Sums in sorted order: deterministic.
// Sorts `values` in place (no copy: the end-of-run summary of a long exact run does not double its memory).
[[nodiscard]] inline Distribution summarize_values_in_place(std::vector<double>& values) {
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
    d.p95 = percentile_sorted(values, 95);
    d.p99 = percentile_sorted(values, 99);
    d.max = values.back();
    d.min = values.front();
    return d;
}

[[nodiscard]] inline Distribution summarize_values(std::vector<double> values) {
    return summarize_values_in_place(values);
}

// summarize_values over the samples the runs expand to, with the same result bit for bit: the expanded samples
// sorted are the runs sorted by value (equal doubles are identical; samples are never NaN), and the sum adds every
// sample one at a time in that order. Sorts `runs` in place.
[[nodiscard]] inline Distribution summarize_runs_in_place(std::vector<SampleRun>& runs) {
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
    d.p95 = percentile_by_rank(n, 95, value_at);
    d.p99 = percentile_by_rank(n, 99, value_at);
    d.max = value_at(n - 1);
    d.min = value_at(0);
    return d;
}

[[nodiscard]] inline Distribution summarize_runs(std::vector<SampleRun> runs) { return summarize_runs_in_place(runs); }

// QuantileSketch: the distribution of latency samples in fixed memory, for runs too long to keep every sample
// (DDSketch's idea, Masson et al., VLDB 2019: logarithmic buckets give a relative-error guarantee). Positive values in
// [kLowest, kHighest) ms fall in one of kNumBins bins of a Boost.Histogram logarithmic axis, each spanning a ratio
// γ = (kHighest/kLowest)^(1/kNumBins) ≈ 1.0010; a bin [a, b) stands for its harmonic midpoint 2ab/(a+b), which is
// within (γ−1)/(γ+1) ≈ 0.05 % of every value in it. Zeros are counted exactly; values off the axis (negative, below a
// nanosecond or above 116 days: none that a run produces) are kept exactly. A percentile is the same linear
// interpolation between closest ranks as the exact one, over the ranked bin values: each of the two ranked values
// is within 0.05 % of the exact sample of that rank, so their weighted mean is within 0.05 % of the exact
// percentile (stated bound kRelativeErrorBound = 0.1 %, twice that, for the floating-point rounding of the axis).
// Count, min and max are exact; the mean is the compensated (Neumaier) sum of the samples over their count.
// 288 KiB of counts, allocated at the first positive sample. Deterministic: no randomness, no order dependence in
// the bins (the sum depends on insertion order only in its last bits, and the insertion order is deterministic).
class QuantileSketch {
public:
    static constexpr double kRelativeErrorBound = 1e-3;
    static constexpr double kLowest = 1e-6;   // ms: one nanosecond, the clock's resolution
    static constexpr double kHighest = 1e10;  // ms: 116 days, beyond any run's max_time
    static constexpr unsigned kNumBins = 36864;

    // `count` samples equal to `value`. Equal consecutive values (every decode of a step sees the same gap) only grow
    // a pending run, binned when another value comes or at the summary.
    void add(double value, std::int64_t count = 1) {
        if (count <= 0) {
            return;
        }
        if (value == pending_value_ && pending_count_ > 0) {
            pending_count_ += count;
            return;
        }
        flush();
        pending_value_ = value;
        pending_count_ = count;
    }

    [[nodiscard]] std::size_t count() const {
        return n_ + static_cast<std::size_t>(std::max<std::int64_t>(pending_count_, 0));
    }

    [[nodiscard]] Distribution summarize() const {
        if (pending_count_ > 0) {
            QuantileSketch flushed = *this;
            flushed.flush();
            return flushed.summarize();
        }
        Distribution d;
        if (n_ == 0) {
            return d;
        }
        // The samples as ascending runs: outliers and zeros exact, each non-empty bin at its midpoint (kept within
        // the exact [min, max], which only moves it closer to the values it stands for).
        std::vector<SampleRun> runs = outliers_;
        if (zeros_ > 0) {
            runs.push_back(SampleRun{0.0, static_cast<std::int64_t>(zeros_)});
        }
        if (bins_) {
            for (int i = 0; i < static_cast<int>(kNumBins); ++i) {
                const std::uint64_t c = bins_->at(i);
                if (c != 0) {
                    const double a = bins_->axis().value(i);
                    const double b = bins_->axis().value(i + 1);
                    runs.push_back(
                        SampleRun{std::clamp(2 * a * b / (a + b), min_, max_), static_cast<std::int64_t>(c)});
                }
            }
        }
        std::stable_sort(runs.begin(), runs.end(),
                         [](const SampleRun& x, const SampleRun& y) { return x.value < y.value; });
        std::vector<std::size_t> end_rank;
        end_rank.reserve(runs.size());
        std::size_t n = 0;
        for (const SampleRun& r : runs) {
            n += static_cast<std::size_t>(r.count);
            end_rank.push_back(n);
        }
        const auto value_at = [&](std::size_t i) {
            const auto it = std::upper_bound(end_rank.begin(), end_rank.end(), i);
            return runs[static_cast<std::size_t>(it - end_rank.begin())].value;
        };
        d.count = n_;
        d.mean = (sum_ + compensation_) / static_cast<double>(n_);
        d.p50 = percentile_by_rank(n_, 50, value_at);
        d.p90 = percentile_by_rank(n_, 90, value_at);
        d.p95 = percentile_by_rank(n_, 95, value_at);
        d.p99 = percentile_by_rank(n_, 99, value_at);
        d.max = max_;
        d.min = min_;
        return d;
    }

private:
    using Axis = boost::histogram::axis::regular<double, boost::histogram::axis::transform::log,
                                                 boost::histogram::axis::null_type,
                                                 boost::histogram::axis::option::none_t>;
    using Bins = decltype(boost::histogram::make_histogram_with(std::vector<std::uint64_t>(), Axis(1, 1.0, 2.0)));

    // Bins the pending run. The common sample (positive, on the axis, the counts allocated) is binned here; zeros,
    // values off the axis and the first positive sample go to flush_rare, out of line, so this path stays small.
    void flush() {
        const double value = pending_value_;
        const std::int64_t count = pending_count_;
        pending_count_ = 0;
        if (count <= 0) {
            return;
        }
        if (n_ == 0) {
            min_ = value;
            max_ = value;
        } else {
            min_ = std::min(min_, value);
            max_ = std::max(max_, value);
        }
        n_ += static_cast<std::size_t>(count);
        add_to_sum(value * static_cast<double>(count));
        // On the axis implies neither zero nor NaN: the tests flush_rare makes first cannot hold here.
        if (value >= kLowest && value < kHighest && bins_) {
            bin(value, count);
            return;
        }
        flush_rare(value, count);
    }

    // flush's other cases, in its order: zeros, values off the axis, then the first positive sample (allocates).
    [[gnu::noinline]] void flush_rare(double value, std::int64_t count) {
        if (value == 0) {
            zeros_ += static_cast<std::size_t>(count);
            return;
        }
        if (!(value >= kLowest && value < kHighest)) {
            outliers_.push_back(SampleRun{value, count});  // negative, NaN-free by contract, or off the axis
            return;
        }
        if (!bins_) {
            bins_.emplace(boost::histogram::make_histogram_with(std::vector<std::uint64_t>(),
                                                                Axis(kNumBins, kLowest, kHighest)));
        }
        bin(value, count);
    }

    void bin(double value, std::int64_t count) {
        bins_->at(std::clamp(bins_->axis().index(value), 0, static_cast<int>(kNumBins) - 1)) +=
            static_cast<std::uint64_t>(count);
    }

    // Neumaier's compensated summation: the sum of millions of samples to the last bit or two.
    void add_to_sum(double x) {
        const double t = sum_ + x;
        compensation_ += std::abs(sum_) >= std::abs(x) ? (sum_ - t) + x : (x - t) + sum_;
        sum_ = t;
    }

    std::optional<Bins> bins_;
    std::vector<SampleRun> outliers_;
    std::size_t zeros_ = 0;
    std::size_t n_ = 0;
    double sum_ = 0;
    double compensation_ = 0;
    double min_ = 0;
    double max_ = 0;
    double pending_value_ = 0;  // a run of equal samples not yet binned
    std::int64_t pending_count_ = 0;
};

}  // namespace servesim::metrics
