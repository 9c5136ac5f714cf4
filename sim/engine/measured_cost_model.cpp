// Step costs composed from measured kernel times; see measured_cost_model.h and docs/COST-MODEL.md.
#include "sim/engine/measured_cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.h"
#include "models/model_derived.h"
#include "models/weight_footprint.h"
#include "sim/engine/expert_parallel.h"

namespace servesim::engine {

namespace {

using calibration::GemmKind;
using calibration::GemmRun;

constexpr const char* kGemmNames[MeasuredCostModel::kNumGemms] = {
    "gemm qkv_proj",      "gemm o_proj",   "gemm mla q/kv projections",
    "gemm mixer in_proj", "gemm out_proj", "gemm gate_up_proj",
    "gemm down_proj",     "gemm router",   "gemm shared_expert",
    "gemm adapters"};

// The GEMM a linear layer under `scheme` runs on the predicted GPU, and the table op it corresponds to
// (docs/QUANTIZATION.md): W8A8 fp8 on fp8 tensor cores by scale granularity (block → CUTLASS block-scaled, channel →
// per-token × per-channel scaled_mm, tensor → per-tensor scaled_mm); W8A8 fp8 without fp8 tensor cores and every
// weight-only scheme as a dequantizing GEMM at bf16 math on the quantized bytes (Marlin); int8 and NVFP4 W4A4 at the
// fp8 op and rate (Hopper runs int8 at the fp8 rate; no fp4 table exists), a stated approximation.
std::pair<GemmKind, GemmRun> gemm_for(const models::QuantScheme* scheme, double model_bytes, bool target_fp8) {
    if (scheme == nullptr) {
        return {GemmKind::kBf16, GemmRun{false, model_bytes, model_bytes}};
    }
    const double w = scheme->weight_bits / 8.0;
    if (scheme->activations == models::ActivationQuant::kNone ||
        (scheme->activations == models::ActivationQuant::kFp8 && !target_fp8)) {
        return {GemmKind::kBf16, GemmRun{false, model_bytes, w}};
    }
    GemmKind kind = GemmKind::kFp8Tensor;
    if (scheme->activations == models::ActivationQuant::kFp8) {
        kind = scheme->granularity == models::ScaleGranularity::kBlock     ? GemmKind::kFp8Block
               : scheme->granularity == models::ScaleGranularity::kChannel ? GemmKind::kFp8Rowwise
                                                                           : GemmKind::kFp8Tensor;
    }
    return {kind, GemmRun{target_fp8, target_fp8 ? w : model_bytes, w}};
}

}  // namespace

double MeasuredCostModel::TokenDetail::total_us() const {
    double t = 0;
    for (const double g : gemm_us) {
        t += g;
    }
    return t + moe_us + moe_routing_us + rmsnorm_us + silu_mul_us + rope_us + qk_norm_us + copies_us;
}

void MeasuredCostModel::add_gemm(Gemm label, std::int64_t n, std::int64_t k, const models::QuantScheme* scheme) {
    if (n <= 0 || k <= 0) {
        return;
    }
    const auto [kind, run] = gemm_for(scheme, models::dtype_bytes(model_.dtype), params_.target.fp8_flops_per_s > 0);
    for (auto& g : gemms_) {
        if (g.label == label && g.handle.n == n && g.handle.k == k && g.handle.run.fp8_math == run.fp8_math &&
            g.handle.run.weight_bytes == run.weight_bytes && g.handle.run.activation_bytes == run.activation_bytes) {
            ++g.count;
            return;
        }
    }
    const std::optional<calibration::GemmHandle> h = lookup_.resolve_gemm(kind, n, k, run);
    if (!h) {
        throw ConfigError(
            fmt::format("{}: no GEMM entries (ops.gemm_bf16 or ops.gemm_fp8_*): cost_model measured "
                        "needs them to cost the model's projections",
                        params_.table->file));
    }
    gemms_.push_back(GemmOp{label, *h, 1});
}

MeasuredCostModel::MeasuredCostModel(const models::ModelSpec& model,
                                     models::DType kv_dtype,
                                     const MeasuredParams& params)
    : params_(params),
      lookup_(*params.table, params.table_roof, params.target),
      fused_lookup_(params.fused_table != nullptr ? *params.fused_table : *params.table, params.target, params.target),
      model_name_(model.name),
      groups_(attention_layer_groups(model)),
      model_(model),
      roofline_(model, kv_dtype, params.roofline) {
    const int tp = std::max(1, params_.roofline.tensor_parallel_size);
    const std::int64_t h = model.hidden_size;
    // Each linear layer's scheme by its checkpoint name (quantized models only; the fused GEMMs take their first
    // component's scheme, as vLLM requires the shards of a fused layer to share one).
    std::map<std::string, const models::QuantScheme*> schemes;
    std::vector<models::LinearModule> modules;
    if (model.quantization) {
        modules = models::linear_modules(model_);
        for (const auto& m : modules) {
            schemes[m.name] = m.scheme;
        }
    }
    const auto scheme = [&](const std::string& name) -> const models::QuantScheme* {
        const auto it = schemes.find(name);
        return it == schemes.end() ? nullptr : it->second;
    };
    const double kv_b = models::dtype_bytes(kv_dtype);
    const double eb = models::dtype_bytes(model.dtype);
    int norms = 1;  // the final norm
    for (std::size_t i = 0; i < model.layers.size(); ++i) {
        const models::Layer& layer = model.layers[i];
        const std::string p = fmt::format("model.layers.{}.", i);
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            ++norms;
            const std::int64_t in = a->input_size > 0 ? a->input_size : h;
            AttnGroup g;
            g.count = 1;
            if (const std::optional<LocalAttentionSpan> span = local_attention_span(*a)) {
                g.span = static_cast<int>(
                    std::find(groups_.local.spans.begin(), groups_.local.spans.begin() + groups_.local.count, *span) -
                    groups_.local.spans.begin());
            }
            g.prefill_per_key = {models::attention_flops_per_key(*a) / tp, 0};
            g.decode_per_key = {models::decode_attention_flops_per_key(*a) / tp,
                                static_cast<double>(models::kv_bytes_per_token_layer(*a, kv_dtype, tp))};
            if (a->mla) {
                // DeepseekV2MLAAttention (vllm/model_executor/models/deepseek_v2.py): q_a_proj and
                // kv_a_proj_with_mqa replicated, q_b_proj / q_proj and kv_b_proj column-parallel, o_proj
                // row-parallel. Prefill runs unabsorbed (heads of qk_nope + qk_rope, values of v_head_dim); decode
                // runs absorbed over the latent cache.
                const models::MlaShape& m = *a->mla;
                const std::int64_t heads = a->num_q_heads / tp;
                const std::int64_t qk = std::int64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim;
                if (m.q_lora_rank > 0) {
                    add_gemm(kMla, m.q_lora_rank, in, scheme(p + "self_attn.q_a_proj"));
                    add_gemm(kMla, heads * qk, m.q_lora_rank, scheme(p + "self_attn.q_b_proj"));
                } else {
                    add_gemm(kMla, heads * qk, in, scheme(p + "self_attn.q_proj"));
                }
                add_gemm(kMla, std::int64_t{m.kv_lora_rank} + m.qk_rope_head_dim, in,
                         scheme(p + "self_attn.kv_a_proj_with_mqa"));
                // kv_b_proj: prefill runs it whole (unabsorbed); decode runs its two halves as separate batched
                // GEMMs, W_UK_T on q_nope before the latent attention and W_UV on its output after
                // (vllm/v1/attention/backends/mla/common.py MLACommonImpl, _v_up_proj). Most steps decode, so the
                // halves are priced as two GEMMs: the same FLOPs, one more kernel per layer, and at the activation
                // dtype, because MLACommonImpl.process_weights_after_loading dequantizes kv_b_proj
                // (get_and_maybe_dequant_weights) before splitting it into W_UK_T and W_UV.
                add_gemm(kMla, heads * std::int64_t{m.qk_nope_head_dim}, m.kv_lora_rank, nullptr);
                add_gemm(kMla, heads * std::int64_t{m.v_head_dim}, m.kv_lora_rank, nullptr);
                // DeepseekV2MLAAttention's own norms on the latent vectors: kv_a_layernorm, and q_a_layernorm with a
                // query LoRA (plain RMSNorms, priced at the fused add + RMSNorm op of their width: an upper bound).
                if (m.q_lora_rank > 0) {
                    add_op(rmsnorm_, {m.q_lora_rank, {}, 1, 0, nullptr, 1});
                }
                add_op(rmsnorm_, {m.kv_lora_rank, {}, 1, 0, nullptr, 1});
                add_gemm(kO, h, heads * m.v_head_dim, scheme(p + "self_attn.o_proj"));
                g.geometry = {static_cast<int>(qk), static_cast<int>(heads), static_cast<int>(heads)};
                g.mla_decode = lookup_.resolve_mla_decode(static_cast<int>(heads), m.kv_lora_rank, m.qk_rope_head_dim,
                                                          g.decode_per_key);
                if (!g.mla_decode) {
                    g.decode = lookup_.resolve_attn_decode(
                        {m.kv_lora_rank + m.qk_rope_head_dim, static_cast<int>(heads), 1}, g.decode_per_key);
                }
                add_op(rope_, {0, {m.qk_rope_head_dim, static_cast<int>(heads), 1}, 1, 0, nullptr, 1});
                // Copies around the absorbed decode (vllm/v1/attention/backends/mla/common.py, v0.15): the latent
                // and its rope key written to the paged cache (concat_and_cache_mla), the absorbed query joined to
                // its rope part (torch.cat), and W_UV's output transposed back to token-major before o_proj
                // (_v_up_proj). Each moves its bytes once read and once written.
                const double latent = std::int64_t{m.kv_lora_rank} + m.qk_rope_head_dim;
                add_copy(2.0 * latent * kv_b);
                add_copy(2.0 * static_cast<double>(heads) * latent * eb);
                add_copy(2.0 * static_cast<double>(heads) * m.v_head_dim * eb);
            } else {
                const int q_heads = std::max(1, a->num_q_heads / tp);
                const int kv_heads = std::max(1, a->num_kv_heads / tp);
                const std::int64_t q_out = std::int64_t{q_heads} * a->head_dim * (a->output_gate ? 2 : 1);
                add_gemm(kQkv, q_out + 2 * std::int64_t{kv_heads} * a->head_dim, in, scheme(p + "self_attn.q_proj"));
                add_gemm(kO, h, std::int64_t{q_heads} * a->head_dim, scheme(p + "self_attn.o_proj"));
                g.geometry = {a->head_dim, q_heads, kv_heads};
                g.decode = lookup_.resolve_attn_decode(g.geometry, g.decode_per_key);
                add_op(rope_, {0, g.geometry, 1, 0, nullptr, 1});
                // The step's new keys and values written to the paged cache (reshape_and_cache_flash,
                // vllm/v1/attention/backends/flash_attn.py do_kv_cache_update): read once, written once.
                add_copy(2.0 * 2.0 * kv_heads * a->head_dim * kv_b);
                if (a->qk_norm) {
                    // q_norm over the query heads, k_norm over the key heads: one call each.
                    add_op(qk_norm_, {std::int64_t{q_heads} * a->head_dim, {}, 1, 0, nullptr, 1});
                    add_op(qk_norm_, {std::int64_t{kv_heads} * a->head_dim, {}, 1, 0, nullptr, 1});
                }
            }
            g.prefill = lookup_.resolve_attn_prefill(g.geometry, g.prefill_per_key);
            g.prefill_cached = lookup_.resolve_attn_prefill_cached(g.geometry, g.prefill_per_key);
            bool merged = false;
            for (auto& o : attn_) {
                if (o.span == g.span && o.geometry.head_dim == g.geometry.head_dim &&
                    o.geometry.q_heads == g.geometry.q_heads && o.geometry.kv_heads == g.geometry.kv_heads &&
                    o.prefill_per_key.flops == g.prefill_per_key.flops &&
                    o.decode_per_key.flops == g.decode_per_key.flops &&
                    o.decode_per_key.bytes == g.decode_per_key.bytes) {
                    ++o.count;
                    merged = true;
                    break;
                }
            }
            if (!merged) {
                attn_.push_back(g);
            }
        } else if (const auto* d = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            ++norms;
            const std::int64_t conv_dim =
                2 * std::int64_t{d->num_k_heads} * d->k_head_dim + std::int64_t{d->num_v_heads} * d->v_head_dim;
            const std::int64_t v_out = std::int64_t{d->num_v_heads} * d->v_head_dim;
            add_gemm(kMixerIn, (conv_dim + v_out) / tp, h, scheme(p + "linear_attn.in_proj_qkvz"));
            add_gemm(kMixerIn, 2 * std::int64_t{d->num_v_heads} / tp, h, scheme(p + "linear_attn.in_proj_ba"));
            add_gemm(kMixerOut, h, v_out / tp, scheme(p + "linear_attn.out_proj"));
            // The kernels between the projections (vllm/model_executor/models/qwen3_next.py, Qwen3NextGatedDeltaNet:
            // causal_conv1d over the q/k/v channels, fused_gdn_gating, the chunked or recurrent GDN kernel,
            // RMSNormGated), per rank: heads split by TP.
            const calibration::KernelCostLookup::GdnShape shape{d->num_k_heads / tp, d->num_v_heads / tp,
                                                                d->v_head_dim};
            if (gdn_.count == 0) {
                gdn_.prefill_1 = lookup_.resolve_gdn(lookup_.table().gdn_prefill, shape, 1);
                gdn_.prefill_8 = lookup_.resolve_gdn(lookup_.table().gdn_prefill, shape, 8);
                gdn_.decode = lookup_.resolve_gdn(lookup_.table().gdn_decode, shape, 0);
                gdn_.conv_prefill = lookup_.resolve_conv1d(conv_dim / tp, false);
                gdn_.conv_decode = lookup_.resolve_conv1d(conv_dim / tp, true);
                gdn_.aux_width = v_out / tp;
                gdn_.aux = calibration::KernelCostLookup::nearest_width(lookup_.table().gdn_aux, gdn_.aux_width);
                if (gdn_.aux != nullptr) {
                    gdn_.aux_scale = lookup_.width_scale(*gdn_.aux, gdn_.aux_width);
                }
            }
            ++gdn_.count;
            // The projections' outputs into the custom op's inputs (vLLM GatedDeltaNetAttention.forward_cuda).
            // Qwen3-Next: fix_query_key_value_ordering, then torch.cat of q, k, v into mixed_qkv, one kernel of the
            // compiled region every step (z, b, a stay views). Qwen3.5: mixed_qkv and z are slices, and b and a
            // are made contiguous, two small copies once the step has two tokens or more (a one-row slice is
            // already contiguous; inductor may fuse the two).
            if (d->interleaved_projections) {
                add_copy(2.0 * static_cast<double>(conv_dim) / tp * eb);
            } else {
                copies_.multi_token.add(2, 2.0 * 2.0 * static_cast<double>(d->num_v_heads) / tp * eb);
            }
            // rearrange_mixed_qkv returns q, k and v .contiguous() (vLLM PR #26437, v0.11.1): three copies of
            // mixed_qkv's slices, a kernel each from two tokens on.
            copies_.multi_token.add(3, 2.0 * static_cast<double>(conv_dim) / tp * eb);
        } else if (const auto* m2 = std::get_if<models::Mamba2Mixer>(&layer.mixer)) {
            ++norms;
            ++gdn_.other_scans;
            const std::int64_t inner = std::int64_t{m2->num_heads} * m2->head_dim;
            add_gemm(kMixerIn, (2 * inner + 2 * std::int64_t{m2->n_groups} * m2->state_size + m2->num_heads) / tp, h,
                     scheme(p + "mixer.in_proj"));
            add_gemm(kMixerOut, h, inner / tp, scheme(p + "mixer.out_proj"));
        } else if (const auto* m1 = std::get_if<models::Mamba1Mixer>(&layer.mixer)) {
            // MambaMixer (vllm/model_executor/layers/mamba/mamba_mixer.py): in_proj (h → 2I), x_proj (I → dt_rank +
            // 2N), dt_proj (dt_rank → I), out_proj (I → h); I split by TP.
            ++norms;
            ++gdn_.other_scans;
            const std::int64_t inner = m1->intermediate_size;
            add_gemm(kMixerIn, 2 * inner / tp, h, nullptr);
            add_gemm(kMixerIn, std::int64_t{m1->dt_rank} + 2 * std::int64_t{m1->state_size}, inner / tp, nullptr);
            add_gemm(kMixerIn, inner / tp, m1->dt_rank, nullptr);
            add_gemm(kMixerOut, h, inner / tp, nullptr);
        }
        if (const auto* d = std::get_if<models::DenseMlp>(&layer.mlp)) {
            ++norms;
            const std::int64_t inter = d->intermediate_size / tp;
            add_gemm(kGateUp, (d->gated ? 2 : 1) * inter, h, scheme(p + (d->gated ? "mlp.gate_proj" : "mlp.up_proj")));
            add_gemm(kDown, h, inter, scheme(p + "mlp.down_proj"));
            if (d->gated) {
                add_op(silu_mul_, {inter, {}, 1, 0, nullptr, 1});
            }
        } else if (const auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            ++norms;
            add_gemm(kRouter, e->num_experts, h, nullptr);
            if (const std::int64_t s = e->shared_expert_intermediate_size; s > 0) {
                add_gemm(kSharedExpert, (e->gated ? 2 : 1) * s / tp, h,
                         scheme(p + (e->gated ? "mlp.shared_expert.gate_proj" : "mlp.shared_expert.up_proj")));
                add_gemm(kSharedExpert, h, s / tp, scheme(p + "mlp.shared_expert.down_proj"));
                if (e->shared_expert_gate) {
                    add_gemm(kRouter, 1, h, nullptr);
                }
                if (e->gated) {
                    add_op(silu_mul_, {s / tp, {}, 1, 0, nullptr, 1});
                }
                // The shared expert's output added to the routed experts' (DeepseekV2MoE / Qwen2MoeSparseMoeBlock
                // forward): two reads and a write of the hidden state.
                add_copy(3.0 * static_cast<double>(h) * eb);
            }
            // FusedMoE under TP slices every expert's intermediate dimension (expert parallelism: see token_detail).
            const auto [kind, run] = gemm_for(scheme(p + "mlp.experts.gate_up_proj"), models::dtype_bytes(model.dtype),
                                              params_.target.fp8_flops_per_s > 0);
            (void)kind;
            calibration::KernelCostLookup::MoeShape shape{
                e->num_experts, e->num_experts_per_tok, static_cast<int>(h), e->moe_intermediate_size / tp,
                e->gated,       run.weight_bytes,       run.fp8_math};
            bool merged = false;
            for (auto& o : moe_) {
                if (o.shape.experts == shape.experts && o.shape.top_k == shape.top_k &&
                    o.shape.intermediate == shape.intermediate && o.shape.gated == shape.gated &&
                    o.shape.weight_bytes == shape.weight_bytes && o.shape.fp8_math == shape.fp8_math) {
                    ++o.count;
                    merged = true;
                    break;
                }
            }
            if (!merged) {
                moe_.push_back(MoeGroup{shape, 1, lookup_.resolve_moe(shape), lookup_.resolve_moe_routing(shape),
                                        fused_lookup_.resolve_moe_fused(shape)});
            }
        }
        if (layer.adapter_params > 0) {
            // Zamba2's per-invocation adapters, as one h-wide GEMM of the same parameters (a stated approximation).
            add_gemm(kAdapter, std::max<std::int64_t>(1, layer.adapter_params / h), h, nullptr);
        }
    }
    add_op(rmsnorm_, {h, {}, norms, 0, nullptr, 1});
    // Resolve each elementwise op against the table once: fused add + RMSNorm reads the input and the residual and
    // writes both (4 · width elements per token); SiLU·mul reads gate and up and writes one (3 · width); RoPE reads
    // and writes the query and key heads (2 · (Hq + Hkv) · hd); the sampler reads each row's fp32 logits (4 · vocab
    // bytes; every rank holds the gathered vocabulary).
    const auto& t = lookup_.table();
    // The copy kernels at the table's own ceilings: a graph-replayed kernel's floor (`graph_launch_us`) and the
    // device-to-device copy rate (`copy_gb_per_s`, bytes read plus written), the rate carried to another GPU by the
    // datasheets' bandwidth ratio; without them, the bandwidth roofline alone.
    if (t.copy_gb_per_s && t.graph_launch_us) {
        copies_.launch_us = *t.graph_launch_us;
        copies_.bytes_per_s = *t.copy_gb_per_s * 1e9 * params_.target.bytes_per_s / params_.table_roof.bytes_per_s;
        copies_.measured = true;
    } else {
        copies_.bytes_per_s = params_.target.bytes_per_s * params_.roofline.bandwidth_efficiency;
    }
    for (auto& op : rmsnorm_) {
        op.bytes_per_unit = 4.0 * static_cast<double>(op.width) * eb;
        if (const calibration::WidthEntry* e = calibration::KernelCostLookup::nearest_width(t.rmsnorm, op.width)) {
            op.curve = &e->tokens;
            op.scale = lookup_.width_scale(*e, op.width);
        }
    }
    for (auto& op : silu_mul_) {
        op.bytes_per_unit = 3.0 * static_cast<double>(op.width) * eb;
        if (const calibration::WidthEntry* e = calibration::KernelCostLookup::nearest_width(t.silu_mul, op.width)) {
            op.curve = &e->tokens;
            op.scale = lookup_.width_scale(*e, op.width);
        }
    }
    for (auto& op : rope_) {
        op.bytes_per_unit =
            2.0 * static_cast<double>(op.geometry.q_heads + op.geometry.kv_heads) * op.geometry.head_dim * eb;
        if (const calibration::RopeEntry* e = lookup_.resolve_rope(op.geometry)) {
            op.curve = &e->tokens;
            op.scale = lookup_.rope_scale(*e, op.geometry);
        }
    }
    for (auto& op : qk_norm_) {
        // Per-head RMSNorm in place: each head's elements read and written.
        op.bytes_per_unit = 2.0 * static_cast<double>(op.width) * eb;
        if (const calibration::WidthEntry* e = calibration::KernelCostLookup::nearest_width(t.qk_norm, op.width)) {
            op.curve = &e->tokens;
            op.scale = lookup_.width_scale(*e, op.width);
        }
    }
    sampling_ = {model.vocab_size, {}, 1, 4.0 * model.vocab_size, nullptr, 1};
    if (const calibration::WidthEntry* e = calibration::KernelCostLookup::nearest_width(t.sampling, model.vocab_size)) {
        sampling_.curve = &e->tokens;
        sampling_.scale = lookup_.width_scale(*e, model.vocab_size);
    }
    // lm_head (ParallelLMHead, vocab split by TP), quantized only with GPTQ / AWQ `lm_head: true`.
    const models::QuantScheme* lm_scheme = scheme("lm_head");
    {
        const auto [kind, run] =
            gemm_for(lm_scheme, models::dtype_bytes(model.dtype), params_.target.fp8_flops_per_s > 0);
        lm_head_ = lookup_.resolve_gemm(kind, (model.vocab_size + tp - 1) / tp, h, run);
    }
    if (model.quantization) {
        kernels_ =
            model.quantization->description.empty() ? model.quantization->method : model.quantization->description;
    }
    const std::int64_t table_tokens = std::min<std::int64_t>(
        kMaxTableTokens, std::max<std::int64_t>(params_.roofline.max_cudagraph_tokens, params_.max_table_tokens));
    token_ms_.resize(static_cast<std::size_t>(table_tokens) + 1);
    lm_head_ms_.resize(static_cast<std::size_t>(table_tokens) + 1);
    for (std::int64_t n = 1; n <= table_tokens; ++n) {
        token_ms_[static_cast<std::size_t>(n)] = token_detail(n).total_us() / 1e3;
        const auto [lm, sampling] = lm_head_sampling_us(n);
        lm_head_ms_[static_cast<std::size_t>(n)] = (lm + sampling) / 1e3;
    }
}

