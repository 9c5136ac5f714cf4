// Token-length distributions: the registry table of names and the YAML reader. Sampling uses RngStream's own
// distribution code (never std::*_distribution), so lengths are identical on every platform.
#include "workloads/length_distribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesim::workloads {

namespace {

constexpr std::int64_t kNoMaxTokens = std::numeric_limits<std::int64_t>::max() / 4;

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
        if (tokens < floor_tokens) {
            parent.fail(key, fmt::format("length must be at least {} tokens, got {}", floor_tokens, tokens));
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
    if (d.min_tokens_ < floor_tokens) {
        m.fail("min", fmt::format("must be at least {} tokens, got {}", floor_tokens, d.min_tokens_));
    }
    if (d.max_tokens_ < d.min_tokens_) {
        m.fail("max", fmt::format("must be at least min ({}), got {}", d.min_tokens_, d.max_tokens_));
    }
    const auto non_negative = [&](std::string_view k) {
        const auto v = m.get<double>(k);
        if (v < 0) {
            m.fail(k, fmt::format("must be non-negative, got {}", v));
        }
        return v;
    };
    switch (d.kind_) {
        case LengthDist::kFixed: {
            const auto tokens = m.get<std::int64_t>("value");
            if (tokens < floor_tokens) {
                m.fail("value", fmt::format("length must be at least {} tokens, got {}", floor_tokens, tokens));
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
                d.b_ = non_negative("sigma");
                d.mean_ = std::exp(d.a_ + 0.5 * d.b_ * d.b_);
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
