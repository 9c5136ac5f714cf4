// TurnHashHandoff: a finished request's block hashes, kept for the next turn of its dialogue so that turn's hashing
// starts where the previous one stopped. Owns the parked hash lists and content; does not own the hash function
// (block_hash.h) nor decide anything vLLM decides: it is a memo of a pure function (the chained hashes of
// kv_cache_utils.hash_block_tokens depend only on the tokens), so no output depends on whether it hits.
//
// Why it pays: in a multi-turn dialogue the prompt of turn k+1 is the prompt of turn k, its answer, then the new user
// message, run for run (workloads/tenant_workload.cpp appends to the history). vLLM hashes every prompt from token 0
// (Request.__init__ → get_request_block_hasher); a finished turn's hashes already cover all but the new message.
// Exact: an entry is taken only when its runs are, run for run, the first runs of the new request's content; the
// hasher then resumes from the entry's cursor, which is the state a from-scratch pass reaches at that point (the
// hasher is a left-to-right pass over the runs).
// Bounded and cheap: the last kNumEntries given entries sit in a ring (a give reuses the oldest, so entries of
// dialogues that ended, or whose next turn went elsewhere, age out); an index of kNumIndexSlots slots finds them by
// the content id of their last run (the answer), each key having two candidate slots (the entry a slot names is
// checked, so a slot naming a reused entry is simply stale). A take probes the keys of the new content's runs n−3
// (the previous answer, then the new user message and the new answer's empty run, as engine::Request lays out its
// content), n−2 and n−1 until one matches: at most six slot reads. Never iterated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// Where a BlockHasher stands: the first token not yet hashed is token offset_in_run of run run_index, and
// num_hashed_blocks blocks are hashed (block_hash.h).
struct HashCursor {
    std::size_t run_index = 0;
    std::int64_t offset_in_run = 0;
    std::size_t num_hashed_blocks = 0;
};

class TurnHashHandoff {
public:
    static constexpr std::size_t kNumEntries = 512;
    static constexpr std::size_t kNumIndexSlots = 4096;

    // Parks a finished request's content runs, its block hashes and its hasher's cursor (hashes.size() must equal
    // cursor.num_hashed_blocks; runs must be non-empty), in the place of the oldest parked entry.
    void give(core::TokenContent&& runs, std::vector<core::BlockHash>&& hashes, const HashCursor& cursor);

    // If a parked entry's runs are the first runs of `runs` (equal run for run) and it holds at most max_blocks
    // hashes (the caller hashes that many blocks of `runs`), moves its hashes into `hashes` (which must be empty),
    // drops the entry and returns its cursor through `cursor`; otherwise returns false and changes nothing.
    [[nodiscard]] bool take(const core::TokenContent& runs, std::size_t max_blocks,
                            std::vector<core::BlockHash>& hashes, HashCursor& cursor);

    // Entries parked now (tests, diagnostics): O(kNumEntries).
    [[nodiscard]] std::size_t num_parked() const;

private:
    struct Entry {
        core::TokenContent runs;  // empty: no entry here
        std::vector<core::BlockHash> hashes;
        HashCursor cursor;
    };
    static constexpr std::uint32_t kNoEntry = 0xffffffffu;

    // The two index slots of a key: the low and the high bits of its mix.
    [[nodiscard]] static std::size_t slot_a(core::ContentId key) {
        return static_cast<std::size_t>(core::mix64(core::to_int(key))) & (kNumIndexSlots - 1);
    }
    [[nodiscard]] static std::size_t slot_b(core::ContentId key) {
        return static_cast<std::size_t>(core::mix64(core::to_int(key)) >> 40) & (kNumIndexSlots - 1);
    }
    // Whether index slot `slot` names a parked entry whose last run has content `key`.
    [[nodiscard]] bool names(std::size_t slot, core::ContentId key) const {
        const std::uint32_t e = index_[slot];
        return e != kNoEntry && !entries_[e].runs.empty() && entries_[e].runs.back().content == key;
    }
    [[nodiscard]] bool take_from(std::uint32_t entry, const core::TokenContent& runs, std::size_t max_blocks,
                                 std::vector<core::BlockHash>& hashes, HashCursor& cursor);

    // Allocated by the first give: a replica that never finishes a turn pays nothing.
    std::unique_ptr<Entry[]> entries_;
    std::unique_ptr<std::uint32_t[]> index_;
    std::uint64_t num_given_ = 0;  // entry num_given_ % kNumEntries is the oldest (next to reuse)
};

}  // namespace servesim::cache
