// Deterministic random streams (BLIS PartitionedRNG): one RngStream per purpose and per tenant, seeded
// from (master seed, stable hash of the stream name[, index]), so adding a tenant or a subsystem never shifts anyone
// else's draws. The engine is std::mt19937_64 (its output is fixed by the standard); every distribution below is our
// own code (inverse CDF, Box–Muller, Marsaglia–Tsang), because std::*_distribution outputs differ between libraries.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <string_view>

#include "common/error.h"
#include "sim/core/content.h"

namespace servesim::core {

// FNV-1a over the bytes, then mix64: a fixed, documented function (never std::hash), identical on every platform.
[[nodiscard]] constexpr std::uint64_t stable_hash(std::string_view text) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : text) {
        h ^= static_cast<std::uint8_t>(c);
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}

class RngStream {
  public:
    RngStream(std::uint64_t seed, std::string_view stream_name)
        : engine_(hash_combine(mix64(seed), stable_hash(stream_name))) {}

    // One stream of a family, e.g. ("tenant.arrivals", tenant index): independent of the family's other members.
    RngStream(std::uint64_t seed, std::string_view stream_name, std::uint64_t index)
        : engine_(hash_combine(hash_combine(mix64(seed), stable_hash(stream_name)), index)) {}

    // Raw 64 bits from the engine.
    [[nodiscard]] std::uint64_t next_u64() { return engine_(); }

    // Uniform in [0, 1) with 53 random bits.
    [[nodiscard]] double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

    // Uniform in [lo, hi).
    [[nodiscard]] double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

    // Uniform integer in [lo, hi] (both inclusive), without modulo bias (rejection of the incomplete last range).
    [[nodiscard]] std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
        SERVESIM_CHECK(lo <= hi, "uniform_int needs lo <= hi, got {} > {}", lo, hi);
        const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
        if (range == 0) {  // the whole 64-bit range
            return static_cast<std::int64_t>(engine_());
        }
        const std::uint64_t limit =
            std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
        std::uint64_t x = engine_();
        while (x >= limit) {
            x = engine_();
        }
        return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % range);
    }

    // Exponential with the given rate (mean 1/rate), by inverse CDF: −ln(1 − u)/rate, u in [0, 1).
    [[nodiscard]] double exponential(double rate) {
        SERVESIM_CHECK(rate > 0, "exponential needs a positive rate, got {}", rate);
        return -std::log1p(-uniform01()) / rate;
    }

    // Normal by Box–Muller; the second value of each pair is kept for the next call.
    [[nodiscard]] double normal(double mean, double stddev) {
        if (has_spare_) {
            has_spare_ = false;
            return mean + stddev * spare_;
        }
        const double u1 = 1.0 - uniform01();  // (0, 1]: log is finite
        const double u2 = uniform01();
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 2.0 * std::numbers::pi * u2;
        spare_ = radius * std::sin(angle);
        has_spare_ = true;
        return mean + stddev * radius * std::cos(angle);
    }

    // exp(N(mu, sigma)): mu and sigma are those of the logarithm.
    [[nodiscard]] double lognormal(double mu, double sigma) { return std::exp(normal(mu, sigma)); }

    // Gamma(shape, scale) by Marsaglia–Tsang (2000); shape < 1 uses Gamma(shape + 1)·u^(1/shape).
    [[nodiscard]] double gamma(double shape, double scale) {
        SERVESIM_CHECK(shape > 0 && scale > 0, "gamma needs shape > 0 and scale > 0, got {} and {}", shape, scale);
        if (shape < 1.0) {
            const double u = 1.0 - uniform01();
            return gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
        }
        const double d = shape - 1.0 / 3.0;
        const double c = 1.0 / std::sqrt(9.0 * d);
        while (true) {
            double x = 0;
            double v = 0;
            do {
                x = normal(0.0, 1.0);
                v = 1.0 + c * x;
            } while (v <= 0);
            v = v * v * v;
            const double u = 1.0 - uniform01();
            if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) {
                return d * v * scale;
            }
        }
    }

  private:
    std::mt19937_64 engine_;
    double spare_ = 0;
    bool has_spare_ = false;
};

}  // namespace servesim::core
