// TensorParallelComm: the time a step spends in tensor-parallel all-reduces, shared by both cost models (the roofline
// and the calibrated profile, whose curves are one rank's compute only). vLLM's row-parallel layers end in an
// all-reduce of the step's hidden states (RowParallelLinear.forward → tensor_model_parallel_all_reduce): one after
// each layer's mixer (o_proj / out_proj) and one after its MLP (down_proj, or the MoE output). Owns that count; each
// all-reduce is costed by the TP group's CollectiveCostModel (sim/engine/collectives.h: vLLM's custom all-reduce for
// small messages on NVLink, NCCL otherwise, by link, size and rank count).
#pragma once

#include <cstdint>

#include "models/model_spec.h"
#include "sim/engine/collectives.h"

namespace servesim::engine {

struct TensorParallelComm {
    CollectiveCostModel collectives;  // the TP group's; one rank = no comm term
    int num_allreduces_per_step = 0;  // allreduces_per_step(model)
    int hidden_size = 0;
    double dtype_bytes = 2;

    [[nodiscard]] int tensor_parallel_size() const { return collectives.ranks(); }

    // num_allreduces · all_reduce_ms(tokens · hidden · bytes) in ms; 0 at TP 1 or without a link figure.
    [[nodiscard]] double step_ms(std::int64_t tokens) const;
};

// One after every layer's mixer and one after every MLP (layers without one have none).
[[nodiscard]] int allreduces_per_step(const models::ModelSpec& model);

// `link`: the TP group's (collective_link_for_group); `custom_all_reduce`: vLLM's custom all-reduce not disabled.
[[nodiscard]] TensorParallelComm make_tensor_parallel_comm(const models::ModelSpec& model, int tensor_parallel_size,
                                                           CollectiveLink link, bool custom_all_reduce = true);

}  // namespace servesim::engine
