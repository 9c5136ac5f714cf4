// Tests StepCost::out_of_range_term (sim/engine/cost_model.h), the check the replica makes on every step before its
// milliseconds become simulated time: a NaN, infinite or clock-overflowing term is named (the replica then refuses
// the run with the cost model's description), never floored to 1 ns.
#include <cmath>
#include <limits>

#include "sim/engine/cost_model.h"
#include "tests/catch.h"

namespace se = servesim::engine;

TEST_CASE("A usable step has no out-of-range term", "[engine][ranges]") {
    se::StepCost c;
    c.gemm_ms = 12.5;
    c.attn_decode_ms = 3.0;
    CHECK(c.out_of_range_term().empty());
    CHECK(c.duration().ns() == 15'500'000);  // 15.5 ms
}

TEST_CASE("NaN, infinite and beyond-the-clock terms are named", "[engine][ranges]") {
    se::StepCost nan_cost;
    nan_cost.attn_prefill_ms = std::nan("");
    CHECK(nan_cost.out_of_range_term() == "attn_prefill = nan ms");
    se::StepCost huge;
    huge.gemm_ms = 1e300;
    CHECK(huge.out_of_range_term() == "gemm = 1e+300 ms");
    se::StepCost inf_cost;
    inf_cost.comm_ms = std::numeric_limits<double>::infinity();
    CHECK(inf_cost.out_of_range_term() == "comm = inf ms");
    // Two terms each inside 1e12 ms whose sum is not: the total is named.
    se::StepCost sum;
    sum.gemm_ms = 9e11;
    sum.overhead_ms = 9e11;
    CHECK(sum.out_of_range_term() == "total = 1.8e+12 ms");
}
