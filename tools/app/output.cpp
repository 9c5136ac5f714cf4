// Tables, CSV and JSON; see output.h.
#include "tools/app/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "common/error.h"
#include "models/model_derived.h"
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

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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

struct Field {
    std::string name;
    Cell value;
    bool measured = false;  // depends on the seed: aggregated over replicates (mean, min, max, std)
};

Cell opt(bool present, double v) { return present ? Cell(v) : Cell(); }

void add_dist(std::vector<Field>& out, const std::string& name, const metrics::Distribution& d) {
    const bool any = d.count > 0;
    out.push_back({name + "_p50", opt(any, d.p50), true});
    out.push_back({name + "_p90", opt(any, d.p90), true});
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
    add_dist(out, "itl_ms", s.itl_ms);
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

}  // namespace

std::vector<std::pair<std::string, Cell>> flatten(const ExperimentResult& r) {
    std::vector<std::pair<std::string, Cell>> out;
    for (auto& f : fields(r)) {
        out.emplace_back(std::move(f.name), std::move(f.value));
    }
    return out;
}

nlohmann::ordered_json to_json(const ExperimentResult& r) {
    nlohmann::ordered_json j;
    for (const auto& f : fields(r)) {
        j[f.name] = cell_json(f.value);
    }
    return j;
}

std::string format_json(const std::vector<ExperimentResult>& results) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results) {
        arr.push_back(to_json(r));
    }
    return arr.dump(2) + "\n";
}

std::string format_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    std::vector<std::vector<Field>> rows;
    for (const auto& r : results) {
        rows.push_back(fields(r));
    }
    const auto header = header_of(rows);
    for (std::size_t i = 0; i < header.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        out += csv_escape(header[i]);
    }
    out += "\n";
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < header.size(); ++i) {
            const Cell* c = find_field(row, header[i]);
            if (i > 0) {
                out += ',';
            }
            out += csv_escape(c ? cell_text(*c, -1, "") : "");
        }
        out += "\n";
    }
    return out;
}

namespace {

// The identity cells of one run's rows in timeseries.csv and requests.csv: name, the sweep columns' values and,
// with `with_seed`, the run's seed.
std::string run_id_csv(const ExperimentResult& r, bool with_seed) {
    std::string id = csv_escape(r.config.name);
    for (const auto& [k, v] : r.config.columns) {
        id += ',';
        id += csv_escape(v);
    }
    if (with_seed) {
        id += fmt::format(",{}", r.config.seed);
    }
    return id;
}

}  // namespace

std::string format_timeseries_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    out += "name";
    for (const auto& [k, v] : results.front().config.columns) {
        out += ',';
        out += csv_escape(k);
    }
    // A seed column only with replicates (one series per seed); without, the columns before t_s are the identity.
    const bool replicated = std::any_of(results.begin(), results.end(),
                                        [](const auto& r) { return r.replicate_runs.size() > 1; });
    out += replicated ? ",seed" : "";
    out += ",t_s,waiting,running,kv_usage,prefix_cache_hit_rate_cumulative\n";
    for (const auto& point : results) {
        for (const ExperimentResult* r : runs_of(point)) {
            const std::string id = run_id_csv(*r, replicated);
            for (const auto& t : r->sim.timeseries) {
                const std::string hit =
                    t.prefix_cache_queries > 0 ? number_text(static_cast<double>(t.prefix_cache_hits) /
                                                                 static_cast<double>(t.prefix_cache_queries),
                                                             -1)
                                               : "";
                out += fmt::format("{},{},{},{},{},{}\n", id, number_text(t.t_s, -1), t.num_waiting, t.num_running,
                                   number_text(t.kv_usage, -1), hit);
            }
        }
    }
    return out;
}

