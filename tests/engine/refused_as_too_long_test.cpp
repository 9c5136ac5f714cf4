// engine::refused_as_too_long: vLLM's frontend check (prompt + max_tokens > max_model_len, or an empty prompt) that
// Replica::add_request applies and cluster::route_arrival reads to skip hashing a prompt no replica will take
// (issue 41: a 10^8-token prompt under the llm_d router took 1.9 s and 218 MB to be refused; now 0.04 s, 16 MB).
#include "sim/engine/replica.h"

#include "tests/catch.h"

using servesim::engine::refused_as_too_long;

TEST_CASE("a request longer than max_model_len, or with an empty prompt, is refused", "[engine]") {
    // max_model_len 4,096: 3,968 + 128 = 4,096 fits exactly; one more prompt token does not.
    CHECK_FALSE(refused_as_too_long(3968, 128, 4096));
    CHECK(refused_as_too_long(3969, 128, 4096));
    CHECK(refused_as_too_long(0, 10, 4096));
}
