// GpuSpec: the datasheet figures of one GPU, read from a data file (calibration/gpus/<name>.yaml, embedded in the
// binary at build time, or a user's own file given by path): memory as cudaMemGetInfo reports it, HBM/GDDR bandwidth,
// dense (not 2:4-sparse) tensor-core peaks, the host link, the GPU-to-GPU interconnect and its topology class, the
// roofline efficiencies and an optional price. Feeds the roofline cost model, the tensor-parallel all-reduces, CPU
// offload loads, the planner's prices and vLLM's default batch sizes (EngineArgs.get_batch_defaults: 8192 / 1024 on
// devices with >= 70 GiB whose name does not contain "a100"). Not measured curves: those are HardwareProfile's.
// The file format, every key and its unit: docs/GPUS.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::calibration {

// How GPUs of one node talk to each other for tensor/expert parallelism.
enum class InterconnectTopology {
    kPcie,          // no GPU fabric: peers exchange through PCIe (and the host's root complex)
    kNvlinkBridge,  // NVLink bridges join small groups (pairs); beyond the group, PCIe
    kNvlinkSwitch,  // NVSwitch: every GPU of the domain reaches every other at full NVLink bandwidth
    kXgmiMesh,      // AMD Infinity Fabric: a direct link to each peer of the platform
};

[[nodiscard]] const char* interconnect_topology_name(InterconnectTopology t);

struct GpuSpec {
    std::string name;                         // canonical, e.g. "H200", "RTX 3090"
    std::vector<std::string> aliases;         // other spellings find_gpu accepts
    std::string vendor;                       // nvidia | amd
    std::string device_name;                  // as torch.cuda.get_device_name reports it
    std::string file;                         // the data file it was read from ("calibration/gpus/H200.yaml")
    double memory_marketed_gb = 0;            // the datasheet's size, informational
    std::int64_t memory_bytes = 0;            // total as cudaMemGetInfo reports (below the marketed size)
    double memory_bandwidth_bytes_per_s = 0;  // device memory, datasheet peak
    double bf16_dense_flops_per_s = 0;        // tensor cores, bf16 in / fp32 accumulate, dense
    double fp8_dense_flops_per_s = 0;         // 0 where unsupported (Ampere)
    double fp4_dense_flops_per_s = 0;         // 0 where unsupported (before Blackwell)
    double host_link_bytes_per_s = 0;         // GPU to host, one direction, theoretical (PCIe x16 or NVLink-C2C)
    std::string host_link_kind;               // pcie | nvlink_c2c
    int host_link_pcie_gen = 0;               // 0 when the host link is not PCIe
    int compute_capability = 0;               // 86 for sm_86, 90 for sm_90, ... (94 for AMD gfx942)
    bool is_a100 = false;                     // device_name contains "a100" (vLLM's batch-default test)
    double interconnect_bytes_per_s = 0;      // GPU-to-GPU for tensor parallelism, one direction (NVLink, else PCIe)
    InterconnectTopology interconnect_topology = InterconnectTopology::kPcie;
    int interconnect_domain_gpus = 0;         // GPUs reached at interconnect_bytes_per_s; 0 = any number (PCIe)
    // Whether GPUs that meet over PCIe reach each other peer-to-peer (false: through host memory, as on GeForce
    // cards); decides vLLM's custom all-reduce and the PCIe bus bandwidth (sim/engine/collectives.h).
    bool interconnect_peer_to_peer = true;
    double network_bytes_per_s = 0;           // per GPU to other nodes (its NIC), one direction; 0 = not given
    // Roofline efficiencies (fractions of the datasheet peaks a kernel reaches); defaults are
    // engine::RooflineParams's, which a test keeps equal.
    double gemm_efficiency = 0.72;
    double attention_efficiency = 0.55;
    double gdn_efficiency = 0.25;
    double bandwidth_efficiency = 0.85;
    double decode_attention_efficiency = 0.85;
    std::optional<double> usd_per_gpu_hour;   // the planner's default price; none = unpriced (give one with --prices)
    std::string price_source;                 // where that price is listed (required with it)
    std::string price_date;                   // when: YYYY-MM or YYYY-MM-DD (required with it)
    bool operator==(const GpuSpec&) const = default;

    // True when `name` is this GPU's name, one of its aliases or its device_name (as the driver reports it: what a
    // calibrated profile's `gpu:` holds), compared as find_gpu compares names.
    [[nodiscard]] bool answers_to(std::string_view name) const;
};

// A price's date as GPU and price files take it: YYYY-MM or YYYY-MM-DD.
[[nodiscard]] bool is_price_date(std::string_view date);

// Reads one GPU file's text. Every key is checked: a missing required key, an unknown key, a value of the wrong type
// or out of its range throws ConfigError naming `file` and the key.
[[nodiscard]] GpuSpec parse_gpu_spec(const std::string& text, const std::string& file);

// Reads a user's GPU file by path (ConfigError naming the path when it cannot be read).
[[nodiscard]] GpuSpec read_gpu_file(const std::string& path);

// Every built-in GPU (calibration/gpus/*.yaml), in file-name order.
[[nodiscard]] const std::vector<GpuSpec>& gpu_catalog();

// A built-in GPU by name, alias or device_name (the driver's name, "NVIDIA H100 80GB HBM3"): case-insensitive,
// ignoring spaces, '-' and '_', and an "nvidia"/"geforce"/"rtx" prefix: "h200", "RTX 3090", "rtx3090", "3090",
// "a100-80gb", "H100 SXM". A value ending in .yaml/.yml is a user GPU file, read by path. Unknown → ConfigError listing
// the known names.
[[nodiscard]] GpuSpec find_gpu(std::string_view name);

// True when `name` names a GPU file rather than a catalog entry (ends in .yaml or .yml).
[[nodiscard]] bool is_gpu_file(std::string_view name);

// The known names, comma separated (for errors and `servesim list`).
[[nodiscard]] std::string gpu_names();

}  // namespace servesim::calibration