std::string format_requests_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    out += "name";
    for (const auto& [k, v] : results.front().config.columns) {
        out += ',' + csv_escape(k);
    }
    out += ",seed,arrival_s,queue_ms,ttft_ms,itl_mean_ms,itl_max_ms,e2e_ms,prompt_tokens,cached_prompt_tokens,"
           "output_tokens,replica,preemptions\n";
    for (const auto& point : results) {
        for (const ExperimentResult* r : runs_of(point)) {
            if (r->order_only) {
                continue;
            }
            const std::string id = run_id_csv(*r, true);
            std::vector<metrics::RequestRecord> recs = r->sim.summary.requests;
            std::stable_sort(recs.begin(), recs.end(),
                             [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
            for (const auto& q : recs) {
                // With one output token there is no inter-token gap: ITL mean and max are empty.
                const bool gaps = q.has_tpot();
                out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", id, number_text(q.arrival_s, -1),
                                   number_text(q.queue_ms, -1), number_text(q.ttft_ms, -1),
                                   gaps ? number_text(q.tpot_ms(), -1) : "", gaps ? number_text(q.itl_max_ms, -1) : "",
                                   number_text(q.e2e_ms, -1), q.prompt_tokens, q.cached_prompt_tokens,
                                   q.output_tokens, q.replica, q.num_preemptions);
            }
        }
    }
    return out;
}

std::string format_table(const std::vector<ExperimentResult>& results, bool sweep) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    std::vector<std::vector<Field>> rows;
    for (const auto& r : results) {
        rows.push_back(fields(r));
    }
    if (sweep) {
        // One row per point: identity columns, then what answered it and the headline figures.
        std::vector<std::string> cols;
        for (const auto& [k, v] : results.front().config.columns) {
            cols.push_back(k);
        }
        std::vector<std::string> figures;
        if (results.front().order_only) {
            for (const auto& name : header_of(rows)) {
                if (name != "name" && std::find(cols.begin(), cols.end(), name) == cols.end()) {
                    figures.push_back(name);
                }
            }
        } else {
            if (std::find(cols.begin(), cols.end(), "model") == cols.end()) {
                cols.insert(cols.begin(), "model");
            }
            figures = {"status", "prefix_cache_hit_rate", "ttft_ms_p50", "itl_ms_p50", "itl_ms_mean",
                       "itl_ms_p99", "offered_rps", "sent_rps", "throughput_rps"};
            const bool goodput = std::any_of(results.begin(), results.end(),
                                             [](const auto& r) { return r.config.goodput.any(); });
            if (goodput) {
                figures.push_back("request_goodput");
            }
            figures.insert(figures.end(), {"kv_cache_tokens", "effective_block_size", "preemptions"});
            if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.sim.speculative.has_value(); })) {
                figures.insert(figures.end(), {"tpot_ms_mean", "spec_mean_acceptance_length"});
            }
            if (results.front().replicate_runs.size() > 1) {
                figures.push_back("bistable");
            }
        }
        cols.insert(cols.end(), figures.begin(), figures.end());
        std::vector<std::vector<std::string>> text;
        for (const auto& row : rows) {
            std::vector<std::string> line;
            for (const auto& c : cols) {
                line.push_back(table_cell(row, c));
            }
            text.push_back(line);
        }
        // Widths in code points ("—" and "–" are one column wide, three bytes).
        auto width_of = [](const std::string& s) {
            return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char ch) {
                return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
            }));
        };
        std::vector<std::size_t> width(cols.size());
        for (std::size_t i = 0; i < cols.size(); ++i) {
            width[i] = width_of(cols[i]);
            for (const auto& line : text) {
                width[i] = std::max(width[i], width_of(line[i]));
            }
        }
        auto pad = [&](const std::string& s, std::size_t w) { return s + std::string(w - width_of(s), ' ') + "  "; };
        for (std::size_t i = 0; i < cols.size(); ++i) {
            out += pad(cols[i], width[i]);
        }
        out += "\n";
        for (const auto& line : text) {
            for (std::size_t i = 0; i < cols.size(); ++i) {
                out += pad(line[i], width[i]);
            }
            out += "\n";
        }
        return out;
    }
    // Side by side: figures as rows, one identity row (the experiments' names) as the header.
    auto width_of = [](const std::string& s) {
        return static_cast<std::size_t>(
            std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
    };
    std::vector<std::string> names = header_of(rows);
    const bool experiment_is_name = std::all_of(rows.begin(), rows.end(), [](const auto& row) {
        const Cell* e = find_field(row, "experiment");
        const Cell* n = find_field(row, "name");
        return !e || (n && cell_text(*e, -1, "") == cell_text(*n, -1, ""));
    });
    std::vector<std::string> labels;
    for (const auto& n : names) {
        if (n == "name" || (n == "experiment" && experiment_is_name)) {
            continue;
        }
        // A replicated figure is one row, "mean [min–max]"; its _std stays in CSV and JSON.
        auto strip = [&](const std::string& suffix) {
            return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0
                       ? n.substr(0, n.size() - suffix.size())
                       : std::string();
        };
        auto replicated = [&](const std::string& base) {
            return !base.empty() && find_field(rows.front(), base + "_mean") && find_field(rows.front(), base + "_min") &&
                   find_field(rows.front(), base + "_max") && find_field(rows.front(), base + "_std");
        };
        if (replicated(strip("_mean"))) {
            labels.push_back(strip("_mean"));
            continue;
        }
        if (replicated(strip("_min")) || replicated(strip("_max")) || replicated(strip("_std"))) {
            continue;
        }
        labels.push_back(n);
    }
    std::size_t label_width = 0;
    for (const auto& l : labels) {
        label_width = std::max(label_width, width_of(l));
    }
    std::vector<std::vector<std::string>> text(results.size());
    std::vector<std::size_t> width(results.size(), 0);
    for (std::size_t c = 0; c < results.size(); ++c) {
        width[c] = width_of(results[c].config.name);
        for (const auto& l : labels) {
            text[c].push_back(table_cell(rows[c], l));
            width[c] = std::max(width[c], width_of(text[c].back()));
        }
    }
    auto rpad = [&](const std::string& s, std::size_t w) { return std::string(w - width_of(s), ' ') + s + "  "; };
    out += std::string(label_width + 2, ' ');
    for (std::size_t c = 0; c < results.size(); ++c) {
        out += rpad(results[c].config.name, width[c]);
    }
    out += "\n";
    for (std::size_t row = 0; row < labels.size(); ++row) {
        out += labels[row] + std::string(label_width + 2 - width_of(labels[row]), ' ');
        for (std::size_t c = 0; c < results.size(); ++c) {
            out += rpad(text[c][row], width[c]);
        }
        out += "\n";
    }
    return out;
}

