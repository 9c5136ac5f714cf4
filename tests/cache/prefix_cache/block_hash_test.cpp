// Tests of sim/cache/prefix_cache/block_hash.*: chained hashes over content runs (docs/VLLM-RULES.md §10 item 4).
#include "sim/cache/prefix_cache/block_hash.h"

#include <vector>

#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::hash_all;
using testing::run;

TEST_CASE("BlockHasher hashes only full blocks", "[cache]") {
    // 2,000 tokens at B = 16: floor(2000/16) = 125 blocks; at B = 528: 3; at B = 1056: 1.
    const core::TokenContent runs{run(1, 1200), run(2, 800)};
    CHECK(hash_all(runs, 16).size() == 125);
    CHECK(hash_all(runs, 528).size() == 3);
    CHECK(hash_all(runs, 1056).size() == 1);
    CHECK(hash_all({run(1, 15)}, 16).empty());
}

TEST_CASE("BlockHasher gives equal hashes exactly for equal prefixes", "[cache]") {
    for (const int block_size : {16, 528, 1056}) {
        // a and b share the 3,000-token system prompt and the first 100 tokens of the user message, then differ at
        // token 3,100: blocks ending at or before 3,100 match, every later block differs (the chain).
        const core::TokenContent a{run(7, 3000), run(8, 100), run(9, 900)};
        const core::TokenContent b{run(7, 3000), run(8, 100), run(10, 900)};
        const auto ha = hash_all(a, block_size);
        const auto hb = hash_all(b, block_size);
        REQUIRE(ha.size() == hb.size());
        const std::size_t num_equal = 3100 / static_cast<std::size_t>(block_size);
        for (std::size_t i = 0; i < ha.size(); ++i) {
            INFO("block size " << block_size << " block " << i);
            CHECK((ha[i] == hb[i]) == (i < num_equal));
        }
        // All hashes of one sequence are distinct.
        for (std::size_t i = 1; i < ha.size(); ++i) {
            CHECK(ha[i] != ha[i - 1]);
        }
    }
}

TEST_CASE("BlockHasher treats a run split in two as different tokens", "[cache]") {
    // (A, 32) is tokens (A,0..31); (A,16)(A,16) is (A,0..15)(A,0..15): block 0 equal, block 1 not.
    const auto whole = hash_all({run(1, 32)}, 16);
    const auto split = hash_all({run(1, 16), run(1, 16)}, 16);
    CHECK(whole[0] == split[0]);
    CHECK(whole[1] != split[1]);
    // Zero-length runs contribute nothing.
    CHECK(hash_all({run(1, 10), run(5, 0), run(2, 22)}, 16) == hash_all({run(1, 10), run(2, 22)}, 16));
}

TEST_CASE("BlockHasher extended incrementally equals hashing from scratch", "[cache]") {
    for (const int block_size : {16, 528, 1056}) {
        // A dialogue: system prompt, user message, then an answer generated a few tokens at a time, then a new turn.
        core::TokenContent runs{run(1, 700), run(2, 333)};
        BlockHasher hasher(block_size);
        std::vector<core::BlockHash> incremental;
        hasher.extend(incremental, runs, core::total_tokens(runs));
        runs.push_back(run(3, 0));
        for (int step = 0; step < 300; ++step) {
            runs.back().length_tokens += 7;
            hasher.extend(incremental, runs, core::total_tokens(runs));
        }
        runs.push_back(run(4, 1500));
        // Hash only part of the new turn first, then the rest.
        hasher.extend(incremental, runs, core::total_tokens(runs) - 700);
        hasher.extend(incremental, runs, core::total_tokens(runs));
        INFO("block size " << block_size);
        CHECK(incremental == hash_all(runs, block_size));
        CHECK(incremental.size() == static_cast<std::size_t>(core::total_tokens(runs) / block_size));
    }
}

