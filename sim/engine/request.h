// Request: one request's state inside a replica (vLLM vllm/v1/request.py Request and RequestStatus). There are no
// prefill and decode phases: num_computed_tokens catches up with num_tokens() (prompt + generated), in chunks
// while prefilling, one token per step while decoding. Token content is a list of runs (docs/ARCHITECTURE.md, "Prompt
// content as runs"); the generated answer is the last run and grows by one token per sampled token, and the chained
// block hashes grow with it. Hashing is skipped altogether (block_hashes stays empty) when nothing reads the hashes:
// vLLM's EngineCore builds its request_block_hasher only when prefix caching is on or a KV connector is configured
// (vllm/v1/engine/core.py EngineCore.__init__, get_request_block_hasher in kv_cache_utils.py); the replica decides
// (replica.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "common/error.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/prefix_cache/block_hash.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace servesim::engine {

// kWaitingForRemoteKvs: blocks allocated, KV loading from the host tier (vLLM RequestStatus.WAITING_FOR_REMOTE_KVS).
enum class RequestStatus { kWaiting, kWaitingForRemoteKvs, kRunning, kPreempted, kFinished };

struct alignas(64) Request {
    // `hash_memo` (optional, the replica's) shares first-run block hashes between requests and hands a finished
    // turn's hashes to its dialogue's next turn (block_hash.h, turn_hash_handoff.h).
    // `hash_blocks` false: no block hashes are ever computed (no prefix caching and no connector to read them).
    // `hashed` (optional, moved from): the prompt's block hashes already computed at `hash_block_size`
    // (cache::HashedPrompt), taken instead of hashing the prompt again.
    Request(core::RequestId id_, core::TokenContent prompt, std::int64_t max_output_tokens_, core::ContentId answer,
            core::SimTime arrival_, int hash_block_size, cache::FirstRunHashMemo* hash_memo = nullptr,
            bool hash_blocks_ = true, cache::HashedPrompt* hashed = nullptr)
        : max_output_tokens(max_output_tokens_),
          id(id_),
          content_runs_(std::move(prompt)),
          arrival(arrival_),
          hash_blocks(hash_blocks_),
          hasher(hash_block_size) {
        num_prompt_tokens = core::total_tokens(content_runs_);
        content_runs_.push_back(core::ContentRun{answer, 0});
        if (hash_blocks) {
            if (hashed != nullptr) {
                SERVESIM_CHECK(hashed->hasher.block_size_tokens() == hash_block_size,
                               "prompt hashed at block size {}, request at {}", hashed->hasher.block_size_tokens(),
                               hash_block_size);
                block_hashes = std::move(hashed->hashes);
                hasher = hashed->hasher;
                hasher.extend(block_hashes, content(), num_tokens());  // the answer run is empty: nothing new
            } else {
                hasher.extend(block_hashes, content(), num_tokens(), hash_memo);
            }
            // Room for every full block of prompt + answer, so the answer's blocks never move the list, and some
            // more: the list is handed to the dialogue's next turn at finish (turn_hash_handoff.h), which then
            // grows it by its user message and answer without a copy.
            const auto num_blocks = static_cast<std::size_t>(
                (num_prompt_tokens + std::min<std::int64_t>(max_output_tokens, kMaxReservedAnswerTokens)) /
                hash_block_size);
            if (block_hashes.capacity() < num_blocks) {
                block_hashes.reserve(num_blocks + kSpareHashBlocks);
            }
        }
        note_hash_cursor();
    }

    static constexpr std::int64_t kMaxReservedAnswerTokens = 1 << 16;
    static constexpr std::size_t kSpareHashBlocks = 32;

