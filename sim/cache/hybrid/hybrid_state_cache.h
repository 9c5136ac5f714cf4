// HybridStateCache: the state pool of a hybrid model whose recurrent states are kept apart from the attention block
// pool (every HybridCachePolicy but vllm; hybrid_cache_policy.h). It owns the slots — one live state per running
// request (more for policies with tracking buffers) and the snapshots the policy admits, keyed by the chained
// attention block hash that ends at their position — the lookup (the deepest snapshot on the request's chain not
// beyond the attention hit), the same-step rule and eviction order by the policy's victim(). It does not hold
// attention KV (block_pool.h) nor decide who runs (KvCacheManager asks it before an allocation).
// Where it follows SGLang / Marconi and where it approximates them: docs/HYBRID-POLICIES.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cache/hybrid/hybrid_cache_policy.h"
#include "sim/cache/hybrid/state_copies.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// The key of a state after `to_tokens` tokens that is not on a block boundary: the chain hash `base` of the
// boundary `from_tokens` below it (BlockHasher::kNoneHashSeed at 0), extended over the tokens (from, to] of
// `content` with BlockHasher's piece rule, and tagged so it can never equal a full block's hash.
[[nodiscard]] core::BlockHash partial_state_key(std::uint64_t base, const core::TokenContent& content,
                                                std::int64_t from_tokens, std::int64_t to_tokens);

struct HybridStateStats {
    std::int64_t num_lookups = 0;
    std::int64_t attention_hit_tokens = 0;   // Σ what the attention pool alone had cached
    std::int64_t state_hit_tokens = 0;       // Σ the hits served (≤ attention); the rest is recomputed
    std::int64_t num_snapshots_taken = 0;    // snapshots inserted
    std::int64_t num_state_copies = 0;       // states copied into a slot (snapshots and end-state buffers; a state
                                             // handed over from a request's own slot is not a copy)
    std::int64_t num_evictions = 0;
    std::int64_t num_admission_waits = 0;    // allocations refused for want of a live state slot
    std::int64_t num_orphans_evicted = 0;    // of num_evictions: snapshots whose attention KV was gone
    std::int64_t peak_snapshots = 0;
};

class HybridStateCache {
public:
    HybridStateCache(const HybridStateConfig& config, int block_size_tokens);

    // Position p is served by the snapshot keyed hashes[p / B − 1]. Walks p = max_tokens, max_tokens − B, … and
    // returns the first snapshot found that was not inserted in this step (0 if none), refreshing it (and, for
    // policies that say so, the shallower snapshots of the path, parents older).
    // A token-granular policy given the request's `content` also finds snapshots inside a partial block: a state at
    // q < s < q + B (q a block boundary ≤ max_tokens, s ≤ max_state_tokens, the request's P − 1) is keyed by the
    // chain hash at q and the tokens (q, s] (partial_state_key); the deepest one wins.
    [[nodiscard]] std::int64_t find_longest_state_hit(std::span<const core::BlockHash> hashes, std::int64_t max_tokens,
                                                      const core::TokenContent* content = nullptr,
                                                      std::int64_t max_state_tokens = 0);
    // Records a lookup's outcome: statistics, the branch point the policy derives from it, and the hit's key.
    void note_lookup(core::RequestId id, std::int64_t attention_hit_tokens, std::int64_t state_hit_tokens);
    // The key of the snapshot the request's last lookup hit (nullopt: none), protected while it is admitted.
    [[nodiscard]] std::optional<core::BlockHash> hit_key(core::RequestId id) const;

    [[nodiscard]] bool holds_live_state(core::RequestId id) const;
    // Whether a request can get its live slots now, counting snapshots that could be evicted (not `protect`).
    [[nodiscard]] bool can_admit(std::optional<core::BlockHash> protect) const;
    // Takes the live slots (evicting snapshots other than `protect` as needed); call after can_admit.
    void admit(core::RequestId id, std::optional<core::BlockHash> protect);
    // The range (from, to] of a request is scheduled: snapshots the policy asks for, and the end-state position.
    // `content` (optional): the request's tokens, for token-granular policies (positions off block boundaries).
    void on_scheduled(core::RequestId id, std::span<const core::BlockHash> hashes, std::int64_t from_tokens,
                      std::int64_t to_tokens, std::int64_t num_prompt_tokens,
                      const core::TokenContent* content = nullptr);
    // Finish or preemption: the live slots return; the end state stays as a snapshot if the policy keeps it.
    void release(core::RequestId id);
    void begin_step() { ++step_; }
    // Whether the attention pool still caches a block hash (KvCacheManager passes its block pool's lookup). With it,
    // eviction takes orphans first: snapshots whose attention block at their position (for a partial state, the
    // block below) is no longer cached, so no lookup can reach them — SGLang evicts a radix leaf's KV and state
    // together and never keeps a state without its KV (docs/HYBRID-POLICIES.md "Joint eviction").
    void set_attention_cached(std::function<bool(core::BlockHash)> attention_cached) {
        attention_cached_ = std::move(attention_cached);
    }
    void count_admission_wait() { ++stats_.num_admission_waits; }
    // The copies made (and the kernel chunks their cuts add) since the last call: the step cost model charges them.
    [[nodiscard]] StateCopies take_copies_scheduled() { return std::exchange(copies_scheduled_, StateCopies{}); }

