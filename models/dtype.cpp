// DType names: the canonical name printed for each DType and the spellings accepted from config.json
// (`torch_dtype`, `mamba_ssm_dtype`) and scenario files (`kv_cache_dtype`, as vLLM's --kv-cache-dtype).
// fp8 stands for every 1-byte float8 variant vLLM accepts (fp8_e4m3, fp8_e5m2): sizes are all that matter here.
#include "models/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "common/error.h"

namespace servesim::models {

namespace {

struct DTypeSpelling {
    std::string_view name;
    DType dtype;
};

constexpr std::array<DTypeSpelling, 13> kSpellings{{
    {"float32", DType::kFloat32},
    {"fp32", DType::kFloat32},
    {"float", DType::kFloat32},
    {"bfloat16", DType::kBFloat16},
    {"bf16", DType::kBFloat16},
    {"float16", DType::kFloat16},
    {"fp16", DType::kFloat16},
    {"half", DType::kFloat16},
    {"fp8", DType::kFp8},
    {"fp8_e4m3", DType::kFp8},
    {"fp8_e5m2", DType::kFp8},
    {"float8_e4m3fn", DType::kFp8},
    {"float8_e5m2", DType::kFp8},
}};

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

}  // namespace

const char* dtype_name(DType t) {
    switch (t) {
        case DType::kFloat32:
            return "float32";
        case DType::kBFloat16:
            return "bfloat16";
        case DType::kFloat16:
            return "float16";
        case DType::kFp8:
            return "fp8";
    }
    return "unknown";
}

std::string allowed_dtype_names() {
    std::string out;
    for (const auto& s : kSpellings) {
        out += (out.empty() ? "" : ", ") + std::string(s.name);
    }
    return out;
}

DType parse_dtype(std::string_view text, const std::string& file, int line, const std::string& key) {
    std::string name = lower(text);
    if (name.rfind("torch.", 0) == 0) {
        name.erase(0, 6);
    }
    for (const auto& s : kSpellings) {
        if (s.name == name) {
            return s.dtype;
        }
    }
    throw ConfigError(file, line, key, "unknown dtype '" + std::string(text) + "'; allowed: " + allowed_dtype_names());
}

DType parse_dtype(std::string_view text) {
    return parse_dtype(text, "", 0, "");
}

}  // namespace servesim::models
