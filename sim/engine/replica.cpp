// Replica step loop; see replica.h.
#include "sim/engine/replica.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::engine {

Replica::Replica(const ReplicaConfig& config, const CostModel& cost_model, metrics::MetricsCollector& metrics,
                 cache::KvConnector* connector)
    : config_(config),
      fused_moe_jit_(config.fused_moe_jit),
      cost_model_(cost_model),
      local_spans_(cost_model.local_attention_spans()),
      metrics_(metrics),
      kv_cache_(std::make_unique<cache::KvCacheManager>(config.kv_cache)),
      offload_(config.offload ? std::make_unique<cache::CpuOffloadManager>(*config.offload) : nullptr),
      connector_(offload_ ? offload_.get() : connector),
      scheduler_(config.scheduler, *kv_cache_, connector_),
      own_hash_memo_(config.scheduler.block_size) {
    if (config.speculative) {
        SERVESIM_CHECK(config.scheduler.num_spec_tokens == config.speculative->num_speculative_tokens &&
                           config.scheduler.num_lookahead_tokens == config.speculative->num_lookahead_tokens(),
                       "scheduler speculative settings ({}, {}) differ from the speculative config's",
                       config.scheduler.num_spec_tokens, config.scheduler.num_lookahead_tokens);
        acceptance_.emplace(config.speculative->acceptance_per_position, config.seed,
                            static_cast<std::uint64_t>(config.index));
    }
}

void Replica::share_hash_memo(cache::FirstRunHashMemo& memo) {
    SERVESIM_CHECK(memo.block_size_tokens() == config_.scheduler.block_size,
                   "a hash memo at block size {} shared with a replica at {}", memo.block_size_tokens(),
                   config_.scheduler.block_size);
    hash_memo_ = &memo;
}

bool Replica::add_request(IncomingRequest in) {
    const std::int64_t prompt_tokens = core::total_tokens(in.prompt);
    metrics_.on_sent(in.arrival);
    if (refused_as_too_long(prompt_tokens, in.max_output_tokens, config_.scheduler.max_model_len)) {
        metrics_.on_rejected(in.arrival, metrics::RejectReason::kLongerThanMaxModelLen, prompt_tokens,
                             in.max_output_tokens);
        return false;
    }
    // Hashes are read by the prefix cache and by the CPU-offload connector only (vLLM EngineCore builds its block
    // hasher under the same condition).
    const bool hash_blocks = config_.kv_cache.enable_prefix_caching || connector_ != nullptr;
    Request fresh(in.id, std::move(in.prompt), in.max_output_tokens, in.answer_content, in.arrival,
                  config_.scheduler.block_size, hash_memo_, hash_blocks, in.hashed_prompt ? &*in.hashed_prompt : nullptr);
    fresh.turn = in.turn;
    fresh.client_delay = in.client_delay;
    fresh.client_deadline = in.client_deadline;
    if (config_.hold_token_gaps) {
        if (free_gap_slots_.empty()) {
            free_gap_slots_.push_back(static_cast<std::uint32_t>(gap_buffers_.size()));
            gap_buffers_.emplace_back();
        }
        fresh.gap_slot = free_gap_slots_.back();
        free_gap_slots_.pop_back();
    }
    Request* raw = nullptr;
    if (spare_request_nodes_.empty()) {
        auto request = std::make_unique<Request>(std::move(fresh));
        raw = request.get();
        requests_.emplace(core::to_int(in.id), std::move(request));
    } else {
        auto node = std::move(spare_request_nodes_.back());
        spare_request_nodes_.pop_back();
        node.key() = core::to_int(in.id);
        *node.mapped() = std::move(fresh);  // every field, as a new Request would have it
        raw = node.mapped().get();
        requests_.insert(std::move(node));
    }
    scheduler_.add_request(raw);
    return true;
}

