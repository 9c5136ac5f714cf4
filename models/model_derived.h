// Sizes derived from a ModelSpec: KV bytes per token, recurrent state bytes, parameter and weight bytes, FLOPs.
// Pure functions of the spec (vLLM's frozen specs derive sizes as properties the same way). Formulas:
// docs/SOURCES.md, "Model configurations"; state shapes follow vLLM mamba_utils.py
// (gated_delta_net_state_shape, mamba2_state_shape) and dtypes MambaStateDtypeCalculator (conv = model dtype,
// ssm = the layer's ssm_state_dtype).
#pragma once

#include <cstdint>

#include "models/model_spec.h"

namespace servesim::models {

struct LayerCounts {
    int attention = 0;       // full + sliding-window attention layers
    int sliding_window = 0;  // of which sliding-window
    int gated_delta_net = 0;
    int mamba2 = 0;
    int mamba1 = 0;
    int dense_mlp = 0;
    int moe_mlp = 0;
};

[[nodiscard]] LayerCounts count_layers(const ModelSpec& spec);

// True when the model has both attention and recurrent (GDN / Mamba2) layers: vLLM's attn_type "hybrid".
[[nodiscard]] bool is_hybrid(const ModelSpec& spec);

// K+V bytes one token occupies in one attention layer on one tensor-parallel rank:
// 2 · max(1, kv_heads / TP) · head_dim · bytes(kv_dtype); MLA: (kv_lora_rank + qk_rope_head_dim) · bytes on every
// rank (DeepSeek-V3 bf16: 576 · 2 = 1,152).
[[nodiscard]] std::int64_t kv_bytes_per_token_layer(const AttentionMixer& attn, DType kv_dtype,
                                                    int tensor_parallel_size = 1);

// Sum over attention layers (e.g. Qwen3-4B bf16: 36 · 2 · 8 · 128 · 2 = 147,456).
[[nodiscard]] std::int64_t kv_bytes_per_token(const ModelSpec& spec, DType kv_dtype, int tensor_parallel_size = 1);

struct StateBytes {
    std::int64_t conv_bytes = 0;
    std::int64_t ssm_bytes = 0;

    [[nodiscard]] std::int64_t total() const { return conv_bytes + ssm_bytes; }
};

// One recurrent layer's state for one sequence (vLLM MambaSpec.page_size_bytes before padding).
// GDN: conv (Kc−1)·(2·Hk·dk + Hv·dv)·bytes(model dtype) + ssm Hv·dv·dk·bytes(ssm dtype).
// Mamba2: conv (Kc−1)·(H·hd + 2·G·N)·bytes(model) + ssm H·hd·N·bytes(ssm). Zero for other layers.
// With tensor parallelism, one rank's share: conv channels and heads divided by TP (mamba_utils.py).
// With speculative decoding the GDN conv state holds num_speculative_tokens more columns, Kc − 1 + k
// (MambaStateShapeCalculator.gated_delta_net_state_shape's num_spec); Mamba1/Mamba2 states do not change.
[[nodiscard]] StateBytes state_bytes_layer(const Layer& layer, DType model_dtype, int tensor_parallel_size = 1,
                                           int num_speculative_tokens = 0);

// Sum over recurrent layers: the state one sequence holds, independent of its length.
[[nodiscard]] std::int64_t state_bytes_per_sequence(const ModelSpec& spec);

// Largest per-layer recurrent state (the Mamba page vLLM aligns the attention page to); 0 if none.
[[nodiscard]] std::int64_t max_state_bytes_layer(const ModelSpec& spec);

struct ParamCounts {
    std::int64_t embedding = 0;  // input embedding
    std::int64_t lm_head = 0;    // 0 when tied
    std::int64_t layers = 0;     // all experts
    std::int64_t extra = 0;      // e.g. vision tower

    [[nodiscard]] std::int64_t total() const { return embedding + lm_head + layers + extra; }
};

// Every parameter the checkpoint holds for text decoding plus `extra` (vision tower). Linear weights, embeddings,
// depthwise conv weights and the per-head GDN/Mamba vectors (A_log, dt_bias, D) are counted; RMSNorm/LayerNorm
// weights of the text model are not (< 0.01 % of any preset).
[[nodiscard]] ParamCounts count_params(const ModelSpec& spec);

// Parameters one token touches: as count_params, but MoE layers count num_experts_per_tok routed experts (plus the
// shared expert and router) and `extra` is 0. Embedding and lm_head are included (Qwen3-235B-A22B: 22.2 B). A
// shared block (Layer::shares_weights, Zamba2) counts once, as in count_params; linear_flops_per_token counts it at
// every invocation.
[[nodiscard]] ParamCounts count_active_params(const ModelSpec& spec);

// Bytes vLLM loads onto the GPU (model_memory_usage): every parameter at the model dtype, vision tower included; for a
// quantized model (spec.quantization) the scheme's bytes with scales and zero points (models/weight_footprint.h).
[[nodiscard]] std::int64_t weight_bytes_total(const ModelSpec& spec);

// Weight bytes one forward step reads for a batch of num_tokens tokens: every non-expert layer weight and the
// lm_head (or tied embedding), not the input embedding table (a gather) nor a vision tower; for MoE layers the
// shared expert plus the expected number of distinct routed experts touched, E·(1 − (1 − k/E)^num_tokens). A shared
// block (Zamba2) is read at each invocation.
[[nodiscard]] std::int64_t weight_bytes_read_per_step(const ModelSpec& spec, std::int64_t num_tokens);

// Matmul FLOPs per token in the linear layers (2 · active parameters per token, lm_head included; a shared block
// once per invocation).
[[nodiscard]] double linear_flops_per_token(const ModelSpec& spec);

// Attention-score FLOPs (QKᵀ and PV) for one query token attending to context_tokens keys, summed over
// attention layers: attention_flops_per_key · attended_context_tokens per layer.
[[nodiscard]] double attention_flops_per_token(const ModelSpec& spec, std::int64_t context_tokens);

// Prefill FLOPs per (query, key) pair in one layer: 4 · Hq · head_dim; MLA runs prefill unabsorbed,
// 2 · H · (qk_nope + qk_rope + v_head_dim).
[[nodiscard]] double attention_flops_per_key(const AttentionMixer& attn);

// Decode FLOPs per context token in one layer: as prefill for GQA; MLA decodes absorbed over the latent,
// 2 · H · (kv_lora_rank + qk_rope_head_dim) for the scores plus 2 · H · kv_lora_rank for the values
// (DeepSeek-V3: 2·128·576 + 2·128·512 = 278,528).
[[nodiscard]] double decode_attention_flops_per_key(const AttentionMixer& attn);

// Keys the newest token of a context_tokens-long sequence attends to: min(context, window) for sliding layers,
// (context − 1) mod chunk + 1 for chunked local attention, context otherwise.
[[nodiscard]] std::int64_t attended_context_tokens(const AttentionMixer& attn, std::int64_t context_tokens);

}  // namespace servesim::models
