// MetricsCollector: per-request timestamps and vLLM-compatible counters, turned into a Summary at the end of a run
// (docs/VLLM-RULES.md §7). Definitions, as vllm bench serve computes them (vllm/benchmarks/serve.py
// calculate_metrics): TTFT = first token − send; ITL = gaps between consecutive streamed chunks, pooled over
// requests (one chunk per request per step: stream_interval 1); E2E = last token − send; TPOT per request =
// (E2E − TTFT)/(output − 1). Prefix-cache hit rate = Δ vllm:prefix_cache_hits / Δ vllm:prefix_cache_queries over
// the measured window (tokens; preempted lookups excluded, §3.5). Requests sent before the warm-up ends are
// served but not measured, and the counters are read from the end of the warm-up. Each measured finished request
// also leaves a RequestRecord (what `vllm bench serve --save-detailed` keeps per request), from which goodput and the
// `vllm bench serve` result JSON are computed (docs/OUTPUTS.md),
// when the run asks for them (keep_request_records: requests.csv, goodput, the vllm-bench and multi-turn-bench
// formats).
// Storage: with exact percentiles every latency sample is kept until the end-of-run summary (memory grows with the
// run); by default each latency goes into a QuantileSketch (percentiles.h: fixed memory, percentiles within 0.1 %,
// count/mean/min/max exact), so nothing of a request is kept after it finishes. Scenario key
// `metrics.exact_percentiles`.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/latency_trend.h"
#include "sim/metrics/percentiles.h"

