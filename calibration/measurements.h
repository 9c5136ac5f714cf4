// Fitting the profile's curve family to end-to-end timings a user measured on their own serving stack
// (`servesim-calibrate --from-measurements FILE`): prefill time vs prompt length, decode step time vs batch and
// context. CUDA-free. Also the composed predictions (whole prefill / decode step from a profile) that the
// composition check and the measurement fit share. File formats: calibration/README.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "calibration/hardware_profile.h"

namespace servesim::calibration {

struct PrefillMeasurement {
    double prompt_tokens = 0;  // new tokens computed in the step (one sequence)
    double cached_tokens = 0;  // prefix already in the KV cache
    double ms = 0;
};

struct DecodeMeasurement {
    double batch = 0;           // decoding sequences in the step
    double context_tokens = 0;  // context per sequence (mean)
    double ms = 0;
};

struct Measurements {
    std::string gpu;
    std::string model;
    std::string software;
    std::string date;
    bool hybrid = false;
    // The token budget per step of the stack that was measured (vLLM max_num_batched_tokens); 0 = every prompt ran
    // in one step. With chunked prefill a P-token prompt took k = ⌈P / budget⌉ steps, each paying the per-step
    // constant: the fit then models ms = k·p0 + p1·P + p2·work.
    std::int64_t max_num_batched_tokens = 0;
    // Whether the measured stack ran vLLM's async scheduling (key `async_scheduling`; unset = not stated): the host
    // work fit (fit_host_work) needs to know.
    std::optional<bool> async_scheduling;
    // Which point lists were derived from a stated assumption instead of timed (key `assumed`: prefill, decode; the
    // RTX 3090 seed-study files' decode points are bytes over an assumed bandwidth efficiency). Non-empty makes
    // the fitted profile's source "measurements+assumed", which every run's cost_model prints.
    std::vector<std::string> assumed;
    std::vector<PrefillMeasurement> prefill;
    std::vector<DecodeMeasurement> decode;
};

// YAML (servesim_measurements: 1, …) or CSV (header `kind,size,context_tokens,ms`; kind prefill|decode; size =
// prompt tokens or batch; context_tokens = cached prefix for prefill, per-sequence context for decode). Errors name
// the file and the row or key.
[[nodiscard]] Measurements read_measurements(const std::string& path);

// Fits prefill ms = p0 + p1·tokens + p2·work and decode ms = d0 + d1·batch + d2·Σcontext (slopes ≥ 0), then maps
// them onto the curves: gemm = [d0 + d1·tokens] up to the largest batch, then [p0 + p1·tokens]; attn_prefill =
// p2·work; attn_decode = d2·context_tokens; lm_head, overhead (and gdn_* for hybrids) zero, their cost being inside
// the end-to-end terms. Each curve records the statistics of the end-to-end fit it came from. composition_check
// holds every measured point against the profile's composed prediction. Needs ≥ 3 distinct prefill and ≥ 3
// decode points (ConfigError otherwise).
[[nodiscard]] HardwareProfile fit_measurements(const Measurements& m, const std::string& file_for_errors);

// The engine-core host work per step that measured decode step times hold beyond a model's prediction
// (sim/engine/host_work.h, docs/HOST-WORK.md), from the residuals ms − predicted_ms(point):
// - measured without async scheduling (m.async_scheduling false): every host term adds to the step, and the
//   residuals over a prediction that has every term but these two are fitted as step_us + per_request_us × batch by
//   least squares with both ≥ 0 (≥ 3 decode points at ≥ 2 batch sizes);
// - measured with it (true): the GPU hides the host's work up to the part that never overlaps, so the residuals over
//   a prediction without that part give exposed_us, their mean (≥ 0; ≥ 3 decode points).
// ConfigError naming the file when async_scheduling is not stated or the points are too few.
struct HostWorkFit {
    bool async_scheduling = false;  // which of the two fits ran
    double step_us = 0;             // async_scheduling false
    double per_request_us = 0;      // async_scheduling false
    double exposed_us = 0;          // async_scheduling true
    int num_points = 0;
    double rms_residual_ms = 0;  // of the fit against the residuals
};
[[nodiscard]] HostWorkFit fit_host_work(const Measurements& m,
                                        const std::function<double(const DecodeMeasurement&)>& predicted_ms,
                                        const std::string& file_for_errors);

// Composed predictions, the same sums the simulator's cost model makes for these batch shapes.
// Prefill of one sequence: gemm(T) + attn_prefill(T·(P + T/2)) + lm_head(1) + overhead(1) [+ gdn_prefill(T, ⌈T/64⌉)].
[[nodiscard]] double predict_prefill_ms(const HardwareProfile& p, double prompt_tokens, double cached_tokens = 0);

// Decode step of `batch` sequences with `context_tokens` each: gemm(B) + attn_decode(B·C, B) + lm_head(B) +
// overhead(B) [+ gdn_decode(B)].
[[nodiscard]] double predict_decode_ms(const HardwareProfile& p, double batch, double context_tokens);

// Reads measured whole-model timings (the CSV format above) and appends composition_check entries
// ("<label>_prefill_T<tokens>[_P<cached>]", "<label>_decode_B<batch>_C<context>"; no prefix when label is empty)
// with the profile's predictions.
void add_composition_from_file(HardwareProfile& profile,
                               const std::string& measured_path,
                               const std::string& label = "");

}  // namespace servesim::calibration
