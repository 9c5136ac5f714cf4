// Tests of sim/engine/request.h: block hashes are kept only where something reads them (vLLM EngineCore builds its
// request_block_hasher only with prefix caching or a KV connector), and when kept they cover every full block.
#include "sim/engine/request.h"

#include "tests/catch.h"

using namespace servesim;
using namespace servesim::engine;

namespace {

Request make(bool hash_blocks, cache::FirstRunHashMemo* memo = nullptr) {
    // 40 prompt tokens at block size 16: 2 full blocks; 3 answer tokens more make 43 → still 2; 6 more → 49 → 3.
    return Request(core::RequestId{1}, core::TokenContent{{core::ContentId{7}, 40}}, 10, core::ContentId{9},
                   core::SimTime::zero(), 16, memo, hash_blocks);
}

}  // namespace

TEST_CASE("Request: with hashing on, every full block of prompt and answer is hashed as tokens arrive",
          "[engine][request]") {
    Request r = make(true);
    CHECK(r.block_hashes.size() == 2);
    for (int i = 0; i < 9; ++i) {
        r.append_output_token();
    }
    CHECK(r.num_tokens() == 49);
    CHECK(r.block_hashes.size() == 3);
}

TEST_CASE("Request: with hashing off, no hash is computed nor recorded in the memo", "[engine][request]") {
    cache::FirstRunHashMemo memo(16);
    Request r = make(false, &memo);
    for (int i = 0; i < 9; ++i) {
        r.append_output_token();
    }
    CHECK(r.num_tokens() == 49);
    CHECK(r.block_hashes.empty());
    CHECK(memo.find(core::ContentId{7}) == nullptr);
    // The same request with hashing on records its first run's 2 full blocks.
    Request on = make(true, &memo);
    REQUIRE(memo.find(core::ContentId{7}) != nullptr);
    CHECK(memo.find(core::ContentId{7})->size() == 2);
}