void MeasuredCostModel::add_copy(double bytes_per_token) {
    copies_.every_step.add(1, bytes_per_token);
}

void MeasuredCostModel::add_op(std::vector<ElementwiseOp>& ops, const ElementwiseOp& op) {
    for (auto& o : ops) {
        if (o.width == op.width && o.geometry.head_dim == op.geometry.head_dim &&
            o.geometry.q_heads == op.geometry.q_heads && o.geometry.kv_heads == op.geometry.kv_heads) {
            o.count += op.count;
            return;
        }
    }
    ops.push_back(op);
}

double MeasuredCostModel::elementwise_us(const ElementwiseOp& op, double units) const {
    return op.curve != nullptr ? op.curve->at_scaled(units, op.scale) : roofline_bytes_us(op.bytes_per_unit * units);
}

double MeasuredCostModel::copies_us(double tokens) const {
    return copies_.us(copies_.every_step, tokens) + (tokens > 1 ? copies_.us(copies_.multi_token, tokens) : 0.0);
}

double MeasuredCostModel::roofline_bytes_us(double bytes) const {
    return 1e6 * bytes / (params_.target.bytes_per_s * params_.roofline.bandwidth_efficiency);
}

MeasuredCostModel::TokenDetail MeasuredCostModel::token_detail(std::int64_t tokens) const {
    TokenDetail d;
    const double m = static_cast<double>(tokens);
    for (const auto& g : gemms_) {
        d.gemm_us[g.label] += g.count * lookup_.gemm_us(g.handle, m);
    }
    // Expert parallelism: the busiest rank's expert work replaces the TP-sliced work the tables are read at, scaled
    // by the predicted GPU's roofline of the two (expert_step_work).
    double ep_scale = 1.0;
    if (params_.roofline.expert_parallel.enabled() && !moe_.empty()) {
        const ExpertStepWork w = expert_step_work(model_, params_.roofline.expert_parallel, tokens);
        const double tp_us = lookup_.target_roof_us(w.flops_tp, w.weight_bytes_tp, false);
        if (tp_us > 0) {
            ep_scale = lookup_.target_roof_us(w.flops_ep, w.weight_bytes_ep, false) / tp_us;
        }
    }
    for (const auto& g : moe_) {
        const auto& s = g.shape;
        if (g.experts != nullptr) {
            // The table times torch's grouped GEMM pair; vLLM runs its fused_moe Triton kernel with the tiles it
            // ships (fused_moe.py try_get_optimal_moe_config), on an H100 8-13 % faster at 128 tokens and 15-19 %
            // slower at 16,384: the table's own paired timings of the two scale it (docs/COST-MODEL.md).
            // A table without pairs takes those of a table of its architecture (MeasuredParams::fused_table).
            const double fused = g.fused != nullptr ? fused_lookup_.fused_over_grouped(*g.fused, s, m) : 1.0;
            d.moe_us += g.count * ep_scale * lookup_.moe_us(*g.experts, s, m) * fused;
        } else {
            // No MoE entry: the roofline of the routed experts at the GPU file's GEMM efficiency.
            const calibration::UnitWork w =
                calibration::moe_work(s.experts, s.top_k, s.hidden, s.intermediate, s.gated, m, s.weight_bytes);
            d.moe_us += g.count * ep_scale *
                        std::max(lookup_.target_roof_us(w.flops, 0, s.fp8_math) / params_.roofline.gemm_efficiency,
                                 roofline_bytes_us(w.bytes));
        }
        if (g.routing != nullptr) {
            d.moe_routing_us += g.count * lookup_.moe_routing_us(*g.routing, s, m);
        } else {
            d.moe_routing_us += g.count * roofline_bytes_us(m * (4.0 * s.experts + 8.0 * s.top_k * s.hidden));
        }
    }
    for (const auto& op : rmsnorm_) {
        d.rmsnorm_us += op.count * elementwise_us(op, m);
    }
    for (const auto& op : silu_mul_) {
        d.silu_mul_us += op.count * elementwise_us(op, m);
    }
    for (const auto& op : rope_) {
        d.rope_us += op.count * elementwise_us(op, m);
    }
    for (const auto& op : qk_norm_) {
        d.qk_norm_us += op.count * elementwise_us(op, m);
    }
    d.copies_us = copies_us(m);
    return d;
}

