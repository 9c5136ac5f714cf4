// `servesim calibrate --from-measurements FILE --host-work-gpu GPU` (tools/app/host_work_fit.*): decode step times
// made by the host-work model itself with known constants are fitted back to them on the roofline, without and with
// async scheduling.
#include <cmath>
#include <memory>

#include "calibration/gpu_spec.h"
#include "models/model_registry.h"
#include "sim/engine/host_work.h"
#include "tests/catch.h"
#include "tools/app/host_work_fit.h"

namespace servesim::app {
namespace {

TEST_CASE("Host work fit: step times made with 250 µs per step and 7 µs per request are fitted back",
          "[tools][host_work]") {
    // Qwen3-4B on an H100, no async scheduling: each "measured" decode step is the roofline's GPU time plus the host
    // model's terms with step_us 250 and per_request_us 7 (the FULL graph's launches hidden by the GPU), so the
    // residuals over the fit's own prediction (the same with both at 0) are 0.250 + 0.007·B exactly.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    engine::RooflineParams params = roofline_params(calibration::find_gpu("H100"));
    params.max_cudagraph_tokens = 512;
    engine::HostWorkParams truth;
    truth.step_us = 250;
    truth.per_request_us = 7;
    const engine::HostWorkCostModel cost(std::make_unique<engine::RooflineCostModel>(qwen, qwen.dtype, params),
                                         engine::HostWorkModel(truth, qwen, 1, engine::CudaGraphSizes(512)));
    calibration::Measurements m;
    m.model = "Qwen3-4B";
    m.async_scheduling = false;
    for (const double batch : {1.0, 8.0, 32.0, 128.0}) {
        engine::BatchShape s;
        s.num_tokens = s.num_decode_seqs = s.num_seqs = s.num_sampled_seqs = static_cast<std::int64_t>(batch);
        s.decode_context_tokens = static_cast<std::int64_t>(batch * 2000);
        m.decode.push_back({batch, 2000, cost.step_cost(s).total_ms()});
    }
    const calibration::HostWorkFit f = fit_host_work_on_roofline(m, "H100", "m.yaml");
    CHECK(std::abs(f.step_us - 250.0) < 1e-6);
    CHECK(std::abs(f.per_request_us - 7.0) < 1e-6);
    CHECK(f.rms_residual_ms < 1e-9);
}

TEST_CASE("Host work fit: async-scheduling step times made with 80 µs exposed are fitted back",
          "[tools][host_work]") {
    // With async scheduling each step is max(GPU, host cycle) + exposed; on an H100 the Qwen3-4B decode's GPU time
    // (≈ 3 ms) outlasts the priors' host cycle at these batches, so the residuals over the prediction with exposed 0
    // are the 0.080 ms exactly.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    engine::RooflineParams params = roofline_params(calibration::find_gpu("H100"));
    params.max_cudagraph_tokens = 512;
    engine::HostWorkParams truth;
    truth.exposed_us = 80;
    const engine::HostWorkCostModel cost(std::make_unique<engine::RooflineCostModel>(qwen, qwen.dtype, params),
                                         engine::HostWorkModel(truth, qwen, 1, engine::CudaGraphSizes(512)));
    calibration::Measurements m;
    m.model = "Qwen3-4B";
    m.async_scheduling = true;
    for (const double batch : {1.0, 8.0, 32.0, 128.0}) {
        engine::BatchShape s;
        s.num_tokens = s.num_decode_seqs = s.num_seqs = s.num_sampled_seqs = static_cast<std::int64_t>(batch);
        s.decode_context_tokens = static_cast<std::int64_t>(batch * 2000);
        s.host_overlapped = true;
        const engine::StepCost c = cost.step_cost(s);
        REQUIRE(std::abs(c.host_ms - 0.080) < 1e-12);  // the host cycle is hidden: only the exposed part shows
        m.decode.push_back({batch, 2000, c.total_ms()});
    }
    const calibration::HostWorkFit f = fit_host_work_on_roofline(m, "H100", "m.yaml");
    CHECK(f.async_scheduling);
    CHECK(std::abs(f.exposed_us - 80.0) < 1e-6);
    CHECK(f.rms_residual_ms < 1e-9);
}

}  // namespace
}  // namespace servesim::app
