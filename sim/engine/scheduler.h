// Scheduler: vLLM v1's one-step scheduling decision (vllm/v1/core/sched/scheduler.py Scheduler.schedule).
// No prefill or decode phases: each step, running requests first (in admission order), then waiting ones while the
// token budget (max_num_batched_tokens) and max_num_seqs allow; chunked prefill; a request that cannot get KV
// blocks preempts the last running request by recompute; no admission in a step that preempted; Mamba `align`
// chunk splitting (_mamba_block_aligned_split) with the Marconi shared-prefix cut of the release in
// SchedulerConfig::vllm_version (docs/VLLM-VERSIONS.md). It asks sim/cache for blocks and never touches a free list.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/offload/cpu_offload.h"
#include "sim/core/vllm_version.h"
#include "sim/engine/request.h"

namespace servesim::engine {

// The scheduler's settings, named after vLLM's (SchedulerConfig / CacheConfig).
struct SchedulerConfig {
    std::int64_t max_num_batched_tokens = 8192;
    std::int64_t max_num_seqs = 1024;
    std::int64_t max_model_len = 0;
    bool enable_chunked_prefill = true;
    std::int64_t long_prefill_token_threshold = 0;  // 0 = off (vLLM default)
    bool scheduler_reserve_full_isl = true;
    int block_size = 16;                         // hash / attention block size
    bool mamba_align = false;                    // hybrid with mamba_cache_mode == align and prefix caching on
    core::VllmVersion vllm_version = core::kNewestModelled;  // whose version-dependent rules apply
    // Async scheduling (the replica schedules step k+1 while step k runs): a host-tier load is promoted one
    // schedule() later than without it (see finish_loads).
    bool async_scheduling = false;
    // Speculative decoding (sim/engine/speculative.h): drafts proposed per request per step (vLLM
    // Scheduler.num_spec_tokens) and the lookahead slots allocated for them (num_lookahead_tokens: k for EAGLE/MTP
    // and draft models, 0 for ngram). 0 = off.
    int num_spec_tokens = 0;
    int num_lookahead_tokens = 0;
    // SpeculativeConfig.use_eagle (EAGLE, EAGLE-3, MTP): the align split's last cache position is one block earlier
    // (Scheduler._mamba_block_aligned_split), matching the hit's dropped last block (KvCacheConfig::use_eagle).
    bool use_eagle = false;
};

// One request's share of a step.
struct ScheduledRequest {
    Request* request = nullptr;
    std::int64_t num_new_tokens = 0;
    std::int64_t num_computed_before = 0;  // context already in the KV cache before this chunk (hit included)
    bool samples_token = false;            // the chunk reaches the end of the sequence: a token is sampled
    int num_draft_tokens = 0;              // speculative drafts verified in this chunk (its last num_draft_tokens)
};

// A step's entries: a vector whose slots past size() are already constructed, so the running-request pass reserves
// once per step and then writes its entries through a plain pointer (std::vector's push_back tests the capacity and
// reloads its pointers after every store through a request, which may alias them: ~12 instructions per entry).
class ScheduledList {
public:
    ScheduledList() = default;
    ScheduledList(const ScheduledList& o) { *this = o; }
    ScheduledList& operator=(const ScheduledList& o) {
        if (this != &o) {
            size_ = 0;
            reserve(o.size_);
            std::copy(o.begin(), o.end(), slots_.get());
            size_ = o.size_;
        }
        return *this;
    }
    ScheduledList(ScheduledList&& o) noexcept
        : slots_(std::move(o.slots_)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
    ScheduledList& operator=(ScheduledList&& o) noexcept {
        slots_ = std::move(o.slots_);
        size_ = std::exchange(o.size_, 0);
        capacity_ = std::exchange(o.capacity_, 0);
        return *this;
    }

    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] bool empty() const { return size_ == 0; }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }
    [[nodiscard]] ScheduledRequest* begin() { return slots_.get(); }
    [[nodiscard]] ScheduledRequest* end() { return slots_.get() + size_; }
    [[nodiscard]] const ScheduledRequest* begin() const { return slots_.get(); }
    [[nodiscard]] const ScheduledRequest* end() const { return slots_.get() + size_; }
    [[nodiscard]] ScheduledRequest& operator[](std::size_t i) { return slots_[i]; }
    [[nodiscard]] const ScheduledRequest& operator[](std::size_t i) const { return slots_[i]; }
    [[nodiscard]] ScheduledRequest& back() { return slots_[size_ - 1]; }

