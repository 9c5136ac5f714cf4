// Tests of planner/slo.*: SLO text as users write it, the errors a typo gets, and the verdict on a summary.
#include "planner/slo.h"

#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::planner {
namespace {

std::string error_of(const std::string& text) {
    try {
        (void)parse_slo(text, "--slo");
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError for '" << text << "'");
    return "";
}

TEST_CASE("SLO: names, units and bounds parse as written", "[planner][slo]") {
    const SloSpec s = parse_slo("ttft_p99=500ms, itl_p99=0.05s,e2el_mean=20000", "--slo");
    REQUIRE(s.bounds.size() == 3);
    CHECK(s.bounds[0].name == "ttft_p99");
    CHECK(s.bounds[0].metric == SloMetric::kTtft);
    CHECK(s.bounds[0].statistic == SloStatistic::kP99);
    CHECK(s.bounds[0].bound_ms == 500);
    CHECK(s.bounds[1].metric == SloMetric::kItl);
    CHECK(s.bounds[1].bound_ms == 50);  // 0.05 s
    CHECK(s.bounds[2].statistic == SloStatistic::kMean);
    CHECK(s.bounds[2].bound_ms == 20000);  // a bare number is ms, as vllm bench serve --goodput takes it
    CHECK(s.describe() == "ttft_p99 ≤ 500 ms, itl_p99 ≤ 50 ms, e2el_mean ≤ 20000 ms");
}

TEST_CASE("SLO: an unknown metric or statistic, a negative or missing bound are refused naming what is allowed",
          "[planner][slo][errors]") {
    const std::string metric = error_of("latency_p99=5ms");
    CHECK(metric.find("--slo") != std::string::npos);
    CHECK(metric.find("unknown metric 'latency'") != std::string::npos);
    CHECK(metric.find("ttft, tpot, itl, e2el, queue") != std::string::npos);
    CHECK(error_of("ttft_p95=5ms").find("unknown statistic 'p95'") != std::string::npos);
    CHECK(error_of("ttft_p99=-5ms").find("must be positive") != std::string::npos);
    CHECK(error_of("ttft_p99=0").find("must be positive") != std::string::npos);
    CHECK(error_of("ttft_p99=fast").find("not a duration") != std::string::npos);
    CHECK(error_of("ttft_p99").find("no '='") != std::string::npos);
    CHECK(error_of("ttft_p99=1s,ttft_p99=2s").find("given twice") != std::string::npos);
    CHECK(error_of(" , ").find("no bound") != std::string::npos);
}

TEST_CASE("SLO: met when every bound holds; an empty distribution never meets a bound", "[planner][slo]") {
    metrics::Summary s;
    s.ttft_ms.count = 10;
    s.ttft_ms.p99 = 480;
    s.itl_ms.count = 100;
    s.itl_ms.p99 = 52.5;
    const SloSpec ok = parse_slo("ttft_p99=500ms", "--slo");
    CHECK(check_slo(ok, s).met);
    const SloVerdict v = check_slo(parse_slo("ttft_p99=500ms,itl_p99=50ms,tpot_p50=10ms", "--slo"), s);
    CHECK_FALSE(v.met);
    REQUIRE(v.violations.size() == 2);
    CHECK(v.violations[0] == "itl_p99 52.5 ms > 50 ms");
    CHECK(v.violations[1] == "tpot_p50 not measured");  // tpot has no samples: not a 0 ms pass
}

}  // namespace
}  // namespace servesim::planner
