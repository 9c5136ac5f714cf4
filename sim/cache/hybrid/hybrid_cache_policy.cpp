// The hybrid state-cache policies and their table; see hybrid_cache_policy.h and docs/HYBRID-POLICIES.md.
#include "sim/cache/hybrid/hybrid_cache_policy.h"

#include <algorithm>
#include <array>

namespace servesim::cache {

std::int64_t HybridCachePolicy::branch_point(std::int64_t /*attention_hit_tokens*/, std::int64_t /*state_hit_tokens*/,
                                             int /*block_size_tokens*/) const {
    return 0;
}

std::size_t HybridCachePolicy::victim(std::span<const StateSnapshot> candidates) const {
    std::size_t best = 0;
    for (std::size_t i = 1; i < candidates.size(); ++i) {
        if (candidates[i].last_use < candidates[best].last_use) {
            best = i;
        }
    }
    return best;
}

namespace {

// The last multiple of the block size in (from, to], or 0.
std::int64_t last_boundary(const ScheduledRange& r) {
    const std::int64_t p = r.to_tokens / r.block_size_tokens * r.block_size_tokens;
    return p > r.from_tokens ? p : 0;
}

bool in_range(std::int64_t p, const ScheduledRange& r) { return p > r.from_tokens && p <= r.to_tokens; }

// Whether the block boundary p can be the last one a request reaches, so that its buffered end state must be copied
// there: the prompt's last boundary (no later one inside the prompt) and every boundary of the output (the request
// may stop after any token). The boundaries before the prompt's last are passed with certainty and need no copy.
bool could_end_sequence(std::int64_t p, const ScheduledRange& r) {
    return p + r.block_size_tokens > r.num_prompt_tokens;
}

// SGLang MambaRadixCache with --mamba-scheduler-strategy no_buffer (python/sglang/srt/mem_cache/
// mamba_radix_cache.py): cache_unfinished_req copies the running state into a new slot at the end of every
// non-final prefill chunk (len(fill_ids), any token); cache_finished_req donates the request's own state at the
// end of its sequence (its committed KV length); no_buffer requires page size 1, so _match_prefix_helper matches
// token by token and stops at the deepest node holding a state; a match refreshes the whole matched path, parents
// older than children, so shallower states are evicted first (_match_post_processor); evict_mamba drops the least
// recently used unlocked state.
class SglangNoBuffer : public HybridCachePolicy {
public:
    [[nodiscard]] std::string_view name() const override { return "sglang-no-buffer"; }
    [[nodiscard]] bool token_granular() const override { return true; }

    void positions_to_snapshot(const ScheduledRange& r, std::vector<std::int64_t>& out) const override {
        if (!r.prompt_done) {
            if (const std::int64_t p = r.token_positions ? r.to_tokens : last_boundary(r); p > r.from_tokens) {
                out.push_back(p);
            }
        }
    }

    [[nodiscard]] bool trackable(std::int64_t, const ScheduledRange&) const override { return true; }
    [[nodiscard]] bool touches_matched_path() const override { return true; }
};

// SGLang with --mamba-scheduler-strategy extra_buffer (PR #14792): two more state slots per running request (the
// ping-pong track buffer) hold the state at the last tracked position — every mamba_track_interval tokens (256 by
// default) and the branching point (the matched KV length floored to mamba_cache_chunk_size, 64 here) — and that
// tracked state, not the chunk's end, is what cache_unfinished_req and cache_finished_req insert.
class SglangExtraBuffer : public HybridCachePolicy {
public:
    explicit SglangExtraBuffer(std::int64_t track_interval_tokens) : track_interval_tokens_(track_interval_tokens) {}

    [[nodiscard]] std::string_view name() const override { return "sglang-extra-buffer"; }
    [[nodiscard]] int live_slots_per_request() const override { return 3; }
    // The ping-pong track buffer holds the last tracked state (a copy when the step reaches it); cache_unfinished_req
    // and cache_finished_req donate that buffer slot to the tree (the request takes a fresh one), no copy.
    [[nodiscard]] bool buffers_end_state() const override { return true; }

