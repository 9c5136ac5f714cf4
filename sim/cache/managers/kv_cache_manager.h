// KvCacheManager: the scheduler's only door into the KV cache (vLLM vllm/v1/core/kv_cache_manager.py
// KVCacheManager, with the HybridKVCacheCoordinator and one SingleTypeKVCacheManager per KV cache group under it).
// It answers "how much of this request's prefix is cached" (get_computed_blocks, counting vLLM's prefix-cache
// queries and hits in tokens) and "give these tokens slots, or tell me it does not fit" (allocate_slots: check,
// then act). It never decides who runs: that is sim/engine/scheduler.
// INTERFACE CONTRACT between sim/cache (implementation) and sim/engine (caller).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cache/hybrid/hybrid_cache_policy.h"
#include "sim/cache/hybrid/state_copies.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// vLLM mamba_cache_mode (docs/VLLM-RULES.md §2.1, §2.4, §2.5).
enum class MambaCacheMode { kNone, kAlign, kAll };

enum class KvGroupKind { kFullAttention, kSlidingWindow, kMamba, kChunkedLocal };

// One KV cache group (vLLM KVCacheGroupSpec): layers sharing one block table per request.
struct KvCacheGroup {
    KvGroupKind kind = KvGroupKind::kFullAttention;
    int block_size_tokens = 16;
    int sliding_window_tokens = 0;  // kSlidingWindow only
    int num_layers = 0;             // informational (memory plan)
    int attention_chunk_tokens = 0;  // kChunkedLocal only (vLLM ChunkedLocalAttentionSpec.attention_chunk_size)
};

// A hybrid model's recurrent states kept apart from the block pool by a HybridCachePolicy other than vllm
// (hybrid_cache_policy.h): the pool then holds the attention groups only, at their own block size.
struct HybridStateConfig {
    std::string policy;                 // a name from hybrid_policies(), not "vllm"
    HybridPolicyParams params;
    std::int64_t num_state_slots = 0;   // states the state pool holds (live states of running requests + snapshots)
    std::int64_t state_bytes = 0;       // one state: every recurrent layer, per GPU
    // Prefill FLOPs of p tokens from scratch, a·p + b·p²/2 (the roofline's linear and attention terms): the FLOPs a
    // hit at p saves, for FLOP-aware eviction.
    double linear_flops_per_token = 0;
    double attention_flops_per_work = 0;
    // The chunked scan's chunk (64 for Gated DeltaNet, fla's chunk_gated_delta_rule; Mamba2's chunk_size): a copy
    // taken inside a prefill chunk off this grid adds a kernel chunk (state_copies.h).
    int kernel_chunk_tokens = 64;
};

struct KvCacheConfig {
    std::int64_t num_gpu_blocks = 0;  // vLLM num_blocks, INCLUDING the null block 0 (usable = num_gpu_blocks − 1)
    std::vector<KvCacheGroup> groups;  // all groups draw from one shared pool
    bool enable_prefix_caching = true;
    MambaCacheMode mamba_cache_mode = MambaCacheMode::kNone;
    // vLLM prefix_cache_retention_interval (PRs #43447, #45845, #52216) as it applies to Mamba groups: nullopt =
    // dense (every boundary state a step ends on is cached); 0 = only the replay boundary floor((P − 1)/B)·B and the
    // shared-prefix junction; N > 0 (a multiple of the block size) = those plus every N tokens. Under sparse
    // retention a state that is not retained is never hashed and, once freed, goes to the head of the free queue.
    std::optional<std::int64_t> mamba_retention_interval_tokens;
    // Sliding-window admission cap for the full-ISL check (VllmVersion::swa_admission_cap); needs both limits.
    bool swa_admission_cap = false;
    std::int64_t max_num_batched_tokens = 0;
    std::int64_t max_model_len = 0;
    // Set: states live in a HybridStateCache under this policy (hybrid_state_cache.h); unset: vLLM's shared pool.
    std::optional<HybridStateConfig> hybrid_state;
    // Speculative decoding with EAGLE/EAGLE-3/MTP (vLLM SpeculativeConfig.use_eagle): a prefix hit drops its last
    // full-attention block (FullAttentionManager.find_longest_cache_hit: the drafter's KV of a chunk's last token
    // was written beside the next token, which a later request may not share). docs/SPECULATIVE-DECODING.md.
    bool use_eagle = false;
};

// What allocate_slots last left a running request with, kept on the request (owned by it, written only by the cache,
// read by nothing else) when every group is full attention: then a running request's allocate_slots without a hit
// changes nothing exactly when the request's blocks already hold the slots and its full blocks are already cached,
// and these two figures answer that by two comparisons, without finding the request's block lists. Reset when the
// request's blocks are freed. −1: unknown (the block lists answer).
struct KvRunningSummary {
    std::int64_t slot_tokens = -1;           // min over groups of blocks held · B
    std::int64_t uncached_from_tokens = -1;  // (min over groups of cached blocks + 1) · B: caching up to fewer
                                             // tokens adds no block; INT64_MAX when caching is off

