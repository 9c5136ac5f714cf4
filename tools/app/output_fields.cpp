// The flat columns of a result that every output format prints (identity, configuration, figures; a replicated
// point's mean, min, max and std per measured figure); see output_fields.h.
#include "tools/app/output_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "common/units.h"
#include "tools/app/validation_band.h"

namespace servesim::app {

// Fixed-point text for a number, never an exponent. `decimals` < 0: up to 6 decimals, trailing zeros dropped (CSV).
std::string number_text(double v, int decimals) {
    if (decimals >= 0) {
        return fmt::format("{:.{}f}", v, decimals);
    }
    std::string t = fmt::format("{:.6f}", v);
    while (!t.empty() && t.back() == '0') {
        t.pop_back();
    }
    if (!t.empty() && t.back() == '.') {
        t.pop_back();
    }
    return t == "-0" ? "0" : t;
}

std::string csv_escape(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) {
        return s;
    }
    std::string out = "\"";
    for (char ch : s) {
        out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    }
    return out + "\"";
}

bool is_missing(const Cell& c) { return std::holds_alternative<std::monostate>(c); }


// Decimals a table prints for a column, from what its name says it holds (docs/OUTPUTS.md "formatting").
int table_decimals(const std::string& name) {
    auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
    if (has("_ms")) {
        return 3;
    }
    if (has("_rate") || has("fraction") || has("kv_usage")) {
        return 4;
    }
    if (has("_rps") || has("goodput") || name.rfind("duration", 0) == 0) {
        return 3;
    }
    if (has("_per_s") || has("tokens")) {
        return 1;
    }
    if (has("_gib")) {
        return 2;
    }
    return 4;
}

std::string cell_text(const Cell& c, int decimals, const char* missing) {
    if (is_missing(c)) {
        return missing;
    }
    if (const auto* s = std::get_if<std::string>(&c)) {
        return *s;
    }
    if (const auto* i = std::get_if<std::int64_t>(&c)) {
        return fmt::format("{}", *i);
    }
    if (const auto* b = std::get_if<bool>(&c)) {
        return *b ? "true" : "false";
    }
    return number_text(std::get<double>(c), decimals);
}

nlohmann::ordered_json cell_json(const Cell& c) {
    nlohmann::ordered_json j;
    std::visit(
        [&](const auto& v) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
                j = v;
            }
        },
        c);
    return j;  // null when missing
}


// A scenario value as written (a string from the sweep grid), typed: integer, number, true/false, else text. Keys
// whose values are names stay text whatever they look like (vllm_version "0.30" is not the number 0.3).
Cell typed_value(const std::string& key, const std::string& text) {
    static const std::array<std::string_view, 8> kTextKeys = {"experiment", "model", "gpu",   "cost_model",
                                                              "vllm_version", "router", "trace", "mamba_cache_mode"};
    if (std::find(kTextKeys.begin(), kTextKeys.end(), key) != kTextKeys.end()) {
        return text;
    }
    std::int64_t i = 0;
    const char* end = text.data() + text.size();
    if (!text.empty()) {
        const auto r = std::from_chars(text.data(), end, i);
        if (r.ec == std::errc() && r.ptr == end) {
            return i;
        }
        double d = 0;
        const auto rd = std::from_chars(text.data(), end, d);
        if (rd.ec == std::errc() && rd.ptr == end && std::isfinite(d)) {
            return d;
        }
    }
    if (text == "true" || text == "false") {
        return text == "true";
    }
    return text;
}

