// BlockPool: every KV cache block of one replica, shared by all KV cache groups (vLLM block_pool.py BlockPool):
// ref counts, the optional hash of each block and the prefix index, allocation (get_new_blocks), cache hits (touch),
// freeing (free_blocks) and caching (cache_full_blocks). It does not know requests: the per-group managers
// (single_type_kv_cache_manager.h) hold the block lists and decide the order blocks are freed in. The ref counts and
// the free queue are kept per segment of blocks, with vLLM's per-block values and order (block_segments.h,
// docs/BLOCK-SEGMENTS.md); the pool keeps each block's hash and the prefix index.
//
// INVARIANT (checked by check_invariants() after every operation in tests):
//   Block 0 is vLLM's null block: a placeholder in block tables (skipped sliding-window / Mamba positions), never
//   handed out, never queued, never hashed, its ref count not kept; usable blocks = num_gpu_blocks − 1.
//   Every other block is in exactly one state:
//     in use        ref_cnt > 0, not queued (hash optional: a cached block being used);
//     free, cached  ref_cnt = 0, queued, hash set (evictable: a hit can take it back, allocation evicts it);
//     free, plain   ref_cnt = 0, queued, no hash.
//   Exactly the free blocks are queued, so num_free_blocks() = queue length = #free cached + #free plain; the states
//   sum to num_gpu_blocks − 1. A block has a hash iff the prefix index lists it under that (hash, group). A ref count
//   equals the number of requests holding the block (the managers pass their view of holders to check it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/cache/prefix_cache/block_segments.h"
#include "sim/cache/prefix_cache/prefix_index.h"
#include "sim/core/ids.h"

namespace servesim::cache {

inline constexpr core::BlockId kNullBlock{0};

// vLLM's KV cache events (vllm/distributed/kv_events.py BlockStored / BlockRemoved), as block_pool.py emits them with
// KVEventsConfig.enable_kv_cache_events: BlockStored when cache_full_blocks gives a block its hash, BlockRemoved when
// _maybe_evict_cached_block drops the hash of a cached free block being reallocated. A cluster router that reads
// them sets one (docs/CLUSTER.md, "A precise prefix scorer"); without one nothing is emitted.
class KvEventSink {
public:
    virtual ~KvEventSink() = default;
    virtual void block_stored(core::BlockHash hash, int group) = 0;
    virtual void block_removed(core::BlockHash hash, int group) = 0;
};

class BlockPool {
public:
    BlockPool(std::int64_t num_gpu_blocks, bool enable_caching);
    // Host bytes the constructor allocates for the pool's metadata (a key per block, the segments, the prefix index
    // reserved for every block when caching): what a replica's KV pool costs the simulator, whatever the GPU bytes.
    [[nodiscard]] static std::int64_t metadata_bytes(std::int64_t num_gpu_blocks, bool enable_caching);

    // vLLM get_cached_block for one group: a block cached under (hash, group), or nothing. Inline: a prefix lookup
    // calls it once per prompt block.
    [[nodiscard]] std::optional<core::BlockId> get_cached_block(core::BlockHash hash, int group) const {
        return cached_block_hash_to_block_.get_one_block(BlockHashWithGroupId{hash, group}, key_of());
    }

    // The memory get_cached_block(hash, group) reads first, for the caller to prefetch (PrefixIndex::probe_address).
    [[nodiscard]] const void* cached_block_address(core::BlockHash hash, int group) const {
        return cached_block_hash_to_block_.probe_address(BlockHashWithGroupId{hash, group});
    }

    // vLLM get_cached_block over several groups: if `hash` is cached in every group of `groups`, appends each
    // group's block to hit_per_group[group] and returns true; otherwise changes nothing and returns false.
    [[nodiscard]] bool get_cached_blocks(core::BlockHash hash, std::span<const int> groups,
                                         std::vector<std::vector<core::BlockId>>& hit_per_group) const;

    // Pops n blocks from the free-queue head and appends them to `out` with ref_cnt 1; a popped cached block loses
    // its hash here (lazy LRU eviction, vLLM _maybe_evict_cached_block). n must not exceed num_free_blocks().
    void get_new_blocks(std::int64_t n, std::vector<core::BlockId>& out);

    // A cache hit takes a reference: a ref-0 block leaves the free queue wherever it is. Null blocks are skipped.
    // A list is taken segment by segment (block_segments.h), so a hit on a freed chain costs per segment, not per
    // block.
    void touch(std::span<const core::BlockId> blocks);

    // Drops one reference per block; blocks reaching 0 are appended to the free-queue tail in the given order.
    // Null blocks are skipped. With unhashed_to_front (sparse retention, vLLM PR #43447) a block reaching 0 without
    // a hash goes to the head instead, the first of them in `ordered_blocks` ending up first.
    void free_blocks(std::span<const core::BlockId> ordered_blocks, bool unhashed_to_front = false);
    // free_blocks of `blocks` in reverse order (a request's list, tail first: vLLM SingleTypeKVCacheManager.free
    // passes reversed(req_blocks)), without building the reversed list; segment by segment, as touch.
    void free_blocks_tail_first(std::span<const core::BlockId> blocks, bool unhashed_to_front = false);

