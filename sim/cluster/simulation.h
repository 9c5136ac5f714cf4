// Simulation: one experiment — a workload, a router and N replicas on one event queue and one clock. It pulls
// arrivals from the workload, routes each to a replica, runs each replica's steps back to back while it has work
// (at most one step in flight per replica, re-armed on every arrival and finish), and tells the workload when a
// request finished so closed-loop dialogues send their next turn. A pure function of its inputs and seed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "common/heap_huge_pages.h"
#include "sim/cache/hybrid/hybrid_state_cache.h"
#include "sim/cache/prefix_cache/block_hash.h"
#include "sim/cluster/disaggregation_stats.h"
#include "sim/engine/speculative.h"
#include "sim/cluster/kv_store.h"
#include "sim/cluster/request_timeouts.h"
#include "sim/cluster/router.h"
#include "sim/cluster/topology.h"
#include "sim/core/event_queue.h"
#include "sim/engine/replica.h"
#include "sim/frontend/api_server.h"
#include "sim/metrics/metrics.h"
#include "workloads/workload.h"

namespace servesim::cluster {

struct SimulationConfig {
    engine::ReplicaConfig replica;
    // Replicas on GPUs of unequal memory (cluster.topology): replica i's engine (its own KV blocks), in the place
    // of `replica`; empty when they are all alike.
    std::vector<engine::ReplicaConfig> replica_configs;
    int num_replicas = 1;
    core::SimTime warmup_end;
    // Hard stop: no event after this time is processed (an overloaded run whose queue grows without bound).
    core::SimTime max_time = core::SimTime::from_s(24 * 3600.0);
    // Time-series sampling period (0 = none). O(replicas) per sample, independent of the request count.
    core::Duration sample_interval = core::Duration::from_s(1.0);
    // Percentiles from every sample (memory grows with the run) instead of fixed-memory sketches (metrics.h).
    bool exact_percentiles = false;
    bool keep_request_records = false;  // a RequestRecord per measured finished request (metrics.h)
    // Early stop of a hopeless run (the capacity planner's): once more requests than this wait over all replicas
    // after an arrival, the run stops and says so. O(replicas) per arrival when set; unset = never.
    std::optional<std::int64_t> stop_when_waiting_exceeds;
    // The cluster's hardware (cluster.topology); replica i runs on its GPUs [i·gpus_per_replica, (i+1)·…).
    std::shared_ptr<const Topology> topology;
    int gpus_per_replica = 1;
    // A KV store shared by the replicas (cluster.kv_connector), in the place of each engine's host tier; needs the
    // topology.
    std::optional<KvStoreConfig> kv_store;
    // The request path between the client and each replica's engine core (its own API server per replica: a
    // `vllm serve` process each); disabled = requests reach the engine when sent, tokens the client when made.
    frontend::RequestPathConfig request_path;
    // The workload's clients time requests out (workloads::RequestSpec::timeout, workload key `request_timeout`):
    // the replicas hold each request's token gaps until it finishes (engine::ReplicaConfig::hold_token_gaps).
    bool request_timeouts = false;
    // Keep each measured request's token gaps with its record (vllm bench serve --save-detailed's `itls`); needs
    // keep_request_records. The replicas then hold gaps per request, as with time-outs; off, memory stays flat.
    bool keep_request_itls = false;
};

// One sample of the cluster's state (sampled every SimulationConfig::sample_interval of simulated time).
struct TimeSample {
    double t_s = 0;
    std::int64_t num_waiting = 0;      // all replicas
    std::int64_t num_running = 0;
    double kv_usage = 0;               // vllm:kv_cache_usage_perc, mean over replicas
    std::int64_t prefix_cache_queries = 0;  // cumulative counters (tokens)
    std::int64_t prefix_cache_hits = 0;
};

struct SimulationResult {
    metrics::Summary summary;
    std::vector<TimeSample> timeseries;  // queue growth and KV usage over time
    engine::StepCost total_cost;       // summed over replicas (ms)
    std::int64_t num_events = 0;
    std::int64_t num_unfinished = 0;   // requests still in a replica when the run stopped
    bool hit_max_time = false;
    bool stopped_overloaded = false;  // stop_when_waiting_exceeds was reached
    // Summed over replicas when a hybrid policy keeps a state pool (cache::HybridStateCache); unset otherwise.
    std::optional<cache::HybridStateStats> hybrid_state;
    // A prefill–decode disaggregated run only (sim/cluster/disaggregation.h).
    std::optional<DisaggregationStats> disaggregation;
    // Speculative decoding's counters summed over replicas (vLLM SpecDecodingStats); unset when it is off.
    std::optional<engine::SpeculativeStats> speculative;
};

// The replica `router` picks among `replicas` for a request arriving at `now`, with what vLLM's frontends and
// routers see at arrival: each replica's waiting and running counts and KV usage (only for routers that read loads)
// and the prompt's chained block hashes at `block_size` (only for cache-aware routers), which are left in `*hashed`
// for the replica's request (engine::IncomingRequest::hashed_prompt) and are reset otherwise. `loads` is scratch
// space reused across arrivals; `memo` (optional, at `block_size`) shares first-run hashes between prompts.
// `in_transit` (optional, one count per replica): requests routed to a replica that have not reached its engine yet
// (the request path, docs/REQUEST-PATH.md), counted as waiting there — a router knows what it sent.
// `refused`: the request will be refused as too long for max_model_len (vLLM's frontend checks that before any
// router sees a token, engine::refused_as_too_long, which engine::Replica::add_request applies): it is routed without hashing its prompt, which for a
// prompt of 10^9 tokens took gigabytes and minutes to no end (issue 41).
// Shared by Simulation and DisaggregatedSimulation's two pools.
[[nodiscard]] std::size_t route_arrival(Router& router, const std::vector<std::unique_ptr<engine::Replica>>& replicas,
                                        const core::TokenContent& prompt, const RequestOrigin& origin,
                                        core::SimTime now, int block_size, std::vector<ReplicaLoad>& loads,
                                        std::optional<cache::HashedPrompt>& hashed,
                                        cache::FirstRunHashMemo* memo = nullptr,
                                        const std::vector<std::size_t>* in_transit = nullptr, bool refused = false);

// The arrival loop both simulations run (Simulation::handle_arrivals, DisaggregatedSimulation::handle_arrivals for
// its prefill pool): every request the workload sends at or before `now` is popped in order, routed among `replicas`
// by route_arrival (the refusal as too long for `scheduler.max_model_len` and the hashing at `scheduler.block_size`
// as there), made the engine's IncomingRequest (sent at `now`, with the hashes the router made) and handed to
// `deliver(target, request, client_timeout)`, which takes it to the target's engine (directly, through the API
// server, or through the disaggregation proxy). `loads`, `memo` and `in_transit` are route_arrival's.
template <typename Deliver>
void route_arrivals(workloads::Workload& workload, core::SimTime now, Router& router,
                    const std::vector<std::unique_ptr<engine::Replica>>& replicas,
                    const engine::SchedulerConfig& scheduler, std::vector<ReplicaLoad>& loads,
                    cache::FirstRunHashMemo* memo, const std::vector<std::size_t>* in_transit, Deliver&& deliver) {
    while (true) {
        const auto next = workload.next_arrival_time();
        if (!next || *next > now) {
            break;
        }
        workloads::RequestSpec spec = workload.pop_next_arrival();
        std::optional<cache::HashedPrompt> hashed;
        const bool refused = engine::refused_as_too_long(core::total_tokens(spec.prompt), spec.max_output_tokens,
                                                         scheduler.max_model_len);
        const std::size_t target =
            route_arrival(router, replicas, spec.prompt, RequestOrigin{spec.tenant, spec.session, spec.last_in_session},
                          now, scheduler.block_size, loads, hashed, memo, in_transit, refused);
        engine::IncomingRequest in{spec.id, now, std::move(spec.prompt), spec.max_output_tokens, spec.answer_content,
                                   spec.turn, {}, std::move(hashed)};
        deliver(target, std::move(in), spec.timeout);
    }
}

// The replicas' prefix-cache counters summed: GPU queries and hits, and the CPU-offload tier's as external ones.
[[nodiscard]] metrics::PrefixCounters prefix_counters(const std::vector<std::unique_ptr<engine::Replica>>& replicas);

// Arms one arrival event at the workload's next arrival time (not before the queue's clock) unless an arrival at
// that time or earlier is armed already; `armed` holds the armed time. Shared by both simulations' event loops.
void arm_next_arrival(workloads::Workload& workload, core::EventQueue& queue, std::optional<core::SimTime>& armed);

// An idle replica (event target `target`) waiting for a connector load looks again when the earliest lands, at least
// 1 ns after `now`: a kWake. Nothing when it waits for none. Shared by both simulations.
void arm_wake(core::EventQueue& queue, const engine::Replica& replica, std::uint32_t target, core::SimTime now);

// The loads' waits that `transfers` retimed move (Replica::retime_load on `replicas[owner.replica]`); an idle
// replica whose load now ends sooner is woken then (arm_wake, event target `target_offset` + its index: the decode
// pool follows the prefill pool in a disaggregated run). Then the tracker's next change is armed as a kTransfer
// event unless one no later is armed already (`armed`). Returns the retimes, for a caller that also follows the
// transfers' ends.
std::vector<TransferRetime> follow_transfers(TransferTracker& transfers,
                                             const std::vector<std::unique_ptr<engine::Replica>>& replicas,
                                             std::uint32_t target_offset, core::EventQueue& queue,
                                             std::optional<core::SimTime>& armed, core::SimTime now);

class Simulation {
public:
    Simulation(const SimulationConfig& config, const engine::CostModel& cost_model, workloads::Workload& workload,
               std::unique_ptr<Router> router);

