// SlidingWindowManager: KV cache group of sliding-window layers (vLLM SlidingWindowManager). A hit needs only the
// last cdiv(window − 1, B) blocks before the hit point, found right to left; blocks that fall out of the window
// are freed while the request runs (get_num_skipped_tokens). The simplest faithful version: no EAGLE adjustment.
#pragma once

#include "sim/cache/managers/single_type_kv_cache_manager.h"

namespace servesim::cache {

class SlidingWindowManager final : public SingleTypeKvCacheManager {
public:
    // max_admission_blocks (0 = none): the full-ISL admission cap, cdiv(min(window − 1 + max_num_batched_tokens,
    // max_model_len), B) + 1 (vLLM SlidingWindowSpec.max_admission_blocks_per_request, kv_cache_interface.py).
    SlidingWindowManager(BlockPool& block_pool, int group_index, int block_size_tokens,
                         std::int64_t sliding_window_tokens, std::int64_t max_admission_blocks = 0);

    [[nodiscard]] std::int64_t max_admission_blocks_per_request() const override { return max_admission_blocks_; }

    // Scans right to left for cdiv(window − 1, B) consecutive cached blocks; positions before them are null blocks.
    // Without such a run, the cached blocks at the very start (fewer than a window) still count.
    [[nodiscard]] std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t max_length, std::span<const int> group_indices,
                                                      std::vector<std::vector<core::BlockId>>& hit_per_group)
        const override;

protected:
    // Tokens before the window of the next token: max(0, computed − window + 1).
    [[nodiscard]] std::int64_t get_num_skipped_tokens(std::int64_t num_computed_tokens) const override;

private:
    std::int64_t sliding_window_tokens_;
    std::int64_t max_admission_blocks_;
};

}  // namespace servesim::cache
