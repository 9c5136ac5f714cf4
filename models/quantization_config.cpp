// quantization_config → WeightQuantization, one reader per vLLM config class (see quantization_config.h). What each
// reader takes from vLLM (vllm/model_executor/layers/quantization/, v0.22):
//  fp8          Fp8Config.from_config: activation_scheme required (dynamic|static), ignored_layers or
//               modules_to_not_convert, weight_block_size [n, k] (block scales fp32 "weight_scale_inv", one per
//               tile, ceil-divided; dynamic activations only); per-tensor: one fp32 weight_scale per shard, plus an
//               fp32 input_scale per shard when static (create_fp8_scale_parameter, create_fp8_input_scale).
//  fbgemm_fp8   FBGEMMFp8Config: modules_to_not_convert and activation_scale_ub required; fp8 weights with one fp32
//               scale per output channel, dynamic per-token fp8 activations, an fp32 input_scale_ub per layer.
//  awq          AWQConfig / AWQMarlinConfig: 4-bit only; qweight int4 packed, fp16 scales and int4 zero points per
//               group of group_size inputs; modules_to_not_convert matched as substrings (skip_with_substr).
//  gptq         AutoGPTQConfig: bits, group_size (-1 = per channel), desc_act, sym required; scales in the model
//               dtype per group, int zero points only when asymmetric (Marlin drops them for sym), g_idx + sort
//               indices (int32 each per input row) only with desc_act (MarlinLinearKernel.process_weights...).
//  bitsandbytes BitsAndBytesConfig: load_in_4bit (nf4 / fp4, blocks of 64 with an fp32 absmax, or with double
//               quant an 8-bit absmax plus one fp32 per 256 blocks) or load_in_8bit (int8 + fp32 row scale);
//               llm_int8_skip_modules matched as substrings (is_layer_skipped_bnb).
//  mxfp4        Mxfp4Config (gpt-oss): only the routed experts, e2m1 with one e8m0 byte per 32; every LinearBase
//               stays unquantized.
//  modelopt     ModelOptFp8Config / ModelOptNvFp4Config: quant_algo FP8 (per-tensor), FP8_PER_CHANNEL_PER_TOKEN,
//               NVFP4 (e2m1, one fp8 e4m3 scale per 16, fp32 global and input scales per shard; W4A4),
//               W4A16_NVFP4 (weight-only); `ignore` / exclude_modules wildcards.
//  compressed-tensors  CompressedTensorsConfig: config_groups (targets, weights {num_bits, type, strategy,
//               group_size, block_structure, symmetric}, input_activations) and ignore; the schemes W8A8-fp8,
//               W8A16-fp8, W8A8-int8, WNA16 (int4/int8 weight-only), NVFP4 (tensor_group of 16) and MXFP4 (group 32).
#include "models/quantization_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <regex>
#include <string_view>

#include "common/error.h"
#include "models/dtype.h"

