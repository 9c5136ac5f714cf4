// Expert placement and per-GPU expert weights; see expert_placement.h.
#include "sim/memory/expert_placement.h"

#include <cmath>
#include <variant>

#include "models/model_derived.h"

namespace servesim::cache {

double params_per_expert(const models::MoeMlp& m, int hidden) {
    return (m.gated ? 3.0 : 2.0) * hidden * m.moe_intermediate_size;
}

int local_num_experts(int num_experts, int ep_size, int ep_rank) {
    if (ep_size <= 1) {
        return num_experts;
    }
    const int base = num_experts / ep_size;
    const int remainder = num_experts % ep_size;
    return ep_rank < remainder ? base + 1 : base;
}

int max_local_experts(int num_experts, int ep_size) { return local_num_experts(num_experts, ep_size, 0); }

std::int64_t routed_expert_weight_bytes(const models::ModelSpec& model) {
    double params = 0;
    for (const auto& layer : model.layers) {
        if (const auto* m = std::get_if<models::MoeMlp>(&layer.mlp)) {
            params += m->num_experts * params_per_expert(*m, model.hidden_size);
        }
    }
    return static_cast<std::int64_t>(std::llround(params * models::dtype_bytes(model.dtype)));
}

std::int64_t expert_parallel_weight_bytes(const models::ModelSpec& model, int tp, int ep) {
    const std::int64_t total = models::weight_bytes_total(model);
    const std::int64_t routed = routed_expert_weight_bytes(model);
    double local = 0;
    for (const auto& layer : model.layers) {
        if (const auto* m = std::get_if<models::MoeMlp>(&layer.mlp)) {
            local += max_local_experts(m->num_experts, ep) * params_per_expert(*m, model.hidden_size);
        }
    }
    return (total - routed) / tp + static_cast<std::int64_t>(std::llround(local * models::dtype_bytes(model.dtype)));
}

}  // namespace servesim::cache
