// MambaManager: KV cache group of Mamba / Gated DeltaNet layers, whose "KV" is one recurrent state per request
// (vLLM MambaManager). Owns the state-block policy of each mamba_cache_mode and the same-step rule
// (cached_blocks_this_step); the hybrid hit rule across groups is the coordinator's (kv_cache_coordinator.h).
//   kNone:  one block for the request's life (vLLM sets the block size to max_model_len); nothing cached.
//   kAlign: one running-state block, transiently two: each allocation puts the new state block at the last position
//           (earlier positions null) and the previous one is freed on the next allocation (last_state_block_idx).
//           A block is cached when a step's tokens end exactly on its boundary, so snapshots exist only where steps
//           ended on a multiple of B (docs/VLLM-RULES.md §2.5).
//   kAll:   the base allocation (every block of the chunk), every boundary cached; skipped = computed − 1 frees all
//           but the last block each step.
// Freed hashed blocks stay in the free queue as evictable snapshots. No speculative blocks (num_speculative = 0).
// Retention (vLLM MambaManager.reachable_block_mask, PRs #45845, #47782, #52216): with an interval set, only the
// states at the replay boundary floor((P − 1)/B)·B, at the shared-prefix junction and (interval N > 0) at every
// multiple of N are hashed; the others are used for computation only and, once freed, go to the free-queue head.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/managers/single_type_kv_cache_manager.h"

namespace servesim::cache {

class MambaManager final : public SingleTypeKvCacheManager {
public:
    MambaManager(BlockPool& block_pool, int group_index, int block_size_tokens, MambaCacheMode mode,
                 std::optional<std::int64_t> retention_interval_tokens = std::nullopt);

    // Right to left from block floor(max_length / B) − 1: the first position whose state is cached in every group
    // gives [null × i, block]. kNone never hits.
    [[nodiscard]] std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t max_length, std::span<const int> group_indices,
                                                      std::vector<std::vector<core::BlockId>>& hit_per_group)
        const override;

    // Same-step rule: a hit on a state cached in this step (another request is computing it right now) returns
    // num_gpu_blocks + 1, so the allocation fails and the request waits a step.
    [[nodiscard]] std::int64_t get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                          std::span<const core::BlockId> new_computed_blocks,
                                                          std::int64_t total_computed_tokens,
                                                          std::int64_t num_tokens_main_model,
                                                          bool apply_admission_cap = false) const override;
    void allocate_new_blocks(core::RequestId id, std::int64_t num_tokens, std::int64_t num_tokens_main_model) override;
    void cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes, std::int64_t num_tokens,
                      ReachableBoundaries boundaries = {}) override;
    void free(core::RequestId id) override;
    void remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens) override;
    // Clears cached_blocks_this_step.
    void new_step_starts() override { cached_blocks_this_step_.clear(); }

protected:
    // Only the state after the last computed token is needed: computed − 1.
    [[nodiscard]] std::int64_t get_num_skipped_tokens(std::int64_t num_computed_tokens) const override {
        return num_computed_tokens - 1;
    }
    void check_request(const RequestBlocks& req) const override;
    [[nodiscard]] bool unhashed_blocks_to_front() const override { return retention_interval_tokens_.has_value(); }

private:
    struct AlignState {
        std::optional<std::int64_t> last_state_block_idx;  // the state block to free on the next allocation
    };
    struct BlockHashKeyHash {
        std::size_t operator()(core::BlockHash h) const { return static_cast<std::size_t>(core::to_int(h)); }
    };

    // Whether the state after (block + 1)·B tokens is retained (always under dense retention).
    [[nodiscard]] bool retained(std::int64_t block, ReachableBoundaries boundaries) const;

    MambaCacheMode mode_;
    std::optional<std::int64_t> retention_interval_tokens_;  // nullopt = dense
    // kAlign: requests that went through allocate_new_blocks (vLLM _allocated_block_reqs) and their last state.
    std::unordered_map<core::RequestId, AlignState, RequestIdHash> align_states_;
    std::unordered_set<core::BlockHash, BlockHashKeyHash> cached_blocks_this_step_;
};

}  // namespace servesim::cache
