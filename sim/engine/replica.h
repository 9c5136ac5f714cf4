// Replica: one vLLM engine (one GPU's worth of model, one KV cache, one scheduler) stepping through time. A step is
// four phases — schedule → cost → advance → emit (BLIS Step, vLLM EngineCore.step) — with at most one step running.
// With async scheduling (vLLM's default, docs/VLLM-RULES.md §4.5; EngineCore.step_with_batch_queue, two batches
// in flight) the next step is scheduled when a step starts, using output placeholders, so steps run back to back
// and a request that arrives during a step joins the one after next. A token streams at the end of its step.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/fused_moe_jit.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"
#include "sim/engine/speculative.h"
#include "sim/engine/state_snapshot_cost.h"
#include "sim/frontend/api_server.h"
#include "sim/metrics/metrics.h"

namespace servesim::engine {

struct ReplicaConfig {
    SchedulerConfig scheduler;
    cache::KvCacheConfig kv_cache;
    std::optional<cache::CpuOffloadConfig> offload;  // host KV tier (--kv-offloading-size); none when unset
    bool check_invariants = false;  // re-derive the block accounting after every step (tests, debug)
    // vLLM's async scheduling (on by default in vllm serve, §4.5): step t+1 is scheduled when step t starts.
    bool async_scheduling = false;
    int index = 0;  // this replica's position in the cluster (0-based), recorded with each finished request
    // The price of the state copies prefix caching makes (vLLM's align / all modes and the state-pool policies
    // alike), added to every step's snapshot term; zero for a model without recurrent state or caching off.
    StateSnapshotCost snapshot_cost;
    // vLLM's mamba_cache_mode all with prefix caching on: a state at every block boundary a step crosses
    // (scheduler.mamba_align is the align mode's flag).
    bool mamba_state_every_block = false;
    // Clients may time requests out (workload `request_timeout`): a request's token gaps are held until it finishes
    // and dropped if its client gives up first, as vllm bench serve pools only successful requests' ITLs. Off, each
    // step's gaps go to the metrics at once (no per-request storage). Also on when the run keeps each request's
    // ITLs (SimulationConfig::keep_request_itls, --save-detailed): the held gaps go with the finished request.
    bool hold_token_gaps = false;
    // Speculative decoding (sim/engine/speculative.h); unset = off. Its acceptance draws use `seed` (the run's) on
    // the stream ("speculative.acceptance", index). scheduler.num_spec_tokens / num_lookahead_tokens must match it.
    std::optional<SpeculativeConfig> speculative;
    std::uint64_t seed = 1;
    // The Triton compiles of vLLM's fused-MoE kernel an eager step may wait for (sim/engine/fused_moe_jit.h): set
    // for a model whose routed experts run that kernel; each replica starts with start-up's variants compiled.
    std::optional<FusedMoeJit> fused_moe_jit;
};

// A request as it arrives at a replica.
struct IncomingRequest {
    core::RequestId id{};
    core::SimTime arrival;
    core::TokenContent prompt;
    std::int64_t max_output_tokens = 1;
    core::ContentId answer_content{};
    int turn = 0;  // RequestSpec::turn (1-based turn within a dialogue, 0 if none), kept for the request's record
    // The client sees each token this much after the engine makes it (a disaggregated proxy relaying the stream:
    // the hop back from the decode instance); its first token and finish are recorded that much later.
    core::Duration client_delay{};
    // The prompt's block hashes when the router already computed them at the replica's block size (taken, not
    // recomputed; cache::HashedPrompt).
    std::optional<cache::HashedPrompt> hashed_prompt;
    // When its client gives up (send + the workload's request_timeout), none without a time-out: a request whose last
    // token would reach the client after it is not finished but timed out (Replica::end_step).
    std::optional<core::SimTime> client_deadline;
};

// Whether a replica with `max_model_len` refuses a request of `prompt_tokens` + `max_output_tokens`: vLLM's frontend
// refuses a request whose prompt + max_tokens exceed max_model_len (and an empty prompt), before any engine or
// router sees it. Replica::add_request applies it; cluster::route_arrival skips hashing such a prompt.
[[nodiscard]] inline bool refused_as_too_long(std::int64_t prompt_tokens, std::int64_t max_output_tokens,
                                              std::int64_t max_model_len) {
    return prompt_tokens + max_output_tokens > max_model_len || prompt_tokens == 0;
}

class Replica {
public:
    // `connector` (optional, not owned, used when config.offload is unset): a replica's view of a cluster-wide KV
    // store (sim/cluster/kv_store.h) in the place of the engine's own host tier.
    Replica(const ReplicaConfig& config, const CostModel& cost_model, metrics::MetricsCollector& metrics,
            cache::KvConnector* connector = nullptr);

    // Adds a request; returns false (and counts a rejection) when vLLM would refuse it: prompt + output longer
    // than max_model_len.
    bool add_request(IncomingRequest incoming);

    // Starts a step at `now` if none is in flight and there is work; returns when it ends.
    [[nodiscard]] std::optional<core::SimTime> try_start_step(core::SimTime now);

