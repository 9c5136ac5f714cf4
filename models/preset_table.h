// The model presets compiled into the binary: models/CMakeLists.txt turns every models/presets/<Name>.yaml into an
// entry of a generated .cpp at configure time, so the simulator needs no files at run time. Internal to
// models/model_registry.cpp; everyone else goes through models/model_registry.h.
#pragma once

#include <span>
#include <string_view>

namespace servesim::models::detail {

struct EmbeddedPreset {
    std::string_view name;  // file name without .yaml
    std::string_view file;  // "models/presets/<Name>.yaml", for error messages
    std::string_view yaml;  // the file's text
};

// Sorted by file name.
[[nodiscard]] std::span<const EmbeddedPreset> embedded_presets();

}  // namespace servesim::models::detail