BatchShape Replica::batch_shape(const StepPlan& plan, int block_size, bool mamba_align,
                                const LocalAttentionSpans& local, bool every_block, int kernel_chunk_tokens) {
    BatchShape s;
    s.num_local_spans = local.count;
    // The integer sums every sequence adds to are kept in locals and stored once: the shape is the caller's memory,
    // which the loads through sr.request could alias, so sums kept in it were a load and a store each per sequence
    // per step. (Integer sums: the order of additions cannot move a bit; the prefill work, a double, is summed in
    // plan order as before.)
    std::int64_t num_tokens = 0;
    std::int64_t num_decode_seqs = 0;
    std::int64_t decode_context_tokens = 0;
    std::int64_t num_sampled_seqs = 0;
    std::size_t first = 0;
    if (plan.running_all_decode && local.count == 0) {
        // The running requests' entries are all decodes whose sums the scheduler kept (StepPlan::running_all_decode;
        // without local spans a decode adds nothing else).
        first = plan.first_admitted;
        num_tokens = static_cast<std::int64_t>(first);
        num_decode_seqs = static_cast<std::int64_t>(first);
        decode_context_tokens = plan.running_decode_context_tokens;
        num_sampled_seqs = plan.running_num_sampled;
    }
    for (std::size_t i = first; i < plan.scheduled.size(); ++i) {
        const ScheduledRequest& sr = plan.scheduled[i];
        const std::int64_t n = sr.num_new_tokens;
        num_tokens += n;
        // A speculative verification (1 + drafts query tokens after the context) is a decode whose n queries share
        // one read of the context's KV: FlashAttention's query tile covers them (docs/SPECULATIVE-DECODING.md).
        const bool decode = (n == 1 || sr.num_draft_tokens > 0) && sr.num_computed_before >= sr.request->num_prompt_tokens;
        if (decode) {
            // vLLM's shared pool (align / all): a decode that reaches a block boundary moves the running state to
            // its next block, a copy (MambaManager allocates the new state block; the model runner copies into it).
            if ((mamba_align || every_block) &&
                (sr.num_computed_before + n) / block_size > sr.num_computed_before / block_size) {
                ++s.num_snapshots;
            }
            ++num_decode_seqs;
            decode_context_tokens += sr.num_computed_before + n;
            for (int i = 0; i < local.count; ++i) {
                s.local[i].decode_context_tokens += local.spans[i].decode_keys(sr.num_computed_before + n);
            }
            if (sr.num_draft_tokens > 0) {
                ++s.num_spec_seqs;
                s.num_draft_tokens += sr.num_draft_tokens;
                s.spec_context_tokens += sr.num_computed_before + n;
            }
        } else {
            ++s.num_prefill_seqs;
            s.num_prefill_tokens += n;
            s.prefill_attention_work += static_cast<double>(n) *
                                        (static_cast<double>(sr.num_computed_before) + static_cast<double>(n) / 2.0);
            s.prefill_max_context_tokens = std::max(s.prefill_max_context_tokens, sr.num_computed_before + n);
            s.num_gdn_chunks += (n + 63) / 64;
            for (int i = 0; i < local.count; ++i) {
                const LocalAttentionSpan& span = local.spans[i];
                LocalAttentionWork& w = s.local[i];
                w.prefill_attention_work += span.prefill_work(sr.num_computed_before, n);
                w.prefill_max_context_tokens =
                    std::max(w.prefill_max_context_tokens, span.prefill_span_tokens(sr.num_computed_before, n));
            }
            // align mode keeps the state where a prefill chunk ends on a block boundary: a copy into the next state
            // block. all mode keeps one at every boundary the chunk crosses; those inside the chunk cut the scan
            // (cache::extra_kernel_chunks, written out here to stay free of allocation).
            const std::int64_t end = sr.num_computed_before + n;
            if (every_block) {
                const auto chunks = [kernel_chunk_tokens](std::int64_t len) {
                    return (len + kernel_chunk_tokens - 1) / kernel_chunk_tokens;
                };
                std::int64_t start = sr.num_computed_before;
                std::int64_t pieces = 0;
                for (std::int64_t p = (sr.num_computed_before / block_size + 1) * block_size; p <= end;
                     p += block_size) {
                    ++s.num_snapshots;
                    if (p < end) {
                        pieces += chunks(p - start);
                        start = p;
                    }
                }
                s.num_snapshot_extra_chunks += pieces + chunks(end - start) - chunks(n);
            } else if (mamba_align && end % block_size == 0) {
                ++s.num_snapshots;
            }
        }
        // Logits for the sampled position and every verified draft (the rejection sampler reads them all).
        num_sampled_seqs += sr.samples_token ? 1 + sr.num_draft_tokens : 0;
    }
    s.num_tokens = num_tokens;
    s.num_seqs = static_cast<std::int64_t>(plan.scheduled.size());
    // Requests admitted from the waiting queue this step (new or resumed) enter the persistent batch.
    s.num_new_seqs =
        static_cast<std::int64_t>(plan.scheduled.size() - std::min(plan.first_admitted, plan.scheduled.size()));
    s.num_decode_seqs = num_decode_seqs;
    s.decode_context_tokens = decode_context_tokens;
    s.num_sampled_seqs = num_sampled_seqs;
    return s;
}

