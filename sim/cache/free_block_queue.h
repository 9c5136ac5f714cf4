// FreeBlockQueue: the eviction order of free blocks, nothing else (vLLM kv_cache_utils.FreeKVCacheBlockQueue).
// Owns the prev/next links of every block (indexed by BlockId) and two sentinels; does not own ref counts or hashes
// (block_pool.h). All operations are O(1) and allocate nothing after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// An intrusive doubly linked list over a vector indexed by BlockId, with a head and a tail sentinel.
// Order = LRU: the head is the block to evict (allocate) next, the tail the most recently freed. Initially every
// block is queued in block-id order. Among blocks freed together, the first appended is evicted first; callers free a
// request's blocks tail first (SingleTypeKvCacheManager::free passes them in reverse, as vLLM's
// SingleTypeKVCacheManager.free does), so a request's last block is evicted before its first and a shared prefix
// outlives the suffixes that depend on it.
class FreeBlockQueue {
    static constexpr std::uint32_t kNotQueued = 0xffffffffu;
    struct Links {
        std::uint32_t prev = kNotQueued;
        std::uint32_t next = kNotQueued;
    };

public:
    explicit FreeBlockQueue(std::int64_t num_blocks);

    [[nodiscard]] std::int64_t num_free_blocks() const { return num_free_blocks_; }
    [[nodiscard]] bool contains(core::BlockId id) const {
        const auto i = core::to_int(id);
        return i < num_blocks_ && links_[i].prev != kNotQueued;
    }

    // The block popleft returns next (the tail sentinel's id, num_blocks + 1, when the queue is empty), and the
    // memory its removal reads, for a caller to prefetch ahead of the pop.
    [[nodiscard]] std::uint32_t head_id() const { return links_[head()].next; }
    [[nodiscard]] const void* links_address(std::uint32_t i) const { return &links_[i]; }

    // Removes and returns the head (the LRU block). The queue must not be empty. (Inline, as remove and append: the
    // pool calls them once per block it allocates, hits or frees.)
    [[nodiscard]] core::BlockId popleft() {
        SERVESIM_CHECK(num_free_blocks_ > 0, "popleft from an empty free block queue");
        const core::BlockId first{links_[head()].next};
        remove(first);
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
    // remove and append without their membership checks, for a caller whose own state already implies them: the
    // block pool, where a block is queued iff its ref count is 0 (BlockPool::check_invariants re-derives that).
    // They run once per hit block and per freed block (~400 a request on a dialogue workload), where the checks
    // were ~6 % of the instructions.
    void remove_queued(core::BlockId id) {
        Links& links = links_[core::to_int(id)];
        links_[links.prev].next = links.next;
        links_[links.next].prev = links.prev;
        links = Links{};
        --num_free_blocks_;
    }
    void append_unqueued(core::BlockId id) {
        const auto i = core::to_int(id);
        const std::uint32_t last = links_[tail()].prev;
        links_[i] = Links{last, tail()};
        links_[last].next = i;
        links_[tail()].prev = i;
        ++num_free_blocks_;
    }
    // Appends blocks that are not queued to the tail, one after another, keeping the tail's neighbour in a register
    // and closing the list once at finish(): the same list as append_unqueued of each block in turn (the tail
    // sentinel's link and the last block's next are rewritten by every append, so only their final values matter).
    // A request's freed list (~230 blocks a request on a dialogue workload) enters the queue through one. Nothing
    // may read or change the queue between the first add and finish().
    class TailAppender {
    public:
        explicit TailAppender(FreeBlockQueue& queue)
            : queue_(queue), links_(queue.links_.data()), tail_(queue.tail()), last_(links_[tail_].prev) {}
        TailAppender(const TailAppender&) = delete;
        TailAppender& operator=(const TailAppender&) = delete;
        void add(core::BlockId id) {
            const auto i = core::to_int(id);
            links_[i].prev = last_;
            links_[last_].next = i;
            last_ = i;
            ++num_added_;
        }
        void finish() {
            links_[last_].next = tail_;
            links_[tail_].prev = last_;
            queue_.num_free_blocks_ += num_added_;
            num_added_ = 0;
        }

    private:
        FreeBlockQueue& queue_;
        Links* links_;
        std::uint32_t tail_;
        std::uint32_t last_;
        std::int64_t num_added_ = 0;
    };

    // remove_queued for blocks one after another (a cache hit's ~190 blocks on a dialogue workload), with the
    // link array in a register and the count settled once at finish(): the same list, and no per-block
    // read-modify-write of the count in memory on the loop's critical path. Nothing may read or change the queue
    // between the first remove and finish().
    class Unlinker {
    public:
        explicit Unlinker(FreeBlockQueue& queue) : queue_(queue), links_(queue.links_.data()) {}
        Unlinker(const Unlinker&) = delete;
        Unlinker& operator=(const Unlinker&) = delete;
        void remove(core::BlockId id) {
            Links& links = links_[core::to_int(id)];
            const Links old = links;
            links_[old.prev].next = old.next;
            links_[old.next].prev = old.prev;
            links = Links{};
            ++num_removed_;
        }
        void finish() {
            queue_.num_free_blocks_ -= num_removed_;
            num_removed_ = 0;
        }

    private:
        FreeBlockQueue& queue_;
        Links* links_;
        std::int64_t num_removed_ = 0;
    };

    // Puts a block that is not queued at the head, to be allocated next (vLLM PR #43447: under sparse retention a
    // freed block without a hash is reused before any cached block).
    void prepend(core::BlockId id);

    // The queue from head to tail (vLLM get_all_free_blocks): for tests and diagnostics, O(queue).
    [[nodiscard]] std::vector<core::BlockId> get_all_free_blocks() const;

    // Walks the list both ways and checks links, membership marks and the count; throws InvariantError.
    void check_invariants() const;

private:
    [[nodiscard]] std::uint32_t head() const { return static_cast<std::uint32_t>(num_blocks_); }
    [[nodiscard]] std::uint32_t tail() const { return static_cast<std::uint32_t>(num_blocks_ + 1); }

    std::int64_t num_blocks_;
    std::int64_t num_free_blocks_ = 0;
    std::vector<Links> links_;  // [0, num_blocks) blocks, then the head and tail sentinels
};

}  // namespace servesim::cache
