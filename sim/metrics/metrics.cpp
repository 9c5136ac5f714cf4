// MetricsCollector; definitions in metrics.h.
#include "sim/metrics/metrics.h"

#include <algorithm>

namespace servesim::metrics {

namespace {

void record(bool exact, std::vector<double>& samples, QuantileSketch& sketch, double value) {
    if (exact) {
        samples.push_back(value);
    } else {
        sketch.add(value);
    }
}

}  // namespace

void MetricsCollector::on_sent(core::SimTime arrival) {
    if (measured(arrival)) {
        first_send_ = sent_ == 0 ? arrival : std::min(first_send_, arrival);
        ++sent_;
        ++unscheduled_;
        if (arrival >= last_send_) {
            last_send_ = arrival;
            queued_at_last_send_ = unscheduled_ - 1;  // the request that has just arrived is not a backlog
        }
    }
}

void MetricsCollector::on_rejected(core::SimTime arrival, RejectReason reason, std::int64_t prompt_tokens,
                                   std::int64_t max_output_tokens) {
    if (!measured(arrival)) {
        return;
    }
    --unscheduled_;  // rejected before any step scheduled it
    ++rejected_;
    if (reason == RejectReason::kNeverFitsKvCache) {
        ++rejections_.never_fits_kv_cache;
        return;
    }
    ++rejections_.longer_than_max_model_len;
    if (prompt_tokens + max_output_tokens > rejections_.largest_prompt_tokens + rejections_.largest_output_tokens) {
        rejections_.largest_prompt_tokens = prompt_tokens;
        rejections_.largest_output_tokens = max_output_tokens;
    }
}

void MetricsCollector::on_finished(const FinishedRequest& r) {
    if (!measured(r.arrival)) {
        return;
    }
    ++finished_;
    last_finish_ = std::max(last_finish_, r.finish);
    const double ttft_ms = (r.first_token - r.arrival).ms();
    record(exact_percentiles_, ttft_ms_, ttft_sketch_, ttft_ms);
    ttft_trend_.add(r.arrival.s(), ttft_ms);
    record(exact_percentiles_, e2e_ms_, e2e_sketch_, (r.finish - r.arrival).ms());
    record(exact_percentiles_, queue_ms_, queue_sketch_, (r.first_scheduled - r.arrival).ms());
    if (r.output_tokens > 1) {
        record(exact_percentiles_, tpot_ms_, tpot_sketch_,
               (r.finish - r.first_token).ms() / static_cast<double>(r.output_tokens - 1));
    }
    output_tokens_ += r.output_tokens;
    prompt_tokens_ += r.prompt_tokens;
    cached_prompt_tokens_ += r.cached_prompt_tokens;
    if (!keep_records_) {
        return;
    }
    RequestRecord rec;
    rec.arrival_s = r.arrival.s();
    rec.queue_ms = (r.first_scheduled - r.arrival).ms();
    rec.ttft_ms = (r.first_token - r.arrival).ms();
    rec.e2e_ms = (r.finish - r.arrival).ms();
    rec.itl_max_ms = r.max_token_gap.ms();
    rec.prompt_tokens = r.prompt_tokens;
    rec.cached_prompt_tokens = r.cached_prompt_tokens;
    rec.output_tokens = r.output_tokens;
    rec.num_preemptions = r.num_preemptions;
    rec.replica = r.replica;
    rec.turn = r.turn;
    records_.push_back(rec);
    if (keep_itls_) {
        std::vector<double> gaps_ms;
        if (r.token_gaps != nullptr) {
            gaps_ms.reserve(r.token_gaps->size());
            for (const core::Duration g : *r.token_gaps) {
                gaps_ms.push_back(g.ms());
            }
        }
        record_itls_ms_.push_back(std::move(gaps_ms));
    }
}

void MetricsCollector::on_step(core::SimTime now, std::int64_t num_tokens, std::int64_t num_waiting, double kv_usage) {
    if (now < warmup_end_) {
        return;
    }
    ++steps_;
    step_tokens_ += num_tokens;
    queue_peak_ = std::max(queue_peak_, num_waiting);
    kv_usage_sum_ += kv_usage;
    kv_usage_max_ = std::max(kv_usage_max_, kv_usage);
}

Summary MetricsCollector::summarize(const PrefixCounters& at_end, std::int64_t preemptions, core::SimTime end) const {
    Summary s;
    s.num_requests_sent = sent_;
    s.num_requests_finished = finished_;
    s.num_requests_rejected = rejected_;
    s.num_requests_timed_out = timed_out_;
    const core::SimTime start = warmup_end_;  // the measured window opens when the warm-up ends (t = 0 without)
    const core::SimTime stop = std::max(end, last_finish_);
    s.duration_s = std::max(0.0, (stop - start).s());
    s.send_window_s = sent_ > 0 ? std::max(0.0, (last_send_ - start).s()) : 0.0;
    s.num_queued_at_last_send = queued_at_last_send_;
    s.send_span_s = sent_ > 1 ? std::max(0.0, (last_send_ - first_send_).s()) : 0.0;
    s.ttft_by_send_third = ttft_trend_.thirds(first_send_.s(), last_send_.s());
    if (s.duration_s > 0) {
        s.requested_rps = static_cast<double>(sent_) / s.duration_s;
        s.throughput_rps = static_cast<double>(finished_) / s.duration_s;
        s.output_tokens_per_s = static_cast<double>(output_tokens_) / s.duration_s;
        s.input_tokens_per_s = static_cast<double>(prompt_tokens_) / s.duration_s;
    }
    s.prefix_cache_queries = at_end.queries - at_warmup_.queries;
    s.prefix_cache_hits = at_end.hits - at_warmup_.hits;
    if (s.prefix_cache_queries > 0) {
        s.prefix_cache_hit_rate = static_cast<double>(s.prefix_cache_hits) / static_cast<double>(s.prefix_cache_queries);
        const std::int64_t ext_hits = at_end.external_hits - at_warmup_.external_hits;
        s.total_hit_rate =
            static_cast<double>(s.prefix_cache_hits + ext_hits) / static_cast<double>(s.prefix_cache_queries);
        const std::int64_t ext_q = at_end.external_queries - at_warmup_.external_queries;
        if (ext_q > 0) {
            s.external_hit_rate = static_cast<double>(ext_hits) / static_cast<double>(ext_q);
        }
    }
    if (prompt_tokens_ > 0) {
        s.cached_prompt_fraction = static_cast<double>(cached_prompt_tokens_) / static_cast<double>(prompt_tokens_);
    }
    s.exact_percentiles = exact_percentiles_;
    if (exact_percentiles_) {
        s.ttft_ms = summarize_values_in_place(ttft_ms_);
        s.itl_ms = summarize_runs_in_place(itl_ms_);
        s.e2e_ms = summarize_values_in_place(e2e_ms_);
        s.tpot_ms = summarize_values_in_place(tpot_ms_);
        s.queue_ms = summarize_values_in_place(queue_ms_);
    } else {
        s.ttft_ms = ttft_sketch_.summarize();
        s.itl_ms = itl_sketch_.summarize();
        s.e2e_ms = e2e_sketch_.summarize();
        s.tpot_ms = tpot_sketch_.summarize();
        s.queue_ms = queue_sketch_.summarize();
    }
    s.preemptions = preemptions;
    s.queue_peak = queue_peak_;
    s.num_steps = steps_;
    if (steps_ > 0) {
        s.kv_usage_mean = kv_usage_sum_ / static_cast<double>(steps_);
        s.mean_batch_tokens = static_cast<double>(step_tokens_) / static_cast<double>(steps_);
    }
    s.kv_usage_max = kv_usage_max_;
    s.rejections = rejections_;
    s.itl_moments = itl_moments_;
    s.requests = records_;
    s.request_itls_ms = record_itls_ms_;
    if (finished_ > 0) {
        s.mean_prompt_tokens = static_cast<double>(prompt_tokens_) / static_cast<double>(finished_);
        s.mean_output_tokens = static_cast<double>(output_tokens_) / static_cast<double>(finished_);
    }
    return s;
}

}  // namespace servesim::metrics