double np_percentile(const std::vector<double>& sorted, double q) {
    const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

namespace {

// vllm bench serve names a percentile key p<int> when the percentile is whole, else p<float> (str(99.9) = "99.9").
std::string percentile_word(double p) {
    return p == std::floor(p) ? fmt::format("{}", static_cast<std::int64_t>(p)) : fmt::format("{}", p);
}

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : text) {
        if (ch == ',') {
            out.push_back(cur);
            cur.clear();
        } else if (ch != ' ') {
            cur += ch;
        }
    }
    out.push_back(cur);
    return out;
}

}  // namespace

BenchOptions parse_bench_options(const std::string& percentile_metrics, const std::string& metric_percentiles) {
    BenchOptions o;
    if (!percentile_metrics.empty()) {
        o.percentile_metrics.clear();
        for (const auto& m : split_commas(percentile_metrics)) {
            if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el") {
                throw ConfigError("--percentile-metrics: '" + m + "' is not a metric; allowed: ttft, tpot, itl, e2el");
            }
            o.percentile_metrics.push_back(m);
        }
    }
    if (!metric_percentiles.empty()) {
        o.metric_percentiles.clear();
        for (const auto& p : split_commas(metric_percentiles)) {
            double v = 0;
            const auto r = std::from_chars(p.data(), p.data() + p.size(), v);
            if (p.empty() || r.ec != std::errc() || r.ptr != p.data() + p.size() || !(v >= 0 && v <= 100)) {
                throw ConfigError("--metric-percentiles: '" + p + "' is not a percentile; give numbers in [0, 100], "
                                  "e.g. 50,90,99");
            }
            o.metric_percentiles.push_back(v);
        }
    }
    return o;
}