namespace servesim::metrics {

struct PrefixCounters {
    std::int64_t queries = 0;
    std::int64_t hits = 0;
    std::int64_t external_queries = 0;
    std::int64_t external_hits = 0;
};

// Why a measured request was refused: the frontend's max_model_len check (vLLM InputProcessor: prompt + max_tokens
// > max_model_len, an HTTP 400 for vllm bench serve) or a prompt whose blocks can never fit the KV cache.
enum class RejectReason { kLongerThanMaxModelLen, kNeverFitsKvCache };

struct RejectionStats {
    std::int64_t longer_than_max_model_len = 0;
    std::int64_t never_fits_kv_cache = 0;
    // The largest prompt + max output among the max_model_len rejections (0 when none), for the warning.
    std::int64_t largest_prompt_tokens = 0;
    std::int64_t largest_output_tokens = 0;
};

// One measured, finished request: times from its send (arrival) in ms.
struct RequestRecord {
    double arrival_s = 0;      // send time, from the start of the run
    double queue_ms = 0;       // first scheduled − send
    double ttft_ms = 0;        // first token − send
    double e2e_ms = 0;         // last token − send
    double itl_max_ms = 0;     // longest gap between consecutive tokens (0 with one output token)
    std::int64_t prompt_tokens = 0;
    std::int64_t cached_prompt_tokens = 0;
    std::int64_t output_tokens = 0;
    int num_preemptions = 0;
    int replica = 0;  // which replica served it (0-based)
    int turn = 0;     // 1-based turn within a dialogue, 0 if the request is not part of one (RequestSpec::turn)
    // (E2E − TTFT)/(output − 1): vllm bench serve's per-request TPOT; with one output token it has none (nullopt
    // here; goodput counts it as 0, as calculate_metrics' all_tpots does).
    [[nodiscard]] bool has_tpot() const { return output_tokens > 1; }
    [[nodiscard]] double tpot_ms() const {
        return has_tpot() ? (e2e_ms - ttft_ms) / static_cast<double>(output_tokens - 1) : 0.0;
    }
};

// Count, mean and sum of squared deviations of a stream of samples (Welford's update), for a population standard
// deviation (numpy's np.std, ddof = 0) of the pooled ITLs without keeping them.
struct RunningMoments {
    std::int64_t count = 0;
    double mean = 0;
    double m2 = 0;
    void add(double x) {
        ++count;
        const double d = x - mean;
        mean += d / static_cast<double>(count);
        m2 += d * (x - mean);
    }
};

struct Summary {
    // Requests sent per second over the send span: (sent − 1) / (last send − first send), the rate of the sends
    // themselves (the drain after the last send is not in it). 0 with fewer than two sends or a span of 0.
    [[nodiscard]] double sent_rps() const {
        return num_requests_sent > 1 && send_span_s > 0
                   ? static_cast<double>(num_requests_sent - 1) / send_span_s
                   : 0.0;
    }
    std::int64_t num_requests_sent = 0;      // in the measured window
    std::int64_t num_requests_finished = 0;  // of those, finished before the run ended
    std::int64_t num_requests_rejected = 0;  // longer than max_model_len or than the KV cache
    // Given up by their client (workload `request_timeout`): in no latency, token or throughput figure, as
    // vllm bench serve leaves a failed request out of calculate_metrics.
    std::int64_t num_requests_timed_out = 0;
    double duration_s = 0;                   // measured window: warm-up end → last finish
    // Sending window: warm-up end → the last measured send; and how many measured requests were queued then: sent
    // (reached the engine), never scheduled, neither rejected nor given up, the last one itself left out (a server
    // that keeps up has a few waiting; one that falls behind by a fraction f of the offered rate about f of all).
    double send_window_s = 0;
    std::int64_t num_queued_at_last_send = 0;
    // First measured send → last measured send: the span over which sent_rps() is the clients' send rate (the
    // window above opens at the warm-up's end instead, before the first send).
    double send_span_s = 0;
    // Mean TTFT of the finished requests sent in each third of the send span (LatencyTrend), for the status's
    // latency-growth test; count 0 where a third has none.
    LatencyTrend::Thirds ttft_by_send_third;
    double requested_rps = 0;                // sent / window (drain included; the outputs' sent_rps is sent_rps())
    double throughput_rps = 0;               // finished / window
    double output_tokens_per_s = 0;
    double input_tokens_per_s = 0;
    double prefix_cache_hit_rate = 0;        // GPU (local) hits / queries
    double external_hit_rate = 0;            // CPU-offload hits / external queries
    double total_hit_rate = 0;               // (local + external hits) / queries
    std::int64_t prefix_cache_queries = 0;
    std::int64_t prefix_cache_hits = 0;
    double cached_prompt_fraction = 0;       // Σ prompt_tokens_cached / Σ prompt tokens, per request once
    Distribution ttft_ms;
    Distribution itl_ms;
    Distribution e2e_ms;
    Distribution tpot_ms;
    Distribution queue_ms;                   // first scheduled − send
    bool exact_percentiles = false;          // false: percentiles from QuantileSketch, within 0.1 % (percentiles.h)
    std::int64_t preemptions = 0;
    std::int64_t queue_peak = 0;             // waiting requests, max over steps
    double kv_usage_mean = 0;                // vllm:kv_cache_usage_perc averaged over steps
    double kv_usage_max = 0;
    std::int64_t num_steps = 0;
    double mean_batch_tokens = 0;
    double mean_prompt_tokens = 0;
    double mean_output_tokens = 0;
    RejectionStats rejections;
    RunningMoments itl_moments;           // the same samples as itl_ms; kept only with request records (count 0 else)
    std::vector<RequestRecord> requests;  // measured finished requests, in finish order
    // With keep_request_itls (--save-detailed): each request's gaps between consecutive streamed chunks (ms), in
    // order, parallel to `requests` (vllm bench serve's per-request `itls`); empty otherwise.
    std::vector<std::vector<double>> request_itls_ms;
};

class MetricsCollector {
public:
    // `exact_percentiles`: keep every sample and rank them at the end (memory grows with the run); otherwise
    // stream them into sketches (fixed memory, percentiles within QuantileSketch::kRelativeErrorBound).
    // `keep_request_records`: one RequestRecord per measured finished request (memory grows with the run); off,
    // nothing of a request is kept once it finishes; it also turns on the pooled-ITL running moments (itl_moments).
    // `keep_request_itls` (with records): each record's own token gaps too (Summary::request_itls_ms), from the
    // FinishedRequest's token_gaps, which the replicas then hold per request (ReplicaConfig::hold_token_gaps).
    explicit MetricsCollector(core::SimTime warmup_end, bool exact_percentiles = false,
                              bool keep_request_records = false, bool keep_request_itls = false)
        : warmup_end_(warmup_end), exact_percentiles_(exact_percentiles), keep_records_(keep_request_records),
          keep_itls_(keep_request_records && keep_request_itls), ttft_trend_(warmup_end.s()) {}

    [[nodiscard]] bool measured(core::SimTime arrival) const { return arrival >= warmup_end_; }

    [[nodiscard]] core::SimTime warmup_end() const { return warmup_end_; }

    void on_sent(core::SimTime arrival);

    void on_rejected(core::SimTime arrival, RejectReason reason, std::int64_t prompt_tokens,
                     std::int64_t max_output_tokens);

    // The client gave up on a request sent at `arrival` (workload `request_timeout`). Nothing of it enters a figure
    // but this count: the replica holds a request's token gaps back until it finishes (Replica, ReplicaConfig::
    // hold_token_gaps) and drops them here, since the client discards the whole request.
    // `scheduled`: whether the engine had scheduled it (else it leaves the queue here).
    void on_timed_out(core::SimTime arrival, bool scheduled) {
        if (measured(arrival)) {
            ++timed_out_;
            unscheduled_ -= scheduled ? 0 : 1;
        }
    }

