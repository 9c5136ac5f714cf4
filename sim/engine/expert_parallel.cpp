// Per-rank expert work and the all-to-all of expert parallelism; see expert_parallel.h.
#include "sim/engine/expert_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "models/model_derived.h"
#include "sim/cache/expert_placement.h"

namespace servesim::engine {

ExpertStepWork expert_step_work(const models::ModelSpec& model, const ExpertParallelism& ep, std::int64_t tokens) {
    ExpertStepWork w;
    if (tokens <= 0) {
        return w;
    }
    const double b = models::dtype_bytes(model.dtype);
    const double t = static_cast<double>(tokens);
    const int tp = std::max(1, ep.tensor_parallel_size);
    const int eps = std::max(1, ep.expert_parallel_size);
    int num_moe_layers = 0;
    double dispatch_bytes = 0;  // per rank, one direction, all MoE layers
    for (const auto& layer : model.layers) {
        const auto* m = std::get_if<models::MoeMlp>(&layer.mlp);
        if (m == nullptr) {
            continue;
        }
        ++num_moe_layers;
        const double e = m->num_experts;
        const double k = m->num_experts_per_tok;
        const double per_expert = cache::params_per_expert(*m, model.hidden_size);
        w.flops_tp += 2.0 * t * k * per_expert / tp;
        w.flops_ep += 2.0 * t * k * per_expert / tp * ep.expert_load_imbalance;
        w.weight_bytes_tp += e * (1.0 - std::pow(1.0 - k / e, t)) * per_expert * b / tp;
        // The rank's local experts, each touched unless none of the T·DP tokens picks it.
        const double global_tokens = t * std::max(1, ep.data_parallel_size);
        w.weight_bytes_ep += cache::max_local_experts(m->num_experts, eps) * (1.0 - std::pow(1.0 - k / e, global_tokens)) *
                             per_expert * b;
        // Dispatch: this rank's share of the tokens (T / TP) goes to k experts, (EP−1)/EP of them on other ranks.
        dispatch_bytes += t / tp * k * model.hidden_size * b * (eps - 1.0) / eps;
    }
    if (eps > 1 && ep.link_bytes_per_s > 0) {
        // Dispatch and combine move the same bytes; the busiest rank receives `imbalance` times the mean.
        w.all_to_all_ms = 2.0 * (1e3 * dispatch_bytes * ep.expert_load_imbalance / ep.link_bytes_per_s +
                                 num_moe_layers * ep.latency_ms);
    }
    return w;
}

ExpertAllToAllCostModel::ExpertAllToAllCostModel(std::unique_ptr<CostModel> inner, const models::ModelSpec& model,
                                                 const ExpertParallelism& ep)
    : inner_(std::move(inner)), model_(model), ep_(ep) {}

StepCost ExpertAllToAllCostModel::step_cost(const BatchShape& shape) const {
    StepCost c = inner_->step_cost(shape);
    c.comm_ms += expert_step_work(model_, ep_, shape.num_tokens).all_to_all_ms;
    return c;
}

std::string ExpertAllToAllCostModel::describe() const {
    return fmt::format("{}, EP {} (DP {} x TP {}, imbalance {})", inner_->describe(), ep_.expert_parallel_size,
                       ep_.data_parallel_size, ep_.tensor_parallel_size, ep_.expert_load_imbalance);
}

}  // namespace servesim::engine