namespace {

Cell opt(bool present, double v) { return present ? Cell(v) : Cell(); }

// `with_p95`: ITL only, whose p95 is the tail figure streaming dashboards quote (issue 39); the other latencies keep
// p50/p90/p99 as vllm bench serve's defaults print them.
void add_dist(std::vector<Field>& out, const std::string& name, const metrics::Distribution& d,
              bool with_p95 = false) {
    const bool any = d.count > 0;
    out.push_back({name + "_p50", opt(any, d.p50), true});
    out.push_back({name + "_p90", opt(any, d.p90), true});
    if (with_p95) {
        out.push_back({name + "_p95", opt(any, d.p95), true});
    }
    out.push_back({name + "_p99", opt(any, d.p99), true});
    out.push_back({name + "_mean", opt(any, d.mean), true});
    out.push_back({name + "_max", opt(any, d.max), true});
}

// `mode: order_only`: identity columns, then trace, capacity_tokens and block_size unless swept, then the figures.
std::vector<Field> fields_order_only(const ExperimentResult& r) {
    std::vector<Field> out;  // no `name`: the sweep columns are the identity (tests/workloads/order_only_trace_test)
    for (const auto& [k, v] : r.config.columns) {
        out.push_back({k, typed_value(k, v)});
    }
    auto add_unless_column = [&](const std::string& name, Cell value) {
        if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.name == name; })) {
            out.push_back({name, std::move(value)});
        }
    };
    const cache::OrderOnlyResult& o = *r.order_only;
    add_unless_column("trace", std::filesystem::path(r.config.workload["trace"].as<std::string>()).filename().string());
    if (!r.config.model.empty()) {
        // Replayed through the model's engine (order_only_engine_config): the pool is the model's KV memory.
        const auto& p = r.plan;
        const auto& s = r.sim.summary;
        const bool queried = s.prefix_cache_queries > 0;
        add_unless_column("model", r.config.model);
        add_unless_column("hybrid_cache_policy", r.config.engine.hybrid_cache_policy);
        out.push_back({"kv_cache_memory_gib", static_cast<double>(p.kv_cache_memory_bytes) / kGiB});
        out.push_back({"effective_block_size", static_cast<std::int64_t>(p.block_size)});
        out.push_back({"kv_cache_tokens", p.kv_cache_tokens});
        out.push_back({"prefix_cache_hit_rate", opt(queried, o.prefix_cache_hit_rate())});
        out.push_back({"prefix_cache_queries", o.prefix_cache_queries});
        out.push_back({"prefix_cache_hits", o.prefix_cache_hits});
        out.push_back({"requests", o.num_requests});
        out.push_back({"requests_rejected", s.num_requests_rejected});
        if (p.hybrid_state && r.sim.hybrid_state) {
            const auto& h = *r.sim.hybrid_state;
            out.push_back({"state_slots", p.hybrid_state->num_state_slots});
            out.push_back({"state_pool_gib",
                           static_cast<double>(p.hybrid_state->num_state_slots * p.hybrid_state->state_bytes) / kGiB});
            out.push_back({"attention_hit_rate", opt(queried, static_cast<double>(h.attention_hit_tokens) /
                                                                  static_cast<double>(std::max<std::int64_t>(
                                                                      s.prefix_cache_queries, 1)))});
            out.push_back({"snapshots_taken", h.num_snapshots_taken});
            out.push_back({"state_copies", h.num_state_copies});
            out.push_back({"snapshots_evicted", h.num_evictions});
            out.push_back({"snapshots_evicted_orphan", h.num_orphans_evicted});
        }
        return out;
    }
    add_unless_column("capacity_tokens", o.capacity_tokens ? Cell(*o.capacity_tokens) : Cell(std::string("unlimited")));
    add_unless_column("block_size", static_cast<std::int64_t>(o.block_size_tokens));
    out.push_back({"prefix_cache_hit_rate", opt(o.prefix_cache_queries > 0, o.prefix_cache_hit_rate())});
    out.push_back({"prefix_cache_queries", o.prefix_cache_queries});
    out.push_back({"prefix_cache_hits", o.prefix_cache_hits});
    out.push_back({"requests", o.num_requests});
    out.push_back({"cache_blocks", o.num_cache_blocks});
    out.push_back({"distinct_blocks", o.num_distinct_blocks});
    out.push_back({"evictions", o.num_evictions});
    out.push_back({"truncated_requests", o.num_truncated_requests});
    return out;
}

