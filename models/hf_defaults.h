// The defaults transformers fills in when a config.json leaves a key out, per model type. vLLM builds its model from
// the configuration object transformers returns (AutoConfig.from_pretrained), so a published config.json that omits
// a key (google/gemma-3's text_config has no vocab_size or max_position_embeddings) runs with the class default, and
// servesim reads it the same way. Each table names the configuration class its values come from
// (transformers src/transformers/models/<type>/configuration_<type>.py, checked December 2026); docs/MODELS.md has
// the rule. Two keys are never defaulted: hidden_size and num_hidden_layers say which model a file describes, and a
// file without them is refused rather than read as the class's reference model (LlamaConfig would give 4,096 × 32).
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace servesim::models {

// One default: the key and its value as JSON text ("262208", "false", "[]").
struct ConfigDefault {
    std::string_view key;
    std::string_view value;
};

struct ConfigDefaults {
    std::string_view config_class;  // "Gemma3TextConfig"
    std::span<const ConfigDefault> keys;
};

// The defaults of the configuration class behind `model_type` ("gemma3_text", "mistral", "pixtral", ...), or none
// when servesim holds no table for it (the reader then requires every key it reads).
[[nodiscard]] std::optional<ConfigDefaults> transformers_defaults(std::string_view model_type);

// The language model's model_type inside a multimodal wrapper whose text_config names none: Gemma3Config builds a
// Gemma3TextConfig, Mistral3Config a MistralConfig; any other type is its own.
[[nodiscard]] std::string default_text_model_type(std::string_view wrapper_model_type);

// A copy of the mapping `config` with each default of `model_type` added where the key is absent (a key present with
// null keeps its null, as transformers keeps an explicit None). Present keys share their nodes with `config`, so
// error messages keep their line numbers. A non-mapping is returned unchanged (the reader reports it).
[[nodiscard]] YAML::Node with_transformers_defaults(const YAML::Node& config, std::string_view model_type);

}  // namespace servesim::models
