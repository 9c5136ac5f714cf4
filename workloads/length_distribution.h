// Token-length distributions read from a workload's YAML: a scalar (fixed) or {dist: NAME, ...}. Samples are rounded
// to whole tokens and clamped to [min, max]; the floor is 0 for prompt parts and 1 for answers (an answer has at least
// one token). Draws come from the caller's RngStream, so each tenant's lengths are independent of the others'.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
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

    // The shortest length a draw can give (a fixed length, or the clamp's min).
    [[nodiscard]] std::int64_t min_tokens() const { return min_tokens_; }

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

// `shared_prefix_tokens` (a whole number of tokens, 0 when absent): 0 to kMaxTokenCount (common/token_range.h).
[[nodiscard]] std::int64_t parse_shared_prefix_tokens(const YamlMap& m);

// Refuses a workload whose shortest prompt is empty, naming `key` and the parts (key, shortest length) it adds up.
// vLLM's frontend refuses an empty prompt (v1 Processor._validate_model_input: "The decoder prompt cannot be
// empty"); a workload that can draw one is a mistake in the file, so it is stopped before the run rather than
// counted among the rejections.
void check_prompt_not_empty(const YamlMap& m, std::string_view key,
                            std::initializer_list<std::pair<std::string_view, std::int64_t>> parts);

// The registry of distribution names (for error messages and `servesim list`).
struct LengthDistEntry {
    std::string_view name;
    std::string_view description;
};

[[nodiscard]] const std::vector<LengthDistEntry>& length_distributions();

}  // namespace servesim::workloads
