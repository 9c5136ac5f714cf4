// GPU sweep driver (calibration/runner/gpu_sweep.h): for one model, times our kernels over each curve's natural
// variables (CUDA events, warm-up, medians; weights, KV caches and states rotated over several sets when one set
// would sit in L2), multiplies per-layer times by the number of layers of that kind, and fits the profile curves.
// What each curve contains is listed in curve_kinds() (calibration/hardware_profile.cpp) and calibration/README.md.
// With tensor parallelism N every shape is one rank's share (per_rank_spec), so the curves are one rank's times;
// MoE layers are timed as one more layer group of the `gemm` curve (router + routed experts + shared expert).
// Size (~1.2k lines): built only with CUDA (SERVESIM_CUDA); the per-kernel timings, the whole-forward graphs of the
// composition check and sweep_model share SweepContext and the layer shapes. A split into those three wants a GPU
// build to check it, which the machine that moved the rest (issue 42) did not have.
#include "calibration/runner/gpu_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <tuple>
#include <variant>
#include <vector>

#include "calibration/curve_fit.h"
#include "calibration/measurements.h"
#include "calibration/runner/sweep_plan.h"
#include "calibration/sweep_fit.h"
#include "common/error.h"
#include "kernels/gpu_runtime.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "kernels/kernels.h"

namespace servesim::calibration {

namespace k = servesim::kernels;

namespace {

constexpr double kRotateBytes = 192e6;  // rotate input sets until one pass touches this much (> 3x L2)

struct Point {
    std::vector<double> x;
    double ms;
};

int rotate_sets(double set_bytes, int max_sets = 8) {
    return std::clamp(static_cast<int>(std::ceil(kRotateBytes / std::max(set_bytes, 1.0))), 1, max_sets);
}

// What every timing of one sweep shares, passed down from sweep_model (no file-scope state):
// - stream: all sweep launches go to it so they can be captured: a serving engine replays its steps as CUDA graphs,
//   so a kernel's cost is measured inside a graph of `copies` back-to-back calls (divided by copies), which leaves out
//   the per-launch CPU latency that an isolated event-timed launch would include.
// - sustain_ms: every timed point (and every whole forward of the composition check) is measured after this long of
//   continuous load: under sustained compute the H200 sits at its power limit with its SM clock near 1500 MHz instead
//   of the 1980 MHz it boosts to from idle (logs/run9_clock_probe.log: a 2048-token GEMM is 20 % slower), and a
//   serving GPU under load lives in that state. From CalibrateOptions::sustain_ms.
struct SweepContext {
    k::StreamHandle stream = nullptr;
    double sustain_ms = 0;
};

// Median ms of body(rep) with reps sized to ~150 ms of measuring (3..25), after sweep.sustain_ms of continuous replays.
double time_adaptive(const SweepContext& sweep, const std::function<void(int)>& body) {
    const double first = k::time_median_ms(body, 1, 1);  // also the warm-up outside any capture
    const int copies = first < 0.05 ? 16 : (first < 0.5 ? 4 : 1);
    k::CudaGraph graph;
    graph.capture(sweep.stream, [&]() {
        for (int i = 0; i < copies; ++i) {
            body(i);
        }
    });
    const int reps = std::clamp(static_cast<int>(150.0 / std::max(first * copies, 1e-3)), 3, 25);
    return k::time_median_ms([&](int) { graph.replay(sweep.stream); }, 2, reps, sweep.sustain_ms) / copies;
}

k::DeviceBuffer random_bf16(std::size_t elems, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
    k::DeviceBuffer b(std::max<std::size_t>(elems, 8) * 2);
    k::fill_random_bf16(b.as<k::bf16_t>(), elems, lo, hi, seed);
    return b;
}

// The per-token work of one layer group: GEMM shapes plus elementwise ops.
struct Gemm {
    int n;
    int k;
};

struct LayerGroup {
    std::string name;
    int count = 0;
    std::vector<Gemm> gemms;
    int norm_width = 0;  // rms_norm rows of this width (fused residual add), `norms` of them
    int norms = 0;
    int silu_width = 0;  // silu_mul output width (0 = none)
    int rope_heads = 0;  // heads rotated (q + k)
    int rope_head_dim = 0;
    int rope_rot_dim = 0;
    int kv_write_row = 0;      // hkv·hd elements written per token (K and V), 0 = none
    int gated_norm_heads = 0;  // GDN output gated RMSNorm: rows of dv per token
    k::MoeShape moe;           // num_experts > 0: an MoE MLP (timed by time_moe_group, not as plain GEMMs)
};

struct AttentionShape {
    int hq, hkv, hd, count;
};

struct GdnShape {
    int hk, hv, conv_dim, count;
    k::StateDtype state_dtype;
};

struct ModelPlan {
    std::vector<LayerGroup> groups;
    std::vector<AttentionShape> attention;
    std::vector<GdnShape> gdn;
    int hidden = 0;
    int vocab = 0;         // this rank's lm_head rows
    int sample_vocab = 0;  // the whole vocabulary: vLLM gathers the logits before sampling
};

// One tensor-parallel rank's share of the model, as vLLM shards it: attention q heads ÷ N and kv heads ÷ N, kv heads
// replicated when fewer than N (QKVParallelLinear); GDN k and v heads ÷ N (Qwen3NextGatedDeltaNet); dense MLP and
// expert intermediate ÷ N (MergedColumnParallelLinear / RowParallelLinear; FusedMoE with TP shards each expert's
// intermediate dimension, the router and the shared-expert gate are replicated); lm_head vocabulary ÷ N, rounded up
// (ParallelLMHead). The shared expert is a dense MLP sharded like one.
models::ModelSpec per_rank_spec(const models::ModelSpec& spec, int tp) {
    if (tp < 1) {
        throw ConfigError(fmt::format("tensor_parallel_size must be at least 1, got {}", tp));
    }
    models::ModelSpec r = spec;
    auto divide = [&](int value, const char* what, std::size_t li) {
        if (value % tp != 0) {
            throw ConfigError(fmt::format("layer {}: {} {} is not divisible by tensor_parallel_size {}", li, what,
                                          value, tp));
        }
        return value / tp;
    };
    for (std::size_t li = 0; li < r.layers.size(); ++li) {
        auto& layer = r.layers[li];
        if (auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            a->num_q_heads = divide(a->num_q_heads, "num_attention_heads", li);
            if (a->num_kv_heads >= tp) {
                a->num_kv_heads = divide(a->num_kv_heads, "num_key_value_heads", li);
            } else if (tp % a->num_kv_heads != 0) {
                throw ConfigError(fmt::format("layer {}: tensor_parallel_size {} is not a multiple of {} kv heads", li,
                                              tp, a->num_kv_heads));
            } else {
                a->num_kv_heads = 1;  // replicated
            }
        } else if (auto* d = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            d->num_k_heads = divide(d->num_k_heads, "linear_num_key_heads", li);
            d->num_v_heads = divide(d->num_v_heads, "linear_num_value_heads", li);
        } else if (tp > 1 && (std::holds_alternative<models::Mamba2Mixer>(layer.mixer) ||
                              std::holds_alternative<models::Mamba1Mixer>(layer.mixer))) {
            throw ConfigError(fmt::format("layer {}: Mamba2 layers are not calibrated by this sweep", li));
        }
        if (auto* m = std::get_if<models::DenseMlp>(&layer.mlp)) {
            m->intermediate_size = divide(m->intermediate_size, "intermediate_size", li);
        } else if (auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            e->moe_intermediate_size = divide(e->moe_intermediate_size, "moe_intermediate_size", li);
            e->shared_expert_intermediate_size =
                divide(e->shared_expert_intermediate_size, "shared_expert_intermediate_size", li);
        }
    }
    r.vocab_size = (spec.vocab_size + tp - 1) / tp;
    return r;
}

// Qwen3-Next-style MoE MLP of one rank: softmax top-k renormalised (norm_topk_prob is true for every Qwen3 MoE
// preset; the renormalisation costs the same either way) and a sigmoid-gated shared expert when there is one.
k::MoeShape moe_shape(const models::MoeMlp& m, int hidden) {
    k::MoeShape s;
    s.hidden = hidden;
    s.num_experts = m.num_experts;
    s.top_k = m.num_experts_per_tok;
    s.intermediate = m.moe_intermediate_size;
    s.shared_intermediate = m.shared_expert_intermediate_size;
    s.shared_expert_gate = m.shared_expert_intermediate_size > 0;
    s.norm_topk_prob = true;
    return s;
}

ModelPlan plan_model(const models::ModelSpec& spec) {
    ModelPlan plan;
    plan.hidden = spec.hidden_size;
    plan.vocab = spec.vocab_size;
    const int h = spec.hidden_size;
    std::map<std::string, LayerGroup> groups;
    std::map<std::tuple<int, int, int>, int> attn;
    std::map<std::tuple<int, int, int, int>, int> gdn;
    for (std::size_t li = 0; li < spec.layers.size(); ++li) {
        const auto& layer = spec.layers[li];
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            if (a->head_dim != 128 && a->head_dim != 256) {
                throw ConfigError(
                    fmt::format("layer {}: attention head_dim {} is not calibrated (128 or 256)", li, a->head_dim));
            }
            const std::string key = fmt::format("attention_proj hq{} hkv{} hd{}{}", a->num_q_heads, a->num_kv_heads,
                                                a->head_dim, a->output_gate ? " gated" : "");
            auto& g = groups[key];
            g.name = key;
            ++g.count;
            const int q_out = a->num_q_heads * a->head_dim * (a->output_gate ? 2 : 1);
            g.gemms = {{q_out + 2 * a->num_kv_heads * a->head_dim, h}, {h, a->num_q_heads * a->head_dim}};
            g.rope_heads = a->num_q_heads + a->num_kv_heads;
            g.rope_head_dim = a->head_dim;
            g.rope_rot_dim = a->output_gate ? a->head_dim / 4 : a->head_dim;
            g.kv_write_row = a->num_kv_heads * a->head_dim;
            g.norm_width = h;
            g.norms = 1;
            ++attn[{a->num_q_heads, a->num_kv_heads, a->head_dim}];
        } else if (const auto* d = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            if (d->k_head_dim != 128 || d->v_head_dim != 128 || d->conv_kernel != 4) {
                throw ConfigError(
                    fmt::format("layer {}: GDN dims other than 128/128 with conv 4 are not calibrated", li));
            }
            const int conv_dim = 2 * d->num_k_heads * d->k_head_dim + d->num_v_heads * d->v_head_dim;
            const std::string key = fmt::format("gdn_proj hk{} hv{}", d->num_k_heads, d->num_v_heads);
            auto& g = groups[key];
            g.name = key;
            ++g.count;
            g.gemms = {{conv_dim + d->num_v_heads * d->v_head_dim, h},
                       {2 * d->num_v_heads, h},
                       {h, d->num_v_heads * d->v_head_dim}};
            g.norm_width = h;
            g.norms = 1;
            g.gated_norm_heads = d->num_v_heads;
            ++gdn[{d->num_k_heads, d->num_v_heads, conv_dim, d->ssm_state_dtype == models::DType::kFloat32 ? 1 : 0}];
        } else if (std::holds_alternative<models::Mamba2Mixer>(layer.mixer) ||
                   std::holds_alternative<models::Mamba1Mixer>(layer.mixer)) {
            throw ConfigError(fmt::format("layer {}: Mamba2 layers are not calibrated by this sweep", li));
        }
        if (const auto* m = std::get_if<models::DenseMlp>(&layer.mlp)) {
            const std::string key = fmt::format("mlp I{}{}", m->intermediate_size, m->gated ? "" : " relu2");
            auto& g = groups[key];
            g.name = key;
            ++g.count;
            g.gemms = {{m->gated ? 2 * m->intermediate_size : m->intermediate_size, h}, {h, m->intermediate_size}};
            g.silu_width = m->gated ? m->intermediate_size : 0;
            g.norm_width = h;
            g.norms = 1;
        } else if (const auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            if (!e->gated) {
                throw ConfigError(fmt::format("layer {}: non-gated (relu2) experts are not calibrated", li));
            }
            const std::string key = fmt::format("moe E{} k{} I{} shared{}", e->num_experts, e->num_experts_per_tok,
                                                e->moe_intermediate_size, e->shared_expert_intermediate_size);
            auto& g = groups[key];
            g.name = key;
            ++g.count;
            g.moe = moe_shape(*e, h);
            g.norm_width = h;
            g.norms = 1;
        }
    }
    for (auto& [key, g] : groups) {
        plan.groups.push_back(g);
    }
    for (auto& [key, n] : attn) {
        plan.attention.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), n});
    }
    for (auto& [key, n] : gdn) {
        plan.gdn.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), n,
                            std::get<3>(key) ? k::StateDtype::kFp32 : k::StateDtype::kBf16});
    }
    return plan;
}

