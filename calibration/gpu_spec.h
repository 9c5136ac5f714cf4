// Datasheet figures of the GPUs servesim knows by name: memory as cudaMemGetInfo reports it, HBM/GDDR bandwidth,
// dense (not 2:4-sparse) tensor-core peaks, PCIe bandwidth. Feeds the roofline profile and vLLM's default batch
// sizes (vllm-v1-behaviour.md §4.6: 8192 / 1024 on GPUs with ≥ 70 GiB that are not A100). Not measured curves:
// those are HardwareProfile's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::calibration {

struct GpuSpec {
    std::string name;                         // canonical, e.g. "H200", "RTX 3090"
    std::int64_t memory_bytes = 0;            // total as cudaMemGetInfo reports (below the marketed size)
    double memory_bandwidth_bytes_per_s = 0;  // device memory, datasheet peak
    double bf16_dense_flops_per_s = 0;        // tensor cores, bf16 in / fp32 accumulate, dense
    double fp8_dense_flops_per_s = 0;         // 0 where unsupported (Ampere)
    double host_link_bytes_per_s = 0;         // PCIe x16, one direction, theoretical
    int compute_capability = 0;               // 86 for sm_86, 90 for sm_90, ...
    bool is_a100 = false;                     // vLLM excludes A100 from the ≥ 70 GiB default batch sizes
    double interconnect_bytes_per_s = 0;      // GPU-to-GPU for tensor parallelism, one direction (NVLink, else PCIe)
    bool operator==(const GpuSpec&) const = default;
};

// Every known GPU, in a fixed order (consumer to datacenter, older to newer).
[[nodiscard]] const std::vector<GpuSpec>& gpu_catalog();

// Case-insensitive, ignoring spaces, '-' and '_', and an "nvidia"/"geforce"/"rtx" prefix: "h200", "RTX 3090",
// "rtx3090", "3090", "a100-80gb", "H100 SXM". Unknown → ConfigError listing the known names.
[[nodiscard]] GpuSpec find_gpu(std::string_view name);

// The known names, comma separated (for errors and `servesim list`).
[[nodiscard]] std::string gpu_names();

}  // namespace servesim::calibration
