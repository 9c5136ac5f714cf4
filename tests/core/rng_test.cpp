// Tests of sim/core/rng.h: streams are reproducible from (seed, name[, index]), independent of one another, and our
// own distribution code has the right moments (sample sizes chosen so the tolerance is > 4 standard errors).
#include "sim/core/rng.h"

#include <cmath>
#include <vector>

#include "tests/catch.h"

using servesim::core::RngStream;

namespace {

std::vector<std::uint64_t> draws(RngStream rng, int n) {
    std::vector<std::uint64_t> out;
    for (int i = 0; i < n; ++i) {
        out.push_back(rng.next_u64());
    }
    return out;
}

}  // namespace

TEST_CASE("RngStream repeats its draws for the same seed and name", "[core][rng]") {
    CHECK(draws(RngStream(42, "arrivals"), 8) == draws(RngStream(42, "arrivals"), 8));
    CHECK(draws(RngStream(42, "tenant", 3), 8) == draws(RngStream(42, "tenant", 3), 8));
}

TEST_CASE("RngStream differs by seed, by name and by index", "[core][rng]") {
    const auto base = draws(RngStream(42, "arrivals"), 4);
    CHECK(base != draws(RngStream(43, "arrivals"), 4));
    CHECK(base != draws(RngStream(42, "lengths"), 4));
    CHECK(draws(RngStream(42, "tenant", 0), 4) != draws(RngStream(42, "tenant", 1), 4));
}

TEST_CASE("RngStream of tenant 0 is unchanged when a tenant is added", "[core][rng]") {
    // Two tenants, then three: tenant 0's stream depends only on (seed, name, 0), never on how many streams exist or
    // how many draws the others made.
    RngStream a0(7, "tenant.lengths", 0);
    RngStream a1(7, "tenant.lengths", 1);
    (void)a1.next_u64();
    const auto with_two = draws(a0, 16);
    RngStream b0(7, "tenant.lengths", 0);
    RngStream b1(7, "tenant.lengths", 1);
    RngStream b2(7, "tenant.lengths", 2);
    (void)b2.next_u64();
    (void)b1.next_u64();
    CHECK(draws(b0, 16) == with_two);
}

TEST_CASE("stable_hash is FNV-1a followed by mix64", "[core][rng]") {
    // Empty text: FNV offset basis 0xcbf29ce484222325, then the splitmix64 finaliser.
    CHECK(servesim::core::stable_hash("") == servesim::core::mix64(0xcbf29ce484222325ULL));
    // "a" = 0x61: (basis ^ 0x61) * FNV prime.
    CHECK(servesim::core::stable_hash("a") == servesim::core::mix64((0xcbf29ce484222325ULL ^ 0x61) * 0x100000001b3ULL));
}

TEST_CASE("RngStream exponential has mean 1/rate", "[core][rng]") {
    // rate 4 → mean 0.25 s; 200,000 draws: standard error 0.25/√200000 = 0.00056, tolerance 0.0025 (≈ 4.5 SE).
    RngStream rng(1, "exp");
    double sum = 0;
    const int n = 200'000;
    for (int i = 0; i < n; ++i) {
        const double x = rng.exponential(4.0);
        REQUIRE(x >= 0);
        sum += x;
    }
    CHECK(std::fabs(sum / n - 0.25) < 0.0025);
}

TEST_CASE("RngStream uniform01 lies in [0, 1) with mean 1/2", "[core][rng]") {
    // Variance 1/12 → SE of the mean over 100,000 draws = 0.289/316 = 0.00091; tolerance 0.005.
    RngStream rng(2, "u");
    double sum = 0;
    for (int i = 0; i < 100'000; ++i) {
        const double u = rng.uniform01();
        REQUIRE(u >= 0.0);
        REQUIRE(u < 1.0);
        sum += u;
    }
    CHECK(std::fabs(sum / 100'000 - 0.5) < 0.005);
}

TEST_CASE("RngStream normal by Box-Muller has the given mean and std", "[core][rng]") {
    // N(100, 15): SE of the mean over 100,000 draws = 15/316 = 0.047; tolerance 0.3. Std within 1 %.
    RngStream rng(3, "normal");
    double sum = 0;
    double sum_sq = 0;
    const int n = 100'000;
    for (int i = 0; i < n; ++i) {
        const double x = rng.normal(100, 15);
        sum += x;
        sum_sq += x * x;
    }
    const double mean = sum / n;
    const double std = std::sqrt(sum_sq / n - mean * mean);
    CHECK(std::fabs(mean - 100) < 0.3);
    CHECK(std::fabs(std - 15) < 0.15);
}

TEST_CASE("RngStream lognormal has mean exp(mu + sigma^2/2)", "[core][rng]") {
    // mu = 0, sigma = 0.5 → mean e^0.125 = 1.1331; std = mean·√(e^0.25 − 1) = 0.604; SE over 100,000 = 0.0019.
    RngStream rng(4, "lognormal");
    double sum = 0;
    for (int i = 0; i < 100'000; ++i) {
        sum += rng.lognormal(0.0, 0.5);
    }
    CHECK(std::fabs(sum / 100'000 - std::exp(0.125)) < 0.01);
}

TEST_CASE("RngStream gamma has mean shape times scale", "[core][rng]") {
    // shape 0.5, scale 2 → mean 1, variance 2 (SE 0.0045 over 100,000); shape 3, scale 0.5 → mean 1.5 (SE 0.0027).
    RngStream rng(5, "gamma");
    double small = 0;
    double large = 0;
    for (int i = 0; i < 100'000; ++i) {
        small += rng.gamma(0.5, 2.0);
        large += rng.gamma(3.0, 0.5);
    }
    CHECK(std::fabs(small / 100'000 - 1.0) < 0.025);
    CHECK(std::fabs(large / 100'000 - 1.5) < 0.015);
}

TEST_CASE("RngStream uniform_int covers both bounds evenly", "[core][rng]") {
    // [3, 7]: five values, 50,000 draws → 10,000 each, binomial SD √(50000·0.2·0.8) = 89; tolerance 500.
    RngStream rng(6, "int");
    std::vector<int> counts(5, 0);
    for (int i = 0; i < 50'000; ++i) {
        const auto v = rng.uniform_int(3, 7);
        REQUIRE(v >= 3);
        REQUIRE(v <= 7);
        ++counts[static_cast<std::size_t>(v - 3)];
    }
    for (const int c : counts) {
        CHECK(std::abs(c - 10'000) < 500);
    }
    CHECK(rng.uniform_int(5, 5) == 5);
}
