// FreeBlockQueue: vLLM's free queue block by block (kv_cache_utils.FreeKVCacheBlockQueue), as an intrusive doubly
// linked list: the prev/next links live in each block's entry (vLLM KVCacheBlock.prev_free_block / next_free_block).
// The engine's pool keeps the same order per segment of blocks (block_segments.h, docs/BLOCK-SEGMENTS.md); this list
// is the per-block model the tests hold it to (tests/cache/prefix_cache/block_segments_test.cpp,
// order_only_cache_test.cpp). All operations are O(1) and allocate nothing after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// The links one queued entry carries; kNotQueued in prev marks an entry that is not queued.
struct FreeQueueLinks {
    static constexpr std::uint32_t kNotQueued = 0xffffffffu;
    std::uint32_t prev = kNotQueued;
    std::uint32_t next = kNotQueued;
};

// An entry with nothing but the links: the queue on its own (tests, and reference models in tests).
struct PlainFreeQueueEntry {
    FreeQueueLinks links;
};

// An intrusive doubly linked list over a vector of entries indexed by BlockId, with a head and a tail sentinel;
// Entry has a member `FreeQueueLinks links`. Order = LRU: the head is the block to evict (allocate) next, the tail
// the most recently freed. Initially every block is queued in block-id order. Among blocks freed together, the first
// appended is evicted first; callers free a request's blocks tail first (SingleTypeKvCacheManager::free passes them
// in reverse, as vLLM's SingleTypeKVCacheManager.free does), so a request's last block is evicted before its first
// and a shared prefix outlives the suffixes that depend on it.
template <typename Entry>
class BasicFreeBlockQueue {
    static constexpr std::uint32_t kNotQueued = FreeQueueLinks::kNotQueued;

public:
    explicit BasicFreeBlockQueue(std::int64_t num_blocks)
        : num_blocks_(num_blocks), entries_(static_cast<std::size_t>(num_blocks >= 0 ? num_blocks + 2 : 2)) {
        SERVESIM_CHECK(num_blocks >= 0 && num_blocks < kNotQueued - 2, "bad number of blocks {}", num_blocks);
        links(head()).next = tail();
        links(tail()).prev = head();
        for (std::int64_t i = 0; i < num_blocks; ++i) {
            append_unqueued(core::BlockId{static_cast<std::uint32_t>(i)});
        }
    }

    // The entry of block `i` (i < num_blocks), queued or not: its owner's fields live beside the links.
    [[nodiscard]] Entry& entry(std::uint32_t i) { return entries_[i]; }
    [[nodiscard]] const Entry& entry(std::uint32_t i) const { return entries_[i]; }
    [[nodiscard]] Entry* entries() { return entries_.data(); }
    [[nodiscard]] const Entry* entries() const { return entries_.data(); }
    [[nodiscard]] std::int64_t num_blocks() const { return num_blocks_; }

    [[nodiscard]] std::int64_t num_free_blocks() const { return num_free_blocks_; }
    [[nodiscard]] bool contains(core::BlockId id) const {
        const auto i = core::to_int(id);
        return i < num_blocks_ && links(i).prev != kNotQueued;
    }

    // The block popleft returns next (the tail sentinel's id, num_blocks + 1, when the queue is empty), for a
    // caller to prefetch its entry ahead of the pop.
    [[nodiscard]] std::uint32_t head_id() const { return links(head()).next; }

