// Host work per engine step: the CPU time vLLM's engine-core process spends around each forward, and how much of it
// the GPU hides. One step of vLLM v1 (vllm/v1/engine/core.py EngineCore.step) is Scheduler.schedule() →
// executor.execute_model (GPUModelRunner.execute_model: _update_states adds new requests to the persistent
// InputBatch and drops finished ones, _prepare_inputs builds positions / token ids / slot mapping on the CPU, then
// the forward is launched; sample_tokens runs the sampler) → Scheduler.update_from_output (appends the sampled
// tokens, checks stops, frees finished requests' blocks) and the EngineCoreOutputs sent to the front end. Without
// async scheduling these run one after another with the GPU: the step lasts host work + GPU time. With async
// scheduling (--async-scheduling, EngineCore.step_with_batch_queue, two batches in flight) the CPU schedules and
// prepares step t+1 and processes step t's output while the GPU runs step t, so a step lasts max(GPU, host work) plus
// the part that never overlaps (the sampled-token copy back to the host and the wait on it). Kernel launches are
// host work too: a CUDA-graph replay is one launch, an eager forward one launch per kernel, and the GPU cannot run
// ahead of its launches. What this leaves to the request path (detokenisation, streaming in the API server) is not
// here. The model, its constants and their sources: docs/HOST-WORK.md.
//
// HostWorkModel is a value type any cost model can use; HostWorkCostModel wraps a CostModel (the GPU's time) and adds
// the host time the GPU does not hide as StepCost::host_ms.
#pragma once

#include <memory>
#include <string>

#include "models/model_spec.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/cuda_graphs.h"

namespace servesim::engine {

// Every figure in µs. Sources in docs/HOST-WORK.md: per_prefill_token_us is measured, launch_us a published figure,
// the engine-core figures priors (step_us, per_request_us and exposed_us are the engine keys host_step_us,
// host_per_request_us, host_exposed_us, which `servesim calibrate --from-measurements FILE --host-work-gpu GPU` fits
// from measured step times).
struct HostWorkParams {
    double step_us = 300;                // fixed per step: schedule(), execute_model's dispatch, update_from_output
    double per_request_us = 5;           // per scheduled request: its scheduler entry, input row, output entry
    double per_new_request_us = 30;      // per request entering the batch: InputBatch.add_request, block-table row
    double per_finished_request_us = 15; // per finished request: free its blocks, InputBatch removal, final output
    double per_prefill_token_us = 0.08;  // per prompt token computed: block hashing and input preparation
    double exposed_us = 30;              // per step, never overlapped: sampled-token copy to the host and its wait
    // Kernel launches (host side). The caller fills these from calibration/kernels/*.yaml `ceilings: launch_us /
    // graph_launch_us` when the GPU's table has them; the defaults are the published figures of docs/HOST-WORK.md.
    double launch_us = 8;                // one eager kernel launch through PyTorch
    double graph_launch_us = 10;         // one CUDA-graph replay (vLLM's CUDAGraphWrapper + cudaGraphLaunch)
};

// A step's host work, in µs: the CPU work other than launches, the launches, and the part that never overlaps.
struct HostStepWork {
    double cpu_us = 0;
    double launch_us = 0;
    double exposed_us = 0;
};

// Kernels one forward of `model` runs on the GPU (every layer's 10, 14 with a fused MoE; the embedding, final norm,
// lm_head and sampler's 8), without the all-reduces (the collectives' cost model times those): the count the
// roofline's per-kernel GPU cost multiplies (RooflineParams::kernel_gap_us, docs/COST-MODEL.md).
[[nodiscard]] int compute_kernels_per_forward(const models::ModelSpec& model);

class HostWorkModel {
public:
    // `model` gives the layers whose kernels an eager forward launches; tensor_parallel_size > 1 adds each layer's
    // two all-reduces; `graphs` the capture sizes (none: --enforce-eager). hashes_prompt_blocks: prefix caching (or a
    // KV connector) is on, so every prompt block is hashed (the per-prefill-token term); off, only half of that term
    // (input preparation) is charged.
    HostWorkModel(const HostWorkParams& params, const models::ModelSpec& model, int tensor_parallel_size,
                  CudaGraphSizes graphs, bool hashes_prompt_blocks = true);

    [[nodiscard]] HostStepWork step_work(const BatchShape& shape) const;

    // Kernels one eager forward launches (every layer's, plus the step's own: embedding, final norm, lm_head and
    // the sampler), and the kernels a piecewise-graph forward still launches eagerly (attention's, the step's own).
    [[nodiscard]] int eager_kernels_per_step() const { return eager_kernels_per_step_; }
    [[nodiscard]] int piecewise_eager_kernels_per_step() const { return piecewise_eager_kernels_; }
    [[nodiscard]] int piecewise_graphs_per_step() const { return piecewise_graphs_; }

    [[nodiscard]] const HostWorkParams& params() const { return params_; }
    [[nodiscard]] const CudaGraphSizes& graphs() const { return graphs_; }

    // The step's duration in ms from its GPU time and host work: overlapped (async scheduling, the step scheduled
    // while the previous one ran): max(GPU, CPU + launches) + exposed; otherwise CPU + max(GPU, launches) +
    // exposed. Returns the host share, duration − gpu_ms (≥ 0).
    [[nodiscard]] static double host_ms(double gpu_ms, const HostStepWork& work, bool overlapped);

private:
    HostWorkParams params_;
    CudaGraphSizes graphs_;
    double prefill_token_us_ = 0;
    int eager_kernels_per_step_ = 0;
    int piecewise_eager_kernels_ = 0;
    int piecewise_graphs_ = 0;
};

// Wraps a cost model (the GPU's time of a step) and adds the host work the GPU does not hide as StepCost::host_ms.
class HostWorkCostModel final : public CostModel {
public:
    HostWorkCostModel(std::unique_ptr<CostModel> inner, HostWorkModel host);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return inner_->local_attention_spans(); }
    // The inner model's terms (a measured model's finer ones too) and the host work the GPU does not hide.
    [[nodiscard]] std::vector<StepTerm> step_terms(const BatchShape& shape) const override;

    [[nodiscard]] const HostWorkModel& host() const { return host_; }

private:
    std::unique_ptr<CostModel> inner_;
    HostWorkModel host_;
};

}  // namespace servesim::engine