    // Whether allocate_slots(req, num_new_tokens, no hit, no lookahead, not full_sequence_must_fit, caching not
    // delayed) for the request this summarises, at num_computed_tokens > 0 of num_tokens, would return true at once
    // and change nothing: its blocks hold the slots and its full blocks up to min(computed + new, num_tokens) are
    // cached. The scheduler asks this first for every running request, so most decode steps make no call at all.
    [[nodiscard]] bool running_step_changes_nothing(std::int64_t num_computed_tokens, std::int64_t num_new_tokens,
                                                    std::int64_t num_tokens) const {
        const std::int64_t end = num_computed_tokens + num_new_tokens;
        return num_computed_tokens > 0 && num_new_tokens > 0 && slot_tokens >= end &&
               (end < num_tokens ? end : num_tokens) < uncached_from_tokens;
    }
};

// What the cache needs to know about a request; the engine owns the request itself.
struct CacheRequest {
    core::RequestId id{};
    // Chained hashes of the request's full blocks at the hash block size (= block_size_tokens of the groups), over
    // the current token sequence (prompt + generated tokens so far): block_hashes->size() == num_tokens / B.
    const std::vector<core::BlockHash>* block_hashes = nullptr;
    std::int64_t num_tokens = 0;           // prompt + generated so far
    std::int64_t num_computed_tokens = 0;  // as the scheduler tracks it (0 for a waiting request)
    bool preempted_before = false;         // num_preemptions > 0: lookups count in the preempted_* stats only
    // For sparse Mamba retention (KvCacheConfig::mamba_retention_interval_tokens): the prompt length (replay
    // boundary P − 1) and the request's shared-prefix junction (vLLM request.shared_prefix_boundary, 0 = none).
    std::int64_t num_prompt_tokens = 0;
    std::int64_t shared_prefix_boundary = 0;
    // Where the group managers last found this request's block list (owned by the request, updated by
    // allocate_slots; a lookup shortcut that never changes a result). nullptr: none kept, the map is used.
    std::uint32_t* kv_slot_hint = nullptr;
    // The running fast path's summary (owned by the request, kept current by allocate_slots, cache_blocks and
    // free(const CacheRequest&)). nullptr: none kept, every call takes the full path.
    KvRunningSummary* kv_summary = nullptr;
    // The request's tokens (owned by the request), for hybrid state policies that keep states off block boundaries
    // (HybridCachePolicy::token_granular); nullptr: block boundaries only.
    const core::TokenContent* content = nullptr;
};

// vLLM PrefixCacheStats: units are tokens, one record per lookup attempt (docs/VLLM-RULES.md §3.5).
struct PrefixCacheStats {
    std::int64_t requests = 0;
    std::int64_t queries = 0;
    std::int64_t hits = 0;
    std::int64_t preempted_requests = 0;
    std::int64_t preempted_queries = 0;
    std::int64_t preempted_hits = 0;
};

// Result of a lookup: the hit length in tokens (a multiple of the block size) and, opaque to the caller, the
// blocks per group that allocate_slots will take a reference on.
struct CacheHit {
    std::int64_t num_tokens = 0;
    // vLLM HybridKVCacheCoordinator.num_uncached_common_prefix_tokens (PR #37898): the longest hit any group found
    // minus the hit all groups share, e.g. full attention hits 3·B but no Mamba state is cached inside it. 0 for
    // models with one kind of group. The scheduler cuts the first prefill chunk there (Marconi admission).
    std::int64_t num_uncached_common_prefix_tokens = 0;
    std::vector<std::vector<core::BlockId>> blocks_per_group;
    // BlockPool::num_evictions() when the lookup ran, or kUnknownEvictions for a hit built by hand: allocate_slots
    // re-checks the hit blocks one by one only when an eviction may have happened since.
    static constexpr std::uint64_t kUnknownEvictions = ~std::uint64_t{0};
    std::uint64_t pool_evictions_at_lookup = kUnknownEvictions;
};

// Makes `hit` what a default CacheHit with `num_groups` empty group lists is, keeping the lists' capacity (a hit
// reused across lookups; every reader treats an empty list and an absent one alike).
inline void reset_hit(CacheHit& hit, std::size_t num_groups) {
    hit.num_tokens = 0;
    hit.num_uncached_common_prefix_tokens = 0;
    hit.pool_evictions_at_lookup = CacheHit::kUnknownEvictions;
    hit.blocks_per_group.resize(num_groups);
    for (auto& blocks : hit.blocks_per_group) {
        blocks.clear();
    }
}

