// Result codec; see result_codec.h. One `fields` function per struct lists its members once, for both directions:
// the Writer appends each member's bytes, the Reader overwrites each member from them, so the two cannot disagree
// on the order.
#include "tools/app/result_codec.h"

#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"

namespace servesim::app {

namespace {

constexpr std::uint32_t kCodecVersion = 8;  // 2: Summary::num_requests_timed_out; 3: ExperimentConfig::request_path;
// 4: Summary::send_span_s and ttft_by_send_third, ExperimentResult::status_reason;
// 5: speculative decoding (settings, StepCost::spec_draft_ms, stats); 6: HybridStateStats::num_state_copies;
// 7: Distribution::p95, Summary::request_itls_ms, ExperimentConfig::keep_request_itls; 8: StepCost::jit_ms,
// EngineSettings::triton_jit_compile_ms

class Writer {
public:
    template <typename... T>
    void operator()(const T&... v) {
        (item(v), ...);
    }
    [[nodiscard]] std::string take() && { return std::move(out_); }

private:
    template <typename T>
    void item(const T& v) {
        if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
            const char* p = reinterpret_cast<const char*>(&v);
            out_.append(p, sizeof(T));
        } else if constexpr (std::is_same_v<T, std::string>) {
            item(static_cast<std::uint64_t>(v.size()));
            out_.append(v);
        } else {
            fields(*this, v);
        }
    }
    template <typename T>
    void item(const std::optional<T>& v) {
        item(v.has_value());
        if (v) {
            item(*v);
        }
    }
    template <typename T>
    void item(const std::vector<T>& v) {
        item(static_cast<std::uint64_t>(v.size()));
        for (const auto& x : v) {
            item(x);
        }
    }
    template <typename A, typename B>
    void item(const std::pair<A, B>& v) {
        item(v.first);
        item(v.second);
    }
    void item(const YAML::Node& v) { item(v ? YAML::Dump(v) : std::string("~absent")); }
    // A topology only ever enters the config fingerprint (each rank reads its own): every node and link.
    void item(const std::shared_ptr<const cluster::Topology>& t) {
        item(t != nullptr);
        if (!t) {
            return;
        }
        item(static_cast<std::uint64_t>(t->num_nodes()));
        for (std::size_t v = 0; v < t->num_nodes(); ++v) {
            item(t->node(v).name);
            item(t->node(v).kind);
            item(t->node(v).memory_bytes);
            item(t->gpu_model(v));
        }
        item(static_cast<std::uint64_t>(t->num_links()));
        for (std::size_t e = 0; e < t->num_links(); ++e) {
            const cluster::TopologyLink& l = t->link(e);
            item(l.bandwidth_bytes_per_s);
            item(l.latency_s);
            item(static_cast<std::uint64_t>(l.a));
            item(static_cast<std::uint64_t>(l.b));
        }
    }

    std::string out_;
};

class Reader {
public:
    explicit Reader(std::string_view in) : in_(in) {}
    template <typename... T>
    void operator()(T&... v) {
        (item(v), ...);
    }
    [[nodiscard]] bool at_end() const { return pos_ == in_.size(); }

private:
    void need(std::size_t n) const {
        SERVESIM_CHECK(in_.size() - pos_ >= n, "result bytes end early: {} more needed at offset {} of {}", n, pos_,
                       in_.size());
    }
    template <typename T>
    void item(T& v) {
        if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
            need(sizeof(T));
            std::memcpy(&v, in_.data() + pos_, sizeof(T));
            pos_ += sizeof(T);
        } else if constexpr (std::is_same_v<T, std::string>) {
            std::uint64_t n = 0;
            item(n);
            need(n);
            v.assign(in_.data() + pos_, n);
            pos_ += n;
        } else {
            fields(*this, v);
        }
    }
    template <typename T>
    void item(std::optional<T>& v) {
        bool has = false;
        item(has);
        v.reset();
        if (has) {
            v.emplace();
            item(*v);
        }
    }
    template <typename T>
    void item(std::vector<T>& v) {
        std::uint64_t n = 0;
        item(n);
        SERVESIM_CHECK(n <= in_.size() - pos_, "result bytes: a list of {} items in {} bytes", n, in_.size() - pos_);
        v.assign(n, T{});
        for (auto& x : v) {
            item(x);
        }
    }

