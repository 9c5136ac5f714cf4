// Tests of sim/metrics/latency_trend: mean TTFT per third of the send window, in fixed memory; and the summary's
// send span and sent_rps (first send → last send, the drain left out).
#include "sim/metrics/latency_trend.h"

#include "sim/metrics/metrics.h"
#include <algorithm>
#include <cmath>

#include "tests/catch.h"

namespace servesim::metrics {
namespace {

// Equal within a relative tolerance (default 1e-9).
bool close(double a, double b, double rel = 1e-9) { return std::abs(a - b) <= rel * std::max(1.0, std::abs(b)); }

TEST_CASE("LatencyTrend: the mean TTFT of each third of the send window", "[metrics][trend]") {
    // Sends at 0, 1, …, 8 s with TTFT 10·(k + 1) ms. The window [0, 8] has thirds [0, 2.67), [2.67, 5.33),
    // [5.33, 8]: sends 0–2 (10, 20, 30 → mean 20), 3–5 (40, 50, 60 → 50), 6–8 (70, 80, 90 → 80).
    LatencyTrend t;
    for (int k = 0; k <= 8; ++k) {
        t.add(k, 10.0 * (k + 1));
    }
    const auto th = t.thirds(0, 8);
    CHECK(th.count == std::array<std::int64_t, 3>{3, 3, 3});
    CHECK(close(th.mean_ttft_ms[0], 20));
    CHECK(close(th.mean_ttft_ms[1], 50));
    CHECK(close(th.mean_ttft_ms[2], 80));
    // A window of no length puts everything in the first third.
    const auto one = t.thirds(4, 4);
    CHECK(one.count == std::array<std::int64_t, 3>{9, 0, 0});
    CHECK(close(one.mean_ttft_ms[0], 50));
}

TEST_CASE("LatencyTrend: a long run merges buckets and keeps the thirds", "[metrics][trend]") {
    // 1,024 buckets of 0.1 s hold 102.4 s; sends every second up to 299 s force two merges (0.4 s buckets), and
    // each third of [0, 299] still holds the sends whose bucket middle falls in it: with TTFT 1 ms in the first
    // 100 s and 5 ms after 200 s, the first third's mean is 1 and the last's 5. Bucket middles 0.2, 1.0, 2.2, …:
    // the first third [0, 99.67) holds sends 0–99 (100 of them), the last [199.33, 299] sends 200–299 (100 of them)
    // once 199 is checked: its bucket [198.8, 199.2) has middle 199.0, in the middle third.
    LatencyTrend t;
    for (int k = 0; k < 300; ++k) {
        t.add(k, k < 100 ? 1.0 : k < 200 ? 3.0 : 5.0);
    }
    const auto th = t.thirds(0, 299);
    CHECK(th.count == std::array<std::int64_t, 3>{100, 100, 100});
    CHECK(close(th.mean_ttft_ms[0], 1));
    CHECK(close(th.mean_ttft_ms[1], 3));
    CHECK(close(th.mean_ttft_ms[2], 5));
}

TEST_CASE("Summary: sent_rps is over the send window, without the drain", "[metrics][trend]") {
    // Five sends at 0, 1, 2, 3, 4 s, each finished 10 s after its send: the window with the drain is 14 s (5/14 =
    // 0.357 req/s, which is the throughput), the send span 4 s: (5 − 1)/4 = 1 req/s, the rate the clients sent at.
    MetricsCollector m(core::SimTime::zero());
    for (int k = 0; k < 5; ++k) {
        m.on_sent(core::SimTime::from_s(k));
    }
    for (int k = 0; k < 5; ++k) {
        MetricsCollector::FinishedRequest f;
        f.arrival = core::SimTime::from_s(k);
        f.first_scheduled = f.arrival;
        f.first_token = core::SimTime::from_s(k + 1.0 + k);  // TTFT 1, 2, 3, 4, 5 s
        f.finish = core::SimTime::from_s(k + 10.0);
        f.prompt_tokens = 10;
        f.output_tokens = 2;
        m.on_finished(f);
    }
    const Summary s = m.summarize({}, 0, core::SimTime::from_s(14));
    CHECK(close(s.duration_s, 14));
    CHECK(close(s.send_span_s, 4));
    CHECK(close(s.sent_rps(), 1.0));
    CHECK(close(s.throughput_rps, 5.0 / 14.0));
    // Thirds of [0, 4]: sends 0, 1 (TTFT 1, 2 s → 1,500 ms), 2 (3,000 ms), 3, 4 (4, 5 s → 4,500 ms).
    CHECK(s.ttft_by_send_third.count == std::array<std::int64_t, 3>{2, 1, 2});
    CHECK(close(s.ttft_by_send_third.mean_ttft_ms[0], 1500));
    CHECK(close(s.ttft_by_send_third.mean_ttft_ms[2], 4500));
    // One send: no rate.
    MetricsCollector single(core::SimTime::zero());
    single.on_sent(core::SimTime::from_s(3));
    CHECK(single.summarize({}, 0, core::SimTime::from_s(5)).sent_rps() == 0.0);
}

}  // namespace
}  // namespace servesim::metrics