double MeasuredCostModel::linear_flops_per_token() const {
    double f = 0;
    for (const auto& g : gemms_) {
        f += 2.0 * static_cast<double>(g.handle.n) * static_cast<double>(g.handle.k) * g.count;
    }
    for (const auto& g : moe_) {
        f += 2.0 * g.shape.top_k * (g.shape.gated ? 3.0 : 2.0) * g.shape.hidden * g.shape.intermediate * g.count;
    }
    if (lm_head_) {
        f += 2.0 * static_cast<double>(lm_head_->n) * static_cast<double>(lm_head_->k);
    }
    return f;
}

std::pair<double, double> MeasuredCostModel::lm_head_sampling_us(std::int64_t num_sampled_seqs) const {
    if (num_sampled_seqs <= 0) {
        return {0, 0};
    }
    const double n = static_cast<double>(num_sampled_seqs);
    const double lm = lm_head_ ? lookup_.gemm_us(*lm_head_, n) : 0;
    return {lm, elementwise_us(sampling_, n)};
}

std::pair<double, double> MeasuredCostModel::attention_us(const BatchShape& s) const {
    double prefill = 0;
    double decode = 0;
    const bool capped = s.num_local_spans == groups_.local.count;
    const double peak = params_.target.bf16_flops_per_s;
    for (const auto& g : attn_) {
        const bool local = g.span >= 0 && capped;
        if (s.prefill_attention_work > 0 && s.num_prefill_seqs > 0) {
            const double work =
                local ? s.local[static_cast<std::size_t>(g.span)].prefill_attention_work : s.prefill_attention_work;
            // The step's prefill chunks as num_prefill_seqs equal ones: mean chunk c and the cached context x that
            // gives the mean work per sequence, c·(x + c/2). FlashAttention's varlen kernel runs them in one launch;
            // per-sequence time × sequences (a small overestimate for many tiny chunks, docs/COST-MODEL.md).
            const double seqs = static_cast<double>(s.num_prefill_seqs);
            const double chunk = static_cast<double>(s.num_prefill_tokens) / seqs;
            const double per_seq = work / seqs;
            const double context = per_seq / chunk - chunk / 2.0;
            double us = 0;
            if (g.prefill_cached && context >= 1.0) {
                us = calibration::KernelCostLookup::attn_prefill_cached_us(*g.prefill_cached, chunk, context);
            } else if (g.prefill) {
                // A causal prefill of T tokens with the same keys: T²/2 = c·(x + c/2); T = c without a cache.
                const double tokens = context >= 1.0 ? std::sqrt(2.0 * per_seq) : chunk;
                us = calibration::KernelCostLookup::attn_prefill_us(*g.prefill, tokens);
            } else {
                us = 1e6 * g.prefill_per_key.flops * per_seq / (peak * params_.roofline.attention_efficiency);
            }
            prefill += g.count * seqs * us;
        }
        if (s.num_decode_seqs > 0) {
            const double batch = static_cast<double>(s.num_decode_seqs);
            const double keys = static_cast<double>(
                local ? s.local[static_cast<std::size_t>(g.span)].decode_context_tokens : s.decode_context_tokens);
            if (keys <= 0) {
                continue;
            }
            const double context = keys / batch;
            double us = 0;
            if (g.mla_decode) {
                us = calibration::KernelCostLookup::mla_decode_us(*g.mla_decode, batch, context);
            } else if (g.decode) {
                us = calibration::KernelCostLookup::attn_decode_us(*g.decode, batch, context);
            } else {
                us = std::max(roofline_bytes_us(g.decode_per_key.bytes * keys),
                              1e6 * g.decode_per_key.flops * keys / (peak * params_.roofline.attention_efficiency));
            }
            decode += g.count * us;
        }
    }
    return {prefill, decode};
}

