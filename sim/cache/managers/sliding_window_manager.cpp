// SlidingWindowManager: window-sized hits and out-of-window freeing (vLLM SlidingWindowManager).
#include "sim/cache/managers/sliding_window_manager.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

SlidingWindowManager::SlidingWindowManager(BlockPool& block_pool, int group_index, int block_size_tokens,
                                           std::int64_t sliding_window_tokens, std::int64_t max_admission_blocks)
    : SingleTypeKvCacheManager(block_pool, group_index, block_size_tokens),
      sliding_window_tokens_(sliding_window_tokens),
      max_admission_blocks_(max_admission_blocks) {
    SERVESIM_CHECK(sliding_window_tokens > 0, "group {}: sliding window {} tokens", group_index,
                   sliding_window_tokens);
}

std::int64_t SlidingWindowManager::get_num_skipped_tokens(std::int64_t num_computed_tokens) const {
    return std::max<std::int64_t>(0, num_computed_tokens - sliding_window_tokens_ + 1);
}

std::int64_t SlidingWindowManager::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                          std::int64_t max_length, std::span<const int> group_indices,
                                                          std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    // −1: the token being computed is itself inside the window.
    const std::int64_t num_contiguous_needed = cdiv(sliding_window_tokens_ - 1, block_size_tokens_);
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(max_length / block_size_tokens_, static_cast<std::int64_t>(block_hashes.size()));
    for (const int g : group_indices) {
        hit_per_group[g].assign(static_cast<std::size_t>(max_num_blocks), kNullBlock);
    }
    std::int64_t num_contiguous = 0;
    std::int64_t length = -1;
    for (std::int64_t i = max_num_blocks - 1; i >= 0; --i) {
        const core::BlockHash hash = block_hashes[static_cast<std::size_t>(i)];
        const bool all_cached = std::all_of(group_indices.begin(), group_indices.end(), [&](int g) {
            return block_pool_.get_cached_block(hash, g).has_value();
        });
        if (!all_cached) {
            num_contiguous = 0;
            continue;
        }
        for (const int g : group_indices) {
            hit_per_group[static_cast<std::size_t>(g)][static_cast<std::size_t>(i)] =
                *block_pool_.get_cached_block(hash, g);
        }
        if (++num_contiguous >= num_contiguous_needed) {
            length = i + num_contiguous;
            break;
        }
    }
    if (length < 0) {
        // No full window: the blocks cached from the very start still form a hit.
        length = num_contiguous;
    }
    for (const int g : group_indices) {
        hit_per_group[g].resize(static_cast<std::size_t>(length));
    }
    return length;
}

}  // namespace servesim::cache
