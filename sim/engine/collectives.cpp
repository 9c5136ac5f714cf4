// Collective costs by link, size and rank count; see collectives.h. The constants below carry their sources; the
// table of links with figures is in docs/PARALLELISM.md "Collectives".
#include "sim/engine/collectives.h"

#include <fmt/format.h>

#include <algorithm>

#include "calibration/gpu_spec.h"

namespace servesim::engine {

namespace {

constexpr double kUsToMs = 1e-3;

// NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, NCCL 2.19 to 2.2x): the ring algorithm's base latency per
// protocol (baseLat, Ring: LL 6.6 µs, Simple 8.4 µs) and its latency per step by hardware (hwLat, Ring: NVLink LL 0.6 /
// Simple 3.4 µs, PCI 1.0 / 5.7, NET 2.7 / 14.0). LL (8-byte stores carrying their own flag) reaches a quarter of the
// bus bandwidth for all-reduce and a third for the other collectives (the same file's "busBw *= 1.0/4.0 : 1.0/3.0").
// NCCL takes, per call, the protocol its model finds faster; so does nccl_ring_ms. LL128 and the tree algorithm are
// left out: at one node NCCL's tree is a chain with 2·(n−1) steps like the ring, and LL128 sits between the two.
constexpr double kNcclBaseLlUs = 6.6;
constexpr double kNcclBaseSimpleUs = 8.4;
constexpr double kLlShareAllReduce = 1.0 / 4.0;
constexpr double kLlShareOther = 1.0 / 3.0;

struct StepLatency {
    double ll_us;
    double simple_us;
};

StepLatency nccl_step_latency(LinkKind kind) {
    switch (kind) {
        case LinkKind::kNvlinkSwitch:
        case LinkKind::kNvlinkBridge:
        case LinkKind::kXgmiMesh:
            return {0.6, 3.4};  // hwLat NVLINK (RCCL keeps NCCL's table for xGMI)
        case LinkKind::kPcieP2p:
        case LinkKind::kPcieHost:
            return {1.0, 5.7};  // hwLat PCI (NCCL's SHM transport through host memory is costed as PCI too)
        case LinkKind::kNetwork:
            return {2.7, 14.0};  // hwLat NET
    }
    return {1.0, 5.7};
}

// Achievable NCCL bus bandwidth of large messages as a share of the datasheet one-way port bandwidth.
//  - NVLink through NVSwitch: all-reduce of 1 GiB measured on this workplace's H100 SXM machines on 2026-11-13
//    (NCCL, NVLink SHARP off; docs/SOURCES.md, "Collectives"): 329 GB/s bus bandwidth on 2 GPUs, 355 on 4, 361 on 8, of
//    450 GB/s one way. The same shares are used for the other NVLink generations (A100 300, B200 900 GB/s one way) and
//    for NVLink bridges and xGMI: a stated transfer, not a measurement of those systems. (Cross-check: nccl-tests
//    issue #178 reports 208 GB/s bus bandwidth for two A100s on NVLink 3, 0.69 of 300.)
//  - PCIe with peer-to-peer: 20 GB/s bus bandwidth for A100s whose ring crosses PCIe Gen4 (nccl-tests issue #178),
//    of ~32 GB/s one way: 0.625.
//  - PCIe without peer-to-peer: every byte is written to host memory by the sender and read back by the receiver, so
//    each hop crosses PCIe twice and shares the host's memory: half the peer-to-peer share, 0.3125. Derived, not
//    measured; replace it with a measurement (nccl-tests all_reduce_perf with NCCL_P2P_DISABLE=1) when one exists.
//  - Network: an NCCL maintainer's expectation for NDR InfiniBand, "46-48GB/s per NIC" of 50 (nccl-tests issue #290):
//    46 / 50 = 0.92.
double bus_share(LinkKind kind, int ranks) {
    switch (kind) {
        case LinkKind::kNvlinkSwitch:
        case LinkKind::kNvlinkBridge:
        case LinkKind::kXgmiMesh:
            return ranks >= 8 ? 361.0 / 450.0 : ranks >= 4 ? 355.0 / 450.0 : 329.0 / 450.0;
        case LinkKind::kPcieP2p:
            return 20.0 / 32.0;
        case LinkKind::kPcieHost:
            return 0.5 * 20.0 / 32.0;
        case LinkKind::kNetwork:
            return 46.0 / 50.0;
    }
    return 0.0;
}

// vLLM's custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py, as of vLLM 0.2x):
// CustomAllreduce._SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]; max_size = 8192 * 1024 bytes and should_custom_ar takes
// inp_size < max_size; disabled across nodes, without P2P (_can_p2p) and for more than two GPUs that are not fully
// NVLink-connected. The kernel (csrc/custom_all_reduce.cuh CustomAllreduce::allreduce) runs one-shot
// (cross_device_reduce_1stage: every rank reads all peers' whole buffers) on 2 GPUs, and on fully connected groups
// below 512 KiB up to 4 GPUs or 256 KiB up to 8; two-shot (reduce-scatter then all-gather inside one kernel) above.
constexpr double kCustomAllReduceMaxBytes = 8192.0 * 1024.0;
constexpr double kCustomOneShotMaxBytes4 = 512.0 * 1024.0;
constexpr double kCustomOneShotMaxBytes8 = 256.0 * 1024.0;
// One custom all-reduce stage (launch and the cross-GPU barrier): 4.3 µs, the latency vLLM 0.24.0's custom all-reduce
// benchmark printed on an H100 for a 128-element message ("[vLLM-graph] Size: 128, Latency: 0.0043 ms",
// ai-dynamo/aiconfigurator issue #1346), where the bytes term is negligible.
constexpr double kCustomStageUs = 4.3;
// The two-shot kernel (cross_device_reduce_2stage) as vLLM's own benchmark timed it on 4 H100 SXM (NVSwitch), CUDA
// graphs, hidden 8192 bf16: `ca_2stage` 17, 18, 25, 26, 35, 42 µs at 0.5, 1, 1.5, 2, 3, 4 MiB
// (benchmarks/kernels/benchmark_device_communicators.py, the TP = 4 table of vllm-project/vllm PR #24532, 2025-09).
// A least-squares line through those six points is 12.34 µs + 7.412 µs per MiB. Its fixed part is the two stages'
// launches and the barrier between them (more than 2 · 4.3 µs); its slope is the 2(n−1)/n · S the kernel reads over
// 1.5 · 1,048,576 B / 7.412 µs = 212.2 GB/s, 0.598 of the 355 GB/s bus bandwidth NCCL reaches on 4 H100s (the
// kernel's peer loads, from a few dozen blocks, do not fill the links as NCCL's large-message ring does). The former
// model, 2 · 4.3 µs at the full bus bandwidth, gave 10.8 … 26.3 µs there: 36–38 % fast. Worked in
// tests/engine/collectives_test.cpp; docs/PARALLELISM.md "Collectives".
constexpr double kCustomTwoShotFixedUs = 12.34;
constexpr double kCustomTwoShotBusShare = 212.2 / 355.0;

// Symmetric memory (vLLM PR #24111, on by default since 2025-09: VLLM_ALLREDUCE_USE_SYMM_MEM). Where torch's
// symmetric memory works — Hopper (compute capability 9.0) behind NVSwitch, whose multicast it needs
// (symm_mem.py SymmMemCommunicator disables itself without a multicast pointer) — vLLM lowers the custom all-reduce's
// max_size to min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][n]) = 8 MiB at 2 and 4 GPUs, 512 KiB at 6, 256 KiB at 8
// (all_reduce_utils.py; CustomAllreduce.__init__), and CudaCommunicator.all_reduce hands what the custom kernel
// declines to SymmMemCommunicator below SYMM_MEM_ALL_REDUCE_MAX_SIZES["9.0"][n] = 32 MiB at 4 GPUs, 64 MiB at 6 and 8,
// which runs multimem_all_reduce_ at 4, 6 and 8 GPUs (_WORLD_SIZES_MULTIMEM["9.0"]) and torch's two-shot at 2 — for
// bf16 tensors only (its buffer's dtype): an fp16 model's larger all-reduces go to NCCL.
constexpr double kMiB = 1024.0 * 1024.0;

// CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][n], before the min with max_size.
double hopper_custom_max_bytes(int ranks) {
    return ranks == 2 ? 64.0 * kMiB : ranks == 4 ? 32.0 * kMiB : ranks == 6 ? 0.5 * kMiB : 0.25 * kMiB;
}

double hopper_symm_mem_max_bytes(int ranks) {
    return ranks == 4 ? 32.0 * kMiB : (ranks == 6 || ranks == 8) ? 64.0 * kMiB : 0.0;  // 2 GPUs: two-shot, not modelled
}

// The multimem all-reduce as vLLM's benchmark timed it on 6 H100 SXM (PR #24111's TP = 6 table, hidden 8192 bf16):
// `symm_mem_multimem` 13, 16, 18, 21, 25, 31 µs at 0.5, 1, 1.5, 2, 3, 4 MiB; least squares: 10.67 µs + 5.000 µs per
// MiB, i.e. S at 1,048,576 B / 5 µs = 209.7 GB/s. The switch reduces, so the rank count hardly enters: the TP = 4
// table of PR #24532 gives 12.8 µs + 5.14 µs/MiB (15, 18, 21, 23, 28 µs at 0.5–3 MiB).
constexpr double kSymmMemFixedUs = 10.67;
constexpr double kSymmMemBytesPerS = 209.7e9;

}  // namespace

const char* link_kind_name(LinkKind kind) {
    switch (kind) {
        case LinkKind::kNvlinkSwitch:
            return "nvlink_switch";
        case LinkKind::kNvlinkBridge:
            return "nvlink_bridge";
        case LinkKind::kXgmiMesh:
            return "xgmi_mesh";
        case LinkKind::kPcieP2p:
            return "pcie_p2p";
        case LinkKind::kPcieHost:
            return "pcie_host";
        case LinkKind::kNetwork:
            return "network";
    }
    return "pcie_p2p";
}

namespace {

CollectiveLink link_by_topology(const calibration::GpuSpec& gpu, int num_gpus) {
    using calibration::InterconnectTopology;
    const auto pcie = [&] {
        return CollectiveLink{gpu.interconnect_peer_to_peer ? LinkKind::kPcieP2p : LinkKind::kPcieHost,
                              gpu.host_link_kind == "pcie" ? gpu.host_link_bytes_per_s : 0.0};
    };
    switch (gpu.interconnect_topology) {
        case InterconnectTopology::kPcie:
            return CollectiveLink{gpu.interconnect_peer_to_peer ? LinkKind::kPcieP2p : LinkKind::kPcieHost,
                                  gpu.interconnect_bytes_per_s};
        case InterconnectTopology::kNvlinkBridge:
            if (num_gpus <= gpu.interconnect_domain_gpus) {
                return CollectiveLink{LinkKind::kNvlinkBridge, gpu.interconnect_bytes_per_s};
            }
            return pcie();  // beyond the bridged pair: the node's PCIe
        case InterconnectTopology::kNvlinkSwitch:
        case InterconnectTopology::kXgmiMesh:
            if (num_gpus <= gpu.interconnect_domain_gpus) {
                return CollectiveLink{gpu.interconnect_topology == InterconnectTopology::kXgmiMesh
                                          ? LinkKind::kXgmiMesh
                                          : LinkKind::kNvlinkSwitch,
                                      gpu.interconnect_bytes_per_s};
            }
            // The NVLink / xGMI domain is the node: a larger group spans nodes and its ring crosses the network.
            return CollectiveLink{LinkKind::kNetwork, gpu.network_bytes_per_s, gpu.interconnect_domain_gpus};
    }
    return CollectiveLink{};
}

}  // namespace

CollectiveLink collective_link_for_group(const calibration::GpuSpec& gpu, int num_gpus) {
    CollectiveLink link = link_by_topology(gpu, num_gpus);
    link.compute_capability = gpu.compute_capability;
    return link;
}

CollectiveCostModel::CollectiveCostModel(CollectiveLink link, int ranks, bool custom_all_reduce, bool bf16_activations)
    : link_(link), ranks_(std::max(1, ranks)) {
    if (ranks_ <= 1 || !(link_.link_bytes_per_s > 0)) {
        return;  // nothing to cost: every collective is 0
    }
    bus_bytes_per_s_ = link_.link_bytes_per_s * bus_share(link_.kind, ranks_);
    const StepLatency s = nccl_step_latency(link_.kind);
    inter_latency_ll_ms_ = step_latency_ll_ms_ = s.ll_us * kUsToMs;
    inter_latency_simple_ms_ = step_latency_simple_ms_ = s.simple_us * kUsToMs;
    if (link_.kind == LinkKind::kNetwork && link_.gpus_per_node > 1) {
        // Several GPUs per node: NCCL's ring latency is (steps − inter-node steps) · NVLink's + inter-node steps ·
        // the network's (tuning.cc); the bandwidth is the NICs'.
        nodes_ = (ranks_ + link_.gpus_per_node - 1) / link_.gpus_per_node;
        const StepLatency intra = nccl_step_latency(LinkKind::kNvlinkSwitch);
        step_latency_ll_ms_ = intra.ll_us * kUsToMs;
        step_latency_simple_ms_ = intra.simple_us * kUsToMs;
    } else if (link_.kind == LinkKind::kNetwork) {
        nodes_ = ranks_;
    }
    const bool supported_size = ranks_ == 2 || ranks_ == 4 || ranks_ == 6 || ranks_ == 8;
    const bool fully_connected = link_.kind == LinkKind::kNvlinkSwitch || link_.kind == LinkKind::kXgmiMesh;
    const bool peer_to_peer = link_.kind != LinkKind::kPcieHost && link_.kind != LinkKind::kNetwork;
    custom_all_reduce_ = custom_all_reduce && supported_size && peer_to_peer && (ranks_ == 2 || fully_connected);
    custom_max_bytes_ = kCustomAllReduceMaxBytes;
    if (link_.kind == LinkKind::kNvlinkSwitch && link_.compute_capability == 90 && supported_size) {
        custom_max_bytes_ = std::min(kCustomAllReduceMaxBytes, hopper_custom_max_bytes(ranks_));
        symm_mem_max_bytes_ = bf16_activations ? hopper_symm_mem_max_bytes(ranks_) : 0.0;
    }
}

double CollectiveCostModel::nccl_ring_ms(int steps, int inter_steps, double bus_bytes, double ll_share) const {
    const int intra_steps = steps - inter_steps;
    const double ll = kNcclBaseLlUs * kUsToMs + intra_steps * step_latency_ll_ms_ +
                      inter_steps * inter_latency_ll_ms_ + 1e3 * bus_bytes / (bus_bytes_per_s_ * ll_share);
    const double simple = kNcclBaseSimpleUs * kUsToMs + intra_steps * step_latency_simple_ms_ +
                          inter_steps * inter_latency_simple_ms_ + 1e3 * bus_bytes / bus_bytes_per_s_;
    return std::min(ll, simple);
}

bool CollectiveCostModel::uses_custom_all_reduce(double bytes) const {
    return custom_all_reduce_ && bytes < custom_max_bytes_;
}

bool CollectiveCostModel::uses_symm_mem_all_reduce(double bytes) const {
    return !uses_custom_all_reduce(bytes) && bytes < symm_mem_max_bytes_;
}

double CollectiveCostModel::symm_mem_all_reduce_ms(double bytes) const {
    if (ranks_ <= 1 || bytes <= 0) {
        return 0.0;
    }
    return kSymmMemFixedUs * kUsToMs + 1e3 * bytes / kSymmMemBytesPerS;
}

bool CollectiveCostModel::custom_all_reduce_one_shot(double bytes) const {
    if (ranks_ == 2) {
        return true;
    }
    return (ranks_ <= 4 && bytes < kCustomOneShotMaxBytes4) || (ranks_ <= 8 && bytes < kCustomOneShotMaxBytes8);
}

double CollectiveCostModel::custom_all_reduce_ms(double bytes) const {
    if (ranks_ <= 1 || !(bus_bytes_per_s_ > 0) || bytes <= 0) {
        return 0.0;
    }
    const double n = ranks_;
    if (custom_all_reduce_one_shot(bytes)) {
        // One stage: every rank reads the n−1 peers' whole buffers and sums them.
        return kCustomStageUs * kUsToMs + 1e3 * (n - 1.0) * bytes / bus_bytes_per_s_;
    }
    // Two stages: each rank reduces its 1/n slice from the peers, then gathers the n−1 other reduced slices.
    return kCustomTwoShotFixedUs * kUsToMs +
           1e3 * 2.0 * (n - 1.0) / n * bytes / (kCustomTwoShotBusShare * bus_bytes_per_s_);
}

double CollectiveCostModel::nccl_all_reduce_ms(double bytes) const {
    if (ranks_ <= 1 || !(bus_bytes_per_s_ > 0) || bytes <= 0) {
        return 0.0;
    }
    const double n = ranks_;
    return nccl_ring_ms(2 * (ranks_ - 1), 2 * (nodes_ - 1), 2.0 * (n - 1.0) / n * bytes, kLlShareAllReduce);
}

double CollectiveCostModel::all_reduce_ms(double bytes) const {
    if (uses_custom_all_reduce(bytes)) {
        return custom_all_reduce_ms(bytes);
    }
    return uses_symm_mem_all_reduce(bytes) ? symm_mem_all_reduce_ms(bytes) : nccl_all_reduce_ms(bytes);
}

double CollectiveCostModel::all_gather_ms(double total_bytes) const {
    if (ranks_ <= 1 || !(bus_bytes_per_s_ > 0) || total_bytes <= 0) {
        return 0.0;
    }
    const double n = ranks_;
    return nccl_ring_ms(ranks_ - 1, nodes_ - 1, (n - 1.0) / n * total_bytes, kLlShareOther);
}

double CollectiveCostModel::reduce_scatter_ms(double total_bytes) const {
    return all_gather_ms(total_bytes);  // the same ring, steps and bytes in the other direction
}

double CollectiveCostModel::all_to_all_ms(double bytes_per_rank) const {
    if (ranks_ <= 1 || !(bus_bytes_per_s_ > 0) || bytes_per_rank <= 0) {
        return 0.0;
    }
    // Every peer at once (NCCL groups the n−1 sends and receives): one step, (n−1)/n of the buffer leaves the rank.
    const double n = ranks_;
    return nccl_ring_ms(1, link_.kind == LinkKind::kNetwork ? 1 : 0, (n - 1.0) / n * bytes_per_rank, kLlShareOther);
}

double CollectiveCostModel::send_ms(double bytes) const {
    if (ranks_ <= 1 || !(bus_bytes_per_s_ > 0) || bytes <= 0) {
        return 0.0;
    }
    return nccl_ring_ms(1, link_.kind == LinkKind::kNetwork ? 1 : 0, bytes, kLlShareOther);  // a send on a network link crosses it
}

std::string CollectiveCostModel::describe() const {
    if (ranks_ <= 1) {
        return "no collectives";
    }
    return fmt::format("{} x{} ({:.0f} GB/s bus{}{})", link_kind_name(link_.kind), ranks_, bus_bytes_per_s_ / 1e9,
                       custom_all_reduce_ ? ", custom all-reduce" : "",
                       symm_mem_max_bytes_ > 0 ? ", symmetric-memory all-reduce" : "");
}

}  // namespace servesim::engine
