// TensorParallelComm: the time a step spends in tensor-parallel all-reduces, shared by both cost models (the roofline
// and the calibrated profile, whose curves are one rank's compute only). vLLM's row-parallel layers end in an
// all-reduce of the step's hidden states (RowParallelLinear.forward → tensor_model_parallel_all_reduce): one after
// each layer's mixer (o_proj / out_proj) and one after its MLP (down_proj, or the MoE output). Owns that count and the
// ring formula; not the interconnect figures (calibration/gpu_spec.h).
#pragma once

#include <cstdint>

#include "models/model_spec.h"

namespace servesim::engine {

struct TensorParallelComm {
    int tensor_parallel_size = 1;
    double interconnect_bytes_per_s = 0;  // per-GPU link bandwidth; 0 = not modelled (no comm term)
    double allreduce_latency_ms = 0.01;   // per all-reduce (NCCL launch + sync), a stated assumption
    int num_allreduces_per_step = 0;      // allreduces_per_step(model)
    int hidden_size = 0;
    double dtype_bytes = 2;

    // num_allreduces · (2·(TP−1)/TP · tokens·hidden·bytes / interconnect + latency) in ms (a ring all-reduce); 0 at
    // TP 1 or without an interconnect figure.
    [[nodiscard]] double step_ms(std::int64_t tokens) const;
};

// One after every layer's mixer and one after every MLP (layers without one have none).
[[nodiscard]] int allreduces_per_step(const models::ModelSpec& model);

[[nodiscard]] TensorParallelComm make_tensor_parallel_comm(const models::ModelSpec& model,
                                                           int tensor_parallel_size,
                                                           double interconnect_bytes_per_s,
                                                           double allreduce_latency_ms = 0.01);

}  // namespace servesim::engine
