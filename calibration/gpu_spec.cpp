// The GPU datasheet table behind calibration/gpu_spec.h. Figures are dense tensor-core peaks from NVIDIA's
// datasheets and architecture whitepapers (sources beside each entry); memory is the total cudaMemGetInfo returns,
// measured where noted, else the marketed size less the driver's reservation seen on the same family.
#include "calibration/gpu_spec.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace servesim::calibration {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTFlops = 1e12;
constexpr double kPcie4x16 = 32e9;  // 16 GT/s x 16 lanes, 128b/130b: ~31.5 GB/s per direction
constexpr double kPcie5x16 = 64e9;  // 32 GT/s x 16 lanes: ~63 GB/s per direction

std::int64_t gib(double g) {
    return static_cast<std::int64_t>(g * kGiB);
}

std::vector<GpuSpec> make_catalog() {
    return {
        // GA102 whitepaper (RTX 3090): 936 GB/s; bf16 tensor with fp32 accumulate 71 TFLOPS dense (142 sparse);
        // no fp8. 24 GB card: cudaMemGetInfo total 23.69 GiB.
        {"RTX 3090", gib(23.69), 936 * kGB, 71 * kTFlops, 0, kPcie4x16, 86, false, kPcie4x16},
        // Ada whitepaper (RTX 4090): 1008 GB/s; bf16 fp32-accumulate 165.2 TFLOPS dense, fp8 fp32-accumulate 330.3
        // dense. 24 GB card; reported total taken as the 3090's (same 24 GB GDDR6X, estimate).
        {"RTX 4090", gib(23.69), 1008 * kGB, 165.2 * kTFlops, 330.3 * kTFlops, kPcie4x16, 89, false, kPcie4x16},
        // L40S datasheet: 48 GB GDDR6 (ECC) 864 GB/s; bf16 362.05 TFLOPS dense (733 sparse), fp8 733 dense.
        // Reported total estimated at 44.4 GiB (nvidia-smi 46,068 MiB less the driver reservation).
        {"L40S", gib(44.4), 864 * kGB, 362.05 * kTFlops, 733 * kTFlops, kPcie4x16, 89, false, kPcie4x16},
        // A100 datasheet (SXM4 40GB): HBM2 1,555 GB/s; bf16 312 TFLOPS dense (624 sparse); no fp8. Reports 39.39 GiB.
        {"A100-40GB", gib(39.39), 1555 * kGB, 312 * kTFlops, 0, kPcie4x16, 80, true, 300 * kGB},
        // A100 datasheet (SXM4 80GB): HBM2e 2,039 GB/s; bf16 312 TFLOPS dense. Reports 79.15 GiB.
        {"A100-80GB", gib(79.15), 2039 * kGB, 312 * kTFlops, 0, kPcie4x16, 80, true, 300 * kGB},
        // H100 datasheet (SXM5 80GB): HBM3 3.35 TB/s; bf16 989.4 TFLOPS dense (1,979 sparse), fp8 1,978.9 dense.
        // Reports about 79.1 GiB.
        {"H100-SXM", gib(79.1), 3350 * kGB, 989.4 * kTFlops, 1978.9 * kTFlops, kPcie5x16, 90, false, 450 * kGB},
        // H200 datasheet (SXM 141GB): HBM3e 4.8 TB/s; same GH100 tensor peaks as H100 SXM. cudaMemGetInfo total
        // measured on an H200: 150,109,880,320 B (139.80 GiB; nvidia-smi 143,771 MiB).
        {"H200", 150'109'880'320, 4800 * kGB, 989.4 * kTFlops, 1978.9 * kTFlops, kPcie5x16, 90, false, 450 * kGB},
        // HGX B200 datasheet (per GPU): 180 GB HBM3e 8 TB/s; fp16/bf16 2.25 PFLOPS dense (4.5 sparse), fp8 4.5
        // PFLOPS dense. Reported total estimated at 178.4 GiB.
        {"B200", gib(178.4), 8000 * kGB, 2250 * kTFlops, 4500 * kTFlops, kPcie5x16, 100, false, 900 * kGB},
    };
}

// Interconnect (last field): NVLink one direction — A100 SXM NVLink3 600 GB/s total → 300, H100/H200 SXM NVLink4
// 900 GB/s → 450, B200 NVLink5 1.8 TB/s → 900; PCIe cards talk over PCIe x16.

// Lower-case, without spaces, '-', '_' and the vendor/brand prefixes, so "NVIDIA GeForce RTX 3090" → "3090".
std::string normalise(std::string_view text) {
    std::string out;
    for (char ch : text) {
        if (ch == ' ' || ch == '-' || ch == '_') {
            continue;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    for (std::string_view prefix : {"nvidia", "geforce", "rtx"}) {
        if (out.rfind(prefix, 0) == 0) {
            out.erase(0, prefix.size());
        }
    }
    return out;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
    static const std::vector<GpuSpec> catalog = make_catalog();
    return catalog;
}

std::string gpu_names() {
    std::string out;
    for (const auto& g : gpu_catalog()) {
        out += (out.empty() ? "" : ", ") + g.name;
    }
    return out;
}

GpuSpec find_gpu(std::string_view name) {
    const std::string wanted = normalise(name);
    // Short forms: "h100" is the SXM part, "a100" the 80 GB one (the common serving configuration).
    std::string alias = wanted;
    if (wanted == "h100" || wanted == "h100sxm5" || wanted == "h10080gb") {
        alias = "h100sxm";
    } else if (wanted == "a100" || wanted == "a100sxm" || wanted == "a100sxm480gb") {
        alias = "a10080gb";
    } else if (wanted == "a100sxm440gb") {
        alias = "a10040gb";
    } else if (wanted == "h200sxm" || wanted == "h200141gb") {
        alias = "h200";
    }
    for (const auto& g : gpu_catalog()) {
        if (!wanted.empty() && normalise(g.name) == alias) {
            return g;
        }
    }
    throw ConfigError("unknown GPU '" + std::string(name) + "'; known GPUs: " + gpu_names());
}

}  // namespace servesim::calibration
