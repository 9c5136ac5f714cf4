// Preset lookup over the presets embedded at build time (models/preset_table.h) and resolution of a scenario's
// `model:` value. Presets and config.json files share one reader (models/hf_config.cpp), so a preset and the
// config.json it was written from give equal specs.
#include "models/model_registry.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/error.h"
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

}  // namespace

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
    throw ConfigError("unknown model preset '" + std::string(name) + "'; known presets: " + known_names() +
                      " (or give the path of a config.json)");
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
    if (looks_like_path || on_disk) {
        return read_model_file(preset_or_path);
    }
    return load_preset(preset_or_path);
}

}  // namespace servesim::models