namespace servesim::models {

namespace {

constexpr std::array<std::string_view, 8> kMethods{
    "awq", "bitsandbytes", "compressed-tensors", "fbgemm_fp8", "fp8", "gptq", "modelopt", "mxfp4",
};

// vLLM methods it knows but servesim does not model: named so the error says so rather than "unknown".
constexpr std::array<std::string_view, 12> kUnmodelledMethods{
    "gguf",  "quark", "torchao",      "inc",    "experts_int8", "fp_quant",
    "hqq",   "exl2",  "deepseek_v4_fp8", "humming", "auto-round", "bitnet",
};

template <std::size_t N>
std::string join(const std::array<std::string_view, N>& items) {
    std::string out;
    for (auto s : items) {
        out += (out.empty() ? "" : ", ") + std::string(s);
    }
    return out;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) {
        out += (out.empty() ? "" : ", ") + s;
    }
    return out;
}

// A "re:<regex>" module pattern must compile (models/weight_footprint.cpp matches with it).
void check_pattern(const YamlMap& c, std::string_view key, const std::string& pattern) {
    if (pattern.rfind("re:", 0) != 0) {
        return;
    }
    try {
        (void)std::regex(pattern.substr(3));
    } catch (const std::regex_error& e) {
        c.fail(key, "'" + pattern + "' is not a valid regular expression: " + e.what());
    }
}

// A list of strings, or null / absent (empty).
std::vector<std::string> optional_string_list(const YamlMap& c, std::string_view key) {
    std::vector<std::string> out;
    if (!c.has(key) || c.raw()[std::string(key)].IsNull()) {
        return out;
    }
    const YAML::Node n = c.node(key);
    if (!n.IsSequence()) {
        c.fail(key, "expected a list of module names");
    }
    for (const auto& item : n) {
        out.push_back(c.convert<std::string>(item, key));
        check_pattern(c, key, out.back());
    }
    return out;
}

// A key vLLM requires (get_from_keys): missing is an error as in vLLM; null is allowed where vLLM tolerates it.
void require_key(const YamlMap& c, std::string_view key, const std::string& method) {
    if (!c.has(key)) {
        c.fail(key, fmt::format("missing; vLLM's {} loader requires it", method));
    }
}

// ModelOpt writes fnmatch wildcards ("model.layers.*.mlp.gate", "*self_attn*"): as an anchored regex.
std::string glob_to_regex(const std::string& glob) {
    std::string re = "re:";
    for (char ch : glob) {
        if (ch == '*') {
            re += ".*";
        } else if (ch == '?') {
            re += '.';
        } else if (std::string_view(".+()[]{}^$|\\").find(ch) != std::string_view::npos) {
            re += '\\';
            re += ch;
        } else {
            re += ch;
        }
    }
    return re + "$";
}

QuantScheme fp8_scheme(ScaleGranularity g) {
    QuantScheme s;
    s.weight_bits = 8;
    s.float_weights = true;
    s.granularity = g;
    s.scale_bytes = 4;  // fp32
    s.activations = ActivationQuant::kFp8;
    return s;
}

QuantScheme fp8_block_scheme(int block_n, int block_k) {
    QuantScheme s = fp8_scheme(ScaleGranularity::kBlock);
    s.block_n = block_n;
    s.block_k = block_k;
    return s;
}

// NVFP4: e2m1 weights, one fp8 e4m3 scale per 16 inputs, fp32 global weight scale + input scale per shard.
QuantScheme nvfp4_scheme(int group_size, bool w4a4) {
    QuantScheme s;
    s.weight_bits = 4;
    s.float_weights = true;
    s.granularity = ScaleGranularity::kGroup;
    s.group_size = group_size;
    s.scale_bytes = 1;
    s.tensor_scalar_bytes = w4a4 ? 8 : 4;
    s.activations = w4a4 ? ActivationQuant::kFp4 : ActivationQuant::kNone;
    return s;
}

QuantScheme mxfp4_scheme() {
    QuantScheme s;
    s.weight_bits = 4;
    s.float_weights = true;
    s.granularity = ScaleGranularity::kGroup;
    s.group_size = 32;
    s.scale_bytes = 1;  // e8m0
    return s;
}

int group_or_channel(const YamlMap& c, std::string_view key, QuantScheme& s) {
    const int g = c.get<int>(key);
    if (g == -1) {
        s.granularity = ScaleGranularity::kChannel;
    } else if (g > 0) {
        s.granularity = ScaleGranularity::kGroup;
        s.group_size = g;
    } else {
        c.fail(key, fmt::format("must be a positive group size or -1 (one group per channel), got {}", g));
    }
    return g;
}

WeightQuantization read_fp8(const YamlMap& c) {
    WeightQuantization q;
    q.method = "fp8";
    require_key(c, "activation_scheme", "fp8 (Fp8Config)");
    const auto scheme = c.get<std::string>("activation_scheme");
    if (scheme != "dynamic" && scheme != "static") {
        c.fail("activation_scheme", "'" + scheme + "' is not an activation scheme; allowed: dynamic, static");
    }
    q.ignore = optional_string_list(c, "ignored_layers");
    if (q.ignore.empty()) {
        q.ignore = optional_string_list(c, "modules_to_not_convert");
    }
    QuantRule rule;
    if (c.has("weight_block_size") && !c.raw()["weight_block_size"].IsNull()) {
        const YAML::Node n = c.node("weight_block_size");
        if (!n.IsSequence() || n.size() != 2) {
            c.fail("weight_block_size", "expected two block dimensions [n, k]");
        }
        const int bn = c.convert<int>(n[0], "weight_block_size");
        const int bk = c.convert<int>(n[1], "weight_block_size");
        if (bn <= 0 || bk <= 0) {
            c.fail("weight_block_size", fmt::format("dimensions must be positive, got [{}, {}]", bn, bk));
        }
        if (scheme != "dynamic") {
            c.fail("activation_scheme", "block-wise fp8 (weight_block_size) runs only with dynamic activations in "
                                        "vLLM (Fp8Config)");
        }
        rule.scheme = fp8_block_scheme(bn, bk);
        q.description = fmt::format("fp8: fp8 W8A8, {}x{} block scales", bn, bk);
    } else {
        rule.scheme = fp8_scheme(ScaleGranularity::kTensor);
        rule.scheme.tensor_scalar_bytes = scheme == "static" ? 4 : 0;  // input_scale per shard
        q.description = fmt::format("fp8: fp8 W8A8, per-tensor scales, {} activation scales", scheme);
    }
    q.rules.push_back(rule);
    return q;
}

WeightQuantization read_fbgemm_fp8(const YamlMap& c) {
    WeightQuantization q;
    q.method = "fbgemm_fp8";
    require_key(c, "modules_to_not_convert", "fbgemm_fp8 (FBGEMMFp8Config)");
    require_key(c, "activation_scale_ub", "fbgemm_fp8 (FBGEMMFp8Config)");
    q.ignore = optional_string_list(c, "modules_to_not_convert");
    QuantRule rule;
    rule.scheme = fp8_scheme(ScaleGranularity::kChannel);
    rule.scheme.tensor_scalar_bytes = 4;  // input_scale_ub, one fp32 per layer
    q.rules.push_back(rule);
    q.description = "fbgemm_fp8: fp8 W8A8, per-channel weight scales, dynamic per-token activations";
    return q;
}

WeightQuantization read_awq(const YamlMap& c, DType checkpoint_dtype) {
    WeightQuantization q;
    q.method = "awq";
    const std::string_view bits_key = c.has("w_bit") ? "w_bit" : "bits";
    const std::string_view group_key = c.has("q_group_size") ? "q_group_size" : "group_size";
    const int bits = c.get<int>(bits_key);
    if (bits != 4) {
        c.fail(bits_key, fmt::format("{}: vLLM's AWQ supports only 4-bit weights", bits));
    }
    require_key(c, "zero_point", "awq (AWQConfig)");
    QuantRule rule;
    rule.scheme.weight_bits = 4;
    const int g = group_or_channel(c, group_key, rule.scheme);
    rule.scheme.scale_bytes = dtype_bytes(checkpoint_dtype);
    rule.scheme.zero_point_bits = c.get<bool>("zero_point") ? 4 : 0;
    q.rules.push_back(rule);
    q.ignore = optional_string_list(c, "modules_to_not_convert");
    q.ignore_by_substring = true;
    q.lm_head_quantized = c.get_optional<bool>("lm_head").value_or(false);
    q.description = fmt::format("awq: int4 weight-only, {}{}", g > 0 ? fmt::format("group {}", g) : "per-channel",
                                rule.scheme.zero_point_bits > 0 ? " with zero points" : "");
    return q;
}

WeightQuantization read_gptq(const YamlMap& c, DType checkpoint_dtype) {
    WeightQuantization q;
    q.method = "gptq";
    const int bits = c.get<int>("bits");
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
        c.fail("bits", fmt::format("{}: GPTQ weights are 2, 3, 4 or 8 bits", bits));
    }
    for (std::string_view k : {"desc_act", "sym"}) {
        require_key(c, k, "gptq (AutoGPTQConfig)");
    }
    if (c.has("dynamic") && !c.raw()["dynamic"].IsNull() && c.raw()["dynamic"].size() > 0) {
        c.fail("dynamic", "per-module GPTQ overrides are not modelled; remove them or use one scheme for every layer");
    }
    QuantRule rule;
    rule.scheme.weight_bits = bits;
    const int g = group_or_channel(c, "group_size", rule.scheme);
    rule.scheme.scale_bytes = dtype_bytes(checkpoint_dtype);
    rule.scheme.zero_point_bits = c.get<bool>("sym") ? 0 : bits;
    rule.scheme.index_bytes_per_input = c.get<bool>("desc_act") ? 8 : 0;
    // modules_in_block_to_quantize: only these modules of each block are quantized (names relative to the block).
    if (c.has("modules_in_block_to_quantize") && !c.raw()["modules_in_block_to_quantize"].IsNull()) {
        const YAML::Node n = c.node("modules_in_block_to_quantize");
        if (!n.IsSequence()) {
            c.fail("modules_in_block_to_quantize", "expected a list of module-name lists");
        }
        rule.targets.clear();
        for (const auto& item : n) {
            const auto add = [&](const YAML::Node& name) {
                rule.targets.push_back(glob_to_regex("*." + c.convert<std::string>(name, "modules_in_block_to_quantize")));
            };
            if (item.IsSequence()) {
                for (const auto& name : item) {
                    add(name);
                }
            } else {
                add(item);
            }
        }
    }
    q.rules.push_back(rule);
    q.lm_head_quantized = c.get_optional<bool>("lm_head").value_or(false);
    q.description = fmt::format("gptq: int{} weight-only, {}{}{}", bits,
                                g > 0 ? fmt::format("group {}", g) : "per-channel",
                                rule.scheme.zero_point_bits > 0 ? ", asymmetric" : ", symmetric",
                                rule.scheme.index_bytes_per_input > 0 ? ", act-order" : "");
    return q;
}

