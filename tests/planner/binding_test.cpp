// Tests of planner/binding.*: which limit binds an answer, the headroom on each SLO, and band rounding, worked by
// hand.
#include "planner/binding.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/catch.h"

namespace servesim::planner {
namespace {

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

const SloSpec kSlo = parse_slo("ttft_p99=2s,tpot_p99=50ms", "--slo");

TEST_CASE("Binding: the SLO broken by the largest factor at the nearest failing probe binds", "[planner][binding]") {
    // At the answer TTFT p99 300 ms, TPOT p99 45 ms: headroom (2000 − 300)/2000 = 85 %, (50 − 45)/50 = 10 %.
    // At the failing probe TTFT p99 2,200 ms (×1.10 the bound) and TPOT p99 60 ms (×1.20): TPOT binds.
    FailingReading f;
    f.slo_values_ms = {2200.0, 60.0};
    const Binding b = find_binding(kSlo, {300.0, 45.0}, f);
    CHECK(b.kind == Binding::Kind::kSlo);
    CHECK(b.slo_index == 1);
    CHECK(b.name(kSlo) == "tpot_p99");
    REQUIRE(b.headroom_pct.size() == 2);
    CHECK(close(*b.headroom_pct[0], 85.0));
    CHECK(close(*b.headroom_pct[1], 10.0));
    // TTFT p99 2,600 ms (×1.30) beats TPOT's ×1.20: TTFT binds.
    f.slo_values_ms = {2600.0, 60.0};
    CHECK(find_binding(kSlo, {300.0, 45.0}, f).name(kSlo) == "ttft_p99");
}

TEST_CASE("Binding: every SLO held where the load failed, so the server's capacity binds", "[planner][binding]") {
    // Failing probe: TTFT 1,900 ms, TPOT 49 ms (both under their bounds), the queue grew: capacity, with its reason.
    FailingReading f;
    f.slo_values_ms = {1900.0, 49.0};
    f.other_reason = "7.5 % of requests still queued at the last send: the queue grows";
    const Binding b = find_binding(kSlo, {250.0, 30.0}, f);
    CHECK(b.kind == Binding::Kind::kCapacity);
    CHECK(b.name(kSlo) == "capacity");
    CHECK(b.reason == f.other_reason);
    CHECK(close(*b.headroom_pct[1], 40.0));  // (50 − 30) / 50
    // A probe stopped early has no latencies to read: capacity, whatever its (absent) values.
    FailingReading stopped;
    stopped.stopped = true;
    CHECK(find_binding(kSlo, {250.0, 30.0}, stopped).reason == "stopped early: the queue only grew");
    // No failing probe (the range's most demanding value passed): nothing binds.
    const Binding none = find_binding(kSlo, {250.0, 30.0}, std::nullopt);
    CHECK(none.kind == Binding::Kind::kNone);
    CHECK(none.name(kSlo) == "none");
    // A statistic the answer did not measure has no headroom.
    CHECK_FALSE(find_binding(kSlo, {250.0, std::nullopt}, std::nullopt).headroom_pct[1].has_value());
}

TEST_CASE("Binding: figures rounded to the step the band supports", "[planner][binding]") {
    // ±10.3 % (the H100 roofline ITL band's larger side): 17.25 × 0.103 = 1.78 → step 1 → 17;
    // 100.39 × 0.103 = 10.3 → step 10 → 100; 1.72 × 0.103 = 0.177 → step 0.1 → 1.7; 0.01894 → 0.00195 → 0.001 → 0.019.
    CHECK(format_to_band(17.25, 10.3) == "17");
    CHECK(format_to_band(100.39, 10.3) == "100");
    CHECK(format_to_band(1.72, 10.3) == "1.7");
    CHECK(format_to_band(0.01894, 10.3) == "0.019");
    CHECK(round_to_band(18734.0, 10.3) == 19000.0);  // 1,930 → step 1,000
    // ±2 % (a bisection's tolerance alone): 17.25 × 0.02 = 0.345 → step 0.1 → 17.3 (17.25 rounds half away).
    CHECK(format_to_band(17.25, 2.0) == "17.3");
    // Not validated: two significant digits, whatever the value.
    CHECK(format_to_band(17.25, std::nullopt) == "17");
    CHECK(format_to_band(1234.5, std::nullopt) == "1200");
    CHECK(format_to_band(0.04567, std::nullopt) == "0.046");
    CHECK(format_to_band(0.0, 10.3) == "0");
}

}  // namespace
}  // namespace servesim::planner