    // Removes and returns the head (the LRU block). The queue must not be empty. (Inline, as remove and append: the
    // pool calls them once per block it allocates, hits or frees.)
    [[nodiscard]] core::BlockId popleft() {
        SERVESIM_CHECK(num_free_blocks_ > 0, "popleft from an empty free block queue");
        const core::BlockId first{links(head()).next};
        remove_queued(first);
        return first;
    }
    // Removes a queued block from anywhere (a cache hit on a free block).
    void remove(core::BlockId id) {
        SERVESIM_CHECK(contains(id), "block {} is not in the free queue", core::to_int(id));
        remove_queued(id);
    }
    // Appends a block that is not queued to the tail.
    void append(core::BlockId id) {
        const auto i = core::to_int(id);
        SERVESIM_CHECK(i < num_blocks_, "block {} outside a pool of {}", i, num_blocks_);
        SERVESIM_CHECK(!contains(id), "block {} is already in the free queue", i);
        append_unqueued(id);
    }
    // remove and append without their membership checks, for a caller whose own state already implies them.
    void remove_queued(core::BlockId id) {
        FreeQueueLinks& l = links(core::to_int(id));
        links(l.prev).next = l.next;
        links(l.next).prev = l.prev;
        l = FreeQueueLinks{};
        --num_free_blocks_;
    }
    void append_unqueued(core::BlockId id) {
        const auto i = core::to_int(id);
        const std::uint32_t last = links(tail()).prev;
        links(i) = FreeQueueLinks{last, tail()};
        links(last).next = i;
        links(tail()).prev = i;
        ++num_free_blocks_;
    }
    // Puts a block that is not queued at the head, to be allocated next (vLLM PR #43447: under sparse retention a
    // freed block without a hash is reused before any cached block).
    void prepend(core::BlockId id) {
        const auto i = core::to_int(id);
        SERVESIM_CHECK(i < num_blocks_, "block {} outside a pool of {}", i, num_blocks_);
        SERVESIM_CHECK(!contains(id), "block {} is already in the free queue", i);
        const std::uint32_t first = links(head()).next;
        links(i) = FreeQueueLinks{head(), first};
        links(first).prev = i;
        links(head()).next = i;
        ++num_free_blocks_;
    }

    // The queue from head to tail (vLLM get_all_free_blocks): for tests and diagnostics, O(queue).
    [[nodiscard]] std::vector<core::BlockId> get_all_free_blocks() const {
        std::vector<core::BlockId> out;
        out.reserve(static_cast<std::size_t>(num_free_blocks_));
        for (std::uint32_t i = links(head()).next; i != tail(); i = links(i).next) {
            out.push_back(core::BlockId{i});
        }
        return out;
    }

    // Walks the list both ways and checks links, membership marks and the count; throws InvariantError.
    void check_invariants() const {
        std::int64_t forward = 0;
        std::uint32_t prev = head();
        for (std::uint32_t i = links(head()).next; i != tail(); i = links(i).next) {
            SERVESIM_CHECK(i < num_blocks_, "free queue links to {} outside the pool", i);
            SERVESIM_CHECK(links(i).prev == prev, "block {} has prev {} but follows {}", i, links(i).prev, prev);
            prev = i;
            ++forward;
            SERVESIM_CHECK(forward <= num_blocks_, "free queue has a cycle");
        }
        SERVESIM_CHECK(links(tail()).prev == prev, "tail sentinel points to {} not {}", links(tail()).prev, prev);
        SERVESIM_CHECK(forward == num_free_blocks_, "free queue holds {} blocks but counts {}", forward,
                       num_free_blocks_);
        std::int64_t marked = 0;
        for (std::int64_t i = 0; i < num_blocks_; ++i) {
            marked += links(static_cast<std::uint32_t>(i)).prev != kNotQueued ? 1 : 0;
        }
        SERVESIM_CHECK(marked == forward, "{} blocks marked queued but {} reachable", marked, forward);
    }

private:
    [[nodiscard]] std::uint32_t head() const { return static_cast<std::uint32_t>(num_blocks_); }
    [[nodiscard]] std::uint32_t tail() const { return static_cast<std::uint32_t>(num_blocks_ + 1); }
    [[nodiscard]] FreeQueueLinks& links(std::uint32_t i) { return entries_[i].links; }
    [[nodiscard]] const FreeQueueLinks& links(std::uint32_t i) const { return entries_[i].links; }

    std::int64_t num_blocks_;
    std::int64_t num_free_blocks_ = 0;
    std::vector<Entry> entries_;  // [0, num_blocks) blocks, then the head and tail sentinels
};

// The queue on its own, entries holding only their links.
using FreeBlockQueue = BasicFreeBlockQueue<PlainFreeQueueEntry>;

}  // namespace servesim::cache
