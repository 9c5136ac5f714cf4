// Tensor-parallel all-reduce time; see tensor_parallel_comm.h.
#include "sim/engine/tensor_parallel_comm.h"

#include <variant>

namespace servesim::engine {

double TensorParallelComm::step_ms(std::int64_t tokens) const {
    const int tp = tensor_parallel_size;
    if (tp <= 1 || interconnect_bytes_per_s <= 0) {
        return 0.0;
    }
    const double bytes = static_cast<double>(tokens) * hidden_size * dtype_bytes;
    const double ring_ms = 1e3 * 2.0 * (tp - 1) / tp * bytes / interconnect_bytes_per_s;
    return num_allreduces_per_step * (ring_ms + allreduce_latency_ms);
}

int allreduces_per_step(const models::ModelSpec& model) {
    int n = 0;
    for (const auto& layer : model.layers) {
        n += (std::holds_alternative<models::NoMixer>(layer.mixer) ? 0 : 1) +
             (std::holds_alternative<models::NoMlp>(layer.mlp) ? 0 : 1);
    }
    return n;
}

TensorParallelComm make_tensor_parallel_comm(const models::ModelSpec& model,
                                             int tensor_parallel_size,
                                             double interconnect_bytes_per_s,
                                             double allreduce_latency_ms) {
    TensorParallelComm c;
    c.tensor_parallel_size = tensor_parallel_size < 1 ? 1 : tensor_parallel_size;
    c.interconnect_bytes_per_s = interconnect_bytes_per_s;
    c.allreduce_latency_ms = allreduce_latency_ms;
    c.num_allreduces_per_step = allreduces_per_step(model);
    c.hidden_size = model.hidden_size;
    c.dtype_bytes = models::dtype_bytes(model.dtype);
    return c;
}

}  // namespace servesim::engine
