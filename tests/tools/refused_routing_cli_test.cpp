// A prompt no replica will take is refused without its prompt being hashed for a cache-aware router (issue 41;
// sim/cluster/simulation.h route_arrival, engine::refused_as_too_long).
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

TEST_CASE("CLI: prompts too long for max_model_len are refused under a cache-aware router", "[tools][cli][router]") {
    const auto r = servesim::test::run_servesim(
        "run --model Qwen3-4B --random-input-len 100000000 --num-prompts 3 --set cluster.replicas=2 "
        "--set cluster.router=llm_d");
    CHECK(r.status == 0);
    CHECK(servesim::test::contains(r.output, "3 of 3 requests rejected: 3 longer than max_model_len: prompt + output "
                                             "up to 100,000,000 + 128 = 100,000,128 > max_model_len 40,960"));
}
