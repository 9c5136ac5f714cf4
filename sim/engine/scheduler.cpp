// vLLM v1 Scheduler.schedule, step by step (docs/VLLM-RULES.md §4.1–§4.3, §2.5 for the Mamba split).
#include "sim/engine/scheduler.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::engine {

Scheduler::Scheduler(const SchedulerConfig& config, cache::KvCacheManager& kv_cache,
                     cache::KvConnector* offload)
    : config_(config), kv_cache_(kv_cache), offload_(offload) {}

std::optional<core::SimTime> Scheduler::next_load_done() const {
    std::optional<core::SimTime> t;
    if (!pending_loads_.empty()) {
        t = pending_loads_.front().looked_up;  // its step starts at the next schedule(): wake at once
    }
    for (const Request* r : loading_) {
        if (!t || r->load_done < *t) {
            t = r->load_done;
        }
    }
    return t;
}

bool Scheduler::retime_load(core::RequestId id, core::SimTime transfer_end) {
    for (auto& p : pending_loads_) {
        if (p.request->id == id) {
            p.duration = transfer_end - p.looked_up;  // the transfer started at the lookup
            return false;                             // a pending load wakes the replica at once anyway
        }
    }
    for (Request* r : loading_) {
        if (r->id == id) {
            const core::SimTime done = transfer_end + r->load_lag;
            const bool earlier = done < r->load_done;
            r->load_done = done;
            return earlier;
        }
    }
    return false;
}

void Scheduler::finish_loads(core::SimTime now) {
    std::vector<Request*> ready;
    std::vector<Request*> still;
    for (Request* r : loading_) {
        (r->load_done <= now ? ready : still).push_back(r);
    }
    loading_ = std::move(still);
    // The load rides in the metadata of the step its lookup scheduled (build_connector_meta) and is reported in
    // that step's or a later step's kv_connector_output (OffloadingConnectorWorker.get_finished), then promoted at
    // the next schedule(). Without async scheduling that step starts at the lookup, and the first schedule() at
    // or after load end promotes it (≥ 1 step later). With async scheduling (EngineCore.step_with_batch_queue) the
    // step scheduled at the lookup starts at the next schedule() call — the one scheduling the step after it —
    // and a step's output is processed only after the next step was scheduled, so the load's clock starts there
    // and it is promoted at a later schedule() (≥ 2 steps after the lookup's step; vllm/v1/core/sched/scheduler.py
    // _update_waiting_for_remote_kv, _update_from_kv_xfer_finished).
    for (const auto& p : pending_loads_) {
        p.request->load_done = now + p.duration;
        p.request->load_lag = now - p.looked_up;
        loading_.push_back(p.request);
    }
    pending_loads_.clear();
    for (auto it = ready.rbegin(); it != ready.rend(); ++it) {
        Request* r = *it;
        r->num_computed_tokens = r->num_local_hit_tokens + r->num_external_cached_tokens;
        if (r->num_computed_tokens == r->num_tokens()) {
            --r->num_computed_tokens;  // the last token is recomputed for its logits
        }
        kv_cache_.cache_blocks(cache_view(*r), r->num_computed_tokens);
        r->status = RequestStatus::kWaiting;
        waiting_.push_front(r);  // served first next (vLLM: skipped_waiting before waiting)
    }
}