void Replica::mark_scheduled(const StepPlan& plan, core::SimTime now) {
    // Only the requests admitted from the waiting queue can be scheduled for the first time: the running ones came
    // through an earlier plan that this marked (StepPlan::first_admitted).
    for (std::size_t i = plan.first_admitted; i < plan.scheduled.size(); ++i) {
        Request* r = plan.scheduled[i].request;
        if (!r->scheduled_once) {
            r->scheduled_once = true;
            r->first_scheduled = now;  // vLLM's SCHEDULED event: when the scheduler picked it
            metrics_.on_first_scheduled(r->arrival);
        }
    }
    if (config_.check_invariants) {
        kv_cache_->check_invariants();
    }
}

std::optional<core::SimTime> Replica::try_start_step(core::SimTime now) {
    if (in_flight_ != kNoPlan) {
        return std::nullopt;
    }
    int index = kNoPlan;
    // Async scheduling: a step scheduled while the previous one ran has its host work overlapped with the GPU.
    const bool overlapped = next_ != kNoPlan;
    if (next_ != kNoPlan) {
        // Async scheduling: this step was scheduled while the previous one ran.
        index = next_;
        next_ = kNoPlan;
    } else {
        if (!scheduler_.has_work()) {
            return std::nullopt;
        }
        index = spare_plan();
        StepPlan& plan = plans_[static_cast<std::size_t>(index)];
        scheduler_.schedule(now, plan);
        while (plan.empty() && scheduler_.num_running() == 0 && scheduler_.num_waiting() > 0 &&
               !scheduler_.next_load_done() && delayed_free_.empty()) {
            // Nothing runs and the head still does not fit: it never will. Reject it rather than stall. (Blocks a
            // connector still holds for a transfer come back when it ends: then the head may fit.)
            Request* dropped = scheduler_.drop_unschedulable_head();
            // Read everything needed from the request before erasing its owning pointer.
            const core::RequestId dropped_id = dropped->id;
            SERVESIM_CHECK(!dropped->timed_out, "timed-out request {} still waiting", core::to_int(dropped_id));
            release_token_gaps(*dropped, /*measure=*/false);
            metrics_.on_rejected(dropped->arrival, metrics::RejectReason::kNeverFitsKvCache,
                                 dropped->num_prompt_tokens, 0);
            ++num_rejected_unfit_;
            rejected_.push_back(dropped_id);
            requests_.erase(core::to_int(dropped_id));
            scheduler_.schedule(now, plan);
        }
        mark_scheduled(plan, now);
        if (plan.empty()) {
            return std::nullopt;  // nothing fits now; a finish or an arrival will wake the replica
        }
    }
    const StepPlan& plan = plans_[static_cast<std::size_t>(index)];
    BatchShape shape = batch_shape(plan, config_.scheduler.block_size, config_.scheduler.mamba_align, local_spans_,
                                   config_.mamba_state_every_block, config_.snapshot_cost.kernel_chunk_tokens);
    shape.host_overlapped = overlapped;
    // The previous step's finished requests are freed and dropped from the persistent batch in this step's host
    // cycle (update_from_output, then _update_states of the next execute_model).
    shape.num_finished_seqs = std::exchange(num_finished_unbilled_, 0);
    StepCost cost = cost_model_.step_cost(shape);
    // Every scheme's state copies at one price (StateSnapshotCost): vLLM's shared pool's from the shape, a state
    // pool's (policies other than vllm) from its policy's snapshots and end-state buffers.
    cache::StateCopies copies = kv_cache_->take_state_copies_scheduled();
    copies += cache::StateCopies{shape.num_snapshots, shape.num_snapshot_extra_chunks};
    cost.snapshot_ms = config_.snapshot_cost.ms(copies);
    if (fused_moe_jit_) {
        cost.jit_ms = fused_moe_jit_->stall_ms(shape.num_tokens);
    }
    if (!cost.all_in_range()) {
        const std::string bad = cost.out_of_range_term();
        throw ConfigError(fmt::format("{}: a step of {} tokens ({} sequences) costs {}: NaN, infinite or beyond the "
                                      "simulated clock's range (a step must take 0 to {:.0e} s); check the cost "
                                      "model's coefficients",
                                      cost_model_.describe(), shape.num_tokens, shape.num_seqs, bad,
                                      kMaxDurationS));
    }
    total_cost_ += cost;
    metrics_.on_step(now, plan.num_scheduled_tokens, static_cast<std::int64_t>(scheduler_.num_waiting()),
                     kv_cache_->usage());
    ++num_steps_;
    in_flight_ = index;
    if (connector_ != nullptr) {
        connector_->on_step_start(now);
    }
    if (config_.async_scheduling && scheduler_.has_work()) {
        // EngineCore.step_with_batch_queue with two batches in flight: the next step is scheduled as soon as this
        // one is launched, with placeholders for the tokens it will sample; requests arriving from now on wait for
        // the step after it.
        const int following_index = spare_plan();
        StepPlan& following = plans_[static_cast<std::size_t>(following_index)];
        scheduler_.schedule(now, following);
        mark_scheduled(following, now);
        if (!following.empty()) {
            next_ = following_index;
        }
    }
    return now + cost.duration();
}

