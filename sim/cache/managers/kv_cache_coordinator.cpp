// KvCacheCoordinator: groups over one pool and the hybrid hit rule (vLLM kv_cache_coordinator.py).
#include "sim/cache/managers/kv_cache_coordinator.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "sim/cache/managers/chunked_local_attention_manager.h"
#include "sim/cache/managers/full_attention_manager.h"
#include "sim/cache/managers/mamba_manager.h"
#include "sim/cache/managers/sliding_window_manager.h"

namespace servesim::cache {

KvCacheCoordinator::KvCacheCoordinator(const KvCacheConfig& config)
    : enable_caching_(config.enable_prefix_caching),
      use_eagle_(config.use_eagle),
      block_pool_(config.num_gpu_blocks, config.enable_prefix_caching) {
    SERVESIM_CHECK(!config.groups.empty(), "a KV cache needs at least one group");
    // As vLLM: without prefix caching Mamba runs in mode none (one state block per request).
    const MambaCacheMode mamba_mode = config.enable_prefix_caching ? config.mamba_cache_mode : MambaCacheMode::kNone;
    for (std::size_t i = 0; i < config.groups.size(); ++i) {
        const KvCacheGroup& group = config.groups[i];
        const int g = static_cast<int>(i);
        const bool ignores_block_size = group.kind == KvGroupKind::kMamba && mamba_mode == MambaCacheMode::kNone;
        if (!ignores_block_size) {
            if (hash_block_size_tokens_ == 0) {
                hash_block_size_tokens_ = group.block_size_tokens;
            }
            SERVESIM_CHECK(group.block_size_tokens == hash_block_size_tokens_,
                           "group {} has block size {} but group 0.. have {}: all groups must share one block size", g,
                           group.block_size_tokens, hash_block_size_tokens_);
        }
        all_full_attention_ = all_full_attention_ && group.kind == KvGroupKind::kFullAttention;
        switch (group.kind) {
            case KvGroupKind::kFullAttention:
                managers_.push_back(std::make_unique<FullAttentionManager>(block_pool_, g, group.block_size_tokens));
                break;
            case KvGroupKind::kSlidingWindow: {
                // vLLM SlidingWindowSpec.max_admission_blocks_per_request (kv_cache_interface.py).
                std::int64_t cap = 0;
                if (config.swa_admission_cap && config.max_num_batched_tokens > 0 && config.max_model_len > 0) {
                    cap = cdiv(std::min<std::int64_t>(group.sliding_window_tokens - 1 + config.max_num_batched_tokens,
                                                      config.max_model_len),
                               group.block_size_tokens) +
                          1;
                }
                managers_.push_back(std::make_unique<SlidingWindowManager>(block_pool_, g, group.block_size_tokens,
                                                                           group.sliding_window_tokens, cap));
                break;
            }
            case KvGroupKind::kChunkedLocal: {
                // vLLM ChunkedLocalAttentionSpec.max_admission_blocks_per_request (kv_cache_interface.py).
                std::int64_t cap = 0;
                if (config.swa_admission_cap && config.max_num_batched_tokens > 0 && config.max_model_len > 0) {
                    cap = cdiv(std::min<std::int64_t>(group.attention_chunk_tokens + config.max_num_batched_tokens,
                                                      config.max_model_len),
                               group.block_size_tokens);
                }
                managers_.push_back(std::make_unique<ChunkedLocalAttentionManager>(
                    block_pool_, g, group.block_size_tokens, group.attention_chunk_tokens, cap));
                break;
            }
            case KvGroupKind::kMamba:
                managers_.push_back(std::make_unique<MambaManager>(block_pool_, g, std::max(group.block_size_tokens, 1),
                                                                   mamba_mode, config.mamba_retention_interval_tokens));
                break;
        }
        // Bucket by spec, keeping first-seen order.
        const auto same_spec = [&](const SpecGroup& s) {
            const KvCacheGroup& first = config.groups[static_cast<std::size_t>(s.group_indices.front())];
            return first.kind == group.kind && first.block_size_tokens == group.block_size_tokens &&
                   first.sliding_window_tokens == group.sliding_window_tokens &&
                   first.attention_chunk_tokens == group.attention_chunk_tokens;
        };
        const auto it = std::find_if(spec_groups_.begin(), spec_groups_.end(), same_spec);
        if (it == spec_groups_.end()) {
            spec_groups_.push_back(SpecGroup{group.kind, {g}, managers_.back().get()});
        } else {
            it->group_indices.push_back(g);
        }
    }
    if (hash_block_size_tokens_ == 0) {
        hash_block_size_tokens_ = std::max(config.groups.front().block_size_tokens, 1);
    }
    hash_blocks_of_ = BlockDivider(hash_block_size_tokens_);
    // Full attention first: its left-to-right chain is the tightest first bound.
    std::stable_partition(spec_groups_.begin(), spec_groups_.end(),
                          [](const SpecGroup& s) { return s.kind == KvGroupKind::kFullAttention; });
}

std::span<const core::BlockId> KvCacheCoordinator::group_hit(const CacheHit& hit, int group) {
    if (hit.blocks_per_group.empty()) {
        return {};
    }
    return hit.blocks_per_group[static_cast<std::size_t>(group)];
}

CacheHit KvCacheCoordinator::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                    std::int64_t max_cache_hit_length) const {
    CacheHit hit;
    find_longest_cache_hit(block_hashes, max_cache_hit_length, hit);
    return hit;
}

