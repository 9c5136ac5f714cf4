// Model presets by name and the one entry point that turns a scenario's `model:` value into a ModelSpec.
// A preset is models/presets/<Name>.yaml: `name:`, optional `description:`, and `hf_config:` holding config.json keys,
// read by the same code as a real config.json (models/hf_config.h). Presets are embedded in the binary at build time.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/model_spec.h"

namespace servesim::models {

// Names of the embedded presets, sorted.
[[nodiscard]] std::vector<std::string> preset_names();

// A preset by name (case-insensitive). Unknown → ConfigError listing every known name.
[[nodiscard]] ModelSpec load_preset(std::string_view name);

// A parsed preset document (`name`, `description`, `hf_config`); errors name `file_for_errors`.
[[nodiscard]] ModelSpec model_from_preset(const YAML::Node& preset, const std::string& file_for_errors);

// A file on disk: a preset-format YAML (has `hf_config:`) or a Hugging Face config.json; a folder holding
// config.json is read as that file.
[[nodiscard]] ModelSpec read_model_file(const std::string& path);

// Hugging Face repo ids known to match a preset, as (repo id, preset name), in table order.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> hf_repo_ids();

// `model:` in a scenario: an existing file or folder is read with read_model_file; "owner/name" is a Hugging Face
// repo id resolved to its preset (an unknown id lists the known ones); another path (ends in .json/.yaml/.yml or
// holds '/') is read with read_model_file; anything else is a preset name.
[[nodiscard]] ModelSpec resolve_model(const std::string& preset_or_path);

}  // namespace servesim::models