void Scheduler::store_to_offload(const StepPlan& plan) {
    const std::int64_t b = config_.block_size;
    const cache::CpuOffloadConfig& oc = offload_->config();
    const bool prompt_only = oc.offload_prompt_only;
    for (const auto& s : plan.scheduled) {
        Request* r = s.request;
        std::int64_t computed = std::min(r->num_computed_tokens, r->num_tokens());
        if (prompt_only) {
            // _build_store_jobs (PR #43797): num_offloadable_tokens = min(·, num_prompt_tokens).
            computed = std::min(computed, r->num_prompt_tokens);
        }
        // Most entries (decode steps inside a block) store nothing: computed lies strictly inside the block after
        // those stored, so no block became full past them (end_block <= stored) and the chunk did not end on a
        // boundary (no snapshot; in `all` mode the snapshots are those blocks, none). A test without the divisions.
        if (const std::int64_t stored_tokens = r->num_offload_stored_blocks * b;
            computed > stored_tokens && computed < stored_tokens + b) {
            continue;
        }
        const std::int64_t end_block = std::min<std::int64_t>(computed / b, static_cast<std::int64_t>(r->block_hashes.size()));
        // State snapshots: `all` mode has one state block per block boundary of the chunk, all stored; otherwise
        // (align) a snapshot exists where the chunk ended exactly on a block boundary (§2.5).
        std::int64_t snapshot_first = -1;
        std::int64_t snapshot_end = -1;
        if (oc.state_at_every_block) {
            snapshot_first = r->num_offload_stored_blocks;
            snapshot_end = end_block;
        } else if (computed % b == 0 && end_block > 0) {
            snapshot_first = end_block - 1;
            snapshot_end = end_block;
        }
        if (end_block > r->num_offload_stored_blocks || snapshot_end > snapshot_first) {
            const std::int64_t hit_blocks = (r->num_cached_prompt_tokens + r->num_external_cached_tokens) / b;
            offload_->store_request(r->id, r->block_hashes, r->num_offload_stored_blocks, end_block, snapshot_first,
                                    snapshot_end, hit_blocks);
            r->num_offload_stored_blocks = std::max(r->num_offload_stored_blocks, end_block);
        }
    }
}

void Scheduler::add_request(Request* request) {
    request->status = RequestStatus::kWaiting;
    waiting_.push_back(request);
}

cache::CacheRequest Scheduler::cache_view(const Request& r) const {
    cache::CacheRequest v;
    v.id = r.id;
    v.block_hashes = &r.block_hashes;
    v.num_tokens = r.num_tokens();
    v.num_computed_tokens = r.num_computed_tokens;
    v.preempted_before = r.num_preemptions > 0;
    v.num_prompt_tokens = r.num_prompt_tokens;
    v.kv_slot_hint = &r.kv_slot_hint;
    v.kv_summary = &r.kv_summary;
    v.shared_prefix_boundary = r.shared_prefix_boundary;
    v.content = &r.content();  // token-granular hybrid state policies (docs/HYBRID-POLICIES.md)
    return v;
}

std::int64_t Scheduler::mamba_aligned_split(const Request& r, std::int64_t computed, std::int64_t n,
                                            std::int64_t num_uncached_common_prefix_tokens) const {
    // Scheduler._mamba_block_aligned_split: while prefilling, chunks end on block boundaries, and the chunk that
    // crosses last = num_tokens − num_tokens % B stops exactly there, so a state snapshot exists at floor(P/B)·B;
    // with EAGLE/MTP (use_eagle) last is one block earlier, max(last − B, 0).
    const std::int64_t num_tokens = r.num_tokens();
    if (!config_.mamba_align || computed >= num_tokens - 1) {
        return n;
    }
    const std::int64_t b = config_.block_size;
    const std::int64_t last_aligned = num_tokens - num_tokens % b;
    const std::int64_t last = config_.use_eagle ? std::max<std::int64_t>(last_aligned - b, 0) : last_aligned;
    if (computed + n < last) {
        n = n / b * b;
    } else if (computed < last && last < computed + n) {
        n = last - computed;
    }
    const core::VllmVersion& v = config_.vllm_version;
    if (!v.marconi_shared_prefix_admission()) {
        return n;
    }
    if (v.shared_prefix_boundary_on_request()) {
        // PR #47782: any prefill chunk that would cross the junction stops on it.
        const std::int64_t junction = r.shared_prefix_boundary;
        if (junction > 0 && computed < junction && junction < computed + n) {
            n = junction - computed;
        }
    } else if (num_uncached_common_prefix_tokens >= b && n > num_uncached_common_prefix_tokens) {
        // PR #37898: the first chunk of a waiting request is cut to the uncached common prefix, block-aligned.
        n = num_uncached_common_prefix_tokens / b * b;
    }
    return n;
}

void Scheduler::preempt(Request* victim) {
    // _preempt_request: free every block (reverse order, cached ones stay evictable), recompute from 0 later,
    // prepended to waiting.
    kv_cache_.free(cache_view(*victim));
    victim->num_computed_tokens = 0;
    victim->num_spec_tokens = 0;  // its drafts are dropped with its KV; it re-prefills before drafting again
    victim->status = RequestStatus::kPreempted;
    ++victim->num_preemptions;
    ++num_preemptions_;
    waiting_.push_front(victim);
}