template <bool kHoldGaps>
void Replica::emit_tokens(const StepPlan& plan, core::SimTime now, std::vector<Request*>& finishing) {
    // The step's inter-token gaps, in plan order, go to the metrics as runs of equal gaps (on_token_gaps: the same
    // samples in the same order as one on_token_gap per token; nothing else in this loop reads or writes them).
    // kHoldGaps (a run with client time-outs): each request's gaps wait in its buffer until it finishes, and a
    // timed-out request's are not kept (Request::timed_out is read only then).
    const core::SimTime warmup_end = metrics_.warmup_end();  // MetricsCollector::measured, read once
    core::Duration run_gap{};
    std::int64_t run_count = 0;
    for (const auto& sr : plan.scheduled) {
        Request* r = sr.request;
        // A request preempted while this step ran (async scheduling) still gets the token the step computed.
        if (!sr.samples_token || r->status == RequestStatus::kFinished) {
            continue;
        }
        if (sr.num_draft_tokens > 0) {
            // Scheduler.update_from_output: the rejection sampler accepted `accepted` drafts; the rejected ones
            // leave the computed tokens and the placeholders (each only while positive, as vLLM guards them), and
            // the request gains accepted + 1 tokens (the bonus or corrected token), in one output chunk.
            const int accepted = acceptance_->sample(sr.num_draft_tokens);
            spec_stats_.observe(sr.num_draft_tokens, accepted);
            const std::int64_t rejected = sr.num_draft_tokens - accepted;
            if (r->num_computed_tokens > 0) {
                r->num_computed_tokens = std::max<std::int64_t>(0, r->num_computed_tokens - rejected);
            }
            if (r->num_output_placeholders > 0) {
                r->num_output_placeholders = std::max<std::int64_t>(0, r->num_output_placeholders - rejected);
            }
            // check_stop ends the request at max_tokens: tokens past it are dropped.
            for (int i = 0; i < accepted && !r->is_finished(); ++i) {
                r->append_output_token();
            }
        }
        if (!r->is_finished()) {
            r->append_output_token();
        }
        if (r->num_output_tokens == 1) {
            r->first_token = now;
        } else {
            const core::Duration gap = now - r->last_token;
            if constexpr (kHoldGaps) {
                if (r->arrival >= warmup_end && !r->timed_out) {
                    gap_buffers_[r->gap_slot].push_back(gap);
                }
            } else if (r->arrival >= warmup_end) {
                if (gap != run_gap) {
                    metrics_.on_token_gaps(run_gap, run_count);
                    run_gap = gap;
                    run_count = 0;
                }
                ++run_count;
            }
            r->max_token_gap = std::max(r->max_token_gap, gap);
        }
        r->last_token = now;
        if (r->is_finished()) {
            finishing.push_back(r);
        }
    }
    metrics_.on_token_gaps(run_gap, run_count);
}

