// HybridStateCache: live states, snapshots and their eviction; see hybrid_state_cache.h.
#include "sim/cache/hybrid/hybrid_state_cache.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "common/error.h"
#include "sim/cache/prefix_cache/block_hash.h"

namespace servesim::cache {

HybridStateCache::HybridStateCache(const HybridStateConfig& config, int block_size_tokens)
    : block_size_tokens_(block_size_tokens),
      num_slots_(config.num_state_slots),
      linear_flops_per_token_(config.linear_flops_per_token),
      attention_flops_per_work_(config.attention_flops_per_work),
      kernel_chunk_tokens_(config.kernel_chunk_tokens) {
    SERVESIM_CHECK(kernel_chunk_tokens_ > 0, "hybrid state cache: kernel chunk of {} tokens", kernel_chunk_tokens_);
    const HybridPolicyEntry* entry = find_hybrid_policy(config.policy);
    SERVESIM_CHECK(entry != nullptr && entry->make != nullptr, "hybrid state cache: '{}' is not a state-pool policy",
                   config.policy);
    policy_ = entry->make(config.params);
    SERVESIM_CHECK(num_slots_ >= policy_->live_slots_per_request(), "hybrid state cache: {} slots, {} needed per request",
                   num_slots_, policy_->live_slots_per_request());
}

double HybridStateCache::flops_saved(std::int64_t position) const {
    const double p = static_cast<double>(position);
    return linear_flops_per_token_ * p + attention_flops_per_work_ * p * p / 2.0;
}

core::BlockHash partial_state_key(std::uint64_t base, const core::TokenContent& content, std::int64_t from_tokens,
                                  std::int64_t to_tokens) {
    SERVESIM_CHECK(from_tokens >= 0 && from_tokens < to_tokens && to_tokens <= core::total_tokens(content),
                   "partial state key over ({}, {}] of {} tokens", from_tokens, to_tokens,
                   core::total_tokens(content));
    // The pieces of (from, to], each (content id, offset in its run, length), combined as BlockHasher combines a
    // block's pieces; a partial block is never hashed by the pool, and the tag keeps the two key spaces apart.
    constexpr std::uint64_t kPartialTag = 0x5041525449414c31ULL;  // "PARTIAL1"
    std::uint64_t h = core::hash_combine(base, kPartialTag);
    std::int64_t start = 0;
    for (const core::ContentRun& run : content) {
        const std::int64_t end = start + run.length_tokens;
        const std::int64_t lo = std::max(start, from_tokens);
        const std::int64_t hi = std::min(end, to_tokens);
        if (lo < hi) {
            h = core::hash_combine(h, static_cast<std::uint64_t>(run.content));
            h = core::hash_combine(h, static_cast<std::uint64_t>(lo - start));
            h = core::hash_combine(h, static_cast<std::uint64_t>(hi - lo));
        }
        if (end >= to_tokens) {
            break;
        }
        start = end;
    }
    return core::BlockHash{h};
}

std::optional<std::uint64_t> HybridStateCache::partial_base(std::span<const core::BlockHash> hashes,
                                                           std::int64_t position) const {
    const std::int64_t b = block_size_tokens_;
    if (position % b == 0) {
        return std::nullopt;
    }
    const std::int64_t q = position / b * b;
    return q > 0 ? core::to_int(hashes[static_cast<std::size_t>(q / b - 1)]) : BlockHasher::kNoneHashSeed;
}

core::BlockHash HybridStateCache::key_at(std::span<const core::BlockHash> hashes, const core::TokenContent* content,
                                         std::int64_t position) const {
    const std::int64_t b = block_size_tokens_;
    if (position % b == 0) {
        return hashes[static_cast<std::size_t>(position / b - 1)];
    }
    SERVESIM_CHECK(content != nullptr, "a state at {} (off a block boundary) needs the request's tokens", position);
    return partial_state_key(*partial_base(hashes, position), *content, position / b * b, position);
}

std::int64_t HybridStateCache::find_longest_state_hit(std::span<const core::BlockHash> hashes,
                                                      std::int64_t max_tokens, const core::TokenContent* content,
                                                      std::int64_t max_state_tokens) {
    const std::int64_t b = block_size_tokens_;
    const bool tokens = policy_->token_granular() && content != nullptr && !partial_by_base_.empty();
    std::int64_t hit = 0;
    last_hit_key_.reset();
    std::vector<std::size_t> path;
    std::vector<std::pair<std::int64_t, std::size_t>> inside;  // (position, index) of partial states in one block
    // Returns false when the walk stops (the hit is found and the policy does not refresh the path).
    auto take = [&](std::int64_t p, std::size_t index) {
        if (hit == 0) {
            hit = p;
            last_hit_key_ = snapshots_[index].snapshot.key;
            path.push_back(index);
            return policy_->touches_matched_path();
        }
        path.push_back(index);
        return true;
    };
    for (std::int64_t q = std::min<std::int64_t>(max_tokens, static_cast<std::int64_t>(hashes.size()) * b) / b * b;
         q >= 0; q -= b) {
        if (tokens) {
            // States in (q, q + B): the attention blocks up to q are cached, the snapshot holds the tail.
            const std::uint64_t base =
                q > 0 ? core::to_int(hashes[static_cast<std::size_t>(q / b - 1)]) : BlockHasher::kNoneHashSeed;
            inside.clear();
            const auto [lo, hi] = partial_by_base_.equal_range(base);
            for (auto it = lo; it != hi; ++it) {
                const std::size_t index = index_of_.at(it->second);
                const Entry& e = snapshots_[index];
                const std::int64_t s = e.snapshot.position_tokens;
                if (s <= max_state_tokens && e.inserted_step != step_ &&
                    partial_state_key(base, *content, q, s) == e.snapshot.key) {
                    inside.emplace_back(s, index);
                }
            }
            std::sort(inside.begin(), inside.end(), std::greater<>());
            bool go_on = true;
            for (const auto& [s, index] : inside) {
                go_on = take(s, index) && go_on;
                if (!go_on) {
                    break;
                }
            }
            if (!go_on) {
                break;
            }
        }
        if (q < b) {
            break;
        }
        const auto it = index_of_.find(core::to_int(hashes[static_cast<std::size_t>(q / b - 1)]));
        if (it == index_of_.end() || snapshots_[it->second].inserted_step == step_) {
            continue;
        }
        if (!take(q, it->second)) {
            break;
        }
    }
    // Parents older than children: the shallowest gets the oldest stamp.
    for (auto i = path.rbegin(); i != path.rend(); ++i) {
        snapshots_[*i].snapshot.last_use = ++clock_;
    }
    if (hit > 0) {
        ++snapshots_[path.front()].snapshot.num_hits;
    }
    return hit;
}

void HybridStateCache::note_lookup(core::RequestId id, std::int64_t attention_hit_tokens,
                                   std::int64_t state_hit_tokens) {
    ++stats_.num_lookups;
    stats_.attention_hit_tokens += attention_hit_tokens;
    stats_.state_hit_tokens += state_hit_tokens;
    Tracked& t = tracked_[core::to_int(id)];
    t.branch_point_tokens = policy_->branch_point(attention_hit_tokens, state_hit_tokens, block_size_tokens_);
    t.hit_key = state_hit_tokens > 0 ? last_hit_key_ : std::nullopt;
}

std::optional<core::BlockHash> HybridStateCache::hit_key(core::RequestId id) const {
    const auto it = tracked_.find(core::to_int(id));
    return it == tracked_.end() ? std::nullopt : it->second.hit_key;
}

bool HybridStateCache::holds_live_state(core::RequestId id) const {
    const auto it = tracked_.find(core::to_int(id));
    return it != tracked_.end() && it->second.live_slots > 0;
}

bool HybridStateCache::can_admit(std::optional<core::BlockHash> protect) const {
    std::int64_t evictable = static_cast<std::int64_t>(snapshots_.size());
    if (protect && index_of_.contains(core::to_int(*protect))) {
        --evictable;
    }
    return num_free_slots() + evictable >= policy_->live_slots_per_request();
}

void HybridStateCache::admit(core::RequestId id, std::optional<core::BlockHash> protect) {
    const int need = policy_->live_slots_per_request();
    while (num_free_slots() < need) {
        evict_one(protect);
    }
    Tracked& t = tracked_[core::to_int(id)];
    SERVESIM_CHECK(t.live_slots == 0, "request {} already holds its live state", core::to_int(id));
    t.live_slots = need;
    t.end_position_tokens = 0;
    t.end_in_cache = false;
    t.offered_to_tokens = -1;
    t.resumed_key = protect;
    num_live_slots_ += need;
}

void HybridStateCache::on_scheduled(core::RequestId id, std::span<const core::BlockHash> hashes,
                                    std::int64_t from_tokens, std::int64_t to_tokens, std::int64_t num_prompt_tokens,
                                    const core::TokenContent* content) {
    const auto it = tracked_.find(core::to_int(id));
    SERVESIM_CHECK(it != tracked_.end() && it->second.live_slots > 0, "request {} scheduled without a live state",
                   core::to_int(id));
    Tracked& t = it->second;
    const std::int64_t b = block_size_tokens_;
    // Token-granular: any position whose tokens are known (under async scheduling a decode step's input token can
    // arrive a step late) and whose full blocks below are hashed; otherwise block boundaries only.
    const bool tokens = policy_->token_granular() && content != nullptr;
    const std::int64_t known =
        tokens ? std::min(core::total_tokens(*content), (static_cast<std::int64_t>(hashes.size()) + 1) * b - 1)
               : static_cast<std::int64_t>(hashes.size()) * b;
    const std::int64_t cached_to = std::min(to_tokens, known);
    const std::int64_t offered_from = t.offered_to_tokens < 0 ? from_tokens : std::min(from_tokens, t.offered_to_tokens);
    if (cached_to <= offered_from) {
        return;
    }
    t.offered_to_tokens = cached_to;
    ScheduledRange range{offered_from, cached_to, num_prompt_tokens, t.branch_point_tokens, block_size_tokens_};
    range.token_positions = tokens;
    range.prompt_done = to_tokens >= num_prompt_tokens;
    std::vector<std::int64_t> positions;
    policy_->positions_to_snapshot(range, positions);
    // The end-state position this range reaches (0: none): token-granular, the last token computed (SGLang caches
    // the committed KV length); otherwise the last trackable block boundary.
    std::int64_t end = 0;
    if (tokens) {
        end = policy_->trackable(cached_to, range) ? cached_to : 0;
    } else {
        for (std::int64_t p = cached_to / b * b; p > offered_from; p -= b) {
            if (policy_->trackable(p, range)) {
                end = p;
                break;
            }
        }
    }
    // Every new snapshot is a copy of the state at its position into a slot of its own (SGLang cache_unfinished_req
    // no_buffer: mamba_pool.copy_from); a snapshot at the position of a buffered end state is that buffer's copy,
    // donated to the pool (extra_buffer: the ping-pong slot goes to the tree and the request takes a fresh one).
    copied_positions_.clear();
    bool end_in_cache = false;
    for (const std::int64_t p : positions) {
        SERVESIM_CHECK(p > offered_from && p <= cached_to && (tokens || p % b == 0),
                       "policy {}: position {} outside ({}, {}]", policy_->name(), p, offered_from, cached_to);
        const Inserted r = insert(key_at(hashes, content, p), p, false, partial_base(hashes, p));
        if (r == Inserted::kNew) {
            copied_positions_.push_back(p);
        }
        end_in_cache = end_in_cache || (p == end && r != Inserted::kNoRoom);
    }
    if (end > 0) {
        if (policy_->buffers_end_state()) {
            // The end state lies behind the live state from the next step on: a copy into the request's buffer slot,
            // unless the pool took it just now.
            if (!end_in_cache) {
                copied_positions_.push_back(end);
            }
            t.end_in_cache = end_in_cache;
        }
        t.end_position_tokens = end;
        t.end_key = key_at(hashes, content, end);
        t.end_base = partial_base(hashes, end);
    }
    if (!copied_positions_.empty()) {
        std::sort(copied_positions_.begin(), copied_positions_.end());
        const StateCopies step{static_cast<std::int64_t>(copied_positions_.size()),
                               extra_kernel_chunks(from_tokens, to_tokens, copied_positions_, kernel_chunk_tokens_)};
        copies_scheduled_ += step;
        stats_.num_state_copies += step.copies;
    }
}

void HybridStateCache::release(core::RequestId id) {
    const auto it = tracked_.find(core::to_int(id));
    if (it == tracked_.end()) {
        return;
    }
    const Tracked t = it->second;
    tracked_.erase(it);
    num_live_slots_ -= t.live_slots;
    // The end state is handed over, not copied: the live slot (no buffer) or the buffer slot becomes the snapshot.
    // A buffered end state the pool already took (end_in_cache) is only refreshed, and is gone if it was evicted.
    if (t.live_slots > 0 && policy_->keeps_end_state() && t.end_position_tokens > 0 &&
        (!t.end_in_cache || index_of_.contains(core::to_int(t.end_key)))) {
        insert(t.end_key, t.end_position_tokens, /*end_state=*/true, t.end_base);
        if (policy_->marks_superseded() && t.resumed_key && *t.resumed_key != t.end_key) {
            if (const auto it = index_of_.find(core::to_int(*t.resumed_key)); it != index_of_.end()) {
                Entry& resumed = snapshots_[it->second];
                if (resumed.end_state && resumed.snapshot.position_tokens < t.end_position_tokens) {
                    resumed.snapshot.superseded = true;
                }
            }
        }
    }
}

HybridStateCache::Inserted HybridStateCache::insert(core::BlockHash key, std::int64_t position, bool end_state,
                                                    std::optional<std::uint64_t> partial_base) {
    if (const auto it = index_of_.find(core::to_int(key)); it != index_of_.end()) {
        Entry& e = snapshots_[it->second];
        e.snapshot.last_use = ++clock_;
        e.snapshot.superseded = false;
        e.end_state = e.end_state || end_state;
        return Inserted::kRefreshed;
    }
    if (num_free_slots() <= 0) {
        if (snapshots_.empty()) {
            return Inserted::kNoRoom;
        }
        evict_one(std::nullopt);
    }
    Entry e;
    e.snapshot.key = key;
    e.snapshot.position_tokens = position;
    e.snapshot.last_use = ++clock_;
    e.snapshot.flops_saved = flops_saved(position);
    e.inserted_step = step_;
    e.end_state = end_state;
    if (partial_base) {
        e.partial = true;
        e.base = *partial_base;
        partial_by_base_.emplace(e.base, core::to_int(key));
    }
    index_of_.emplace(core::to_int(key), snapshots_.size());
    snapshots_.push_back(e);
    ++stats_.num_snapshots_taken;
    stats_.peak_snapshots = std::max(stats_.peak_snapshots, num_snapshots());
    return Inserted::kNew;
}

void HybridStateCache::evict_one(std::optional<core::BlockHash> protect) {
    scratch_.clear();
    std::vector<std::size_t> where;
    // Orphans first (set_attention_cached): the least recently used snapshot whose attention block is gone.
    if (attention_cached_) {
        std::optional<std::size_t> orphan;
        for (std::size_t i = 0; i < snapshots_.size(); ++i) {
            const Entry& e = snapshots_[i];
            if (protect && e.snapshot.key == *protect) {
                continue;
            }
            const core::BlockHash anchor = e.partial ? core::BlockHash{e.base} : e.snapshot.key;
            const bool reachable = (e.partial && e.base == BlockHasher::kNoneHashSeed) || attention_cached_(anchor);
            if (!reachable && (!orphan || e.snapshot.last_use < snapshots_[*orphan].snapshot.last_use)) {
                orphan = i;
            }
        }
        if (orphan) {
            erase_at(*orphan);
            ++stats_.num_evictions;
            ++stats_.num_orphans_evicted;
            return;
        }
    }
    for (std::size_t i = 0; i < snapshots_.size(); ++i) {
        if (protect && snapshots_[i].snapshot.key == *protect) {
            continue;
        }
        scratch_.push_back(snapshots_[i].snapshot);
        where.push_back(i);
    }
    SERVESIM_CHECK(!scratch_.empty(), "hybrid state cache: nothing to evict ({} live slots of {})", num_live_slots_,
                   num_slots_);
    const std::size_t v = policy_->victim(scratch_);
    SERVESIM_CHECK(v < scratch_.size(), "policy {} chose victim {} of {}", policy_->name(), v, scratch_.size());
    erase_at(where[v]);
    ++stats_.num_evictions;
}

void HybridStateCache::erase_at(std::size_t index) {
    if (const Entry& e = snapshots_[index]; e.partial) {
        const auto [lo, hi] = partial_by_base_.equal_range(e.base);
        for (auto it = lo; it != hi; ++it) {
            if (it->second == core::to_int(e.snapshot.key)) {
                partial_by_base_.erase(it);
                break;
            }
        }
    }
    index_of_.erase(core::to_int(snapshots_[index].snapshot.key));
    if (index + 1 != snapshots_.size()) {
        snapshots_[index] = snapshots_.back();
        index_of_[core::to_int(snapshots_[index].snapshot.key)] = index;
    }
    snapshots_.pop_back();
}

std::vector<std::int64_t> HybridStateCache::snapshot_positions() const {
    std::vector<std::int64_t> out;
    for (const auto& e : snapshots_) {
        out.push_back(e.snapshot.position_tokens);
    }
    std::sort(out.begin(), out.end());
    return out;
}

void HybridStateCache::check_invariants() const {
    SERVESIM_CHECK(num_free_slots() >= 0, "hybrid state cache: {} live + {} snapshots exceed {} slots",
                   num_live_slots_, snapshots_.size(), num_slots_);
    SERVESIM_CHECK(index_of_.size() == snapshots_.size(), "hybrid state cache: index {} != snapshots {}",
                   index_of_.size(), snapshots_.size());
    std::int64_t live = 0;
    for (const auto& [id, t] : tracked_) {
        live += t.live_slots;
    }
    SERVESIM_CHECK(live == num_live_slots_, "hybrid state cache: live slots {} != tracked {}", num_live_slots_, live);
}

}  // namespace servesim::cache