// One curve's points as calibration/sweep_fit.h's SweepPoints, which the fits take (the one policy shared with
// --refit-points); written to <log_dir>/<name>.csv when a log directory is set.
SweepPoints record_points(const std::string& log_dir,
                          const std::string& name,
                          const std::vector<std::string>& vars,
                          const std::vector<Point>& pts) {
    SweepPoints sp;
    sp.variables = vars;
    for (const auto& p : pts) {
        sp.rows.push_back(p.x);
        sp.ms.push_back(p.ms);
    }
    if (!log_dir.empty()) {
        write_sweep_points(log_dir + "/" + name + ".csv", sp);
    }
    return sp;
}

// ---- gemm: all per-token work of every layer group ----
// With `gemm8` (weight_dtype fp8) each GEMM runs as vLLM's fp8 W8A8 linear: dynamic per-token quantization of its
// input, then the e4m3 matmul (kernels/gemm_fp8.cu); the weights are e4m3, half the bytes. With a block-scaled
// `gemm8` (weight_dtype fp8-block) the quantization is per token and 128-column group and the matmul applies the
// 1×128 and 128×128 scales (vLLM's W8A8BlockFp8LinearOp).
double time_group(const SweepContext& sweep, const LayerGroup& g, int m, k::GemmRunner& gemm, std::uint64_t seed,
                  k::Fp8GemmRunner* gemm8 = nullptr) {
    const std::size_t weight_elem_bytes = gemm8 != nullptr ? 1 : 2;
    std::size_t weight_bytes = 0;
    int max_n = 0;
    int max_k = 0;
    for (const auto& s : g.gemms) {
        weight_bytes += static_cast<std::size_t>(s.n) * s.k * weight_elem_bytes;
        max_n = std::max(max_n, s.n);
        max_k = std::max(max_k, s.k);
    }
    const int sets = rotate_sets(static_cast<double>(weight_bytes));
    std::vector<std::vector<k::DeviceBuffer>> weights(sets);
    for (int s = 0; s < sets; ++s) {
        for (std::size_t i = 0; i < g.gemms.size(); ++i) {
            const std::size_t n = g.gemms[i].n;
            const std::size_t kk = g.gemms[i].k;
            k::DeviceBuffer w = random_bf16(n * kk, seed + 17 * s + i, -0.05f, 0.05f);
            if (gemm8 != nullptr) {  // random e4m3 weights: the bf16 ones quantized row by row
                k::DeviceBuffer w8(n * kk);
                k::DeviceBuffer row_scales(n * 4);
                k::quantize_fp8_per_token(w.as<k::bf16_t>(), w8.as<k::fp8_t>(), row_scales.as<float>(),
                                          static_cast<int>(n), static_cast<int>(kk), sweep.stream);
                k::device_synchronize();
                w = std::move(w8);
            }
            weights[s].push_back(std::move(w));
        }
    }
    // fp8: the GEMMs run on the token count padded to 16 (Fp8GemmRunner), so the activations have room for it.
    const int m_gemm = gemm8 != nullptr ? (m + 15) / 16 * 16 : m;
    // fp8: the quantized input of each GEMM, its per-token scales, and one per-tensor scale pair for the matmul.
    const std::size_t mm8 = gemm8 != nullptr ? static_cast<std::size_t>(m_gemm) : 1;
    k::DeviceBuffer a8(mm8 * static_cast<std::size_t>(std::max(max_k, 16)));
    // Layout: the matmul's a_scale at [0] and w_scale at [16] (scale pointers 16-byte aligned), per-token from [32].
    k::DeviceBuffer a8_scales((mm8 + 32) * 4);
    {
        const std::vector<float> unit(32, 1.0f / 448.f);
        k::copy_to_device(a8_scales.get(), unit.data(), unit.size() * 4);
    }
    // fp8-block: the per-token-group activation scales and one unit scale per 128×128 weight tile of the largest GEMM.
    const bool block = gemm8 != nullptr && gemm8->scaling() == k::Fp8Scaling::kBlock128;
    k::DeviceBuffer group_scales(block ? mm8 * static_cast<std::size_t>(max_k / 128) * 4 : 16);
    std::size_t tile_scales = 4;
    for (const auto& s : g.gemms) {
        tile_scales = std::max(tile_scales, block ? k::fp8_block_weight_scale_count(s.n, s.k) : 4);
    }
    k::DeviceBuffer w_tile_scales(tile_scales * 4);
    {
        const std::vector<float> unit(tile_scales, 1.0f / 448.f);
        k::copy_to_device(w_tile_scales.get(), unit.data(), unit.size() * 4);
    }
    const std::size_t mm = static_cast<std::size_t>(m);
    const int width = std::max(max_n, max_k);
    k::DeviceBuffer x = random_bf16(static_cast<std::size_t>(m_gemm) * width, seed + 1000);
    k::DeviceBuffer y = random_bf16(static_cast<std::size_t>(m_gemm) * width, seed + 1001);
    k::DeviceBuffer residual = random_bf16(mm * std::max(g.norm_width, 8), seed + 1002);
    k::DeviceBuffer norm_w = random_bf16(std::max(g.norm_width, 128), seed + 1003, 0.5f, 1.5f);
    std::vector<int> positions(mm);
    std::iota(positions.begin(), positions.end(), 0);
    k::DeviceBuffer pos(mm * 4);
    k::copy_to_device(pos.get(), positions.data(), mm * 4);
    // KV write: slots spread over a cache of max(4·m, 65536) tokens.
    const std::size_t cache_tokens = std::max<std::size_t>(4 * mm, 65536);
    k::DeviceBuffer kv_cache(g.kv_write_row > 0 ? cache_tokens * g.kv_write_row * 2 * 2 : 16);
    std::vector<int> slot_host(mm);
    std::mt19937 rng(static_cast<unsigned>(seed));
    for (std::size_t i = 0; i < mm; ++i) {
        slot_host[i] = static_cast<int>(rng() % cache_tokens);
    }
    k::DeviceBuffer slots(mm * 4);
    k::copy_to_device(slots.get(), slot_host.data(), mm * 4);
    auto* xb = x.as<k::bf16_t>();
    auto* yb = y.as<k::bf16_t>();
    auto body = [&](int rep) {
        const auto& w = weights[rep % sets];
        for (int n = 0; n < g.norms; ++n) {
            k::rms_norm(xb, residual.as<k::bf16_t>(), norm_w.as<k::bf16_t>(), yb, m, g.norm_width, 1e-6f, sweep.stream);
        }
        for (std::size_t i = 0; i < g.gemms.size(); ++i) {
            if (block) {
                k::quantize_fp8_per_token_group(i % 2 == 0 ? yb : xb, a8.as<k::fp8_t>(), group_scales.as<float>(),
                                                m_gemm, g.gemms[i].k, sweep.stream);
                gemm8->run(a8.as<k::fp8_t>(), w[i].as<k::fp8_t>(), i % 2 == 0 ? xb : yb, m_gemm, g.gemms[i].n,
                           g.gemms[i].k, group_scales.as<float>(), w_tile_scales.as<float>(), sweep.stream);
            } else if (gemm8 != nullptr) {
                auto* scales = a8_scales.as<float>();
                k::quantize_fp8_per_token(i % 2 == 0 ? yb : xb, a8.as<k::fp8_t>(), scales + 32, m_gemm,
                                          g.gemms[i].k, sweep.stream);
                gemm8->run(a8.as<k::fp8_t>(), w[i].as<k::fp8_t>(), i % 2 == 0 ? xb : yb, m_gemm, g.gemms[i].n,
                           g.gemms[i].k, scales, scales + 16, sweep.stream);
            } else {
                gemm.run(i % 2 == 0 ? yb : xb, w[i].as<k::bf16_t>(), i % 2 == 0 ? xb : yb, m, g.gemms[i].n,
                         g.gemms[i].k, sweep.stream);
            }
            if (i == 0 && g.silu_width > 0) {
                k::silu_mul(xb, yb, m, g.silu_width, sweep.stream);
            }
            if (i == 0 && g.rope_heads > 0) {
                k::rope(xb, pos.as<int>(), m, g.rope_heads, g.rope_head_dim, g.rope_rot_dim, 1e6f, sweep.stream);
                k::KvWriteArgs kw;
                kw.k = xb;
                kw.v = xb;
                kw.k_cache = kv_cache.get();
                kw.v_cache = static_cast<char*>(kv_cache.get()) + cache_tokens * g.kv_write_row * 2;
                kw.slot_mapping = slots.as<int>();
                kw.num_tokens = m;
                kw.num_kv_heads = g.kv_write_row / g.rope_head_dim;
                kw.head_dim = g.rope_head_dim;
                k::kv_cache_write(kw, sweep.stream);
            }
            if (i == 0 && g.gated_norm_heads > 0) {
                k::rms_norm(xb, nullptr, norm_w.as<k::bf16_t>(), yb, m * g.gated_norm_heads, 128, 1e-6f, sweep.stream);
                k::silu_mul(xb, yb, m, g.gated_norm_heads * 128, sweep.stream);
            }
        }
    };
    return time_adaptive(sweep, body);
}