Scheduler::RunningAllocation Scheduler::allocate_or_preempt(Request* r, std::int64_t n, StepPlan& plan) {
    RunningAllocation a;
    while (true) {
        if (kv_cache_.allocate_slots(cache_view(*r), n, cache::CacheHit{}, config_.num_lookahead_tokens)) {
            return a;
        }
        // Preempt the last running request (FCFS: self.running.pop()).
        Request* victim = running_.back();
        running_.pop_back();
        for (auto it = plan.scheduled.begin(); it != plan.scheduled.end(); ++it) {
            if (it->request == victim) {  // already scheduled this step: its tokens return to the budget
                a.returned_tokens += it->num_new_tokens;
                plan.num_scheduled_tokens -= it->num_new_tokens;
                // Undo its _update_after_schedule (done as each running request is scheduled, in schedule_running).
                victim->num_computed_tokens -= it->num_new_tokens;
                if (it->samples_token) {
                    victim->num_output_placeholders -= 1 + it->num_draft_tokens;
                }
                plan.scheduled.erase(it);
                plan.running_all_decode = false;  // the running sums no longer match the entries
                break;
            }
        }
        preempt(victim);
        plan.preempted.push_back(victim);
        if (victim == r) {
            a.preempted_self = true;
            return a;
        }
    }
}

std::int64_t Scheduler::schedule_running(StepPlan& plan, std::int64_t budget) {
    // Without a long-prefill threshold and Mamba alignment (the usual settings) the per-request steps that read them
    // are compiled out: this loop runs once per running request per step.
    if (config_.long_prefill_token_threshold <= 0 && !config_.mamba_align) {
        return schedule_running_as<true>(plan, budget);
    }
    return schedule_running_as<false>(plan, budget);
}

