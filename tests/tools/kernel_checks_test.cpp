// Tests of tools/app/kernel_checks.*: the table `inspect --check-kernels` composes the torch-timed forwards with.
#include "tools/app/kernel_checks.h"

#include <string>

#include "calibration/kernel_table.h"
#include "tests/catch.h"

namespace servesim::app {
namespace {

const std::string kTable = R"(servesim_kernel_table: 1
gpu: H100-SXM
date: 2026-12-06
ops:
  moe_routing:
    - {experts: 128, top_k: 8, hidden: 2048, tokens: [1, 256], us: [50, 90]}
)";
const std::string kFused = R"(  moe_routing_fused:
    - {experts: 128, top_k: 8, hidden: 2048, tokens: [1, 256], us: [5, 9], backend: triton}
)";

TEST_CASE("check-kernels composes the torch-timed forwards with the torch routing the forwards ran", "[tools]") {
    // The cost model reads vLLM's fused routing (5 µs at one token); the sweep's forwards routed with torch ops
    // (50 µs), so their composition must read those, or every MoE forward would come out 45 µs a layer fast.
    const calibration::KernelTable both = calibration::parse_kernel_table(kTable + kFused, "t.yaml");
    REQUIRE(both.routing_fused);
    REQUIRE(both.moe_routing.at(0).tokens.at(1) == 5);
    const calibration::KernelTable timed = as_timed_forwards(both);
    CHECK_FALSE(timed.routing_fused);
    REQUIRE(timed.moe_routing.size() == 1);
    CHECK(timed.moe_routing[0].tokens.at(1) == 50);
    CHECK(timed.moe_routing[0].tokens.at(256) == 90);
}

TEST_CASE("check-kernels leaves a table without fused routing as it is", "[tools]") {
    const calibration::KernelTable torch_only = calibration::parse_kernel_table(kTable, "t.yaml");
    const calibration::KernelTable timed = as_timed_forwards(torch_only);
    CHECK_FALSE(timed.routing_fused);
    REQUIRE(timed.moe_routing.size() == 1);
    CHECK(timed.moe_routing[0].tokens.at(1) == 50);
}

}  // namespace
}  // namespace servesim::app
