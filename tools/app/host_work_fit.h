// `servesim calibrate --from-measurements FILE --host-work-gpu GPU`: the engine-core host work per step
// (sim/engine/host_work.h) fitted from measured decode step times, as what they hold beyond the roofline's GPU time
// and the host model's other terms (calibration::fit_host_work; docs/HOST-WORK.md): host_step_us and
// host_per_request_us from steps measured without async scheduling, host_exposed_us from steps measured with it. Also the roofline's parameters from a GPU file, shared with
// experiment_prepare.cpp.
#pragma once

#include <iosfwd>
#include <string>

#include "calibration/gpu_spec.h"
#include "calibration/measurements.h"
#include "calibration/runner/calibrate.h"
#include "sim/engine/roofline_cost_model.h"

namespace servesim::app {

// The roofline's datasheet figures and efficiencies for `gpu` (one rank; the caller sets parallelism and graphs).
[[nodiscard]] engine::RooflineParams roofline_params(const calibration::GpuSpec& gpu);

// The fit for measurements `m` of model m.model on `gpu`: each decode point predicted as a decode step of `batch`
// sequences at `context_tokens` each (overlapped when m says async scheduling) on the roofline with vLLM's default
// CUDA graphs (up to 512), with every host term but the fitted ones.
[[nodiscard]] calibration::HostWorkFit fit_host_work_on_roofline(const calibration::Measurements& m,
                                                                 const std::string& gpu,
                                                                 const std::string& file_for_errors);

// The command: prints the fitted engine keys as a scenario's `engine:` lines (or writes them to options.out_path).
int run_host_work_fit(const calibration::CalibrateOptions& options, std::ostream& out, std::ostream& log);

}  // namespace servesim::app