double MeasuredCostModel::gdn_us(const BatchShape& s) const {
    double us = 0;
    if (s.num_prefill_tokens > 0) {
        // The step's prefill chunks in one varlen call: the one-sequence curve, blended toward the eight-sequence one
        // in log2(sequences) (per-sequence chunks start their own scan blocks), the eight-sequence one beyond.
        const double tokens = static_cast<double>(s.num_prefill_tokens);
        const double seqs = static_cast<double>(std::max<std::int64_t>(1, s.num_prefill_seqs));
        double kernel = gdn_.prefill_1->at(tokens);
        if (gdn_.prefill_8 && seqs > 1) {
            const double w = std::min(1.0, std::log2(seqs) / 3.0);
            kernel = (1 - w) * kernel + w * gdn_.prefill_8->at(tokens);
        }
        us += kernel + gdn_.conv_prefill->at(tokens);
    }
    if (s.num_decode_seqs > 0) {
        const double batch = static_cast<double>(s.num_decode_seqs);
        us += gdn_.decode->at(batch) + gdn_.conv_decode->at(batch);
    }
    if (s.num_tokens > 0) {
        us += gdn_.aux->tokens.at_scaled(static_cast<double>(s.num_tokens), gdn_.aux_scale);
    }
    return us * gdn_.count;
}

