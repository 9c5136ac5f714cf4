// p95 of the pooled inter-token latencies (issue 39): the column itl_ms_p95 between itl_ms_p90 and itl_ms_p99 in
// CSV, JSON and the table, and p95_itl_ms in the vllm-bench result when --metric-percentiles asks for 95.
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/output_vllm_bench.h"

namespace servesim::app {
namespace {

bool close(double a, double b) { return std::abs(a - b) < 1e-9 * std::max(1.0, std::abs(b)); }

// One request with 21 output tokens whose 20 gaps are 1, 2, …, 20 ms (exact percentiles).
ExperimentResult twenty_gaps(bool exact) {
    metrics::MetricsCollector m(core::SimTime::zero(), exact, /*keep_request_records=*/true);
    m.on_sent(core::SimTime::zero());
    double last_ms = 100;  // first token at 100 ms
    for (int g = 1; g <= 20; ++g) {
        m.on_token_gap(core::SimTime::zero(), core::Duration::from_ms(g));
        last_ms += g;
    }
    const auto at = [](double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(ms * 1e6))); };
    m.on_finished({core::SimTime::zero(), core::SimTime::zero(), at(100), at(last_ms), 50, 21, 0,
                   core::Duration::from_ms(20), 0});
    ExperimentResult r;
    r.config.name = "gaps";
    r.model_name = "Qwen3-4B";
    r.sim.summary = m.summarize({}, 0, at(last_ms));
    assess_result(r);
    return r;
}

TEST_CASE("Output: itl_ms_p95 sits between p90 and p99 in CSV, JSON, the table and the vllm-bench result",
          "[tools][output]") {
    // 20 samples 1…20 ms, numpy's linear rule: rank q/100·19. p90: 17.1 → 18 + 0.1 = 18.1; p95: 18.05 → 19.05;
    // p99: 18.81 → 19.81.
    const ExperimentResult r = twenty_gaps(true);
    const auto j = nlohmann::ordered_json::parse(format_json({r}));
    CHECK(close(j[0]["itl_ms_p90"].get<double>(), 18.1));
    CHECK(close(j[0]["itl_ms_p95"].get<double>(), 19.05));
    CHECK(close(j[0]["itl_ms_p99"].get<double>(), 19.81));
    const std::string csv = format_csv({r});
    CHECK(csv.find("itl_ms_p50,itl_ms_p90,itl_ms_p95,itl_ms_p99,itl_ms_mean") != std::string::npos);
    // Only ITL has it: TTFT keeps p50, p90, p99.
    CHECK(csv.find("ttft_ms_p95") == std::string::npos);
    const std::string table = format_table({r}, false);
    CHECK(table.find("\nitl_ms_p95 ") != std::string::npos);
    CHECK(table.find("19.050") != std::string::npos);
    // vllm bench serve --metric-percentiles 90,95,99: p95_itl_ms between the others.
    const BenchOptions options = parse_bench_options("itl", "90,95,99");
    check_bench_percentiles(options);  // 95 is given now
    const auto bench = to_vllm_bench(r, options);
    CHECK(close(bench["p95_itl_ms"].get<double>(), 19.05));
    CHECK(close(bench["p99_itl_ms"].get<double>(), 19.81));
    // The default fixed-memory sketch gives it within its 0.1 % bound.
    const ExperimentResult sketched = twenty_gaps(false);
    CHECK(std::abs(sketched.sim.summary.itl_ms.p95 - 19.05) <= 19.05 * 1e-3);
}

TEST_CASE("CLI: --metric-percentiles 95 gives p95_itl_ms (97 is refused: bench_percentiles_cli_test)", "[tools][cli][output]") {
    const auto ok = servesim::test::run_servesim(
        "run --model Qwen3-4B --num-prompts 20 --random-output-len 20 --metric-percentiles 50,95 --format vllm-bench",
        "", false);
    REQUIRE(ok.status == 0);
    const auto j = nlohmann::json::parse(ok.output);
    REQUIRE(j["p95_itl_ms"].is_number());
    REQUIRE(j["p50_itl_ms"].is_number());
    CHECK(j["p95_itl_ms"].get<double>() >= j["p50_itl_ms"].get<double>());
}

}  // namespace
}  // namespace servesim::app
