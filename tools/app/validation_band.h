// The validated error band a result carries (docs/VALIDATION.md): how far this cost model's predictions were from
// real vLLM runs on this GPU, read from calibration/validation/bands.yaml (written by tools/validation/report.py
// from `servesim validate`, compiled into the binary). A result whose cost model or GPU has no band says so.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::app {

struct ErrorRange {
    double lo_pct = 0;
    double hi_pct = 0;
};

struct ValidationBand {
    std::string cost_model;  // the cost model's kind: roofline, measured
    std::string gpu;         // catalog name
    std::string source;      // which runs
    int num_runs = 0;
    ErrorRange ttft_mean, e2e_mean, itl_mean;
};

// Parses a bands file's text (`file` for errors); ConfigError naming the key.
[[nodiscard]] std::vector<ValidationBand> parse_validation_bands(std::string_view yaml, const std::string& file);

// The embedded bands (calibration/validation/bands.yaml).
[[nodiscard]] const std::vector<ValidationBand>& validation_bands();

// "roofline" for a roofline result, "measured" for the kernel-table model, the profile path otherwise: the kind of
// a result's cost_model_source.
[[nodiscard]] std::optional<ValidationBand> find_validation_band(std::string_view cost_model_kind,
                                                                 std::string_view gpu);

// The kind of a result's cost model: "roofline", "measured" or "profile".
struct ExperimentResult;
[[nodiscard]] std::string cost_model_kind(const ExperimentResult& r);

// The text a result prints: "TTFT −45…+7 %, E2E −11…+2 %, ITL −10…+2 % (means, 12 real runs on H100-SXM;
// docs/VALIDATION.md)" (the band's source is in bands.yaml and docs/VALIDATION.md), or "not validated: no real runs of
// <kind> on <gpu> (docs/VALIDATION.md)".
[[nodiscard]] std::string describe_validation(std::string_view cost_model_kind, std::string_view gpu);

}  // namespace servesim::app
