// Reading weight quantization: config.json's `quantization_config` into a WeightQuantization (models/quantization.h),
// and vLLM's `--quantization` / `--dtype` applied to a resolved model as vLLM's ModelConfig applies them
// (vllm/config/model.py _verify_quantization, _get_and_verify_dtype). A method servesim does not model, or a key it
// would have to ignore to read the scheme, is a ConfigError naming the file and key: never a silent bf16 model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "models/model_spec.h"

namespace servesim::models {

// `qc` is the quantization_config mapping; checkpoint_dtype is the dtype of the tensors left unquantized (the scales
// of AWQ / GPTQ / int compressed-tensors are stored in it).
[[nodiscard]] WeightQuantization parse_quantization_config(const YamlMap& qc, DType checkpoint_dtype);

// The quant_method values parse_quantization_config reads, sorted.
[[nodiscard]] std::vector<std::string> supported_quantization_methods();

// vLLM's --quantization values servesim models: the checkpoint methods above, their kernel overrides (awq_marlin,
// gptq_marlin, marlin), and the online ones for an unquantized checkpoint (fp8, fp8_per_tensor, fp8_per_block,
// bitsandbytes).
[[nodiscard]] std::vector<std::string> modelled_quantization_flags();

// vLLM's --dtype values: auto, half, float16, bfloat16, float, float32.
[[nodiscard]] std::vector<std::string> modelled_dtype_flags();

// The model as vLLM would load it with `--quantization quantization` and `--dtype dtype` (unset = auto / the
// checkpoint's). A checkpoint quantized with method M accepts M and the overrides vLLM maps M to, else ConfigError
// ("... does not match ..."), as ModelConfig._verify_quantization; an unquantized checkpoint takes the online
// methods. --dtype sets the dtype of activations and of every unquantized tensor; auto keeps the checkpoint's.
// Errors name the flag.
[[nodiscard]] ModelSpec apply_engine_quantization(ModelSpec spec, const std::optional<std::string>& quantization,
                                                  const std::optional<std::string>& dtype);

}  // namespace servesim::models
