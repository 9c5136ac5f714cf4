// Expert parallelism with data-parallel attention (vLLM --enable-expert-parallel with --data-parallel-size): the
// routed experts of every MoE layer are spread whole over EP = TP × DP ranks instead of each being sliced by TP
// (vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make: "each device owns a set of experts
// fully", ep_size = tp_size × dp_size), placed linearly by determine_expert_map
// (vllm/model_executor/layers/fused_moe/expert_map_manager.py: E // EP each, the first E % EP ranks one more); the
// attention and dense parts stay TP-sharded inside each DP replica. Each MoE layer then moves tokens to their experts'
// ranks and the outputs back, as vLLM's configured all2all backend (--all2all-backend, ParallelConfig.all2all_backend,
// vllm/config/parallel.py; device_communicators/all2all.py) moves them, and only with DP > 1 (FusedMoEParallelConfig
// use_all2all_kernels: dp_size > 1 and use_ep; with DP 1 the MoE output is all-reduced over TP like any layer, which
// TensorParallelComm counts):
//  - allgather_reducescatter (the default; AgRsAll2AllManager): dispatch all-gathers every DP rank's hidden states and
//    router logits, combine reduce-scatters the expert outputs, over the DP group: per rank (DP−1)/DP of the global
//    batch's bytes each way, whatever the routing. `naive` runs it too (vLLM PR #33728 replaced the broadcast-based
//    naive backend with it, 2026-02).
//  - pplx, deepep_high_throughput, deepep_low_latency, flashinfer_nvlink_two_sided / _one_sided: dispatch sends each
//    token only to the ranks of its top-k experts and combine returns them: tokens/TP · k · hidden · bytes per rank,
//    (EP−1)/EP of it to other ranks, the busiest rank receiving `expert_load_imbalance` times the mean; an all-to-all
//    over the EP group.
// Owns the per-rank expert work and the dispatch/combine time (placement and weights: sim/memory/expert_placement.h;
// the collectives' α-β costs: sim/engine/collectives.h); both cost models ask it. The DP ranks are assumed to step in
// lockstep with equal loads (vLLM pads idle DP ranks with dummy batches), and the busiest rank's share of the routed
// tokens is `expert_load_imbalance` times the mean (1 = perfectly balanced routing).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "models/model_spec.h"
#include "sim/engine/collectives.h"
#include "sim/engine/cost_model.h"

namespace servesim::engine {

// vLLM's --all2all-backend values that servesim models (mori_* and nixl_ep are not modelled).
enum class All2AllBackend {
    kAllgatherReducescatter,
    kNaive,
    kPplx,
    kDeepepHighThroughput,
    kDeepepLowLatency,
    kFlashinferNvlinkTwoSided,
    kFlashinferNvlinkOneSided,
};

[[nodiscard]] const char* all2all_backend_name(All2AllBackend b);
// The backend of vLLM's flag value; std::nullopt for a value servesim does not model.
[[nodiscard]] std::optional<All2AllBackend> parse_all2all_backend(std::string_view name);
// The modelled values, comma separated (for errors and help).
[[nodiscard]] std::string all2all_backend_names();
// True for the backends that move only each token's top-k routed copies (not allgather_reducescatter / naive).
[[nodiscard]] bool moves_routed_copies(All2AllBackend b);

struct ExpertParallelism {
    int expert_parallel_size = 1;   // TP × DP; 1 = off
    int tensor_parallel_size = 1;
    int data_parallel_size = 1;
    double expert_load_imbalance = 1;  // busiest rank's routed tokens / mean, ≥ 1
    CollectiveLink link;               // the EP group's link (collective_link_for_group over EP GPUs)
    All2AllBackend backend = All2AllBackend::kAllgatherReducescatter;

    [[nodiscard]] bool enabled() const { return expert_parallel_size > 1; }
};

// Routed-expert work of one step of `tokens` tokens (this replica's; every DP replica carries as many), on the
// busiest rank, compared with TP slicing of the same experts.
struct ExpertStepWork {
    double flops_tp = 0;          // routed-expert FLOPs of one TP rank without EP
    double flops_ep = 0;          // of the busiest EP rank: tokens·k·2·params_per_expert / TP × imbalance
    double weight_bytes_tp = 0;   // routed-expert weights one TP rank reads without EP: E·(1−(1−k/E)^T) / TP experts
    double weight_bytes_ep = 0;   // its local experts touched by the DP replicas' T·DP tokens
    double dispatch_bytes = 0;    // per rank, received in the dispatch of all MoE layers (the combine moves as many)
    double all_to_all_ms = 0;     // dispatch + combine over all MoE layers
};

[[nodiscard]] ExpertStepWork expert_step_work(const models::ModelSpec& model, const ExpertParallelism& ep,
                                              std::int64_t tokens);

// One MoE layer's routed experts on one rank for `tokens` tokens of this replica: with `ep` null, sliced by TP (every
// expert the tokens touch read, E·(1 − (1 − k/E)^T) of them, 1/TP of each); with `ep`, the busiest EP rank's whole
// local experts, touched by the T·DP tokens of all DP replicas, and `expert_load_imbalance` times its mean share of
// the routed tokens. `flops_per_token`: 2·k·params of one expert (or what the layers it stands for add up to);
// `bytes_per_expert`: one expert's weights. The one place both cost models take the experts' work from.
struct RoutedExpertWork {
    double flops = 0;
    double weight_bytes = 0;
    double tokens_per_expert = 0;  // m_e: routed tokens per expert (the busiest rank's with `ep`)
};

[[nodiscard]] RoutedExpertWork routed_expert_work(int num_experts,
                                                  double top_k,
                                                  double flops_per_token,
                                                  double bytes_per_expert,
                                                  double tokens,
                                                  int tensor_parallel_size,
                                                  const ExpertParallelism* ep);

// Adds the all-to-all of expert_step_work to comm_ms of any cost model (the roofline also re-costs the experts'
// GEMMs itself; a calibrated profile's GEMM curve keeps the TP-sliced experts it was measured with).
class ExpertAllToAllCostModel final : public CostModel {
public:
    ExpertAllToAllCostModel(std::unique_ptr<CostModel> inner, const models::ModelSpec& model,
                            const ExpertParallelism& ep);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return inner_->local_attention_spans(); }

private:
    std::unique_ptr<CostModel> inner_;
    models::ModelSpec model_;  // a copy, as RooflineCostModel keeps one
    ExpertParallelism ep_;
};

}  // namespace servesim::engine