// One run's fields, in a fixed order: what was asked (identity), what answered it, then the figures. A requested
// key and the value vLLM resolved from it never share a name (block_size / effective_block_size, gpu / gpu_name,
// model / model_name); a figure that was not measured is missing, never 0.
std::vector<Field> fields_one(const ExperimentResult& r) {
    if (r.order_only) {
        return fields_order_only(r);
    }
    std::vector<Field> out;
    out.push_back({"name", r.config.name});
    for (const auto& [k, v] : r.config.columns) {
        out.push_back({k, typed_value(k, v)});
    }
    auto add_unless_column = [&](const std::string& name, Cell value) {
        if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.name == name; })) {
            out.push_back({name, std::move(value)});
        }
    };
    const auto& s = r.sim.summary;
    const auto& p = r.plan;
    const auto& e = r.config.engine;
    add_unless_column("model", r.config.model);
    add_unless_column("gpu", r.config.gpu);
    add_unless_column("block_size", e.block_size ? Cell(static_cast<std::int64_t>(*e.block_size)) : Cell());
    add_unless_column("seed", static_cast<std::int64_t>(r.config.seed));
    out.push_back({"status", std::string(run_status_name(r.status))});
    out.push_back({"status_reason", r.status_reason.empty() ? Cell() : Cell(r.status_reason)});
    out.push_back({"model_name", r.model_name});
    out.push_back({"gpu_name", r.gpu_name});
    out.push_back({"tensor_parallel_size", static_cast<std::int64_t>(p.tensor_parallel_size)});
    out.push_back({"pipeline_parallel_size", static_cast<std::int64_t>(p.pipeline_parallel_size)});
    // Replicas behind the router (vLLM's --data-parallel-size with expert parallelism or the vllm_dp router) and the
    // GPUs they take; a disaggregated run has its pools' counts below instead.
    const bool pooled = r.config.disaggregation.has_value();
    const auto replica_gpus = static_cast<std::int64_t>(p.tensor_parallel_size) * p.pipeline_parallel_size;
    out.push_back({"data_parallel_size", pooled ? Cell() : Cell(static_cast<std::int64_t>(r.config.replicas))});
    out.push_back({"total_gpus", pooled ? Cell() : Cell(replica_gpus * r.config.replicas)});
    out.push_back({"vllm_version", r.config.engine.vllm_version});
    out.push_back({"cost_model", r.cost_model});
    // A disaggregated run has no request path yet (docs/REQUEST-PATH.md): it says so rather than the scenario's.
    out.push_back({"request_path", r.config.disaggregation ? std::string("none (not modelled in disaggregated runs)")
                                                           : frontend::describe(r.config.request_path)});
    out.push_back({"validation", describe_validation(cost_model_kind(r), r.gpu_name)});
    out.push_back({"profile_mismatch", r.profile_mismatch.empty() ? Cell() : Cell(r.profile_mismatch)});
    out.push_back({"workload", r.workload});
    out.push_back({"effective_block_size", static_cast<std::int64_t>(p.block_size)});
    out.push_back({"kv_cache_tokens", p.kv_cache_tokens});
    out.push_back({"num_gpu_blocks", p.num_gpu_blocks});
    out.push_back({"kv_cache_memory_gib", static_cast<double>(p.kv_cache_memory_bytes) / kGiB});
    out.push_back({"enable_prefix_caching", p.enable_prefix_caching});
    out.push_back({"mamba_cache_mode", std::string(cache::mamba_cache_mode_name(p.mamba_cache_mode))});
    out.push_back({"max_model_len", p.max_model_len});
    const bool window = s.duration_s > 0;
    const bool finished = s.num_requests_finished > 0;
    const bool queried = s.prefix_cache_queries > 0;
    out.push_back({"offered_rps", r.offered_rps ? Cell(*r.offered_rps) : Cell()});
    // Over the send span (first send → last send), not the window with the drain (docs/OUTPUTS.md).
    out.push_back({"sent_rps", opt(s.sent_rps() > 0, s.sent_rps()), true});
    out.push_back({"throughput_rps", opt(window, s.throughput_rps), true});
    if (r.config.goodput.any()) {
        out.push_back({"request_goodput", r.request_goodput_rps ? Cell(*r.request_goodput_rps) : Cell(), true});
        out.push_back({"requests_good", r.num_requests_good ? Cell(*r.num_requests_good) : Cell(), true});
    }
    out.push_back({"output_tokens_per_s", opt(window, s.output_tokens_per_s), true});
    out.push_back({"input_tokens_per_s", opt(window, s.input_tokens_per_s), true});
    out.push_back({"requests_sent", s.num_requests_sent, true});
    out.push_back({"requests_finished", s.num_requests_finished, true});
    out.push_back({"requests_rejected", s.num_requests_rejected, true});
    if (workload_times_out(r.config)) {  // only where a client can time out, so other runs' columns stay as they were
        out.push_back({"requests_timed_out", s.num_requests_timed_out, true});
    }
    out.push_back({"requests_unfinished", r.sim.num_unfinished, true});
    out.push_back({"duration_s", opt(window, s.duration_s), true});
    out.push_back({"prefix_cache_hit_rate", opt(queried, s.prefix_cache_hit_rate), true});
    out.push_back({"total_hit_rate", opt(queried, s.total_hit_rate), true});
    const bool connector = r.config.engine.kv_offloading_size_gib || r.config.kv_connector;
    out.push_back({"external_hit_rate", opt(queried && connector, s.external_hit_rate), true});
    out.push_back({"cached_prompt_fraction", opt(finished, s.cached_prompt_fraction), true});
    out.push_back({"prefix_cache_queries", s.prefix_cache_queries, true});
    out.push_back({"prefix_cache_hits", s.prefix_cache_hits, true});
    add_dist(out, "ttft_ms", s.ttft_ms);
    add_dist(out, "tpot_ms", s.tpot_ms);
    add_dist(out, "itl_ms", s.itl_ms, /*with_p95=*/true);
    add_dist(out, "e2e_ms", s.e2e_ms);
    add_dist(out, "queue_ms", s.queue_ms);
    out.push_back({"mean_prompt_tokens", opt(finished, s.mean_prompt_tokens), true});
    out.push_back({"mean_output_tokens", opt(finished, s.mean_output_tokens), true});
    out.push_back({"preemptions", s.preemptions, true});
    out.push_back({"queue_peak", s.queue_peak, true});
    const bool stepped = s.num_steps > 0;
    out.push_back({"kv_usage_mean", opt(stepped, s.kv_usage_mean), true});
    out.push_back({"kv_usage_max", opt(stepped, s.kv_usage_max), true});
    out.push_back({"num_steps", s.num_steps, true});
    out.push_back({"mean_batch_tokens", opt(stepped, s.mean_batch_tokens), true});
    const auto& c = r.sim.total_cost;
    out.push_back({"step_ms_total_gemm", c.gemm_ms, true});
    out.push_back({"step_ms_total_lm_head", c.lm_head_ms, true});
    out.push_back({"step_ms_total_attn_prefill", c.attn_prefill_ms, true});
    out.push_back({"step_ms_total_attn_decode", c.attn_decode_ms, true});
    out.push_back({"step_ms_total_gdn", c.gdn_ms, true});
    out.push_back({"step_ms_total_snapshot", c.snapshot_ms, true});
    out.push_back({"step_ms_total_overhead", c.overhead_ms, true});
    out.push_back({"step_ms_total_comm", c.comm_ms, true});
    out.push_back({"step_ms_total_host", c.host_ms, true});
    if (c.jit_ms > 0) {  // only where a step waited for a Triton compile, so other runs' columns stay as they were
        out.push_back({"step_ms_total_jit", c.jit_ms, true});
    }
    if (p.hybrid_state && r.sim.hybrid_state) {
        // A hybrid policy's state pool (docs/HYBRID-POLICIES.md); absent for vllm's shared pool.
        const auto& h = *r.sim.hybrid_state;
        out.push_back({"hybrid_cache_policy", p.hybrid_state->policy});
        out.push_back({"state_slots", p.hybrid_state->num_state_slots});
        out.push_back({"state_pool_gib",
                       static_cast<double>(p.hybrid_state->num_state_slots * p.hybrid_state->state_bytes) / kGiB});
        out.push_back({"attention_hit_rate",
                       opt(queried, static_cast<double>(h.attention_hit_tokens) /
                                        static_cast<double>(std::max<std::int64_t>(s.prefix_cache_queries, 1))),
                       true});
        out.push_back({"recomputed_hit_tokens", h.attention_hit_tokens - h.state_hit_tokens, true});
        out.push_back({"snapshots_taken", h.num_snapshots_taken, true});
        out.push_back({"state_copies", h.num_state_copies, true});
        out.push_back({"snapshots_evicted", h.num_evictions, true});
        out.push_back({"snapshots_peak", h.peak_snapshots, true});
        out.push_back({"state_admission_waits", h.num_admission_waits, true});
        out.push_back({"snapshots_evicted_orphan", h.num_orphans_evicted, true});
    }
    if (const auto& d = r.sim.disaggregation) {
        // cluster.disaggregation (docs/CLUSTER.md): the decode side's reads of the prefill KV, each pool's busy time;
        // the prefix-cache figures above are the prefill pool's.
        const bool read = d->num_transfers > 0;
        out.push_back({"prefill_replicas", static_cast<std::int64_t>(d->num_prefill_replicas)});
        out.push_back({"decode_replicas", static_cast<std::int64_t>(d->num_decode_replicas)});
        out.push_back({"kv_transfers", d->num_transfers, true});
        out.push_back({"kv_transfer_gb", d->transfer_bytes / 1e9, true});
        out.push_back({"kv_transfer_ms_mean", opt(read, d->transfer_ms_mean), true});
        out.push_back({"kv_transfer_ms_p50", opt(read, d->transfer_ms_p50), true});
        out.push_back({"kv_transfer_ms_p90", opt(read, d->transfer_ms_p90), true});
        out.push_back({"kv_transfer_ms_p99", opt(read, d->transfer_ms_p99), true});
        out.push_back({"kv_transfer_ms_max", opt(read, d->transfer_ms_max), true});
        out.push_back({"decode_local_hit_tokens", d->decode_local_hit_tokens, true});
        out.push_back({"prefill_busy_fraction", d->prefill_busy_fraction, true});
        out.push_back({"decode_busy_fraction", d->decode_busy_fraction, true});
        out.push_back({"prefill_ttft_ms_mean", opt(finished, d->prefill_ttft_ms_mean), true});
        out.push_back({"prefill_ttft_ms_p99", opt(finished, d->prefill_ttft_ms_p99), true});
        out.push_back({"prefill_held_peak", d->peak_held_requests, true});
    }
    if (const auto& sd = r.sim.speculative) {
        // Speculative decoding (docs/SPECULATIVE-DECODING.md), vLLM's SpecDecodingStats over the whole run: drafts
        // verified, acceptance rate = accepted / draft tokens, mean acceptance length = 1 + accepted / drafts, and
        // per position the share of drafts accepted up to it. Undefined (missing) without a verified draft.
        const bool drafted = sd->num_drafts > 0;
        out.push_back({"spec_num_drafts", sd->num_drafts, true});
        out.push_back({"spec_num_draft_tokens", sd->num_draft_tokens, true});
        out.push_back({"spec_num_accepted_tokens", sd->num_accepted_tokens, true});
        out.push_back({"spec_acceptance_rate", opt(drafted, drafted ? sd->acceptance_rate() : 0.0), true});
        out.push_back(
            {"spec_mean_acceptance_length", opt(drafted, drafted ? sd->mean_acceptance_length() : 0.0), true});
        const std::vector<double> per_pos = drafted ? sd->acceptance_per_position() : std::vector<double>{};
        for (std::size_t i = 0; i < sd->num_accepted_tokens_per_pos.size(); ++i) {
            out.push_back({fmt::format("spec_acceptance_pos{}", i), opt(drafted, drafted ? per_pos[i] : 0.0), true});
        }
        out.push_back({"step_ms_total_spec_draft", c.spec_draft_ms, true});
    }
    // A swept key that shares its name with a resolved figure (engine.max_model_len, cost_model, vllm_version, …):
    // the sweep column keeps the requested value, the resolved one is effective_<name>.
    for (std::size_t i = 1 + r.config.columns.size(); i < out.size(); ++i) {
        const bool swept = std::any_of(r.config.columns.begin(), r.config.columns.end(),
                                       [&](const auto& col) { return col.first == out[i].name; });
        if (swept) {
            out[i].name = "effective_" + out[i].name;
        }
    }
    return out;
}

