// transformers' configuration-class defaults as data (see hf_defaults.h). Only keys servesim's reader uses are listed;
// tie_word_embeddings is left to the reader, which takes the text config's value, then the wrapper's, then the
// family default (Gemma's classes true, the others false). Values from the classes' __init__ signatures / dataclass
// fields in transformers' main branch (December 2026).
#include "models/hf_defaults.h"

#include <array>

namespace servesim::models {

namespace {

// Gemma3TextConfig (configuration_gemma3.py): a Gemma3ForConditionalGeneration's text_config publishes only the
// shapes that differ from these (Gemma-3-4B's even leaves out the head counts and head_dim).
constexpr std::array<ConfigDefault, 8> kGemma3Text{{
    {"vocab_size", "262208"},
    {"intermediate_size", "9216"},
    {"num_attention_heads", "8"},
    {"num_key_value_heads", "4"},
    {"head_dim", "256"},
    {"max_position_embeddings", "131072"},
    {"sliding_window", "4096"},
    {"sliding_window_pattern", "6"},
}};

// MistralConfig (configuration_mistral.py): head_dim None means hidden_size / num_attention_heads, which the reader
// derives when head_dim is absent; max_position_embeddings 4096 × 32.
constexpr std::array<ConfigDefault, 6> kMistral{{
    {"vocab_size", "32000"},
    {"intermediate_size", "14336"},
    {"num_attention_heads", "32"},
    {"num_key_value_heads", "8"},
    {"max_position_embeddings", "131072"},
    {"sliding_window", "4096"},
}};

// LlamaConfig (configuration_llama.py): num_key_value_heads None means num_attention_heads (the reader's rule for an
// absent key), head_dim None means hidden_size / num_attention_heads.
constexpr std::array<ConfigDefault, 4> kLlama{{
    {"vocab_size", "32000"},
    {"intermediate_size", "11008"},
    {"num_attention_heads", "32"},
    {"max_position_embeddings", "2048"},
}};

// Qwen2Config (configuration_qwen2.py).
constexpr std::array<ConfigDefault, 7> kQwen2{{
    {"vocab_size", "151936"},
    {"intermediate_size", "22016"},
    {"num_attention_heads", "32"},
    {"num_key_value_heads", "32"},
    {"max_position_embeddings", "32768"},
    {"use_sliding_window", "false"},
    {"max_window_layers", "28"},
}};

// Qwen2MoeConfig (configuration_qwen2_moe.py), whose defaults are Qwen1.5-MoE-A2.7B's shapes.
constexpr std::array<ConfigDefault, 12> kQwen2Moe{{
    {"vocab_size", "151936"},
    {"intermediate_size", "5632"},
    {"num_attention_heads", "16"},
    {"num_key_value_heads", "16"},
    {"max_position_embeddings", "32768"},
    {"use_sliding_window", "false"},
    {"decoder_sparse_step", "1"},
    {"moe_intermediate_size", "1408"},
    {"shared_expert_intermediate_size", "5632"},
    {"num_experts_per_tok", "4"},
    {"num_experts", "60"},
    {"mlp_only_layers", "[]"},
}};

// PixtralVisionConfig (configuration_pixtral.py): the vision tower of Mistral3ForConditionalGeneration.
constexpr std::array<ConfigDefault, 7> kPixtral{{
    {"hidden_size", "1024"},
    {"intermediate_size", "4096"},
    {"num_hidden_layers", "24"},
    {"num_attention_heads", "16"},
    {"num_channels", "3"},
    {"image_size", "1024"},
    {"patch_size", "16"},
}};

struct Table {
    std::string_view model_type;
    std::string_view config_class;
    std::span<const ConfigDefault> keys;
};

const std::array<Table, 6> kTables{{
    {"gemma3_text", "Gemma3TextConfig", kGemma3Text},
    {"mistral", "MistralConfig", kMistral},
    {"llama", "LlamaConfig", kLlama},
    {"qwen2", "Qwen2Config", kQwen2},
    {"qwen2_moe", "Qwen2MoeConfig", kQwen2Moe},
    {"pixtral", "PixtralVisionConfig", kPixtral},
}};

}  // namespace

std::optional<ConfigDefaults> transformers_defaults(std::string_view model_type) {
    for (const auto& t : kTables) {
        if (t.model_type == model_type) {
            return ConfigDefaults{t.config_class, t.keys};
        }
    }
    return std::nullopt;
}

std::string default_text_model_type(std::string_view wrapper_model_type) {
    if (wrapper_model_type == "gemma3") {
        return "gemma3_text";
    }
    if (wrapper_model_type == "mistral3") {
        return "mistral";
    }
    return std::string(wrapper_model_type);
}

YAML::Node with_transformers_defaults(const YAML::Node& config, std::string_view model_type) {
    const auto defaults = transformers_defaults(model_type);
    if (!defaults || !config.IsMap()) {
        return config;
    }
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : config) {
        out[kv.first.as<std::string>()] = kv.second;
    }
    for (const ConfigDefault& d : defaults->keys) {
        const std::string key(d.key);
        if (!config[key]) {
            out[key] = YAML::Load(std::string(d.value));
        }
    }
    return out;
}

}  // namespace servesim::models