// ---- MoE MLP of one layer: post-attention norm, router + top-k, permute, grouped expert GEMMs, shared expert ----
// One layer's weights (512 experts × 3 × 2048 × 256 bf16 = 1.6 GB per TP-2 rank) are allocated once for the whole
// token grid and rotated only when a set would sit in L2 (rotate_sets). The routing of each token count is drawn
// from a seeded uniform random router on the host (moe_random_routing), so the grouped GEMMs' per-expert row counts
// are known when the graph is captured; at decode sizes it also fixes how many distinct experts the step touches.
struct MoeLayerWeights {
    std::vector<k::DeviceBuffer> buffers;  // per set: router, w13, w2, shared w13, shared w2, shared gate
    std::vector<k::MoeWeights> sets;
};

MoeLayerWeights make_moe_weights(const k::MoeShape& s, std::uint64_t seed) {
    const std::size_t h = s.hidden;
    const std::size_t e = s.num_experts;
    const std::size_t inter = s.intermediate;
    const std::size_t is = s.shared_intermediate;
    const double set_bytes = 2.0 * (e * h + e * 3 * inter * h + 3 * is * h + h);
    MoeLayerWeights w;
    const int sets = rotate_sets(set_bytes);
    w.buffers.reserve(static_cast<std::size_t>(sets) * 6);
    for (int i = 0; i < sets; ++i) {
        const std::uint64_t sd = seed + 31 * i;
        w.buffers.push_back(random_bf16(e * h, sd + 1, -0.05f, 0.05f));
        w.buffers.push_back(random_bf16(e * 2 * inter * h, sd + 2, -0.05f, 0.05f));
        w.buffers.push_back(random_bf16(e * h * inter, sd + 3, -0.05f, 0.05f));
        w.buffers.push_back(random_bf16(std::max<std::size_t>(2 * is * h, 8), sd + 4, -0.05f, 0.05f));
        w.buffers.push_back(random_bf16(std::max<std::size_t>(h * is, 8), sd + 5, -0.05f, 0.05f));
        w.buffers.push_back(random_bf16(h, sd + 6, -0.05f, 0.05f));
        const auto* b = &w.buffers[w.buffers.size() - 6];
        k::MoeWeights mw;
        mw.router = b[0].as<k::bf16_t>();
        mw.w13 = b[1].as<k::bf16_t>();
        mw.w2 = b[2].as<k::bf16_t>();
        mw.shared_w13 = is > 0 ? b[3].as<k::bf16_t>() : nullptr;
        mw.shared_w2 = is > 0 ? b[4].as<k::bf16_t>() : nullptr;
        mw.shared_gate = s.shared_expert_gate ? b[5].as<k::bf16_t>() : nullptr;
        w.sets.push_back(mw);
    }
    return w;
}

