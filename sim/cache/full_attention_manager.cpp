// FullAttentionManager: left-to-right prefix hit over the hash chain (vLLM FullAttentionManager).
#include "sim/cache/full_attention_manager.h"

#include <algorithm>

namespace servesim::cache {

std::int64_t FullAttentionManager::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                          std::int64_t max_length, std::span<const int> group_indices,
                                                          std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    for (const int g : group_indices) {
        hit_per_group[g].clear();
    }
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(max_length / block_size_tokens_, static_cast<std::int64_t>(block_hashes.size()));
    std::int64_t n = 0;
    for (; n < max_num_blocks; ++n) {
        if (!block_pool_.get_cached_blocks(block_hashes[static_cast<std::size_t>(n)], group_indices,
                                           hit_per_group)) {
            break;
        }
    }
    return n;
}

}  // namespace servesim::cache
