// Tests of sim/metrics: the latency definitions of vllm bench serve (docs/VLLM-RULES.md §7.1, §10 item 17), the
// percentile method (linear interpolation, numpy's default), the warm-up window, and a summary with no requests.
// The hand-worked figures use exact percentiles (MetricsCollector(..., kExact)); the default sketch is checked
// against them within its bound.
#include "sim/metrics/metrics.h"

#include <cmath>
#include <vector>

#include "sim/metrics/percentiles.h"
#include "tests/catch.h"

namespace servesim::metrics {
namespace {

bool close(double a, double b) { return std::abs(a - b) < 1e-9; }

core::SimTime at_ms(double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

constexpr bool kExact = true;

// The two requests of the bench-serve definitions test below.
void feed_two_requests(MetricsCollector& m) {
    m.on_sent(at_ms(0));
    m.on_sent(at_ms(5));
    m.on_token_gap(at_ms(0), core::Duration::from_ms(12.25));
    m.on_token_gap(at_ms(0), core::Duration::from_ms(4.5));
    m.on_token_gap(at_ms(5), core::Duration::from_ms(4.5));
    m.on_finished({at_ms(0), at_ms(0), at_ms(12), at_ms(28.75), 32, 3, 16});
    m.on_finished({at_ms(5), at_ms(12), at_ms(24.25), at_ms(28.75), 32, 2, 0});
}

TEST_CASE("Percentiles interpolate linearly between closest ranks (numpy 'linear')", "[metrics]") {
    // [4, 1, 3, 2] sorted [1, 2, 3, 4]; rank = q/100 · (n − 1):
    //   p50 → 1.5 → 2.5;  p90 → 2.7 → 3.7;  p99 → 2.97 → 3.97;  mean 2.5.
    const Distribution d = summarize_values({4, 1, 3, 2});
    CHECK(close(d.p50, 2.5));
    CHECK(close(d.p90, 3.7));
    CHECK(close(d.p99, 3.97));
    CHECK(close(d.mean, 2.5));
    CHECK(close(d.max, 4));
    CHECK(d.count == 4);
    // One sample: every percentile is that sample.
    const Distribution one = summarize_values({7});
    CHECK(close(one.p50, 7));
    CHECK(close(one.p99, 7));
}

TEST_CASE("A run of equal token gaps is the same samples as one on_token_gap per token", "[metrics]") {
    // Gaps 4.5, 4.5, 4.5, 12.25, 4.5 ms: by token, or as runs (4.5 ×3, 12.25 ×1, 4.5 ×1; a run of 0 is nothing).
    // Exact: sorted [4.5, 4.5, 4.5, 4.5, 12.25], p50 = 4.5, p90 at rank 3.6 = 4.5 + 0.6 · 7.75 = 9.15, mean 30.25/5
    // = 6.05; with request records the running moments see the same five values (mean 6.05). The sketch and the
    // exact lists agree field by field between the two ways.
    for (const bool exact : {true, false}) {
        MetricsCollector by_token(core::SimTime{}, exact, /*keep_request_records=*/true);
        MetricsCollector by_run(core::SimTime{}, exact, /*keep_request_records=*/true);
        for (const double ms : {4.5, 4.5, 4.5, 12.25, 4.5}) {
            by_token.on_token_gap(at_ms(0), core::Duration::from_ms(ms));
        }
        by_run.on_token_gaps(core::Duration::from_ms(4.5), 3);
        by_run.on_token_gaps(core::Duration::from_ms(12.25), 1);
        by_run.on_token_gaps(core::Duration::from_ms(7), 0);
        by_run.on_token_gaps(core::Duration::from_ms(4.5), 1);
        const Summary a = by_token.summarize({}, 0, at_ms(1));
        const Summary b = by_run.summarize({}, 0, at_ms(1));
        CHECK(b.itl_ms.count == 5);
        CHECK(a.itl_ms.count == b.itl_ms.count);
        CHECK(a.itl_ms.p50 == b.itl_ms.p50);
        CHECK(a.itl_ms.p90 == b.itl_ms.p90);
        CHECK(a.itl_ms.mean == b.itl_ms.mean);
        CHECK(a.itl_ms.max == b.itl_ms.max);
        CHECK(a.itl_moments.count == 5);
        CHECK(b.itl_moments.count == 5);
        CHECK(a.itl_moments.mean == b.itl_moments.mean);
        CHECK(a.itl_moments.m2 == b.itl_moments.m2);
        CHECK(close(b.itl_moments.mean, 6.05));
        if (exact) {
            CHECK(close(b.itl_ms.p50, 4.5));
            CHECK(close(b.itl_ms.p90, 9.15));
            CHECK(close(b.itl_ms.mean, 6.05));
        }
    }
}

TEST_CASE("TTFT, ITL, E2E and TPOT follow vllm bench serve's definitions", "[metrics]") {
    // Request 1: sent 0, tokens at 12, 24.25, 28.75 (3 outputs). Request 2: sent 5, tokens at 24.25, 28.75.
    //   TTFT = first − send: 12, 19.25.  E2E = last − send: 28.75, 23.75.
    //   ITL = per-chunk gaps, pooled: 12.25, 4.5 (req 1), 4.5 (req 2).
    //   TPOT = (E2E − TTFT)/(out − 1): (28.75 − 12)/2 = 8.375; (23.75 − 19.25)/1 = 4.5.
    MetricsCollector m(core::SimTime::zero(), kExact);
    feed_two_requests(m);
    const Summary s = m.summarize({}, 0, at_ms(28.75));
    CHECK(s.exact_percentiles);
    CHECK(close(s.ttft_ms.mean, 15.625));
    CHECK(close(s.ttft_ms.p50, 15.625));
    CHECK(close(s.ttft_ms.p90, 12 + 0.9 * 7.25));
    CHECK(close(s.e2e_ms.p50, 26.25));
    CHECK(s.itl_ms.count == 3);
    CHECK(close(s.itl_ms.p50, 4.5));
    CHECK(close(s.itl_ms.mean, 21.25 / 3));
    CHECK(close(s.tpot_ms.p50, (8.375 + 4.5) / 2));
    CHECK(close(s.queue_ms.mean, 3.5));  // first scheduled − send: 0 and 7
    // Throughput over the window [0, 28.75 ms]; cached prompt fraction counted once per request: 16 / 64.
    CHECK(close(s.throughput_rps, 2 / 0.02875));
    CHECK(close(s.output_tokens_per_s, 5 / 0.02875));
    CHECK(close(s.cached_prompt_fraction, 0.25));
}

TEST_CASE("The queue at the last send counts requests sent and never scheduled", "[metrics]") {
    // Warm-up ends at 10 ms. Sent at 5 (not measured), 20, 30, 40, 50, 60 and 70 ms. By the send at 70: the ones of
    // 20 and 30 scheduled, 40 rejected, 50 timed out while waiting; 60 still waits, 70 has just arrived (not a
    // backlog): 1 queued. The one of 5 is scheduled too, and counts nowhere. After the last send nothing changes
    // the figure: the 60 ms request scheduled at 80 leaves it at 1.
    MetricsCollector m(at_ms(10), kExact);
    m.on_sent(at_ms(5));
    for (const double t : {20.0, 30.0, 40.0, 50.0}) {
        m.on_sent(at_ms(t));
    }
    m.on_first_scheduled(at_ms(5));
    m.on_first_scheduled(at_ms(20));
    m.on_first_scheduled(at_ms(30));
    m.on_rejected(at_ms(40), RejectReason::kNeverFitsKvCache, 100, 0);
    m.on_timed_out(at_ms(50), /*scheduled=*/false);
    m.on_sent(at_ms(60));
    m.on_sent(at_ms(70));
    m.on_first_scheduled(at_ms(60));
    CHECK(m.summarize({}, 0, at_ms(100)).num_queued_at_last_send == 1);
    // A request given up after it was scheduled leaves the count alone: 20 and 30 scheduled, 40 given up while
    // running; at the send of 50, 50 itself is the only one waiting (not a backlog): 0.
    MetricsCollector n(core::SimTime::zero(), kExact);
    for (const double t : {20.0, 30.0, 40.0}) {
        n.on_sent(at_ms(t));
        n.on_first_scheduled(at_ms(t));
    }
    n.on_timed_out(at_ms(40), /*scheduled=*/true);
    n.on_sent(at_ms(50));
    CHECK(n.summarize({}, 0, at_ms(100)).num_queued_at_last_send == 0);
}

TEST_CASE("Warm-up: requests sent before it are not measured; counters are read from its end", "[metrics]") {
    // Warm-up ends at 100 ms. A request sent at 50 (before) is served but not measured; one sent at 120 is.
    // Counters: 1,000 queries / 200 hits at the warm-up end, 3,000 / 1,700 at the end → rate 1500/2000 = 0.75.
    MetricsCollector m(at_ms(100), kExact);
    m.on_sent(at_ms(50));
    m.on_sent(at_ms(120));
    m.on_token_gap(at_ms(50), core::Duration::from_ms(1));
    m.on_finished({at_ms(50), at_ms(50), at_ms(60), at_ms(130), 10, 2, 0});
    m.on_finished({at_ms(120), at_ms(120), at_ms(140), at_ms(140), 10, 1, 0});
    m.snapshot_warmup_counters({1000, 200, 0, 0});
    const Summary s = m.summarize({3000, 1700, 0, 0}, 0, at_ms(150));
    CHECK(s.num_requests_sent == 1);
    CHECK(s.num_requests_finished == 1);
    CHECK(s.ttft_ms.count == 1);
    CHECK(close(s.ttft_ms.p50, 20));
    CHECK(s.itl_ms.count == 0);
    CHECK(s.prefix_cache_queries == 2000);
    CHECK(s.prefix_cache_hits == 1500);
    CHECK(close(s.prefix_cache_hit_rate, 0.75));
    CHECK(close(s.duration_s, 0.05));  // window 100 → 150 ms
}

TEST_CASE("By default the summary's percentiles come from sketches, within 0.1 % of the exact ones", "[metrics]") {
    // The same two requests as above. Counts, means, min and max are exact in both modes; each percentile of the
    // sketch is within QuantileSketch::kRelativeErrorBound of the exact one (TTFT p90 = 18.525 exactly).
    MetricsCollector exact(core::SimTime::zero(), kExact);
    MetricsCollector sketch(core::SimTime::zero());
    feed_two_requests(exact);
    feed_two_requests(sketch);
    const Summary e = exact.summarize({}, 0, at_ms(28.75));
    const Summary s = sketch.summarize({}, 0, at_ms(28.75));
    CHECK_FALSE(s.exact_percentiles);
    const auto within = [](double approx, double truth) {
        return std::abs(approx - truth) <= QuantileSketch::kRelativeErrorBound * std::abs(truth);
    };
    for (const auto& [a, b] : {std::pair{e.ttft_ms, s.ttft_ms}, std::pair{e.itl_ms, s.itl_ms},
                               std::pair{e.e2e_ms, s.e2e_ms}, std::pair{e.tpot_ms, s.tpot_ms},
                               std::pair{e.queue_ms, s.queue_ms}}) {
        CHECK(a.count == b.count);
        CHECK(close(a.mean, b.mean));
        CHECK(a.max == b.max);
        CHECK(a.min == b.min);
        CHECK(within(b.p50, a.p50));
        CHECK(within(b.p90, a.p90));
        CHECK(within(b.p99, a.p99));
    }
    CHECK(close(e.ttft_ms.p90, 18.525));
    CHECK(close(s.throughput_rps, e.throughput_rps));
}

TEST_CASE("Each measured finished request leaves a record; the warm-up's do not", "[metrics]") {
    // Warm-up ends at 100 ms. Request 1 (sent 50) is not measured. Request 2: sent 120, scheduled 125, tokens at
    // 140, 143, 150 (gaps 3 and 7), 400 prompt tokens of which 384 cached, preempted once.
    MetricsCollector m(at_ms(100), kExact, /*keep_request_records=*/true);
    m.on_sent(at_ms(50));
    m.on_sent(at_ms(120));
    m.on_finished({at_ms(50), at_ms(50), at_ms(60), at_ms(70), 10, 2, 0, core::Duration::from_ms(10), 0});
    m.on_token_gap(at_ms(120), core::Duration::from_ms(3));
    m.on_token_gap(at_ms(120), core::Duration::from_ms(7));
    m.on_finished({at_ms(120), at_ms(125), at_ms(140), at_ms(150), 400, 3, 384, core::Duration::from_ms(7), 1});
    const Summary s = m.summarize({}, 0, at_ms(150));
    REQUIRE(s.requests.size() == 1);
    const RequestRecord& r = s.requests.front();
    CHECK(close(r.arrival_s, 0.12));
    CHECK(close(r.queue_ms, 5));
    CHECK(close(r.ttft_ms, 20));
    CHECK(close(r.e2e_ms, 30));
    CHECK(close(r.tpot_ms(), 5));  // (30 − 20) / (3 − 1)
    CHECK(close(r.itl_max_ms, 7));
    CHECK(r.prompt_tokens == 400);
    CHECK(r.cached_prompt_tokens == 384);
    CHECK(r.output_tokens == 3);
    CHECK(r.num_preemptions == 1);
    CHECK(close(s.send_window_s, 0.02));  // last measured send 120 ms − warm-up end 100 ms
    // Pooled ITL moments over the same samples: 3 and 7 → mean 5, population variance ((−2)² + 2²)/2 = 4.
    CHECK(s.itl_moments.count == 2);
    CHECK(close(s.itl_moments.mean, 5));
    CHECK(close(s.itl_moments.m2 / 2, 4));
}

TEST_CASE("Pooled ITL running moments are kept only with request records", "[metrics]") {
    // Gaps 3 and 7 ms: the ITL distribution holds both either way; the running moments (count 2, mean 5) only when
    // request records are kept, as every run writing the vllm-bench result (their only reader) does.
    for (const bool records : {false, true}) {
        MetricsCollector m(core::SimTime::zero(), kExact, records);
        m.on_token_gap(at_ms(1), core::Duration::from_ms(3));
        m.on_token_gap(at_ms(1), core::Duration::from_ms(7));
        const Summary s = m.summarize({}, 0, at_ms(10));
        CHECK(s.itl_ms.count == 2);
        CHECK(s.itl_moments.count == (records ? 2 : 0));
        CHECK(close(s.itl_moments.mean, records ? 5.0 : 0.0));
    }
}

TEST_CASE("Rejections are counted by reason, with the longest max_model_len rejection kept", "[metrics]") {
    MetricsCollector m(core::SimTime::zero());
    m.on_rejected(at_ms(1), RejectReason::kLongerThanMaxModelLen, 50'000, 100);
    m.on_rejected(at_ms(2), RejectReason::kLongerThanMaxModelLen, 90'000, 200);
    m.on_rejected(at_ms(3), RejectReason::kLongerThanMaxModelLen, 60'000, 100);
    m.on_rejected(at_ms(4), RejectReason::kNeverFitsKvCache, 30'000, 0);
    const Summary s = m.summarize({}, 0, at_ms(5));
    CHECK(s.num_requests_rejected == 4);
    CHECK(s.rejections.longer_than_max_model_len == 3);
    CHECK(s.rejections.never_fits_kv_cache == 1);
    CHECK(s.rejections.largest_prompt_tokens == 90'000);  // 90,200 is the largest prompt + output
    CHECK(s.rejections.largest_output_tokens == 200);
}

TEST_CASE("A summary with no requests has zeros, never NaN", "[metrics]") {
    MetricsCollector m(core::SimTime::zero());
    const Summary s = m.summarize({}, 0, core::SimTime::zero());
    const std::vector<double> values = {s.duration_s,          s.requested_rps,     s.throughput_rps,
                                        s.output_tokens_per_s, s.prefix_cache_hit_rate, s.cached_prompt_fraction,
                                        s.ttft_ms.p50,         s.ttft_ms.mean,      s.itl_ms.p99,
                                        s.e2e_ms.mean,         s.tpot_ms.p90,       s.kv_usage_mean,
                                        s.mean_batch_tokens,   s.mean_prompt_tokens, s.total_hit_rate};
    for (double v : values) {
        CHECK(v == 0.0);
    }
    CHECK(s.ttft_ms.count == 0);
}

}  // namespace
}  // namespace servesim::metrics

namespace servesim::metrics {
namespace {

TEST_CASE("Without keep_request_records nothing of a finished request is kept", "[metrics]") {
    // The same measured request as above; the default collector keeps no RequestRecord (memory flat in the run
    // length), while its summary figures are the same.
    MetricsCollector m(at_ms(100));
    m.on_sent(at_ms(120));
    m.on_finished({at_ms(120), at_ms(125), at_ms(140), at_ms(150), 400, 3, 384, core::Duration::from_ms(7), 1});
    const Summary s = m.summarize({}, 0, at_ms(150));
    CHECK(s.requests.empty());
    CHECK(s.num_requests_finished == 1);
    CHECK(s.ttft_ms.max == 20);
}

}  // namespace
}  // namespace servesim::metrics