    void clear() { size_ = 0; }
    // At least n slots; the entries are kept.
    void reserve(std::size_t n) {
        if (n <= capacity_) {
            return;
        }
        const std::size_t capacity = std::max(n, 2 * capacity_);
        auto slots = std::make_unique<ScheduledRequest[]>(capacity);
        std::copy(begin(), end(), slots.get());
        slots_ = std::move(slots);
        capacity_ = capacity;
    }
    void push_back(const ScheduledRequest& s) {
        if (size_ == capacity_) {
            reserve(size_ + 1);
        }
        slots_[size_++] = s;
    }
    // Removes one entry, keeping the order of the others.
    ScheduledRequest* erase(ScheduledRequest* it) {
        std::copy(it + 1, end(), it);
        --size_;
        return it;
    }
    // The entries written into the reserved slots [size(), n) become part of the list (n <= capacity()).
    void set_size_within_capacity(std::size_t n) { size_ = n; }

private:
    std::unique_ptr<ScheduledRequest[]> slots_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

// StepPlan: what one step runs (vLLM SchedulerOutput).
struct StepPlan {
    ScheduledList scheduled;
    std::vector<Request*> preempted;
    std::int64_t num_scheduled_tokens = 0;
    // scheduled[first_admitted, end) came from the waiting queue in this step; the entries before it were running
    // already (so scheduled in an earlier step). 0, the default, counts every entry as possibly new.
    std::size_t first_admitted = 0;
    // When running_all_decode is set, every entry before first_admitted is a single-token decode (n = 1, context
    // past the prompt), and these are the sums Replica::batch_shape would take over them: Σ (context + 1) and the
    // number that sample. The scheduler fills them as it schedules the running requests, which it has in hand, so
    // batch_shape loops only over the admitted ones. Unset (the default, and after any preemption) means no claim.
    bool running_all_decode = false;
    std::int64_t running_decode_context_tokens = 0;
    std::int64_t running_num_sampled = 0;
    [[nodiscard]] bool empty() const { return scheduled.empty(); }
};

class Scheduler {
public:
    // `offload` (optional) is the host KV tier, vLLM's OffloadingConnector: looked up after the local cache,
    // stored into eagerly.
    Scheduler(const SchedulerConfig& config, cache::KvCacheManager& kv_cache,
              cache::KvConnector* offload = nullptr);

    // A new request joins the tail of the waiting queue (FCFS).
    void add_request(Request* request);

    // One scheduling decision. num_computed_tokens is advanced for every scheduled request
    // (_update_after_schedule), so the plan's chunks are "in flight" until the step ends.
    // `now` is when the step starts (host-tier loads finished by then rejoin the waiting queue first).
    [[nodiscard]] StepPlan schedule(core::SimTime now = core::SimTime());
    // The same decision written into `plan`, which is cleared first: its vectors keep their capacity, so a replica
    // that hands back the previous step's plan allocates nothing per step.
    void schedule(core::SimTime now, StepPlan& plan);

    // When the earliest host-tier load finishes (the replica must wake then even if idle).
    [[nodiscard]] std::optional<core::SimTime> next_load_done() const;

    // A connector's load for request `id` now ends at `transfer_end` (the network's shares changed while it ran:
    // cluster::TransferTracker). Its wait keeps its lag behind the transfer (async scheduling reports it at a
    // later schedule()). Returns whether the request is loading and now finishes earlier than it did; false for a
    // request not waiting for a load.
    bool retime_load(core::RequestId id, core::SimTime transfer_end);