    [[nodiscard]] std::int64_t num_slots() const { return num_slots_; }
    [[nodiscard]] std::int64_t num_live_slots() const { return num_live_slots_; }
    [[nodiscard]] std::int64_t num_snapshots() const { return static_cast<std::int64_t>(snapshots_.size()); }
    // Positions of the cached snapshots, ascending (for tests).
    [[nodiscard]] std::vector<std::int64_t> snapshot_positions() const;
    [[nodiscard]] const HybridStateStats& stats() const { return stats_; }
    [[nodiscard]] const HybridCachePolicy& policy() const { return *policy_; }
    void check_invariants() const;

private:
    struct Tracked {
        int live_slots = 0;
        std::int64_t branch_point_tokens = 0;
        std::int64_t end_position_tokens = 0;
        core::BlockHash end_key{};
        std::optional<std::uint64_t> end_base;  // end_key is a partial key over this base
        // Policies that buffer their end state (buffers_end_state): the state at end_position_tokens went into a
        // snapshot of the pool when it was copied (a chunk-end insert, or an interval / branch state at the same
        // position) instead of staying in the request's buffer; at release it is refreshed if still cached.
        bool end_in_cache = false;
        // Positions up to here have been offered to the policy. Under async scheduling a decode step is scheduled
        // before its input token is appended, so a boundary's hash can arrive a step after the step that crossed
        // it; the next call offers it then.
        std::int64_t offered_to_tokens = -1;
        std::optional<core::BlockHash> resumed_key;  // the snapshot its hit resumed from
        std::optional<core::BlockHash> hit_key;      // the snapshot its last lookup hit
    };
    struct Entry {
        StateSnapshot snapshot;
        std::uint64_t inserted_step = 0;
        bool end_state = false;  // kept when a request was released (not a chunk / interval / branch state)
        // Off a block boundary (token-granular policies): the chain hash at the boundary below, its index key.
        bool partial = false;
        std::uint64_t base = 0;
    };

    [[nodiscard]] std::int64_t num_free_slots() const {
        return num_slots_ - num_live_slots_ - static_cast<std::int64_t>(snapshots_.size());
    }
    // Inserts (or refreshes) the snapshot at `position` keyed `key`; evicts one if the pool is full; false when
    // nothing can make room.
    // `partial_base`: set for a state off a block boundary (the chain hash of the boundary below it).
    enum class Inserted { kNew, kRefreshed, kNoRoom };
    Inserted insert(core::BlockHash key, std::int64_t position, bool end_state = false,
                    std::optional<std::uint64_t> partial_base = std::nullopt);
    [[nodiscard]] std::optional<std::uint64_t> partial_base(std::span<const core::BlockHash> hashes,
                                                            std::int64_t position) const;
    // The key of the state after `position` tokens: the block hash there, or off a boundary the partial key.
    [[nodiscard]] core::BlockHash key_at(std::span<const core::BlockHash> hashes, const core::TokenContent* content,
                                         std::int64_t position) const;
    void evict_one(std::optional<core::BlockHash> protect);
    void erase_at(std::size_t index);
    [[nodiscard]] double flops_saved(std::int64_t position) const;

    std::unique_ptr<HybridCachePolicy> policy_;
    std::function<bool(core::BlockHash)> attention_cached_;  // empty: every snapshot counts as reachable
    int block_size_tokens_;
    std::int64_t num_slots_;
    double linear_flops_per_token_;
    double attention_flops_per_work_;
    std::int64_t num_live_slots_ = 0;
    std::uint64_t clock_ = 0;
    std::uint64_t step_ = 1;
    int kernel_chunk_tokens_;
    StateCopies copies_scheduled_;
    std::vector<std::int64_t> copied_positions_;  // scratch of on_scheduled: positions copied this call
    std::optional<core::BlockHash> last_hit_key_;  // of the last find_longest_state_hit
    std::vector<Entry> snapshots_;                                   // dense; order irrelevant (ties by last_use)
    std::unordered_map<std::uint64_t, std::size_t> index_of_;        // key → position in snapshots_ (never iterated)
    std::unordered_map<std::uint64_t, Tracked> tracked_;             // by request id (never iterated for output)
    // Partial snapshots by the chain hash of the boundary below them (base → key; lookups only, never iterated).
    std::unordered_multimap<std::uint64_t, std::uint64_t> partial_by_base_;
    std::vector<StateSnapshot> scratch_;
    HybridStateStats stats_;
};

}  // namespace servesim::cache