QuantScheme bnb_4bit_scheme(bool double_quant) {
    QuantScheme s;
    s.weight_bits = 4;
    s.granularity = ScaleGranularity::kGroup;
    s.group_size = 64;  // bitsandbytes quantize_4bit blocksize
    // absmax per block: fp32, or (double quant) an 8-bit code per block plus one fp32 per 256 blocks.
    s.scale_bytes = double_quant ? 1.0 + 4.0 / 256.0 : 4.0;
    return s;
}

WeightQuantization read_bitsandbytes(const YamlMap& c) {
    WeightQuantization q;
    q.method = "bitsandbytes";
    const bool in_8bit = c.get_optional<bool>("load_in_8bit").value_or(false);
    const bool in_4bit = c.get_optional<bool>("load_in_4bit").value_or(!in_8bit);
    if (in_8bit == in_4bit) {
        c.fail(in_8bit ? "load_in_8bit" : "load_in_4bit", "set exactly one of load_in_4bit and load_in_8bit");
    }
    QuantRule rule;
    if (in_4bit) {
        const auto type = c.get_optional<std::string>("bnb_4bit_quant_type").value_or("fp4");
        if (type != "nf4" && type != "fp4") {
            c.fail("bnb_4bit_quant_type", "'" + type + "' is not a bitsandbytes 4-bit type; allowed: nf4, fp4");
        }
        const bool dq = c.get_optional<bool>("bnb_4bit_use_double_quant").value_or(false);
        rule.scheme = bnb_4bit_scheme(dq);
        q.description = fmt::format("bitsandbytes: {} 4-bit weight-only, blocks of 64{}", type,
                                    dq ? ", double-quantized absmax" : "");
    } else {
        rule.scheme.weight_bits = 8;
        rule.scheme.granularity = ScaleGranularity::kChannel;
        rule.scheme.scale_bytes = 4;  // LLM.int8 SCB, fp32 per row
        q.description = "bitsandbytes: LLM.int8 8-bit weights";
    }
    q.rules.push_back(rule);
    q.ignore = optional_string_list(c, "llm_int8_skip_modules");
    q.ignore_by_substring = true;
    return q;
}

