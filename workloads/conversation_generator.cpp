// The multi-turn benchmark's conversation generator: reading its distributions and drawing the conversations'
// lengths in the generator's order (turn counts for all, per-conversation prefixes for all, the common prefix once,
// then per conversation its user and assistant lengths). Zipf draws use Devroye's rejection method, as numpy's
// legacy zipf does; poisson counts unit-rate exponential arrivals below alpha (exact for any alpha).
#include "workloads/conversation_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace servesim::workloads {

namespace {

bool written_as_integer(const YamlMap& m, std::string_view key) {
    const YAML::Node n = m.node(key);
    if (!n.IsScalar()) {
        return false;
    }
    const std::string& s = n.Scalar();
    return !s.empty() && s.find_first_not_of("+-0123456789") == std::string::npos;
}

std::int64_t zipf(core::RngStream& rng, double alpha) {
    const double am1 = alpha - 1.0;
    const double b = std::pow(2.0, am1);
    while (true) {
        const double u = 1.0 - rng.uniform01();  // (0, 1]
        const double v = rng.uniform01();
        const double x = std::floor(std::pow(u, -1.0 / am1));
        if (x < 1.0 || x > 9.0e18) {
            continue;
        }
        const double t = std::pow(1.0 + 1.0 / x, am1);
        if (v * x * (t - 1.0) / (b - 1.0) <= t / b) {
            return static_cast<std::int64_t>(x);
        }
    }
}

std::int64_t poisson(core::RngStream& rng, double alpha) {
    std::int64_t k = 0;
    double t = rng.exponential(1.0);
    while (t <= alpha) {
        ++k;
        t += rng.exponential(1.0);
    }
    return k;
}

}  // namespace

GeneratorDistribution GeneratorDistribution::constant(double value) {
    GeneratorDistribution d;
    d.kind_ = Kind::kConstant;
    d.a_ = value;
    return d;
}

GeneratorDistribution GeneratorDistribution::parse(const YamlMap& parent, std::string_view key) {
    const YamlMap m = parent.map(key);
    const auto name = m.get<std::string>("distribution");
    GeneratorDistribution d;
    const auto read_max = [&] {
        if (m.has("max")) {
            const double v = m.get<double>("max");
            if (v < 0) {
                m.fail("max", fmt::format("must be non-negative, got {}", v));
            }
            if (v > 0) {
                d.max_ = v;  // the generator treats max 0 as no cap (`if self.max_val:`)
            }
        }
    };
    if (name == "constant") {
        m.allow_only({"distribution", "value"});
        d.kind_ = Kind::kConstant;
        d.a_ = m.get<double>("value");
        if (d.a_ < 0) {
            m.fail("value", fmt::format("must be non-negative, got {}", d.a_));
        }
    } else if (name == "uniform") {
        m.allow_only({"distribution", "min", "max"});
        d.kind_ = Kind::kUniform;
        d.a_ = m.get<double>("min");
        d.b_ = m.get<double>("max");
        if (!(d.a_ > 0) || d.a_ > d.b_) {
            m.fail("min",
                   fmt::format("needs 0 < min <= max, as the generator asserts; got min {} and max {}", d.a_, d.b_));
        }
        d.integer_ = written_as_integer(m, "min") && written_as_integer(m, "max");
    } else if (name == "zipf") {
        m.allow_only({"distribution", "alpha", "max"});
        d.kind_ = Kind::kZipf;
        d.a_ = m.get<double>("alpha");
        if (!(d.a_ > 1)) {
            m.fail("alpha", fmt::format("must be greater than 1 (numpy's zipf), got {}", d.a_));
        }
        read_max();
    } else if (name == "poisson") {
        m.allow_only({"distribution", "alpha", "max"});
        d.kind_ = Kind::kPoisson;
        d.a_ = m.get<double>("alpha");
        if (!(d.a_ >= 0) || d.a_ > 1e7) {
            m.fail("alpha", fmt::format("must lie in [0, 1e7], got {}", d.a_));
        }
        read_max();
    } else if (name == "lognormal") {
        m.allow_only({"distribution", "average", "median_ratio", "mean", "sigma", "max"});
        d.kind_ = Kind::kLognormal;
        read_max();
        if (m.has("average")) {
            if (m.has("mean") || m.has("sigma")) {
                m.fail("average", "give either average (and median_ratio) or mean and sigma, not both");
            }
            d.average_ = m.get<double>("average");
            if (d.average_ < 1) {
                m.fail("average", fmt::format("must be at least 1, got {}", d.average_));
            }
            const double ratio = m.get_or<double>("median_ratio", 0.85);
            if (!(ratio > 0 && ratio < 1)) {
                m.fail("median_ratio", fmt::format("must lie in (0, 1), got {}", ratio));
            }
            // median = average·ratio = e^mu; mean/median = e^(sigma²/2).
            d.a_ = std::log(d.average_ * ratio);
            d.b_ = std::sqrt(2.0 * std::log(1.0 / ratio));
        } else {
            if (m.has("median_ratio")) {
                m.fail("median_ratio", "only used with `average`");
            }
            d.a_ = m.get<double>("mean");
            d.b_ = m.get<double>("sigma");
            if (!(d.a_ > 0) || d.b_ < 0) {
                m.fail("mean", fmt::format("needs mean > 0 and sigma >= 0, as the generator requires; got {} and {}",
                                           d.a_, d.b_));
            }
        }
    } else {
        m.fail("distribution",
               "unknown distribution '" + name + "'; allowed: constant, uniform, zipf, poisson, lognormal");
    }
    return d;
}