const std::vector<core::RequestId>& Replica::end_step(core::SimTime step_end, frontend::ApiServer* api_server) {
    SERVESIM_CHECK(in_flight_ != kNoPlan, "end_step without a step in flight at {} ns", step_end.ns());
    // The plan stays where it is (nothing in this function schedules) and is the spare once the step is over.
    const StepPlan& plan = plans_[static_cast<std::size_t>(in_flight_)];
    // `now` below is when the client has this step's tokens: the step's end, or later through the request path
    // (one output message, one chunk per sampled token; docs/REQUEST-PATH.md).
    core::SimTime now = step_end;
    if (api_server != nullptr) {
        std::int64_t chunks = 0;
        for (const auto& sr : plan.scheduled) {
            chunks += (sr.samples_token && sr.request->status != RequestStatus::kFinished) ? 1 : 0;
        }
        if (chunks > 0) {
            now = api_server->stream(step_end, chunks);
        }
    }
    last_stream_time_ = now;
    in_flight_ = kNoPlan;
    // Requests that finished while a step scheduled after theirs was already in hand: that step has ended now.
    for (auto& node : finished_in_next_plan_) {
        spare_request_nodes_.push_back(std::move(node));
    }
    finished_in_next_plan_.clear();
    if (connector_ != nullptr) {
        connector_->on_step_end();
    }
    std::vector<core::RequestId>& finished = finished_;
    finished.clear();
    // Two passes: the tokens first, then the requests that finished, in plan order. Nothing in the token pass reads
    // what a finish changes (the scheduler's lists and the KV cache, the finish metrics, the turn handoff, the
    // request map), and a request has one entry per plan, so the effects are those of one pass; the token pass then
    // makes no call but on a new gap run or a completed block, and keeps its state in registers.
    timed_out_at_client_.clear();
    std::vector<Request*>& finishing = finishing_;
    finishing.clear();
    if (config_.hold_token_gaps) {
        emit_tokens<true>(plan, now, finishing);
    } else {
        emit_tokens<false>(plan, now, finishing);
    }
    for (Request* r : finishing) {
        const bool delay_free = scheduler_.finish_request(r);
        if (!r->timed_out && r->client_deadline && now + r->client_delay > *r->client_deadline) {
            // Finished in the engine before the deadline, but its last chunk reaches the client after it: the
            // client's total time-out (aiohttp's ClientTimeout(total=...)) fired first. Not measured; the engine
            // has nothing left to abort.
            r->timed_out = true;
            metrics_.on_timed_out(r->arrival, /*scheduled=*/true);
            release_token_gaps(*r, /*measure=*/false);
            timed_out_at_client_.push_back(ClientTimeOut{r->id, *r->client_deadline});
        } else if (r->timed_out) {
            // Its last token came after its client gave up, before the abort reached the engine: the engine
            // finishes it as usual; nothing is measured and nobody is told (the client was told at its time-out).
            pending_aborts_.erase(std::find(pending_aborts_.begin(), pending_aborts_.end(), r));
        } else {
            finished.push_back(r->id);
        }
        metrics::MetricsCollector::FinishedRequest f;
        f.arrival = r->arrival;
        f.first_scheduled = r->first_scheduled;
        f.first_token = r->first_token + r->client_delay;
        f.finish = now + r->client_delay;
        f.prompt_tokens = r->num_prompt_tokens;
        f.output_tokens = r->num_output_tokens;
        f.cached_prompt_tokens = r->num_cached_prompt_tokens;
        f.max_token_gap = r->max_token_gap;
        f.num_preemptions = r->num_preemptions;
        f.replica = config_.index;
        f.turn = r->turn;
        if (!r->timed_out) {
            // Held gaps (time-outs, or --save-detailed's per-request ITLs) go with the request, then to the pooled
            // figures: each stream (the finish figures, the pooled ITLs) keeps its order.
            if (config_.hold_token_gaps && r->gap_slot != Request::kNoGapSlot) {
                f.token_gaps = &gap_buffers_[r->gap_slot];
            }
            metrics_.on_finished(f);
            if (config_.hold_token_gaps) {
                release_token_gaps(*r, /*measure=*/true);
            }
        }
        const auto owned = requests_.find(core::to_int(r->id));
        if (delay_free) {  // the connector sends its KV first (finished_sending)
            delayed_free_.emplace(owned->first, std::move(owned->second));
        } else if (r->hash_blocks && !r->content_runs_.empty()) {
            // Its hashes start its dialogue's next turn, whose prompt opens with this content (a memo of the
            // hash function, turn_hash_handoff.h); nothing reads them here after finish_request.
            hash_memo_->turns().give(r->take_content(), std::move(r->block_hashes), r->hasher.cursor());
        }
        if (delay_free) {
            requests_.erase(owned);
        } else if (config_.speculative && next_ != kNoPlan && in_plan(plans_[static_cast<std::size_t>(next_)], r)) {
            // Async scheduling with speculative decoding: the step scheduled while this one ran holds the request
            // too (its drafts could finish it here, which the scheduler cannot know). vLLM runs that step and drops
            // the finished request's output; its Request stays as it is until that step has ended.
            finished_in_next_plan_.push_back(requests_.extract(owned));
        } else {
            spare_request_nodes_.push_back(requests_.extract(owned));
        }
    }
    num_finished_unbilled_ += static_cast<std::int64_t>(finishing.size());
    if (!pending_aborts_.empty() || !retiring_.empty()) {
        apply_aborts();
    }
    if (config_.check_invariants) {
        kv_cache_->check_invariants();
    }
    return finished;
}

