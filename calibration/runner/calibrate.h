// Entry point of `servesim-calibrate` and of the CLI's `servesim calibrate`: parses nothing, runs one calibration
// described by CalibrateOptions. --from-measurements, --add-composition and --refit-points run here, without a GPU;
// the GPU sweep is the caller's: servesim-calibrate passes run_gpu_sweep (calibration/runner/gpu_sweep.h, CUDA
// builds only), the CLI passes exec_servesim_calibrate (exec_calibrate.h), so the library and `servesim` link no
// CUDA library. Library: servesim_calibrate_runner.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::calibration {

// `servesim calibrate --help`, shared by the full CLI (tools/servesim.cpp) and the calibration-only build's front end
// (calibration/runner/front.cpp).
inline constexpr const char* kCalibrateUsage =
    "usage: servesim calibrate --model M [--out FILE] [--quick] [--log-dir DIR] [--tensor-parallel-size N]\n"
    "                          [--sustain-ms MS] [--device N] [--weight-dtype bf16|fp8|fp8-block]\n"
    "       servesim calibrate --from-measurements FILE [--model M] [--out FILE]\n"
    "       servesim calibrate --from-measurements RUN... --fit request-path [--out FILE]   (runs as for validate)\n"
    "       servesim calibrate --from-measurements FILE --host-work-gpu GPU [--model M] [--out FILE]\n"
    "                     (host_step_us, host_per_request_us from steps measured without async scheduling,\n"
    "                     host_exposed_us from steps measured with it; docs/HOST-WORK.md)\n"
    "       servesim calibrate --profile FILE --add-composition FILE [--label L] [--out FILE]\n"
    "       servesim calibrate --profile FILE --refit-points DIR [--out FILE]\n"
    "fits a hardware profile (a cost_model for scenarios); see calibration/README.md. With --model it first says how\n"
    "long the GPU sweep will take (its measurement count times each one's sustained load and timed replays).\n";

struct CalibrateOptions {
    std::string model;              // preset name or model file (models/model_registry.h resolve_model)
    std::string out_path;           // profile YAML; empty → stdout
    bool quick = false;             // coarser sweep grids (about a third of the points)
    std::string from_measurements;  // fit end-to-end timings instead of sweeping kernels (CUDA-free)
    std::string profile_in;         // with composition_path: an existing profile to add composition entries to
    std::string composition_path;   // measured whole-model timings (measurements CSV) → composition_check
    std::string composition_label;  // prefix of those cases' names ("torch" → "torch_prefill_T512")
    std::string log_dir;            // raw sweep points as CSV files (optional)
    int device = 0;                 // CUDA device index
    int tensor_parallel_size = 1;   // sweep one rank's shapes of this TP degree; recorded in the profile
    double sustain_ms = 200;        // continuous load before each timed point (gpu_sweep.h); 0 = burst timing
    std::string refit_points;       // with profile_in: refit its curves from this points directory (no GPU)
    // With from_measurements: fit the engine's host work per step (engine keys host_step_us, host_per_request_us)
    // against the roofline of this GPU instead of a profile; run by `servesim calibrate` (tools/app/host_work_fit.h).
    std::string host_work_gpu;
    std::string weight_dtype = "bf16";  // GPU sweep: bf16, fp8 (W8A8 linear layers, kernels/gemm_fp8.cu) or fp8-block (128×128 weight scales)
};

struct HardwareProfile;

// Writes a calibrated profile to options.out_path (logging the path), or to `out` when it is empty.
void emit_profile(const HardwareProfile& profile, const CalibrateOptions& options, std::ostream& out,
                  std::ostream& log);

// Runs the GPU sweep of `options.model` and writes the profile; returns a process exit status.
using GpuSweep = std::function<int(const CalibrateOptions& options, std::ostream& out, std::ostream& log)>;

// True when the options ask for the GPU sweep (none of --from-measurements, --add-composition, --refit-points).
[[nodiscard]] bool needs_gpu_sweep(const CalibrateOptions& options);

// Runs the calibration; returns a process exit status (0 ok, 1 bad input, 2 no GPU / no sweep). Progress and
// diagnostics go to `log`, the profile to out_path (or `out` when empty). ConfigErrors are caught and reported.
// A GPU sweep is handed to `gpu_sweep` after --model is checked; without one it reports that no GPU can be used.
// Before the sweep, with `announce`, says how long it will take (announce_sweep); a caller that hands the sweep to
// another program which announces it itself (servesim → servesim-calibrate) passes false.
int run_calibrate(const CalibrateOptions& options, std::ostream& out, std::ostream& log,
                  const GpuSweep& gpu_sweep = {}, bool announce = true);

// Logs the sweep's estimated duration for options.model (sweep_plan.h estimate_sweep): measurements, seconds each and
// where that figure comes from. ConfigError for an unknown model.
void announce_sweep(const CalibrateOptions& options, std::ostream& log);

// Parses servesim-calibrate's command line (--model M --out FILE --quick --from-measurements FILE
// --profile FILE --add-composition FILE [--label L] --profile FILE --refit-points DIR --log-dir DIR --device N
// --tensor-parallel-size N --sustain-ms MS --weight-dtype bf16|fp8|fp8-block); returns
// false with a message on bad usage.
[[nodiscard]] bool parse_calibrate_args(const std::vector<std::string>& args,
                                        CalibrateOptions& options,
                                        std::string& message);

}  // namespace servesim::calibration
