// MambaManager: state blocks per mamba_cache_mode and the same-step rule (vLLM MambaManager); see mamba_manager.h.
#include "sim/cache/managers/mamba_manager.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

MambaManager::MambaManager(BlockPool& block_pool, int group_index, int block_size_tokens, MambaCacheMode mode,
                           std::optional<std::int64_t> retention_interval_tokens)
    : SingleTypeKvCacheManager(block_pool, group_index, block_size_tokens),
      mode_(mode),
      retention_interval_tokens_(retention_interval_tokens) {
    SERVESIM_CHECK(!retention_interval_tokens || (*retention_interval_tokens >= 0 &&
                                                  *retention_interval_tokens % block_size_tokens == 0),
                   "group {}: retention interval {} is not a non-negative multiple of the block size {}", group_index,
                   retention_interval_tokens.value_or(0), block_size_tokens);
}

bool MambaManager::retained(std::int64_t block, ReachableBoundaries boundaries) const {
    if (!retention_interval_tokens_) {
        return true;
    }
    const std::int64_t b = block_size_tokens_;
    const std::int64_t end_tokens = (block + 1) * b;  // the state after this many tokens
    const std::int64_t interval = *retention_interval_tokens_;
    if (interval > 0 && end_tokens % interval == 0) {
        return true;
    }
    // A boundary t is served by the state at floor(t / B)·B (reachable_block_mask: block floor(t/B) − 1).
    const auto serves = [&](std::int64_t t) { return t >= b && t / b - 1 == block; };
    return serves(boundaries.replay_tokens) ||
           (boundaries.shared_prefix_tokens > 0 && serves(boundaries.shared_prefix_tokens));
}

std::int64_t MambaManager::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                  std::int64_t max_length, std::span<const int> group_indices,
                                                  std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    for (const int g : group_indices) {
        hit_per_group[g].clear();
    }
    if (mode_ == MambaCacheMode::kNone) {
        return 0;
    }
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(max_length / block_size_tokens_, static_cast<std::int64_t>(block_hashes.size()));
    for (std::int64_t i = max_num_blocks - 1; i >= 0; --i) {
        if (block_pool_.get_cached_blocks(block_hashes[static_cast<std::size_t>(i)], group_indices,
                                          hit_per_group)) {
            // [null × i, state after (i+1)·B tokens]
            for (const int g : group_indices) {
                auto& blocks = hit_per_group[static_cast<std::size_t>(g)];
                blocks.insert(blocks.begin(), static_cast<std::size_t>(i), kNullBlock);
            }
            return i + 1;
        }
    }
    return 0;
}

std::int64_t MambaManager::get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                      std::span<const core::BlockId> new_computed_blocks,
                                                      std::int64_t total_computed_tokens,
                                                      std::int64_t num_tokens_main_model,
                                                      bool /*apply_admission_cap*/) const {
    if (!new_computed_blocks.empty()) {
        const auto hash = block_pool_.block_hash(new_computed_blocks.back());
        if (hash.has_value() && cached_blocks_this_step_.contains(hash->hash)) {
            return block_pool_.num_gpu_blocks() + 1;
        }
    }
    switch (mode_) {
        case MambaCacheMode::kNone: {
            const RequestBlocks* req = find(id);
            return (req == nullptr || req->blocks.empty()) ? 1 : 0;
        }
        case MambaCacheMode::kAll:
            return SingleTypeKvCacheManager::get_num_blocks_to_allocate(id, num_tokens, new_computed_blocks,
                                                                        total_computed_tokens, num_tokens_main_model);
        case MambaCacheMode::kAlign:
            break;
    }
    // kAlign: lookahead slots are ignored (they would break the alignment); one new block at most.
    const RequestBlocks* req = find(id);
    const std::int64_t num_held = req == nullptr ? 0 : static_cast<std::int64_t>(req->blocks.size());
    std::int64_t num_new_blocks = cdiv(num_tokens_main_model, block_size_tokens_) -
                                  static_cast<std::int64_t>(new_computed_blocks.size()) - num_held;
    num_new_blocks = num_new_blocks > 0 ? 1 : 0;
    return num_new_blocks + num_evictable_blocks(new_computed_blocks);
}