StepCost MeasuredCostModel::step_cost(const BatchShape& s) const {
    // The untimed terms (GDN / Mamba scans, all-reduces) as the roofline has them. The roofline's kernel
    // boundaries (RooflineParams::kernel_gap_us) are not added: every table time was taken from CUDA-graph replays of
    // back-to-back calls, so it already holds its kernel's ramp, tail and the gap to the next one. The H100 table's
    // own forwards bear this out: composed without any boundary term, its 36 decode forwards come out 4.5 % below
    // the timed ones on average (docs/COST-MODEL.md, "Composition against torch-timed forwards").
    StepCost c = roofline_.step_cost(s);
    c.overhead_ms = 0;
    const std::int64_t tokens =
        RooflineCostModel::cudagraph_padded_tokens(s.num_tokens, params_.roofline.max_cudagraph_tokens);
    c.gemm_ms = tokens > 0 && static_cast<std::uint64_t>(tokens) < token_ms_.size()
                    ? token_ms_[static_cast<std::size_t>(tokens)]
                    : token_detail(tokens).total_us() / 1e3;
    c.lm_head_ms = 0;
    if (s.num_sampled_seqs > 0) {
        if (static_cast<std::uint64_t>(s.num_sampled_seqs) < lm_head_ms_.size()) {
            c.lm_head_ms = lm_head_ms_[static_cast<std::size_t>(s.num_sampled_seqs)];
        } else {
            const auto [lm, sampling] = lm_head_sampling_us(s.num_sampled_seqs);
            c.lm_head_ms = (lm + sampling) / 1e3;
        }
    }
    const auto [prefill, decode] = attention_us(s);
    c.attn_prefill_ms = prefill / 1e3;
    c.attn_decode_ms = decode / 1e3;
    if (gdn_.measured()) {
        c.gdn_ms = gdn_us(s) / 1e3;
    }
    return c;
}

