// Tests of workloads/length_distribution.*: scalars are fixed lengths, each named distribution samples within its
// bounds with the right mean, and bad parameters are errors naming the key.
#include "workloads/length_distribution.h"

#include <cmath>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::yaml;

namespace {

double sample_mean(const LengthDistribution& d, int n, std::int64_t lo, std::int64_t hi) {
    core::RngStream rng(5, "lengths");
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        const auto x = d.sample(rng);
        REQUIRE(x >= lo);
        REQUIRE(x <= hi);
        sum += static_cast<double>(x);
    }
    return sum / n;
}

std::string error_of(const std::string& text, std::int64_t floor_tokens) {
    try {
        (void)LengthDistribution::parse(yaml(text), "answer_tokens", floor_tokens);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("LengthDistribution reads a scalar as a fixed length", "[workloads][lengths]") {
    const auto d = LengthDistribution::parse(yaml("answer_tokens: 64"), "answer_tokens", 1);
    CHECK(d.kind() == LengthDist::kFixed);
    CHECK(sample_mean(d, 10, 64, 64) == 64.0);
}

TEST_CASE("LengthDistribution uniform covers [min, max] with mean (min + max)/2", "[workloads][lengths]") {
    // 50..100: mean 75, SD 14.7; SE over 20,000 draws = 0.10; tolerance 0.5.
    const auto d =
        LengthDistribution::parse(yaml("answer_tokens: {dist: uniform, min: 50, max: 100}"), "answer_tokens", 1);
    CHECK(std::fabs(sample_mean(d, 20'000, 50, 100) - 75.0) < 0.5);
}

TEST_CASE("LengthDistribution normal is clamped to [min, max]", "[workloads][lengths]") {
    const auto d = LengthDistribution::parse(
        yaml("answer_tokens: {dist: normal, mean: 100, std: 80, min: 20, max: 150}"), "answer_tokens", 1);
    (void)sample_mean(d, 5'000, 20, 150);
}

TEST_CASE("LengthDistribution lognormal given mean and std keeps the mean", "[workloads][lengths]") {
    // mean 300, std 150 → sigma² = ln(1.25) = 0.223; SE over 50,000 draws = 150/224 = 0.67; tolerance 3.
    const auto d =
        LengthDistribution::parse(yaml("answer_tokens: {dist: lognormal, mean: 300, std: 150}"), "answer_tokens", 1);
    CHECK(d.mean_tokens() == 300.0);
    CHECK(std::fabs(sample_mean(d, 50'000, 1, 1'000'000) - 300.0) < 3.0);
}

TEST_CASE("LengthDistribution exponential has the given mean", "[workloads][lengths]") {
    // mean 200 (rounding adds nothing on average); SE over 50,000 = 0.9; tolerance 4.
    const auto d = LengthDistribution::parse(yaml("answer_tokens: {dist: exponential, mean: 200}"), "answer_tokens", 0);
    CHECK(std::fabs(sample_mean(d, 50'000, 0, 1'000'000) - 200.0) < 4.0);
}

TEST_CASE("LengthDistribution rejects bad parameters naming the key", "[workloads][lengths]") {
    // Every count states its range, 1 (an answer) or 0 to 1e9 tokens (common/token_range.h).
    CHECK(error_of("answer_tokens: 0", 1).find("'workload.answer_tokens': length 0 tokens is out of range; allowed: 1 "
                                               "to 1000000000 tokens") != std::string::npos);
    CHECK(error_of("answer_tokens: {dist: zipf}", 1).find("allowed: fixed, uniform, normal, lognormal, exponential") !=
          std::string::npos);
    CHECK(error_of("answer_tokens: {dist: uniform, min: 9, max: 3}", 1).find("'workload.answer_tokens.max'") !=
          std::string::npos);
    CHECK(error_of("answer_tokens: {dist: normal, mean: 9, std: -3}", 1)
              .find("'workload.answer_tokens.std': -3 is out of range; allowed: 0 to 1000000000 tokens") !=
          std::string::npos);
    CHECK(error_of("answer_tokens: {dist: uniform, min: 1, max: 3, mean: 2}", 1).find("unknown key") !=
          std::string::npos);
    CHECK(error_of("answer_tokens: {dist: uniform, min: 0, max: 3}", 1)
              .find("'workload.answer_tokens.min': 0 tokens is out of range; allowed: 1 to 1000000000 tokens") !=
          std::string::npos);
}
