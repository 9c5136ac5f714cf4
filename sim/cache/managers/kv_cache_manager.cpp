// KvCacheManager: the scheduler's API over the coordinator (vLLM kv_cache_manager.py KVCacheManager): prefix-cache
// statistics (docs/VLLM-RULES.md §3.5), the capacity checks of allocate_slots (check, then act) and schedule-time
// caching (§3.2). The hit rule is the coordinator's (kv_cache_coordinator.h); block states are the pool's
// (block_pool.h).
#include "sim/cache/managers/kv_cache_manager.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "sim/cache/hybrid/hybrid_state_cache.h"
#include "sim/cache/managers/kv_cache_coordinator.h"

namespace servesim::cache {

struct KvCacheManager::Impl {
    explicit Impl(const KvCacheConfig& config) : enable_caching(config.enable_prefix_caching), coordinator(config) {
        if (config.hybrid_state) {
            state_cache = std::make_unique<HybridStateCache>(*config.hybrid_state, coordinator.hash_block_size_tokens());
            // Joint eviction (docs/HYBRID-POLICIES.md): a state whose attention block is gone goes first.
            state_cache->set_attention_cached([this](core::BlockHash h) {
                return coordinator.block_pool().get_cached_block(h, 0).has_value();
            });
        }
    }

    bool enable_caching;
    KvCacheCoordinator coordinator;
    PrefixCacheStats stats;
    // A hybrid policy other than vllm: the coordinator holds the attention groups only, the states live here.
    std::unique_ptr<HybridStateCache> state_cache;
};

namespace {

std::span<const core::BlockHash> hashes_of(const CacheRequest& req) {
    if (req.block_hashes == nullptr) {
        return {};
    }
    return *req.block_hashes;
}

ReachableBoundaries boundaries_of(const CacheRequest& req) {
    return {req.num_prompt_tokens - 1, req.shared_prefix_boundary};
}

// The summary of a plain full-attention request holding `blocks_held` blocks of which `cached_blocks` are cached
// (update_summary, and the running requests' one-pass allocation).
KvRunningSummary running_summary(std::int64_t blocks_held, std::int64_t cached_blocks, std::int64_t block_size,
                                 bool enable_caching) {
    KvRunningSummary s;
    s.slot_tokens = blocks_held * block_size;
    s.uncached_from_tokens =
        enable_caching ? (cached_blocks + 1) * block_size : std::numeric_limits<std::int64_t>::max();
    return s;
}

bool has_hit_blocks(const CacheHit& hit) {
    return std::any_of(hit.blocks_per_group.begin(), hit.blocks_per_group.end(),
                       [](const auto& blocks) { return !blocks.empty(); });
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config) : impl_(std::make_unique<Impl>(config)) {}

KvCacheManager::~KvCacheManager() = default;

CacheHit KvCacheManager::get_computed_blocks(const CacheRequest& req) {
    CacheHit hit;
    get_computed_blocks(req, hit);
    return hit;
}

void KvCacheManager::get_computed_blocks(const CacheRequest& req, CacheHit& hit) {
    SERVESIM_CHECK(req.num_computed_tokens == 0, "lookup for request {} with {} computed tokens (waiting requests only)",
                   core::to_int(req.id), req.num_computed_tokens);
    if (!impl_->enable_caching) {
        reset_hit(hit, static_cast<std::size_t>(impl_->coordinator.num_groups()));
        return;
    }
    // The last token is always recomputed to get its logits: at most num_tokens − 1 tokens can hit.
    const std::int64_t max_cache_hit_length = req.num_tokens - 1;
    const auto hashes = hashes_of(req);
    const std::int64_t block_size = impl_->coordinator.hash_block_size_tokens();
    SERVESIM_CHECK(static_cast<std::int64_t>(hashes.size()) >= std::max<std::int64_t>(max_cache_hit_length, 0) /
                                                                    block_size,
                   "request {} has {} block hashes for {} tokens at block size {}", core::to_int(req.id),
                   hashes.size(), req.num_tokens, block_size);
    impl_->coordinator.find_longest_cache_hit(hashes, max_cache_hit_length, hit);
    hit.pool_evictions_at_lookup = impl_->coordinator.block_pool().num_evictions();
    if (HybridStateCache* states = impl_->state_cache.get()) {
        // The hit ends where a state exists: the deepest snapshot not beyond the attention hit (the tokens between
        // are recomputed); attention blocks past it are not taken.
        const std::int64_t attention_hit = hit.num_tokens;
        hit.num_tokens = states->find_longest_state_hit(hashes, attention_hit, req.content, max_cache_hit_length);
        for (auto& blocks : hit.blocks_per_group) {
            blocks.resize(std::min<std::size_t>(blocks.size(), static_cast<std::size_t>(hit.num_tokens / block_size)));
        }
        states->note_lookup(req.id, attention_hit, hit.num_tokens);
    }
    // Recorded per lookup, before any allocation check: a request that fails admission counts again next time.
    PrefixCacheStats& s = impl_->stats;
    if (req.preempted_before) {
        ++s.preempted_requests;
        s.preempted_queries += req.num_tokens;
        s.preempted_hits += hit.num_tokens;
    } else {
        ++s.requests;
        s.queries += req.num_tokens;
        s.hits += hit.num_tokens;
    }
}

// Token layout of one allocation (vLLM allocate_slots):
//   | computed | hit (new computed) | new          | lookahead |
//              |<------------- to be allocated -------------->|
//   |<--------- cached now, up to min(·, num_tokens) --->|
bool KvCacheManager::allocate_slots(const CacheRequest& req, std::int64_t num_new_tokens, const CacheHit& hit,
                                    std::int64_t num_lookahead_tokens, bool full_sequence_must_fit,
                                    bool delay_cache_blocks) {
    HybridStateCache* states = impl_->state_cache.get();
    if (states == nullptr) {
        return allocate_attention_slots(req, num_new_tokens, hit, num_lookahead_tokens, full_sequence_must_fit,
                                        delay_cache_blocks);
    }
    // A request's first allocation also needs its live state slot(s); the hit's snapshot is copied into it, so it
    // must not be the one evicted to make room (SGLang's copy-on-write of the matched mamba value).
    const bool first = !states->holds_live_state(req.id);
    const std::optional<core::BlockHash> protect = hit.num_tokens > 0 ? states->hit_key(req.id) : std::nullopt;
    if (first && !states->can_admit(protect)) {
        states->count_admission_wait();
        return false;
    }
    if (!allocate_attention_slots(req, num_new_tokens, hit, num_lookahead_tokens, full_sequence_must_fit,
                                  delay_cache_blocks)) {
        return false;
    }
    if (first) {
        states->admit(req.id, protect);
    }
    const std::int64_t from = req.num_computed_tokens + hit.num_tokens;
    states->on_scheduled(req.id, hashes_of(req), from, std::min(from + num_new_tokens, req.num_tokens),
                         req.num_prompt_tokens, req.content);
    return true;
}

bool KvCacheManager::allocate_attention_slots(const CacheRequest& req, std::int64_t num_new_tokens,
                                              const CacheHit& hit, std::int64_t num_lookahead_tokens,
                                              bool full_sequence_must_fit, bool delay_cache_blocks) {
    SERVESIM_CHECK(num_new_tokens > 0, "request {}: allocate_slots with {} new tokens", core::to_int(req.id),
                   num_new_tokens);
    SERVESIM_CHECK(hit.num_tokens == 0 || req.num_computed_tokens == 0,
                   "request {} has {} computed tokens and a {}-token hit", core::to_int(req.id),
                   req.num_computed_tokens, hit.num_tokens);
    KvCacheCoordinator& coordinator = impl_->coordinator;
    const BlockPool& pool = coordinator.block_pool();
    const bool hit_has_blocks = has_hit_blocks(hit);
    if (!hit_has_blocks && req.num_computed_tokens > 0 && !full_sequence_must_fit) {
        // A running request between block boundaries (most decode steps): when every group already has the slots
        // and has cached the blocks, the steps below would free, allocate and cache nothing. Skipping them is exact.
        const std::int64_t num_tokens_need_slot = req.num_computed_tokens + num_new_tokens + num_lookahead_tokens;
        const std::int64_t num_tokens_to_cache = impl_->enable_caching && !delay_cache_blocks
                                                     ? std::min(req.num_computed_tokens + num_new_tokens, req.num_tokens)
                                                     : 0;
        if (req.kv_summary != nullptr && req.kv_summary->slot_tokens >= num_tokens_need_slot &&
            num_tokens_to_cache < req.kv_summary->uncached_from_tokens) {
            return true;  // the summary of the block lists says so (KvRunningSummary)
        }
        if (SingleTypeKvCacheManager* manager = coordinator.sole_full_attention_manager();
            manager != nullptr && !delay_cache_blocks) {
            // One full-attention group: remove_skipped_blocks frees nothing and there are no hits, so what is left
            // of the steps below is the fit test, allocate_new_blocks and cache_blocks of that group, done in one
            // pass over its list (the ~1 allocation in block_size decode steps of every running request).
            const std::int64_t block_size = coordinator.hash_block_size_tokens();
            const std::int64_t cached_tokens = coordinator.hash_blocks_of().div(num_tokens_to_cache) * block_size;
            const auto hashes = hashes_of(req);
            SERVESIM_CHECK(static_cast<std::int64_t>(hashes.size()) >= cached_tokens / block_size,
                           "request {} has {} block hashes but caches {} tokens", core::to_int(req.id),
                           hashes.size(), num_tokens_to_cache);
            const auto ext =
                manager->extend_running(req.id, req.kv_slot_hint, num_tokens_need_slot, cached_tokens, hashes);
            if (ext.outcome == SingleTypeKvCacheManager::RunningExtension::kDoesNotFit) {
                return false;
            }
            if (ext.outcome == SingleTypeKvCacheManager::RunningExtension::kDone) {
                // update_summary's figures, from the one list.
                if (req.kv_summary != nullptr) {
                    *req.kv_summary = impl_->state_cache ? KvRunningSummary{}
                                                         : running_summary(ext.num_blocks, ext.num_cached_blocks,
                                                                           block_size, impl_->enable_caching);
                }
                return true;
            }
        } else if (coordinator.running_step_changes_nothing(req.id, req.kv_slot_hint, num_tokens_need_slot,
                                                            num_tokens_to_cache)) {
            return true;
        }
    }
    if (hit_has_blocks && hit.pool_evictions_at_lookup != pool.num_evictions()) {
        // The hit must still be what the lookup found: no allocation may run between lookup and allocate_slots.
        // (Only an eviction takes a hash from a block, so with none since the lookup every hit block still holds
        // the hash it was found under.)
        const auto hashes = hashes_of(req);
        for (std::size_t g = 0; g < hit.blocks_per_group.size(); ++g) {
            const auto& blocks = hit.blocks_per_group[g];
            const std::size_t i = pool.first_not_cached_as(blocks, hashes, static_cast<int>(g));
            SERVESIM_CHECK(i == blocks.size(),
                           "request {}: hit block {} (group {}, position {}) was evicted since the lookup",
                           core::to_int(req.id), i < blocks.size() ? core::to_int(blocks[i]) : 0, g, i);
        }
    }
    const std::int64_t num_local_computed_tokens = req.num_computed_tokens + hit.num_tokens;
    const std::int64_t total_computed_tokens = num_local_computed_tokens;

    // Whether the full-ISL check below already implies the ordinary one (which then is not repeated).
    bool fit_already_checked = false;
    if (full_sequence_must_fit) {
        // scheduler_reserve_full_isl: the whole current sequence (prompt, or prompt + outputs if resumed) must fit.
        const std::int64_t full_num_tokens = std::max(req.num_tokens, total_computed_tokens + num_new_tokens);
        if (!coordinator.blocks_to_allocate_fit(req.id, full_num_tokens, hit, total_computed_tokens, full_num_tokens,
                                                /*apply_admission_cap=*/true)) {
            return false;
        }
        // With full-attention groups only, the count is the new blocks cdiv(tokens, B) beyond those held or hit
        // plus the evictable hits: it grows with the token count, no admission cap applies and
        // remove_skipped_blocks frees nothing. Without lookahead slots the check below asks for
        // computed + new ≤ full_num_tokens tokens, so it cannot fail: skip counting the same hits again.
        fit_already_checked = coordinator.all_full_attention() && num_lookahead_tokens == 0;
    }

    const std::int64_t num_tokens_main_model = total_computed_tokens + num_new_tokens;
    const std::int64_t num_tokens_need_slot = num_tokens_main_model + num_lookahead_tokens;

    // As vLLM, blocks no longer read (outside the sliding window, old Mamba states) are freed before the check, even
    // if the allocation then fails: they reduce the evictions the new blocks cause.
    coordinator.remove_skipped_blocks(req.id, total_computed_tokens);

    if (!fit_already_checked) {
        if (!coordinator.blocks_to_allocate_fit(req.id, num_tokens_need_slot, hit, total_computed_tokens,
                                                num_tokens_main_model)) {
            return false;
        }
    }

    if (hit_has_blocks) {
        coordinator.allocate_new_computed_blocks(req.id, hit, num_local_computed_tokens);
    }
    coordinator.allocate_new_blocks(req.id, num_tokens_need_slot, num_tokens_main_model);

    if (impl_->enable_caching && !delay_cache_blocks) {
        // Schedule-time caching: blocks are hittable before the GPU computes them; lookahead slots are not cached.
        const std::int64_t num_tokens_to_cache = std::min(total_computed_tokens + num_new_tokens, req.num_tokens);
        const auto hashes = hashes_of(req);
        SERVESIM_CHECK(static_cast<std::int64_t>(hashes.size()) >=
                           coordinator.hash_blocks_of().div(num_tokens_to_cache),
                       "request {} has {} block hashes but caches {} tokens", core::to_int(req.id), hashes.size(),
                       num_tokens_to_cache);
        coordinator.cache_blocks(req.id, hashes, num_tokens_to_cache, boundaries_of(req));
    }
    update_summary(req);
    return true;
}

void KvCacheManager::cache_blocks(const CacheRequest& req, std::int64_t num_computed_tokens) {
    if (!impl_->enable_caching) {
        return;
    }
    const std::int64_t n = std::min(num_computed_tokens, req.num_tokens);
    impl_->coordinator.cache_blocks(req.id, hashes_of(req), n, boundaries_of(req));
    update_summary(req);
}

void KvCacheManager::update_summary(const CacheRequest& req) const {
    if (req.kv_summary == nullptr) {
        return;
    }
    *req.kv_summary = KvRunningSummary{};
    const KvCacheCoordinator& coordinator = impl_->coordinator;
    // Only for plain full-attention pools: with a hybrid state pool (docs/HYBRID-POLICIES.md) a decode step can
    // take or release a state snapshot even when no block changes, so every step goes through allocate_slots.
    if (!coordinator.all_full_attention() || impl_->state_cache) {
        return;
    }
    const auto held = coordinator.min_blocks_held_and_cached(req.id, req.kv_slot_hint);
    if (!held) {
        return;
    }
    *req.kv_summary = running_summary(held->first, held->second, coordinator.hash_block_size_tokens(),
                                      impl_->enable_caching);
}

void KvCacheManager::free(core::RequestId id) {
    impl_->coordinator.free(id);
    if (impl_->state_cache) {
        impl_->state_cache->release(id);
    }
}

void KvCacheManager::free(const CacheRequest& req) {
    if (req.kv_summary != nullptr) {
        *req.kv_summary = KvRunningSummary{};
    }
    free(req.id);
}

void KvCacheManager::set_event_sink(KvEventSink* sink) { impl_->coordinator.block_pool().set_event_sink(sink); }

void KvCacheManager::begin_step() {
    impl_->coordinator.new_step_starts();
    if (impl_->state_cache) {
        impl_->state_cache->begin_step();
    }
}

const HybridStateCache* KvCacheManager::hybrid_state_cache() const { return impl_->state_cache.get(); }

StateCopies KvCacheManager::take_state_copies_scheduled() {
    return impl_->state_cache ? impl_->state_cache->take_copies_scheduled() : StateCopies{};
}

std::int64_t KvCacheManager::num_free_blocks() const { return impl_->coordinator.block_pool().num_free_blocks(); }

double KvCacheManager::usage() const { return impl_->coordinator.block_pool().usage(); }

const PrefixCacheStats& KvCacheManager::stats() const { return impl_->stats; }

std::int64_t KvCacheManager::num_blocks_held(core::RequestId id) const {
    return impl_->coordinator.num_blocks_held(id);
}

void KvCacheManager::check_invariants() const {
    impl_->coordinator.check_invariants();
    if (impl_->state_cache) {
        impl_->state_cache->check_invariants();
    }
}

std::vector<std::vector<core::BlockId>> KvCacheManager::get_block_ids(core::RequestId id) const {
    return impl_->coordinator.get_block_ids(id);
}

std::vector<core::BlockId> KvCacheManager::get_all_free_blocks() const {
    return impl_->coordinator.block_pool().get_all_free_blocks();
}

std::vector<std::int64_t> KvCacheManager::num_cached_blocks_per_group() const {
    const BlockPool& pool = impl_->coordinator.block_pool();
    std::vector<std::int64_t> out(static_cast<std::size_t>(impl_->coordinator.num_groups()), 0);
    for (std::int64_t b = 1; b < pool.num_gpu_blocks(); ++b) {
        if (const auto key = pool.block_hash(core::BlockId{static_cast<std::uint32_t>(b)})) {
            ++out[static_cast<std::size_t>(key->group)];
        }
    }
    return out;
}

}  // namespace servesim::cache
