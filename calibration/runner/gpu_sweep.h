// The GPU sweep driver: times our kernels over each curve's natural variables for one model on the local GPU and
// fits the profile curves (calibration/curve_fit.h). Built only with CUDA; links servesim_kernels.
#pragma once

#include <iosfwd>
#include <string>

#include "calibration/hardware_profile.h"
#include "calibration/runner/calibrate.h"
#include "models/model_spec.h"

namespace servesim::calibration {

struct SweepOptions {
    bool quick = false;
    std::string log_dir;  // raw points as CSV, one file per curve (optional)
    int device = 0;
    int tensor_parallel_size = 1;  // time one rank's shapes (heads, intermediates, vocabulary ÷ N)
    double sustain_ms = 200;       // continuous load before each timed point (steady-state clocks); 0 = none
    std::string weight_dtype = "bf16";  // bf16 | fp8 | fp8-block: the linear layers as an fp8 W8A8 checkpoint runs them
};

// True (and the device name) when a CUDA device is usable.
[[nodiscard]] bool cuda_device_present(int device, std::string* name);

// Sweeps and fits every curve the model needs; `model_name` is recorded in the profile.
[[nodiscard]] HardwareProfile sweep_model(const models::ModelSpec& spec,
                                          const std::string& model_name,
                                          const SweepOptions& options,
                                          std::ostream& log);

// The GpuSweep servesim-calibrate hands to run_calibrate (calibrate.h): checks that options.device is a usable CUDA
// device (else exit status 2 with a message), resolves the model, sweeps it and writes the profile.
int run_gpu_sweep(const CalibrateOptions& options, std::ostream& out, std::ostream& log);

}  // namespace servesim::calibration
