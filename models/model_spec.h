// ModelSpec: an LLM architecture as data — the list of residual blocks (token mixer + MLP), embeddings and dtypes.
// Built from a preset (models/presets/*.yaml) or a Hugging Face config.json (models/hf_config.h) and immutable
// afterwards. Sizes derived from it (KV bytes per token, state bytes, weights, FLOPs) are free functions in
// models/model_derived.h. Shapes follow the Hugging Face configs; state shapes follow vLLM's
// vllm/model_executor/layers/mamba/mamba_utils.py (gated_delta_net_state_shape, mamba2_state_shape).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "models/quantization.h"

namespace servesim::models {

enum class DType { kFloat32, kBFloat16, kFloat16, kFp8 };

[[nodiscard]] constexpr int dtype_bytes(DType t) {
    switch (t) {
        case DType::kFloat32:
            return 4;
        case DType::kBFloat16:
        case DType::kFloat16:
            return 2;
        case DType::kFp8:
            return 1;
    }
    return 0;
}

[[nodiscard]] const char* dtype_name(DType t);

// Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi-K2; vLLM vllm/model_executor/layers/mla.py). The KV cache
// holds one compressed latent of kv_lora_rank + qk_rope_head_dim elements per token per layer, shared by all heads
// and replicated on every tensor-parallel rank (vLLM MLAAttentionSpec: num_kv_heads 1, head_size 576 for V3).
struct MlaShape {
    int q_lora_rank = 0;  // 0: q_proj straight from the hidden state (DeepSeek-V2-Lite), else q_a_proj → q_b_proj
    int kv_lora_rank = 0;
    int qk_nope_head_dim = 0;
    int qk_rope_head_dim = 0;
    int v_head_dim = 0;
    bool operator==(const MlaShape&) const = default;
};

// Softmax attention (GQA, or MLA when `mla` is set). sliding_window_tokens == 0 and attention_chunk_tokens == 0
// mean full attention. For MLA head_dim is the query/key head size qk_nope_head_dim + qk_rope_head_dim.
struct AttentionMixer {
    int num_q_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    bool output_gate = false;  // Qwen3-Next / Qwen3.5 gated attention: q_proj doubles.
    int sliding_window_tokens = 0;
    // Llama-4 chunked local attention (vLLM ChunkedLocalAttentionSpec): a token attends only to the tokens of its
    // own attention_chunk_size-aligned chunk.
    int attention_chunk_tokens = 0;
    bool sinks = false;  // gpt-oss: one learned sink logit per query head (parameters only; no KV)
    bool qk_norm = false;  // per-head RMSNorm of q and k (Qwen3, Qwen3-Next, Gemma 3): weights of head_dim only
    std::optional<MlaShape> mla = std::nullopt;
    // Width of the q/k/v projections' input; 0 means hidden_size. Zamba2's shared attention reads the hidden state
    // concatenated with the input embeddings (vLLM zamba2.py, Zamba2AttentionDecoderLayer): attention_hidden_size =
    // 2 · hidden_size.
    int input_size = 0;
    bool operator==(const AttentionMixer&) const = default;
};

// Gated DeltaNet (Qwen3-Next, Qwen3.5 "linear_attention" layers). Recurrent state: ssm (Hv, dv, dk) in
// ssm_state_dtype and conv (conv_kernel-1, conv_dim) in the model dtype.
struct GatedDeltaNetMixer {
    int num_k_heads = 0;
    int num_v_heads = 0;
    int k_head_dim = 0;
    int v_head_dim = 0;
    int conv_kernel = 0;
    DType ssm_state_dtype = DType::kBFloat16;
    // Qwen3-Next's checkpoints group q, k, v, z (and b, a) per key head; vLLM reorders them every step
    // (GatedDeltaNetAttention gqa_interleaved_layout, fix_query_key_value_ordering). Qwen3.5's are [q k v z], [b a].
    bool interleaved_projections = false;
    bool operator==(const GatedDeltaNetMixer&) const = default;
};

// Mamba2 (Nemotron-H, Granite-4.0-H). intermediate_size = expand * hidden = num_heads * head_dim.
struct Mamba2Mixer {
    int num_heads = 0;
    int head_dim = 0;
    int state_size = 0;
    int n_groups = 0;
    int conv_kernel = 0;
    int chunk_size = 0;
    DType ssm_state_dtype = DType::kBFloat16;
    bool operator==(const Mamba2Mixer&) const = default;
};

// Mamba-1 (Jamba's mamba layers; vLLM mamba_utils.py mamba1_state_shape): conv (conv_kernel − 1, intermediate) in
// the model dtype and ssm (intermediate, state_size) in ssm_state_dtype. intermediate = mamba_expand · hidden.
struct Mamba1Mixer {
    int intermediate_size = 0;
    int state_size = 0;
    int conv_kernel = 0;
    int dt_rank = 0;
    DType ssm_state_dtype = DType::kBFloat16;
    bool operator==(const Mamba1Mixer&) const = default;
};

struct NoMixer {
    bool operator==(const NoMixer&) const = default;
};

using Mixer = std::variant<NoMixer, AttentionMixer, GatedDeltaNetMixer, Mamba2Mixer, Mamba1Mixer>;

struct DenseMlp {
    int intermediate_size = 0;
    bool gated = true;  // SwiGLU (3 matrices) vs non-gated relu2 (2 matrices, Nemotron-H)
    bool operator==(const DenseMlp&) const = default;
};

struct MoeMlp {
    int num_experts = 0;
    int num_experts_per_tok = 0;
    int moe_intermediate_size = 0;
    int shared_expert_intermediate_size = 0;  // 0 = no shared expert
    // Qwen2-MoE / Qwen3-Next scale the shared expert by a sigmoid gate (an h → 1 linear); DeepSeek and GLM-4.5
    // add their shared experts ungated.
    bool shared_expert_gate = true;
    bool gated = true;  // experts are SwiGLU (3 matrices); false: relu2 experts with 2 matrices (Nemotron-H 'E')
    bool operator==(const MoeMlp&) const = default;
};

struct NoMlp {
    bool operator==(const NoMlp&) const = default;
};

using Mlp = std::variant<NoMlp, DenseMlp, MoeMlp>;

// One residual block. Qwen/Llama blocks have both; Nemotron-H's pattern characters are blocks with only one.
// Falcon-H1's parallel layer is two blocks (its attention branch, then its Mamba2 branch with the MLP); a Zamba2
// hybrid layer is the shared transformer block's invocation (attention + MLP) followed by its Mamba2 block.
struct Layer {
    Mixer mixer;
    Mlp mlp;
    // The mixer's and MLP's weights are those of an earlier block (Zamba2's shared transformer blocks, reused at
    // every hybrid layer): held once in memory, read and computed at every invocation (vLLM zamba2.py, Zamba2Model).
    bool shares_weights = false;
    // Linear weights this block holds on its own besides mixer and MLP, held and read at every step (Zamba2: the
    // per-invocation LoRA adapters of the shared block and the hybrid layer's hidden → hidden linear).
    std::int64_t adapter_params = 0;
    bool operator==(const Layer&) const = default;
};

// The shape of a Qwen2.5/3-VL-style vision tower (hf_config `vision_config`), for vLLM's encoder profile run
// (sim/memory/memory_plan.cpp, encoder_profile_peak_bytes). Its parameters are in ModelSpec::extra_params.
struct VisionTower {
    int depth = 0;
    int hidden_size = 0;
    int intermediate_size = 0;
    int patch_size = 16;
    int temporal_patch_size = 2;
    int in_channels = 3;
    int spatial_merge_size = 2;
    int out_hidden_size = 0;
    bool operator==(const VisionTower&) const = default;
};

struct ModelSpec {
    std::string name;
    int hidden_size = 0;
    int vocab_size = 0;
    bool tie_word_embeddings = false;
    int max_position_embeddings = 0;
    DType dtype = DType::kBFloat16;  // weights and activations; also the conv-state dtype (vLLM mamba_cache_dtype auto)
    std::vector<Layer> layers;
    // Parameters the checkpoint loads but text decoding never reads (a vision tower). Counted in the weight memory
    // vLLM reserves, not in the bytes read per decode step.
    std::int64_t extra_params = 0;
    std::optional<VisionTower> vision;  // set when the checkpoint has a vision tower
    // vLLM class capability: implements SupportsMambaPrefixCaching, so --enable-prefix-caching picks mamba_cache_mode
    // "all" instead of "align" (vllm/model_executor/models/config.py, MambaModelConfig.verify_and_update_config).
    bool supports_mamba_prefix_caching_all = false;
    // Pipeline parallelism splits vLLM's decoder layers (make_layers over num_hidden_layers), which are this many
    // consecutive blocks here: 1, except Falcon-H1, whose parallel layer is two blocks (attention, Mamba2 + MLP).
    int blocks_per_decoder_layer = 1;
    // vLLM class capability SupportsPP; Zamba2ForCausalLM lacks it, so vLLM refuses pipeline_parallel_size > 1.
    bool supports_pipeline_parallel = true;
    // Weight quantization (config.json `quantization_config`, or vLLM's --quantization); unset = every weight at
    // `dtype`. Weight bytes and GEMM kernels follow from it (models/weight_footprint.h, docs/QUANTIZATION.md).
    std::optional<WeightQuantization> quantization;
    bool operator==(const ModelSpec&) const = default;
};

}  // namespace servesim::models
