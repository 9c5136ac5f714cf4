// LatencyTrend; see latency_trend.h.
#include "sim/metrics/latency_trend.h"

#include <algorithm>
#include <cmath>

namespace servesim::metrics {

void LatencyTrend::add(double send_s, double ttft_ms) {
    const double offset = std::max(0.0, send_s - origin_s_);
    auto index = static_cast<std::size_t>(std::floor(offset / width_s_));
    while (index >= kMaxBuckets) {
        // Merge neighbours in pairs: bucket i of the new width holds old buckets 2i and 2i + 1.
        const std::size_t half = (sum_ms_.size() + 1) / 2;
        for (std::size_t i = 0; i < half; ++i) {
            const std::size_t a = 2 * i;
            const std::size_t b = a + 1;
            sum_ms_[i] = sum_ms_[a] + (b < sum_ms_.size() ? sum_ms_[b] : 0.0);
            count_[i] = count_[a] + (b < count_.size() ? count_[b] : 0);
        }
        sum_ms_.resize(half);
        count_.resize(half);
        width_s_ *= 2;
        index = static_cast<std::size_t>(std::floor(offset / width_s_));
    }
    if (index >= sum_ms_.size()) {
        sum_ms_.resize(index + 1, 0.0);
        count_.resize(index + 1, 0);
    }
    sum_ms_[index] += ttft_ms;
    ++count_[index];
}

LatencyTrend::Thirds LatencyTrend::thirds(double first_send_s, double last_send_s) const {
    Thirds t;
    std::array<double, 3> sums{};
    const double span = last_send_s - first_send_s;
    for (std::size_t i = 0; i < sum_ms_.size(); ++i) {
        if (count_[i] == 0) {
            continue;
        }
        const double middle = origin_s_ + (static_cast<double>(i) + 0.5) * width_s_;
        std::size_t third = 0;
        if (span > 0) {
            const double x = (middle - first_send_s) / span;
            third = x < 1.0 / 3.0 ? 0 : x < 2.0 / 3.0 ? 1 : 2;
        }
        sums[third] += sum_ms_[i];
        t.count[third] += count_[i];
    }
    for (std::size_t k = 0; k < 3; ++k) {
        t.mean_ttft_ms[k] = t.count[k] > 0 ? sums[k] / static_cast<double>(t.count[k]) : 0.0;
    }
    return t;
}

}  // namespace servesim::metrics
