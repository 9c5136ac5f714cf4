// Derived sizes of a ModelSpec (declared in models/model_derived.h): KV bytes, recurrent state bytes, parameter
// counts, weight bytes read per step and FLOPs. Formulas: docs/SOURCES.md, "Model configurations"; state shapes
// and dtypes as vLLM mamba_utils.py / MambaStateDtypeCalculator. Text-model norm weights are not counted.
#include "models/model_derived.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "models/weight_footprint.h"

namespace servesim::models {

namespace {

template <class... Fs>
struct Overloaded : Fs... {
    using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

using i64 = std::int64_t;

i64 gdn_conv_dim(const GatedDeltaNetMixer& g) {
    return 2 * i64{g.num_k_heads} * g.k_head_dim + i64{g.num_v_heads} * g.v_head_dim;
}

i64 mamba2_inner(const Mamba2Mixer& m) {
    return i64{m.num_heads} * m.head_dim;
}

i64 mamba2_conv_dim(const Mamba2Mixer& m) {
    return mamba2_inner(m) + 2 * i64{m.n_groups} * m.state_size;
}

// MLA projections (DeepseekV2MLAAttention): q_a_proj h→q_lora and q_b_proj q_lora→H·(nope+rope) (or one q_proj
// h→H·(nope+rope) without q_lora), kv_a_proj_with_mqa h→kv_lora+rope, kv_b_proj kv_lora→H·(nope+v), o_proj H·v→h.
i64 mla_params(const AttentionMixer& a, i64 h) {
    const MlaShape& m = *a.mla;
    const i64 heads = a.num_q_heads;
    const i64 qk = i64{m.qk_nope_head_dim} + m.qk_rope_head_dim;
    const i64 q = m.q_lora_rank > 0 ? h * m.q_lora_rank + i64{m.q_lora_rank} * heads * qk : h * heads * qk;
    const i64 kv_a = h * (i64{m.kv_lora_rank} + m.qk_rope_head_dim);
    const i64 kv_b = i64{m.kv_lora_rank} * heads * (i64{m.qk_nope_head_dim} + m.v_head_dim);
    const i64 o = heads * m.v_head_dim * h;
    return q + kv_a + kv_b + o;
}

// Token-mixer parameters of one layer.
i64 mixer_params(const Mixer& mixer, i64 h) {
    return std::visit(Overloaded{
                          [](const NoMixer&) -> i64 { return 0; },
                          [h](const AttentionMixer& a) -> i64 {
                              if (a.mla) {
                                  return mla_params(a, h);
                              }
                              const i64 q_out = i64{a.num_q_heads} * a.head_dim;
                              const i64 kv_out = i64{a.num_kv_heads} * a.head_dim;
                              const i64 in = a.input_size > 0 ? i64{a.input_size} : h;
                              // q_proj (doubled by the output gate), k_proj, v_proj from `in`, o_proj to h.
                              return in * q_out * (a.output_gate ? 2 : 1) + 2 * in * kv_out + q_out * h +
                                     (a.sinks ? a.num_q_heads : 0);
                          },
                          [h](const GatedDeltaNetMixer& g) -> i64 {
                              const i64 conv_dim = gdn_conv_dim(g);
                              const i64 v_out = i64{g.num_v_heads} * g.v_head_dim;
                              // in_proj_qkv, in_proj_z, in_proj_a/b, out_proj, depthwise conv, A_log + dt_bias.
                              return h * conv_dim + h * v_out + 2 * h * g.num_v_heads + v_out * h +
                                     i64{g.conv_kernel} * conv_dim + 2 * i64{g.num_v_heads};
                          },
                          [h](const Mamba1Mixer& m) -> i64 {
                              const i64 inner = m.intermediate_size;
                              // in_proj h -> 2·inner, depthwise conv (+bias), x_proj inner -> dt_rank + 2·N,
                              // dt_proj dt_rank -> inner (+bias), A_log inner·N, D, out_proj inner -> h.
                              return h * 2 * inner + (i64{m.conv_kernel} + 1) * inner +
                                     inner * (i64{m.dt_rank} + 2 * i64{m.state_size}) + (i64{m.dt_rank} + 1) * inner +
                                     inner * m.state_size + inner + inner * h;
                          },
                          [h](const Mamba2Mixer& m) -> i64 {
                              const i64 inner = mamba2_inner(m);
                              const i64 conv_dim = mamba2_conv_dim(m);
                              // in_proj h -> (z, x, B, C, dt), depthwise conv (+bias), out_proj, A_log + D + dt_bias.
                              return h * (2 * inner + 2 * i64{m.n_groups} * m.state_size + m.num_heads) +
                                     (i64{m.conv_kernel} + 1) * conv_dim + inner * h + 3 * i64{m.num_heads};
                          },
                      },
                      mixer);
}

i64 expert_params(const MoeMlp& moe, i64 h) {
    return (moe.gated ? 3 : 2) * h * moe.moe_intermediate_size;
}

// MoE parameters every token reads: shared expert (+ its h->1 gate) and the router.
i64 moe_always_params(const MoeMlp& moe, i64 h) {
    const i64 shared = moe.shared_expert_intermediate_size;
    return (moe.gated ? 3 : 2) * h * shared + (shared > 0 && moe.shared_expert_gate ? h : 0) + h * moe.num_experts;
}

// MLP parameters of one layer, counting `routed_experts` experts of a MoE layer (-1: all of them).
double mlp_params(const Mlp& mlp, i64 h, double routed_experts) {
    return std::visit(Overloaded{
                          [](const NoMlp&) -> double { return 0; },
                          [h](const DenseMlp& d) -> double {
                              return static_cast<double>((d.gated ? 3 : 2) * h * d.intermediate_size);
                          },
                          [h, routed_experts](const MoeMlp& m) -> double {
                              const double experts = routed_experts < 0 ? m.num_experts : routed_experts;
                              return static_cast<double>(moe_always_params(m, h)) +
                                     experts * static_cast<double>(expert_params(m, h));
                          },
                      },
                      mlp);
}

i64 embedding_params(const ModelSpec& spec) {
    return i64{spec.vocab_size} * spec.hidden_size;
}

// Parameters one block holds in memory: its own adapters, plus mixer and MLP unless they are an earlier block's.
double held_layer_params(const Layer& layer, i64 h, double routed_experts) {
    const double own = static_cast<double>(layer.adapter_params);
    if (layer.shares_weights) {
        return own;
    }
    return own + static_cast<double>(mixer_params(layer.mixer, h)) + mlp_params(layer.mlp, h, routed_experts);
}

// Parameters one block runs through per token: a shared block's weights at each of its invocations.
double invoked_layer_params(const Layer& layer, i64 h, double routed_experts) {
    return static_cast<double>(layer.adapter_params) + static_cast<double>(mixer_params(layer.mixer, h)) +
           mlp_params(layer.mlp, h, routed_experts);
}

}  // namespace

LayerCounts count_layers(const ModelSpec& spec) {
    LayerCounts c;
    for (const auto& layer : spec.layers) {
        if (const auto* a = std::get_if<AttentionMixer>(&layer.mixer)) {
            ++c.attention;
            if (a->sliding_window_tokens > 0) {
                ++c.sliding_window;
            }
        } else if (std::holds_alternative<GatedDeltaNetMixer>(layer.mixer)) {
            ++c.gated_delta_net;
        } else if (std::holds_alternative<Mamba2Mixer>(layer.mixer)) {
            ++c.mamba2;
        } else if (std::holds_alternative<Mamba1Mixer>(layer.mixer)) {
            ++c.mamba1;
        }
        if (std::holds_alternative<DenseMlp>(layer.mlp)) {
            ++c.dense_mlp;
        } else if (std::holds_alternative<MoeMlp>(layer.mlp)) {
            ++c.moe_mlp;
        }
    }
    return c;
}

bool is_hybrid(const ModelSpec& spec) {
    const LayerCounts c = count_layers(spec);
    return c.attention > 0 && (c.gated_delta_net + c.mamba2 + c.mamba1) > 0;
}

std::int64_t kv_bytes_per_token_layer(const AttentionMixer& attn, DType kv_dtype, int tensor_parallel_size) {
    if (attn.mla) {
        // MLAAttentionSpec: one latent (kv_lora_rank + qk_rope_head_dim), no separate K and V, on every rank.
        return (i64{attn.mla->kv_lora_rank} + attn.mla->qk_rope_head_dim) * dtype_bytes(kv_dtype);
    }
    // vLLM: KV heads per rank max(1, total / TP) (replicated when TP exceeds them).
    const i64 heads = std::max<i64>(1, attn.num_kv_heads / tensor_parallel_size);
    return 2 * heads * attn.head_dim * dtype_bytes(kv_dtype);
}

std::int64_t kv_bytes_per_token(const ModelSpec& spec, DType kv_dtype, int tensor_parallel_size) {
    i64 total = 0;
    for (const auto& layer : spec.layers) {
        if (const auto* a = std::get_if<AttentionMixer>(&layer.mixer)) {
            total += kv_bytes_per_token_layer(*a, kv_dtype, tensor_parallel_size);
        }
    }
    return total;
}

StateBytes state_bytes_layer(const Layer& layer, DType model_dtype, int tensor_parallel_size,
                             int num_speculative_tokens) {
    StateBytes s;
    const i64 tp = tensor_parallel_size;
    if (const auto* g = std::get_if<GatedDeltaNetMixer>(&layer.mixer)) {
        // conv (Kc-1+k, conv_dim/TP) in the model dtype; ssm (Hv/TP, dv, dk) in the ssm dtype.
        s.conv_bytes =
            (i64{g->conv_kernel} - 1 + num_speculative_tokens) * (gdn_conv_dim(*g) / tp) * dtype_bytes(model_dtype);
        s.ssm_bytes = (i64{g->num_v_heads} / tp) * g->v_head_dim * g->k_head_dim * dtype_bytes(g->ssm_state_dtype);
    } else if (const auto* m1 = std::get_if<Mamba1Mixer>(&layer.mixer)) {
        // mamba1_state_shape: conv (Kc-1, inner/TP) in the model dtype; ssm (inner/TP, N) in the ssm dtype.
        s.conv_bytes = (i64{m1->conv_kernel} - 1) * (i64{m1->intermediate_size} / tp) * dtype_bytes(model_dtype);
        s.ssm_bytes = (i64{m1->intermediate_size} / tp) * m1->state_size * dtype_bytes(m1->ssm_state_dtype);
    } else if (const auto* m = std::get_if<Mamba2Mixer>(&layer.mixer)) {
        // conv (Kc-1, (H*hd + 2*G'*N)/TP) in the model dtype; ssm (H/TP, hd, N) in the ssm dtype. When TP does not
        // divide the groups (G = 1: Bamba, Falcon-H1, Zamba2), every rank carries the groups its heads need: G' = G +
        // TP − G (mamba_utils.py, MambaStateShapeCalculator.extra_groups_for_head_shards).
        const i64 groups = m->n_groups % tp == 0 ? i64{m->n_groups} : tp;
        const i64 conv_dim = mamba2_inner(*m) + 2 * groups * m->state_size;
        s.conv_bytes = (i64{m->conv_kernel} - 1) * (conv_dim / tp) * dtype_bytes(model_dtype);
        s.ssm_bytes = (i64{m->num_heads} / tp) * m->head_dim * m->state_size * dtype_bytes(m->ssm_state_dtype);
    }
    return s;
}

std::int64_t state_bytes_per_sequence(const ModelSpec& spec) {
    i64 total = 0;
    for (const auto& layer : spec.layers) {
        total += state_bytes_layer(layer, spec.dtype).total();
    }
    return total;
}

std::int64_t max_state_bytes_layer(const ModelSpec& spec) {
    i64 best = 0;
    for (const auto& layer : spec.layers) {
        best = std::max(best, state_bytes_layer(layer, spec.dtype).total());
    }
    return best;
}

ParamCounts count_params(const ModelSpec& spec) {
    ParamCounts p;
    const i64 h = spec.hidden_size;
    p.embedding = embedding_params(spec);
    p.lm_head = spec.tie_word_embeddings ? 0 : embedding_params(spec);
    for (const auto& layer : spec.layers) {
        p.layers += static_cast<i64>(held_layer_params(layer, h, -1));
    }
    p.extra = spec.extra_params;
    return p;
}

ParamCounts count_active_params(const ModelSpec& spec) {
    ParamCounts p = count_params(spec);
    const i64 h = spec.hidden_size;
    p.layers = 0;
    for (const auto& layer : spec.layers) {
        double routed = -1;
        if (const auto* m = std::get_if<MoeMlp>(&layer.mlp)) {
            routed = m->num_experts_per_tok;
        }
        p.layers += static_cast<i64>(held_layer_params(layer, h, routed));
    }
    p.extra = 0;
    return p;
}

std::int64_t weight_bytes_total(const ModelSpec& spec) {
    if (spec.quantization) {
        return weight_footprint(spec).loaded_bytes;  // scheme bytes, scales included (docs/QUANTIZATION.md)
    }
    return count_params(spec).total() * dtype_bytes(spec.dtype);
}

std::int64_t weight_bytes_read_per_step(const ModelSpec& spec, std::int64_t num_tokens) {
    if (num_tokens <= 0) {
        return 0;
    }
    if (spec.quantization) {
        return static_cast<i64>(std::llround(weight_bytes_read(weight_footprint(spec), num_tokens)));
    }
    const i64 h = spec.hidden_size;
    // The output projection (lm_head, or the tied embedding matrix) is read once per step.
    double params = static_cast<double>(embedding_params(spec));
    for (const auto& layer : spec.layers) {
        double routed = -1;
        if (const auto* m = std::get_if<MoeMlp>(&layer.mlp)) {
            // Expected distinct experts hit by num_tokens tokens choosing k of E each (independent, uniform routing).
            const double e = m->num_experts;
            const double k = m->num_experts_per_tok;
            routed = e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(num_tokens)));
        }
        // A shared block's weights are read again at each invocation (Zamba2's shared block is far larger than L2).
        params += invoked_layer_params(layer, h, routed);
    }
    return static_cast<i64>(std::llround(params * dtype_bytes(spec.dtype)));
}

