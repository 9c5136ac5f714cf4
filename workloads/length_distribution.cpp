// Token-length distributions: the registry table of names and the YAML reader. Sampling uses RngStream's own
// distribution code (never std::*_distribution), so lengths are identical on every platform.
#include "workloads/length_distribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/token_range.h"

namespace servesim::workloads {

namespace {

// An unbounded `max` is the input bound itself (common/token_range.h): a draw is never longer than any length key
// may be.
constexpr std::int64_t kNoMaxTokens = kMaxTokenCount;

// "allowed: F to 1,000,000,000 tokens" for a count, its floor F.
std::string allowed_tokens(std::int64_t floor_tokens) {
    return fmt::format("allowed: {} to {} tokens (docs/INPUT-RANGES.md)", floor_tokens, kMaxTokenCount);
}

struct LengthDistDef {
    LengthDistEntry entry;
    LengthDist kind;
    std::vector<std::string_view> keys;  // besides `dist`
};

const std::vector<LengthDistDef>& definitions() {
    static const std::vector<LengthDistDef> table = {
        {{"fixed", "always `value` tokens"}, LengthDist::kFixed, {"value"}},
        {{"uniform", "integer uniform on [min, max], both inclusive"}, LengthDist::kUniform, {"min", "max"}},
        {{"normal", "normal(mean, std), rounded, clamped to [min, max]"},
         LengthDist::kNormal,
         {"mean", "std", "min", "max"}},
        {{"lognormal", "lognormal given mean and std of the lengths (or mu, sigma of their log), rounded, clamped"},
         LengthDist::kLognormal,
         {"mean", "std", "mu", "sigma", "min", "max"}},
        {{"exponential", "exponential with the given mean, rounded, clamped to [min, max]"},
         LengthDist::kExponential,
         {"mean", "min", "max"}},
    };
    return table;
}

std::string names_list() {
    std::string out;
    for (const auto& d : definitions()) {
        out += (out.empty() ? "" : ", ") + std::string(d.entry.name);
    }
    return out;
}

}  // namespace

const std::vector<LengthDistEntry>& length_distributions() {
    static const std::vector<LengthDistEntry> entries = [] {
        std::vector<LengthDistEntry> out;
        for (const auto& d : definitions()) {
            out.push_back(d.entry);
        }
        return out;
    }();
    return entries;
}

LengthDistribution LengthDistribution::fixed(std::int64_t tokens) {
    LengthDistribution d;
    d.kind_ = LengthDist::kFixed;
    d.a_ = static_cast<double>(tokens);
    d.mean_ = d.a_;
    d.min_tokens_ = tokens;
    d.max_tokens_ = tokens;
    return d;
}

LengthDistribution LengthDistribution::parse(const YamlMap& parent, std::string_view key, std::int64_t floor_tokens) {
    const YAML::Node node = parent.node(key);
    if (node.IsScalar()) {
        const auto tokens = parent.get<std::int64_t>(key);
        if (tokens < floor_tokens || tokens > kMaxTokenCount) {
            parent.fail(key, fmt::format("length {} tokens is out of range; {}", tokens, allowed_tokens(floor_tokens)));
        }
        return fixed(tokens);
    }
    if (!node.IsMap()) {
        parent.fail(key, "expected a token count or a mapping {dist: " + names_list() + ", ...}");
    }
    const YamlMap m = parent.map(key);
    const auto name = m.get<std::string>("dist");
    const auto& defs = definitions();
    const auto it = std::find_if(defs.begin(), defs.end(), [&](const auto& d) { return d.entry.name == name; });
    if (it == defs.end()) {
        m.fail("dist", "unknown distribution '" + name + "'; allowed: " + names_list());
    }
    std::vector<std::string_view> allowed = {"dist"};
    allowed.insert(allowed.end(), it->keys.begin(), it->keys.end());
    m.allow_only(allowed);

    LengthDistribution d;
    d.kind_ = it->kind;
    d.min_tokens_ = m.get_or<std::int64_t>("min", floor_tokens);
    d.max_tokens_ = m.get_or<std::int64_t>("max", kNoMaxTokens);
    if (d.min_tokens_ < floor_tokens || d.min_tokens_ > kMaxTokenCount) {
        m.fail("min", fmt::format("{} tokens is out of range; {}", d.min_tokens_, allowed_tokens(floor_tokens)));
    }
    if (d.max_tokens_ > kMaxTokenCount) {
        m.fail("max", fmt::format("{} tokens is out of range; {}", d.max_tokens_, allowed_tokens(floor_tokens)));
    }
    if (d.max_tokens_ < d.min_tokens_) {
        m.fail("max", fmt::format("must be at least min ({}), got {}", d.min_tokens_, d.max_tokens_));
    }
    // A mean or spread in tokens: 0 to the token bound (draws are clamped to [min, max] in any case; the bound keeps
    // the moments' arithmetic, std² and the lognormal's exp, finite).
    const auto non_negative = [&](std::string_view k) {
        const auto v = m.get<double>(k);
        if (v < 0 || v > static_cast<double>(kMaxTokenCount)) {
            m.fail(k, fmt::format("{:g} is out of range; allowed: 0 to {} tokens (docs/INPUT-RANGES.md)", v,
                                  kMaxTokenCount));
        }
        return v;
    };
    switch (d.kind_) {
        case LengthDist::kFixed: {
            const auto tokens = m.get<std::int64_t>("value");
            if (tokens < floor_tokens || tokens > kMaxTokenCount) {
                m.fail("value",
                       fmt::format("length {} tokens is out of range; {}", tokens, allowed_tokens(floor_tokens)));
            }
            return fixed(tokens);
        }
        case LengthDist::kUniform:
            (void)m.get<std::int64_t>("min");  // both bounds are required for uniform
            (void)m.get<std::int64_t>("max");
            d.a_ = static_cast<double>(d.min_tokens_);
            d.b_ = static_cast<double>(d.max_tokens_);
            d.mean_ = 0.5 * (d.a_ + d.b_);
            break;
        case LengthDist::kNormal:
            d.a_ = non_negative("mean");
            d.b_ = non_negative("std");
            d.mean_ = d.a_;
            break;
        case LengthDist::kLognormal:
            if (m.has("mu") || m.has("sigma")) {
                if (m.has("mean") || m.has("std")) {
                    m.fail("mu", "give either mean and std (of the lengths) or mu and sigma (of their log), not both");
                }
                d.a_ = m.get<double>("mu");
                d.b_ = m.get<double>("sigma");
                if (!(d.b_ >= 0 && d.b_ <= 100)) {
                    m.fail("sigma",
                           fmt::format("{:g} is out of range; allowed: 0 to 100 (the spread of ln tokens)", d.b_));
                }
                d.mean_ = std::exp(d.a_ + 0.5 * d.b_ * d.b_);
                if (!(d.mean_ <= static_cast<double>(kMaxTokenCount))) {
                    m.fail("mu", fmt::format("mu {:g} and sigma {:g} give a mean of {:g} tokens; allowed: up to {} "
                                             "tokens (docs/INPUT-RANGES.md)",
                                             d.a_, d.b_, d.mean_, kMaxTokenCount));
                }
            } else {
                const double mean = non_negative("mean");
                const double std = non_negative("std");
                if (mean <= 0) {
                    m.fail("mean", "a lognormal needs a positive mean");
                }
                // Moments of a lognormal: sigma² = ln(1 + std²/mean²), mu = ln(mean) − sigma²/2.
                const double sigma2 = std::log1p((std * std) / (mean * mean));
                d.a_ = std::log(mean) - 0.5 * sigma2;
                d.b_ = std::sqrt(sigma2);
                d.mean_ = mean;
            }
            break;
        case LengthDist::kExponential:
            d.a_ = non_negative("mean");
            if (d.a_ <= 0) {
                m.fail("mean", "an exponential needs a positive mean");
            }
            d.mean_ = d.a_;
            break;
    }
    return d;
}

std::int64_t parse_shared_prefix_tokens(const YamlMap& m) {
    const auto tokens = m.get_or<std::int64_t>("shared_prefix_tokens", 0);
    if (tokens < 0 || tokens > kMaxTokenCount) {
        m.fail("shared_prefix_tokens", fmt::format("{} tokens is out of range; {}", tokens, allowed_tokens(0)));
    }
    return tokens;
}

void check_prompt_not_empty(const YamlMap& m, std::string_view key,
                            std::initializer_list<std::pair<std::string_view, std::int64_t>> parts) {
    std::int64_t total = 0;
    std::string sum;
    for (const auto& [name, tokens] : parts) {
        total += tokens;  // each part is at most kMaxTokenCount
        sum += fmt::format("{}{} {}", sum.empty() ? "" : " + ", name, tokens);
    }
    if (total < 1) {
        m.fail(key, fmt::format("a prompt could be empty (shortest: {} = 0 tokens) and vLLM refuses an empty "
                                "prompt; give one of them a minimum of at least 1 token",
                                sum));
    }
}

std::int64_t LengthDistribution::sample(core::RngStream& rng) const {
    double x = 0;
    switch (kind_) {
        case LengthDist::kFixed:
            return min_tokens_;
        case LengthDist::kUniform:
            return rng.uniform_int(min_tokens_, max_tokens_);
        case LengthDist::kNormal:
            x = rng.normal(a_, b_);
            break;
        case LengthDist::kLognormal:
            x = rng.lognormal(a_, b_);
            break;
        case LengthDist::kExponential:
            x = rng.exponential(1.0 / a_);
            break;
    }
    const double clamped =
        std::clamp(std::round(x), static_cast<double>(min_tokens_), static_cast<double>(max_tokens_));
    return static_cast<std::int64_t>(clamped);
}

std::string LengthDistribution::describe() const {
    switch (kind_) {
        case LengthDist::kFixed:
            return fmt::format("{}", min_tokens_);
        case LengthDist::kUniform:
            return fmt::format("uniform {}–{}", min_tokens_, max_tokens_);
        case LengthDist::kNormal:
            return fmt::format("normal {:g}±{:g}", a_, b_);
        case LengthDist::kLognormal:
            return fmt::format("lognormal mean {:g}", mean_);
        case LengthDist::kExponential:
            return fmt::format("exponential mean {:g}", a_);
    }
    return "?";
}

}  // namespace servesim::workloads