    // After the step: the request finished; frees its blocks (vLLM _free_request) and drops it from running.
    // Returns true when the connector delays the free (request_finished): the blocks stay until free_delayed.
    bool finish_request(Request* request);
    void free_delayed(Request* request);

    // The client disconnected (vLLM AsyncLLM.abort → EngineCore.abort_requests → Scheduler.finish_requests(ids,
    // FINISHED_ABORTED)): the request leaves running or waiting and its blocks are freed as at a finish
    // (_free_request; cached blocks stay in the prefix cache). A request loading KV from a connector
    // (WAITING_FOR_REMOTE_KVS) leaves its load too. Called between steps (docs/CLIENT-TIMEOUTS.md).
    void abort_request(Request* request);

    // Removes the head of the waiting queue when it can never be scheduled (nothing runs and still it does not
    // fit an otherwise idle cache); the replica counts it as rejected instead of stalling (vLLM would hang).
    Request* drop_unschedulable_head();

    [[nodiscard]] std::size_t num_waiting() const { return waiting_.size(); }

    [[nodiscard]] std::size_t num_running() const { return running_.size(); }

    [[nodiscard]] bool has_work() const {
        return !waiting_.empty() || !running_.empty() || !loading_.empty() || !pending_loads_.empty();
    }

    [[nodiscard]] std::int64_t num_preemptions() const { return num_preemptions_; }

    [[nodiscard]] const SchedulerConfig& config() const { return config_; }

private:
    cache::CacheHit hit_scratch_;  // schedule()'s admission lookup, reused (reset_hit) for its capacity
    [[nodiscard]] cache::CacheRequest cache_view(const Request& r) const;

    // _mamba_block_aligned_split; returns the adjusted token count (0 = do not schedule this step). Also applies
    // the Marconi junction cut (PR #37898; from #47782 through request.shared_prefix_boundary).
    // num_uncached_common_prefix_tokens: the waiting request's lookup result (0 for running requests).
    [[nodiscard]] std::int64_t mamba_aligned_split(const Request& r, std::int64_t num_computed_tokens,
                                                   std::int64_t num_new_tokens,
                                                   std::int64_t num_uncached_common_prefix_tokens = 0) const;

    void preempt(Request* victim);

    // Part A of schedule(): the running requests in admission order; returns the budget left.
    std::int64_t schedule_running(StepPlan& plan, std::int64_t budget);
    // schedule_running's loop; kPlainSettings: no long-prefill threshold and no Mamba alignment.
    template <bool kPlainSettings>
    std::int64_t schedule_running_as(StepPlan& plan, std::int64_t budget);
    // allocate_slots for running request r's n tokens, preempting from the tail of running_ until it fits (vLLM's
    // loop in schedule()): the tokens preempted entries of this plan give back to the budget, and whether r itself
    // was preempted (not scheduled).
    struct RunningAllocation {
        std::int64_t returned_tokens = 0;
        bool preempted_self = false;
    };
    [[gnu::noinline]] RunningAllocation allocate_or_preempt(Request* r, std::int64_t n, StepPlan& plan);

    // _update_waiting_for_remote_kv: finished loads cache their blocks and rejoin the head of waiting. Under async
    // scheduling, loads looked up in the previous schedule() start now (their step starts now).
    void finish_loads(core::SimTime now);

    // _build_store_jobs: every block that became full in this step goes to the host tier.
    void store_to_offload(const StepPlan& plan);

    SchedulerConfig config_;
    cache::KvCacheManager& kv_cache_;
    std::deque<Request*> waiting_;
    std::vector<Request*> running_;  // admission order
    std::vector<Request*> loading_;  // WAITING_FOR_REMOTE_KVS, in the order their loads started
    // Async scheduling: loads looked up in this schedule() whose step has not started yet (start, duration).
    struct PendingLoad {
        Request* request = nullptr;
        core::SimTime looked_up;
        core::Duration duration;
    };
    std::vector<PendingLoad> pending_loads_;
    cache::KvConnector* offload_ = nullptr;
    std::int64_t num_preemptions_ = 0;
};

}  // namespace servesim::engine
