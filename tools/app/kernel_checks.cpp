// Composition and transfer checks of the kernel tables; see kernel_checks.h.
#include "tools/app/kernel_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/grouped_gemm_efficiency.h"
#include "sim/metrics/percentiles.h"
#include "tools/app/host_work_fit.h"
#include "tools/app/step_costs.h"

namespace servesim::app {

namespace {

namespace cal = calibration;

struct ErrorStats {
    int points = 0;
    double sum_abs = 0;
    double sum_signed = 0;
    double max_abs = 0;

    void add(double predicted, double measured) {
        const double e = (predicted - measured) / measured;
        ++points;
        sum_abs += std::fabs(e);
        sum_signed += e;
        max_abs = std::max(max_abs, std::fabs(e));
    }

    // `unlike`: both tables hold the op, but no entry of one is the other's kernel, timed the same way (the backend
    // names both), at the same shape, so a point-for-point transfer has nothing to stand on.
    [[nodiscard]] std::string row(const std::string& name, bool unlike = false) const {
        if (points == 0) {
            return fmt::format("  {:<22}{:>8}  (none to compare{})\n", name, 0,
                               unlike ? ": no entry is the same kernel, timed the same way, at the same shape in both tables" : "");
        }
        return fmt::format("  {:<22}{:>8}{:>11.1f}%{:>11.1f}%{:>11.1f}%\n", name, points, 100.0 * sum_abs / points,
                           100.0 * sum_signed / points, 100.0 * max_abs);
    }
};

const cal::GpuSpec* gpu_of(const cal::KernelTable& t) {
    for (const auto& g : cal::gpu_catalog()) {
        if (cal::find_kernel_table(g) == &t) {
            return &g;
        }
    }
    return nullptr;
}

// The forward's composed kernel time: every term but the host overhead, the all-reduces and sampling (the timed
// forward ends at the logits).
double composed_ms(const engine::MeasuredCostModel& cost, const cal::ForwardEntry& f) {
    std::vector<BatchPart> parts;
    if (f.kind == "prefill") {
        parts.push_back(BatchPart{false, f.batch, f.tokens, f.context});
    } else {
        parts.push_back(BatchPart{true, f.batch, 1, f.context - 1});
    }
    double ms = 0;
    for (const auto& t : cost.step_terms(batch_shape_of(parts, cost.local_attention_spans()))) {
        if (t.name != "overhead" && t.name != "comm" && t.name != "sampling") {
            ms += t.ms;
        }
    }
    return ms;
}

}  // namespace

// The forwards route MoE tokens with torch ops and run the experts as torch's grouped GEMM pair
// (calibration/kernels/sweep_tables.py Fwd.mlp); the cost model itself reads vLLM's fused routing kernels and scales
// the experts to vLLM's fused_moe where the table has them.
cal::KernelTable as_timed_forwards(const cal::KernelTable& table) {
    cal::KernelTable t = table;
    t.moe_vllm_fused.clear();
    if (t.routing_fused && !t.moe_routing_torch.empty()) {
        t.moe_routing = t.moe_routing_torch;
        t.routing_fused = false;
    }
    return t;
}

namespace {

std::string forwards_report(const cal::KernelTable& own,
                            const cal::GpuSpec& gpu,
                            const cal::KernelTable& measured_table,
                            const cal::GpuSpec& table_gpu) {
    const cal::KernelTable table = as_timed_forwards(measured_table);
    std::string out = fmt::format("  {:<22}{:>8}{:>8}{:>7}{:>7}{:>7}{:>12}{:>12}{:>9}\n", "model", "kind", "tokens",
                                  "ctx", "batch", "graph", "timed ms", "composed", "error");
    // An eager forward that also has a graph-replayed twin is printed but left out of the errors: eagerly, a short
    // forward waits on Python's kernel launches (host work, docs/HOST-WORK.md), which the kernel terms do not hold;
    // vLLM replays such forwards from CUDA graphs.
    // The same measured point of the same model (shape and batch), whatever its launch mode or routing.
    const auto same_point = [](const cal::ForwardEntry& a, const cal::ForwardEntry& b) {
        return a.model == b.model && a.kind == b.kind && a.tokens == b.tokens && a.context == b.context &&
               a.batch == b.batch;
    };
    const auto has_graph_twin = [&](const cal::ForwardEntry& f) {
        return !f.cuda_graph && std::any_of(own.forwards.begin(), own.forwards.end(), [&](const cal::ForwardEntry& g) {
            return g.cuda_graph && g.routing == f.routing && same_point(f, g);
        });
    };
    // A forward routed over the hidden state that also has a balanced-routing twin is printed but left out: with random
    // weights a prefill's near-identical hidden states crowd onto few experts, which the table's `moe` op (uniformly
    // routed) and a trained model do not do (docs/COST-MODEL.md, "Composition against torch-timed forwards").
    const auto has_balanced_twin = [&](const cal::ForwardEntry& f) {
        return f.routing == "hidden" &&
               std::any_of(own.forwards.begin(), own.forwards.end(), [&](const cal::ForwardEntry& g) {
                   return g.routing == "balanced" && g.cuda_graph == f.cuda_graph && same_point(f, g);
               });
    };
    ErrorStats prefill;
    ErrorStats decode;
    const engine::MeasuredParams params = single_gpu_measured_params(gpu, table, table_gpu);
    for (const auto& f : own.forwards) {
        models::ModelSpec model;
        try {
            model = models::resolve_model(f.model);
        } catch (const ConfigError&) {
            out += fmt::format("  {:<22}{:>8}  (not a catalogued model: not composed)\n", f.model, f.kind);
            continue;
        }
        const engine::MeasuredCostModel cost(model, model.dtype, params);
        const double ms = composed_ms(cost, f);
        const bool eager_twin = has_graph_twin(f);
        const bool hidden_twin = has_balanced_twin(f);
        if (!eager_twin && !hidden_twin) {
            (f.kind == "prefill" ? prefill : decode).add(ms, f.ms);
        }
        out += fmt::format("  {:<22}{:>8}{:>8}{:>7}{:>7}{:>7}{:>12.3f}{:>12.3f}{:>8.1f}%{}{}\n", f.model, f.kind,
                           f.tokens, f.context, f.batch, f.cuda_graph ? "yes" : "no", f.ms, ms,
                           100.0 * (ms - f.ms) / f.ms, f.routing == "balanced" ? "  (balanced routing)" : "",
                           eager_twin    ? "  (eager twin: not counted)"
                           : hidden_twin ? "  (hidden-state routing: not counted)"
                                         : "");
    }
    out += fmt::format("  {:<22}{:>8}{:>12}{:>12}{:>12}\n", "", "points", "mean |err|", "mean err", "max |err|");
    out += prefill.row("prefill forwards");
    out += decode.row("decode forwards");
    return out;
}

}  // namespace

std::string op_transfer_report(const cal::KernelTable& own,
                               const cal::GpuSpec& gpu,
                               const cal::KernelTable& from,
                               const cal::GpuSpec& from_gpu) {
    const cal::KernelCostLookup lookup(from, cal::KernelRoof::of(from_gpu), cal::KernelRoof::of(gpu));
    std::string out =
        fmt::format("  {:<22}{:>8}{:>12}{:>12}{:>12}\n", "op class", "points", "mean |err|", "mean err", "max |err|");
    for (int kind = 0; kind < cal::kNumGemmKinds; ++kind) {
        ErrorStats s;
        if (!from.gemm[static_cast<std::size_t>(kind)].empty()) {
            for (const auto& e : own.gemm[static_cast<std::size_t>(kind)]) {
                for (std::size_t i = 0; i < e.m.x.size(); ++i) {
                    s.add(lookup.gemm_us(static_cast<cal::GemmKind>(kind), e.m.x[i], e.n, e.k), e.m.us[i]);
                }
            }
        }
        if (!own.gemm[static_cast<std::size_t>(kind)].empty()) {
            out += s.row(cal::gemm_kind_key(static_cast<cal::GemmKind>(kind)));
        }
    }
    const auto per_key = [](const cal::AttentionGeometry& g) {
        return cal::UnitWork{4.0 * g.q_heads * g.head_dim, 4.0 * g.kv_heads * g.head_dim};
    };
    // Each measured entry against the same kernel (backend) at the same geometry in the other table, alone in a
    // lookup of its own, so that one kernel is compared on two GPUs; entries the other table lacks are left out.
    const auto counterpart = [](const auto& theirs, const auto& mine, const auto& same) {
        const auto it = std::find_if(theirs.begin(), theirs.end(), [&](const auto& e) { return same(e, mine); });
        return it == theirs.end() ? nullptr : &*it;
    };
    const auto same_attention = [](const auto& a, const auto& b) {
        return a.backend == b.backend && a.geometry.head_dim == b.geometry.head_dim &&
               a.geometry.q_heads == b.geometry.q_heads && a.geometry.kv_heads == b.geometry.kv_heads;
    };
    const cal::KernelRoof from_roof = cal::KernelRoof::of(from_gpu);
    const cal::KernelRoof to_roof = cal::KernelRoof::of(gpu);
    {
        ErrorStats s;
        for (const auto& e : own.attn_prefill) {
            if (const auto* src = counterpart(from.attn_prefill, e, same_attention)) {
                cal::KernelTable one;
                one.attn_prefill = {*src};
                const auto r = cal::KernelCostLookup(one, from_roof, to_roof)
                                   .resolve_attn_prefill(e.geometry, per_key(e.geometry));
                for (std::size_t i = 0; i < e.tokens.x.size(); ++i) {
                    s.add(cal::KernelCostLookup::attn_prefill_us(*r, e.tokens.x[i]), e.tokens.us[i]);
                }
            }
        }
        out += s.row("attn_prefill", !own.attn_prefill.empty() && !from.attn_prefill.empty());
    }
    {
        ErrorStats s;
        for (const auto& e : own.attn_prefill_cached) {
            if (const auto* src = counterpart(from.attn_prefill_cached, e, same_attention)) {
                cal::KernelTable one;
                one.attn_prefill_cached = {*src};
                const auto r = cal::KernelCostLookup(one, from_roof, to_roof)
                                   .resolve_attn_prefill_cached(e.geometry, per_key(e.geometry));
                const auto& g = e.chunk_context;
                for (std::size_t i = 0; i < g.x.size(); ++i) {
                    for (std::size_t j = 0; j < g.y.size(); ++j) {
                        s.add(cal::KernelCostLookup::attn_prefill_cached_us(*r, g.x[i], g.y[j]),
                              g.us[i * g.y.size() + j]);
                    }
                }
            }
        }
        if (!own.attn_prefill_cached.empty()) {
            out += s.row("attn_prefill_cached", !from.attn_prefill_cached.empty());
        }
    }
    {
        ErrorStats s;
        for (const auto& e : own.attn_decode) {
            if (const auto* src = counterpart(from.attn_decode, e, same_attention)) {
                cal::KernelTable one;
                one.attn_decode = {*src};
                const auto r =
                    cal::KernelCostLookup(one, from_roof, to_roof).resolve_attn_decode(e.geometry, per_key(e.geometry));
                const auto& g = e.batch_context;
                for (std::size_t i = 0; i < g.x.size(); ++i) {
                    for (std::size_t j = 0; j < g.y.size(); ++j) {
                        s.add(cal::KernelCostLookup::attn_decode_us(*r, g.x[i], g.y[j]), g.us[i * g.y.size() + j]);
                    }
                }
            }
        }
        out += s.row("attn_decode", !own.attn_decode.empty() && !from.attn_decode.empty());
    }
    {
        ErrorStats s;
        for (const auto& e : own.attn_decode_mla) {
            const double h = e.q_heads;
            const cal::UnitWork w{2.0 * h * (e.kv_lora_rank + e.rope_dim) + 2.0 * h * e.kv_lora_rank,
                                  2.0 * (e.kv_lora_rank + e.rope_dim)};
            if (const auto r = lookup.resolve_mla_decode(e.q_heads, e.kv_lora_rank, e.rope_dim, w)) {
                const auto& g = e.batch_context;
                for (std::size_t i = 0; i < g.x.size(); ++i) {
                    for (std::size_t j = 0; j < g.y.size(); ++j) {
                        s.add(cal::KernelCostLookup::mla_decode_us(*r, g.x[i], g.y[j]), g.us[i * g.y.size() + j]);
                    }
                }
            }
        }
        if (!own.attn_decode_mla.empty()) {
            out += s.row("attn_decode_mla");
        }
    }
    for (const bool routing : {false, true}) {
        ErrorStats s;
        for (const auto& e : routing ? own.moe_routing : own.moe) {
            const cal::KernelCostLookup::MoeShape shape{e.experts, e.top_k, e.hidden, e.intermediate, true, 2, false};
            const cal::MoeEntry* src = routing ? lookup.resolve_moe_routing(shape) : lookup.resolve_moe(shape);
            if (src == nullptr) {
                continue;
            }
            for (std::size_t i = 0; i < e.tokens.x.size(); ++i) {
                s.add(routing ? lookup.moe_routing_us(*src, shape, e.tokens.x[i])
                              : lookup.moe_us(*src, shape, e.tokens.x[i]),
                      e.tokens.us[i]);
            }
        }
        if (!(routing ? own.moe_routing : own.moe).empty()) {
            out += s.row(routing ? "moe_routing" : "moe");
        }
    }
    const auto widths = [&](const char* name, const std::vector<cal::WidthEntry>& mine,
                            const std::vector<cal::WidthEntry>& theirs) {
        ErrorStats s;
        const auto same_width = [](const cal::WidthEntry& a, const cal::WidthEntry& b) {
            return a.width == b.width && a.method == b.method && a.head_dim == b.head_dim;
        };
        for (const auto& e : mine) {
            if (const cal::WidthEntry* src = counterpart(theirs, e, same_width)) {
                for (std::size_t i = 0; i < e.tokens.x.size(); ++i) {
                    s.add(src->tokens.at_scaled(e.tokens.x[i], lookup.width_scale(*src, e.width)), e.tokens.us[i]);
                }
            }
        }
        if (!mine.empty()) {
            out += s.row(name);
        }
    };
    widths("rmsnorm", own.rmsnorm, from.rmsnorm);
    widths("silu_mul", own.silu_mul, from.silu_mul);
    widths("qk_norm", own.qk_norm, from.qk_norm);
    widths("sampling", own.sampling, from.sampling);
    {
        ErrorStats s;
        const auto same_rope = [](const cal::RopeEntry& a, const cal::RopeEntry& b) {
            return a.rotary_dim == b.rotary_dim && a.geometry.head_dim == b.geometry.head_dim &&
                   a.geometry.q_heads == b.geometry.q_heads && a.geometry.kv_heads == b.geometry.kv_heads;
        };
        for (const auto& e : own.rope) {
            if (const cal::RopeEntry* src = counterpart(from.rope, e, same_rope)) {
                for (std::size_t i = 0; i < e.tokens.x.size(); ++i) {
                    s.add(src->tokens.at_scaled(e.tokens.x[i], lookup.rope_scale(*src, e.geometry)), e.tokens.us[i]);
                }
            }
        }
        if (!own.rope.empty()) {
            out += s.row("rope");
        }
    }
    return out;
}

engine::MeasuredParams single_gpu_measured_params(const cal::GpuSpec& gpu,
                                                  const cal::KernelTable& table,
                                                  const cal::GpuSpec& table_gpu) {
    engine::MeasuredParams p;
    p.roofline = roofline_params(gpu);  // the GPU file's figures, as every run reads them
    p.roofline.max_cudagraph_tokens = 512;
    p.table = &table;
    p.table_roof = cal::KernelRoof::of(table_gpu);
    p.target = cal::KernelRoof::of(gpu);
    p.table_gpu = table_gpu.name;
    p.max_table_tokens = 16384;
    return p;
}

std::vector<DerivedEfficiency> derived_efficiencies(const cal::KernelTable& t, const cal::GpuSpec& gpu) {
    const double peak = gpu.bf16_dense_flops_per_s;
    const double bw = gpu.memory_bandwidth_bytes_per_s;
    std::vector<DerivedEfficiency> out;
    const auto add = [&](std::string op, std::string constant, double assumed, std::vector<double> v) {
        if (!v.empty()) {
            std::sort(v.begin(), v.end());
            const double median = metrics::percentile_sorted(v, 50);
            out.push_back({std::move(op), std::move(constant), assumed, median, static_cast<int>(v.size())});
        }
    };
    // bf16 GEMMs at their largest M when it is at least 4,096 rows: 2·M·N·K FLOPs over the bf16 peak.
    std::vector<double> gemm;
    // bf16 GEMMs at M = 1 with at least 32 MB of weights (a weight-streaming GEMV): N·K·2 bytes over the bandwidth.
    std::vector<double> weights;
    for (const auto& e : t.gemm[static_cast<std::size_t>(cal::GemmKind::kBf16)]) {
        const double nk = static_cast<double>(e.n) * static_cast<double>(e.k);
        if (!e.m.x.empty() && e.m.x.back() >= 4096) {
            gemm.push_back(2.0 * e.m.x.back() * nk / (e.m.us.back() * 1e-6) / peak);
        }
        if (!e.m.x.empty() && e.m.x.front() == 1 && 2.0 * nk >= 32e6) {
            weights.push_back(2.0 * nk / (e.m.us.front() * 1e-6) / bw);
        }
    }
    add("bf16 GEMM, M >= 4,096", "gemm_efficiency", gpu.gemm_efficiency, gemm);
    add("bf16 GEMM, M = 1, weights >= 32 MB", "bandwidth_efficiency", gpu.bandwidth_efficiency, weights);
    // Decode attention at batch >= 64 and >= 1,024 keys: the bf16 K and V read, 2·2·Hkv·hd bytes a key.
    std::vector<double> decode;
    for (const auto& e : t.attn_decode) {
        const cal::KernelGrid& g = e.batch_context;
        for (std::size_t i = 0; i < g.x.size(); ++i) {
            for (std::size_t j = 0; j < g.y.size(); ++j) {
                if (g.x[i] >= 64 && g.y[j] >= 1024) {
                    const double bytes = 4.0 * g.x[i] * g.y[j] * e.geometry.kv_heads * e.geometry.head_dim;
                    decode.push_back(bytes / (g.us[i * g.y.size() + j] * 1e-6) / bw);
                }
            }
        }
    }
    add("decode attention, batch >= 64, >= 1,024 keys", "decode_attention_efficiency", gpu.decode_attention_efficiency,
        decode);
    // Causal prefill attention at each entry's longest prompt: 4·Hq·hd·T²/2 FLOPs over the bf16 peak.
    std::vector<double> prefill;
    for (const auto& e : t.attn_prefill) {
        if (!e.tokens.x.empty()) {
            const double n = e.tokens.x.back();
            prefill.push_back(2.0 * e.geometry.q_heads * e.geometry.head_dim * n * n / (e.tokens.us.back() * 1e-6) /
                              peak);
        }
    }
    add("prefill attention, longest prompt", "attention_efficiency", gpu.attention_efficiency, prefill);
    // The routed experts' grouped GEMMs (`moe`: gate_up, SiLU·mul, down) at m_e = tokens · top_k / E of each of
    // GroupedGemmEfficiency's points: 2 · tokens · top_k · 3 · hidden · intermediate FLOPs (gated experts, as the
    // sweep times them) over the peak, beside the point's table efficiency (before vLLM's fused/grouped ratio).
    for (const auto& point : engine::GroupedGemmEfficiency::kH100Points) {
        std::vector<double> grouped;
        for (const auto& e : t.moe) {
            for (std::size_t i = 0; i < e.tokens.x.size(); ++i) {
                const double m_e = e.tokens.x[i] * e.top_k / static_cast<double>(e.experts);
                if (m_e == point.tokens_per_expert) {
                    const double f = 2.0 * e.tokens.x[i] * e.top_k * 3.0 * e.hidden * e.intermediate;
                    grouped.push_back(f / (e.tokens.us[i] * 1e-6) / peak);
                }
            }
        }
        add(fmt::format("routed-expert grouped GEMM, m_e = {:.0f}", point.tokens_per_expert), "grouped GEMM point",
            point.table_efficiency, grouped);
    }
    if (t.copy_gb_per_s) {
        add("device copy (ceilings)", "bandwidth_efficiency", gpu.bandwidth_efficiency, {*t.copy_gb_per_s * 1e9 / bw});
    }
    return out;
}

namespace {

std::string efficiency_report(const cal::KernelTable& t, const cal::GpuSpec& gpu) {
    std::string out = fmt::format("  {:<46}{:<28}{:>8}{:>10}{:>8}\n", "op class", "GPU file's constant", "value",
                                  "measured", "points");
    for (const auto& d : derived_efficiencies(t, gpu)) {
        out += fmt::format("  {:<46}{:<28}{:>8.2f}{:>10.2f}{:>8}\n", d.op, d.constant, d.assumed, d.measured_median,
                           d.points);
    }
    return out;
}

// What the measured model multiplies the routed experts by (KernelCostLookup::fused_over_grouped): vLLM's fused_moe
// over the grouped GEMM pair at each paired token count, the top-k sum taken off; empty without moe_vllm_fused.
std::string fused_moe_report(const cal::KernelTable& t, const cal::GpuSpec& gpu) {
    if (t.moe_vllm_fused.empty()) {
        return "";
    }
    const cal::KernelRoof roof = cal::KernelRoof::of(gpu);
    const cal::KernelCostLookup lookup(t, roof, roof);
    std::string out =
        "\nvLLM's fused_moe over the grouped GEMM the table times (moe_vllm_fused; the measured model scales bf16 "
        "routed experts by it,\nthe top-k sum taken off, held beyond the first and last token count)\n";
    out += fmt::format("  {:<34}", "experts / top_k / hidden / inter.");
    const auto& first = t.moe_vllm_fused.front().tokens.x;
    for (double x : first) {
        out += fmt::format("{:>7.0f}", x);
    }
    out += "  tokens\n";
    for (const auto& e : t.moe_vllm_fused) {
        out += fmt::format("  {:<34}", fmt::format("{} / {} / {} / {}", e.experts, e.top_k, e.hidden, e.intermediate));
        const cal::KernelCostLookup::MoeShape shape{e.experts, e.top_k, e.hidden, e.intermediate, true, 2, false};
        for (double x : e.tokens.x) {
            out += fmt::format("{:>7.3f}", lookup.fused_over_grouped(e, shape, x));
        }
        out += e.tokens.x == first ? "\n" : "  (own token counts)\n";
    }
    return out;
}

}  // namespace

std::string kernel_checks(const cal::GpuSpec& gpu) {
    const cal::KernelTable* own = cal::find_kernel_table(gpu);
    if (own == nullptr) {
        std::string names;
        for (const auto& t : cal::kernel_table_catalog()) {
            names += (names.empty() ? "" : ", ") + t.gpu;
        }
        throw ConfigError("command line: --check-kernels: " + gpu.name +
                          " has no kernel table (calibration/kernels/); "
                          "tables exist for: " +
                          (names.empty() ? "none" : names));
    }
    std::string out = fmt::format("-- kernel table {} ({}; {}) --\n\n", own->file, own->date, own->software);
    out +=
        "composition: the table's timed forwards against the steps composed from it (kernel terms, no host "
        "overhead)\n";
    out += forwards_report(*own, gpu, *own, gpu);
    out += fmt::format(
        "\nthe roofline's efficiencies (calibration/gpus/, docs/SOURCES.md) against this table: "
        "the median fraction of\n{}'s datasheet peak or bandwidth its kernels reached "
        "(torch's: attention is FlashAttention-2, contiguous cache)\n",
        gpu.name);
    out += efficiency_report(*own, gpu);
    out += fused_moe_report(*own, gpu);
    for (const auto& t : cal::kernel_table_catalog()) {
        if (&t == own) {
            continue;
        }
        const cal::GpuSpec* from = gpu_of(t);
        if (from == nullptr) {
            continue;
        }
        out += fmt::format(
            "\ntransfer: {}'s measured points predicted from {}'s table (efficiency on the datasheet "
            "roofline)\n",
            gpu.name, from->name);
        out += op_transfer_report(*own, gpu, t, *from);
        out += fmt::format("\ntransfer: {}'s timed forwards composed from {}'s table\n", gpu.name, from->name);
        out += forwards_report(*own, gpu, t, *from);
    }
    return out;
}

}  // namespace servesim::app