    // The engine scheduled a request sent at `arrival` for the first time (vLLM's SCHEDULED event).
    void on_first_scheduled(core::SimTime arrival) {
        if (measured(arrival)) {
            --unscheduled_;
        }
    }

    // One streamed token's gap.
    void on_token_gap(core::SimTime arrival, core::Duration gap) {
        if (measured(arrival)) {
            on_token_gaps(gap, 1);
        }
    }

    // `count` streamed tokens of measured requests, all with gap `gap`: the same as `count` on_token_gap calls in a
    // row for measured arrivals (the caller tests measured()). The replica sends a step's gaps as runs of equal
    // values: every request that also sampled in the step before sees the same gap, so one call stands for ~20
    // tokens and the gap's conversion to ms is done once.
    void on_token_gaps(core::Duration gap, std::int64_t count) {
        if (count <= 0) {
            return;
        }
        const double ms = gap.ms();
        if (exact_percentiles_) {
            append_samples(itl_ms_, ms, count);
        } else {
            itl_sketch_.add(ms, count);
        }
        if (keep_records_) {
            // Only the vllm-bench result reads the running moments (its mean and std of the pooled ITLs), and it
            // is written only by runs that keep request records. Skipped otherwise: Welford's update divides by
            // the count once per token, a dependency chain that was ~3 % of a long agentic run.
            for (std::int64_t i = 0; i < count; ++i) {
                itl_moments_.add(ms);
            }
        }
    }

    struct FinishedRequest {
        core::SimTime arrival;
        core::SimTime first_scheduled;
        core::SimTime first_token;
        core::SimTime finish;
        std::int64_t prompt_tokens = 0;
        std::int64_t output_tokens = 0;
        std::int64_t cached_prompt_tokens = 0;
        core::Duration max_token_gap{};  // longest gap between consecutive output tokens
        int num_preemptions = 0;
        int replica = 0;  // which replica served it (0-based)
        int turn = 0;     // 1-based turn within a dialogue, 0 if none
        // Its gaps between consecutive tokens, in order, when the replica held them (keep_request_itls); else null.
        const std::vector<core::Duration>* token_gaps = nullptr;
    };

    void on_finished(const FinishedRequest& r);

    // One sample per engine step (any replica).
    void on_step(core::SimTime now, std::int64_t num_tokens, std::int64_t num_waiting, double kv_usage);

    // Counters summed over replicas, read at the warm-up end (once) and at the end of the run.
    void snapshot_warmup_counters(const PrefixCounters& c) { at_warmup_ = c; }

    [[nodiscard]] Summary summarize(const PrefixCounters& at_end, std::int64_t preemptions, core::SimTime end) const;

private:
    core::SimTime warmup_end_;
    PrefixCounters at_warmup_;
    std::int64_t sent_ = 0;
    std::int64_t rejected_ = 0;
    std::int64_t timed_out_ = 0;
    RejectionStats rejections_;
    RunningMoments itl_moments_;
    std::vector<RequestRecord> records_;
    std::vector<std::vector<double>> record_itls_ms_;  // parallel to records_ with keep_itls_
    core::SimTime last_finish_;
    core::SimTime first_send_;
    core::SimTime last_send_;
    std::int64_t unscheduled_ = 0;  // sent, never scheduled, neither rejected nor timed out
    std::int64_t queued_at_last_send_ = 0;
    bool exact_percentiles_;
    bool keep_records_;
    bool keep_itls_;
    LatencyTrend ttft_trend_;
    // Exact percentiles: every sample. summarize() sorts them in place (the same samples, in another order) instead
    // of sorting copies, so the summary does not double the run's peak memory.
    mutable std::vector<double> ttft_ms_, e2e_ms_, tpot_ms_, queue_ms_;
    mutable std::vector<SampleRun> itl_ms_;  // one sample per streamed token, in runs of equal gaps (percentiles.h)
    // Otherwise: one sketch per latency.
    QuantileSketch ttft_sketch_, e2e_sketch_, tpot_sketch_, queue_sketch_, itl_sketch_;
    std::int64_t output_tokens_ = 0;
    std::int64_t prompt_tokens_ = 0;
    std::int64_t cached_prompt_tokens_ = 0;
    std::int64_t finished_ = 0;
    std::int64_t queue_peak_ = 0;
    double kv_usage_sum_ = 0;
    double kv_usage_max_ = 0;
    std::int64_t steps_ = 0;
    std::int64_t step_tokens_ = 0;
};

}  // namespace servesim::metrics