void KvCacheCoordinator::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                std::int64_t max_cache_hit_length, CacheHit& hit) const {
    reset_hit(hit, managers_.size());
    if (!enable_caching_ || max_cache_hit_length <= 0) {
        return;
    }
    const bool is_simple_hybrid =
        spec_groups_.size() == 2 && spec_groups_.front().kind == KvGroupKind::kFullAttention;
    std::vector<char>& looked_up = looked_up_;
    looked_up.assign(spec_groups_.size(), 0);
    std::int64_t hit_length = max_cache_hit_length;
    std::int64_t longest_hit_length = 0;  // the longest hit a single spec found (vLLM longest_hit_length)
    while (true) {
        std::int64_t curr_hit_length = hit_length;
        for (std::size_t s = 0; s < spec_groups_.size(); ++s) {
            const SpecGroup& spec = spec_groups_[s];
            const std::int64_t block_size = spec.manager->block_size_tokens();
            if (spec.kind == KvGroupKind::kFullAttention && looked_up[s]) {
                // A full-attention hit is downward closed: keep its first curr / B blocks.
                curr_hit_length = curr_hit_length / block_size * block_size;
                continue;
            }
            std::int64_t num_blocks = spec.manager->find_longest_cache_hit(block_hashes, curr_hit_length,
                                                                           spec.group_indices, hit.blocks_per_group);
            if (use_eagle_ && spec.kind == KvGroupKind::kFullAttention && num_blocks > 0) {
                --num_blocks;  // EAGLE/MTP: the last matched block is dropped (the final resize trims the lists)
            }
            looked_up[s] = 1;
            curr_hit_length = num_blocks * block_size;
            longest_hit_length = std::max(longest_hit_length, curr_hit_length);
        }
        if (curr_hit_length >= hit_length) {
            break;
        }
        hit_length = curr_hit_length;
        if (is_simple_hybrid) {
            break;
        }
    }
    const SpecGroup& first = spec_groups_.front();
    if (first.kind == KvGroupKind::kFullAttention) {
        const auto num_blocks = static_cast<std::size_t>(hit_length / first.manager->block_size_tokens());
        for (const int g : first.group_indices) {
            auto& blocks = hit.blocks_per_group[static_cast<std::size_t>(g)];
            blocks.resize(std::min(blocks.size(), num_blocks));
        }
    }
    hit.num_tokens = hit_length;
    if (spec_groups_.size() > 1) {
        // PR #37898: what some group (full attention, looked up first) has cached beyond the common hit.
        hit.num_uncached_common_prefix_tokens = std::max<std::int64_t>(longest_hit_length - hit_length, 0);
    }
}

std::int64_t KvCacheCoordinator::get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                            const CacheHit& hit, std::int64_t total_computed_tokens,
                                                            std::int64_t num_tokens_main_model,
                                                            bool apply_admission_cap) const {
    std::int64_t n = 0;
    for (const auto& manager : managers_) {
        n += manager->get_num_blocks_to_allocate(id, num_tokens, group_hit(hit, manager->group_index()),
                                                 total_computed_tokens, num_tokens_main_model, apply_admission_cap);
    }
    return n;
}