nlohmann::ordered_json to_vllm_bench(const ExperimentResult& r, const BenchOptions& options) {
    const auto& s = r.sim.summary;
    nlohmann::ordered_json j;
    // servesim's identity of the run (vllm bench serve puts its own metadata at the same level).
    j["backend"] = "servesim";
    j["name"] = r.config.name;
    j["seed"] = r.config.seed;
    j["status"] = run_status_name(r.status);
    j["status_reason"] = r.status_reason.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.status_reason);
    j["model_id"] = r.model_name;
    j["cost_model"] = r.cost_model;
    j["vllm_version"] = r.config.engine.vllm_version;
    j["num_prompts"] = s.num_requests_sent;
    // vllm bench serve writes the configured rate, "inf" for all at once; null where servesim's workload has none.
    j["request_rate"] = r.offered_rps           ? nlohmann::ordered_json(*r.offered_rps)
                        : r.offered_all_at_once ? nlohmann::ordered_json("inf")
                                                : nlohmann::ordered_json();
    // burstiness and max_concurrency as the workload sets them (bench_serve's keys are the tool's flags); null
    // where the workload has no such key.
    for (const char* key : {"burstiness", "max_concurrency"}) {
        const YAML::Node v = r.config.workload[key];
        nlohmann::ordered_json value;
        if (v && v.IsScalar()) {
            const Cell typed = typed_value("", v.Scalar());
            value = cell_json(typed);
        } else if (std::string(key) == "burstiness" && r.config.workload["type"] &&
                   r.config.workload["type"].Scalar() == "bench_serve") {
            value = 1.0;  // the tool's default --burstiness
        }
        j[key] = value;
    }
    std::int64_t input = 0;
    std::int64_t output = 0;
    std::vector<double> ttft, tpot, e2el;
    for (const auto& q : s.requests) {
        input += q.prompt_tokens;
        output += q.output_tokens;
        ttft.push_back(q.ttft_ms);
        e2el.push_back(q.e2e_ms);
        if (q.has_tpot()) {
            tpot.push_back(q.tpot_ms());
        }
    }
    const bool window = s.duration_s > 0;
    auto per_s = [&](double v) { return window ? nlohmann::ordered_json(v / s.duration_s) : nlohmann::ordered_json(); };
    j["duration"] = window ? nlohmann::ordered_json(s.duration_s) : nlohmann::ordered_json();
    j["completed"] = s.num_requests_finished;
    // A timed-out request is a failed RequestFuncOutput for the tool (its aiohttp time-out, caught).
    j["failed"] = s.num_requests_rejected + s.num_requests_timed_out + r.sim.num_unfinished;
    j["total_input_tokens"] = input;
    j["total_output_tokens"] = output;
    j["request_throughput"] = per_s(static_cast<double>(s.num_requests_finished));
    j["request_goodput"] = r.num_requests_good ? per_s(static_cast<double>(*r.num_requests_good))
                                               : nlohmann::ordered_json();
    j["output_throughput"] = per_s(static_cast<double>(output));
    j["total_token_throughput"] = per_s(static_cast<double>(input + output));
    auto add = [&](const std::string& metric, std::vector<double> values) {
        nlohmann::ordered_json mean, median, stddev;
        std::vector<nlohmann::ordered_json> pct(options.metric_percentiles.size());
        if (!values.empty()) {
            std::sort(values.begin(), values.end());
            double sum = 0;
            for (double v : values) {
                sum += v;
            }
            const double m = sum / static_cast<double>(values.size());
            double sq = 0;
            for (double v : values) {
                sq += (v - m) * (v - m);
            }
            mean = m;
            median = np_percentile(values, 50);
            stddev = std::sqrt(sq / static_cast<double>(values.size()));  // np.std: population (ddof = 0)
            for (std::size_t i = 0; i < pct.size(); ++i) {
                pct[i] = np_percentile(values, options.metric_percentiles[i]);
            }
        }
        j[fmt::format("mean_{}_ms", metric)] = mean;
        j[fmt::format("median_{}_ms", metric)] = median;
        j[fmt::format("std_{}_ms", metric)] = stddev;
        for (std::size_t i = 0; i < pct.size(); ++i) {
            j[fmt::format("p{}_{}_ms", percentile_word(options.metric_percentiles[i]), metric)] = pct[i];
        }
    };
    // vllm bench serve processes ttft, tpot, itl, e2el in this order, each only when selected.
    for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), metric) ==
            options.percentile_metrics.end()) {
            continue;
        }
        if (std::string(metric) == "ttft") {
            add(metric, ttft);
        } else if (std::string(metric) == "tpot") {
            add(metric, tpot);
        } else if (std::string(metric) == "e2el") {
            add(metric, e2el);
        } else {
            // Pooled ITLs are not kept one by one: mean and population std from their running moments, median and
            // percentiles from the summary's distribution, which holds p50, p90 and p99.
            const auto& d = s.itl_ms;
            const bool any = d.count > 0;
            j["mean_itl_ms"] = any ? nlohmann::ordered_json(s.itl_moments.mean) : nlohmann::ordered_json();
            j["median_itl_ms"] = any ? nlohmann::ordered_json(d.p50) : nlohmann::ordered_json();
            j["std_itl_ms"] = any ? nlohmann::ordered_json(std::sqrt(s.itl_moments.m2 /
                                                                     static_cast<double>(s.itl_moments.count)))
                                  : nlohmann::ordered_json();
            for (double p : options.metric_percentiles) {
                const double v = p == 50 ? d.p50 : p == 90 ? d.p90 : d.p99;
                j[fmt::format("p{}_itl_ms", percentile_word(p))] = any ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
            }
        }
    }
    return j;
}

