// Tests of sim/engine/grouped_gemm_efficiency.h: the routed experts' share of a dense GEMM's efficiency by tokens per
// expert, read between the points (the H100 table's efficiency × vLLM's fused/grouped speed) in log2(m_e) and held
// beyond them.
#include "sim/engine/grouped_gemm_efficiency.h"

#include "tests/catch.h"

namespace servesim::engine {
namespace {

TEST_CASE("GroupedGemmEfficiency reads the H100 table's points, linear in log2 of tokens per expert", "[engine]") {
    // At a point: its efficiency over the dense 0.72. 256 tokens per expert: 0.411 · 0.907 = 0.372777 → 0.517746.
    CHECK(GroupedGemmEfficiency::ratio(256) == Approx(0.517746).epsilon(1e-5));
    // Half-way in log2 between 256 and 512 (m_e = 362.04): (0.372777 + 0.532 · 0.864 = 0.459648) / 2 / 0.72 =
    // 0.578073.
    CHECK(GroupedGemmEfficiency::ratio(362.038672) == Approx(0.578073).epsilon(1e-5));
    // A quarter of the way from 128 (0.239 · 1.0642 = 0.254344) to 256: 0.254344 + 0.25 · 0.118433 = 0.283952 →
    // 0.394378.
    CHECK(GroupedGemmEfficiency::ratio(152.219042) == Approx(0.394378).epsilon(1e-5));
}

TEST_CASE("GroupedGemmEfficiency holds its end points beyond the table", "[engine]") {
    // Below 128 tokens per expert the table's experts stream their weights; the ratio holds 0.254344 / 0.72 =
    // 0.353256.
    CHECK(GroupedGemmEfficiency::ratio(1) == Approx(0.353256).epsilon(1e-5));
    CHECK(GroupedGemmEfficiency::ratio(64) == GroupedGemmEfficiency::ratio(128));
    // From 1,024 on: 0.655 · 0.821 / 0.72 = 0.746882.
    CHECK(GroupedGemmEfficiency::ratio(1024) == Approx(0.746882).epsilon(1e-5));
    CHECK(GroupedGemmEfficiency::ratio(65536) == GroupedGemmEfficiency::ratio(1024));
}

}  // namespace
}  // namespace servesim::engine
