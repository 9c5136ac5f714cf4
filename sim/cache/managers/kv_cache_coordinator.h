// KvCacheCoordinator: the KV cache groups of one replica over one shared BlockPool (vLLM kv_cache_coordinator.py:
// KVCacheCoordinatorNoPrefixCache, UnitaryKVCacheCoordinator and HybridKVCacheCoordinator in one class). Owns the
// hybrid hit rule (docs/VLLM-RULES.md §2.6) and fans every per-request operation out to the group managers in group
// order. It never counts statistics or decides whether an allocation fits: that is KvCacheManager (kv_cache_manager.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/managers/single_type_kv_cache_manager.h"
#include "sim/cache/prefix_cache/block_pool.h"

namespace servesim::cache {

class KvCacheCoordinator {
public:
    explicit KvCacheCoordinator(const KvCacheConfig& config);

    // vLLM HybridKVCacheCoordinator.find_longest_cache_hit. Groups with equal specs are looked up together (a block
    // must be cached in each); full attention first gives L_fa left to right; every other spec may only shorten the
    // candidate (Mamba: the last position ≤ the candidate whose state is cached in every Mamba group); repeat until
    // no spec shortens it (one pass for one full-attention spec plus one other), then cut full attention to it.
    // Returns an empty hit when prefix caching is off.
    [[nodiscard]] CacheHit find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                  std::int64_t max_cache_hit_length) const;
    // The same lookup written into `hit`, whose vectors keep their capacity (the scheduler's one hit, reused for
    // every admission: two allocations per lookup otherwise). Every field of `hit` is overwritten.
    void find_longest_cache_hit(std::span<const core::BlockHash> block_hashes, std::int64_t max_cache_hit_length,
                                CacheHit& hit) const;

    [[nodiscard]] std::int64_t get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                          const CacheHit& hit, std::int64_t total_computed_tokens,
                                                          std::int64_t num_tokens_main_model,
                                                          bool apply_admission_cap = false) const;
    // Whether get_num_blocks_to_allocate(same arguments) <= num_free_blocks, vLLM allocate_slots' admission test
    // (kv_cache_manager.py: num_blocks_to_allocate > block_pool.get_num_free_blocks() fails). With full-attention
    // groups only the count is new blocks + evictable hits, at most new blocks + hits: when that bound fits, the
    // answer is yes without reading one ref count per hit block (~190 per admission on a dialogue workload).
    [[nodiscard]] bool blocks_to_allocate_fit(core::RequestId id, std::int64_t num_tokens, const CacheHit& hit,
                                              std::int64_t total_computed_tokens, std::int64_t num_tokens_main_model,
                                              bool apply_admission_cap = false) const;
    void allocate_new_computed_blocks(core::RequestId id, const CacheHit& hit, std::int64_t num_local_computed_tokens);
    void allocate_new_blocks(core::RequestId id, std::int64_t num_tokens, std::int64_t num_tokens_main_model);
    // Caches full blocks up to num_tokens floored to the lcm of the group block sizes (all equal here).
    void cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes, std::int64_t num_tokens,
                      ReachableBoundaries boundaries = {});
    void remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens);
    // A running request's allocate_slots without hits changes nothing when every group is full attention (skips no
    // tokens), already holds slots for num_tokens and has cached the full blocks of num_tokens_to_cache (floored as
    // cache_blocks does; 0 when nothing is cached): true then, and the caller may skip the call. False otherwise.
    [[nodiscard]] bool running_step_changes_nothing(core::RequestId id, std::uint32_t* slot_hint, std::int64_t num_tokens,
                                                    std::int64_t num_tokens_to_cache) const;
    // The fewest blocks any group holds for the request and the fewest any has cached; nullopt when some group
    // holds no list for it.
    [[nodiscard]] std::optional<std::pair<std::int64_t, std::int64_t>> min_blocks_held_and_cached(
        core::RequestId id, std::uint32_t* slot_hint) const;
    void free(core::RequestId id);
    void new_step_starts();

    [[nodiscard]] BlockPool& block_pool() { return block_pool_; }
    [[nodiscard]] const BlockPool& block_pool() const { return block_pool_; }
    [[nodiscard]] int num_groups() const { return static_cast<int>(managers_.size()); }
    // Every group is full attention (no sliding window, no Mamba): nothing is ever skipped or capped.
    [[nodiscard]] bool all_full_attention() const { return all_full_attention_; }
    // The manager of the only group when the pool has one group and it is full attention (the running requests'
    // one-pass allocation, SingleTypeKvCacheManager::extend_running, applies); nullptr otherwise.
    [[nodiscard]] SingleTypeKvCacheManager* sole_full_attention_manager() {
        return all_full_attention_ && managers_.size() == 1 ? managers_.front().get() : nullptr;
    }

    // The hash block size: every group's block size (Mamba kNone groups excepted).
    [[nodiscard]] int hash_block_size_tokens() const { return hash_block_size_tokens_; }
    [[nodiscard]] const BlockDivider& hash_blocks_of() const { return hash_blocks_of_; }
    [[nodiscard]] std::vector<std::vector<core::BlockId>> get_block_ids(core::RequestId id) const;
    [[nodiscard]] std::int64_t num_blocks_held(core::RequestId id) const;
    void check_invariants() const;

private:
    // Groups sharing one spec (kind, block size, window): vLLM attention_groups.
    struct SpecGroup {
        KvGroupKind kind;
        std::vector<int> group_indices;
        const SingleTypeKvCacheManager* manager;  // the first group's manager, which looks up for all of them
    };

    [[nodiscard]] static std::span<const core::BlockId> group_hit(const CacheHit& hit, int group);

    bool enable_caching_;
    bool use_eagle_ = false;  // KvCacheConfig::use_eagle: full-attention hits drop their last block
    bool all_full_attention_ = true;  // every group is full attention: remove_skipped_blocks never frees anything
    int hash_block_size_tokens_ = 0;
    BlockDivider hash_blocks_of_{1};  // divides by hash_block_size_tokens_
    BlockPool block_pool_;
    std::vector<std::unique_ptr<SingleTypeKvCacheManager>> managers_;  // indexed by group
    std::vector<SpecGroup> spec_groups_;                               // full attention first
    mutable std::vector<char> looked_up_;  // find_longest_cache_hit's per-spec flags, kept for their capacity
};

}  // namespace servesim::cache