template <bool kPlainSettings>
std::int64_t Scheduler::schedule_running_as(StepPlan& plan, std::int64_t budget) {
    // The settings read per request are copied first: the loop's stores to requests could otherwise alias them. The
    // allocation (and preemption) is out of line: a running request needs it once every block_size decode steps
    // (KvRunningSummary answers the others). The running list, the plan's token count and the next entry's slot are
    // kept in locals, refreshed only after allocate_or_preempt, the one call that changes them: every store through
    // a pointer (a request's counts, an entry) would otherwise force their reload. Every running request gets at
    // most one entry, so the slots are reserved once and the entries are written through that pointer
    // (ScheduledList) rather than push_back, which tests the capacity each time.
    const std::int64_t long_prefill_token_threshold = config_.long_prefill_token_threshold;
    const std::int64_t max_context_tokens = config_.max_model_len - 1;
    const std::int64_t num_spec_tokens = config_.num_spec_tokens;
    const std::int64_t num_lookahead_tokens = config_.num_lookahead_tokens;
    bool all_decode = true;
    std::int64_t decode_context_tokens = 0;
    std::int64_t num_sampled = 0;
    // Every entry moves n tokens from the budget to the plan, and a preemption in allocate_or_preempt moves its
    // victim's tokens back: budget + plan.num_scheduled_tokens stays this sum, so the plan's count is derived from
    // the budget where it is read (one register less in the loop).
    const std::int64_t budget_and_scheduled = budget + plan.num_scheduled_tokens;
    ScheduledList& scheduled = plan.scheduled;
    scheduled.reserve(scheduled.size() + running_.size());
    ScheduledRequest* out = scheduled.end();
    Request* const* running = running_.data();
    std::size_t num_running = running_.size();
    std::size_t index = 0;
    while (index < num_running && budget > 0) {
        Request* r = running[index];
        const std::int64_t placeholders = r->num_output_placeholders;
        const std::int64_t computed = r->num_computed_tokens;
        const std::int64_t num_tokens = r->num_tokens();
        if (placeholders > 0 && r->num_output_tokens + 1 >= r->max_output_tokens) {
            // Async scheduling: the token in flight is the request's last (max_tokens), so no extra step. vLLM's
            // test (schedule(): num_computed_tokens + 2 − num_output_placeholders ≥ prompt + max_tokens) counts the
            // one token a step in flight surely yields, whatever becomes of its drafts.
            ++index;
            continue;
        }
        // With speculative decoding the request's drafts are scheduled after its last token (vLLM
        // num_tokens_with_spec): 1 + k tokens for a decode; the budget and max_model_len cut the drafts first.
        const std::int64_t end_of_sequence = num_tokens + placeholders;
        std::int64_t n = end_of_sequence + r->num_spec_tokens - computed;
        if (!kPlainSettings && long_prefill_token_threshold > 0) {
            n = std::min(n, long_prefill_token_threshold);
        }
        n = std::min(n, budget);
        n = std::min(n, max_context_tokens - computed);
        if (!kPlainSettings && config_.mamba_align) {  // (the split returns n unchanged otherwise)
            n = mamba_aligned_split(*r, computed, n);
        }
        if (n <= 0) {
            ++index;
            continue;
        }
        // (With lookahead slots the shortcut is asked for n + lookahead slots: stricter, never a wrong "nothing".)
        if (!r->kv_summary.running_step_changes_nothing(computed, n + num_lookahead_tokens, num_tokens)) {
            // allocate_or_preempt reads and edits the plan (a preempted victim's entry is erased) and running_.
            scheduled.set_size_within_capacity(static_cast<std::size_t>(out - scheduled.begin()));
            plan.num_scheduled_tokens = budget_and_scheduled - budget;
            const RunningAllocation a = allocate_or_preempt(r, n, plan);
            out = scheduled.end();
            running = running_.data();
            num_running = running_.size();
            budget += a.returned_tokens;  // = budget_and_scheduled - plan.num_scheduled_tokens
            if (a.preempted_self) {
                break;
            }
        }
        // (Preempting others changed none of r's counts.)
        const bool samples_token = computed + n >= end_of_sequence;
        // vLLM trims spec_token_ids to the drafts that fit (num_scheduled_spec_tokens).
        const int drafts = static_cast<int>(std::max<std::int64_t>(0, computed + n - end_of_sequence));
        *out++ = ScheduledRequest{r, n, computed, samples_token, drafts};
        budget -= n;
        // batch_shape's decode test and sums for this entry (StepPlan::running_all_decode).
        if (n == 1 && computed >= r->num_prompt_tokens) {
            decode_context_tokens += computed + 1;
            num_sampled += samples_token ? 1 : 0;
        } else {
            all_decode = false;
        }
        // _update_after_schedule for this request now rather than in a second pass over the plan: nothing later in
        // this schedule() reads a running request's own counts, except a preemption of it, which undoes this.
        r->num_computed_tokens = computed + n;
        if (samples_token) {
            // AsyncScheduler._update_after_schedule: 1 + drafts placeholders, and k placeholder drafts for the
            // next step (the drafter proposes k after this step's forward).
            r->num_output_placeholders = placeholders + 1 + drafts;
            r->num_spec_tokens = num_spec_tokens;
        }
        ++index;
    }
    scheduled.set_size_within_capacity(static_cast<std::size_t>(out - scheduled.begin()));
    plan.num_scheduled_tokens = budget_and_scheduled - budget;
    // (A preemption above may have cleared plan.running_all_decode already: it stays cleared.)
    plan.running_all_decode = plan.running_all_decode && all_decode;
    plan.running_decode_context_tokens = decode_context_tokens;
    plan.running_num_sampled = num_sampled;
    return budget;
}

StepPlan Scheduler::schedule(core::SimTime now) {
    StepPlan plan;
    schedule(now, plan);
    return plan;
}

