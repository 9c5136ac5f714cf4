// ChunkedLocalAttentionManager: KV cache group of chunked local attention layers (Llama 4's RoPE layers; vLLM
// vllm/v1/core/single_type_kv_cache_manager.py ChunkedLocalAttentionManager, spec ChunkedLocalAttentionSpec in
// vllm/v1/kv_cache_interface.py). A token attends only to the tokens of its own attention_chunk_size-aligned chunk:
// blocks before the current chunk count as computed (null blocks) for a hit and are freed while the request runs.
#pragma once

#include "sim/cache/managers/single_type_kv_cache_manager.h"

namespace servesim::cache {

class ChunkedLocalAttentionManager final : public SingleTypeKvCacheManager {
public:
    // max_admission_blocks (0 = none): cdiv(min(chunk + max_num_batched_tokens, max_model_len), B)
    // (ChunkedLocalAttentionSpec.max_admission_blocks_per_request).
    ChunkedLocalAttentionManager(BlockPool& block_pool, int group_index, int block_size_tokens,
                                 std::int64_t attention_chunk_tokens, std::int64_t max_admission_blocks = 0);

    [[nodiscard]] std::int64_t max_admission_blocks_per_request() const override { return max_admission_blocks_; }

    // Null blocks up to the chunk start floor(max_length / chunk) · chunk, then cached blocks left to right until
    // the first miss (at most floor(max_length / B) blocks in all).
    [[nodiscard]] std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t max_length, std::span<const int> group_indices,
                                                      std::vector<std::vector<core::BlockId>>& hit_per_group)
        const override;

protected:
    // Tokens left of the current chunk: floor(computed / chunk) · chunk.
    [[nodiscard]] std::int64_t get_num_skipped_tokens(std::int64_t num_computed_tokens) const override;

private:
    std::int64_t attention_chunk_tokens_;
    std::int64_t max_admission_blocks_;
};

}  // namespace servesim::cache
