// Tests of sim/engine/grouped_gemm_efficiency.h: the routed experts' share of a dense GEMM's efficiency by tokens per
// expert, read between the points (the H100 table's efficiency × vLLM's fused/grouped speed) in log2(m_e) and held
// beyond them.
#include "sim/engine/grouped_gemm_efficiency.h"

#include "tests/catch.h"

namespace servesim::engine {
namespace {

TEST_CASE("GroupedGemmEfficiency reads the H100 table's points, linear in log2 of tokens per expert", "[engine]") {
    // At a point: its efficiency over the dense 0.72. 256 tokens per expert: 0.411 · 0.8981 = 0.369119 → 0.512665.
    CHECK(GroupedGemmEfficiency::ratio(256) == Approx(0.512665).epsilon(1e-5));
    // Half-way in log2 between 256 and 512 (m_e = 362.04): (0.369119 + 0.532 · 0.8592 = 0.457094) / 2 / 0.72 =
    // 0.573759.
    CHECK(GroupedGemmEfficiency::ratio(362.038672) == Approx(0.573759).epsilon(1e-5));
    // A quarter of the way from 128 (0.239 · 1.0906 = 0.260653) to 256: 0.260653 + 0.25 · 0.108466 = 0.287770 →
    // 0.399680.
    CHECK(GroupedGemmEfficiency::ratio(152.219042) == Approx(0.399680).epsilon(1e-5));
}

TEST_CASE("GroupedGemmEfficiency holds its end points beyond the table", "[engine]") {
    // Below 128 tokens per expert the table's experts stream their weights; the ratio holds 0.260653 / 0.72 =
    // 0.362019.
    CHECK(GroupedGemmEfficiency::ratio(1) == Approx(0.362019).epsilon(1e-5));
    CHECK(GroupedGemmEfficiency::ratio(64) == GroupedGemmEfficiency::ratio(128));
    // From 1,024 on: 0.655 · 0.8463 / 0.72 = 0.769898.
    CHECK(GroupedGemmEfficiency::ratio(1024) == Approx(0.769898).epsilon(1e-5));
    CHECK(GroupedGemmEfficiency::ratio(65536) == GroupedGemmEfficiency::ratio(1024));
}

}  // namespace
}  // namespace servesim::engine
