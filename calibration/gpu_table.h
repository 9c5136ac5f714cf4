// The GPU data files compiled into the binary: calibration/CMakeLists.txt turns every calibration/gpus/<Name>.yaml
// into an entry of a generated .cpp at configure time, so `servesim` needs no files at run time (as the model
// presets, models/preset_table.h). Internal to calibration/gpu_spec.cpp.
#pragma once

#include <span>
#include <string_view>

namespace servesim::calibration::detail {

struct EmbeddedGpu {
    std::string_view file;  // "calibration/gpus/<Name>.yaml", for error messages
    std::string_view yaml;  // the file's text
};

// Sorted by file name.
[[nodiscard]] std::span<const EmbeddedGpu> embedded_gpus();

}  // namespace servesim::calibration::detail