    // Gives blocks[num_cached_blocks, num_full_blocks) of a request the hashes block_hashes[i] in `group`
    // and indexes them (null blocks skipped). The blocks must not be hashed yet.
    void cache_full_blocks(std::span<const core::BlockId> blocks, std::span<const core::BlockHash> block_hashes,
                           std::int64_t num_cached_blocks, std::int64_t num_full_blocks, int group);

    // Where the pool's KV events go (nullptr: none, the default).
    void set_event_sink(KvEventSink* sink) { event_sink_ = sink; }

    [[nodiscard]] std::int64_t num_gpu_blocks() const { return segments_.num_blocks(); }
    [[nodiscard]] std::int64_t num_free_blocks() const { return segments_.num_free_blocks(); }
    // vLLM get_usage: 1 − free/(num_gpu_blocks − 1); evictable cached blocks count as free.
    [[nodiscard]] double usage() const;
    [[nodiscard]] std::int32_t ref_cnt(core::BlockId id) const { return segments_.ref_cnt(id); }
    // How many of `blocks` are free (ref count 0, queued): the evictable blocks of a hit. Null blocks are not.
    [[nodiscard]] std::int64_t num_free_among(std::span<const core::BlockId> blocks) const {
        return segments_.num_queued_among(blocks);
    }
    // The memory block_hash(id) and is_cached_as read, for a caller that knows the block early (a hit) to prefetch.
    [[nodiscard]] const void* block_address(core::BlockId id) const { return &entry(id); }
    [[nodiscard]] std::optional<BlockHashWithGroupId> block_hash(core::BlockId id) const {
        const Block& block = entry(id);
        if (!block.has_hash()) {
            return std::nullopt;
        }
        return block.key();
    }
    // The position of the first of `blocks` (null blocks skipped) not cached under (hashes[i], group), or
    // blocks.size() when all are: a cache hit re-checked before it is taken. One pass over the blocks' entries.
    [[nodiscard]] std::size_t first_not_cached_as(std::span<const core::BlockId> blocks,
                                                  std::span<const core::BlockHash> hashes, int group) const {
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const auto id = core::to_int(blocks[i]);
            if (id == core::to_int(kNullBlock)) {
                continue;
            }
            const Block& block = entry(id);
            if (i >= hashes.size() || block.group != group || block.hash != static_cast<std::uint64_t>(hashes[i])) {
                return i;
            }
        }
        return blocks.size();
    }
    // Whether block `id` is cached under (hash, group). While !index_has_duplicates(), that is exactly
    // get_cached_block(hash, group) == id (a block has a hash iff the index lists it, one block per key).
    [[nodiscard]] bool is_cached_as(core::BlockId id, core::BlockHash hash, int group) const {
        const Block& block = entry(id);
        return block.group == group && block.hash == static_cast<std::uint64_t>(hash);
    }
    // Cached blocks evicted so far (a popped block losing its hash): the only way a block loses its hash.
    [[nodiscard]] std::uint64_t num_evictions() const { return num_evictions_; }
    [[nodiscard]] bool index_has_duplicates() const { return cached_block_hash_to_block_.has_duplicates(); }
    [[nodiscard]] bool is_free(core::BlockId id) const { return segments_.is_queued(id); }
    [[nodiscard]] bool enable_caching() const { return enable_caching_; }
    // Head to tail: the order blocks will be allocated (evicted) in.
    [[nodiscard]] std::vector<core::BlockId> get_all_free_blocks() const {
        return segments_.get_all_free_blocks();
    }

    // Re-derives the invariant above; num_holders[b] = number of requests holding block b, per the managers.
    void check_invariants(std::span<const std::int32_t> num_holders) const;

private:
    // Frees blocks one at a time in the given order (the per-block path: frees in list order, sparse retention).
    template <typename It>
    void free_one_by_one(It first, It last, bool unhashed_to_front);

    // 16 bytes: a block's key (vLLM KVCacheBlock.block_hash and the group it is cached in). The ref count and the
    // free queue are per segment of blocks (block_segments.h).
    struct Block {
        static constexpr std::int32_t kNotHashed = -1;
        std::uint64_t hash = 0;
        std::int32_t group = kNotHashed;  // the group the block is cached in; kNotHashed when it has no hash
        [[nodiscard]] bool has_hash() const { return group != kNotHashed; }
        [[nodiscard]] BlockHashWithGroupId key() const { return BlockHashWithGroupId{core::BlockHash{hash}, group}; }
    };
    [[nodiscard]] Block& entry(std::uint32_t i) { return entries_[i]; }
    [[nodiscard]] const Block& entry(std::uint32_t i) const { return entries_[i]; }
    [[nodiscard]] Block& entry(core::BlockId id) { return entry(core::to_int(id)); }
    [[nodiscard]] const Block& entry(core::BlockId id) const { return entry(core::to_int(id)); }

    // The prefix index keeps no keys: a block's key is its entry here (PrefixIndex, "Layout").
    struct KeyOf {
        const Block* entries;
        [[nodiscard]] BlockHashWithGroupId operator()(std::uint32_t block) const { return entries[block].key(); }
    };
    [[nodiscard]] KeyOf key_of() const { return KeyOf{entries_.data()}; }

    bool enable_caching_;
    std::vector<Block> entries_;  // every block's key, indexed by BlockId
    BlockSegments segments_;      // ref counts and the LRU order
    PrefixIndex cached_block_hash_to_block_;
    std::uint64_t num_evictions_ = 0;
    KvEventSink* event_sink_ = nullptr;
};

}  // namespace servesim::cache