    std::string_view in_;
    std::size_t pos_ = 0;
};

template <typename IO, typename T>
void fields(IO& io, T& d)
    requires std::is_same_v<std::remove_const_t<T>, metrics::Distribution>
{
    io(d.p50, d.p90, d.p95, d.p99, d.mean, d.max, d.count, d.min);
}

template <typename IO, typename T>
void fields(IO& io, T& r)
    requires std::is_same_v<std::remove_const_t<T>, metrics::RequestRecord>
{
    io(r.arrival_s, r.queue_ms, r.ttft_ms, r.e2e_ms, r.itl_max_ms, r.prompt_tokens, r.cached_prompt_tokens,
       r.output_tokens, r.num_preemptions, r.replica, r.turn);
}

template <typename IO, typename T>
void fields(IO& io, T& r)
    requires std::is_same_v<std::remove_const_t<T>, metrics::RejectionStats>
{
    io(r.longer_than_max_model_len, r.never_fits_kv_cache, r.largest_prompt_tokens, r.largest_output_tokens);
}

template <typename IO, typename T>
void fields(IO& io, T& m)
    requires std::is_same_v<std::remove_const_t<T>, metrics::RunningMoments>
{
    io(m.count, m.mean, m.m2);
}

template <typename IO, typename T>
void fields(IO& io, T& t)
    requires std::is_same_v<std::remove_const_t<T>, metrics::LatencyTrend::Thirds>
{
    io(t.mean_ttft_ms[0], t.mean_ttft_ms[1], t.mean_ttft_ms[2], t.count[0], t.count[1], t.count[2]);
}

template <typename IO, typename T>
void fields(IO& io, T& s)
    requires std::is_same_v<std::remove_const_t<T>, metrics::Summary>
{
    io(s.num_requests_sent, s.num_requests_finished, s.num_requests_rejected, s.num_requests_timed_out, s.duration_s,
       s.send_window_s, s.num_queued_at_last_send, s.send_span_s, s.ttft_by_send_third, s.requested_rps,
       s.throughput_rps, s.output_tokens_per_s, s.input_tokens_per_s, s.prefix_cache_hit_rate, s.external_hit_rate,
       s.total_hit_rate, s.prefix_cache_queries, s.prefix_cache_hits, s.cached_prompt_fraction, s.ttft_ms, s.itl_ms,
       s.e2e_ms, s.tpot_ms, s.queue_ms, s.exact_percentiles, s.preemptions, s.queue_peak, s.kv_usage_mean,
       s.kv_usage_max, s.num_steps, s.mean_batch_tokens, s.mean_prompt_tokens, s.mean_output_tokens, s.rejections,
       s.itl_moments, s.requests, s.request_itls_ms);
}

template <typename IO, typename T>
void fields(IO& io, T& t)
    requires std::is_same_v<std::remove_const_t<T>, cluster::TimeSample>
{
    io(t.t_s, t.num_waiting, t.num_running, t.kv_usage, t.prefix_cache_queries, t.prefix_cache_hits);
}

template <typename IO, typename T>
void fields(IO& io, T& c)
    requires std::is_same_v<std::remove_const_t<T>, engine::StepCost>
{
    io(c.gemm_ms, c.lm_head_ms, c.attn_prefill_ms, c.attn_decode_ms, c.gdn_ms, c.snapshot_ms, c.overhead_ms,
       c.comm_ms, c.host_ms, c.spec_draft_ms, c.jit_ms);
}