WeightQuantization read_mxfp4() {
    WeightQuantization q;
    q.method = "mxfp4";
    QuantRule rule;
    rule.scheme = mxfp4_scheme();
    q.rules.push_back(rule);
    q.experts_only = true;
    q.description = "mxfp4: MoE experts in MXFP4 (e2m1, e8m0 scale per 32), weight-only; attention unquantized";
    return q;
}

WeightQuantization read_modelopt(const YamlMap& top) {
    // Two layouts: {"quantization": {"quant_algo", "exclude_modules", "group_size"}} (hf_quant_config.json) or
    // the config.json form {"quant_algo", "ignore", "group_size"}.
    const bool legacy = top.has("quantization");
    const YamlMap c = legacy ? top.map("quantization") : top;
    const std::string_view ignore_key = legacy ? "exclude_modules" : "ignore";
    std::string algo = c.get<std::string>("quant_algo");
    std::transform(algo.begin(), algo.end(), algo.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    WeightQuantization q;
    QuantRule rule;
    if (algo == "FP8") {
        q.method = "modelopt";
        rule.scheme = fp8_scheme(ScaleGranularity::kTensor);
        rule.scheme.tensor_scalar_bytes = 4;  // static input_scale per shard
        q.description = "modelopt: fp8 W8A8, per-tensor scales";
    } else if (algo == "FP8_PER_CHANNEL_PER_TOKEN") {
        q.method = "modelopt";
        rule.scheme = fp8_scheme(ScaleGranularity::kChannel);
        q.description = "modelopt: fp8 W8A8, per-channel weight scales, per-token activations";
    } else if (algo == "NVFP4" || algo == "W4A16_NVFP4") {
        q.method = "modelopt_fp4";
        const int g = c.get_optional<int>("group_size").value_or(16);
        if (g != 16) {
            c.fail("group_size", fmt::format("NVFP4 uses groups of 16, got {}", g));
        }
        rule.scheme = nvfp4_scheme(g, algo == "NVFP4");
        q.description = algo == "NVFP4" ? "modelopt_fp4: NVFP4 W4A4 (e2m1, fp8 scale per 16)"
                                        : "modelopt_fp4: NVFP4 weight-only W4A16 (e2m1, fp8 scale per 16)";
    } else {
        c.fail("quant_algo", "'" + algo + "' is not modelled; allowed: FP8, FP8_PER_CHANNEL_PER_TOKEN, NVFP4, "
                             "W4A16_NVFP4");
    }
    q.rules.push_back(rule);
    for (const auto& e : optional_string_list(c, ignore_key)) {
        q.ignore.push_back(e.find('*') != std::string::npos || e.find('?') != std::string::npos ? glob_to_regex(e) : e);
    }
    return q;
}

// One compressed-tensors scheme from a config group's `weights` and `input_activations`.
QuantScheme read_ct_scheme(const YamlMap& group, DType checkpoint_dtype, std::string& name) {
    const YamlMap w = group.map("weights");
    const int bits = w.get<int>("num_bits");
    const auto type = w.get<std::string>("type");
    const auto strategy = w.get<std::string>("strategy");
    const bool symmetric = w.get_optional<bool>("symmetric").value_or(true);
    std::optional<YamlMap> act;
    if (group.has("input_activations") && !group.raw()["input_activations"].IsNull()) {
        act = group.map("input_activations");
    }
    const int act_bits = act ? act->get<int>("num_bits") : 16;
    const std::string act_type = act ? act->get<std::string>("type") : "";
    const auto granularity = [&](QuantScheme& s) {
        if (strategy == "tensor") {
            s.granularity = ScaleGranularity::kTensor;
        } else if (strategy == "channel") {
            s.granularity = ScaleGranularity::kChannel;
        } else if (strategy == "group" || strategy == "tensor_group") {
            s.granularity = ScaleGranularity::kGroup;
            s.group_size = w.get<int>("group_size");
            if (s.group_size <= 0) {
                w.fail("group_size", fmt::format("must be positive, got {}", s.group_size));
            }
        } else if (strategy == "block") {
            s.granularity = ScaleGranularity::kBlock;
            const YAML::Node b = w.node("block_structure");
            if (!b.IsSequence() || b.size() != 2) {
                w.fail("block_structure", "expected two block dimensions [n, k]");
            }
            s.block_n = w.convert<int>(b[0], "block_structure");
            s.block_k = w.convert<int>(b[1], "block_structure");
            if (s.block_n <= 0 || s.block_k <= 0) {
                w.fail("block_structure", fmt::format("dimensions must be positive, got [{}, {}]", s.block_n, s.block_k));
            }
        } else {
            w.fail("strategy", "'" + strategy + "' is not modelled; allowed: tensor, channel, group, tensor_group, block");
        }
    };
    QuantScheme s;
    if (type == "float" && bits == 8) {
        s = fp8_scheme(ScaleGranularity::kTensor);
        granularity(s);
        if (act && act_type == "float" && act_bits == 8) {
            s.activations = ActivationQuant::kFp8;
            s.tensor_scalar_bytes = act->get_optional<bool>("dynamic").value_or(true) ? 0 : 4;
            name = "fp8 W8A8";
        } else if (!act) {
            s.activations = ActivationQuant::kNone;  // CompressedTensorsW8A16Fp8: Marlin weight-only
            name = "fp8 weight-only W8A16";
        } else {
            group.fail("input_activations", "fp8 weights with these activations are not modelled; allowed: fp8 "
                                            "activations or none");
        }
    } else if (type == "float" && bits == 4) {
        granularity(s);
        if (s.granularity != ScaleGranularity::kGroup || (s.group_size != 16 && s.group_size != 32)) {
            w.fail("group_size", "4-bit float weights are modelled as NVFP4 (tensor_group, 16) or MXFP4 (group, 32)");
        }
        const bool w4a4 = act && act_type == "float" && act_bits == 4;
        if (act && !w4a4) {
            group.fail("input_activations", "4-bit float weights with these activations are not modelled");
        }
        if (s.group_size == 16) {
            s = nvfp4_scheme(16, w4a4);
            name = w4a4 ? "NVFP4 W4A4" : "NVFP4 weight-only";
        } else {
            s = mxfp4_scheme();
            if (w4a4) {
                group.fail("input_activations", "MXFP4 W4A4 is not modelled; MXFP4 weights run weight-only");
            }
            name = "MXFP4 weight-only";
        }
    } else if (type == "int" && (bits == 4 || bits == 8)) {
        s.weight_bits = bits;
        granularity(s);
        if (!act) {
            // CompressedTensorsWNA16 (Marlin): scales in the checkpoint dtype, packed zero points when asymmetric.
            s.scale_bytes = dtype_bytes(checkpoint_dtype);
            s.zero_point_bits = symmetric ? 0 : bits;
            name = fmt::format("int{} weight-only", bits);
        } else if (bits == 8 && act_type == "int" && act_bits == 8) {
            s.scale_bytes = 4;  // CompressedTensorsW8A8Int8: fp32 scales
            s.activations = ActivationQuant::kInt8;
            name = "int8 W8A8";
        } else {
            group.fail("input_activations", "int weights with these activations are not modelled; allowed: none "
                                            "(weight-only) or int8 with int8 weights");
        }
    } else {
        w.fail("num_bits", fmt::format("{}-bit {} weights are not modelled; allowed: 8-bit float, 4-bit float "
                                       "(NVFP4, MXFP4), 4- or 8-bit int",
                                       bits, type));
    }
    return s;
}

WeightQuantization read_compressed_tensors(const YamlMap& c, DType checkpoint_dtype) {
    WeightQuantization q;
    q.method = "compressed-tensors";
    const YamlMap groups = c.map("config_groups");
    std::string names;
    for (const auto& key : groups.keys()) {
        const YamlMap g = groups.map(key);
        QuantRule rule;
        rule.targets.clear();
        const YAML::Node t = g.node("targets");
        if (!t.IsSequence() || t.size() == 0) {
            g.fail("targets", "expected a list of module targets");
        }
        for (const auto& item : t) {
            const auto target = g.convert<std::string>(item, "targets");
            // A class name other than Linear cannot be resolved without the model's module tree.
            const bool is_name = target.rfind("re:", 0) == 0 || target.find('.') != std::string::npos;
            if (target != "Linear" && !is_name) {
                g.fail("targets", "target '" + target + "' is not modelled; allowed: Linear, a module name, or "
                                  "re:<regex>");
            }
            check_pattern(g, "targets", target);
            rule.targets.push_back(target);
        }
        std::string name;
        rule.scheme = read_ct_scheme(g, checkpoint_dtype, name);
        names += (names.empty() ? "" : "; ") + name;
        q.rules.push_back(rule);
    }
    if (q.rules.empty()) {
        c.fail("config_groups", "has no groups");
    }
    // 2:4 sparse (or otherwise compressed-sparse) checkpoints store different bytes and run other kernels.
    if (c.has("sparsity_config") && !c.raw()["sparsity_config"].IsNull() && c.raw()["sparsity_config"].size() > 0) {
        c.fail("sparsity_config", "sparse compressed-tensors checkpoints are not modelled");
    }
    q.ignore = optional_string_list(c, "ignore");
    q.description = "compressed-tensors: " + names;
    return q;
}

}  // namespace

