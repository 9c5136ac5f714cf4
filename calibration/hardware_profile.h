// HardwareProfile: the fitted step-cost curves of one model on one GPU, as written by calibration and read by the
// simulator's cost model (docs/ARCHITECTURE.md, "Step costs" and "Formats"). Owns the YAML format, its strict reader
// and its writer; not the fits (calibration/curve_fit.h) nor the sweeps. The format is documented with an example in
// calibration/README.md. All curve values are milliseconds for the whole model (all layers of that kind) and one
// forward step of a batch.
#pragma once

#include <iosfwd>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace servesim::calibration {

// One piece of a curve. One variable: value = c0 + c1·x + c2·x² (exactly three coefficients) on [x_min, x_max].
// Several variables: value = c0 + Σ c_i·x_i (1 + number of variables coefficients); x_min/x_max then record the
// measured range of the first variable, for information only.
struct CurvePiece {
    double x_min = 0;
    double x_max = 0;
    std::vector<double> coefficients;
};

// A fitted cost curve. evaluate() rules for one variable (pieces sorted by x_min, contiguous, sharing knees):
//  - x inside a piece's [x_min, x_max]: that piece's quadratic (the first matching piece at a shared knee);
//  - x below the first piece: clamped to the first piece's x_min (costs do not shrink below the smallest size
//    measured);
//  - x above the last piece: linear extrapolation along the tangent at x_max, with the slope floored at zero;
//  - the result is floored at zero.
// Several variables: the single linear piece, evaluated anywhere, floored at zero. The cost model adds a term only
// when its variable is non-zero (no prefill in the step ⇒ no attn_prefill term).
struct Curve {
    std::string name;
    std::vector<std::string> variables;
    std::vector<CurvePiece> pieces;
    double r2 = 0;                // coefficient of determination of the fit over its points
    double max_rel_residual = 0;  // max over points of |fit − measured| / measured
    int num_points = 0;

    [[nodiscard]] double evaluate(std::span<const double> x) const;

    [[nodiscard]] double evaluate(double x) const { return evaluate(std::span<const double>(&x, 1)); }
};

// One whole-layer or whole-forward timing compared with the profile's composed prediction.
struct CompositionCase {
    std::string case_name;  // YAML key `case`, e.g. "prefill_L4096" or "decode_B64_C2048"
    double measured_ms = 0;
    double predicted_ms = 0;
};

struct HardwareProfile {
    std::string gpu;       // "NVIDIA H200"
    std::string date;      // ISO date of the measurement
    std::string software;  // driver / CUDA / cuBLAS versions, or the serving stack for `measurements`
    std::string model;     // model preset name the curves were measured for
    std::string source;    // calibrated | measurements | measurements+assumed (some points assumed) | roofline
    bool hybrid = false;   // the model has GDN layers: gdn_prefill and gdn_decode are required
    // The curves are one rank's times under this tensor parallelism (shapes ÷ N); YAML key optional, default 1,
    // written only when > 1. The simulator adds the all-reduces itself (engine::allreduce_ms).
    int tensor_parallel_size = 1;
    // The linear layers' weights the gemm curve was measured with: bf16, fp8 (W8A8: e4m3 weights, per-token
    // dynamic activation quantization) or fp8-block (e4m3 weights with 128×128 tile scales, activations quantized
    // per token and 128-column group). YAML key optional, default bf16, written only when not bf16.
    std::string weight_dtype = "bf16";
    std::string notes;     // free text (optional)
    std::map<std::string, Curve> curves;
    std::vector<CompositionCase> composition_check;
};

// The curve names the cost model knows, with their variables in order.
struct CurveKind {
    const char* name;
    std::vector<std::string> variables;
    bool required;         // required in every profile
    bool required_hybrid;  // required when the profile is for a hybrid model
    const char* meaning;
    std::size_t min_variables = 0;  // > 0: a curve may use only the first min_variables… of `variables`
};

[[nodiscard]] const std::vector<CurveKind>& curve_kinds();

// The attn_prefill term, a work-span bound: max(attn_prefill(work), attn_prefill_span(max_context_tokens)) when the
// profile has the span curve, else attn_prefill(work). work = Σ chunk·(cached + chunk/2) bounds the time when the
// chunks' query tiles fill the GPU; when they cannot (a short chunk on a long cached prefix: a 256-token chunk is
// two 128-row tiles per head), the time is the span: one tile streaming all cached + chunk keys of the longest
// chunk (H200, Llama-3.1-8B: 256 or 512 tokens on 16k cached both take ~25.5 ms, 3x a 2048-token chunk on 1k of
// the same work).
[[nodiscard]] double evaluate_attn_prefill(const HardwareProfile& profile, double work, double max_context_tokens);
// The same with the curves at hand (span_curve nullptr: the profile has none).
[[nodiscard]] double evaluate_attn_prefill(const Curve& work_curve,
                                           const Curve* span_curve,
                                           double work,
                                           double max_context_tokens);

// The attn_decode term for `sequences` decoding sequences holding `context_tokens` tokens of context in all: the
// curve is c0 + c1·context + c2·sequences, plus c3·√(context / sequences) when it has that third variable (split-K
// decode leaves the GPU part-idle when few sequences hold long contexts; the calibrated H200 sweeps carry it,
// profiles fitted from measurements do not).
[[nodiscard]] double evaluate_attn_decode(const Curve& curve, double context_tokens, double sequences);

// Reads and validates a profile. Any missing required curve, unknown curve or variable name, wrong coefficient
// count, empty piece list, non-finite number, x_min > x_max or overlapping pieces throws ConfigError naming
// `path` (or `name_for_errors`) and the curve.
[[nodiscard]] HardwareProfile read_profile(const std::string& path);
[[nodiscard]] HardwareProfile load_profile_string(const std::string& text, const std::string& name_for_errors);

// Validates an in-memory profile with the same rules (used before writing).
void validate_profile(const HardwareProfile& profile, const std::string& name_for_errors);

// Checks that `profile` can cost `spec`: gdn_prefill and gdn_decode present when the model has Gated DeltaNet layers;
// a model with Mamba2 layers is refused (no curves for them yet). Throws ConfigError naming `file` and the curve. The
// model name is not compared: a profile may be reused for a same-shaped model on purpose.
void check_profile_covers_model(const HardwareProfile& profile, const models::ModelSpec& spec, const std::string& file);

// YAML via yaml-cpp's Emitter; numbers written with enough digits to round-trip.
void write_profile(const HardwareProfile& profile, std::ostream& out);
void write_profile_file(const HardwareProfile& profile, const std::string& path);

}  // namespace servesim::calibration
