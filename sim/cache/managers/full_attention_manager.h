// FullAttentionManager: KV cache group of full-attention layers (vLLM FullAttentionManager). Overrides only
// find_longest_cache_hit: left to right over the hash chain, stopping at the first miss; nothing is ever skipped.
#pragma once

#include "sim/cache/managers/single_type_kv_cache_manager.h"
#include "sim/cache/prefix_cache/hit_chain_memo.h"

namespace servesim::cache {

class FullAttentionManager final : public SingleTypeKvCacheManager {
public:
    using SingleTypeKvCacheManager::SingleTypeKvCacheManager;

    // Blocks 0, 1, … while cached in every group; at most floor(max_length / B) blocks. The chain property makes the
    // first miss final: a later block's hash covers the missing one's tokens. Blocks earlier lookups found are
    // re-checked in the pool before the prefix index is probed (HitChainMemo).
    [[nodiscard]] std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t max_length, std::span<const int> group_indices,
                                                      std::vector<std::vector<core::BlockId>>& hit_per_group)
        const override;

    // Remembers the request's cached blocks in the memo (its next turn will look them up), then frees as the base.
    void free(core::RequestId id) override;

protected:
    // Nothing is ever skipped in full attention: a list holds hit blocks (the prefix index never lists the null
    // block, which is never hashed) and blocks from the free queue (where the null block never is).
    void check_request(const RequestBlocks& req) const override;

private:
    // Blocks earlier single-group lookups found; a cache of the probes, never of the answer (hit_chain_memo.h).
    mutable HitChainMemo memo_;
};

}  // namespace servesim::cache
