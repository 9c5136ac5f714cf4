// Expert parallelism with data-parallel attention (vLLM --enable-expert-parallel with --data-parallel-size): the
// routed experts of every MoE layer are spread whole over EP = TP × DP ranks instead of each being sliced by TP
// (vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make: "each device owns a set of experts
// fully", ep_size = tp_size × dp_size), placed linearly by determine_expert_map
// (vllm/model_executor/layers/fused_moe/expert_map_manager.py: E // EP each, the first E % EP ranks one more); the
// attention and dense parts stay TP-sharded inside each DP replica. Each MoE layer then moves every token's hidden
// state to the ranks of its k experts and back (dispatch and combine all-to-all). Owns the per-rank expert work and
// the all-to-all time (placement and weights: sim/cache/expert_placement.h); both cost models ask it. The DP ranks are
// assumed to step in lockstep with equal loads (vLLM pads idle DP ranks with dummy batches), and the busiest rank's
// share of the routed tokens is `expert_load_imbalance` times the mean (1 = perfectly balanced routing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/model_spec.h"
#include "sim/engine/cost_model.h"

namespace servesim::engine {

struct ExpertParallelism {
    int expert_parallel_size = 1;   // TP × DP; 1 = off
    int tensor_parallel_size = 1;
    int data_parallel_size = 1;
    double expert_load_imbalance = 1;  // busiest rank's routed tokens / mean, ≥ 1
    double link_bytes_per_s = 0;       // the EP group's GPU-to-GPU bandwidth, one direction
    double latency_ms = 0.01;          // per all-to-all (launch + sync)

    [[nodiscard]] bool enabled() const { return expert_parallel_size > 1; }
};

// Routed-expert work of one step of `tokens` tokens (this replica's; every DP replica carries as many), on the
// busiest rank, compared with TP slicing of the same experts.
struct ExpertStepWork {
    double flops_tp = 0;          // routed-expert FLOPs of one TP rank without EP
    double flops_ep = 0;          // of the busiest EP rank: tokens·k·2·params_per_expert / TP × imbalance
    double weight_bytes_tp = 0;   // routed-expert weights one TP rank reads without EP: E·(1−(1−k/E)^T) / TP experts
    double weight_bytes_ep = 0;   // its local experts touched by the DP replicas' T·DP tokens
    double all_to_all_ms = 0;     // dispatch + combine over all MoE layers
};

[[nodiscard]] ExpertStepWork expert_step_work(const models::ModelSpec& model, const ExpertParallelism& ep,
                                              std::int64_t tokens);

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
