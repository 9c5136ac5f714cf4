// LatencyTrend: TTFT by send time in fixed memory, for the latency-growth test of a run's status (docs/OUTPUTS.md
// "Status"): the mean TTFT of the requests sent in each third of the send window (first send → last send). A server
// that keeps up serves the last third's requests about as fast as the first third's; one that falls behind (a queue
// that grows, or a KV cache that filled and preempts) serves them later and later. No vLLM counterpart: vllm bench
// serve reports the whole run's percentiles only, which hide the trend.
// Storage: sums and counts per bucket of send time from the window's opening; when a send falls beyond the last
// bucket, neighbouring buckets merge in pairs and the width doubles, so memory stays at most kMaxBuckets buckets
// whatever the run length, and a bucket is never wider than (send window)/(kMaxBuckets/2) after the first merge.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace servesim::metrics {

class LatencyTrend {
public:
    static constexpr std::size_t kMaxBuckets = 1024;
    // The first width: 0.1 s holds runs of up to 102 s (1,024 buckets) exactly to a tenth of a second.
    static constexpr double kFirstBucketWidthS = 0.1;

    // `origin_s`: the opening of the measured window (no measured send is earlier).
    explicit LatencyTrend(double origin_s = 0) : origin_s_(origin_s) {}

    // A finished request sent at `send_s` whose first token came `ttft_ms` after its send.
    void add(double send_s, double ttft_ms);

    struct Thirds {
        std::array<double, 3> mean_ttft_ms{};     // 0 where the third has no finished request (count 0)
        std::array<std::int64_t, 3> count{};      // finished requests sent in each third
    };

    // The thirds of [first_send_s, last_send_s]: a bucket belongs to the third its middle falls in (so a third's
    // edges are exact to half a bucket). All in the first third when the window has no length.
    [[nodiscard]] Thirds thirds(double first_send_s, double last_send_s) const;

private:
    double origin_s_;
    double width_s_ = kFirstBucketWidthS;
    std::vector<double> sum_ms_;
    std::vector<std::int64_t> count_;
};

}  // namespace servesim::metrics
