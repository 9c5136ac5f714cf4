// The `vllm_dp` router: vLLM's data-parallel load balancer score (v1/engine/core_client.py), chosen by name.
#include "sim/cluster/router.h"

#include <vector>

#include "tests/catch.h"

using servesim::cluster::ReplicaLoad;

TEST_CASE("Router vllm_dp: the lowest 4·waiting + running wins, where least_loaded picks another replica",
          "[tools][router]") {
    // Replica 0: 1 waiting, 0 running → 4·1 + 0 = 4; replica 1: 0 waiting, 3 running → 3. vllm_dp picks 1.
    // least_loaded (waiting + running) sees 1 vs 3 and picks 0.
    const std::vector<ReplicaLoad> loads{{1, 0}, {0, 3}};
    auto dp = servesim::cluster::make_router("vllm_dp");
    auto least = servesim::cluster::make_router("least_loaded");
    REQUIRE(dp->needs_loads());
    CHECK(dp->route({}, loads) == 1);
    CHECK(least->route({}, loads) == 0);
    // Ties (4·0 + 4 = 4 against 4·1 + 0 = 4) go to the lowest index.
    CHECK(dp->route({}, {{0, 4}, {1, 0}}) == 0);
}