void check_bench_percentiles(const BenchOptions& options) {
    for (double p : options.metric_percentiles) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), "itl") !=
                options.percentile_metrics.end() &&
            p != 50 && p != 90 && p != 99) {
            throw ConfigError(fmt::format("--metric-percentiles: {} for itl: servesim keeps pooled inter-token "
                                          "latencies as p50, p90 and p99 only; leave itl out of --percentile-metrics "
                                          "or ask for 50, 90 or 99",
                                          percentile_word(p)));
        }
    }
}

std::string format_vllm_bench(const std::vector<ExperimentResult>& results, const BenchOptions& options) {
    check_bench_percentiles(options);
    std::vector<nlohmann::ordered_json> objects;
    for (const auto& point : results) {
        if (point.order_only) {
            throw ConfigError("--format vllm-bench: `mode: order_only` has no timings; use table, csv or json");
        }
        for (const ExperimentResult* run : runs_of(point)) {
            objects.push_back(to_vllm_bench(*run, options));
        }
    }
    if (objects.size() == 1) {
        return objects.front().dump(2) + "\n";
    }
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (auto& o : objects) {
        arr.push_back(std::move(o));
    }
    return arr.dump(2) + "\n";
}

void check_out_dir(const std::string& out_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir)) {
        throw ConfigError("--out " + out_dir + ": cannot create the folder" + (ec ? " (" + ec.message() + ")" : ""));
    }
    const fs::path probe = fs::path(out_dir) / ".servesim-write-check";
    {
        std::ofstream f(probe);
        f << "x";
        f.flush();
        if (!f) {
            throw ConfigError("--out " + out_dir + ": the folder is not writable");
        }
    }
    fs::remove(probe, ec);
}

nlohmann::ordered_json inspect_json(const models::ModelSpec& model, const std::string& gpu,
                                    const cache::MemoryPlan& p) {
    nlohmann::ordered_json j;
    j["model"] = model.name;
    j["gpu"] = gpu;
    j["block_size"] = p.block_size;
    j["block_size_raised"] = p.block_size_raised;
    j["mamba_block_size"] = p.mamba_block_size;
    j["mamba_page_padding_pct"] = p.mamba_page_padding_pct;
    j["page_size_bytes"] = p.page_size_bytes;
    j["num_kv_cache_groups"] = p.groups.size();
    j["group_size"] = p.group_size;
    j["num_gpu_blocks"] = p.num_gpu_blocks;
    j["kv_cache_tokens"] = p.kv_cache_tokens;
    j["max_concurrency"] = p.max_concurrency;
    j["max_model_len"] = p.max_model_len;
    j["kv_bytes_per_token"] = p.kv_bytes_per_token;
    j["state_bytes_per_sequence"] = p.state_bytes_per_sequence;
    j["kv_cache_memory_bytes"] = p.kv_cache_memory_bytes;
    j["kv_cache_dtype"] = models::dtype_name(p.kv_cache_dtype);
    j["enable_prefix_caching"] = p.enable_prefix_caching;
    j["mamba_cache_mode"] = cache::mamba_cache_mode_name(p.mamba_cache_mode);
    j["max_num_batched_tokens"] = p.max_num_batched_tokens;
    j["max_num_seqs"] = p.max_num_seqs;
    j["gpu_memory_utilization"] = p.gpu_memory_utilization;
    j["tensor_parallel_size"] = p.tensor_parallel_size;
    if (!p.stages.empty()) {
        j["pipeline_parallel_size"] = p.pipeline_parallel_size;
        nlohmann::ordered_json stages = nlohmann::ordered_json::array();
        for (const auto& st : p.stages) {
            stages.push_back({{"first_layer", st.first_layer},
                              {"num_layers", st.num_layers},
                              {"weight_bytes", st.weight_bytes},
                              {"kv_cache_memory_bytes", st.kv_cache_memory_bytes},
                              {"num_gpu_blocks", st.num_gpu_blocks}});
        }
        j["pipeline_stages"] = stages;
    }
    j["weight_bytes"] = p.weight_bytes;
    j["weight_bytes_read_per_decode_step"] = models::weight_bytes_read_per_step(model, 1);
    if (model.quantization) {  // docs/QUANTIZATION.md
        j["quantization"] = model.quantization->method;
        j["quantization_scheme"] = model.quantization->description;
        j["weight_bytes_all_ranks"] = models::weight_bytes_total(model);
    }
    j["activation_peak_bytes"] = p.activation_peak_bytes;
    j["non_torch_bytes"] = p.non_torch_bytes;
    return j;
}