    void positions_to_snapshot(const ScheduledRange& r, std::vector<std::int64_t>& out) const override {
        if (r.prompt_done) {
            return;
        }
        std::int64_t last = r.to_tokens / track_interval_tokens_ * track_interval_tokens_;
        if (r.branch_point_tokens > last && in_range(r.branch_point_tokens, r)) {
            last = r.branch_point_tokens;
        }
        if (last > r.from_tokens) {
            out.push_back(last);
        }
    }

    [[nodiscard]] bool trackable(std::int64_t p, const ScheduledRange& r) const override {
        return p % track_interval_tokens_ == 0 || p == r.branch_point_tokens;
    }

    [[nodiscard]] std::int64_t branch_point(std::int64_t attention_hit, std::int64_t state_hit, int) const override {
        constexpr std::int64_t kMambaCacheChunkTokens = 64;
        const std::int64_t p = attention_hit / kMambaCacheChunkTokens * kMambaCacheChunkTokens;
        return p > state_hit ? p : 0;
    }

    [[nodiscard]] bool touches_matched_path() const override { return true; }

private:
    std::int64_t track_interval_tokens_;
};

// Marconi (Pan et al., MLSys'25, §4): a sequence admits at most two states — the last decoded token's (input +
// output reuse) and, for a purely-input prefix, the branch point its speculative radix insertion finds (where the
// new input leaves the cached path), checkpointed while the request prefills, so a shared prefix hits from its
// third occurrence. Eviction: utility = recency + α · FLOP efficiency (FLOPs a hit saves per byte of state), both
// normalised over the candidates; the lowest goes.
class Marconi : public HybridCachePolicy {
public:
    explicit Marconi(double alpha) : alpha_(alpha) {}

    [[nodiscard]] std::string_view name() const override { return "marconi"; }
    // Its end state is the last decoded token's, here at the last block boundary reached (states sit at 16-token
    // boundaries), which the live state has passed by up to 15 tokens at finish: a second slot holds a copy of it,
    // refreshed at every boundary a step reaches (every 16 decode tokens). issue 44.
    [[nodiscard]] int live_slots_per_request() const override { return 2; }
    [[nodiscard]] bool buffers_end_state() const override { return true; }

    void positions_to_snapshot(const ScheduledRange& r, std::vector<std::int64_t>& out) const override {
        if (r.branch_point_tokens > 0 && in_range(r.branch_point_tokens, r)) {
            out.push_back(r.branch_point_tokens);
        }
    }

    [[nodiscard]] bool trackable(std::int64_t p, const ScheduledRange& r) const override {
        return could_end_sequence(p, r);
    }

    [[nodiscard]] std::int64_t branch_point(std::int64_t attention_hit, std::int64_t state_hit, int) const override {
        return attention_hit > state_hit ? attention_hit : 0;
    }

    [[nodiscard]] std::size_t victim(std::span<const StateSnapshot> c) const override {
        std::uint64_t min_use = c[0].last_use;
        std::uint64_t max_use = c[0].last_use;
        double max_flops = 0;
        for (const auto& s : c) {
            min_use = std::min(min_use, s.last_use);
            max_use = std::max(max_use, s.last_use);
            max_flops = std::max(max_flops, s.flops_saved);
        }
        const double use_span = static_cast<double>(max_use - min_use);
        std::size_t best = 0;
        double best_score = 0;
        for (std::size_t i = 0; i < c.size(); ++i) {
            const double recency = use_span > 0 ? static_cast<double>(c[i].last_use - min_use) / use_span : 1.0;
            const double efficiency = max_flops > 0 ? c[i].flops_saved / max_flops : 0.0;
            const double score = recency + alpha_ * efficiency;
            // Ties: the older one goes (last_use is unique, so the choice never depends on the order).
            if (i == 0 || score < best_score || (score == best_score && c[i].last_use < c[best].last_use)) {
                best = i;
                best_score = score;
            }
        }
        return best;
    }

private:
    double alpha_;
};

// servesim's checkpoint scheme: attention at block 16 in its own pool, a state snapshot every K tokens while a
// request computes (the chunked scan kernels produce the state at every chunk boundary, so any multiple of K within
// a step can be copied out), at the branch point a lookup found (as Marconi) and at the end of every sequence.
// Eviction: superseded end states first (a dialogue's earlier turns, which its next turn has extended), then LRU —
// so a shared prefix's state, touched only when a dialogue starts, is not pushed out by a stream of turn ends.
// A lookup resumes from the deepest snapshot not beyond the attention hit and recomputes the tokens between (at
// most K − 1 when the branch point is not known yet), charged as prefill by the step cost model.
class Checkpoint : public HybridCachePolicy {
public:
    explicit Checkpoint(std::int64_t interval_tokens) : interval_tokens_(interval_tokens) {}