void Scheduler::schedule(core::SimTime now, StepPlan& plan) {
    plan.scheduled.clear();
    plan.preempted.clear();
    plan.num_scheduled_tokens = 0;
    plan.first_admitted = 0;
    plan.running_all_decode = true;  // until schedule_running finds otherwise
    plan.running_decode_context_tokens = 0;
    plan.running_num_sampled = 0;
    kv_cache_.begin_step();
    if (!loading_.empty() || !pending_loads_.empty()) {
        finish_loads(now);
    }
    std::int64_t budget = config_.max_num_batched_tokens;

    // A) running requests, in admission order. Unscheduled ones simply stay in running_.
    budget = schedule_running(plan, budget);

    // B) waiting requests, only if nothing was preempted this step.
    plan.first_admitted = plan.scheduled.size();
    if (plan.preempted.empty()) {
        while (!waiting_.empty() && budget > 0) {
            if (static_cast<std::int64_t>(running_.size()) >= config_.max_num_seqs) {
                break;
            }
            Request* r = waiting_.front();
            // One hit reused for every admission (its group lists keep their capacity); reset as a default hit.
            cache::CacheHit& hit = hit_scratch_;
            if (r->num_computed_tokens == 0) {
                kv_cache_.get_computed_blocks(cache_view(*r), hit);  // counted here, before the allocation check
                // PR #47782: the junction is kept on the request (hit + the uncached common prefix, block-aligned).
                const std::int64_t u = hit.num_uncached_common_prefix_tokens;
                r->shared_prefix_boundary =
                    config_.vllm_version.shared_prefix_boundary_on_request() && u >= config_.block_size
                        ? hit.num_tokens + u / config_.block_size * config_.block_size
                        : 0;
            } else {
                cache::reset_hit(hit, hit.blocks_per_group.size());
            }
            // Connector lookup after the local one (OffloadingConnectorScheduler.get_num_new_matched_tokens).
            std::int64_t external = 0;
            if (offload_ != nullptr && r->num_computed_tokens == 0) {
                external = offload_->lookup_request(r->id, r->block_hashes, hit.num_tokens, r->num_tokens());
            }
            if (external > 0) {
                // Blocks for the external tokens are allocated now and cached only once loaded; the request waits
                // (WAITING_FOR_REMOTE_KVS) at least one step and uses no token budget meanwhile.
                if (!kv_cache_.allocate_slots(cache_view(*r), external, hit, 0, config_.scheduler_reserve_full_isl,
                                              /*delay_cache_blocks=*/true)) {
                    break;
                }
                waiting_.pop_front();
                if (r->num_preemptions == 0) {
                    offload_->record(r->num_tokens(), hit.num_tokens, external);
                }
                if (r->num_output_tokens == 0) {
                    r->num_cached_prompt_tokens = hit.num_tokens;
                }
                r->num_local_hit_tokens = hit.num_tokens;
                r->num_external_cached_tokens = external;
                r->num_computed_tokens = hit.num_tokens;
                r->num_offload_stored_blocks = (hit.num_tokens + external) / config_.block_size;
                r->status = RequestStatus::kWaitingForRemoteKvs;
                const auto load = offload_->start_load_request(r->id, external, now);
                if (config_.async_scheduling) {
                    pending_loads_.push_back(PendingLoad{r, now, load});
                } else {
                    r->load_done = now + load;
                    r->load_lag = core::Duration::from_ns(0);
                    loading_.push_back(r);
                }
                continue;
            }
            std::int64_t n = r->num_tokens() - r->num_computed_tokens - hit.num_tokens;
            if (config_.long_prefill_token_threshold > 0) {
                n = std::min(n, config_.long_prefill_token_threshold);
            }
            if (!config_.enable_chunked_prefill && n > budget) {
                break;
            }
            n = std::min(n, budget);
            n = mamba_aligned_split(*r, r->num_computed_tokens + hit.num_tokens, n,
                                    hit.num_uncached_common_prefix_tokens);
            if (n <= 0) {
                break;
            }
            // vLLM: no lookahead slots for a fresh prefill (num_computed_tokens == 0), lookahead otherwise.
            const std::int64_t lookahead = r->num_computed_tokens == 0 ? 0 : config_.num_lookahead_tokens;
            if (!kv_cache_.allocate_slots(cache_view(*r), n, hit, lookahead, config_.scheduler_reserve_full_isl)) {
                break;
            }
            waiting_.pop_front();
            const bool resumed_load = r->num_external_cached_tokens > 0 && r->num_computed_tokens > 0;
            if (offload_ != nullptr && !resumed_load && r->num_preemptions == 0) {
                offload_->record(r->num_tokens(), hit.num_tokens, 0);
            }
            if (r->num_output_tokens == 0 && !resumed_load) {
                r->num_cached_prompt_tokens = hit.num_tokens;  // last lookup before the first token
            }
            r->num_computed_tokens += hit.num_tokens;
            r->status = RequestStatus::kRunning;
            running_.push_back(r);
            plan.scheduled.push_back(
                ScheduledRequest{r, n, r->num_computed_tokens, r->num_computed_tokens + n == r->num_tokens()});
            plan.num_scheduled_tokens += n;
            budget -= n;
        }
    }

    // _update_after_schedule: the chunks are in flight; a chunk that reaches the end of the sequence will sample a
    // token, which is a placeholder until the step's output comes back (AsyncScheduler._update_after_schedule).
    // (The running requests' entries, before first_admitted, were updated as they were scheduled.)
    for (std::size_t i = plan.first_admitted; i < plan.scheduled.size(); ++i) {
        ScheduledRequest& s = plan.scheduled[i];
        s.request->num_computed_tokens += s.num_new_tokens;
        if (s.samples_token) {
            ++s.request->num_output_placeholders;
            s.request->num_spec_tokens = config_.num_spec_tokens;  // drafted after the forward, as for a decode
        }
    }
    if (offload_ != nullptr) {
        store_to_offload(plan);
    }
}

