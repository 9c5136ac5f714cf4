// MetricsCollector: per-request timestamps and vLLM-compatible counters, turned into a Summary at the end of a run
// (vllm-v1-behaviour.md §7). Definitions, as vllm bench serve computes them (vllm/benchmarks/serve.py
// calculate_metrics): TTFT = first token − send; ITL = gaps between consecutive streamed chunks, pooled over
// requests (one chunk per request per step: stream_interval 1); E2E = last token − send; TPOT per request =
// (E2E − TTFT)/(output − 1). Prefix-cache hit rate = Δ vllm:prefix_cache_hits / Δ vllm:prefix_cache_queries over
// the measured window (tokens; preempted lookups excluded, §3.5). Requests sent before the warm-up ends are
// served but not measured, and the counters are read from the end of the warm-up.
// Storage: with exact percentiles every latency sample is kept until the end-of-run summary (memory grows with the
// run); by default each latency goes into a QuantileSketch (percentiles.h: fixed memory, percentiles within 0.1 %,
// count/mean/min/max exact), so nothing of a request is kept after it finishes. Scenario key
// `metrics.exact_percentiles`.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/percentiles.h"

namespace servesim::metrics {

struct PrefixCounters {
    std::int64_t queries = 0;
    std::int64_t hits = 0;
    std::int64_t external_queries = 0;
    std::int64_t external_hits = 0;
};

struct Summary {
    std::int64_t num_requests_sent = 0;      // in the measured window
    std::int64_t num_requests_finished = 0;  // of those, finished before the run ended
    std::int64_t num_requests_rejected = 0;  // longer than max_model_len or than the KV cache
    double duration_s = 0;                   // measured window: warm-up end → last finish
    // Sending window: warm-up end → the last measured send; and how many measured requests had finished by then
    // (a server that keeps up has finished all but those in flight; one that falls behind has not).
    double send_window_s = 0;
    std::int64_t num_finished_at_last_send = 0;
    double requested_rps = 0;                // sent / window
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
};

class MetricsCollector {
public:
    // `exact_percentiles`: keep every sample and rank them at the end (memory grows with the run); otherwise
    // stream them into sketches (fixed memory, percentiles within QuantileSketch::kRelativeErrorBound).
    explicit MetricsCollector(core::SimTime warmup_end, bool exact_percentiles = false)
        : warmup_end_(warmup_end), exact_percentiles_(exact_percentiles) {}

    [[nodiscard]] bool measured(core::SimTime arrival) const { return arrival >= warmup_end_; }

    [[nodiscard]] core::SimTime warmup_end() const { return warmup_end_; }

    void on_sent(core::SimTime arrival);

    void on_rejected(core::SimTime arrival);

    // One streamed token's gap (inline: called once per generated token).
    void on_token_gap(core::SimTime arrival, core::Duration gap) {
        if (!measured(arrival)) {
            return;
        }
        if (exact_percentiles_) {
            append_sample(itl_ms_, gap.ms());
        } else {
            itl_sketch_.add(gap.ms());
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
    core::SimTime last_finish_;
    core::SimTime last_send_;
    std::int64_t finished_at_last_send_ = 0;
    bool exact_percentiles_;
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
