// FullAttentionManager: left-to-right prefix hit over the hash chain (vLLM FullAttentionManager).
#include "sim/cache/full_attention_manager.h"

#include <algorithm>

namespace servesim::cache {

std::int64_t FullAttentionManager::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                          std::int64_t max_length, std::span<const int> group_indices,
                                                          std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(blocks_of_.div(max_length), static_cast<std::int64_t>(block_hashes.size()));
    for (const int g : group_indices) {
        hit_per_group[g].clear();
        hit_per_group[g].reserve(static_cast<std::size_t>(std::max<std::int64_t>(max_num_blocks, 0)));
    }
    // The keys are known up front: prefetch the table slots a few blocks ahead so the probes' cache misses overlap.
    constexpr std::int64_t kPrefetchDistance = 8;
    const auto hash_at = [&](std::int64_t i) { return block_hashes[static_cast<std::size_t>(i)]; };
    std::int64_t n = 0;
    if (group_indices.size() == 1) {
        // One group (every pure full-attention model): no all-groups bookkeeping.
        const int g = group_indices.front();
        std::vector<core::BlockId>& hits = hit_per_group[static_cast<std::size_t>(g)];
        for (std::int64_t i = 0; i < std::min(kPrefetchDistance, max_num_blocks); ++i) {
            __builtin_prefetch(block_pool_.cached_block_address(hash_at(i), g));
        }
        for (; n < max_num_blocks; ++n) {
            if (n + kPrefetchDistance < max_num_blocks) {
                __builtin_prefetch(block_pool_.cached_block_address(hash_at(n + kPrefetchDistance), g));
            }
            const auto block = block_pool_.get_cached_block(block_hashes[static_cast<std::size_t>(n)], g);
            if (!block.has_value()) {
                break;
            }
            // The allocation that follows reads every hit block's entry (ref count, hash): start that miss now.
            __builtin_prefetch(block_pool_.block_address(*block));
            hits.push_back(*block);
        }
        return n;
    }
    for (; n < max_num_blocks; ++n) {
        if (!block_pool_.get_cached_blocks(block_hashes[static_cast<std::size_t>(n)], group_indices,
                                           hit_per_group)) {
            break;
        }
    }
    return n;
}

}  // namespace servesim::cache