Request* Scheduler::drop_unschedulable_head() {
    SERVESIM_CHECK(running_.empty() && !waiting_.empty(), "drop_unschedulable_head with {} running, {} waiting",
                   running_.size(), waiting_.size());
    Request* r = waiting_.front();
    waiting_.pop_front();
    kv_cache_.free(cache_view(*r));
    r->status = RequestStatus::kFinished;
    return r;
}

bool Scheduler::finish_request(Request* request) {
    // _free_request: the connector may keep the blocks for a transfer (delay_free_blocks); free_delayed frees them.
    const bool delay_free = offload_ != nullptr && offload_->request_finished(request->id);
    if (!delay_free) {
        kv_cache_.free(cache_view(*request));
    }
    const auto it = std::find(running_.begin(), running_.end(), request);
    if (it != running_.end()) {
        running_.erase(it);
    } else {
        // Async scheduling only: preempted while its last token was in flight; it finishes from the waiting queue.
        const auto w = std::find(waiting_.begin(), waiting_.end(), request);
        SERVESIM_CHECK(w != waiting_.end(), "finished request {} is neither running nor waiting",
                       core::to_int(request->id));
        waiting_.erase(w);
    }
    request->status = RequestStatus::kFinished;
    return delay_free;
}

void Scheduler::abort_request(Request* request) {
    if (request->status == RequestStatus::kWaitingForRemoteKvs) {
        // Loading from the connector (in pending_loads_ or loading_): it leaves at once and its blocks, allocated
        // for the load but not yet cached (delay_cache_blocks), are freed; the transfer runs on, its end unread
        // (vLLM ignores a finished_recving of a request it no longer has).
        const auto p = std::find_if(pending_loads_.begin(), pending_loads_.end(),
                                    [&](const PendingLoad& l) { return l.request == request; });
        if (p != pending_loads_.end()) {
            pending_loads_.erase(p);
        } else {
            const auto l = std::find(loading_.begin(), loading_.end(), request);
            SERVESIM_CHECK(l != loading_.end(), "request {} waits for a load it does not have",
                           core::to_int(request->id));
            loading_.erase(l);
        }
        if (offload_ != nullptr) {
            SERVESIM_CHECK(!offload_->request_finished(request->id),
                           "request {} aborted while its connector holds its blocks (not modelled)",
                           core::to_int(request->id));
        }
        kv_cache_.free(cache_view(*request));
        request->status = RequestStatus::kFinished;
        return;
    }
    // finish_requests: out of running, else out of waiting; then _free_request, as finish_request does.
    const bool delay_free = finish_request(request);
    SERVESIM_CHECK(!delay_free, "request {} aborted while its connector holds its blocks (not modelled)",
                   core::to_int(request->id));
}

void Scheduler::free_delayed(Request* request) {
    // _update_from_kv_xfer_finished: finished_sending → _free_blocks.
    kv_cache_.free(cache_view(*request));
}

}  // namespace servesim::engine
