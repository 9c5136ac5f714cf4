// The fit policy of calibration sweeps: which fit each profile curve gets from its sweep points, in one place, so
// the GPU sweep (calibration/runner/gpu_sweep.cpp) and a refit of committed points (`servesim calibrate --profile
// FILE --refit-points DIR`, no GPU needed) produce the same curves. Also the points files' format (the sweep's
// --log-dir: one CSV per curve, header = the curve's variables then `ms`). CUDA-free.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "calibration/hardware_profile.h"

namespace servesim::calibration {

// One curve's sweep points: rows[i] holds the variables' values of point i, ms[i] its median time.
struct SweepPoints {
    std::vector<std::string> variables;
    std::vector<std::vector<double>> rows;
    std::vector<double> ms;
};

// Reads a points CSV; throws ConfigError naming the file and line on a malformed row or a non-positive time.
[[nodiscard]] SweepPoints read_sweep_points(const std::string& path);
void write_sweep_points(const std::string& path, const SweepPoints& points);

// One variable: piecewise quadratic, each piece the minimax fit (Lawson), up to six pieces, stopping once every
// point is within 1 %. Several variables: c0 + Σ c_i·x_i with non-negative slopes, relative least squares.
[[nodiscard]] Curve fit_sweep_curve(const std::string& name, const SweepPoints& points);

// Prefill attention's work-span pair from points [work, max_context_tokens] (one chunk each): `attn_prefill` is
// the one-variable policy on the points without a cached prefix (work = context²/2); the cached points it
// under-predicts by more than 5 % are span-bound, and `attn_prefill_span` is the minimax line through them (absent
// when fewer than two). The cost is max(attn_prefill(work), attn_prefill_span(max_context_tokens)); `log` gets
// that max's worst relative residual over all points.
[[nodiscard]] std::vector<Curve> fit_attn_prefill_curves(const SweepPoints& points, std::ostream& log);

// Refits every curve of `profile` that has a points file `<points_dir>/<curve>.csv`, and recomputes the composed
// prediction of each composition case whose name follows the sweep's pattern (`<label>_prefill_T<tokens>`,
// `<label>_decode_B<batch>_C<context>`); other cases keep their recorded prediction. `log` lists what changed.
[[nodiscard]] HardwareProfile refit_profile(const HardwareProfile& profile,
                                            const std::string& points_dir,
                                            std::ostream& log);

}  // namespace servesim::calibration