    [[nodiscard]] std::string_view name() const override { return "checkpoint"; }
    // As marconi: the end state at the last block boundary reached needs a second slot holding its copy.
    [[nodiscard]] int live_slots_per_request() const override { return 2; }
    [[nodiscard]] bool buffers_end_state() const override { return true; }

    void positions_to_snapshot(const ScheduledRange& r, std::vector<std::int64_t>& out) const override {
        const std::size_t first = out.size();
        for (std::int64_t p = (r.from_tokens / interval_tokens_ + 1) * interval_tokens_; p <= r.to_tokens;
             p += interval_tokens_) {
            out.push_back(p);
        }
        if (r.branch_point_tokens > 0 && in_range(r.branch_point_tokens, r)) {
            out.push_back(r.branch_point_tokens);
            std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
            out.erase(std::unique(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()), out.end());
        }
    }

    [[nodiscard]] bool trackable(std::int64_t p, const ScheduledRange& r) const override {
        return could_end_sequence(p, r);
    }

    [[nodiscard]] std::int64_t branch_point(std::int64_t attention_hit, std::int64_t state_hit, int) const override {
        return attention_hit > state_hit ? attention_hit : 0;
    }

    [[nodiscard]] bool marks_superseded() const override { return true; }

    [[nodiscard]] std::size_t victim(std::span<const StateSnapshot> c) const override {
        std::size_t best = 0;
        for (std::size_t i = 1; i < c.size(); ++i) {
            if (c[i].superseded != c[best].superseded ? c[i].superseded : c[i].last_use < c[best].last_use) {
                best = i;
            }
        }
        return best;
    }

private:
    std::int64_t interval_tokens_;
};

template <typename T>
std::unique_ptr<HybridCachePolicy> make_plain(const HybridPolicyParams&) {
    return std::make_unique<T>();
}

// The table: adding a policy is one row here.
const std::array<HybridPolicyEntry, 5> kPolicies = {{
    {"vllm", "vLLM: states are pages of the shared block pool (mamba_cache_mode align/all, per vllm_version)", 0,
     nullptr},
    {"sglang-no-buffer",
     "SGLang MambaRadixCache, no_buffer: a state at every prefill chunk end and sequence end, to the token; path LRU",
     0,
     &make_plain<SglangNoBuffer>},
    {"sglang-extra-buffer",
     "SGLang MambaRadixCache, extra_buffer: +2 tracking states per request, states every track interval and at "
     "branching points",
     256,
     [](const HybridPolicyParams& p) -> std::unique_ptr<HybridCachePolicy> {
         return std::make_unique<SglangExtraBuffer>(p.checkpoint_interval_tokens);
     }},
    {"marconi", "Marconi: states at branch points (from the 3rd occurrence) and sequence ends, FLOP-aware eviction", 0,
     [](const HybridPolicyParams& p) -> std::unique_ptr<HybridCachePolicy> {
         return std::make_unique<Marconi>(p.marconi_alpha);
     }},
    {"checkpoint",
     "servesim: a state every K tokens, at branch points and at sequence ends; recompute from the nearest, LRU", 2048,
     [](const HybridPolicyParams& p) -> std::unique_ptr<HybridCachePolicy> {
         return std::make_unique<Checkpoint>(p.checkpoint_interval_tokens);
     }},
}};

}  // namespace

std::span<const HybridPolicyEntry> hybrid_policies() { return kPolicies; }

const HybridPolicyEntry* find_hybrid_policy(std::string_view name) {
    for (const auto& e : kPolicies) {
        if (e.name == name) {
            return &e;
        }
    }
    return nullptr;
}

std::string hybrid_policy_names() {
    std::string out;
    for (const auto& e : kPolicies) {
        out += (out.empty() ? "" : ", ") + std::string(e.name);
    }
    return out;
}

}  // namespace servesim::cache
