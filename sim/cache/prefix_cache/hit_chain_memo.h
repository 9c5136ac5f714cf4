// HitChainMemo: the block ids recent prefix-cache lookups of one full-attention group found, so that the next lookup
// of the same prefix re-checks those blocks instead of probing the prefix index for each one. Owns only the memo;
// FullAttentionManager::find_longest_cache_hit uses it and decides when it applies. The lookup it speeds up is vLLM
// FullAttentionManager.find_longest_cache_hit (single_type_kv_cache_manager.py): block i hits iff
// BlockPool.get_cached_block(hash i) returns a block, left to right, stopping at the first miss.
//
// Why it is exact: a remembered block is taken for position i only if the pool still has it cached under hash i in
// this group, and only while the prefix index holds no duplicate keys. A block has a hash iff the index lists it under
// that key (the pool's invariant), so with one block per key the index's answer for hash i is exactly that block.
// A block evicted (or recomputed under another id) since fails the re-check, and the lookup probes from there.
// A cache: results never depend on what it holds, only the number of probes does.
//
// A memo entry is a segment: the hit blocks from some position p on, keyed by the hash of block p (a chained hash
// names its whole prefix, so p needs no storing). Lookups that share a prefix (a tenant's system prompt) and then
// diverge (dialogues) leave one segment for the shared part and one per branch. Direct-mapped and bounded in size.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sim/cache/prefix_cache/block_span.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

class HitChainMemo {
public:
    HitChainMemo() = default;

    // The blocks remembered from the position whose block hash is `key` on, or an empty span.
    [[nodiscard]] std::span<const core::BlockId> find(core::BlockHash key) const {
        if (entries_.empty()) {
            return {};
        }
        const Entry& e = entries_[slot_of(key)];
        return e.key == key && !e.blocks.empty() ? std::span<const core::BlockId>(e.blocks)
                                                 : std::span<const core::BlockId>{};
    }
    // Remembers `blocks` as the hit blocks from the position whose hash is `key` on (replacing what that slot held),
    // unless it would take the memo over its size bound.
    void record(core::BlockHash key, std::span<const core::BlockId> blocks);
    // Forgets the segment under `key` (its first block no longer hits).
    void forget(core::BlockHash key);

    // Number of block ids held over all segments.
    [[nodiscard]] std::size_t num_blocks() const { return num_blocks_; }

    static constexpr std::size_t kNumSlots = 4096;
    // 4 MiB of block ids at most, whatever the workload.
    static constexpr std::size_t kMaxBlocks = std::size_t{1} << 20;

private:
    struct Entry {
        core::BlockHash key{};
        std::vector<core::BlockId> blocks;
    };
    [[nodiscard]] static std::size_t slot_of(core::BlockHash key) {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9e3779b97f4a7c15ULL) >> 52);
    }

    std::vector<Entry> entries_;  // kNumSlots, allocated by the first record (a replica that never caches pays nothing)
    std::size_t num_blocks_ = 0;
};

}  // namespace servesim::cache