class HybridStateCache;

class KvEventSink;  // block_pool.h

class KvCacheManager {
public:
    explicit KvCacheManager(const KvCacheConfig& config);
    ~KvCacheManager();
    KvCacheManager(const KvCacheManager&) = delete;
    KvCacheManager& operator=(const KvCacheManager&) = delete;

    // vLLM get_computed_blocks → find_longest_cache_hit: longest cached prefix of a waiting request with
    // num_computed_tokens == 0, capped at num_tokens − 1, stopping at the first miss; hybrid rule of §2.6. Records
    // requests/queries/hits (or the preempted_* fields). Returns an empty hit when caching is off (nothing recorded).
    [[nodiscard]] CacheHit get_computed_blocks(const CacheRequest& req);
    // The same, written into `hit` (reset first, its vectors' capacity kept): the scheduler's reused hit.
    void get_computed_blocks(const CacheRequest& req, CacheHit& hit);

    // vLLM allocate_slots: give slots for num_new_tokens after the computed tokens and the hit, plus lookahead
    // slots. Counts the blocks needed (new + evictable hit blocks) and returns false, changing nothing, if they do
    // not fit in the free queue, or under full_sequence_must_fit (scheduler_reserve_full_isl) if the whole current
    // sequence would not fit, or under the Mamba same-step rule. On success, takes references on the hit blocks,
    // allocates from the free queue head (evicting lazily) and caches full blocks up to
    // min(computed + hit + num_new_tokens, num_tokens) (schedule-time caching, §3.2; hybrid flooring, §2.5).
    // delay_cache_blocks (vLLM, for asynchronous KV loads from the connector): allocate but cache nothing until the
    // load completes and cache_blocks is called.
    [[nodiscard]] bool allocate_slots(const CacheRequest& req, std::int64_t num_new_tokens, const CacheHit& hit,
                                      std::int64_t num_lookahead_tokens = 0, bool full_sequence_must_fit = false,
                                      bool delay_cache_blocks = false);

    // Caches the request's full blocks up to num_computed_tokens (after a delayed allocation's load finished:
    // vLLM Scheduler._update_waiting_for_remote_kv → KVCacheManager.cache_blocks).
    void cache_blocks(const CacheRequest& req, std::int64_t num_computed_tokens);

    // Frees all of a request's blocks, each group's in reverse order to the free-queue tail (finish or preempt).
    void free(core::RequestId id);
    // The same, and forgets the request's running summary (req.kv_summary).
    void free(const CacheRequest& req);

    // The block pool's KV events go to `sink` (nullptr: none); block_pool.h KvEventSink.
    void set_event_sink(KvEventSink* sink);

    // Called by the scheduler at the start of each step: clears the Mamba cached_blocks_this_step set.
    void begin_step();

    [[nodiscard]] std::int64_t num_free_blocks() const;

    // vLLM kv_cache_usage_perc: 1 − free/(num_gpu_blocks − 1); evictable cached blocks count as free.
    [[nodiscard]] double usage() const;

    [[nodiscard]] const PrefixCacheStats& stats() const;

    // Blocks currently held by a request (all groups); for tests and metrics.
    [[nodiscard]] std::int64_t num_blocks_held(core::RequestId id) const;

    // Re-derives the block accounting invariant (block_pool.h) and throws InvariantError when broken.
    void check_invariants() const;

    // vLLM get_block_ids: the request's block table per group (null block 0 at skipped positions); for tests.
    [[nodiscard]] std::vector<std::vector<core::BlockId>> get_block_ids(core::RequestId id) const;

    // vLLM FreeKVCacheBlockQueue.get_all_free_blocks: the free queue from head (next evicted) to tail; for tests.
    [[nodiscard]] std::vector<core::BlockId> get_all_free_blocks() const;

    // Blocks holding a prefix-cache hash, per group (in use or evictable); for tests and diagnostics, O(pool).
    [[nodiscard]] std::vector<std::int64_t> num_cached_blocks_per_group() const;

    // The state pool of a hybrid policy other than vllm (KvCacheConfig::hybrid_state); nullptr otherwise.
    [[nodiscard]] const HybridStateCache* hybrid_state_cache() const;
    // The state pool's copies since the last call (none without a state pool), for the step cost model.
    [[nodiscard]] StateCopies take_state_copies_scheduled();

private:
    // Recomputes req.kv_summary from the block lists (after they may have changed).
    void update_summary(const CacheRequest& req) const;
    // allocate_slots for the block pool alone (all of it under vllm).
    [[nodiscard]] bool allocate_attention_slots(const CacheRequest& req, std::int64_t num_new_tokens,
                                                const CacheHit& hit, std::int64_t num_lookahead_tokens,
                                                bool full_sequence_must_fit, bool delay_cache_blocks);

    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace servesim::cache
