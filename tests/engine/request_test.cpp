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

TEST_CASE("Request: the hasher is called only from the next block end, and hashes as a fresh hasher does",
          "[engine][request]") {
    // 40 prompt tokens, block 16: 2 blocks hashed, the next ends at 48 tokens, so tokens 41..47 skip the hasher
    // and token 48 (8th answer token) hashes block 2; then the mark is 64. Without hashing it never calls.
    Request r = make(true);
    CHECK(r.next_hash_at_tokens == 48);
    for (int i = 0; i < 7; ++i) {
        r.append_output_token();
        CHECK(r.block_hashes.size() == 2);
    }
    r.append_output_token();
    CHECK(r.num_tokens() == 48);
    CHECK(r.block_hashes.size() == 3);
    CHECK(r.next_hash_at_tokens == 64);
    std::vector<core::BlockHash> fresh;
    cache::BlockHasher(16).extend(fresh, r.content(), r.num_tokens());
    CHECK(fresh == r.block_hashes);
    CHECK(make(false).next_hash_at_tokens == std::numeric_limits<std::int64_t>::max());
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

TEST_CASE("Request: a prompt hashed by the router is taken as is and extends as if the request had hashed it",
          "[engine][request]") {
    // Prompt of two runs, 20 + 28 = 48 tokens at block size 16: 3 full blocks, the cursor at the end of run 2. The
    // router hashes the prompt (no answer run) with a memo; the request takes the hashes and its own hasher then
    // hashes the answer's blocks: after 16 answer tokens (64 tokens) block 4 exists and equals the one of a request
    // that hashed everything itself.
    const core::TokenContent prompt{{core::ContentId{7}, 20}, {core::ContentId{8}, 28}};
    cache::FirstRunHashMemo router_memo(16);
    cache::HashedPrompt hashed{{}, cache::BlockHasher(16)};
    hashed.hasher.extend(hashed.hashes, prompt, 48, &router_memo);
    REQUIRE(hashed.hashes.size() == 3);
    Request taken(core::RequestId{1}, prompt, 20, core::ContentId{9}, core::SimTime::zero(), 16, nullptr, true,
                  &hashed);
    Request own(core::RequestId{2}, prompt, 20, core::ContentId{9}, core::SimTime::zero(), 16, nullptr, true);
    CHECK(taken.block_hashes == own.block_hashes);
    for (int i = 0; i < 16; ++i) {
        taken.append_output_token();
        own.append_output_token();
    }
    REQUIRE(own.block_hashes.size() == 4);
    CHECK(taken.block_hashes == own.block_hashes);
}

TEST_CASE("Request: hashes computed at another block size are refused", "[engine][request]") {
    cache::HashedPrompt hashed{{}, cache::BlockHasher(32)};
    const core::TokenContent prompt{{core::ContentId{7}, 64}};
    hashed.hasher.extend(hashed.hashes, prompt, 64);
    CHECK_THROWS(Request(core::RequestId{1}, prompt, 4, core::ContentId{9}, core::SimTime::zero(), 16, nullptr, true,
                         &hashed));
}
