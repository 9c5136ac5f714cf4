// Tests of planner/cost.*: $/Mtok worked by hand, the ranking of three hand-priced configurations, the Pareto
// frontier, and price files with bad or missing entries.
#include "planner/cost.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::planner {
namespace {

bool close(double a, double b) { return std::abs(a - b) < 1e-9; }

std::string error_of(const std::string& text) {
    try {
        (void)parse_prices(text, "prices.yaml", PriceTable{});
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError for:\n" << text);
    return "";
}

TEST_CASE("Cost: dollars per million tokens from GPU-hours and throughput", "[planner][cost]") {
    // 2 GPUs × $3/h = $6/h; 5,000 tokens/s = 18 M tokens/h → $6 / 18 = $0.3333… per M tokens.
    CHECK(close(*usd_per_million_tokens(2, 3.0, 5000), 1.0 / 3.0));
    CHECK_FALSE(usd_per_million_tokens(2, 3.0, 0).has_value());  // nothing served: no cost per token
}

TEST_CASE("Cost: three hand-priced configurations rank by $/Mtok", "[planner][cost]") {
    // A: 1 × H200 at $4/h serving 2,000 tok/s → 4 / 7.2 = $0.556/Mtok
    // B: 2 × H100 at $3/h serving 3,600 tok/s → 6 / 12.96 = $0.463/Mtok
    // C: 4 × L40S at $1/h serving 1,000 tok/s → 4 / 3.6 = $1.111/Mtok        ranking: B, A, C
    const PriceTable t = parse_prices("gpus: {H200: 4, H100: 3, L40S: 1}", "prices.yaml", PriceTable{});
    struct Config {
        std::string gpu;
        int gpus;
        double tokens_per_s;
    };
    const std::vector<Config> configs{{"H200", 1, 2000}, {"H100-SXM", 2, 3600}, {"L40S", 4, 1000}};
    std::vector<double> cost;
    for (const auto& c : configs) {
        cost.push_back(*usd_per_million_tokens(c.gpus, t.price(c.gpu), c.tokens_per_s));
    }
    CHECK(close(cost[0], 4.0 / 7.2));
    CHECK(close(cost[1], 6.0 / 12.96));
    CHECK(close(cost[2], 4.0 / 3.6));
    std::vector<std::size_t> order{0, 1, 2};
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] < cost[b]; });
    CHECK(order == std::vector<std::size_t>{1, 0, 2});
}

TEST_CASE("Cost: the Pareto frontier keeps the points no other point beats on both cost and latency",
          "[planner][cost]") {
    // (cost, p99 ms): 0 (1, 900) 1 (2, 400) 2 (2, 500) 3 (3, 450) 4 (5, 100) 5 (1, 950)
    // 5 is beaten by 0 (same cost, faster); 2 by 1; 3 by 1 (cheaper and faster). Frontier by cost: 0, 1, 4.
    const std::vector<double> cost{1, 2, 2, 3, 5, 1};
    const std::vector<double> latency{900, 400, 500, 450, 100, 950};
    CHECK(pareto_frontier(cost, latency) == std::vector<std::size_t>{0, 1, 4});
}

TEST_CASE("Cost: a missing price names the GPU and the priced ones; bad price files name file, line and key",
          "[planner][cost][errors]") {
    const PriceTable t = parse_prices("gpus: {H200: 4}", "prices.yaml", PriceTable{});
    try {
        (void)t.price("L40S");
        FAIL("no error");
    } catch (const ConfigError& e) {
        const std::string m = e.what();
        CHECK(m.find("no price for GPU 'L40S'") != std::string::npos);
        CHECK(m.find("priced GPUs: H200") != std::string::npos);
    }
    CHECK(error_of("gpus: {H200: -1}").find("prices.yaml:1: 'gpus.H200'") != std::string::npos);
    CHECK(error_of("gpus: {H200: cheap}").find("expected a number") != std::string::npos);
    CHECK(error_of("gpus:\n  H900: 2\n").find("prices.yaml:2: 'gpus.H900'") != std::string::npos);
    CHECK(error_of("gpu: {H200: 2}").find("unknown key; allowed: gpus") != std::string::npos);
}