    // Ends the step in flight: streams sampled tokens, finishes requests. Returns the ids finished (a list the
    // replica keeps for its capacity: valid until the next end_step). With `api_server` (the request path,
    // sim/frontend/api_server.h), the step's tokens reach the client when the API server has streamed them
    // (ApiServer::stream), and that is the time their first token, gaps and finish are recorded at.
    const std::vector<core::RequestId>& end_step(core::SimTime now, frontend::ApiServer* api_server = nullptr);

    // When the client received the last ended step's tokens (its end, without a request path).
    [[nodiscard]] core::SimTime last_stream_time() const { return last_stream_time_; }

    // The requests the last end_step finished in the engine whose last token reached their client after its
    // deadline (IncomingRequest::client_deadline), each with that deadline: counted as timed out, not finished, and
    // never measured (the client's total time-out fired while the last chunk was on its way). Valid until the next
    // end_step.
    struct ClientTimeOut {
        core::RequestId id{};
        core::SimTime deadline;
    };

    [[nodiscard]] const std::vector<ClientTimeOut>& timed_out_at_client() const { return timed_out_at_client_; }

    // The client of request `id` gave up at `now` (its time-out): the request is counted as timed out and leaves
    // every figure; the engine aborts it at once when no step is in flight, else at the end of the step in flight
    // (vLLM's engine core reads an abort between steps; a step already launched keeps it: its output is dropped).
    // Returns false, changing nothing, when the request is not here or already finished or timed out.
    bool time_out(core::RequestId id);

    // Whether request `id` is here and its client still waits for it (neither finished nor timed out).
    [[nodiscard]] bool is_live(core::RequestId id) const {
        const auto it = requests_.find(core::to_int(id));
        return it != requests_.end() && !it->second->timed_out;
    }

    // Requests dropped by try_start_step because they can never fit; the caller tells the workload.
    [[nodiscard]] std::vector<core::RequestId> take_rejected() { return std::exchange(rejected_, {}); }

    [[nodiscard]] bool step_in_flight() const { return in_flight_ != kNoPlan; }

    [[nodiscard]] std::size_t num_waiting() const { return scheduler_.num_waiting(); }

    [[nodiscard]] std::size_t num_running() const { return scheduler_.num_running(); }

    [[nodiscard]] std::size_t num_requests() const { return requests_.size(); }

    [[nodiscard]] const cache::KvCacheManager& kv_cache() const { return *kv_cache_; }
    // The replica's KV cache events go to `sink` (a router's precise prefix index; cache::KvEventSink).
    void set_kv_event_sink(cache::KvEventSink* sink) { kv_cache_->set_event_sink(sink); }
    // The replica's requests use `memo` (same block size, outliving the replica) in the place of its own: a cluster
    // whose router hashes every prompt shares the router's memo, so a finished turn's hashes reach the router,
    // which hashes that dialogue's next prompt (cache::TurnHashHandoff; a memo of a pure function, no output moves).
    void share_hash_memo(cache::FirstRunHashMemo& memo);

    // The KV connector (the host tier or a cluster store's view), if any.
    [[nodiscard]] const cache::KvConnector* offload() const { return connector_; }

    // When an idle replica must look again (a host-tier load finishes), if ever.
    [[nodiscard]] std::optional<core::SimTime> next_wakeup() const { return scheduler_.next_load_done(); }
    // A connector load's transfer now ends at `transfer_end` (Scheduler::retime_load); true when the request's
    // wait got shorter, so an idle replica must wake earlier than it planned.
    bool retime_load(core::RequestId id, core::SimTime transfer_end) {
        return scheduler_.retime_load(id, transfer_end);
    }

    [[nodiscard]] std::int64_t num_preemptions() const { return scheduler_.num_preemptions(); }

    // The connector reported request `id` finished sending (KVConnectorOutput.finished_sending): the blocks its
    // request_finished kept are freed (Scheduler._update_from_kv_xfer_finished). False if none were kept.
    bool finished_sending(core::RequestId id);

    // Finished requests whose blocks the connector still holds (delay_free_blocks).
    [[nodiscard]] std::size_t num_delayed_free() const { return delayed_free_.size(); }

    [[nodiscard]] std::int64_t num_steps() const { return num_steps_; }

    [[nodiscard]] std::int64_t num_rejected_unfit() const { return num_rejected_unfit_; }

    // Speculative decoding's counters (vLLM SpecDecodingStats) over all steps; all zero when it is off.
    [[nodiscard]] const SpeculativeStats& speculative_stats() const { return spec_stats_; }
    [[nodiscard]] const ReplicaConfig& config() const { return config_; }

    // Cost breakdown accumulated over all steps (ms).
    [[nodiscard]] const StepCost& total_cost() const { return total_cost_; }

