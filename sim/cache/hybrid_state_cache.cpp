// HybridStateCache: live states, snapshots and their eviction; see hybrid_state_cache.h.
#include "sim/cache/hybrid_state_cache.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace servesim::cache {

HybridStateCache::HybridStateCache(const HybridStateConfig& config, int block_size_tokens)
    : block_size_tokens_(block_size_tokens),
      num_slots_(config.num_state_slots),
      linear_flops_per_token_(config.linear_flops_per_token),
      attention_flops_per_work_(config.attention_flops_per_work) {
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

std::int64_t HybridStateCache::find_longest_state_hit(std::span<const core::BlockHash> hashes,
                                                      std::int64_t max_tokens) {
    const std::int64_t b = block_size_tokens_;
    std::int64_t hit = 0;
    std::vector<std::size_t> path;
    for (std::int64_t p = std::min<std::int64_t>(max_tokens, static_cast<std::int64_t>(hashes.size()) * b) / b * b;
         p >= b; p -= b) {
        const auto it = index_of_.find(core::to_int(hashes[static_cast<std::size_t>(p / b - 1)]));
        if (it == index_of_.end() || snapshots_[it->second].inserted_step == step_) {
            continue;
        }
        if (hit == 0) {
            hit = p;
            path.push_back(it->second);
            if (!policy_->touches_matched_path()) {
                break;
            }
        } else {
            path.push_back(it->second);
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
    tracked_[core::to_int(id)].branch_point_tokens =
        policy_->branch_point(attention_hit_tokens, state_hit_tokens, block_size_tokens_);
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
    t.offered_to_tokens = -1;
    t.resumed_key = protect;
    num_live_slots_ += need;
}

void HybridStateCache::on_scheduled(core::RequestId id, std::span<const core::BlockHash> hashes,
                                    std::int64_t from_tokens, std::int64_t to_tokens, std::int64_t num_prompt_tokens) {
    const auto it = tracked_.find(core::to_int(id));
    SERVESIM_CHECK(it != tracked_.end() && it->second.live_slots > 0, "request {} scheduled without a live state",
                   core::to_int(id));
    Tracked& t = it->second;
    const std::int64_t b = block_size_tokens_;
    const std::int64_t cached_to = std::min(to_tokens, static_cast<std::int64_t>(hashes.size()) * b);
    const std::int64_t offered_from = t.offered_to_tokens < 0 ? from_tokens : std::min(from_tokens, t.offered_to_tokens);
    if (cached_to <= offered_from) {
        return;
    }
    t.offered_to_tokens = cached_to;
    const ScheduledRange range{offered_from, cached_to, num_prompt_tokens, t.branch_point_tokens, block_size_tokens_};
    std::vector<std::int64_t> positions;
    policy_->positions_to_snapshot(range, positions);
    for (const std::int64_t p : positions) {
        SERVESIM_CHECK(p > offered_from && p <= cached_to && p % b == 0, "policy {}: position {} outside ({}, {}]",
                       policy_->name(), p, offered_from, cached_to);
        insert(hashes[static_cast<std::size_t>(p / b - 1)], p);
    }
    for (std::int64_t p = cached_to / b * b; p > offered_from; p -= b) {
        if (policy_->trackable(p, range)) {
            t.end_position_tokens = p;
            t.end_key = hashes[static_cast<std::size_t>(p / b - 1)];
            break;
        }
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
    if (t.live_slots > 0 && policy_->keeps_end_state() && t.end_position_tokens > 0) {
        insert(t.end_key, t.end_position_tokens, /*end_state=*/true);
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

bool HybridStateCache::insert(core::BlockHash key, std::int64_t position, bool end_state) {
    if (const auto it = index_of_.find(core::to_int(key)); it != index_of_.end()) {
        Entry& e = snapshots_[it->second];
        e.snapshot.last_use = ++clock_;
        e.snapshot.superseded = false;
        e.end_state = e.end_state || end_state;
        return true;
    }
    if (num_free_slots() <= 0) {
        if (snapshots_.empty()) {
            return false;
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
    index_of_.emplace(core::to_int(key), snapshots_.size());
    snapshots_.push_back(e);
    ++stats_.num_snapshots_taken;
    ++snapshots_scheduled_;
    stats_.peak_snapshots = std::max(stats_.peak_snapshots, num_snapshots());
    return true;
}

void HybridStateCache::evict_one(std::optional<core::BlockHash> protect) {
    scratch_.clear();
    std::vector<std::size_t> where;
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