bool Replica::time_out(core::RequestId id) {
    const auto it = requests_.find(core::to_int(id));
    if (it == requests_.end() || it->second->timed_out) {
        return false;
    }
    Request* r = it->second.get();
    SERVESIM_CHECK(config_.hold_token_gaps, "request {} timed out in a replica that does not hold token gaps",
                   core::to_int(id));
    SERVESIM_CHECK(r->client_delay.ns() == 0,
                   "request {} timed out with a delayed stream (client_delay): not modelled", core::to_int(id));
    r->timed_out = true;
    metrics_.on_timed_out(r->arrival, r->scheduled_once);
    release_token_gaps(*r, /*measure=*/false);
    pending_aborts_.push_back(r);
    if (!step_in_flight()) {
        apply_aborts();  // an idle engine core reads the abort at once
        if (config_.check_invariants) {
            kv_cache_->check_invariants();
        }
    }
    return true;
}

void Replica::apply_aborts() {
    for (auto& node : retiring_) {
        spare_request_nodes_.push_back(std::move(node));
    }
    retiring_.clear();
    for (Request* r : pending_aborts_) {
        scheduler_.abort_request(r);
        retiring_.push_back(requests_.extract(core::to_int(r->id)));
    }
    pending_aborts_.clear();
}

void Replica::release_token_gaps(Request& r, bool measure) {
    if (r.gap_slot == Request::kNoGapSlot) {
        return;
    }
    std::vector<core::Duration>& gaps = gap_buffers_[r.gap_slot];
    if (measure) {
        // The same samples in the same order as on_token_gap per gap (MetricsCollector::on_token_gaps).
        std::size_t i = 0;
        while (i < gaps.size()) {
            std::size_t j = i + 1;
            while (j < gaps.size() && gaps[j] == gaps[i]) {
                ++j;
            }
            metrics_.on_token_gaps(gaps[i], static_cast<std::int64_t>(j - i));
            i = j;
        }
    }
    gaps.clear();
    free_gap_slots_.push_back(r.gap_slot);
    r.gap_slot = Request::kNoGapSlot;
}

bool Replica::finished_sending(core::RequestId id) {
    const auto it = delayed_free_.find(core::to_int(id));
    if (it == delayed_free_.end()) {
        return false;
    }
    scheduler_.free_delayed(it->second.get());
    delayed_free_.erase(it);
    return true;
}

}  // namespace servesim::engine
