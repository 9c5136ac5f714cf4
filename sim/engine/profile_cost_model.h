// ProfileCostModel: step costs from a calibrated hardware profile (calibration/hardware_profile.h): each term of
// DESIGN §4 is one fitted curve of the batch's natural variable, evaluated and summed. A term is added only when
// its variable is non-zero (no prefill in the step ⇒ no attn_prefill term). Decode-only batches are padded to vLLM's
// CUDA-graph sizes for the GEMM term, as in RooflineCostModel.
#pragma once

#include "calibration/hardware_profile.h"
#include "sim/engine/cost_model.h"

namespace servesim::engine {

class ProfileCostModel final : public CostModel {
public:
    ProfileCostModel(calibration::HardwareProfile profile, std::string path, int max_cudagraph_tokens = 512);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] const calibration::HardwareProfile& profile() const { return profile_; }

private:
    [[nodiscard]] double eval(const char* name, std::initializer_list<double> x) const;

    calibration::HardwareProfile profile_;
    std::string path_;
    int max_cudagraph_tokens_;
};

}  // namespace servesim::engine