std::string inspect_table(const models::ModelSpec& model, const std::string& gpu, const cache::MemoryPlan& p) {
    std::string out;
    auto line = [&](const std::string& k, const std::string& v) { out += fmt::format("{:<34}{}\n", k, v); };
    line("model", model.name);
    line("gpu", gpu);
    line("kv cache dtype", models::dtype_name(p.kv_cache_dtype));
    line("prefix caching", p.enable_prefix_caching ? "on" : "off");
    if (p.mamba_block_size > 0) {
        line("mamba_cache_mode", cache::mamba_cache_mode_name(p.mamba_cache_mode));
    }
    line("max_model_len", fmt::format("{}", p.max_model_len));
    line("max_num_batched_tokens / seqs", fmt::format("{} / {}", p.max_num_batched_tokens, p.max_num_seqs));
    out += "\n-- memory (vLLM Worker.determine_available_memory) --\n";
    if (p.kv_cache_memory_overridden) {
        line("kv_cache_memory_bytes (given)", fmt::format("{:.2f} GiB", p.kv_cache_memory_bytes / kGiB));
    } else {
        line("requested (util x total)", fmt::format("{:.2f} GiB ({})", p.requested_memory_bytes / kGiB, p.gpu_memory_utilization));
        line("weights", fmt::format("{:.2f} GiB", p.weight_bytes / kGiB));
        if (model.quantization) {
            line("weights, all ranks", fmt::format("{:.2f} GiB ({})", models::weight_bytes_total(model) / kGiB,
                                                  model.quantization->description));
        }
        line("activation peak (modelled)", fmt::format("{:.2f} GiB", p.activation_peak_bytes / kGiB));
        line("non-torch + cuda graphs", fmt::format("{:.2f} GiB", (p.non_torch_bytes + p.cudagraph_bytes) / kGiB));
        line("Available KV cache memory", fmt::format("{:.2f} GiB", p.kv_cache_memory_bytes / kGiB));
    }
    if (p.expert_parallel_size > 1) {
        line("expert parallel", fmt::format("EP {}: each GPU holds its routed experts whole (determine_expert_map)",
                                            p.expert_parallel_size));
    }
    if (!p.stages.empty()) {
        // Pipeline parallelism: one GPU per stage (and TP rank); vLLM keeps the smallest num_blocks of all stages.
        out += fmt::format("\n-- pipeline stages (get_pp_indices; the engine takes the smallest num_blocks) --\n");
        for (std::size_t i = 0; i < p.stages.size(); ++i) {
            const auto& st = p.stages[i];
            // vLLM's decoder layers (Falcon-H1's are two blocks each here: ModelSpec::blocks_per_decoder_layer).
            const int unit = model.blocks_per_decoder_layer;
            line(fmt::format("stage {} layers {}-{}", i, st.first_layer / unit,
                             (st.first_layer + st.num_layers) / unit - 1),
                 fmt::format("weights {:.2f} GiB, KV {:.2f} GiB, {} blocks", st.weight_bytes / kGiB,
                             st.kv_cache_memory_bytes / kGiB, st.num_gpu_blocks));
        }
    }
    out += "\n-- what vLLM's start-up log would say --\n";
    if (p.block_size_raised) {
        out += p.block_size_reason + "\n";
    }
    if (p.mamba_page_padding_pct > 0) {
        out += fmt::format("Padding mamba page size by {:.2f}% to ensure that mamba page size and attention page size "
                           "are exactly equal.\n",
                           p.mamba_page_padding_pct);
    }
    int padding = 0;
    for (const auto& g : p.groups) {
        padding += g.num_padding_layers;
    }
    if (padding > 0) {
        out += fmt::format("Add {} padding layers, may waste at most {:.2f}% KV cache memory\n", padding,
                           100.0 * padding / (padding + static_cast<double>(model.layers.size())));
    }
    out += fmt::format("GPU KV cache size: {} tokens\n", p.kv_cache_tokens);
    out += fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x\n", p.max_model_len, p.max_concurrency);
    out += "\n-- pages and blocks --\n";
    line("block_size", fmt::format("{}", p.block_size));
    if (p.mamba_block_size > 0) {
        line("mamba_block_size", fmt::format("{}", p.mamba_block_size));
        line("mamba page (unpadded)", fmt::format("{} B", p.mamba_page_size_bytes));
        line("mamba_page_padding_pct", fmt::format("{:.2f} %", p.mamba_page_padding_pct));
    }
    line("page_size_bytes (per layer)", fmt::format("{}", p.page_size_bytes));
    std::string groups;
    for (const auto& g : p.groups) {
        const char* kind = g.kind == cache::KvGroupKind::kFullAttention   ? "full_attention"
                           : g.kind == cache::KvGroupKind::kSlidingWindow ? "sliding_window"
                           : g.kind == cache::KvGroupKind::kChunkedLocal  ? "chunked_local"
                                                                          : "mamba";
        groups += fmt::format("{}{}x{}", groups.empty() ? "" : ", ", kind, g.num_layers);
    }
    line("kv cache groups", fmt::format("{} (group size {}): {}", p.groups.size(), p.group_size, groups));
    line("num_gpu_blocks (incl. null)", fmt::format("{}", p.num_gpu_blocks));
    line("blocks per max-length request", fmt::format("{}", p.blocks_per_request));
    line("kv_bytes_per_token", fmt::format("{}", p.kv_bytes_per_token));
    line("state_bytes_per_sequence", fmt::format("{}", p.state_bytes_per_sequence));
    return out;
}

