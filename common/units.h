// Byte units shared by the memory plan, the GPU catalog and the reports. A GiB is 2^30 bytes, the unit vLLM's
// memory logs print ("Available KV cache memory: … GiB", vllm/utils GiB_bytes); marketed "GB" figures are 1e9 and
// stay with the code that reads them (calibration/gpu_spec.cpp).
#pragma once

#include <cstdint>

namespace servesim {

inline constexpr std::int64_t kGiBBytes = std::int64_t{1} << 30;
inline constexpr double kGiB = static_cast<double>(kGiBBytes);

}  // namespace servesim
