// ProfileCostModel: step costs from a calibrated hardware profile (calibration/hardware_profile.h): each term
// (docs/ARCHITECTURE.md, "Step costs") is one fitted curve of the batch's natural variable, evaluated and summed.
// A term is added only when its variable is non-zero (no prefill in the step ⇒ no attn_prefill term). Batches are
// padded to vLLM's CUDA-graph sizes for the GEMM term, as in RooflineCostModel. A profile measured for tensor
// parallelism N holds one rank's compute; the step adds the all-reduces as RooflineCostModel does (TensorParallelComm).
#pragma once

#include "calibration/hardware_profile.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/cuda_graphs.h"
#include "sim/engine/tensor_parallel_comm.h"

namespace servesim::engine {

class ProfileCostModel final : public CostModel {
public:
    // decode_kv_bytes_scale: KV bytes per token of the run over those the profile was measured with (profiles are
    // measured with the model-dtype KV cache, so fp8 KV gives 0.5): decode attention reads every context token's
    // KV, so its time scales with those bytes.
    // comm: the engine's tensor parallelism; its size must equal the profile's tensor_parallel_size (ConfigError
    // naming `path` and both values otherwise).
    // attention: the model's attention layers by span (attention_layer_groups, roofline_cost_model.h); empty = all
    // full. The attention curves hold the time of every attention layer at one context (the sweep times one layer
    // and multiplies by the number of attention layers), so with local layers each group's share of the layers is
    // costed at its own keys: full layers at the whole context, sliding-window and chunked layers at the capped one.
    // graphs: the engine's CUDA-graph capture sizes (an int is vLLM's ladder up to it; none: --enforce-eager, no
    // padding). The profile's curves hold kernel time, so the padding is all this model can honour of the graphs;
    // launches are HostWorkCostModel's.
    ProfileCostModel(calibration::HardwareProfile profile, std::string path, CudaGraphSizes graphs = 512,
                     double decode_kv_bytes_scale = 1.0, TensorParallelComm comm = {},
                     AttentionLayerGroups attention = {});

    // The curves are resolved once here (pointers into profile_), so a copy would point into the original.
    ProfileCostModel(const ProfileCostModel&) = delete;
    ProfileCostModel& operator=(const ProfileCostModel&) = delete;

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] const calibration::HardwareProfile& profile() const { return profile_; }

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return attention_.local; }

private:
    // The profile's curve of that name, or nullptr for an optional curve it lacks (the reader enforces the
    // required ones).
    [[nodiscard]] const calibration::Curve* curve(const char* name) const;

    calibration::HardwareProfile profile_;
    std::string path_;
    CudaGraphSizes graphs_;
    double decode_kv_bytes_scale_;
    TensorParallelComm comm_;
    AttentionLayerGroups attention_;
    // Fractions of the attention layers: full, and per local span (set only when the model has local layers).
    double full_share_ = 1.0;
    std::array<double, kMaxLocalAttentionSpans> local_share_{};
    // Looked up once: step_cost runs for every simulated step.
    const calibration::Curve* gemm_;
    const calibration::Curve* lm_head_;
    const calibration::Curve* attn_prefill_;
    const calibration::Curve* attn_prefill_span_;
    const calibration::Curve* attn_decode_;
    const calibration::Curve* gdn_prefill_;
    const calibration::Curve* gdn_decode_;
    const calibration::Curve* overhead_;
};

}  // namespace servesim::engine