    // Layout: a decode step reads and writes a running request in the scheduler's loop and in end_step's token pass;
    // the fields those two read come first, in the object's first two cache lines (the object is line-aligned), so
    // a step costs a request two lines however many replicas interleave their steps. Nothing depends on the order.
    std::int64_t num_prompt_tokens = 0;
    std::int64_t max_output_tokens = 1;
    std::int64_t num_output_tokens = 0;
    std::int64_t num_computed_tokens = 0;
    // Tokens scheduled to be sampled whose value has not come back yet (vLLM num_output_placeholders, async
    // scheduling): the next step can schedule the request's decode before its previous token arrives.
    std::int64_t num_output_placeholders = 0;
    // append_output_token's shortcut past the hasher: the token count from which BlockHasher::extend may hash a
    // block. Its next block end while block_hashes is the list it last extended and not empty (extend's own early
    // return, tested here with one comparison per token), 0 otherwise (always call), never without hashing. Set
    // after every hashing call; nothing else writes block_hashes or the hasher (the cache and the connector read).
    std::int64_t next_hash_at_tokens = 0;
    // The cache's summary of this request's block lists for running steps (cache::KvRunningSummary); a lookup
    // shortcut the cache keeps current; no output depends on it.
    mutable cache::KvRunningSummary kv_summary;
    // (second line)
    core::RequestId id;
    RequestStatus status = RequestStatus::kWaiting;
    // The prompt runs, then the answer run, read through content() (below). The answer run's length is written there,
    // from num_output_tokens, not by every sampled token: a decode step then writes no third cache line per request.
    mutable core::TokenContent content_runs_;
    core::SimTime arrival;
    core::SimTime last_token;
    core::Duration max_token_gap;  // longest gap between consecutive output tokens so far (per-request ITL max)
    // CPU offload and connectors (sim/cache/offload/cpu_offload.h): blocks already handed to the host tier (read every
    // step by Scheduler::store_to_offload).
    std::int64_t num_offload_stored_blocks = 0;
    // Speculative decoding: draft tokens the drafter proposed for this request's next step (vLLM
    // request.spec_token_ids, their count; placeholders under async scheduling, as AsyncScheduler sets them).
    std::int64_t num_spec_tokens = 0;
    // (the rest: set-up, finish metrics and the other paths)
    core::SimTime first_token;
    int num_preemptions = 0;
    int turn = 0;  // 1-based turn within a dialogue, 0 if none (workloads::RequestSpec::turn), for metrics only
    // How much later the client sees each token than the engine makes it (a proxy relaying the stream,
    // IncomingRequest::client_delay); for metrics only.
    core::Duration client_delay{};
    // The client gave up on it (Replica::time_out): nothing of it is measured any more, and the engine aborts it at
    // its next step boundary. Set only in runs with client time-outs.
    bool timed_out = false;
    std::optional<core::SimTime> client_deadline;  // IncomingRequest::client_deadline
    // Its held-back token gaps (Replica's gap buffers, ReplicaConfig::hold_token_gaps); kNoGapSlot when none.
    static constexpr std::uint32_t kNoGapSlot = 0xffffffffu;
    std::uint32_t gap_slot = kNoGapSlot;
    // vLLM request.shared_prefix_boundary (PR #47782): the shared-prefix junction found at the last lookup, where a
    // prefill chunk stops so a Mamba state is cached there; 0 = none. Set only where the version keeps it.
    std::int64_t shared_prefix_boundary = 0;
    bool hash_blocks = true;  // false: block_hashes stays empty (nothing reads it)
    // The KV cache managers' slot for this request's block lists (cache::CacheRequest::kv_slot_hint), a lookup
    // shortcut the cache keeps current; no output depends on it.
    mutable std::uint32_t kv_slot_hint = 0xffffffffu;
    std::vector<core::BlockHash> block_hashes;
    cache::BlockHasher hasher;

    // Timestamps and per-request figures for metrics.
    core::SimTime first_scheduled;
    bool scheduled_once = false;
    std::int64_t num_cached_prompt_tokens = 0;  // vLLM prompt_tokens_cached: last lookup before the first token
    std::int64_t num_external_cached_tokens = 0;

    // CPU offload: the pending load.
    std::int64_t num_local_hit_tokens = 0;
    core::SimTime load_done;
    // Async scheduling: how long after its transfer's end the load is reported (the step carrying it starts at the
    // next schedule(), Scheduler::finish_loads); zero otherwise. Scheduler::retime_load keeps it.
    core::Duration load_lag;

    [[nodiscard]] std::int64_t num_tokens() const { return num_prompt_tokens + num_output_tokens; }

    // The token content: prompt runs, then the answer run, whose length is num_output_tokens.
    [[nodiscard]] const core::TokenContent& content() const {
        content_runs_.back().length_tokens = num_output_tokens;
        return content_runs_;
    }
    // content(), moved out (the request is finished: its dialogue's next turn takes it, turn_hash_handoff.h).
    [[nodiscard]] core::TokenContent take_content() {
        (void)content();
        return std::move(content_runs_);
    }

    [[nodiscard]] bool is_finished() const { return num_output_tokens >= max_output_tokens; }

    // Appends one sampled token to the answer run and hashes any block it completes.
    void append_output_token() {
        if (num_output_placeholders > 0) {
            --num_output_placeholders;  // AsyncScheduler._update_request: the token replaces its placeholder
        }
        ++num_output_tokens;  // (the answer run's length follows in content())
        if (num_tokens() >= next_hash_at_tokens) {
            refresh_block_hashes();
        }
    }

    void refresh_block_hashes() {
        if (hash_blocks) {
            hasher.extend(block_hashes, content(), num_tokens());
        }
        note_hash_cursor();
    }

    void note_hash_cursor() {
        if (!hash_blocks) {
            next_hash_at_tokens = std::numeric_limits<std::int64_t>::max();
        } else if (block_hashes.size() == hasher.cursor().num_hashed_blocks && !block_hashes.empty()) {
            next_hash_at_tokens = hasher.next_block_end_tokens();
        } else {
            next_hash_at_tokens = 0;
        }
    }
};

}  // namespace servesim::engine