template <typename IO, typename T>
void fields(IO& io, T& s)
    requires std::is_same_v<std::remove_const_t<T>, engine::SpeculativeStats>
{
    io(s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens, s.num_accepted_tokens_per_pos);
}

template <typename IO, typename T>
void fields(IO& io, T& s)
    requires std::is_same_v<std::remove_const_t<T>, cluster::SimulationResult>
{
    io(s.summary, s.timeseries, s.total_cost, s.num_events, s.num_unfinished, s.hit_max_time, s.stopped_overloaded,
       s.hybrid_state, s.disaggregation, s.speculative);
}

template <typename IO, typename T>
void fields(IO& io, T& d)
    requires std::is_same_v<std::remove_const_t<T>, cluster::DisaggregationStats>
{
    io(d.num_prefill_replicas, d.num_decode_replicas, d.num_transfers, d.transfer_bytes, d.transfer_ms_mean,
       d.transfer_ms_p50, d.transfer_ms_p90, d.transfer_ms_p99, d.transfer_ms_max, d.decode_local_hit_tokens,
       d.prefill_busy_fraction, d.decode_busy_fraction, d.prefill_prefix_queries, d.prefill_prefix_hits,
       d.prefill_ttft_ms_mean, d.prefill_ttft_ms_p99, d.peak_held_requests);
}

template <typename IO, typename T>
void fields(IO& io, T& p)
    requires std::is_same_v<std::remove_const_t<T>, cluster::PoolSettings>
{
    io(p.replicas, p.gpu, p.tensor_parallel_size, p.first_gpu, p.line);
}

template <typename IO, typename T>
void fields(IO& io, T& d)
    requires std::is_same_v<std::remove_const_t<T>, cluster::DisaggregationSettings>
{
    io(d.prefill, d.decode, d.kv_connector, d.proxy, d.file, d.key, d.line);
}

template <typename IO, typename T>
void fields(IO& io, T& h)
    requires std::is_same_v<std::remove_const_t<T>, cache::HybridStateStats>
{
    io(h.num_lookups, h.attention_hit_tokens, h.state_hit_tokens, h.num_snapshots_taken, h.num_evictions,
       h.num_admission_waits, h.peak_snapshots, h.num_orphans_evicted, h.num_state_copies);
}

template <typename IO, typename T>
void fields(IO& io, T& o)
    requires std::is_same_v<std::remove_const_t<T>, cache::OrderOnlyResult>
{
    io(o.block_size_tokens, o.capacity_tokens, o.num_cache_blocks, o.num_requests, o.prefix_cache_queries,
       o.prefix_cache_hits, o.num_evictions, o.num_truncated_requests, o.num_distinct_blocks);
}

// Everything of one run but config, plan and replicate_runs (see result_codec.h).
template <typename IO, typename T>
void fields(IO& io, T& r)
    requires std::is_same_v<std::remove_const_t<T>, ExperimentResult>
{
    io(r.model_name, r.gpu_name, r.cost_model, r.cost_model_source, r.profile_mismatch, r.workload, r.offered_rps,
       r.offered_all_at_once, r.sim, r.order_only, r.status, r.status_reason, r.warnings, r.num_requests_good, r.request_goodput_rps);
}

template <typename IO, typename T>
void fields(IO& io, T& g)
    requires std::is_same_v<std::remove_const_t<T>, GoodputConfig>
{
    io(g.ttft_ms, g.tpot_ms, g.e2el_ms);
}