std::vector<std::string> supported_quantization_methods() {
    return {kMethods.begin(), kMethods.end()};
}

WeightQuantization parse_quantization_config(const YamlMap& qc, DType checkpoint_dtype) {
    const auto method = qc.get<std::string>("quant_method");
    WeightQuantization q;
    if (method == "fp8") {
        q = read_fp8(qc);
    } else if (method == "fbgemm_fp8") {
        q = read_fbgemm_fp8(qc);
    } else if (method == "awq") {
        q = read_awq(qc, checkpoint_dtype);
    } else if (method == "gptq") {
        q = read_gptq(qc, checkpoint_dtype);
    } else if (method == "bitsandbytes") {
        q = read_bitsandbytes(qc);
    } else if (method == "mxfp4") {
        q = read_mxfp4();
    } else if (method == "modelopt") {
        q = read_modelopt(qc);
    } else if (method == "compressed-tensors") {
        q = read_compressed_tensors(qc, checkpoint_dtype);
    } else if (std::find(kUnmodelledMethods.begin(), kUnmodelledMethods.end(), method) != kUnmodelledMethods.end()) {
        qc.fail("quant_method", "'" + method + "' is a vLLM quantization method servesim does not model; modelled: " +
                                    join(kMethods));
    } else {
        qc.fail("quant_method", "unknown quantization method '" + method + "'; modelled: " + join(kMethods));
    }
    q.source = qc.file() + ": " + qc.path();
    return q;
}

