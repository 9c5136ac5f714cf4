// HybridCachePolicy: which recurrent-state snapshots a hybrid model (Gated DeltaNet / Mamba layers next to
// attention) keeps for prefix caching, and which it drops first — one small interface, its implementations and the
// one table that names them (`engine.hybrid_cache_policy`). It owns no memory: the snapshot store is
// HybridStateCache (hybrid_state_cache.h); the attention KV stays in the block pool. docs/HYBRID-POLICIES.md
// describes every policy, the system it follows and where servesim approximates it.
//   vllm                 vLLM's own design: states are pages of the shared block pool (MambaManager, align / all
//                        per VllmVersion); not a HybridCachePolicy object — the table entry keeps today's path.
//   sglang-no-buffer     SGLang MambaRadixCache, --mamba-scheduler-strategy no_buffer (its default).
//   sglang-extra-buffer  the same cache with extra_buffer (two ping-pong tracking states per running request).
//   marconi              Marconi (MLSys'25): branch-point admission, FLOP-aware eviction.
//   checkpoint           servesim's scheme: block-16 attention, a state every K tokens, at branch points and at
//                        each sequence's end; a hit resumes from the nearest state and recomputes the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/ids.h"

namespace servesim::cache {

// A snapshot as policies see it when they choose a victim.
struct StateSnapshot {
    core::BlockHash key{};               // the attention block hash ending at position_tokens
    std::int64_t position_tokens = 0;    // the state after this many tokens
    std::uint64_t last_use = 0;          // store clock of its insertion or last hit (larger = more recent)
    std::int64_t num_hits = 0;
    double flops_saved = 0;              // prefill FLOPs a hit here skips (linear + attention terms)
    // An end state that a later request resumed from and extended with a deeper end state of its own (a dialogue's
    // previous turn): only a request repeating that exact turn could still hit it.
    bool superseded = false;
};

// One request's scheduled range: the step computes tokens (from_tokens, to_tokens].
struct ScheduledRange {
    std::int64_t from_tokens = 0;
    std::int64_t to_tokens = 0;
    std::int64_t num_prompt_tokens = 0;
    std::int64_t branch_point_tokens = 0;  // set by the last lookup (0 = none)
    int block_size_tokens = 16;
    // The request's tokens are known (its content was passed), so a token-granular policy may name any position.
    bool token_positions = false;
    // The step computes the prompt's last token (the range's end as scheduled, before it is cut to the hashed
    // blocks): not a "non-final chunk" even where to_tokens falls short of num_prompt_tokens.
    bool prompt_done = false;
};

class HybridCachePolicy {
public:
    virtual ~HybridCachePolicy() = default;

    [[nodiscard]] virtual std::string_view name() const = 0;
    // State slots a running request holds: its live state plus any tracking buffers.
    [[nodiscard]] virtual int live_slots_per_request() const { return 1; }
    // Whether the end state this policy keeps lies behind the live state (a block boundary or a tracked position,
    // not the last token computed), so a buffer slot must hold a copy of it from the step that reaches it until the
    // request finishes: one copy each time the end-state position advances. false: the end state is the live state
    // itself, handed to the cache at finish without a copy (SGLang cache_finished_req donates the request's slot).
    [[nodiscard]] virtual bool buffers_end_state() const { return false; }
    // Whether states sit at any token position (SGLang's radix tree at page size 1) rather than at block boundaries:
    // chunk ends and sequence ends are kept where they are, and a lookup finds a state inside a partial block (its
    // snapshot then also holds that block's KV tail, fewer than B tokens; docs/HYBRID-POLICIES.md).
    [[nodiscard]] virtual bool token_granular() const { return false; }
    // Positions in (from, to] — multiples of the block size unless range.token_positions — whose states become
    // snapshots when the range is scheduled, in increasing order.
    virtual void positions_to_snapshot(const ScheduledRange& range, std::vector<std::int64_t>& out) const = 0;
    // Whether a position reached while running may serve as the request's end state (kept when it is released).
    [[nodiscard]] virtual bool trackable(std::int64_t position_tokens, const ScheduledRange& range) const = 0;
    // The state at the last trackable position is kept when the request finishes or is preempted.
    [[nodiscard]] virtual bool keeps_end_state() const { return true; }
    // After a lookup found attention KV for attention_hit tokens but a state only at state_hit: the position the
    // request should checkpoint while it computes (0 = none).
    [[nodiscard]] virtual std::int64_t branch_point(std::int64_t attention_hit_tokens, std::int64_t state_hit_tokens,
                                                    int block_size_tokens) const;
    // Whether an end state a request resumed from is marked superseded when that request keeps a deeper one.
    [[nodiscard]] virtual bool marks_superseded() const { return false; }
    // A hit also refreshes the shallower snapshots of the matched path (SGLang's reset_node_and_parents_mru).
    [[nodiscard]] virtual bool touches_matched_path() const { return false; }
    // The index of the snapshot to evict next; `candidates` is never empty. Default: least recently used.
    [[nodiscard]] virtual std::size_t victim(std::span<const StateSnapshot> candidates) const;
};

// Knobs of the policies that have them (scenario keys; see the table in hybrid_cache_policy.cpp).
struct HybridPolicyParams {
    std::int64_t checkpoint_interval_tokens = 0;  // checkpoint: K; sglang-extra-buffer: mamba_track_interval
    double marconi_alpha = 1.0;                   // weight of FLOP efficiency against recency
};

// One row of the table: name, one-line description, default interval (0 = the policy has none) and factory
// (nullptr for vllm, whose states stay in the shared block pool).
struct HybridPolicyEntry {
    std::string_view name;
    std::string_view description;
    std::int64_t default_interval_tokens;
    std::unique_ptr<HybridCachePolicy> (*make)(const HybridPolicyParams&);
};

[[nodiscard]] std::span<const HybridPolicyEntry> hybrid_policies();
// nullptr when no policy has that name.
[[nodiscard]] const HybridPolicyEntry* find_hybrid_policy(std::string_view name);
// "vllm, sglang-no-buffer, …" for messages.
[[nodiscard]] std::string hybrid_policy_names();

}  // namespace servesim::cache