template <typename IO, typename T>
void fields(IO& io, T& e)
    requires std::is_same_v<std::remove_const_t<T>, EngineSettings>
{
    io(e.block_size, e.max_num_batched_tokens, e.max_num_seqs, e.max_model_len, e.gpu_memory_utilization,
       e.kv_cache_dtype_fp8, e.enable_prefix_caching, e.mamba_cache_mode, e.prefix_cache_retention_interval,
       e.kv_cache_memory_bytes, e.enable_chunked_prefill, e.long_prefill_token_threshold,
       e.scheduler_reserve_full_isl, e.async_scheduling, e.tensor_parallel_size, e.vllm_version,
       e.kv_offloading_size_gib, e.kv_offloading_load_us_per_token, e.offload_prompt_only, e.skip_mm_profiling,
       e.prefix_match_unit, e.pipeline_parallel_size, e.enable_expert_parallel, e.expert_load_imbalance,
       e.quantization, e.dtype, e.hybrid_cache_policy, e.hybrid_state_memory_ratio,
       e.hybrid_checkpoint_interval_tokens, e.cudagraph_capture_sizes, e.max_cudagraph_capture_size,
       e.enforce_eager, e.host_work, e.host_step_us, e.host_per_request_us, e.host_exposed_us, e.triton_jit_compile_ms,
       e.all2all_backend,
       e.disable_custom_all_reduce, e.speculative_config, e.speculative_acceptance,
       e.speculative_mean_acceptance_length, e.speculative_ngram_ns_per_context_token);
}

template <typename IO, typename T>
void fields(IO& io, T& c)
    requires std::is_same_v<std::remove_const_t<T>, ExperimentConfig>
{
    io(c.file, c.name, c.columns, c.seed, c.model, c.gpu, c.cost_model, c.engine, c.replicas, c.router, c.workload,
       c.warmup_s, c.max_time_s, c.max_time_given, c.goodput, c.replicates, c.allow_profile_mismatch,
       c.check_invariants, c.exact_percentiles, c.keep_request_records, c.keep_request_itls, c.stop_when_waiting_exceeds, c.order_only,
       c.capacity_tokens, c.topology, c.kv_connector, c.router_options, c.disaggregation, c.request_path);
}

template <typename IO, typename T>
void fields(IO& io, T& p)
    requires std::is_same_v<std::remove_const_t<T>, frontend::RequestPathConfig>
{
    io(p.client_ms, p.handoff_ms, p.request_cpu_ms, p.tokenize_us_per_token, p.output_message_cpu_ms, p.chunk_cpu_us);
}

template <typename IO, typename T>
void fields(IO& io, T& k)
    requires std::is_same_v<std::remove_const_t<T>, cluster::KvConnectorSettings>
{
    io(k.kind, k.host_size_gib, k.host_size_tokens, k.remote_size_gib, k.remote_size_tokens, k.remote, k.file, k.key,
       k.line);
}

template <typename IO, typename T>
void fields(IO& io, T& r)
    requires std::is_same_v<std::remove_const_t<T>, cluster::RouterOptions>
{
    io(r.prefix_weight, r.queue_weight, r.kv_utilization_weight, r.overlap_weight, r.cache_signal_delay_s,
       r.replica_capacity_blocks, r.replica_capacities_blocks, r.precise_prefix_scorer, r.session_per_conversation);
}

}  // namespace

std::string encode_result(const ExperimentResult& r) {
    Writer w;
    w(kCodecVersion, r);
    return std::move(w).take();
}

void decode_result(std::string_view bytes, ExperimentResult& r) {
    Reader in(bytes);
    std::uint32_t version = 0;
    in(version);
    SERVESIM_CHECK(version == kCodecVersion, "result bytes of codec version {}, this build reads {}", version,
                   kCodecVersion);
    in(r);
    SERVESIM_CHECK(in.at_end(), "result bytes: {} bytes after the result", bytes.size());
}

std::uint32_t result_codec_version() { return kCodecVersion; }

std::uint64_t config_fingerprint(const ExperimentConfig& config) {
    Writer w;
    w(config);
    const std::string bytes = std::move(w).take();
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bits
    for (const char ch : bytes) {
        h ^= static_cast<unsigned char>(ch);
        h *= 1099511628211ULL;
    }
    return h;
}

}  // namespace servesim::app
