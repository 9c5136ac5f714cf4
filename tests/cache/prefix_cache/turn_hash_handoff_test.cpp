// Tests of sim/cache/prefix_cache/turn_hash_handoff.*: a finished turn's block hashes and hasher cursor handed to the
// next turn of its dialogue give exactly the hashes computed from token 0 (vLLM hashes each request from scratch).
#include "sim/cache/prefix_cache/turn_hash_handoff.h"

#include <vector>

#include "sim/cache/prefix_cache/block_hash.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::hash_all;
using testing::run;

// A finished turn as engine::Replica parks it: its content (prompt runs, then the answer run at full length), the
// hashes of its full blocks and where its hasher stopped.
void park(TurnHashHandoff& turns, const core::TokenContent& runs, int block_size) {
    BlockHasher hasher(block_size);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, runs, core::total_tokens(runs));
    core::TokenContent copy = runs;
    turns.give(std::move(copy), std::move(hashes), hasher.cursor());
}

TEST_CASE("TurnHashHandoff resumes the next turn's hashing where the previous turn stopped", "[cache]") {
    // Block size 4. Turn 1: system prompt (run 1, 10 tokens), user 7 tokens (run 2), answer 5 tokens (run 3):
    // 22 tokens, 5 full blocks; its hasher stops after 3 answer tokens (tokens 0..19 hashed: 10 + 7 + 3).
    // Turn 2's content as engine::Request holds it: turn 1's runs, user 6 tokens (run 4), its own empty answer
    // (run 5): 28 tokens, 7 full blocks. With the handoff, blocks 0..4 come from turn 1 and blocks 5, 6 are hashed
    // from the cursor: the same 7 hashes as from scratch.
    const core::TokenContent turn1{run(1, 10), run(2, 7), run(3, 5)};
    const core::TokenContent turn2{run(1, 10), run(2, 7), run(3, 5), run(4, 6), run(5, 0)};
    FirstRunHashMemo memo(4);
    park(memo.turns(), turn1, 4);
    CHECK(memo.turns().num_parked() == 1);
    BlockHasher hasher(4);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, turn2, core::total_tokens(turn2), &memo);
    CHECK(hashes.size() == 7);
    CHECK(hashes == hash_all(turn2, 4));
    CHECK(memo.turns().num_parked() == 0);  // taken once
    // The resumed hasher keeps extending correctly: the answer grows to 9 tokens (37 tokens, 9 blocks).
    core::TokenContent grown = turn2;
    grown.back().length_tokens = 9;
    hasher.extend(hashes, grown, core::total_tokens(grown), &memo);
    CHECK(hashes.size() == 9);
    CHECK(hashes == hash_all(grown, 4));
}

TEST_CASE("TurnHashHandoff takes only an entry whose runs open the new content, run for run", "[cache]") {
    // Parked: (1,10)(2,7)(3,5). Not taken by: an answer of another length, (3,4) (the same content id, so the same
    // index slots, but other tokens); a different first run; content of fewer runs than the entry. Each still hashes
    // as from scratch and leaves the entry parked.
    const core::TokenContent parked{run(1, 10), run(2, 7), run(3, 5)};
    const std::vector<core::TokenContent> others = {
        {run(1, 10), run(2, 7), run(3, 4), run(4, 6), run(5, 0)},
        {run(9, 10), run(2, 7), run(3, 5), run(4, 6), run(5, 0)},
        {run(1, 10), run(2, 7)},
    };
    for (const auto& runs : others) {
        FirstRunHashMemo memo(4);
        park(memo.turns(), parked, 4);
        BlockHasher hasher(4);
        std::vector<core::BlockHash> hashes;
        hasher.extend(hashes, runs, core::total_tokens(runs), &memo);
        CHECK(hashes == hash_all(runs, 4));
        CHECK(memo.turns().num_parked() == 1);
    }
    // Hashing only the first 12 tokens of the next turn (3 blocks) cannot take the entry's 5 hashes.
    FirstRunHashMemo memo(4);
    park(memo.turns(), parked, 4);
    const core::TokenContent next{run(1, 10), run(2, 7), run(3, 5), run(4, 6), run(5, 0)};
    std::vector<core::BlockHash> hashes;
    HashCursor cursor;
    CHECK_FALSE(memo.turns().take(next, 3, hashes, cursor));
    CHECK(memo.turns().take(next, 7, hashes, cursor));
    CHECK(hashes.size() == 5);
    CHECK(cursor.num_hashed_blocks == 5);
    CHECK(cursor.run_index == 2);      // the answer run
    CHECK(cursor.offset_in_run == 3);  // tokens 17..19 of the 20 hashed are answer tokens 0..2
}

TEST_CASE("TurnHashHandoff keeps the last kNumEntries turns given", "[cache]") {
    // Turn i: (1,8)(100+i,4): 12 tokens, 3 blocks at block size 4, keyed by run 100+i. After kNumEntries + 1 gives
    // the first entry's place in the ring was reused: turn 0's next turn finds nothing; the last turn's takes.
    TurnHashHandoff turns;
    const auto turn = [](std::uint64_t i) { return core::TokenContent{run(1, 8), run(100 + i, 4)}; };
    for (std::uint64_t i = 0; i <= TurnHashHandoff::kNumEntries; ++i) {
        park(turns, turn(i), 4);
    }
    CHECK(turns.num_parked() == TurnHashHandoff::kNumEntries);
    std::vector<core::BlockHash> hashes;
    HashCursor cursor;
    core::TokenContent next0 = turn(0);
    next0.push_back(run(7, 4));
    CHECK_FALSE(turns.take(next0, 4, hashes, cursor));
    const std::uint64_t last = TurnHashHandoff::kNumEntries;
    core::TokenContent next_last = turn(last);
    next_last.push_back(run(7, 4));
    CHECK(turns.take(next_last, 4, hashes, cursor));
    CHECK(hashes == hash_all(turn(last), 4));
    CHECK(turns.num_parked() == TurnHashHandoff::kNumEntries - 1);
}

}  // namespace
}  // namespace servesim::cache