TEST_CASE("BlockHasher's one-block decode case gives the general routine's hashes", "[cache]") {
    // Block size 4. Prompt runs (1, 6) (2, 6): 12 tokens, blocks 0–2 hashed in one call (the general routine):
    // block 0 = piece (1, 0, 4), block 1 = (1, 4, 2) (2, 0, 2), block 2 = (2, 2, 4). The cursor stays at run 1's
    // end, a block boundary that is also a run boundary. The answer run 3 then grows one token at a time (a decode
    // step each): at 16 tokens block 3 = (3, 0, 4), with the cursor still in the run before the answer (the general
    // routine steps over it); at 20 tokens block 4 = (3, 4, 4), at 24 block 5 = (3, 8, 4): one block inside the last
    // run each (the one-block case).
    // A piece (c, o, l) mixes c, o and l into the hash, in that order.
    const auto piece = [](std::uint64_t h, std::uint64_t content, std::uint64_t offset, std::uint64_t length) {
        return core::hash_combine(core::hash_combine(core::hash_combine(h, content), offset), length);
    };
    const std::uint64_t b0 = piece(BlockHasher::kNoneHashSeed, 1, 0, 4);
    const std::uint64_t block1 = piece(piece(b0, 1, 4, 2), 2, 0, 2);  // (1, 4, 2) then (2, 0, 2)
    const std::uint64_t block2 = piece(block1, 2, 2, 4);
    const std::uint64_t block3 = piece(block2, 3, 0, 4);
    const std::uint64_t block4 = piece(block3, 3, 4, 4);
    const std::uint64_t block5 = piece(block4, 3, 8, 4);

    core::TokenContent runs{run(1, 6), run(2, 6), run(3, 0)};
    BlockHasher hasher(4);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, runs, 12);
    REQUIRE(hashes.size() == 3);
    for (int token = 0; token < 13; ++token) {  // answer tokens 1..13: 25 tokens, 6 blocks
        ++runs.back().length_tokens;
        hasher.extend(hashes, runs, core::total_tokens(runs));
    }
    const std::vector<core::BlockHash> expected{core::BlockHash{b0},     core::BlockHash{block1},
                                                core::BlockHash{block2}, core::BlockHash{block3},
                                                core::BlockHash{block4}, core::BlockHash{block5}};
    CHECK(hashes == expected);
    CHECK(hashes == hash_all(runs, 4));
    // The cursor is where the general routine leaves it: 24 tokens hashed, offset 12 of run 2 (the answer).
    CHECK(hasher.cursor().run_index == 2);
    CHECK(hasher.cursor().offset_in_run == 12);
    CHECK(hasher.cursor().num_hashed_blocks == 6);
    CHECK(hasher.next_block_end_tokens() == 28);

    // Every prompt length from 1 to 40 and block sizes 1, 4, 16: a decode token at a time equals one pass.
    for (const int block_size : {1, 4, 16}) {
        for (std::int64_t prompt = 1; prompt <= 40; ++prompt) {
            core::TokenContent r{run(5, prompt), run(6, 0)};
            BlockHasher h(block_size);
            std::vector<core::BlockHash> got;
            h.extend(got, r, prompt);
            for (int token = 0; token < 3 * block_size + 5; ++token) {
                ++r.back().length_tokens;
                h.extend(got, r, core::total_tokens(r));
            }
            INFO("block size " << block_size << " prompt " << prompt);
            CHECK(got == hash_all(r, block_size));
        }
    }
}

TEST_CASE("FirstRunHashMemo gives the hashes computed without it", "[cache]") {
    // Block size 4. Request A opens with run 1 of 10 tokens: blocks 0, 1 lie inside it (memo records 2 hashes).
    // B shares run 1 but diverges at token 10; C opens with run 1 cut to 6 tokens (1 block inside); D opens with an
    // empty run, so nothing is "inside the first run" and the memo is not used.
    FirstRunHashMemo memo(4);
    const std::vector<core::TokenContent> requests = {
        {run(1, 10), run(2, 7)}, {run(1, 10), run(3, 9)}, {run(1, 6), run(4, 8)}, {run(1, 0), run(1, 12)}};
    for (const auto& runs : requests) {
        BlockHasher hasher(4);
        std::vector<core::BlockHash> hashes;
        hasher.extend(hashes, runs, core::total_tokens(runs), &memo);
        CHECK(hashes == hash_all(runs, 4));
    }
    const auto* known = memo.find(core::ContentId{1});
    REQUIRE(known != nullptr);
    CHECK(known->size() == 2);
    // A memo for another block size is ignored.
    FirstRunHashMemo other(8);
    BlockHasher hasher(4);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, requests[0], 17, &other);
    CHECK(hashes == hash_all(requests[0], 4));
    CHECK(other.find(core::ContentId{1}) == nullptr);
}

TEST_CASE("FirstRunHashMemo turns itself off when first runs never repeat, and not when one does", "[cache]") {
    // Block size 4; each request opens with an 8-token run (2 blocks inside it). 1,024 distinct first runs: the
    // 1,024th lookup has still found nothing, so the memo frees its 1,023 recorded entries and stops; the hashes are
    // still right. With one repeat among the first 1,024 (request 500 reuses run 0) it stays on.
    FirstRunHashMemo unique(4);
    FirstRunHashMemo repeating(4);
    for (std::uint64_t i = 0; i < 1100; ++i) {
        const core::TokenContent runs = {run(1000 + i, 8), run(1, 3)};
        const core::TokenContent again = {run(1000 + (i == 500 ? 0 : i), 8), run(1, 3)};
        BlockHasher a(4);
        BlockHasher b(4);
        std::vector<core::BlockHash> ha;
        std::vector<core::BlockHash> hb;
        a.extend(ha, runs, 11, &unique);
        b.extend(hb, again, 11, &repeating);
        CHECK(ha == hash_all(runs, 4));
        CHECK(hb == hash_all(again, 4));
        if (i == 1022) {
            CHECK(unique.enabled());  // 1,023 lookups so far
        }
    }
    CHECK_FALSE(unique.enabled());
    CHECK(unique.find(core::ContentId{1000}) == nullptr);
    CHECK(unique.find(core::ContentId{2099}) == nullptr);
    CHECK(repeating.enabled());
    REQUIRE(repeating.find(core::ContentId{2099}) != nullptr);
    CHECK(repeating.find(core::ContentId{2099})->size() == 2);
}

}  // namespace
}  // namespace servesim::cache
