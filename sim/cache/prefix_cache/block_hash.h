// BlockHasher: the chained hashes of a request's full blocks, computed from prompt content as runs
// (docs/ARCHITECTURE.md, "Prompt content as runs"). Owns the hash function and the per-request cursor that keeps
// extension O(new blocks + runs crossed); does not own the hash list (the request does) nor the lookup
// (prefix_index.h). Follows vLLM kv_cache_utils.hash_block_tokens and Request.update_block_hashes: only full blocks are
// hashed, block i chains block i−1's hash (or the NONE seed). FirstRunHashMemo lets requests that open with the same
// run (a system prompt) share those blocks' hashes, and carries the replica's TurnHashHandoff (a finished turn's hashes
// for its dialogue's next turn, turn_hash_handoff.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/cache/prefix_cache/turn_hash_handoff.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// Hash of block i (tokens [i·B, (i+1)·B)), a fixed and documented function, never std::hash:
//   h = parent hash (block i−1), or kNoneHashSeed for block 0
//   for each piece (content id c, offset o in that run, length l) covering the block, left to right:
//     h = hash_combine(hash_combine(hash_combine(h, c), o), l)
// A piece is the part of one run inside the block; zero-length runs contribute nothing. The piece list is canonical
// for a token sequence (token j of a run with content c is the token (c, j)), so equal hashes mean equal prefixes.
// The chained hashes of the blocks lying entirely inside a sequence's first run depend only on that run's content
// id (block i hashes the pieces (c, j·B, B), j ≤ i, from the seed), so requests that open with the same run (a
// tenant's system prompt) can share them instead of re-mixing thousands of tokens each. A memo of a pure function:
// no output depends on whether it is used. One per replica, for one block size; never iterated; bounded in size.
// When first runs do not repeat (synthetic prompts, each unique) the memo cannot hit: after kProbeLookups lookups
// without a hit it frees what it holds and turns itself off, so such a run pays neither the copies nor the memory.
class FirstRunHashMemo {
public:
    explicit FirstRunHashMemo(int block_size_tokens) : block_size_tokens_(block_size_tokens) {}

    [[nodiscard]] int block_size_tokens() const { return block_size_tokens_; }
    // The first-run block hashes known for content c (possibly fewer than the run holds), or nullptr.
    [[nodiscard]] const std::vector<core::BlockHash>* find(core::ContentId c) const;
    // find(c), counted: the kProbeLookups-th lookup without any hit turns the memo off.
    [[nodiscard]] const std::vector<core::BlockHash>* lookup(core::ContentId c);
    // False once the memo has turned itself off (it then records and finds nothing).
    [[nodiscard]] bool enabled() const { return enabled_; }

    static constexpr std::int64_t kProbeLookups = 1024;
    // Keeps `hashes` (a prefix of c's first-run block hashes) if longer than what is known, within the size bound.
    void record(core::ContentId c, std::span<const core::BlockHash> hashes);

    // Finished requests' hashes for the next turn of their dialogue (same block size): BlockHasher::extend tries it
    // before the first-run lookup when it starts a hash list from 0; the replica gives a request's hashes at finish.
    [[nodiscard]] TurnHashHandoff& turns() { return turns_; }

private:
    struct ContentIdHash {
        std::size_t operator()(core::ContentId c) const {
            return static_cast<std::size_t>(core::mix64(core::to_int(c)));
        }
    };
    // 8 MiB of hashes: workloads whose first runs never repeat stop being recorded instead of growing without limit.
    static constexpr std::size_t kMaxHashes = std::size_t{1} << 20;

    int block_size_tokens_;
    bool enabled_ = true;
    std::int64_t num_lookups_ = 0;
    std::int64_t num_hits_ = 0;
    std::size_t num_hashes_ = 0;
    std::unordered_map<core::ContentId, std::vector<core::BlockHash>, ContentIdHash> hashes_;
    TurnHashHandoff turns_;
};

class BlockHasher {
public:
    // vLLM NONE_HASH, but fixed (vLLM draws it at random unless PYTHONHASHSEED is set).
    static constexpr std::uint64_t kNoneHashSeed = 0x5345525645534d31ULL;  // "SERVESM1"

    explicit BlockHasher(int block_size_tokens);

    // Appends to `hashes` the hashes of the full blocks of the first num_tokens tokens of `runs` that are not yet
    // hashed (hashes.size() blocks are). `runs` may only have grown at the end since the last call (the last run
    // longer, or runs appended); an empty `hashes` restarts from token 0.
    // `memo` (optional, same block size), when starting from 0: a parked earlier turn whose runs begin `runs` supplies
    // its hashes and cursor (memo->turns()); otherwise the memo supplies and receives the first run's block hashes.
    // Inline fast path: a call that completes no block (most decode tokens) returns at once.
    void extend(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs, std::int64_t num_tokens,
                FirstRunHashMemo* memo = nullptr) {
        // Nothing to hash until the next block is full (every decode step but one in block_size): the cheapest test
        // first, the block's end kept rather than multiplied out per token.
        if (num_tokens < next_block_end_tokens_ && hashes.size() == num_hashed_blocks_ && !hashes.empty()) {
            return;
        }
        extend_blocks(hashes, runs, num_tokens, memo);
    }

    [[nodiscard]] int block_size_tokens() const { return block_size_tokens_; }
    // Where the next block ends, in tokens: below it (with the list this hasher last extended) extend returns at once.
    [[nodiscard]] std::int64_t next_block_end_tokens() const { return next_block_end_tokens_; }

    // Where hashing stands, for TurnHashHandoff::give (cursor().num_hashed_blocks = the hash list's length).
    [[nodiscard]] HashCursor cursor() const { return HashCursor{run_index_, offset_in_run_, num_hashed_blocks_}; }

private:
    // Tries the decode step's case, then hashes through the general routine (extend_runs).
    void extend_blocks(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs, std::int64_t num_tokens,
                       FirstRunHashMemo* memo);
    // The general routine: any number of blocks, pieces across runs, the restart from 0 with the memo.
    void extend_runs(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs, std::int64_t num_tokens,
                     FirstRunHashMemo* memo);

    int block_size_tokens_;
    std::uint64_t mixed_block_size_;  // mix64(block size): most pieces span a whole block
    // Cursor: the first token not yet hashed is token offset_in_run_ of runs[run_index_].
    std::size_t run_index_ = 0;
    std::int64_t offset_in_run_ = 0;
    std::size_t num_hashed_blocks_ = 0;
    // (num_hashed_blocks_ + 1) · block size: where the next block ends. extend_blocks and extend_runs, the only
    // writers of the cursor, keep it on every way out (extend_blocks' one-block case relies on it).
    std::int64_t next_block_end_tokens_ = 0;
};

// A prompt's full-block hashes computed once, by a cluster's cache-aware router (sim/cluster/simulation.cpp
// route_arrival), and handed with the hasher whose cursor follows them to the request the replica builds, which then
// extends them as if it had hashed the prompt itself: vLLM hashes a request once, in the engine (Request.__init__ →
// request_block_hasher), and llm-d's router hashes the prompt on its own side; here both sides would compute the same
// function of the same tokens, so the second computation is skipped. No output depends on it.
struct HashedPrompt {
    std::vector<core::BlockHash> hashes;
    BlockHasher hasher;
};

}  // namespace servesim::cache
