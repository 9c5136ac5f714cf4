// BlockSegments: the reference count of every KV cache block and the free queue (vLLM KVCacheBlock.ref_cnt and
// kv_cache_utils.FreeKVCacheBlockQueue), kept per segment of blocks instead of per block. The counts and the queue
// order are vLLM's exactly; only the layout differs (docs/BLOCK-SEGMENTS.md says why and how).
//
// A segment is a run of blocks that every holder holds whole: consecutive blocks of one request's list, all with the
// same reference count. A queued segment (count 0) sits in the free queue as one entry, its blocks in reverse list
// order (vLLM frees a request's blocks tail first, so the last block is evicted first). So:
//   - a cache hit on a freed chain takes back whole segments (one count and one unlink each), not one block at a time;
//   - a finished request's list is freed segment by segment, each appended to the queue's tail as one entry;
//   - a request's new blocks extend its last segment while it is the only holder;
//   - the head block is the head segment's last block: popleft shortens that segment.
// A list is matched against the segments by comparing block ids (block_span.h), so the pool's callers keep passing
// block lists. Where a list covers only part of a segment (a hit ending inside it, a sliding window dropping one
// block), the segment is split there first, the smaller part moving to a new segment, so a block's count stays its
// segment's. Splits are O(smaller part) and rare in serving. Every block is in exactly one segment, so memory does not
// grow with the run (docs/BLOCK-SEGMENTS.md gives the bound). Block 0, vLLM's null block, is in no segment: never queued, its count not kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/ids.h"

namespace servesim::cache {

class BlockSegments {
public:
    // Blocks 1..num_blocks-1 queued in id order (block 0 is the null block).
    explicit BlockSegments(std::int64_t num_blocks);
    // Bytes the constructor allocates for num_blocks blocks: a place per block and the one queued segment's ids (the
    // memory projection, tools/app/memory_projection.h).
    [[nodiscard]] static std::int64_t allocated_bytes(std::int64_t num_blocks);

    [[nodiscard]] std::int64_t num_blocks() const { return static_cast<std::int64_t>(place_.size()); }
    [[nodiscard]] std::int64_t num_free_blocks() const { return num_free_blocks_; }
    [[nodiscard]] std::int32_t ref_cnt(core::BlockId id) const {
        const auto i = core::to_int(id);
        return i == 0 ? 0 : segments_[place_[i].segment].ref_cnt;
    }
    [[nodiscard]] bool is_queued(core::BlockId id) const {
        const auto i = core::to_int(id);
        return i != 0 && i < place_.size() && segments_[place_[i].segment].prev != kNotLinked;
    }
    // The blocks the next pops return, up to n of them, in list order (the next pop returns the last); fewer when
    // the head segment is shorter (the later segments are not looked at). For a caller to prefetch their entries.
    [[nodiscard]] std::span<const core::BlockId> head_blocks(std::uint32_t n) const {
        const Segment& head = segments_[segments_[kSentinel].next];
        const std::uint32_t k = std::min(n, head.size());
        return std::span<const core::BlockId>(head.ids.data() + (head.end() - k), k);
    }

    // Pops n blocks from the head (n must not exceed num_free_blocks()), each with count 1, and appends them to `out`,
    // a holder's list: they extend the segment of out's last block when that block ends its segment and the list's
    // holder is its only holder, so a request's decode blocks join its own segment.
    void pop_into(std::int64_t n, std::vector<core::BlockId>& out);
    // A cache hit: one more reference to each block (null blocks skipped); a block reaching 1 leaves the free queue.
    void touch(std::span<const core::BlockId> blocks);
    // vLLM SingleTypeKVCacheManager.free: one reference less on each block, in reverse order; blocks reaching 0 are
    // appended to the queue's tail in that order. Null blocks skipped.
    void free_tail_first(std::span<const core::BlockId> blocks);
    // One reference less on one block; a block reaching 0 is appended to the tail when `append`, and otherwise left
    // for the caller to prepend. Returns whether it reached 0. (The per-block path: sliding windows, sparse
    // retention, frees in list order.)
    bool drop_ref(core::BlockId id, bool append);
    // Puts a block with count 0 that is not queued at the head (vLLM PR #43447).
    void prepend(core::BlockId id);
    // How many of `blocks` are queued (count 0): a hit's evictable blocks. Null blocks count as not queued.
    [[nodiscard]] std::int64_t num_queued_among(std::span<const core::BlockId> blocks) const;

    // The queue from head to tail: for tests and diagnostics, O(queue).
    [[nodiscard]] std::vector<core::BlockId> get_all_free_blocks() const;
    // The segments' own invariant (every block in one segment that lists it, the queue's links, counts ≥ 0, queued iff
    // count 0, the free count) and each block's count against num_holders[b]; throws InvariantError.
    void check_invariants(std::span<const std::int32_t> num_holders) const;

private:
    static constexpr std::uint32_t kSentinel = 0;      // segments_[0]: next is the head segment, prev the tail
    static constexpr std::uint32_t kNoSegment = 0;     // the null block's (it is in none)
    static constexpr std::uint32_t kNotLinked = 0xffffffffu;

    struct Segment {
        std::vector<core::BlockId> ids;  // the holder's list order; the segment is ids[begin, ids.size())
        std::uint32_t begin = 0;
        std::int32_t ref_cnt = 0;
        std::uint32_t prev = kNotLinked;  // free-queue links, while ref_cnt is 0
        std::uint32_t next = kNotLinked;
        [[nodiscard]] std::uint32_t end() const { return static_cast<std::uint32_t>(ids.size()); }
        [[nodiscard]] std::uint32_t size() const { return end() - begin; }
    };
    struct Parts {
        std::uint32_t first;   // the segment holding the part before the split point
        std::uint32_t second;  // the one holding the rest
    };

    // Splits segment s before absolute position pos (begin < pos < end); the smaller part moves to a new segment.
    // A queued segment's parts stay where it was in the queue, the second part (later in the list) nearer the head.
    Parts split(std::uint32_t s, std::uint32_t pos);
    // The segment holding exactly `id` and nothing else, split out of its segment.
    std::uint32_t isolate(core::BlockId id);
    void take(std::uint32_t s);  // one more reference to every block of s
    // One reference less to every block of s; at 0, s is appended to the queue's tail when `append` (otherwise left
    // out of the queue for the caller to prepend). Returns whether the count reached 0.
    bool release(std::uint32_t s, bool append);
    std::uint32_t new_segment();
    void recycle(std::uint32_t s);
    void link_before(std::uint32_t s, std::uint32_t next);
    void unlink(std::uint32_t s);
    // Records where ids[from, end) of segment s are (place_), after they moved there.
    void place_ids(std::uint32_t s, std::uint32_t from);
    // How many leading ids of `blocks` continue segment s from absolute position pos.
    [[nodiscard]] std::size_t run_in_common(std::span<const core::BlockId> blocks, std::uint32_t s,
                                            std::uint32_t pos) const;
    // Rewrites a segment whose dead prefix (positions before begin) outgrew its blocks, so memory stays O(blocks).
    void compact(std::uint32_t s);

    // Where a block is: its segment (kNoSegment for the null block) and its absolute position in the segment's ids;
    // one entry per block, so finding a list's segment reads one line.
    struct Place {
        std::uint32_t segment = kNoSegment;
        std::uint32_t position = 0;
    };
    std::vector<Place> place_;
    std::vector<Segment> segments_;           // [0] the sentinel, then live and spare segments
    std::vector<std::uint32_t> spare_segments_;
    std::int64_t num_free_blocks_ = 0;
};

}  // namespace servesim::cache
