// Tensor-parallel all-reduce time; see tensor_parallel_comm.h.
#include "sim/engine/tensor_parallel_comm.h"

#include <algorithm>
#include <variant>

namespace servesim::engine {

double TensorParallelComm::step_ms(std::int64_t tokens) const {
    if (collectives.ranks() <= 1 || tokens <= 0) {
        return 0.0;
    }
    const double bytes = static_cast<double>(tokens) * hidden_size * dtype_bytes;
    return num_allreduces_per_step * collectives.all_reduce_ms(bytes);
}

int allreduces_per_step(const models::ModelSpec& model) {
    int n = 0;
    for (const auto& layer : model.layers) {
        n += (std::holds_alternative<models::NoMixer>(layer.mixer) ? 0 : 1) +
             (std::holds_alternative<models::NoMlp>(layer.mlp) ? 0 : 1);
    }
    return n;
}

TensorParallelComm make_tensor_parallel_comm(const models::ModelSpec& model, int tensor_parallel_size,
                                             CollectiveLink link, bool custom_all_reduce) {
    TensorParallelComm c;
    c.collectives = CollectiveCostModel(link, std::max(1, tensor_parallel_size), custom_all_reduce,
                                        model.dtype == models::DType::kBFloat16);
    c.num_allreduces_per_step = allreduces_per_step(model);
    c.hidden_size = model.hidden_size;
    c.dtype_bytes = models::dtype_bytes(model.dtype);
    return c;
}

}  // namespace servesim::engine
