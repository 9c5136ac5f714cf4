// DType names as they appear in Hugging Face config.json (`torch_dtype` / `dtype`, `mamba_ssm_dtype`) and in vLLM
// flags (`--kv-cache-dtype fp8`, `--mamba-ssm-cache-dtype float32`). Parsing only; sizes are dtype_bytes() in
// models/model_spec.h. Unknown names are ConfigErrors listing the accepted spellings.
#pragma once

#include <string>
#include <string_view>

#include "models/model_spec.h"

namespace servesim::models {

// Accepts float32/fp32/float, bfloat16/bf16, float16/fp16/half, fp8/fp8_e4m3/fp8_e5m2/float8_e4m3fn/float8_e5m2
// (case-insensitive; a leading "torch." is ignored). Throws ConfigError("unknown dtype ...; allowed: ...").
[[nodiscard]] DType parse_dtype(std::string_view text);

// Same, with the error located at file:line and key.
[[nodiscard]] DType parse_dtype(std::string_view text, const std::string& file, int line, const std::string& key);

// The accepted spellings, comma separated, for error messages.
[[nodiscard]] std::string allowed_dtype_names();

}  // namespace servesim::models