TEST_CASE("Cost: the built-in table holds each GPU file's cited price, with its source and date",
          "[planner][cost]") {
    const PriceTable t = default_prices();
    // calibration/gpus/H200.yaml and H100-SXM.yaml: RunPod's on-demand rates as deploybase.ai tabulated them, March 2026.
    CHECK(t.price("H200") == 6.35);
    CHECK(t.price("H100-SXM") == 4.76);
    const GpuPrice& h200 = t.prices.at("H200");
    CHECK(h200.cited());
    CHECK(h200.date == "2026-03");
    CHECK(h200.source.find("deploybase.ai/articles/runpod-gpu-pricing") != std::string::npos);
    CHECK(t.prices.count("MI300X") == 0);    // its file gives no price: unpriced
    CHECK(t.prices.count("A100-40GB") == 0);  // its uncited late-2025 price was dropped
    for (const auto& [name, p] : t.prices) {
        CHECK(p.cited());  // no built-in price reads as cited without being so
    }
    CHECK(t.source.find("calibration/gpus") != std::string::npos);
}

TEST_CASE("Cost: a price file's entries are cited (source and date) or printed as uncited", "[planner][cost]") {
    const PriceTable t = parse_prices(
        "gpus:\n  H100: 2.49\n  H200: {usd_per_gpu_hour: 3.1, source: \"our reserved contract\", date: 2026-11}\n",
        "mine.yaml", default_prices());
    CHECK(t.prices.at("H100-SXM").usd_per_gpu_hour == 2.49);
    CHECK_FALSE(t.prices.at("H100-SXM").cited());
    CHECK(t.prices.at("H100-SXM").describe(t.source) == "$2.49/GPU-h (mine.yaml, uncited: no source or date given)");
    CHECK(t.prices.at("H200").describe(t.source) == "$3.10/GPU-h (our reserved contract, 2026-11)");
    CHECK(t.prices.at("L40S").cited());  // not named: the built-in cited price stays
    CHECK(error_of("gpus: {H200: {usd_per_gpu_hour: 3, source: x}}").find("a source needs a date") !=
          std::string::npos);
    CHECK(error_of("gpus: {H200: {usd_per_gpu_hour: 3, source: x, date: soon}}")
              .find("'gpus.H200.date': 'soon' is not a date; allowed: YYYY-MM or YYYY-MM-DD") != std::string::npos);
    CHECK(error_of("gpus: {H200: {usd: 3}}").find("'gpus.H200.usd': unknown key") != std::string::npos);
}

TEST_CASE("Cost: a user GPU file's own price is used unless the price table names its GPU", "[planner][cost]") {
    calibration::GpuSpec user;
    user.name = "A40";
    user.file = "scenarios/gpus/gpus/A40.yaml";
    user.usd_per_gpu_hour = 0.40;
    user.price_source = "own contract";
    user.price_date = "2026-12";
    const PriceTable defaults = default_prices();
    CHECK(defaults.price_of(user)->usd_per_gpu_hour == 0.40);
    CHECK(defaults.price_of(user)->source == "own contract");
    CHECK(parse_prices("gpus: {H200: 3}", "p.yaml", defaults).price_of(user)->usd_per_gpu_hour == 0.40);
    PriceTable named = defaults;
    named.prices["A40"] = GpuPrice{0.55, "", ""};  // --prices naming it wins
    CHECK(named.price_of(user)->usd_per_gpu_hour == 0.55);
    // A catalog GPU never falls back to its file: the table decides (a table without it leaves it unpriced).
    calibration::GpuSpec l40s = calibration::find_gpu("L40S");
    CHECK(defaults.price_of(l40s)->usd_per_gpu_hour == 1.40);
    CHECK_FALSE(PriceTable{}.price_of(l40s).has_value());
}

}  // namespace
}  // namespace servesim::planner