std::vector<std::string> modelled_quantization_flags() {
    return {"awq",         "awq_marlin",   "bitsandbytes", "compressed-tensors", "fbgemm_fp8",    "fp8",
            "fp8_per_block", "fp8_per_tensor", "gpt_oss_mxfp4", "gptq",           "gptq_marlin", "marlin",
            "modelopt",    "modelopt_fp4", "mxfp4"};
}

std::vector<std::string> modelled_dtype_flags() {
    return {"auto", "half", "float16", "bfloat16", "float", "float32"};
}

namespace {

// The --quantization values vLLM accepts for a checkpoint quantized with `method` (the method itself and the
// kernel overrides its config class's override_quantization_method returns).
std::vector<std::string> accepted_flags(const std::string& method) {
    if (method == "awq") {
        return {"awq", "awq_marlin", "marlin"};
    }
    if (method == "gptq") {
        return {"gptq", "gptq_marlin", "marlin"};
    }
    if (method == "mxfp4") {
        return {"mxfp4", "gpt_oss_mxfp4"};
    }
    if (method == "modelopt" || method == "modelopt_fp4") {
        return {"modelopt", "modelopt_fp4"};
    }
    return {method};
}

// Online quantization of an unquantized checkpoint (weights quantized as they load).
WeightQuantization online(const std::string& flag) {
    WeightQuantization q;
    q.source = "--quantization " + flag;
    QuantRule rule;
    if (flag == "fp8" || flag == "fp8_per_tensor") {
        // Fp8OnlineLinearMethod / the fp8_per_tensor shorthand: per-tensor fp8 weights, fp8 activations.
        q.method = "fp8";
        rule.scheme = fp8_scheme(ScaleGranularity::kTensor);
        q.description = "fp8 (online): fp8 W8A8, per-tensor scales";
    } else if (flag == "fp8_per_block") {
        q.method = "fp8";
        rule.scheme = fp8_block_scheme(128, 128);
        q.description = "fp8 (online): fp8 W8A8, 128x128 block scales";
    } else {
        // BitsAndBytesModelLoader in-flight quantization: nf4 with compressed statistics (double quant).
        q.method = "bitsandbytes";
        rule.scheme = bnb_4bit_scheme(true);
        q.ignore_by_substring = true;
        q.description = "bitsandbytes (in-flight): nf4 4-bit weight-only, blocks of 64, double-quantized absmax";
    }
    q.rules.push_back(rule);
    return q;
}

}  // namespace