std::optional<double> as_number(const Cell& c) {
    if (const auto* i = std::get_if<std::int64_t>(&c)) {
        return static_cast<double>(*i);
    }
    if (const auto* d = std::get_if<double>(&c)) {
        return *d;
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::size_t> bimodal_split(std::vector<double> values, double min_range) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    if (n < 4) {
        return std::nullopt;
    }
    const double range = values.back() - values.front();
    double sum = 0;
    for (double v : values) {
        sum += v;
    }
    const double mean = sum / static_cast<double>(n);
    if (!(range > 0) || range < min_range || range < kBistableMinRelativeRange * std::abs(mean)) {
        return std::nullopt;
    }
    std::size_t best = 0;
    double best_gap = -1;
    for (std::size_t i = 1; i < n; ++i) {
        const double gap = values[i] - values[i - 1];
        if (gap > best_gap) {
            best_gap = gap;
            best = i;
        }
    }
    if (best >= 2 && n - best >= 2 && best_gap > kBistableGapFraction * range) {
        return best;
    }
    return std::nullopt;
}

namespace {

// A replicated point: identity and configuration from the first run; each measured figure becomes <name>_mean,
// _min, _max and _std (population, as numpy's np.std) over the runs that measured it; `bistable` names the figures
// whose runs split in two clusters (bimodal_split).
std::vector<Field> fields_replicated(const ExperimentResult& r) {
    std::vector<std::vector<Field>> runs;
    for (const auto& run : r.replicate_runs) {
        runs.push_back(fields_one(run));
    }
    std::vector<Field> out;
    std::string bistable;
    std::map<std::string, int> statuses;
    for (const auto& run : r.replicate_runs) {
        ++statuses[run_status_name(run.status)];
    }
    for (std::size_t f = 0; f < runs.front().size(); ++f) {
        const Field& first = runs.front()[f];
        if (first.name == "seed") {
            out.push_back({"seed", static_cast<std::int64_t>(r.config.seed)});
            out.push_back({"replicates", static_cast<std::int64_t>(r.replicate_runs.size())});
            continue;
        }
        if (first.name == "status") {
            std::string text;
            for (const auto& [name, count] : statuses) {
                text += fmt::format("{}{}", text.empty() ? "" : " ", statuses.size() == 1 ? name
                                                                     : fmt::format("{}:{}", name, count));
            }
            out.push_back({"status", text});
            continue;
        }
        if (first.name == "status_reason") {
            // The first run that is not ok, by seed.
            Cell reason;
            for (const auto& run : r.replicate_runs) {
                if (!run.status_reason.empty()) {
                    reason = Cell(fmt::format("seed {}: {}", run.config.seed, run.status_reason));
                    break;
                }
            }
            out.push_back({"status_reason", reason});
            continue;
        }
        if (!first.measured) {
            out.push_back(first);
            continue;
        }
        std::vector<double> values;
        for (const auto& run : runs) {
            if (f < run.size()) {
                if (const auto v = as_number(run[f].value)) {
                    values.push_back(*v);
                }
            }
        }
        if (values.empty()) {
            for (const char* suffix : {"_mean", "_min", "_max", "_std"}) {
                out.push_back({first.name + suffix, Cell(), true});
            }
            continue;
        }
        double sum = 0;
        for (double v : values) {
            sum += v;
        }
        const double mean = sum / static_cast<double>(values.size());
        double sq = 0;
        for (double v : values) {
            sq += (v - mean) * (v - mean);
        }
        const double lo = *std::min_element(values.begin(), values.end());
        const double hi = *std::max_element(values.begin(), values.end());
        const bool counts = std::holds_alternative<std::int64_t>(first.value);  // min and max stay integers
        out.push_back({first.name + "_mean", mean, true});
        out.push_back({first.name + "_min", counts ? Cell(static_cast<std::int64_t>(lo)) : Cell(lo), true});
        out.push_back({first.name + "_max", counts ? Cell(static_cast<std::int64_t>(hi)) : Cell(hi), true});
        out.push_back({first.name + "_std", std::sqrt(sq / static_cast<double>(values.size())), true});
        const bool headline = std::find_if(kBistableFigures.begin(), kBistableFigures.end(), [&](const char* n) {
                                  return first.name == n;
                              }) != kBistableFigures.end();
        const double min_range = first.name.find("_rate") != std::string::npos ? 0.02 : 0.0;
        if (headline && bimodal_split(values, min_range)) {
            bistable += (bistable.empty() ? "" : " ") + first.name;
        }
    }
    out.push_back({"bistable", bistable});
    return out;
}
}  // namespace

std::vector<Field> fields(const ExperimentResult& r) {
    return r.replicate_runs.size() > 1 ? fields_replicated(r) : fields_one(r);
}

// Column names over all results, in order of first appearance (rows may differ: goodput set on some only).
std::vector<std::string> header_of(const std::vector<std::vector<Field>>& rows) {
    std::vector<std::string> names;
    for (const auto& row : rows) {
        for (const auto& f : row) {
            if (std::find(names.begin(), names.end(), f.name) == names.end()) {
                names.push_back(f.name);
            }
        }
    }
    return names;
}

const Cell* find_field(const std::vector<Field>& row, const std::string& name) {
    const auto it = std::find_if(row.begin(), row.end(), [&](const Field& f) { return f.name == name; });
    return it == row.end() ? nullptr : &it->value;
}

// Table text of a column: a replicated figure prints "mean [min–max]" under its plain name.
std::string table_cell(const std::vector<Field>& row, const std::string& name) {
    if (const Cell* c = find_field(row, name)) {
        return cell_text(*c, table_decimals(name), "—");
    }
    const Cell* mean = find_field(row, name + "_mean");
    if (!mean) {
        return "";
    }
    if (is_missing(*mean)) {
        return "—";
    }
    const Cell* lo = find_field(row, name + "_min");
    const int d = lo && std::holds_alternative<std::int64_t>(*lo) ? 1 : table_decimals(name);
    return fmt::format("{} [{}–{}]", cell_text(*mean, d, "—"), cell_text(*find_field(row, name + "_min"), d, "—"),
                       cell_text(*find_field(row, name + "_max"), d, "—"));
}

}  // namespace servesim::app