double linear_flops_per_token(const ModelSpec& spec) {
    const i64 h = spec.hidden_size;
    // Every active layer parameter at each invocation plus the output projection (V x h whether tied or not); not
    // the input gather.
    double params = static_cast<double>(embedding_params(spec));
    for (const auto& layer : spec.layers) {
        double routed = -1;
        if (const auto* m = std::get_if<MoeMlp>(&layer.mlp)) {
            routed = m->num_experts_per_tok;
        }
        params += invoked_layer_params(layer, h, routed);
    }
    return 2.0 * params;
}

double attention_flops_per_key(const AttentionMixer& a) {
    if (a.mla) {
        // Prefill runs MLA unabsorbed (MLACommonImpl._forward_prefill): K of nope+rope, V of v_head_dim per head.
        return 2.0 * a.num_q_heads * (static_cast<double>(a.head_dim) + a.mla->v_head_dim);
    }
    return 4.0 * a.num_q_heads * a.head_dim;
}

double decode_attention_flops_per_key(const AttentionMixer& a) {
    if (a.mla) {
        // Absorbed decode (MLACommonImpl._forward_decode): each head scores the latent + rope part and sums the
        // kv_lora_rank latent values.
        const double lora = a.mla->kv_lora_rank;
        return 2.0 * a.num_q_heads * (lora + a.mla->qk_rope_head_dim) + 2.0 * a.num_q_heads * lora;
    }
    return 4.0 * a.num_q_heads * a.head_dim;
}

std::int64_t attended_context_tokens(const AttentionMixer& a, std::int64_t context_tokens) {
    if (a.sliding_window_tokens > 0) {
        return std::min<i64>(context_tokens, a.sliding_window_tokens);
    }
    if (a.attention_chunk_tokens > 0) {
        // The last query token of a context attends to its own chunk: (context − 1) mod chunk + 1 keys.
        return context_tokens <= 0 ? 0 : (context_tokens - 1) % a.attention_chunk_tokens + 1;
    }
    return context_tokens;
}

double attention_flops_per_token(const ModelSpec& spec, std::int64_t context_tokens) {
    double flops = 0;
    for (const auto& layer : spec.layers) {
        if (const auto* a = std::get_if<AttentionMixer>(&layer.mixer)) {
            flops += attention_flops_per_key(*a) * static_cast<double>(attended_context_tokens(*a, context_tokens));
        }
    }
    return flops;
}

}  // namespace servesim::models