std::vector<std::int64_t> GeneratorDistribution::sample(core::RngStream& rng, std::size_t size) const {
    std::vector<double> x(size, 0.0);
    switch (kind_) {
        case Kind::kConstant:
            std::fill(x.begin(), x.end(), a_);
            break;
        case Kind::kUniform:
            for (auto& v : x) {
                v = integer_ ? static_cast<double>(
                                   rng.uniform_int(static_cast<std::int64_t>(a_), static_cast<std::int64_t>(b_)))
                             : rng.uniform(a_, b_);
            }
            break;
        case Kind::kZipf:
            for (auto& v : x) {
                v = static_cast<double>(zipf(rng, a_));
            }
            break;
        case Kind::kPoisson:
            for (auto& v : x) {
                v = static_cast<double>(poisson(rng, a_));
            }
            break;
        case Kind::kLognormal: {
            double sum = 0;
            for (auto& v : x) {
                v = rng.lognormal(a_, b_);
                sum += v;
            }
            if (average_ > 0 && sum > 0) {
                const double scale = average_ / (sum / static_cast<double>(size));
                for (auto& v : x) {
                    v *= scale;
                }
            }
            break;
        }
    }
    std::vector<std::int64_t> out;
    out.reserve(size);
    for (double v : x) {
        if (max_ && kind_ != Kind::kUniform && kind_ != Kind::kConstant) {
            v = std::min(v, *max_);
        }
        // lognormal is rounded (np.round); the others are integers already or truncated by astype(int)
        out.push_back(static_cast<std::int64_t>(kind_ == Kind::kLognormal ? std::nearbyint(v) : std::trunc(v)));
    }
    return out;
}

std::string GeneratorDistribution::describe() const {
    switch (kind_) {
        case Kind::kConstant:
            return fmt::format("{:g}", a_);
        case Kind::kUniform:
            return fmt::format("uniform {:g}..{:g}", a_, b_);
        case Kind::kZipf:
            return fmt::format("zipf {:g}", a_);
        case Kind::kPoisson:
            return fmt::format("poisson {:g}", a_);
        case Kind::kLognormal:
            return average_ > 0 ? fmt::format("lognormal avg {:g}", average_)
                                : fmt::format("lognormal mu {:g} sigma {:g}", a_, b_);
    }
    return "";
}

ConversationGeneratorConfig parse_conversation_generator(const YamlMap& m) {
    m.allow_only({"filetype", "num_conversations", "text_files", "print_stats", "prompt_input", "prompt_output"});
    if (m.has("filetype") && m.get<std::string>("filetype") != "generate_conversations") {
        m.fail("filetype", "only `generate_conversations` is read (a list of ShareGPT conversations needs text)");
    }
    ConversationGeneratorConfig c;
    c.num_conversations = m.get_in_range<std::int64_t>("num_conversations", 1, 10'000'000);
    const YamlMap in = m.map("prompt_input");
    in.allow_only({"num_turns", "common_prefix_num_tokens", "prefix_num_tokens", "num_tokens"});
    c.num_turns = GeneratorDistribution::parse(in, "num_turns");
    if (in.has("common_prefix_num_tokens")) {  // optional in the generator: 0 when absent
        c.common_prefix_num_tokens = GeneratorDistribution::parse(in, "common_prefix_num_tokens");
    }
    c.prefix_num_tokens = GeneratorDistribution::parse(in, "prefix_num_tokens");
    c.input_num_tokens = GeneratorDistribution::parse(in, "num_tokens");
    const YamlMap out = m.map("prompt_output");
    out.allow_only({"num_tokens"});
    c.output_num_tokens = GeneratorDistribution::parse(out, "num_tokens");
    return c;
}

std::vector<GeneratedConversation> generate_conversations(const ConversationGeneratorConfig& config,
                                                          core::RngStream& rng) {
    const auto n = static_cast<std::size_t>(config.num_conversations);
    const auto turn_counts = config.num_turns.sample(rng, n);
    const auto prefixes = config.prefix_num_tokens.sample(rng, n);
    const std::int64_t common = std::max<std::int64_t>(0, config.common_prefix_num_tokens.sample(rng, 1)[0]);
    std::vector<GeneratedConversation> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::int64_t messages = std::max<std::int64_t>(turn_counts[i], 2);  // a user prompt and its answer
        messages += messages % 2;                                           // every prompt gets an answer
        const auto inputs = config.input_num_tokens.sample(rng, static_cast<std::size_t>(messages));
        const auto outputs = config.output_num_tokens.sample(rng, static_cast<std::size_t>(messages));
        auto& conv = out[i];
        conv.common_prefix_tokens = common;
        for (std::int64_t t = 0; t < messages; ++t) {
            const auto k = static_cast<std::size_t>(t);
            if (t % 2 == 1) {
                conv.message_tokens.push_back(std::max<std::int64_t>(outputs[k], 1));
            } else if (t == 0) {
                // The common prefix counts towards the first message's num_tokens; the conversation's own prefix
                // comes on top of it.
                conv.message_tokens.push_back(std::max(inputs[k], common + kGeneratorFixedTextTokens) +
                                              std::max<std::int64_t>(prefixes[i], 0));
            } else {
                conv.message_tokens.push_back(std::max(inputs[k], kGeneratorFixedTextTokens));
            }
        }
    }
    return out;
}

}  // namespace servesim::workloads