void MambaManager::allocate_new_blocks(core::RequestId id, std::int64_t num_tokens,
                                       std::int64_t num_tokens_main_model) {
    switch (mode_) {
        case MambaCacheMode::kNone: {
            RequestBlocks& req = find_or_add(id);
            if (req.blocks.empty()) {
                block_pool_.get_new_blocks(1, req.blocks);
            }
            return;
        }
        case MambaCacheMode::kAll:
            SingleTypeKvCacheManager::allocate_new_blocks(id, num_tokens, num_tokens_main_model);
            return;
        case MambaCacheMode::kAlign:
            break;
    }
    RequestBlocks& req = find_or_add(id);
    const std::int64_t num_required_blocks = cdiv(num_tokens_main_model, block_size_tokens_);
    const auto prev_block_len = static_cast<std::int64_t>(req.blocks.size());
    if (num_required_blocks <= prev_block_len) {
        return;
    }
    const auto [it, first_allocation] = align_states_.try_emplace(id);
    if (!first_allocation) {
        // The running state sits in the last block; it seeds the new block and is freed on the next allocation.
        it->second.last_state_block_idx = prev_block_len - 1;
    } else if (prev_block_len > 0) {
        // A new request with a prefix hit: its last block holds the hit state.
        it->second.last_state_block_idx = prev_block_len - 1;
    }
    // Positions before the new state block are null.
    req.blocks.resize(static_cast<std::size_t>(num_required_blocks - 1), kNullBlock);
    block_pool_.get_new_blocks(1, req.blocks);
}

void MambaManager::cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                                std::int64_t num_tokens, ReachableBoundaries boundaries) {
    if (mode_ == MambaCacheMode::kNone) {
        return;
    }
    RequestBlocks* req_ptr = find(id);
    if (req_ptr == nullptr) {
        return;
    }
    RequestBlocks& req = *req_ptr;
    const std::int64_t before = req.num_cached_blocks;
    const std::int64_t num_full_blocks = num_tokens / block_size_tokens_;
    if (before >= num_full_blocks) {
        return;
    }
    // Block by block so that states sparse retention does not keep stay unhashed (vLLM block_mask).
    for (std::int64_t i = before; i < num_full_blocks; ++i) {
        const core::BlockId block = req.blocks[static_cast<std::size_t>(i)];
        if (block == kNullBlock || !retained(i, boundaries)) {
            continue;
        }
        block_pool_.cache_full_blocks(req.blocks, block_hashes, i, i + 1, group_index_);
        cached_blocks_this_step_.insert(block_hashes[static_cast<std::size_t>(i)]);
    }
    req.num_cached_blocks = num_full_blocks;
}

void MambaManager::free(core::RequestId id) {
    align_states_.erase(id);
    SingleTypeKvCacheManager::free(id);
}

void MambaManager::remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens) {
    if (mode_ == MambaCacheMode::kNone) {
        return;
    }
    SingleTypeKvCacheManager::remove_skipped_blocks(id, total_computed_tokens);
    if (mode_ != MambaCacheMode::kAlign) {
        return;
    }
    const auto state = align_states_.find(id);
    if (state == align_states_.end() || !state->second.last_state_block_idx.has_value()) {
        return;
    }
    const std::int64_t idx = *state->second.last_state_block_idx;
    if (idx < cdiv(total_computed_tokens, block_size_tokens_) - 1) {
        RequestBlocks* req = find(id);
        SERVESIM_CHECK(req != nullptr, "group {}: request {} has an align state but no blocks", group_index_,
                       core::to_int(id));
        auto& blocks = req->blocks;
        core::BlockId& block = blocks[static_cast<std::size_t>(idx)];
        if (block != kNullBlock) {
            const core::BlockId freed[] = {block};
            block = kNullBlock;
            block_pool_.free_blocks(freed, unhashed_blocks_to_front());
        }
    }
}

void MambaManager::check_request(const RequestBlocks& req) const {
    const auto held = std::count_if(req.blocks.begin(), req.blocks.end(), [](core::BlockId b) {
        return b != kNullBlock;
    });
    if (mode_ == MambaCacheMode::kNone) {
        SERVESIM_CHECK(held <= 1, "group {}: mamba_cache_mode none holds {} blocks", group_index_, held);
    } else if (mode_ == MambaCacheMode::kAlign) {
        SERVESIM_CHECK(held <= 2, "group {}: mamba_cache_mode align holds {} blocks", group_index_, held);
    }
}

}  // namespace servesim::cache
