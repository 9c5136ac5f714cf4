// FullAttentionManager: KV cache group of full-attention layers (vLLM FullAttentionManager). Overrides only
// find_longest_cache_hit: left to right over the hash chain, stopping at the first miss; nothing is ever skipped.
#pragma once

#include "sim/cache/single_type_kv_cache_manager.h"

namespace servesim::cache {

class FullAttentionManager final : public SingleTypeKvCacheManager {
public:
    using SingleTypeKvCacheManager::SingleTypeKvCacheManager;

    // Blocks 0, 1, … while cached in every group; at most floor(max_length / B) blocks. The chain property makes the
    // first miss final: a later block's hash covers the missing one's tokens.
    [[nodiscard]] std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t max_length, std::span<const int> group_indices,
                                                      std::vector<std::vector<core::BlockId>>& hit_per_group)
        const override;
};

}  // namespace servesim::cache
