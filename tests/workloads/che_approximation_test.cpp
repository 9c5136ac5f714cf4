// Che's approximation of LRU under the independent reference model, checked against the order-only prefix cache
// (sim/cache/prefix_cache/order_only_cache.h, what `mode: order_only` runs). Objects with request rates λ_i share an
// LRU cache of C blocks; the characteristic time T solves Σ s_i (1 − e^(−λ_i T)) = C (s_i = the object's size in
// blocks), and the hit probability of object i is 1 − e^(−λ_i T), so the hit rate is Σ λ_i (1 − e^(−λ_i T)) / Σ λ_i
// (Che, Tung & Wang 2002; Fricker, Robert & Roberts 2012 show it is asymptotically exact as C and the object count
// grow, with errors well under 1 % for Zipf popularities and caches of 50+ objects). Two streams: one-block objects
// with Zipf(0.8) popularities drawn independently, and a `type: tenants` stream (per-tenant Poisson streams at equal
// rates, system prompts of 4 blocks).
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cache/prefix_cache/order_only_cache.h"
#include "sim/core/rng.h"
#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/workload.h"

using namespace servesim;
using servesim::workloads::test::drive;
using servesim::workloads::test::yaml;

namespace {

// T with Σ sizes_i (1 − e^(−λ_i T)) = C, by bisection (the sum grows with T from 0 to Σ sizes_i > C).
double che_characteristic_time(const std::vector<double>& rates, const std::vector<double>& sizes, double capacity) {
    double lo = 0;
    double hi = 1;
    const auto occupied = [&](double t) {
        double sum = 0;
        for (std::size_t i = 0; i < rates.size(); ++i) {
            sum += sizes[i] * -std::expm1(-rates[i] * t);
        }
        return sum;
    };
    while (occupied(hi) < capacity) {
        hi *= 2;
    }
    for (int k = 0; k < 200; ++k) {
        const double mid = 0.5 * (lo + hi);
        (occupied(mid) < capacity ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

// Σ λ_i (1 − e^(−λ_i T)) / Σ λ_i: the fraction of requests that hit.
double che_hit_rate(const std::vector<double>& rates, double t) {
    double hits = 0;
    double total = 0;
    for (const double r : rates) {
        hits += r * -std::expm1(-r * t);
        total += r;
    }
    return hits / total;
}

// Replays `prompts` through an order-only cache of `num_blocks`; the fraction of lookups after `warmup` requests that
// hit all `blocks_per_object` blocks.
double simulated_hit_rate(const std::vector<core::TokenContent>& prompts,
                          std::int64_t num_blocks,
                          std::int64_t blocks_per_object,
                          std::size_t warmup) {
    cache::OrderOnlyTraceBuilder builder(16);
    for (const auto& p : prompts) {
        builder.add_request(p);
    }
    const auto trace = std::move(builder).build();
    cache::OrderOnlyCache c(num_blocks, trace.num_distinct_blocks());
    std::int64_t hits = 0;
    std::int64_t lookups = 0;
    for (std::int64_t i = 0; i < trace.num_requests(); ++i) {
        const auto r = c.process_request(trace.block_ids(i), trace.num_prompt_tokens(i), 16);
        if (static_cast<std::size_t>(i) >= warmup) {
            ++lookups;
            hits += r.num_hit_blocks == blocks_per_object ? 1 : 0;
        }
    }
    return static_cast<double>(hits) / static_cast<double>(lookups);
}

}  // namespace

TEST_CASE("Che's approximation predicts the order-only LRU hit rate on a Zipf(0.8) stream", "[workloads][che]") {
    // 1000 one-block objects (prompt = 17 tokens of object i: one full block looked up), p_i ∝ i^−0.8, 200,000
    // independent requests, the first 20,000 left out (cold start). Statistical SE of each measured rate ≤
    // √(0.25 / 180,000) ≈ 0.0012, so 4 SE ≈ 0.005, plus Che's own error at these sizes (50-300 objects, ~0.001):
    // tolerance 0.006. Measured (seed 11): Che 0.2616 / 0.3778 / 0.6231, simulated 0.2598 / 0.3765 / 0.6226.
    constexpr int kObjects = 1000;
    std::vector<double> rates(kObjects);
    std::vector<double> cdf(kObjects);
    double sum = 0;
    for (int i = 0; i < kObjects; ++i) {
        rates[static_cast<std::size_t>(i)] = std::pow(static_cast<double>(i + 1), -0.8);
        sum += rates[static_cast<std::size_t>(i)];
        cdf[static_cast<std::size_t>(i)] = sum;
    }
    core::RngStream rng(11, "che.zipf");
    std::vector<core::TokenContent> prompts;
    prompts.reserve(200'000);
    for (int k = 0; k < 200'000; ++k) {
        const double u = rng.uniform01() * sum;
        const auto i = static_cast<std::uint64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        prompts.push_back({{core::ContentId{core::hash_combine(0xc4e, std::min<std::uint64_t>(i, kObjects - 1))}, 17}});
    }
    const std::vector<double> sizes(kObjects, 1.0);
    for (const std::int64_t capacity : {50, 100, 300}) {
        const double predicted =
            che_hit_rate(rates, che_characteristic_time(rates, sizes, static_cast<double>(capacity)));
        const double simulated = simulated_hit_rate(prompts, capacity, 1, 20'000);
        INFO("capacity " << capacity << " blocks: Che " << predicted << ", simulated " << simulated);
        CHECK(std::abs(predicted - simulated) < 0.006);
    }
}

TEST_CASE("Che's approximation predicts the order-only LRU hit rate on a tenants stream", "[workloads][che]") {
    // `type: tenants`, 100 tenants with 64-token system prompts (4 blocks), a unique 8-token user message (a partial
    // block, never hashed), one turn per dialogue, per-tenant Poisson streams at 1 req/s each, answers instant: an
    // independent-reference stream with equal rates. Every miss allocates 4 blocks and every request frees 4, so a
    // pool of 120 blocks holds 30 whole system prompts; Che: 100·4·(1 − e^(−λT)) = 120 → each tenant hits with
    // probability 0.3 (for equal rates LRU's hit rate is exactly C/N). 60,000 requests, the first 6,000 left out:
    // SE √(0.3·0.7 / 54,000) = 0.002; tolerance 4 SE = 0.008. Measured (seed 5): 0.29998.
    auto w = workloads::make_workload(yaml(R"(
type: tenants
tenants: 100
system_prompt_tokens: 64
user_tokens: 8
answer_tokens: 1
turns_per_dialogue: 1
rate: 100
num_requests: 60000
)"),
                                      5);
    std::vector<core::TokenContent> prompts;
    for (const auto& s : drive(*w, [](const workloads::RequestSpec&) { return core::Duration{}; })) {
        prompts.push_back(s.spec.prompt);
    }
    REQUIRE(prompts.size() == 60'000);
    const std::vector<double> rates(100, 1.0);
    const std::vector<double> sizes(100, 4.0);
    const double predicted = che_hit_rate(rates, che_characteristic_time(rates, sizes, 120.0));
    CHECK(std::abs(predicted - 0.3) < 1e-9);
    const double simulated = simulated_hit_rate(prompts, 120, 4, 6'000);
    INFO("Che " << predicted << ", simulated " << simulated);
    CHECK(std::abs(predicted - simulated) < 0.008);
}
