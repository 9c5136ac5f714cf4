// The synthetic conversations of vLLM's multi-turn benchmark (benchmarks/multi_turn/bench_dataset.py:
// parse_input_json_file, get_random_distribution, generate_conversations), as token counts: the number of messages
// per conversation, a common prefix shared by every conversation's first message, a per-conversation prefix (text
// nobody else has) on the first message, and user/assistant message lengths, each from the generator's
// distributions (constant, uniform, zipf, poisson, lognormal with mean/sigma or average/median_ratio). Same laws as
// the generator, our own draws (sim/core/rng.h), not numpy's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/rng.h"

namespace servesim::workloads {

// One `{distribution: NAME, ...}` of the generator's config.
class GeneratorDistribution {
  public:
    static GeneratorDistribution constant(double value);

    // Reads parent[key]; errors name the key.
    static GeneratorDistribution parse(const YamlMap& parent, std::string_view key);

    // `size` draws as Distribution.sample(size) returns them, as integers: uniform over integers (both bounds
    // inclusive) or truncated floats; lognormal rescaled so the `size` draws average `average` (when given), capped
    // at `max`, rounded; zipf and poisson capped at `max`.
    [[nodiscard]] std::vector<std::int64_t> sample(core::RngStream& rng, std::size_t size) const;

    [[nodiscard]] std::string describe() const;

  private:
    enum class Kind { kConstant, kUniform, kZipf, kPoisson, kLognormal };
    Kind kind_ = Kind::kConstant;
    double a_ = 0;               // constant: value; uniform: min; zipf, poisson: alpha; lognormal: mu
    double b_ = 0;               // uniform: max; lognormal: sigma
    bool integer_ = true;        // uniform: both bounds written as integers
    double average_ = 0;         // lognormal: > 0 when given as average/median_ratio
    std::optional<double> max_;  // cap (zipf, poisson, lognormal); `max: 0` means none, as in the generator
};

struct ConversationGeneratorConfig {
    std::int64_t num_conversations = 1;
    GeneratorDistribution num_turns = GeneratorDistribution::constant(2);  // messages, user + assistant
    GeneratorDistribution common_prefix_num_tokens = GeneratorDistribution::constant(0);
    GeneratorDistribution prefix_num_tokens = GeneratorDistribution::constant(0);
    GeneratorDistribution input_num_tokens = GeneratorDistribution::constant(1);
    GeneratorDistribution output_num_tokens = GeneratorDistribution::constant(1);
};

// Reads the generator's config: the tool's JSON file (filetype generate_conversations) or the same mapping inline.
[[nodiscard]] ConversationGeneratorConfig parse_conversation_generator(const YamlMap& m);

struct GeneratedConversation {
    std::int64_t common_prefix_tokens = 0;     // the first message starts with these (shared by all)
    std::vector<std::int64_t> message_tokens;  // user, assistant, user, …; an even number, at least 2
};

// The generator's fixed sentences around every user message ("<id> is a nice number... " and "Please rewrite the
// following text and add more content: "): our estimate of their token count, the floor of a user message.
inline constexpr std::int64_t kGeneratorFixedTextTokens = 17;

[[nodiscard]] std::vector<GeneratedConversation> generate_conversations(const ConversationGeneratorConfig& config,
                                                                        core::RngStream& rng);

}  // namespace servesim::workloads
