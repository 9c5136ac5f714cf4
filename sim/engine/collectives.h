// CollectiveCostModel: the time of one collective (all-reduce, all-gather, reduce-scatter, all-to-all, a point-to-point
// send) among the GPUs of one group, by message bytes, rank count and the link they share, as α-β terms: a fixed
// launch cost, a latency per algorithm step and the bytes each rank moves over the link's achievable bus bandwidth.
// It follows how vLLM's CUDA communicator runs them (vllm/distributed/device_communicators/cuda_communicator.py
// CudaCommunicator.all_reduce): its custom all-reduce (custom_all_reduce.py CustomAllreduce.should_custom_ar, kernels
// in csrc/custom_all_reduce.cuh) takes messages under 8 MiB on 2, 4, 6 or 8 GPUs of one node that reach each other
// peer-to-peer (any two such GPUs; more only when fully connected by NVLink), one-shot or two-shot — on Hopper NVSwitch
// nodes of 6 or 8 GPUs only below 512 / 256 KiB, where torch's symmetric-memory multimem all-reduce takes the larger
// messages (PR #24111); everything else goes to NCCL (pynccl), costed with NCCL's own tuning model
// (src/graph/tuning.cc: ring steps, LL and Simple protocols).
// Owns the formulas and the per-link constants (each with its source, collectives.cpp and docs/PARALLELISM.md
// "Collectives"); not the datasheet link figures (calibration/gpus/*.yaml) nor how many collectives a step runs
// (TensorParallelComm, ExpertParallelism, PipelineHop).
#pragma once

#include <string>

namespace servesim::calibration {
struct GpuSpec;
}

namespace servesim::engine {

// The path a group's GPUs exchange data over.
enum class LinkKind {
    kNvlinkSwitch,  // NVLink through NVSwitch (HGX A100/H100/H200/B200): every pair at full NVLink bandwidth
    kNvlinkBridge,  // an NVLink bridge between the two cards of a pair (H100 NVL)
    kXgmiMesh,      // AMD Infinity Fabric, a direct link to every peer (MI300X platform)
    kPcieP2p,       // PCIe with peer-to-peer DMA between the GPUs
    kPcieHost,      // PCIe without peer-to-peer (GeForce, L40S): every transfer staged through host memory
    kNetwork,       // across nodes: InfiniBand / RoCE, one NIC per GPU
};

[[nodiscard]] const char* link_kind_name(LinkKind kind);

// A group's link: its kind and the datasheet bandwidth of one GPU's port on it, one direction.
struct CollectiveLink {
    LinkKind kind = LinkKind::kNvlinkSwitch;
    double link_bytes_per_s = 0;  // 0 = no link (a group of one GPU, or not modelled)
    // kNetwork only: GPUs per node, joined inside the node by NVLink; 0 = one GPU per node. NCCL's ring then crosses
    // the network on 2·(nodes − 1) of an all-reduce's steps (nodes − 1 of a gather/scatter's) and NVLink on the rest.
    int gpus_per_node = 0;
    // The GPUs' compute capability (90 for Hopper): vLLM sizes its all-reduce paths by it (all_reduce_utils.py).
    int compute_capability = 0;
};

// The link a group of `num_gpus` GPUs of this kind uses: the NVLink domain when the group fits in it; beyond it PCIe
// inside the node (NVLink bridges, PCIe-only cards; peer-to-peer or through host memory as the GPU file says), or the
// network between nodes (NVSwitch and NVLink-C2C systems, whose domain is the node). link_bytes_per_s 0 when the group
// would cross a network the GPU file gives no figure for.
[[nodiscard]] CollectiveLink collective_link_for_group(const calibration::GpuSpec& gpu, int num_gpus);

class CollectiveCostModel {
public:
    CollectiveCostModel() = default;  // one rank: every collective costs 0
    // `custom_all_reduce`: vLLM's custom all-reduce is enabled (not --disable-custom-all-reduce); it is used only where
    // vLLM would use it (see uses_custom_all_reduce). `bf16_activations`: the all-reduced tensors are bf16, the only
    // dtype vLLM's symmetric-memory all-reduce takes (SymmMemCommunicator.should_use_symm_mem; an fp16 model's
    // all-reduces skip it, yet the custom kernel's lowered size cap stays).
    CollectiveCostModel(CollectiveLink link, int ranks, bool custom_all_reduce = true, bool bf16_activations = true);

    [[nodiscard]] int ranks() const { return ranks_; }
    [[nodiscard]] const CollectiveLink& link() const { return link_; }
    // The achievable NCCL bus bandwidth of large messages on this link at this rank count (nccl-tests' busbw).
    [[nodiscard]] double bus_bytes_per_s() const { return bus_bytes_per_s_; }

    // An all-reduce of `bytes` per rank as vLLM runs it (CudaCommunicator.all_reduce's order): the custom all-reduce
    // where it applies, else torch's symmetric-memory multimem all-reduce where it applies, else NCCL.
    [[nodiscard]] double all_reduce_ms(double bytes) const;
    [[nodiscard]] bool uses_custom_all_reduce(double bytes) const;
    [[nodiscard]] bool uses_symm_mem_all_reduce(double bytes) const;
    // torch's multimem all-reduce (NVLink SHARP: the switch reduces), whether or not it applies.
    [[nodiscard]] double symm_mem_all_reduce_ms(double bytes) const;
    [[nodiscard]] double nccl_all_reduce_ms(double bytes) const;
    // vLLM's custom all-reduce kernel (one-shot below its size switch, two-shot above), whether or not it applies.
    [[nodiscard]] double custom_all_reduce_ms(double bytes) const;
    [[nodiscard]] bool custom_all_reduce_one_shot(double bytes) const;
    // NCCL all-gather whose gathered output is `total_bytes` (each rank contributes total/ranks).
    [[nodiscard]] double all_gather_ms(double total_bytes) const;
    // NCCL reduce-scatter of a `total_bytes` input per rank (each rank keeps total/ranks of the sum).
    [[nodiscard]] double reduce_scatter_ms(double total_bytes) const;
    // All-to-all where each rank sends `bytes_per_rank` in all, spread over the other ranks (and itself).
    [[nodiscard]] double all_to_all_ms(double bytes_per_rank) const;
    // One point-to-point send of `bytes` (pipeline stages).
    [[nodiscard]] double send_ms(double bytes) const;

    [[nodiscard]] std::string describe() const;

private:
    // NCCL ring collective with `steps` steps, `inter_steps` of them across nodes, moving `bus_bytes` per rank, the
    // faster of LL and Simple, in ms; `ll_share` is the share of the bus bandwidth LL reaches for this collective.
    [[nodiscard]] double nccl_ring_ms(int steps, int inter_steps, double bus_bytes, double ll_share) const;

    CollectiveLink link_;
    int ranks_ = 1;
    bool custom_all_reduce_ = false;  // enabled and possible on this link and rank count
    double custom_max_bytes_ = 0;     // the custom all-reduce takes messages below this
    double symm_mem_max_bytes_ = 0;   // the multimem all-reduce takes messages below this (0: never)
    double bus_bytes_per_s_ = 0;
    int nodes_ = 1;                    // > 1 only for a network link with gpus_per_node
    double step_latency_ll_ms_ = 0;    // per step inside a node (the link's own kind, NVLink beside a network)
    double step_latency_simple_ms_ = 0;
    double inter_latency_ll_ms_ = 0;   // per step across nodes
    double inter_latency_simple_ms_ = 0;
};

}  // namespace servesim::engine
