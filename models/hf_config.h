// Reader for Hugging Face config.json files (flat, or with the language model under `text_config` as in Qwen3.5's
// Qwen3_5ForConditionalGeneration) into a ModelSpec. Key spellings and layer-pattern rules follow transformers'
// configuration classes and vLLM's model classes (docs/SOURCES.md, "Model configurations"). A key the file
// leaves out takes its transformers class default where models/hf_defaults.h holds a table for the model type, as
// vLLM sees the config through AutoConfig. Presets (models/model_registry.h) hold the same keys under `hf_config:`
// and go through the same function.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "models/model_spec.h"

namespace servesim::models {

// Reads a config.json file. The spec is named after the file (model_name_from_path) unless `name` is given.
// A missing file, malformed JSON, a missing key or a wrong type is a ConfigError naming the file (and line, key).
[[nodiscard]] ModelSpec read_hf_config(const std::string& path);
[[nodiscard]] ModelSpec read_hf_config(const std::string& path, const std::string& name);

// Builds a spec from a parsed config; errors name `file_for_errors` and the key path.
[[nodiscard]] ModelSpec model_from_hf_config(const YAML::Node& config,
                                             const std::string& name,
                                             const std::string& file_for_errors);

// Same, for a mapping that sits inside a larger file (a preset's `hf_config:`): key paths keep its prefix.
[[nodiscard]] ModelSpec model_from_hf_config(const YamlMap& config, const std::string& name);

// The `model_type` values read_hf_config understands, sorted.
[[nodiscard]] std::vector<std::string> supported_model_types();

// "…/Qwen3-4B.json" → "Qwen3-4B"; "…/Qwen3-4B/config.json" → "Qwen3-4B" (a file named config.* takes its folder's
// name).
[[nodiscard]] std::string model_name_from_path(const std::string& path);

// Parameter estimate for a Qwen2.5/3-VL-style vision tower (`vision_config`: depth, hidden_size, intermediate_size,
// patch_size, temporal_patch_size, in_channels, spatial_merge_size, out_hidden_size, num_position_embeddings,
// deepstack_visual_indexes). Counts the patch embedding (conv3d + bias), learned position table, `depth` ViT blocks
// (qkv and proj with biases, non-gated MLP with biases, two LayerNorms) and the patch merger(s): LayerNorm,
// (hidden·m²)² + (hidden·m²)·out_hidden weights with biases, once plus once per deepstack index. Qwen3.5-4B's
// tower (24 × 1024, MLP 4096) gives 0.334 B, within the 0.3–0.4 B of public spec pages (docs/SOURCES.md, "Model
// configurations").
[[nodiscard]] std::int64_t estimate_vision_params(const YamlMap& vision_config, int text_hidden_size);

// Parameter estimate for a plain ViT tower (Gemma 3's SigLIP, Llama 4's vision model): `vision_config` keys
// num_hidden_layers, hidden_size, intermediate_size, patch_size, image_size, num_channels (3), vision_output_dim
// (hidden_size). Counts the patch embedding C·p²·h, a position table of (image/p)² rows, per layer 4·h² (q, k, v, o)
// + 2·h·intermediate (MLP), and one out × text_hidden projector; biases, norms and Llama 4's pixel-shuffle adapter
// are left out (an approximation, docs/MODELS.md). Gemma-3's SigLIP (27 × 1152, MLP 4304, 896 px / 14) gives
// 0.42 B.
[[nodiscard]] std::int64_t estimate_vit_params(const YamlMap& vision_config, int text_hidden_size);

// Parameter estimate for Mistral 3's Pixtral tower and projector (vLLM mistral3.py / pixtral.py, HF layout):
// `vision_config` keys num_hidden_layers, hidden_size, intermediate_size, patch_size, num_channels (PixtralVisionConfig
// defaults applied by the caller). Counts the patch convolution C·p²·h (no bias), per layer 4·h² (q, k, v, o) and
// 3·h·intermediate (gated MLP), then the projector: patch merger (h·m²)·h, linear_1 h·text, linear_2 text² (+ biases
// when multimodal_projector_bias); norms are left out, as for every model. Mistral-Small-3.1's tower (24 × 1024, MLP
// 4096, patch 14, merge 2) and projector to 5,120 give 0.439 B.
[[nodiscard]] std::int64_t estimate_pixtral_params(const YamlMap& vision_config, int text_hidden_size,
                                                   int spatial_merge_size, bool projector_bias);

}  // namespace servesim::models
