// Weight quantization as data: what a checkpoint's `quantization_config` (config.json) or vLLM's `--quantization`
// says about how each linear layer's weights are stored and which GEMM kernel runs them. Parsing only; the bytes and
// FLOPs that follow are models/weight_footprint.h. Each scheme follows the vLLM config class that loads it
// (vllm/model_executor/layers/quantization/: Fp8Config fp8.py, FBGEMMFp8Config fbgemm_fp8.py, CompressedTensorsConfig
// compressed_tensors/, AWQConfig / AWQMarlinConfig awq*.py, AutoGPTQConfig auto_gptq.py, BitsAndBytesConfig
// bitsandbytes.py, Mxfp4Config mxfp4.py, ModelOptNvFp4Config modelopt.py); docs/QUANTIZATION.md has the table.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesim::models {

// Where one weight scale (or zero point) applies.
enum class ScaleGranularity {
    kTensor,   // one per logical matrix (per shard of a fused qkv / gate_up)
    kChannel,  // one per output row
    kGroup,    // one per `group_size` consecutive input elements of each output row
    kBlock,    // one per block_n × block_k tile
};

// What the activations are quantized to, i.e. which tensor-core rate the GEMM runs at.
enum class ActivationQuant {
    kNone,  // weight-only: the kernel dequantizes the weights and multiplies at the activation dtype (Marlin, AWQ)
    kFp8,   // W8A8 fp8: fp8 tensor cores (falls back to weight-only fp8 Marlin on GPUs without fp8)
    kInt8,  // W8A8 int8: int8 tensor cores
    kFp4,   // W4A4 NVFP4: fp4 tensor cores (falls back to weight-only NVFP4 Marlin on GPUs without fp4)
};

// How one linear layer's weights are stored once vLLM has loaded and repacked them.
struct QuantScheme {
    int weight_bits = 16;
    bool float_weights = false;  // fp8 / fp4 (e4m3, e2m1) rather than int
    ScaleGranularity granularity = ScaleGranularity::kChannel;
    int group_size = 0;             // kGroup: input elements per scale (bitsandbytes: elements of the flat weight)
    int block_n = 0;                // kBlock: output rows per block
    int block_k = 0;                // kBlock: input columns per block
    double scale_bytes = 4;         // bytes per scale entry (fp32 4, fp16/bf16 2, fp8 e4m3 / e8m0 1)
    int zero_point_bits = 0;        // asymmetric int: one zero point of this width per scale entry; 0 = symmetric
    int tensor_scalar_bytes = 0;    // per-shard fp32 scalars (NVFP4 global scale + input scale, static input scale)
    int index_bytes_per_input = 0;  // GPTQ desc_act: g_idx + Marlin's sort indices, int32 each, per input row
    ActivationQuant activations = ActivationQuant::kNone;
    bool operator==(const QuantScheme&) const = default;
};

// One scheme and the modules it applies to. `targets` as compressed-tensors writes them: "Linear" (every linear
// layer), an exact module name, or "re:<regex>" matched from the start of the name.
struct QuantRule {
    std::vector<std::string> targets{"Linear"};
    QuantScheme scheme;
    bool operator==(const QuantRule&) const = default;
};

struct WeightQuantization {
    std::string method;       // vLLM's name: fp8, fbgemm_fp8, compressed-tensors, awq, gptq, bitsandbytes, mxfp4,
                              // modelopt_fp4
    std::string description;  // one line for inspect and describe(): "fbgemm_fp8: fp8 W8A8, per-channel scales"
    std::string source;       // "<file>: quantization_config" or "--quantization fp8" (for messages)
    std::vector<QuantRule> rules;  // first match wins; a linear layer no rule targets stays unquantized
    // Modules kept at the checkpoint dtype: exact names, parents ("model.layers.0" keeps its whole block),
    // "re:<regex>" (compressed-tensors) and, with ignore_by_substring (AWQ, bitsandbytes), any substring.
    std::vector<std::string> ignore;
    bool ignore_by_substring = false;
    bool experts_only = false;       // MXFP4 (gpt-oss): only the routed experts are quantized, every LinearBase not
    bool lm_head_quantized = false;  // GPTQ / AWQ `lm_head: true`
    bool operator==(const WeightQuantization&) const = default;
};

}  // namespace servesim::models
