// Per-rank expert work and the all-to-all of expert parallelism; see expert_parallel.h.
#include "sim/engine/expert_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "models/model_derived.h"
#include "sim/memory/expert_placement.h"

namespace servesim::engine {

namespace {

struct BackendName {
    All2AllBackend backend;
    const char* name;
};

// The values of vLLM's All2AllBackend (vllm/config/parallel.py) that servesim models.
constexpr BackendName kBackends[] = {
    {All2AllBackend::kAllgatherReducescatter, "allgather_reducescatter"},
    {All2AllBackend::kNaive, "naive"},
    {All2AllBackend::kPplx, "pplx"},
    {All2AllBackend::kDeepepHighThroughput, "deepep_high_throughput"},
    {All2AllBackend::kDeepepLowLatency, "deepep_low_latency"},
    {All2AllBackend::kFlashinferNvlinkTwoSided, "flashinfer_nvlink_two_sided"},
    {All2AllBackend::kFlashinferNvlinkOneSided, "flashinfer_nvlink_one_sided"},
};

}  // namespace

const char* all2all_backend_name(All2AllBackend b) {
    for (const auto& n : kBackends) {
        if (n.backend == b) {
            return n.name;
        }
    }
    return "allgather_reducescatter";
}

std::optional<All2AllBackend> parse_all2all_backend(std::string_view name) {
    for (const auto& n : kBackends) {
        if (name == n.name) {
            return n.backend;
        }
    }
    return std::nullopt;
}

std::string all2all_backend_names() {
    std::string out;
    for (const auto& n : kBackends) {
        out += fmt::format("{}{}", out.empty() ? "" : ", ", n.name);
    }
    return out;
}

bool moves_routed_copies(All2AllBackend b) {
    return b != All2AllBackend::kAllgatherReducescatter && b != All2AllBackend::kNaive;
}

ExpertStepWork expert_step_work(const models::ModelSpec& model, const ExpertParallelism& ep, std::int64_t tokens) {
    ExpertStepWork w;
    if (tokens <= 0) {
        return w;
    }
    const double b = models::dtype_bytes(model.dtype);
    const double t = static_cast<double>(tokens);
    const int tp = std::max(1, ep.tensor_parallel_size);
    const int eps = std::max(1, ep.expert_parallel_size);
    const int dp = std::max(1, ep.data_parallel_size);
    // The dispatch/combine runs only with DP > 1 (use_all2all_kernels); its group: the DP ranks for
    // allgather_reducescatter, all EP ranks for the routed backends.
    const bool routed = moves_routed_copies(ep.backend);
    const bool all2all = eps > 1 && dp > 1;
    const CollectiveCostModel group(ep.link, all2all ? (routed ? eps : dp) : 1);
    for (const auto& layer : model.layers) {
        const auto* m = std::get_if<models::MoeMlp>(&layer.mlp);
        if (m == nullptr) {
            continue;
        }
        const double e = m->num_experts;
        const double k = m->num_experts_per_tok;
        const double per_expert = cache::params_per_expert(*m, model.hidden_size);
        const RoutedExpertWork sliced =
            routed_expert_work(m->num_experts, k, 2.0 * k * per_expert, per_expert * b, t, tp, nullptr);
        const RoutedExpertWork spread =
            routed_expert_work(m->num_experts, k, 2.0 * k * per_expert, per_expert * b, t, tp, &ep);
        w.flops_tp += sliced.flops;
        w.flops_ep += spread.flops;
        w.weight_bytes_tp += sliced.weight_bytes;
        w.weight_bytes_ep += spread.weight_bytes;
        const double global_tokens = t * dp;
        if (!all2all) {
            continue;
        }
        if (routed) {
            // This rank's share of the tokens (T / TP) goes to k experts, (EP−1)/EP of them on other ranks; the
            // busiest rank receives `imbalance` times the mean. Combine returns as many bytes.
            const double routed_bytes = t / tp * k * model.hidden_size * b * ep.expert_load_imbalance;
            w.dispatch_bytes += routed_bytes * (eps - 1.0) / eps;
            w.all_to_all_ms += 2.0 * group.all_to_all_ms(routed_bytes);
        } else {
            // All-gather of every DP rank's hidden states and router logits (all_gatherv of [hidden_states,
            // router_logits]), reduce-scatter of the expert outputs' hidden states.
            const double gathered = global_tokens * (model.hidden_size + e) * b;
            const double scattered = global_tokens * model.hidden_size * b;
            w.dispatch_bytes += gathered * (dp - 1.0) / dp;
            w.all_to_all_ms += group.all_gather_ms(gathered) + group.reduce_scatter_ms(scattered);
        }
    }
    return w;
}

RoutedExpertWork routed_expert_work(int num_experts,
                                    double top_k,
                                    double flops_per_token,
                                    double bytes_per_expert,
                                    double tokens,
                                    int tensor_parallel_size,
                                    const ExpertParallelism* ep) {
    const double e = num_experts;
    const double miss = 1.0 - top_k / e;  // one token's chance of passing an expert by
    const int tp = std::max(1, tensor_parallel_size);
    RoutedExpertWork w;
    w.flops = flops_per_token * tokens / tp;
    w.tokens_per_expert = tokens * top_k / e;
    if (ep == nullptr) {
        w.weight_bytes = e * (1.0 - std::pow(miss, tokens)) * bytes_per_expert / tp;
        return w;
    }
    // The rank's local experts, each touched unless none of the T·DP tokens picks it.
    const double dp = std::max(1, ep->data_parallel_size);
    w.flops *= ep->expert_load_imbalance;
    w.weight_bytes = cache::max_local_experts(num_experts, std::max(1, ep->expert_parallel_size)) *
                     (1.0 - std::pow(miss, tokens * dp)) * bytes_per_expert;
    w.tokens_per_expert *= dp * ep->expert_load_imbalance;
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
    // The backend is named only when it is not vLLM's default, so default runs describe themselves as before.
    const std::string backend = ep_.backend == All2AllBackend::kAllgatherReducescatter
                                    ? std::string()
                                    : fmt::format(", all2all {}", all2all_backend_name(ep_.backend));
    return fmt::format("{}, EP {} (DP {} x TP {}, imbalance {}{})", inner_->describe(), ep_.expert_parallel_size,
                       ep_.data_parallel_size, ep_.tensor_parallel_size, ep_.expert_load_imbalance, backend);
}

}  // namespace servesim::engine