namespace {

void placement_rows(std::string& out, const PreparedExperiment& p, const std::string& pool) {
    const std::string where = pool.empty() ? "" : pool + " ";
    if (p.replica_gpus.empty()) {
        out += fmt::format("{}replicas: {} × {} (no cluster.topology: the catalog GPU's {:.2f} GiB), {} KV blocks, "
                           "{} tokens each\n",
                           where, p.config.replicas, p.gpu.name, static_cast<double>(p.gpu.memory_bytes) / kGiB,
                           p.plan.num_gpu_blocks, p.plan.kv_cache_tokens);
        return;
    }
    out += fmt::format("{:<16}{:<28}{:>16}  {:>14}{:>14}  {}\n", where + "replica", "GPUs (cluster.topology)",
                       "GPU memory GiB", "num_gpu_blocks", "KV tokens", "memory from");
    for (std::size_t i = 0; i < p.replica_gpus.size(); ++i) {
        std::string gpus;
        for (const std::size_t v : p.replica_gpus[i]) {
            gpus += (gpus.empty() ? "" : ",") + p.config.topology->node(v).name;
        }
        if (gpus.size() > 27) {
            gpus = p.config.topology->node(p.replica_gpus[i].front()).name + ".." +
                   p.config.topology->node(p.replica_gpus[i].back()).name;
        }
        const std::int64_t mem = p.replica_gpu_memory_bytes[i];
        const cache::MemoryPlan& plan = replica_plan(p, i);
        const std::string from = mem == p.gpu.memory_bytes
                                     ? "topology = catalog " + p.gpu.name
                                     : fmt::format("topology (catalog {}: {:.2f} GiB, not used)", p.gpu.name,
                                                   static_cast<double>(p.gpu.memory_bytes) / kGiB);
        out += fmt::format("{:<16}{:<28}{:>16.2f}  {:>14}{:>14}  {}\n", i, gpus, static_cast<double>(mem) / kGiB,
                           plan.num_gpu_blocks, plan.kv_cache_tokens, from);
    }
}

}  // namespace

std::string inspect_placement(const PreparedExperiment& p) {
    std::string out = fmt::format("== experiment '{}': {} ==\n", p.config.name, p.model.name);
    if (p.prefill_pool) {
        placement_rows(out, *p.prefill_pool, "prefill");
        placement_rows(out, *p.decode_pool, "decode");
    } else {
        placement_rows(out, p, "");
    }
    return out;
}

}  // namespace servesim::app
