// Expert placement for expert parallelism (vLLM --enable-expert-parallel): the routed experts of every MoE layer are
// spread whole over EP = TP × DP ranks (vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
// "each device owns a set of experts fully", ep_size = tp_size × dp_size), placed linearly by determine_expert_map
// (vllm/model_executor/layers/fused_moe/expert_map_manager.py: E // EP each, the first E % EP ranks one more).
// Owns the placement and the weight bytes one GPU then holds; the step costs are sim/engine/expert_parallel.h's.
#pragma once

#include <cstdint>

#include "models/model_spec.h"

namespace servesim::cache {

// determine_expert_map, linear placement: experts held by rank `ep_rank` of `ep_size`.
[[nodiscard]] int local_num_experts(int num_experts, int ep_size, int ep_rank);

// The most experts any rank holds (rank 0's): ceil(E / EP).
[[nodiscard]] int max_local_experts(int num_experts, int ep_size);

// Bytes of all routed experts of all MoE layers at the model dtype (shared experts and routers excluded).
[[nodiscard]] std::int64_t routed_expert_weight_bytes(const models::ModelSpec& model);

// Weight bytes one GPU holds with expert parallelism: everything but the routed experts sharded by TP, plus the
// routed experts of the busiest rank (max_local_experts of each layer's E).
[[nodiscard]] std::int64_t expert_parallel_weight_bytes(const models::ModelSpec& model, int tensor_parallel_size,
                                                        int expert_parallel_size);

// Parameters of one routed expert of `m` (gate, up and down projections, or up and down for non-gated experts).
[[nodiscard]] double params_per_expert(const models::MoeMlp& m, int hidden_size);

}  // namespace servesim::cache