std::string MeasuredCostModel::source_of(bool measured, bool exact) const {
    if (!measured) {
        return "roofline (not in the table)";
    }
    if (lookup_.transfer()) {
        return "transfer from " + params_.table_gpu;
    }
    return exact ? "table" : "table, nearest shape";
}

std::vector<StepTerm> MeasuredCostModel::step_terms(const BatchShape& s) const {
    const StepCost c = step_cost(s);
    const std::int64_t tokens =
        RooflineCostModel::cudagraph_padded_tokens(s.num_tokens, params_.roofline.max_cudagraph_tokens);
    const TokenDetail d = token_detail(tokens);
    std::vector<StepTerm> out;
    for (int i = 0; i < kNumGemms; ++i) {
        bool any = false;
        bool exact = true;
        for (const auto& g : gemms_) {
            if (g.label == i) {
                any = true;
                exact = exact && g.handle.exact;
            }
        }
        if (any) {
            out.push_back({kGemmNames[i], d.gemm_us[static_cast<std::size_t>(i)] / 1e3, source_of(true, exact)});
        }
    }
    const auto& t = lookup_.table();
    if (!moe_.empty()) {
        bool measured = true;
        bool routed = true;
        bool exact = true;
        for (const auto& g : moe_) {
            measured = measured && g.experts != nullptr;
            routed = routed && g.routing != nullptr;
            exact = exact && g.experts != nullptr && g.experts->experts == g.shape.experts &&
                    g.experts->top_k == g.shape.top_k && g.experts->hidden == g.shape.hidden &&
                    g.experts->intermediate == g.shape.intermediate;
        }
        const bool fused = std::all_of(moe_.begin(), moe_.end(), [](const MoeGroup& g) {
            return g.experts != nullptr && g.fused != nullptr;
        });
        std::string scaled;
        if (fused) {
            scaled = params_.fused_table == nullptr
                         ? " x vLLM fused_moe / grouped GEMM (moe_vllm_fused)"
                         : fmt::format(" x vLLM fused_moe / grouped GEMM (moe_vllm_fused of the {} table; the {} "
                                       "table has none)",
                                       params_.fused_table_gpu, params_.table_gpu);
        }
        out.push_back({"moe experts", d.moe_us / 1e3, source_of(measured, exact) + scaled});
        out.push_back({"moe routing", d.moe_routing_us / 1e3,
                       source_of(routed, false) + (routed && !t.routing_fused ? " (torch ops: an upper bound)" : "")});
    }
    out.push_back({"rmsnorm", d.rmsnorm_us / 1e3, source_of(!t.rmsnorm.empty(), false)});
    if (!silu_mul_.empty()) {
        out.push_back({"silu_mul", d.silu_mul_us / 1e3, source_of(!t.silu_mul.empty(), false)});
    }
    if (!qk_norm_.empty()) {
        out.push_back({"qk_norm", d.qk_norm_us / 1e3, source_of(!t.qk_norm.empty(), false)});
    }
    if (!rope_.empty()) {
        out.push_back({"rope", d.rope_us / 1e3, source_of(!t.rope.empty(), false)});
    }
    if (copies_.every_step.kernels > 0 || copies_.multi_token.kernels > 0) {
        out.push_back({"copies", d.copies_us / 1e3,
                       copies_.measured
                           ? "table ceilings: graph launch + copy rate (kv cache write, MLA, shared add, GDN)"
                           : "roofline bytes (kv cache write, MLA, shared add, GDN)"});
    }
    const auto [lm, sampling] = lm_head_sampling_us(s.num_sampled_seqs);
    out.push_back({"gemm lm_head", lm / 1e3, source_of(lm_head_.has_value(), lm_head_ && lm_head_->exact)});
    out.push_back({"sampling", sampling / 1e3, source_of(!t.sampling.empty(), false)});
    bool prefill_measured = true;
    bool decode_measured = true;
    for (const auto& g : attn_) {
        prefill_measured = prefill_measured && (g.prefill || g.prefill_cached);
        decode_measured = decode_measured && (g.decode || g.mla_decode);
    }
    if (!attn_.empty()) {
        out.push_back({"attn_prefill", c.attn_prefill_ms, source_of(prefill_measured, false)});
        out.push_back({"attn_decode", c.attn_decode_ms, source_of(decode_measured, false)});
    }
    if (c.gdn_ms > 0) {
        // Exact: every GDN op measured at this rank's geometry on this GPU (each scale exactly 1). State copies are
        // the replica's StateSnapshotCost (sim/engine/state_snapshot_cost.h), the same under every cost model.
        const bool exact = gdn_.measured() && gdn_.prefill_1->scale == 1.0 && gdn_.decode->scale == 1.0 &&
                           gdn_.conv_prefill->scale == 1.0 && gdn_.conv_decode->scale == 1.0 && gdn_.aux_scale == 1.0;
        out.push_back({"gdn / mamba", c.gdn_ms, gdn_.measured() ? source_of(true, exact) : "roofline"});
    }
    out.push_back({"comm", c.comm_ms, "tensor-parallel all-reduces"});
    out.push_back({"overhead", c.overhead_ms, "none: table times hold their kernels' boundaries"});
    return out;
}

std::string MeasuredCostModel::describe() const {
    const calibration::KernelTable& t = lookup_.table();
    const std::string tp =
        params_.roofline.tensor_parallel_size > 1 ? fmt::format(", TP {}", params_.roofline.tensor_parallel_size) : "";
    std::string q = kernels_.empty() ? "" : "; " + kernels_;
    if (params_.fused_table != nullptr &&
        std::any_of(moe_.begin(), moe_.end(), [](const MoeGroup& g) { return g.fused != nullptr; })) {
        q += fmt::format("; routed experts x the {} table's fused_moe / grouped GEMM", params_.fused_table_gpu);
    }
    if (lookup_.transfer()) {
        return fmt::format(
            "measured-transfer from {} to {} (kernel table {}, {}; efficiencies on the datasheet "
            "roofline{}{})",
            params_.table_gpu, params_.roofline.gpu_name, t.file, t.date, tp, q);
    }
    return fmt::format("measured {} (kernel table {}, {}{}{})", params_.roofline.gpu_name, t.file, t.date, tp, q);
}

}  // namespace servesim::engine