double time_moe_group(
    const SweepContext& sweep, const LayerGroup& g, int m, const MoeLayerWeights& w, std::uint64_t seed) {
    const std::size_t h = g.moe.hidden;
    const std::size_t mm = static_cast<std::size_t>(m);
    k::DeviceBuffer x = random_bf16(mm * h, seed + 1000);
    k::DeviceBuffer y = random_bf16(mm * h, seed + 1001);
    k::DeviceBuffer residual = random_bf16(mm * h, seed + 1002);
    k::DeviceBuffer norm_w = random_bf16(h, seed + 1003, 0.5f, 1.5f);
    k::MoeRunner runner(g.moe, m);
    const std::vector<int> ids = k::moe_random_routing(m, g.moe.top_k, g.moe.num_experts, seed);
    runner.set_routing(ids.data(), m);
    auto* xb = x.as<k::bf16_t>();
    auto* yb = y.as<k::bf16_t>();
    const int sets = static_cast<int>(w.sets.size());
    return time_adaptive(sweep, [&](int rep) {
        const k::MoeWeights& mw = w.sets[rep % sets];
        k::rms_norm(xb, residual.as<k::bf16_t>(), norm_w.as<k::bf16_t>(), yb, m, g.norm_width, 1e-6f, sweep.stream);
        runner.route(yb, m, mw, sweep.stream);
        runner.forward_experts(yb, mw, xb, sweep.stream);
    });
}

// ---- lm_head: final norm + GEMM on `s` rows ----
double time_lm_head(const SweepContext& sweep, int s, int hidden, int vocab, k::GemmRunner& gemm, k::DeviceBuffer& w) {
    k::DeviceBuffer x = random_bf16(static_cast<std::size_t>(s) * hidden, 31);
    k::DeviceBuffer y = random_bf16(static_cast<std::size_t>(s) * hidden, 32);
    k::DeviceBuffer nw = random_bf16(hidden, 33, 0.5f, 1.5f);
    k::DeviceBuffer logits(static_cast<std::size_t>(s) * vocab * 2);
    return time_adaptive(sweep, [&](int) {
        k::rms_norm(x.as<k::bf16_t>(), nullptr, nw.as<k::bf16_t>(), y.as<k::bf16_t>(), s, hidden, 1e-6f, sweep.stream);
        gemm.run(y.as<k::bf16_t>(), w.as<k::bf16_t>(), logits.as<k::bf16_t>(), s, vocab, hidden, sweep.stream);
    });
}

// ---- overhead: sampling (argmax over the vocabulary) + embedding gather for `s` sequences ----
double time_overhead(
    const SweepContext& sweep, int s, int hidden, int vocab, int sample_vocab, k::DeviceBuffer& table) {
    k::DeviceBuffer logits = random_bf16(static_cast<std::size_t>(s) * sample_vocab, 41, -5.f, 5.f);
    k::DeviceBuffer tokens(static_cast<std::size_t>(s) * 4);
    k::DeviceBuffer out(static_cast<std::size_t>(s) * hidden * 2);
    std::vector<int> ids(s);
    for (int i = 0; i < s; ++i) {
        ids[i] = (i * 7919) % vocab;
    }
    k::DeviceBuffer dids(static_cast<std::size_t>(s) * 4);
    k::copy_to_device(dids.get(), ids.data(), ids.size() * 4);
    return time_adaptive(sweep, [&](int) {
        k::embedding_gather(table.as<k::bf16_t>(), dids.as<int>(), out.as<k::bf16_t>(), s, hidden, sweep.stream);
        k::argmax_rows(logits.as<k::bf16_t>(), tokens.as<int>(), s, sample_vocab, sweep.stream);
    });
}

double time_prefill_attention(const SweepContext& sweep, const AttentionShape& a, int chunk, int cached) {
    const int total = chunk + cached;
    k::DeviceBuffer q = random_bf16(static_cast<std::size_t>(chunk) * a.hq * a.hd, 51);
    k::DeviceBuffer kk = random_bf16(static_cast<std::size_t>(total) * a.hkv * a.hd, 52);
    k::DeviceBuffer vv = random_bf16(static_cast<std::size_t>(total) * a.hkv * a.hd, 53);
    k::DeviceBuffer o(q.bytes());
    k::PrefillAttentionArgs args;
    args.q = q.as<k::bf16_t>();
    args.k = kk.as<k::bf16_t>();
    args.v = vv.as<k::bf16_t>();
    args.o = o.as<k::bf16_t>();
    args.chunk_tokens = chunk;
    args.cached_tokens = cached;
    args.num_q_heads = a.hq;
    args.num_kv_heads = a.hkv;
    args.head_dim = a.hd;
    args.scale = 1.0f / std::sqrt(static_cast<float>(a.hd));
    return time_adaptive(sweep, [&](int) { k::prefill_attention(args, sweep.stream); });
}

double time_decode_attention(const SweepContext& sweep, const AttentionShape& a, int seqs, int ctx, int sms) {
    const int bs = 16;
    const int mb = (ctx + bs - 1) / bs;
    const std::size_t blocks = static_cast<std::size_t>(seqs) * mb;
    const std::size_t set_bytes = blocks * bs * a.hkv * a.hd * 2 * 2;
    const int sets = rotate_sets(static_cast<double>(set_bytes));
    k::DeviceBuffer cache = random_bf16(set_bytes / 2 * sets, 61, -0.5f, 0.5f);
    std::vector<int> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    k::DeviceBuffer dt(blocks * 4);
    k::copy_to_device(dt.get(), table.data(), blocks * 4);
    std::vector<int> lens(seqs, ctx);
    k::DeviceBuffer dl(static_cast<std::size_t>(seqs) * 4);
    k::copy_to_device(dl.get(), lens.data(), lens.size() * 4);
    k::DeviceBuffer q = random_bf16(static_cast<std::size_t>(seqs) * a.hq * a.hd, 62);
    k::DeviceBuffer o(q.bytes());
    const int splits = k::decode_attention_splits(seqs, a.hkv, ctx, sms);
    k::DeviceBuffer ws(std::max<std::size_t>(16, k::decode_attention_workspace_bytes(seqs, a.hq, a.hd, splits)));
    k::DecodeAttentionArgs args;
    args.q = q.as<k::bf16_t>();
    args.block_table = dt.as<int>();
    args.max_blocks_per_seq = mb;
    args.seq_lens = dl.as<int>();
    args.num_seqs = seqs;
    args.num_q_heads = a.hq;
    args.num_kv_heads = a.hkv;
    args.head_dim = a.hd;
    args.block_size = bs;
    args.scale = 1.0f / std::sqrt(static_cast<float>(a.hd));
    args.o = o.as<k::bf16_t>();
    args.workspace = ws.as<float>();
    args.num_splits = splits;
    return time_adaptive(sweep, [&](int rep) {
        char* base = static_cast<char*>(cache.get()) + (rep % sets) * set_bytes;
        args.k_cache = base;
        args.v_cache = base + set_bytes / 2;
        k::decode_attention(args, sweep.stream);
    });
}

double time_gdn_prefill(const SweepContext& sweep, const GdnShape& g, int seqs, int len) {
    const std::size_t t = static_cast<std::size_t>(seqs) * len;
    k::DeviceBuffer x = random_bf16(t * g.conv_dim, 71);
    k::DeviceBuffer xc(x.bytes());
    k::DeviceBuffer cw = random_bf16(static_cast<std::size_t>(g.conv_dim) * 4, 72);
    k::DeviceBuffer cs(static_cast<std::size_t>(seqs) * 3 * g.conv_dim * 2);
    k::DeviceBuffer v = random_bf16(t * g.hv * 128, 73);
    k::DeviceBuffer gg(t * g.hv * 4);
    k::DeviceBuffer beta(t * g.hv * 4);
    k::fill_random_f32(gg.as<float>(), t * g.hv, -0.3f, -0.005f, 74);
    k::fill_random_f32(beta.as<float>(), t * g.hv, 0.1f, 0.9f, 75);
    k::DeviceBuffer o(t * g.hv * 128 * 2);
    const std::size_t esz = g.state_dtype == k::StateDtype::kFp32 ? 4 : 2;
    k::DeviceBuffer st(static_cast<std::size_t>(seqs) * g.hv * 128 * 128 * esz);
    k::DeviceBuffer ws(k::gdn_prefill_workspace_bytes(seqs, len, g.hk, g.hv));
    k::GdnPrefillArgs a;
    // q and k are slices of the conv output (as in the model: q | k | v after the conv); we pass the same buffer
    // layout [t, hk, 128] by using the first 2·hk·128 channels' worth of a separate random buffer.
    k::DeviceBuffer qk = random_bf16(t * g.hk * 128 * 2, 76);
    a.q = qk.as<k::bf16_t>();
    a.k = qk.as<k::bf16_t>() + t * g.hk * 128;
    a.v = v.as<k::bf16_t>();
    a.g = gg.as<float>();
    a.beta = beta.as<float>();
    a.o = o.as<k::bf16_t>();
    a.state = st.get();
    a.state_dtype = g.state_dtype;
    a.num_seqs = seqs;
    a.seq_len = len;
    a.num_k_heads = g.hk;
    a.num_v_heads = g.hv;
    a.scale = 1.0f / std::sqrt(128.0f);
    a.workspace = ws.get();
    return time_adaptive(sweep, [&](int) {
        k::conv1d_prefill(x.as<k::bf16_t>(), cw.as<k::bf16_t>(), cs.as<k::bf16_t>(), false, xc.as<k::bf16_t>(), seqs,
                          len, g.conv_dim, sweep.stream);
        k::gdn_prefill(a, sweep.stream);
    });
}

