// Preset lookup over the presets embedded at build time (models/preset_table.h) and resolution of a scenario's
// `model:` value. Presets and config.json files share one reader (models/hf_config.cpp), so a preset and the
// config.json it was written from give equal specs.
#include "models/model_registry.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/error.h"
#include "common/nearest_name.h"
#include "common/yaml_reader.h"
#include "models/hf_config.h"
#include "models/preset_table.h"

namespace servesim::models {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string known_names() {
    std::string out;
    for (const auto& n : preset_names()) {
        out += (out.empty() ? "" : ", ") + n;
    }
    return out;
}

// Hugging Face repo ids whose config.json matches a preset (same architecture, shapes, dtype and
// max_position_embeddings, hence the same memory plan): `model: Qwen/Qwen3-4B` as vLLM's `vllm serve` takes it.
// Instruct variants share their base model's config.json for these models. Variants with another config
// (quantised weights, 2507 releases with longer contexts) are not listed: give their config.json instead.
struct HfRepo {
    std::string_view repo_id;
    std::string_view preset;
};

constexpr HfRepo kHfRepos[] = {
    {"meta-llama/Llama-3.1-8B", "Llama-3.1-8B"},
    {"meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"},
    {"meta-llama/Meta-Llama-3.1-8B", "Llama-3.1-8B"},
    {"meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama-3.1-8B"},
    {"meta-llama/Llama-3.1-70B", "Llama-3.1-70B"},
    {"meta-llama/Llama-3.1-70B-Instruct", "Llama-3.1-70B"},
    {"meta-llama/Meta-Llama-3.1-70B", "Llama-3.1-70B"},
    {"meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama-3.1-70B"},
    {"meta-llama/Llama-3.1-405B", "Llama-3.1-405B"},
    {"meta-llama/Llama-3.1-405B-Instruct", "Llama-3.1-405B"},
    {"Qwen/Qwen3-4B", "Qwen3-4B"},
    {"Qwen/Qwen3-8B", "Qwen3-8B"},
    {"Qwen/Qwen3-32B", "Qwen3-32B"},
    {"Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B"},
    {"Qwen/Qwen3-235B-A22B", "Qwen3-235B-A22B"},
    {"Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3-Next-80B-A3B"},
    {"Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen3-Next-80B-A3B"},
    {"Qwen/Qwen3.5-4B", "Qwen3.5-4B"},
    {"Qwen/Qwen3.5-27B", "Qwen3.5-27B"},
    {"MiniMaxAI/MiniMax-M2.5", "MiniMax-M2.5"},
    {"nvidia/Nemotron-H-8B-Base-8K", "Nemotron-H-8B"},
    {"deepseek-ai/DeepSeek-V2-Lite", "DeepSeek-V2-Lite"},
    {"deepseek-ai/DeepSeek-V3", "DeepSeek-V3"},
    {"deepseek-ai/DeepSeek-V2-Lite-Chat", "DeepSeek-V2-Lite"},
};

}  // namespace

std::vector<std::pair<std::string, std::string>> hf_repo_ids() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& r : kHfRepos) {
        out.emplace_back(r.repo_id, r.preset);
    }
    return out;
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& p : detail::embedded_presets()) {
        names.emplace_back(p.name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

ModelSpec model_from_preset(const YAML::Node& preset, const std::string& file_for_errors) {
    const YamlMap top(preset, file_for_errors);
    top.allow_only({"name", "description", "hf_config"});
    const auto name = top.get<std::string>("name");
    if (name.empty()) {
        top.fail("name", "must not be empty");
    }
    if (top.has("description")) {
        (void)top.get<std::string>("description");
    }
    return model_from_hf_config(top.map("hf_config"), name);
}

ModelSpec load_preset(std::string_view name) {
    for (const auto& p : detail::embedded_presets()) {
        if (iequals(p.name, name)) {
            const std::string file(p.file);
            ModelSpec spec = model_from_preset(load_yaml_string(std::string(p.yaml), file), file);
            if (spec.name != p.name) {
                throw ConfigError(file, 0, "name", "is '" + spec.name + "' but the file is named " + file);
            }
            return spec;
        }
    }
    std::vector<std::string_view> names;
    for (const auto& p : detail::embedded_presets()) {
        names.push_back(p.name);
    }
    throw ConfigError("unknown model preset '" + std::string(name) + "'" + did_you_mean(name, names) +
                      "; known presets: " + known_names() + " (or give the path of a config.json)");
}

ModelSpec read_model_file(const std::string& path) {
    std::string file = path;
    if (std::filesystem::is_directory(path)) {
        file = (std::filesystem::path(path) / "config.json").string();
    }
    const YAML::Node doc = load_yaml_file(file);
    if (doc.IsMap() && doc["hf_config"]) {
        return model_from_preset(doc, file);
    }
    return read_hf_config(file);
}

ModelSpec resolve_model(const std::string& preset_or_path) {
    const bool looks_like_path = ends_with(preset_or_path, ".json") || ends_with(preset_or_path, ".yaml") ||
                                 ends_with(preset_or_path, ".yml") || preset_or_path.find('/') != std::string::npos;
    std::error_code ec;
    const std::filesystem::path p(preset_or_path);
    const bool on_disk =
        std::filesystem::is_regular_file(p, ec) || std::filesystem::is_regular_file(p / "config.json", ec);
    if (on_disk) {
        return read_model_file(preset_or_path);
    }
    // "owner/name" that is not on disk: a Hugging Face repo id (case-insensitive, as the Hub resolves them).
    const bool file_like = ends_with(preset_or_path, ".json") || ends_with(preset_or_path, ".yaml") ||
                           ends_with(preset_or_path, ".yml");
    if (!file_like && std::count(preset_or_path.begin(), preset_or_path.end(), '/') == 1 &&
        !preset_or_path.starts_with("/") && !preset_or_path.starts_with(".") && !preset_or_path.ends_with("/")) {
        for (const auto& r : kHfRepos) {
            if (iequals(r.repo_id, preset_or_path)) {
                return load_preset(r.preset);
            }
        }
        std::string known;
        for (const auto& r : kHfRepos) {
            known += (known.empty() ? "" : ", ") + std::string(r.repo_id);
        }
        throw ConfigError("'" + preset_or_path + "' is neither a file nor a Hugging Face repo id servesim knows; " +
                          "known ids: " + known + "; or give a preset name (" + known_names() +
                          ") or the path of the model's config.json");
    }
    if (looks_like_path) {
        return read_model_file(preset_or_path);
    }
    return load_preset(preset_or_path);
}

}  // namespace servesim::models
