// Tests of tools/app/plan.*: the planner's answers on a synthetic server worked out by hand — the largest
// sustainable rate (bisection), the fewest replicas for a target rate — and bad input refused before simulating.
//
// The server (tests/fixtures/planner/one-at-a-time.yaml): one request per step (max_num_seqs 1), every step 10 ms
// (the constant-10ms profile), each request a 16-token prompt with 1 output token, so it finishes in its first
// step; 200 requests at constant intervals 1/R. Below 100 req/s nothing queues: TTFT = 10 ms. Above, the server is
// busy from the first arrival and request k starts at 10k ms: TTFT_k = 10 + k·(10 − 1000/R) ms, largest for
// k = 199. With the SLO ttft_max ≤ 25 ms: 199·(10 − 1000/R) ≤ 15 ⟺ R ≤ 1000/(10 − 15/199) = 100.7595 req/s.
#include "tools/app/plan.h"

#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::app {
namespace {

const std::string kScenario = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/planner/one-at-a-time.yaml";

PlanRequest base_request() {
    PlanRequest r;
    r.scenario_path = kScenario;
    std::ifstream in(kScenario);
    std::stringstream ss;
    ss << in.rdbuf();
    r.scenario_text = ss.str();
    r.slo = planner::parse_slo("ttft_max=25ms", "--slo");
    r.prices = planner::parse_prices("gpus: {H100: 2}", "prices.yaml", planner::PriceTable{});
    r.jobs = 2;
    return r;
}

std::string error_of(const PlanRequest& r) {
    try {
        (void)run_plan(r, {});
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

TEST_CASE("Plan: bisection finds the largest sustainable rate of a server worked out by hand", "[planner][plan]") {
    // Start 25, tolerance 0.5 %: 25 ✓ 50 ✓ 100 ✓ 200 ✗ → bisect 150 ✗ 125 ✗ 112.5 ✗ 106.25 ✗ 103.125 ✗
    // 101.5625 ✗ 100.78125 ✗ (> 100.7595) 100.390625 ✓ → [100.39, 100.78]: 0.39 ≤ 0.005 × 100.39, stop.
    PlanRequest r = base_request();
    r.load_start = 25;
    r.rel_tolerance = 0.005;
    const PlanResult res = run_plan(r, {});
    REQUIRE(res.configurations.size() == 1);
    const auto& a = res.configurations[0].answer;
    CHECK(a.kind == planner::ThresholdAnswer::Kind::kFound);
    CHECK(*a.best == 100.390625);
    CHECK(*a.first_failing == 100.78125);
    std::vector<double> loads;
    for (const auto& p : res.probes) {
        loads.push_back(p.load);
    }
    CHECK(loads == std::vector<double>{25, 50, 100, 200, 150, 125, 112.5, 106.25, 103.125, 101.5625, 100.78125,
                                       100.390625});
    // A hopeless probe stops early: at 200 req/s the server falls behind by 100 req/s, so more than
    // ceil(5 % × 200) = 10 requests wait once ~20 are sent, and the rest of the run is not simulated.
    const auto& over = res.probes[3];
    REQUIRE(over.load == 200);
    REQUIRE(!over.violations.empty());
    CHECK(over.violations.front().find("stopped early: more than 10 requests waiting") != std::string::npos);
    CHECK(over.summaries.front().num_requests_sent < 200);
    // At the answer: 1 GPU at $2/h serving 100.39 req/s × 17 tokens ≈ 1,707 tokens/s → ≈ $0.33 per M tokens.
    const auto& c = res.configurations[0];
    CHECK(c.gpus == 1);
    REQUIRE(c.usd_per_mtok.has_value());
    CHECK(*c.usd_per_mtok > 0.30);
    CHECK(*c.usd_per_mtok < 0.36);
}

TEST_CASE("Plan: the fewest replicas for a target rate, round-robin over replicas worked out by hand",
          "[planner][plan]") {
    // 250 req/s round-robin over r replicas: each gets constant arrivals at 250/r, which passes iff
    // 250/r ≤ 100.7595 ⟺ r ≥ 2.48. From the scenario's 1: 1 ✗, 2 ✗, 4 ✓, 3 ✓ → 3 replicas = 3 GPUs.
    PlanRequest r = base_request();
    r.target_load = 250;
    const PlanResult res = run_plan(r, {});
    const auto& c = res.configurations[0];
    CHECK(*c.answer.best == 3);
    CHECK(*c.answer.first_failing == 2);
    CHECK(c.gpus == 3);
    std::vector<int> replicas;
    for (const auto& p : res.probes) {
        replicas.push_back(p.replicas);
    }
    CHECK(replicas == std::vector<int>{1, 2, 4, 3});
}

TEST_CASE("Plan: the same answer and output whatever the thread count", "[planner][plan][determinism]") {
    PlanRequest r = base_request();
    r.load_start = 25;
    r.replicates = 2;
    r.jobs = 1;
    const std::string one = format_plan_json(r, run_plan(r, {}));
    r.jobs = 3;
    CHECK(format_plan_json(r, run_plan(r, {})) == one);
}

TEST_CASE("Plan: a grid key that does not exist, a GPU without a price, and a searched key in the grid are refused "
          "before simulating",
          "[planner][plan][errors]") {
    PlanRequest r = base_request();
    r.grid.push_back(parse_grid_axis("engine.blok_size=16,32"));
    const std::string key = error_of(r);
    CHECK(key.find("blok_size") != std::string::npos);
    CHECK(key.find("block_size") != std::string::npos);  // the allowed keys are listed

    PlanRequest p = base_request();
    p.grid.push_back(parse_grid_axis("gpu=H100,L40S"));
    const std::string price = error_of(p);
    CHECK(price.find("no price for GPU 'L40S'") != std::string::npos);

    PlanRequest s = base_request();
    s.grid.push_back(parse_grid_axis("workload.rate=1,2"));
    CHECK(error_of(s).find("what the planner searches") != std::string::npos);

    CHECK_THROWS_AS(parse_grid_axis("gpu="), ConfigError);
    CHECK_THROWS_AS(parse_grid_axis("gpu=H100,,H200"), ConfigError);
}

}  // namespace
}  // namespace servesim::app