double time_gdn_decode(const SweepContext& sweep, const GdnShape& g, int seqs) {
    const std::size_t esz = g.state_dtype == k::StateDtype::kFp32 ? 4 : 2;
    const std::size_t set_bytes = static_cast<std::size_t>(seqs) * g.hv * 128 * 128 * esz;
    const int sets = rotate_sets(static_cast<double>(set_bytes));
    k::DeviceBuffer st(set_bytes * sets);
    if (esz == 4) {
        k::fill_random_f32(st.as<float>(), st.bytes() / 4, -0.5f, 0.5f, 81);
    } else {
        k::fill_random_bf16(st.as<k::bf16_t>(), st.bytes() / 2, -0.5f, 0.5f, 81);
    }
    const std::size_t s = static_cast<std::size_t>(seqs);
    k::DeviceBuffer x = random_bf16(s * g.conv_dim, 82);
    k::DeviceBuffer xc(x.bytes());
    k::DeviceBuffer cw = random_bf16(static_cast<std::size_t>(g.conv_dim) * 4, 83);
    k::DeviceBuffer cs = random_bf16(s * 3 * g.conv_dim * sets, 84);
    k::DeviceBuffer qk = random_bf16(s * g.hk * 128 * 2, 85);
    k::DeviceBuffer v = random_bf16(s * g.hv * 128, 86);
    k::DeviceBuffer gg(s * g.hv * 4);
    k::DeviceBuffer beta(s * g.hv * 4);
    k::fill_random_f32(gg.as<float>(), s * g.hv, -0.3f, -0.005f, 87);
    k::fill_random_f32(beta.as<float>(), s * g.hv, 0.1f, 0.9f, 88);
    k::DeviceBuffer o(s * g.hv * 128 * 2);
    k::GdnDecodeArgs a;
    a.q = qk.as<k::bf16_t>();
    a.k = qk.as<k::bf16_t>() + s * g.hk * 128;
    a.v = v.as<k::bf16_t>();
    a.g = gg.as<float>();
    a.beta = beta.as<float>();
    a.o = o.as<k::bf16_t>();
    a.state_dtype = g.state_dtype;
    a.num_seqs = seqs;
    a.num_k_heads = g.hk;
    a.num_v_heads = g.hv;
    a.scale = 1.0f / std::sqrt(128.0f);
    return time_adaptive(sweep, [&](int rep) {
        const int set = rep % sets;
        k::conv1d_update(x.as<k::bf16_t>(), cw.as<k::bf16_t>(), cs.as<k::bf16_t>() + set * s * 3 * g.conv_dim,
                         xc.as<k::bf16_t>(), seqs, g.conv_dim, sweep.stream);
        a.state = static_cast<char*>(st.get()) + set * set_bytes;
        k::gdn_decode(a, sweep.stream);
    });
}

double time_snapshot(const SweepContext& sweep, const GdnShape& g, int n) {
    const std::size_t esz = g.state_dtype == k::StateDtype::kFp32 ? 4 : 2;
    const std::size_t per = static_cast<std::size_t>(g.hv) * 128 * 128 * esz;
    k::DeviceBuffer src(per * n);
    k::DeviceBuffer dst(per * n);
    k::fill_random_f32(src.as<float>(), src.bytes() / 4, -1, 1, 91);
    std::vector<int> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    k::DeviceBuffer d_ids(static_cast<std::size_t>(n) * 4);
    k::copy_to_device(d_ids.get(), ids.data(), ids.size() * 4);
    return time_adaptive(sweep, [&](int) {
        k::gdn_snapshot_copy(src.get(), dst.get(), g.state_dtype, d_ids.as<int>(), d_ids.as<int>(), n, g.hv,
                             sweep.stream);
    });
}

// ---- composition: whole forwards of the model with the same kernels, captured in one CUDA graph ----
// Every layer has its own weights, KV cache (paged, identity block table) or GDN state, as in a serving engine; the
// step is embedding gather → layers in model order → final norm, lm_head on the sampled rows, argmax. The GDN gate
// math (a few tiny elementwise ops on [tokens, Hv]) is not run; g and beta come from fixed random buffers.
struct ForwardModel {
    struct LayerW {
        bool attention = false;
        bool gdn = false;
        bool mlp = false;
        std::vector<k::DeviceBuffer> mixer_w;  // attention: qkv, o; GDN: qkvz, ba, out
        std::vector<k::DeviceBuffer> mlp_w;    // gate_up (or up), down
        int hq = 0, hkv = 0, hd = 0, qkv_n = 0, rot = 0;
        int hk = 0, hv = 0, conv_dim = 0;
        k::StateDtype state_dtype = k::StateDtype::kFp32;
        int inter = 0;
        bool gated_mlp = true;
        bool moe = false;
        k::MoeShape moe_shape;
        std::vector<k::MoeWeights> moe_w;  // one set (MoeLayerWeights.sets[0])
    };

    std::vector<LayerW> layers;
    std::vector<MoeLayerWeights> moe_weights;  // per MoE layer
    k::DeviceBuffer lm;  // [vocab, h], also the embedding table
    k::DeviceBuffer norm_w;
    int h = 0;
    int vocab = 0;
};

ForwardModel build_forward_model(const models::ModelSpec& spec) {
    ForwardModel f;
    f.h = spec.hidden_size;
    f.vocab = spec.vocab_size;
    const int h = f.h;
    std::uint64_t seed = 5000;
    auto w = [&](std::size_t n, std::size_t kk) { return random_bf16(n * kk, ++seed, -0.02f, 0.02f); };
    for (const auto& layer : spec.layers) {
        ForwardModel::LayerW L;
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            L.attention = true;
            L.hq = a->num_q_heads;
            L.hkv = a->num_kv_heads;
            L.hd = a->head_dim;
            L.qkv_n = a->num_q_heads * a->head_dim * (a->output_gate ? 2 : 1) + 2 * a->num_kv_heads * a->head_dim;
            L.rot = a->output_gate ? a->head_dim / 4 : a->head_dim;
            L.mixer_w.push_back(w(L.qkv_n, h));
            L.mixer_w.push_back(w(h, static_cast<std::size_t>(L.hq) * L.hd));
        } else if (const auto* d = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            L.gdn = true;
            L.hk = d->num_k_heads;
            L.hv = d->num_v_heads;
            L.conv_dim = 2 * L.hk * 128 + L.hv * 128;
            L.state_dtype = d->ssm_state_dtype == models::DType::kFloat32 ? k::StateDtype::kFp32 : k::StateDtype::kBf16;
            L.mixer_w.push_back(w(L.conv_dim + L.hv * 128, h));
            L.mixer_w.push_back(w(2 * L.hv, h));
            L.mixer_w.push_back(w(h, static_cast<std::size_t>(L.hv) * 128));
            L.mixer_w.push_back(random_bf16(static_cast<std::size_t>(L.conv_dim) * 4, ++seed));
        }
        if (const auto* m = std::get_if<models::DenseMlp>(&layer.mlp)) {
            L.mlp = true;
            L.inter = m->intermediate_size;
            L.gated_mlp = m->gated;
            L.mlp_w.push_back(w(m->gated ? 2 * L.inter : L.inter, h));
            L.mlp_w.push_back(w(h, L.inter));
        } else if (const auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            L.moe = true;
            L.moe_shape = moe_shape(*e, h);
            f.moe_weights.push_back(make_moe_weights(L.moe_shape, seed += 16));
            L.moe_w = f.moe_weights.back().sets;
        }
        f.layers.push_back(std::move(L));
    }
    f.lm = w(f.vocab, h);
    f.norm_w = random_bf16(std::max(h, 256), ++seed, 0.5f, 1.5f);
    return f;
}