bool KvCacheCoordinator::blocks_to_allocate_fit(core::RequestId id, std::int64_t num_tokens, const CacheHit& hit,
                                                std::int64_t total_computed_tokens,
                                                std::int64_t num_tokens_main_model, bool apply_admission_cap) const {
    const std::int64_t num_free = block_pool_.num_free_blocks();
    if (all_full_attention_) {
        // FullAttentionManager does not override the count, so the base class's bound holds for every group.
        std::int64_t bound = 0;
        for (const auto& manager : managers_) {
            bound += manager->max_blocks_to_allocate(id, num_tokens, group_hit(hit, manager->group_index()),
                                                     total_computed_tokens, apply_admission_cap);
        }
        if (bound <= num_free) {
            return true;
        }
    }
    return get_num_blocks_to_allocate(id, num_tokens, hit, total_computed_tokens, num_tokens_main_model,
                                      apply_admission_cap) <= num_free;
}

void KvCacheCoordinator::allocate_new_computed_blocks(core::RequestId id, const CacheHit& hit,
                                                      std::int64_t num_local_computed_tokens) {
    for (const auto& manager : managers_) {
        manager->allocate_new_computed_blocks(id, group_hit(hit, manager->group_index()), num_local_computed_tokens);
    }
}

void KvCacheCoordinator::allocate_new_blocks(core::RequestId id, std::int64_t num_tokens,
                                             std::int64_t num_tokens_main_model) {
    for (const auto& manager : managers_) {
        manager->allocate_new_blocks(id, num_tokens, num_tokens_main_model);
    }
}

void KvCacheCoordinator::cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                                      std::int64_t num_tokens,
                                      ReachableBoundaries boundaries) {
    if (!enable_caching_) {
        return;
    }
    const std::int64_t floored = hash_blocks_of_.div(num_tokens) * hash_block_size_tokens_;
    for (const auto& manager : managers_) {
        manager->cache_blocks(id, block_hashes, floored, boundaries);
    }
}

bool KvCacheCoordinator::running_step_changes_nothing(core::RequestId id, std::uint32_t* slot_hint,
                                                      std::int64_t num_tokens, std::int64_t num_tokens_to_cache) const {
    if (!all_full_attention_) {
        return false;
    }
    const std::int64_t floored = hash_blocks_of_.div(num_tokens_to_cache) * hash_block_size_tokens_;
    for (const auto& manager : managers_) {
        if (!manager->holds_slots_and_cached(id, slot_hint, num_tokens, floored)) {
            return false;
        }
    }
    return true;
}

std::optional<std::pair<std::int64_t, std::int64_t>> KvCacheCoordinator::min_blocks_held_and_cached(
    core::RequestId id, std::uint32_t* slot_hint) const {
    std::pair<std::int64_t, std::int64_t> out{std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::max()};
    for (const auto& manager : managers_) {
        const auto held = manager->blocks_held_and_cached(id, slot_hint);
        if (!held) {
            return std::nullopt;
        }
        out.first = std::min(out.first, held->first);
        out.second = std::min(out.second, held->second);
    }
    return out;
}

void KvCacheCoordinator::remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens) {
    for (const auto& manager : managers_) {
        manager->remove_skipped_blocks(id, total_computed_tokens);
    }
}

void KvCacheCoordinator::free(core::RequestId id) {
    for (const auto& manager : managers_) {
        manager->free(id);
    }
}

void KvCacheCoordinator::new_step_starts() {
    for (const auto& manager : managers_) {
        manager->new_step_starts();
    }
}

std::vector<std::vector<core::BlockId>> KvCacheCoordinator::get_block_ids(core::RequestId id) const {
    std::vector<std::vector<core::BlockId>> out;
    out.reserve(managers_.size());
    for (const auto& manager : managers_) {
        const auto blocks = manager->blocks(id);
        out.emplace_back(blocks.begin(), blocks.end());
    }
    return out;
}

std::int64_t KvCacheCoordinator::num_blocks_held(core::RequestId id) const {
    std::int64_t n = 0;
    for (const auto& manager : managers_) {
        n += manager->num_blocks_held(id);
    }
    return n;
}

void KvCacheCoordinator::check_invariants() const {
    std::vector<std::int32_t> num_holders(static_cast<std::size_t>(block_pool_.num_gpu_blocks()), 0);
    for (const auto& manager : managers_) {
        manager->add_holders(num_holders);
        manager->check_invariants();
    }
    block_pool_.check_invariants(num_holders);
}

}  // namespace servesim::cache