    // `local`: the cost model's local attention spans, whose capped work fills BatchShape::local.
    // `every_block`: vLLM's all mode (a state copy at every block boundary crossed; mamba_align: where a step ends
    // on one); `kernel_chunk_tokens`: the chunked scan's chunk, for the copies all mode takes inside a chunk.
    [[nodiscard]] static BatchShape batch_shape(const StepPlan& plan, int block_size, bool mamba_align,
                                                const LocalAttentionSpans& local = {}, bool every_block = false,
                                                int kernel_chunk_tokens = 64);

private:
    void mark_scheduled(const StepPlan& plan, core::SimTime now);
    // end_step's token pass: appends each sampled token, records the gaps, collects the finished requests.
    template <bool kHoldGaps>
    void emit_tokens(const StepPlan& plan, core::SimTime now, std::vector<Request*>& finishing);
    // Aborts the timed-out requests (between steps): out of the scheduler and the request map. A step scheduled
    // before the abort may still hold one (async scheduling), so its Request is recycled only at the next call.
    void apply_aborts();
    // Hands a finished request's held token gaps to the metrics (in order, as runs of equal gaps) and frees its
    // buffer; with `measure` false they are dropped.
    void release_token_gaps(Request& r, bool measure);

    ReplicaConfig config_;
    std::optional<FusedMoeJit> fused_moe_jit_;  // config_.fused_moe_jit, this replica's compiled variants
    const CostModel& cost_model_;
    LocalAttentionSpans local_spans_;  // cost_model_.local_attention_spans(), asked once
    metrics::MetricsCollector& metrics_;
    std::unique_ptr<cache::KvCacheManager> kv_cache_;
    std::unique_ptr<cache::CpuOffloadManager> offload_;
    cache::KvConnector* connector_ = nullptr;  // offload_ or the external connector
    Scheduler scheduler_;
    std::unordered_map<std::uint64_t, std::unique_ptr<Request>> requests_;  // lookup only, never iterated for output
    std::unordered_map<std::uint64_t, std::unique_ptr<Request>> delayed_free_;  // finished, blocks still held
    // Finished requests' map nodes, each still owning its Request, taken again by add_request: a request then costs
    // neither a Request nor a node allocation (two of its ~3 per request). Nothing reads a finished Request: the
    // scheduler let go of it in finish_request, and add_request overwrites every field.
    std::vector<decltype(requests_)::node_type> spare_request_nodes_;
    // Finished requests that the step scheduled next (async scheduling) still holds; recycled when it ends.
    std::vector<decltype(requests_)::node_type> finished_in_next_plan_;
    [[nodiscard]] static bool in_plan(const StepPlan& plan, const Request* r) {
        return std::any_of(plan.scheduled.begin(), plan.scheduled.end(),
                           [r](const ScheduledRequest& s) { return s.request == r; });
    }
    std::vector<core::RequestId> finished_;  // end_step's answer, reused
    std::vector<ClientTimeOut> timed_out_at_client_;  // timed_out_at_client()'s answer, reused
    std::vector<Request*> finishing_;        // end_step's finished requests between its two passes, reused
    // First-run block hashes shared by this replica's requests, and finished turns' hashes for their next turn.
    cache::FirstRunHashMemo own_hash_memo_;
    cache::FirstRunHashMemo* hash_memo_ = &own_hash_memo_;  // or one shared with a router (share_hash_memo)
    // The step plans, reused step after step so their vectors keep their capacity: at most one in flight, one
    // scheduled next (async scheduling: while the one in flight runs) and one being filled. Held by index rather
    // than moved between optional members: a step used to move each plan three or four times.
    static constexpr int kNoPlan = -1;
    std::array<StepPlan, 3> plans_;
    int in_flight_ = kNoPlan;
    int next_ = kNoPlan;  // async scheduling: the step scheduled while in_flight_ runs
    // A plan neither in flight nor scheduled next, for the scheduler to fill.
    [[nodiscard]] int spare_plan() const {
        int i = 0;
        while (i == in_flight_ || i == next_) {
            ++i;
        }
        return i;
    }
    core::SimTime last_stream_time_;
    std::int64_t num_steps_ = 0;
    // Requests finished since the last step started, whose host work (freeing, removal from the batch) the next
    // step's BatchShape::num_finished_seqs carries.
    std::int64_t num_finished_unbilled_ = 0;
    std::int64_t num_rejected_unfit_ = 0;
    std::vector<core::RequestId> rejected_;
    StepCost total_cost_;
    std::optional<AcceptanceSampler> acceptance_;  // set with speculative decoding
    SpeculativeStats spec_stats_;
    // Client time-outs (time_out): requests to abort at the next step boundary, and those
    // aborted at the last boundary, whose map nodes return to spare_request_nodes_ at the next one.
    std::vector<Request*> pending_aborts_;
    std::vector<decltype(requests_)::node_type> retiring_;
    // hold_token_gaps: each running request's gaps since its first token (Request::gap_slot), buffers reused.
    std::vector<std::vector<core::Duration>> gap_buffers_;
    std::vector<std::uint32_t> free_gap_slots_;
};

}  // namespace servesim::engine