// Median ms of one whole step: `batch` sequences each adding `new_tokens` tokens after `cached` tokens
// (prefill: batch 1, new_tokens T, cached 0; decode: batch B, new_tokens 1, cached C).
double time_forward(const SweepContext& sweep,
                    const ForwardModel& f,
                    int batch,
                    int new_tokens,
                    int cached,
                    k::GemmRunner& gemm,
                    int sms) {
    const int tokens = batch * new_tokens;
    const bool decode = new_tokens == 1;
    const std::size_t t = static_cast<std::size_t>(tokens);
    const int h = f.h;
    int max_n = h;
    for (const auto& L : f.layers) {
        max_n = std::max({max_n, L.qkv_n, L.conv_dim + L.hv * 128, L.gated_mlp ? 2 * L.inter : L.inter});
    }
    k::DeviceBuffer x = random_bf16(t * h, 1);
    k::DeviceBuffer res = random_bf16(t * h, 2);
    k::DeviceBuffer y = random_bf16(t * max_n, 3);
    k::DeviceBuffer big = random_bf16(t * max_n, 4);
    k::DeviceBuffer conv_out = random_bf16(t * max_n, 5);
    std::vector<int> ids(t);
    std::vector<int> pos(t);
    for (std::size_t i = 0; i < t; ++i) {
        ids[i] = static_cast<int>((i * 7919) % f.vocab);
        pos[i] = decode ? cached : static_cast<int>(i % new_tokens) + cached;
    }
    k::DeviceBuffer d_ids(t * 4);
    k::DeviceBuffer d_pos(t * 4);
    k::copy_to_device(d_ids.get(), ids.data(), t * 4);
    k::copy_to_device(d_pos.get(), pos.data(), t * 4);
    // Paged KV per attention layer. Decode: block tables shuffled as in the decode sweep (a serving engine's
    // tables are scattered once blocks have been freed and reused); prefill: identity, since our prefill kernel
    // reads the sequence's K/V contiguously. Each new token's slot follows its sequence's table.
    const int ctx = cached + new_tokens;
    const int bs = 16;
    const int mb = (ctx + bs - 1) / bs;
    std::vector<int> table(static_cast<std::size_t>(batch) * mb);
    std::iota(table.begin(), table.end(), 0);
    if (decode) {
        std::shuffle(table.begin(), table.end(), std::mt19937(7));
    }
    std::vector<int> lens(batch, ctx);
    std::vector<int> slots(t);
    for (int s = 0; s < batch; ++s) {
        for (int i = 0; i < new_tokens; ++i) {
            const int p = cached + i;
            slots[static_cast<std::size_t>(s) * new_tokens + i] =
                table[static_cast<std::size_t>(s) * mb + p / bs] * bs + p % bs;
        }
    }
    k::DeviceBuffer d_table(table.size() * 4);
    k::DeviceBuffer d_lens(lens.size() * 4);
    k::DeviceBuffer d_slots(t * 4);
    k::copy_to_device(d_table.get(), table.data(), table.size() * 4);
    k::copy_to_device(d_lens.get(), lens.data(), lens.size() * 4);
    k::copy_to_device(d_slots.get(), slots.data(), t * 4);
    std::vector<k::DeviceBuffer> kv;     // per attention layer: K then V
    std::vector<k::DeviceBuffer> state;  // per GDN layer
    std::vector<k::DeviceBuffer> conv_state;
    std::size_t ws_bytes = 16;
    int max_hq = 1;
    int max_hd = 128;
    for (const auto& L : f.layers) {
        if (L.attention) {
            const std::size_t per = static_cast<std::size_t>(batch) * mb * bs * L.hkv * L.hd;
            kv.push_back(random_bf16(2 * per, 7 + kv.size(), -0.5f, 0.5f));
            max_hq = std::max(max_hq, L.hq);
            max_hd = std::max(max_hd, L.hd);
        }
        if (L.gdn) {
            const std::size_t esz = L.state_dtype == k::StateDtype::kFp32 ? 4 : 2;
            state.emplace_back(static_cast<std::size_t>(batch) * L.hv * 128 * 128 * esz);
            k::fill_random_f32(state.back().as<float>(), state.back().bytes() / 4, -0.1f, 0.1f, 9 + state.size());
            conv_state.push_back(random_bf16(static_cast<std::size_t>(batch) * 3 * L.conv_dim, 11));
            if (!decode) {
                ws_bytes = std::max(ws_bytes, k::gdn_prefill_workspace_bytes(batch, new_tokens, L.hk, L.hv));
            }
        }
    }
    const int splits = decode ? k::decode_attention_splits(batch, 1, ctx, sms) : 1;  // the most any layer uses
    ws_bytes = std::max(ws_bytes, k::decode_attention_workspace_bytes(batch, max_hq, max_hd, std::max(splits, 1)));
    k::DeviceBuffer ws(ws_bytes);
    k::DeviceBuffer gg(t * 64 * 4);
    k::DeviceBuffer beta(t * 64 * 4);
    k::fill_random_f32(gg.as<float>(), t * 64, -0.3f, -0.005f, 12);
    k::fill_random_f32(beta.as<float>(), t * 64, 0.1f, 0.9f, 13);
    const int sample_rows = decode ? batch : 1;
    k::DeviceBuffer logits(static_cast<std::size_t>(sample_rows) * f.vocab * 2);
    k::DeviceBuffer sampled(static_cast<std::size_t>(sample_rows) * 4);
    auto* xb = x.as<k::bf16_t>();
    auto* yb = y.as<k::bf16_t>();
    auto* bb = big.as<k::bf16_t>();
    auto* cb = conv_out.as<k::bf16_t>();
    auto* nw = f.norm_w.as<k::bf16_t>();
    // MoE layers share one runner (buffers sized for this step) and one random routing: each layer still reads its own
    // experts' weights, and the routing's distribution (rows per expert, experts touched) is what the cost follows.
    std::unique_ptr<k::MoeRunner> moe_runner;
    for (const auto& L : f.layers) {
        if (L.moe && !moe_runner) {
            moe_runner = std::make_unique<k::MoeRunner>(L.moe_shape, tokens);
            const std::vector<int> ids =
                k::moe_random_routing(tokens, L.moe_shape.top_k, L.moe_shape.num_experts, 7000 + tokens);
            moe_runner->set_routing(ids.data(), tokens);
        }
    }
    k::StreamHandle stream = k::create_stream();
    auto step = [&]() {
        k::embedding_gather(f.lm.as<k::bf16_t>(), d_ids.as<int>(), xb, tokens, h, stream);
        std::size_t ia = 0;
        std::size_t ig = 0;
        for (const auto& L : f.layers) {
            if (L.attention || L.gdn) {
                k::rms_norm(xb, res.as<k::bf16_t>(), nw, yb, tokens, h, 1e-6f, stream);
            }
            if (L.attention) {
                gemm.run(yb, L.mixer_w[0].as<k::bf16_t>(), bb, tokens, L.qkv_n, h, stream);
                k::rope(bb, d_pos.as<int>(), tokens, L.hq + L.hkv, L.hd, L.rot, 1e6f, stream);
                const std::size_t per = static_cast<std::size_t>(batch) * mb * bs * L.hkv * L.hd;
                auto* kc = kv[ia].as<k::bf16_t>();
                k::KvWriteArgs kw;
                kw.k = bb;
                kw.v = bb + t * L.hkv * L.hd;
                kw.k_cache = kc;
                kw.v_cache = kc + per;
                kw.slot_mapping = d_slots.as<int>();
                kw.num_tokens = tokens;
                kw.num_kv_heads = L.hkv;
                kw.head_dim = L.hd;
                k::kv_cache_write(kw, stream);
                if (decode) {
                    k::DecodeAttentionArgs a;
                    a.q = bb;
                    a.k_cache = kc;
                    a.v_cache = kc + per;
                    a.block_table = d_table.as<int>();
                    a.max_blocks_per_seq = mb;
                    a.seq_lens = d_lens.as<int>();
                    a.num_seqs = batch;
                    a.num_q_heads = L.hq;
                    a.num_kv_heads = L.hkv;
                    a.head_dim = L.hd;
                    a.block_size = bs;
                    a.scale = 1.0f / std::sqrt(static_cast<float>(L.hd));
                    a.o = yb;
                    a.workspace = ws.as<float>();
                    a.num_splits = k::decode_attention_splits(batch, L.hkv, ctx, sms);
                    k::decode_attention(a, stream);
                } else {
                    k::PrefillAttentionArgs a;
                    a.q = bb;
                    a.k = kc;  // identity block table: the paged cache is the contiguous [tokens, hkv, hd]
                    a.v = kc + per;
                    a.o = yb;
                    a.chunk_tokens = new_tokens;
                    a.cached_tokens = cached;
                    a.num_q_heads = L.hq;
                    a.num_kv_heads = L.hkv;
                    a.head_dim = L.hd;
                    a.scale = 1.0f / std::sqrt(static_cast<float>(L.hd));
                    k::prefill_attention(a, stream);
                }
                gemm.run(yb, L.mixer_w[1].as<k::bf16_t>(), xb, tokens, h, L.hq * L.hd, stream);
                ++ia;
            } else if (L.gdn) {
                gemm.run(yb, L.mixer_w[0].as<k::bf16_t>(), bb, tokens, L.conv_dim + L.hv * 128, h, stream);
                gemm.run(yb, L.mixer_w[1].as<k::bf16_t>(), cb, tokens, 2 * L.hv, h, stream);
                // q | k | v are slices of the conv output, as in the model.
                const std::size_t qk = t * L.hk * 128;
                k::GdnIo io;
                io.q = cb;
                io.k = cb + qk;
                io.v = cb + 2 * qk;
                io.g = gg.as<float>();
                io.beta = beta.as<float>();
                io.o = yb;
                io.state = state[ig].get();
                io.state_dtype = L.state_dtype;
                io.num_seqs = batch;
                io.num_k_heads = L.hk;
                io.num_v_heads = L.hv;
                io.scale = 1.0f / std::sqrt(128.0f);
                if (decode) {
                    k::conv1d_update(bb, L.mixer_w[3].as<k::bf16_t>(), conv_state[ig].as<k::bf16_t>(), cb, batch,
                                     L.conv_dim, stream);
                    k::GdnDecodeArgs a;
                    static_cast<k::GdnIo&>(a) = io;
                    k::gdn_decode(a, stream);
                } else {
                    k::conv1d_prefill(bb, L.mixer_w[3].as<k::bf16_t>(), conv_state[ig].as<k::bf16_t>(), false, cb,
                                      batch, new_tokens, L.conv_dim, stream);
                    k::GdnPrefillArgs a;
                    static_cast<k::GdnIo&>(a) = io;
                    a.seq_len = new_tokens;
                    a.workspace = ws.get();
                    k::gdn_prefill(a, stream);
                }
                // gated RMSNorm over dv, times SiLU(z)
                k::rms_norm(yb, nullptr, nw, bb, tokens * L.hv, 128, 1e-6f, stream);
                k::silu_mul(bb, yb, tokens, L.hv * 128, stream);
                gemm.run(yb, L.mixer_w[2].as<k::bf16_t>(), xb, tokens, h, L.hv * 128, stream);
                ++ig;
            }
            if (L.mlp) {
                k::rms_norm(xb, res.as<k::bf16_t>(), nw, yb, tokens, h, 1e-6f, stream);
                gemm.run(yb, L.mlp_w[0].as<k::bf16_t>(), bb, tokens, L.gated_mlp ? 2 * L.inter : L.inter, h, stream);
                if (L.gated_mlp) {
                    k::silu_mul(bb, yb, tokens, L.inter, stream);
                }
                gemm.run(L.gated_mlp ? yb : bb, L.mlp_w[1].as<k::bf16_t>(), xb, tokens, h, L.inter, stream);
            } else if (L.moe) {
                k::rms_norm(xb, res.as<k::bf16_t>(), nw, yb, tokens, h, 1e-6f, stream);
                moe_runner->route(yb, tokens, L.moe_w[0], stream);
                moe_runner->forward_experts(yb, L.moe_w[0], xb, stream);
            }
        }
        const k::bf16_t* last = xb + (t - sample_rows) * h;
        k::rms_norm(last, nullptr, nw, yb, sample_rows, h, 1e-6f, stream);
        gemm.run(yb, f.lm.as<k::bf16_t>(), logits.as<k::bf16_t>(), sample_rows, f.vocab, h, stream);
        k::argmax_rows(logits.as<k::bf16_t>(), sampled.as<int>(), sample_rows, f.vocab, stream);
    };
    step();  // warm-up outside the capture (kernel attributes, cuBLAS heuristics)
    k::device_synchronize();
    k::CudaGraph graph;
    graph.capture(stream, step);
    const double ms =
        k::time_median_ms([&](int) { graph.replay(stream); }, 2, tokens >= 16384 ? 3 : 7, sweep.sustain_ms);
    k::device_synchronize();
    k::destroy_stream(stream);
    return ms;
}

