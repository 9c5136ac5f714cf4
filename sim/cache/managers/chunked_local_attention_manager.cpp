// ChunkedLocalAttentionManager: chunk-aligned hits and freeing of blocks left of the current chunk (vLLM
// ChunkedLocalAttentionManager, single_type_kv_cache_manager.py).
#include "sim/cache/managers/chunked_local_attention_manager.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

ChunkedLocalAttentionManager::ChunkedLocalAttentionManager(BlockPool& block_pool, int group_index,
                                                           int block_size_tokens, std::int64_t attention_chunk_tokens,
                                                           std::int64_t max_admission_blocks)
    : SingleTypeKvCacheManager(block_pool, group_index, block_size_tokens),
      attention_chunk_tokens_(attention_chunk_tokens),
      max_admission_blocks_(max_admission_blocks) {
    SERVESIM_CHECK(attention_chunk_tokens > 0, "group {}: attention chunk {} tokens", group_index,
                   attention_chunk_tokens);
}

std::int64_t ChunkedLocalAttentionManager::get_num_skipped_tokens(std::int64_t num_computed_tokens) const {
    return num_computed_tokens / attention_chunk_tokens_ * attention_chunk_tokens_;
}

std::int64_t ChunkedLocalAttentionManager::find_longest_cache_hit(
    std::span<const core::BlockHash> block_hashes, std::int64_t max_length, std::span<const int> group_indices,
    std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(max_length / block_size_tokens_, static_cast<std::int64_t>(block_hashes.size()));
    const std::int64_t chunk_start = max_length > 0 ? max_length / attention_chunk_tokens_ * attention_chunk_tokens_ : 0;
    const std::int64_t first_block = chunk_start / block_size_tokens_;
    for (const int g : group_indices) {
        hit_per_group[static_cast<std::size_t>(g)].assign(static_cast<std::size_t>(first_block), kNullBlock);
    }
    std::int64_t length = first_block;
    for (std::int64_t i = first_block; i < max_num_blocks; ++i) {
        const core::BlockHash hash = block_hashes[static_cast<std::size_t>(i)];
        const bool all_cached = std::all_of(group_indices.begin(), group_indices.end(), [&](int g) {
            return block_pool_.get_cached_block(hash, g).has_value();
        });
        if (!all_cached) {
            break;
        }
        for (const int g : group_indices) {
            hit_per_group[static_cast<std::size_t>(g)].push_back(*block_pool_.get_cached_block(hash, g));
        }
        ++length;
    }
    return length;
}

}  // namespace servesim::cache
