// The kernel tables compiled into the binary: calibration/CMakeLists.txt turns every calibration/kernels/<gpu>.yaml
// into an entry of a generated .cpp at configure time, as it does the GPU catalog (calibration/gpu_table.h).
// Internal to calibration/kernel_table.cpp.
#pragma once

#include <span>
#include <string_view>

namespace servesim::calibration::detail {

struct EmbeddedKernelTable {
    std::string_view file;  // "calibration/kernels/<gpu>.yaml", for error messages
    std::string_view yaml;  // the file's text
};

// Sorted by file name; empty when no table has been committed.
[[nodiscard]] std::span<const EmbeddedKernelTable> embedded_kernel_tables();

}  // namespace servesim::calibration::detail