std::string today_iso() {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
}

void log_curve(std::ostream& log, const Curve& c) {
    log << fmt::format("  {:13s} pieces {} points {:3d}  R2 {:.5f}  max_rel_residual {:.4f}\n", c.name, c.pieces.size(),
                       c.num_points, c.r2, c.max_rel_residual);
}

}  // namespace

bool cuda_device_present(int device, std::string* name) {
    k::DeviceInfo info;
    if (!k::query_device(device, &info)) {
        return false;
    }
    if (name != nullptr) {
        *name = info.name;
    }
    return true;
}

HardwareProfile sweep_model(const models::ModelSpec& spec,
                            const std::string& model_name,
                            const SweepOptions& o,
                            std::ostream& log) {
    k::set_device(o.device);
    k::DeviceInfo info;
    SERVESIM_CHECK(k::query_device(o.device, &info), "device {} vanished", o.device);
    const int tp = o.tensor_parallel_size;
    const models::ModelSpec rank_spec = per_rank_spec(spec, tp);
    const ModelPlan plan = [&] {
        ModelPlan pl = plan_model(rank_spec);
        pl.sample_vocab = spec.vocab_size;
        return pl;
    }();
    const bool quick = o.quick;
    const SweepGrids grids = sweep_grids(quick);  // shared with the duration estimate (sweep_plan.h)
    HardwareProfile p;
    p.gpu = info.name;
    p.date = today_iso();
    p.software = fmt::format(
        "CUDA runtime {}.{}, driver API {}.{}, cuBLAS {}; servesim kernels (FA2-style mma.sync "
        "prefill, split-K paged decode, chunked GDN)",
        info.runtime_version / 1000, info.runtime_version % 1000 / 10, info.driver_version / 1000,
        info.driver_version % 1000 / 10, info.cublas_version);
    p.model = model_name;
    p.source = "calibrated";
    p.hybrid = !plan.gdn.empty() && !plan.attention.empty();
    p.tensor_parallel_size = tp;
    const bool fp8_block = o.weight_dtype == "fp8-block";
    const bool fp8 = o.weight_dtype == "fp8" || fp8_block;
    p.weight_dtype = fp8 ? o.weight_dtype : "bf16";
    if (fp8) {
        for (const auto& g : plan.groups) {
            SERVESIM_CHECK(
                g.moe.num_experts == 0,
                "--weight-dtype fp8/fp8-block: {} has MoE layers, whose fp8 kernels (fused_moe w8a8) are not "
                "calibrated; dense and hybrid models only",
                model_name);
        }
        p.software += fp8_block ? "; block-scaled fp8 W8A8 linear layers (1x128 dynamic activation quant + cuBLASLt "
                                  "e4m3 GEMM with 128x128 weight scales)"
                                : "; fp8 W8A8 linear layers (per-token dynamic activation quant + cuBLASLt e4m3 GEMM)";
    }
    log << "servesim-calibrate: " << model_name << " on " << info.name << (quick ? " (quick)" : "")
        << (fp8_block ? " (block-scaled fp8 W8A8 linear layers)" : fp8 ? " (fp8 W8A8 linear layers)" : "")
        << (tp > 1 ? fmt::format(" (one rank of tensor_parallel_size {})", tp) : "") << "\n";
    k::GemmRunner gemm;
    std::unique_ptr<k::Fp8GemmRunner> gemm8 =
        fp8 ? std::make_unique<k::Fp8GemmRunner>(fp8_block ? k::Fp8Scaling::kBlock128 : k::Fp8Scaling::kPerTensor)
            : nullptr;
    SweepContext sweep;
    sweep.stream = k::create_stream();
    sweep.sustain_ms = o.sustain_ms;

    // gemm
    {
        const std::vector<int>& grid = grids.gemm_tokens;
        std::map<std::string, MoeLayerWeights> moe_weights;  // one layer's experts per MoE group, kept for the grid
        for (const auto& g : plan.groups) {
            if (g.moe.num_experts > 0) {
                moe_weights.emplace(g.name, make_moe_weights(g.moe, 300));
            }
        }
        std::vector<Point> pts;
        for (int m : grid) {
            double ms = 0;
            for (const auto& g : plan.groups) {
                ms += g.count * (g.moe.num_experts > 0 ? time_moe_group(sweep, g, m, moe_weights.at(g.name), 100 + m)
                                                       : time_group(sweep, g, m, gemm, 100 + m, gemm8.get()));
            }
            pts.push_back({{static_cast<double>(m)}, ms});
        }
        p.curves["gemm"] = fit_sweep_curve("gemm", record_points(o.log_dir, "gemm", {"tokens"}, pts));
        log_curve(log, p.curves["gemm"]);
    }
    // lm_head and overhead
    {
        k::DeviceBuffer w = random_bf16(static_cast<std::size_t>(plan.vocab) * plan.hidden, 201, -0.05f, 0.05f);
        const std::vector<int>& grid = grids.lm_head_sequences;
        std::vector<Point> lm;
        std::vector<Point> ov;
        for (int s : grid) {
            lm.push_back({{static_cast<double>(s)}, time_lm_head(sweep, s, plan.hidden, plan.vocab, gemm, w)});
            ov.push_back(
                {{static_cast<double>(s)}, time_overhead(sweep, s, plan.hidden, plan.vocab, plan.sample_vocab, w)});
        }
        p.curves["lm_head"] = fit_sweep_curve("lm_head", record_points(o.log_dir, "lm_head", {"tokens"}, lm));
        p.curves["overhead"] = fit_sweep_curve("overhead", record_points(o.log_dir, "overhead", {"sequences"}, ov));
        log_curve(log, p.curves["lm_head"]);
        log_curve(log, p.curves["overhead"]);
    }
    // attention
    if (!plan.attention.empty()) {
        const std::vector<std::pair<int, int>>& prefill_cases = grids.prefill_cases;
        std::vector<Point> pre;
        for (auto [chunk, cached] : prefill_cases) {
            double ms = 0;
            for (const auto& a : plan.attention) {
                ms += a.count * time_prefill_attention(sweep, a, chunk, cached);
            }
            pre.push_back({{chunk * (cached + chunk / 2.0), static_cast<double>(cached + chunk)}, ms});
        }
        const std::vector<std::string> pre_vars = {"work", "max_context_tokens"};
        for (Curve& c : fit_attn_prefill_curves(record_points(o.log_dir, "attn_prefill", pre_vars, pre), log)) {
            log_curve(log, c);
            p.curves[c.name] = std::move(c);
        }

        std::vector<Point> dec;
        for (auto [s, c] : grids.decode_cases) {  // total context above 4.2M tokens left out (KV memory)
            double ms = 0;
            for (const auto& a : plan.attention) {
                ms += a.count * time_decode_attention(sweep, a, s, c, info.multiprocessors);
            }
            const double seqs = s;
            const double per_seq = c;
            dec.push_back({{seqs * per_seq, seqs, std::sqrt(per_seq)}, ms});
        }
        const std::vector<std::string> dec_vars = {"context_tokens", "sequences", "sqrt_context_per_sequence"};
        p.curves["attn_decode"] =
            fit_sweep_curve("attn_decode", record_points(o.log_dir, "attn_decode", dec_vars, dec));
        log_curve(log, p.curves["attn_decode"]);
    }
    // Gated DeltaNet
    if (!plan.gdn.empty()) {
        std::vector<Point> pre;
        for (auto [s, len] : grids.gdn_prefill_cases) {
            double ms = 0;
            for (const auto& g : plan.gdn) {
                ms += g.count * time_gdn_prefill(sweep, g, s, len);
            }
            pre.push_back({{static_cast<double>(s) * len, static_cast<double>(s) * ((len + 63) / 64)}, ms});
        }
        p.curves["gdn_prefill"] =
            fit_sweep_curve("gdn_prefill", record_points(o.log_dir, "gdn_prefill", {"tokens", "chunks"}, pre));
        log_curve(log, p.curves["gdn_prefill"]);

        std::vector<Point> dec;
        std::vector<Point> snap;
        for (int s : grids.gdn_decode_sequences) {
            double ms = 0;
            double sms = 0;
            for (const auto& g : plan.gdn) {
                ms += g.count * time_gdn_decode(sweep, g, s);
                if (s <= kSnapshotMaxSequences) {
                    sms += g.count * time_snapshot(sweep, g, s);
                }
            }
            dec.push_back({{static_cast<double>(s)}, ms});
            if (s <= kSnapshotMaxSequences) {
                snap.push_back({{static_cast<double>(s)}, sms});
            }
        }
        p.curves["gdn_decode"] =
            fit_sweep_curve("gdn_decode", record_points(o.log_dir, "gdn_decode", {"sequences"}, dec));
        p.curves["snapshot"] = fit_sweep_curve("snapshot", record_points(o.log_dir, "snapshot", {"snapshots"}, snap));
        log_curve(log, p.curves["gdn_decode"]);
        log_curve(log, p.curves["snapshot"]);
    }
    // Composition: whole forwards with the same kernels (one CUDA graph per step) against the composed curves.
    {
        // One rank's whole forward when its weights fit in 80 % of the device memory (Qwen3-Next-80B at TP 2: about
        // 79 GB); otherwise (the 80B model at TP 1: 159 GB) no composition entries, said in the log.
        const double weight_bytes = static_cast<double>(models::weight_bytes_total(rank_spec));
        if (fp8) {  // the whole-forward graphs run bf16 GEMMs (time_forward); an fp8 profile has none
            log << "  composition skipped: whole forwards are built with bf16 linear layers only\n";
            k::destroy_stream(sweep.stream);
            sweep.stream = nullptr;
            validate_profile(p, model_name + " (sweep)");
            return p;
        }
        if (weight_bytes > 0.8 * static_cast<double>(info.total_memory_bytes)) {
            log << fmt::format("  composition skipped: one rank's weights ({:.1f} GB) do not fit on {} ({:.1f} GB)\n",
                               weight_bytes / 1e9, info.name, info.total_memory_bytes / 1e9);
            k::destroy_stream(sweep.stream);
            sweep.stream = nullptr;
            validate_profile(p, model_name + " (sweep)");
            return p;
        }
        log << "  composition (whole forwards, CUDA graph" << (tp > 1 ? ", one tensor-parallel rank" : "") << "):\n";
        const ForwardModel fm = build_forward_model(rank_spec);
        for (int tokens : grids.composition_prefill_tokens) {
            const double ms = time_forward(sweep, fm, 1, tokens, 0, gemm, info.multiprocessors);
            p.composition_check.push_back(
                {fmt::format("forward_prefill_T{}", tokens), ms, predict_prefill_ms(p, tokens, 0)});
        }
        for (auto [b, c] : grids.composition_decode_cases) {
            const double ms = time_forward(sweep, fm, b, 1, c, gemm, info.multiprocessors);
            p.composition_check.push_back(
                {fmt::format("forward_decode_B{}_C{}", b, c + 1), ms, predict_decode_ms(p, b, c + 1)});
        }
        for (const auto& c : p.composition_check) {
            log << fmt::format("    {:28s} measured {:10.3f} ms  predicted {:10.3f} ms  ({:+.1f} %)\n", c.case_name,
                               c.measured_ms, c.predicted_ms, 100.0 * (c.predicted_ms / c.measured_ms - 1.0));
        }
    }
    k::destroy_stream(sweep.stream);
    sweep.stream = nullptr;
    validate_profile(p, model_name + " (sweep)");
    return p;
}

int run_gpu_sweep(const CalibrateOptions& o, std::ostream& out, std::ostream& log) {
    std::string device_name;
    if (!cuda_device_present(o.device, &device_name)) {
        log << "servesim-calibrate: no CUDA GPU found (device " << o.device
            << "); calibration needs one. Use --from-measurements to fit timings measured elsewhere.\n";
        return 2;
    }
    const models::ModelSpec spec = models::resolve_model(o.model);
    SweepOptions so;
    so.quick = o.quick;
    so.log_dir = o.log_dir;
    so.device = o.device;
    so.tensor_parallel_size = o.tensor_parallel_size;
    so.sustain_ms = o.sustain_ms;
    so.weight_dtype = o.weight_dtype;
    HardwareProfile p = sweep_model(spec, o.model, so, log);
    emit_profile(p, o, out, log);
    return 0;
}

}  // namespace servesim::calibration
