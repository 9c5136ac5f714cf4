// Token-length distributions read from a workload's YAML: a scalar (fixed) or {dist: NAME, ...}. Samples are rounded
// to whole tokens and clamped to [min, max]; the floor is 0 for prompt parts and 1 for answers (an answer has at least
// one token). Draws come from the caller's RngStream, so each tenant's lengths are independent of the others'.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/rng.h"

namespace servesim::workloads {

enum class LengthDist { kFixed, kUniform, kNormal, kLognormal, kExponential };

class LengthDistribution {
  public:
    // A fixed length.
    static LengthDistribution fixed(std::int64_t tokens);

    // Reads parent[key]: `2000` or `{dist: uniform, min: 50, max: 100}`. `floor_tokens` is the smallest length the
    // caller accepts (0 or 1); bounds below it are errors naming the key.
    static LengthDistribution parse(const YamlMap& parent, std::string_view key, std::int64_t floor_tokens);

    [[nodiscard]] std::int64_t sample(core::RngStream& rng) const;

    // Mean of the unclamped distribution (for descriptions and rate arithmetic).
    [[nodiscard]] double mean_tokens() const { return mean_; }

    [[nodiscard]] std::string describe() const;

    [[nodiscard]] LengthDist kind() const { return kind_; }

  private:
    LengthDist kind_ = LengthDist::kFixed;
    double a_ = 0;  // fixed: value; uniform: min; normal: mean; lognormal: mu; exponential: mean
    double b_ = 0;  // uniform: max; normal: std; lognormal: sigma
    double mean_ = 0;
    std::int64_t min_tokens_ = 0;
    std::int64_t max_tokens_ = 0;
};

// The registry of distribution names (for error messages and `servesim list`).
struct LengthDistEntry {
    std::string_view name;
    std::string_view description;
};

[[nodiscard]] const std::vector<LengthDistEntry>& length_distributions();

}  // namespace servesim::workloads
