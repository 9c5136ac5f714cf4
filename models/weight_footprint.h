// The weights of a quantized model: every linear layer named as in the checkpoint (model.layers.N.self_attn.q_proj,
// ...mlp.down_proj, ...mlp.experts.gate_up_proj), the scheme of models/quantization.h that applies to it, and from
// that the bytes vLLM holds (weights, scales, zero points, indices), the bytes one step reads and the GEMM FLOPs by
// the kernel that runs them. Which layers a scheme leaves alone follows vLLM: only LinearBase layers and routed
// experts take a quant method (get_quant_method of each config class); the input embedding, the lm_head
// (ParallelLMHead, unless GPTQ/AWQ `lm_head: true`), norms, conv and SSM vectors, and the MoE router and shared-expert
// gate (built with quant_config=None in vLLM's MoE model classes) stay at the checkpoint dtype, as does any module an
// ignore list names. docs/QUANTIZATION.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace servesim::models {

enum class LinearRole { kAttention, kMixer, kDenseMlp, kSharedExpert, kExpert, kRouter, kLmHead };

// One linear layer (for routed experts: one projection of all experts of a layer, `count` of them).
struct LinearModule {
    std::string name;            // model.layers.3.self_attn.q_proj
    LinearRole role = LinearRole::kAttention;
    std::int64_t in_features = 0;   // K
    std::int64_t out_features = 0;  // N
    int count = 1;               // experts for kExpert
    const QuantScheme* scheme = nullptr;  // nullptr: unquantized (checkpoint dtype)
};

// GEMM FLOPs per token by the tensor-core rate they run at.
struct KernelFlops {
    double activation_dtype = 0;  // unquantized and weight-only (dequantize-GEMM) layers
    double fp8 = 0;               // W8A8 fp8
    double int8 = 0;              // W8A8 int8
    double fp4 = 0;               // W4A4 NVFP4
    [[nodiscard]] double total() const { return activation_dtype + fp8 + int8 + fp4; }
};

struct MoeLayerBytes {
    double per_expert_bytes = 0;  // one routed expert's weights and scales
    int num_experts = 0;
    int experts_per_token = 0;
};

struct WeightFootprint {
    std::int64_t loaded_bytes = 0;      // all ranks together: vLLM's model weights memory × TP
    std::int64_t quantized_params = 0;  // parameters stored in the quantized format
    double dense_read_bytes = 0;        // layer weights every step reads (all but routed experts), scales included
    double lm_head_bytes = 0;           // the output projection (lm_head, or the tied embedding)
    std::vector<MoeLayerBytes> moe;     // per MoE layer
    KernelFlops layer_flops_per_token;  // linear layers of the blocks (active experts only), without the lm_head
    KernelFlops expert_flops_per_token;  // the routed experts' part of layer_flops_per_token
};

// Every linear layer of the text model with its scheme (spec.quantization unset: all unquantized). A layer kind
// this function does not know is a ConfigError naming the quantization source (never silently unquantized).
[[nodiscard]] std::vector<LinearModule> linear_modules(const ModelSpec& spec);

// Bytes of one linear layer (all `count` copies) under its scheme; at `unquantized_dtype` when it has none.
[[nodiscard]] double linear_module_bytes(const LinearModule& m, DType unquantized_dtype);

[[nodiscard]] WeightFootprint weight_footprint(const ModelSpec& spec);

// Bytes one forward step of num_tokens tokens reads: dense layers, the lm_head, and per MoE layer the expected
// distinct experts E·(1 − (1 − k/E)^num_tokens), as weight_bytes_read_per_step.
[[nodiscard]] double weight_bytes_read(const WeightFootprint& f, std::int64_t num_tokens);

}  // namespace servesim::models