ModelSpec apply_engine_quantization(ModelSpec spec, const std::optional<std::string>& quantization,
                                    const std::optional<std::string>& dtype) {
    if (dtype && *dtype != "auto") {
        const auto allowed = modelled_dtype_flags();
        if (std::find(allowed.begin(), allowed.end(), *dtype) == allowed.end()) {
            throw ConfigError("--dtype: '" + *dtype + "' is not a model dtype; allowed: " + join(allowed));
        }
        spec.dtype = parse_dtype(*dtype == "float" ? "float32" : *dtype);
    }
    if (!quantization) {
        return spec;
    }
    const std::string& flag = *quantization;
    const auto modelled = modelled_quantization_flags();
    if (std::find(modelled.begin(), modelled.end(), flag) == modelled.end()) {
        throw ConfigError("--quantization: '" + flag + "' is not modelled; allowed: " + join(modelled));
    }
    if (spec.quantization) {
        const auto ok = accepted_flags(spec.quantization->method);
        if (std::find(ok.begin(), ok.end(), flag) == ok.end()) {
            // vLLM ModelConfig._verify_quantization's error.
            throw ConfigError(fmt::format("--quantization: quantization method specified in the model config ({}, {}) "
                                          "does not match the quantization method specified in the `quantization` "
                                          "argument ({}); allowed: {}",
                                          spec.quantization->method, spec.quantization->source, flag, join(ok)));
        }
        return spec;  // the checkpoint's scheme; the override picks a kernel for the same bytes
    }
    if (flag != "fp8" && flag != "fp8_per_tensor" && flag != "fp8_per_block" && flag != "bitsandbytes") {
        throw ConfigError("--quantization: '" + flag + "' needs a checkpoint quantized with it (config.json "
                          "quantization_config); an unquantized checkpoint takes fp8, fp8_per_tensor, fp8_per_block "
                          "or bitsandbytes");
    }
    spec.quantization = online(flag);
    return spec;
}

}  // namespace servesim::models