    SimulationResult run();

private:
    void arm_arrival();
    [[nodiscard]] std::int64_t total_waiting() const;
    void handle_arrivals(core::SimTime now);
    void start_step(std::size_t replica, core::SimTime now);
    void notify_finished(const std::vector<core::RequestId>& ids, core::SimTime now);
    // A routed request reaches replica `target`'s engine at `now` (at once, or after the request path); its client's
    // time-out, if any, runs from its send.
    void deliver(std::size_t target, engine::IncomingRequest in, std::optional<core::Duration> timeout,
                 core::SimTime now);
    // The earliest deadline of a request whose client still waits for it, if any.
    [[nodiscard]] std::optional<core::SimTime> next_timeout();
    // Every live request whose deadline is `now` is given up: counted, aborted in its replica, its client told.
    void handle_timeouts(core::SimTime now);
    [[nodiscard]] metrics::PrefixCounters counters() const;
    void sample(core::SimTime now, std::vector<TimeSample>& out) const;

    SimulationConfig config_;
    const engine::CostModel& cost_model_;
    workloads::Workload& workload_;
    std::unique_ptr<Router> router_;
    metrics::MetricsCollector metrics_;
    std::unique_ptr<SharedKvStore> kv_store_;
    std::vector<std::unique_ptr<engine::Replica>> replicas_;
    // With a request path: each replica's API server, and the requests it passed on that have not reached the
    // engine yet, in the order they will (per replica, ApiServer::admit's times do not decrease).
    std::vector<frontend::ApiServer> api_servers_;
    struct InTransit {
        core::SimTime at_engine;
        engine::IncomingRequest request;
        std::optional<core::Duration> timeout;
    };
    std::vector<std::deque<InTransit>> in_transit_;
    std::vector<std::size_t> in_transit_counts_;  // in_transit_[i].size(), for the router's loads
    core::EventQueue queue_;
    std::optional<core::SimTime> armed_arrival_;
    std::optional<core::SimTime> armed_transfer_;
    RequestTimeouts timeouts_;  // client time-outs, merged with queue_ by run()
    std::vector<ReplicaLoad> loads_;  // reused per arrival; filled only for routers that read loads
    cache::FirstRunHashMemo route_hash_memo_;  // first-run hashes of the prompts the router hashes
    bool warmup_snapshot_taken_ = false;
    std::int64_t preemptions_at_warmup_ = 0;
    HeapHugePages heap_pages_;  // advised as the heap grows (common/heap_huge_pages.h)
};

}  // namespace servesim::cluster
