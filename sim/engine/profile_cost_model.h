// ProfileCostModel: step costs from a calibrated hardware profile (calibration/hardware_profile.h): each term of
// DESIGN §4 is one fitted curve of the batch's natural variable, evaluated and summed. A term is added only when
// its variable is non-zero (no prefill in the step ⇒ no attn_prefill term). Decode-only batches are padded to vLLM's
// CUDA-graph sizes for the GEMM term, as in RooflineCostModel. A profile measured for tensor parallelism N holds one
// rank's compute; the step adds the all-reduces as RooflineCostModel does (TensorParallelComm).
#pragma once

#include "calibration/hardware_profile.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/tensor_parallel_comm.h"

namespace servesim::engine {

class ProfileCostModel final : public CostModel {
public:
    // decode_kv_bytes_scale: KV bytes per token of the run over those the profile was measured with (profiles are
    // measured with the model-dtype KV cache, so fp8 KV gives 0.5): decode attention reads every context token's
    // KV, so its time scales with those bytes.
    // comm: the engine's tensor parallelism; its size must equal the profile's tensor_parallel_size (ConfigError
    // naming `path` and both values otherwise).
    ProfileCostModel(calibration::HardwareProfile profile, std::string path, int max_cudagraph_tokens = 512,
                     double decode_kv_bytes_scale = 1.0, TensorParallelComm comm = {});

    // The curves are resolved once here (pointers into profile_), so a copy would point into the original.
    ProfileCostModel(const ProfileCostModel&) = delete;
    ProfileCostModel& operator=(const ProfileCostModel&) = delete;

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] const calibration::HardwareProfile& profile() const { return profile_; }

private:
    // The profile's curve of that name, or nullptr for an optional curve it lacks (the reader enforces the
    // required ones).
    [[nodiscard]] const calibration::Curve* curve(const char* name) const;

    calibration::HardwareProfile profile_;
    std::string path_;
    int max_cudagraph_tokens_;
    double decode_kv_bytes_scale_;
    TensorParallelComm comm_;
    // Looked up once: step_cost runs for every simulated step.
    const calibration::Curve* gemm_;
    const calibration::Curve* lm_head_;
    const calibration::Curve* attn_prefill_;
    const calibration::Curve* attn_prefill_span_;
    const calibration::Curve* attn_decode_;
    const calibration::Curve* gdn_prefill_;
    const calibration::Curve* gdn_decode_;
    const calibration::Curve* snapshot_;
    const calibration::Curve* overhead_;
};

}  // namespace servesim::engine
