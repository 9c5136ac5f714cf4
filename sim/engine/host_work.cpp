// Host work per step; see host_work.h and docs/HOST-WORK.md.
#include "sim/engine/host_work.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

namespace servesim::engine {
namespace {

// Kernels an eager (--enforce-eager) forward launches per decoder layer, counted from vLLM's Llama-style layer with
// its custom ops (vllm/model_executor/models/llama.py LlamaDecoderLayer.forward, no torch.compile fusion): the
// fused add + RMSNorm before attention, the qkv GEMM, rotary embedding, the KV-cache write (reshape_and_cache_flash),
// the attention kernel, o_proj, the fused add + RMSNorm before the MLP, gate_up GEMM, SiluAndMul, down GEMM: 10.
// A recurrent mixer (GDN, Mamba) is counted as an attention layer's 10 (its conv and scan replace the cache write and
// attention). A fused-MoE MLP (vllm/model_executor/layers/fused_moe) launches the router GEMM, top-k softmax,
// moe_align_block_size, two grouped GEMMs, the activation and moe_sum in place of the 3 dense-MLP kernels: 4 more.
// Tensor parallelism adds each layer's two all-reduces.
constexpr int kKernelsPerLayer = 10;
constexpr int kMoeExtraKernels = 4;
constexpr int kAllReducesPerLayer = 2;
// Outside the layers: the embedding and the final norm (inside the model, so inside its graphs), and the lm_head GEMM
// with the sampler's kernels (compute_logits and Sampler.forward run outside the captured model in every mode: the
// logits, the greedy/top-k path, the gather of sampled ids; about 6).
constexpr int kModelEdgeKernels = 2;
constexpr int kSamplerKernels = 6;
// Kernels a piecewise-graph forward launches eagerly between its graphs, per mixer layer: the splitting op
// (vllm::unified_attention_with_output: cache write + attention, 2; a GDN / Mamba mixer op: its conv and scan
// kernels, about 4).
constexpr int kAttentionSplitKernels = 2;
constexpr int kRecurrentSplitKernels = 4;

}  // namespace

int compute_kernels_per_forward(const models::ModelSpec& model) {
    int kernels = kModelEdgeKernels + kSamplerKernels;
    for (const auto& layer : model.layers) {
        kernels += kKernelsPerLayer + (std::holds_alternative<models::MoeMlp>(layer.mlp) ? kMoeExtraKernels : 0);
    }
    return kernels;
}

HostWorkModel::HostWorkModel(const HostWorkParams& params, const models::ModelSpec& model, int tensor_parallel_size,
                             CudaGraphSizes graphs, bool hashes_prompt_blocks)
    : params_(params), graphs_(std::move(graphs)) {
    // Input preparation is a small part of the per-prompt-token figure (docs/HOST-WORK.md): without prefix caching
    // no block is hashed, and half of it is kept as a stated approximation.
    prefill_token_us_ = hashes_prompt_blocks ? params_.per_prefill_token_us : 0.5 * params_.per_prefill_token_us;
    int layer_kernels = 0;
    int mixers = 0;
    int split_kernels = 0;
    for (const auto& layer : model.layers) {
        layer_kernels += kKernelsPerLayer;
        if (std::holds_alternative<models::MoeMlp>(layer.mlp)) {
            layer_kernels += kMoeExtraKernels;
        }
        if (tensor_parallel_size > 1) {
            layer_kernels += kAllReducesPerLayer;
        }
        ++mixers;
        split_kernels += std::holds_alternative<models::AttentionMixer>(layer.mixer) ? kAttentionSplitKernels
                                                                                     : kRecurrentSplitKernels;
    }
    eager_kernels_per_step_ = layer_kernels + kModelEdgeKernels + kSamplerKernels;
    piecewise_graphs_ = mixers + 1;
    piecewise_eager_kernels_ = split_kernels + kSamplerKernels;
}

HostStepWork HostWorkModel::step_work(const BatchShape& s) const {
    HostStepWork w;
    w.cpu_us = params_.step_us + params_.per_request_us * static_cast<double>(s.num_seqs) +
               params_.per_new_request_us * static_cast<double>(s.num_new_seqs) +
               params_.per_finished_request_us * static_cast<double>(s.num_finished_seqs) +
               prefill_token_us_ * static_cast<double>(s.num_prefill_tokens);
    switch (graphs_.mode(s.num_tokens, s.num_prefill_seqs == 0)) {
        case CudaGraphSizes::Mode::kFull:
            w.launch_us = params_.graph_launch_us + kSamplerKernels * params_.launch_us;
            break;
        case CudaGraphSizes::Mode::kPiecewise:
            w.launch_us = piecewise_graphs_ * params_.graph_launch_us + piecewise_eager_kernels_ * params_.launch_us;
            break;
        case CudaGraphSizes::Mode::kEager:
            w.launch_us = eager_kernels_per_step_ * params_.launch_us;
            break;
    }
    w.exposed_us = params_.exposed_us;
    return w;
}

double HostWorkModel::host_ms(double gpu_ms, const HostStepWork& w, bool overlapped) {
    const double cpu_ms = w.cpu_us * 1e-3;
    const double launch_ms = w.launch_us * 1e-3;
    const double exposed_ms = w.exposed_us * 1e-3;
    if (overlapped) {
        return std::max(0.0, cpu_ms + launch_ms - gpu_ms) + exposed_ms;
    }
    return cpu_ms + std::max(0.0, launch_ms - gpu_ms) + exposed_ms;
}

HostWorkCostModel::HostWorkCostModel(std::unique_ptr<CostModel> inner, HostWorkModel host)
    : inner_(std::move(inner)), host_(std::move(host)) {}

StepCost HostWorkCostModel::step_cost(const BatchShape& shape) const {
    StepCost c = inner_->step_cost(shape);
    c.host_ms = HostWorkModel::host_ms(c.total_ms(), host_.step_work(shape), shape.host_overlapped);
    return c;
}

std::vector<StepTerm> HostWorkCostModel::step_terms(const BatchShape& shape) const {
    std::vector<StepTerm> terms = inner_->step_terms(shape);
    const StepCost c = step_cost(shape);
    terms.push_back({"host (not hidden)", c.host_ms, "scheduler, input prep, launches, output (docs/HOST-WORK.md)"});
    return terms;
}

std::string HostWorkCostModel::describe() const {
    // The default (vLLM's capture sizes) adds nothing, so a run's cost-model name stays the GPU model's.
    return host_.graphs().enabled() ? inner_->describe() : inner_->describe() + ", enforce-eager";
}

}  // namespace servesim::engine
