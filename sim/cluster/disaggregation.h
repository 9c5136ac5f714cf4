// Prefill–decode disaggregation as vLLM serves it with the NixlConnector behind a proxy (vLLM's
// tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, llm-d's P/D sidecar): a prefill pool and a decode
// pool, each of its own replica count, GPU and tensor-parallel size, on one topology. A request goes first to a
// prefill instance with max_tokens=1 and kv_transfer_params {do_remote_decode: true}; that instance computes the
// prompt (chunked prefill, its own prefix cache), samples one token (which the proxy drops) and keeps the request's
// blocks (NixlConnectorScheduler.request_finished returns delay_free_blocks=True). The proxy then sends the same
// prompt to a decode instance with the returned kv_transfer_params {do_remote_prefill: true}: its scheduler
// allocates blocks, get_num_new_matched_tokens answers len(prompt) − local hit, the request waits in
// WAITING_FOR_REMOTE_KVS while the decode worker reads the blocks it lacks over the topology (NIXL READ from the
// prefill GPUs, TransferTracker contention), then (Scheduler._update_waiting_for_remote_kv) recomputes the last
// prompt token and samples the client's first token. When the read ends the decode side notifies the prefill
// instance, whose blocks are freed (finished_sending → Scheduler._free_blocks). Metrics are the client's: TTFT from
// its send to the decode instance's first token (through the proxy: each hop between the proxy's host and an
// instance's host takes that path's latency). docs/CLUSTER.md "Prefill–decode disaggregation".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/cache/offload/cpu_offload.h"
#include "sim/cache/offload/kv_connector.h"
#include "sim/cluster/disaggregation_stats.h"
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "sim/cluster/topology.h"
#include "sim/cluster/transfer_tracker.h"
#include "sim/core/event_queue.h"
#include "sim/engine/replica.h"
#include "sim/metrics/metrics.h"
#include "workloads/workload.h"

namespace servesim::cluster {

// One pool of `cluster.disaggregation` as written: `{replicas, gpu, tensor_parallel_size}` (llm-d's prefill /
// decode deployments; vLLM's --tensor-parallel-size). An empty gpu means the experiment's `gpu:`.
struct PoolSettings {
    int replicas = 1;
    std::string gpu;
    int tensor_parallel_size = 1;
    // Index, in the topology's GPU order, of the pool's first GPU (-1: prefill 0, decode right after the prefill
    // pool); its replicas take the GPUs from there on.
    int first_gpu = -1;
    int line = 0;
};

// `cluster.disaggregation: {kv_connector: NixlConnector, prefill: {...}, decode: {...}}`, kept with where it was
// written for messages.
struct DisaggregationSettings {
    PoolSettings prefill;
    PoolSettings decode;
    std::string kv_connector = "NixlConnector";
    // The topology host the proxy runs on (empty: the host nearest the prefill pool's first GPU).
    std::string proxy;
    std::string file;
    std::string key;  // "cluster.disaggregation"
    int line = 0;
};

[[nodiscard]] DisaggregationSettings parse_disaggregation(const YamlMap& m);

// The pools' engines and the transfer's geometry, for a run.
struct DisaggregationConfig {
    engine::ReplicaConfig prefill_replica;
    engine::ReplicaConfig decode_replica;
    // A pool on GPUs of unequal memory (cluster.topology): each replica's engine in the place of the pool's one;
    // empty when they are alike.
    std::vector<engine::ReplicaConfig> prefill_replicas;
    std::vector<engine::ReplicaConfig> decode_replicas;
    int num_prefill = 1;
    int num_decode = 1;
    int prefill_tp = 1;
    int decode_tp = 1;
    int prefill_first_gpu = 0;   // placement in the topology's GPU order
    int decode_first_gpu = -1;   // -1: right after the prefill pool
    // One block's KV over all layers and tensor-parallel ranks (as the offload connector counts a block).
    double bytes_per_block = 0;
    // The proxy's topology vertex (npos: the host nearest the prefill pool's first GPU; with no host in the
    // topology, the proxy's hops take no time). Each hop between the proxy and an instance (the host nearest the
    // instance's first GPU) takes that path's latency (docs/CLUSTER.md "The proxy's hops").
    std::size_t proxy_vertex = Topology::npos;
    // MLA: every rank holds the whole latent cache, so each decode rank reads one prefill rank's copy in full
    // (nixl/tp_mapping.py compute_tp_mapping); otherwise heads are split and each rank reads its share.
    bool replicated_kv = false;
};

// The NixlConnector of one instance (nixl/scheduler.py NixlConnectorScheduler), scheduler side.
//   prefill role: every request carries do_remote_decode, so request_finished delays the free (delay_free_blocks);
//                 lookup finds nothing (a P request has no remote prefill).
//   decode role:  a request registered by expect() carries do_remote_prefill: lookup answers len(prompt) − local
//                 hit (get_num_new_matched_tokens), start_load reads the blocks over the topology and clears the flag
//                 (update_state_after_alloc: one transfer per request; a preempted request recomputes locally).
class NixlConnector final : public cache::KvConnector {
public:
    enum class Role { kPrefill, kDecode };

    // A read the decode side started; the simulation frees the prefill blocks at `done`, which the tracker settles
    // when the read ends (its shares change while other transfers start and end).
    struct Read {
        core::RequestId id{};
        std::size_t prefill = 0;  // prefill replica (pool index)
        core::SimTime start;
        core::SimTime done;
        double bytes = 0;
        std::int64_t local_hit_tokens = 0;
        core::SimTime arrival;  // the client's send
    };

    // `prefill_gpus[p]`: the topology GPUs of prefill replica p (decode role), `own_gpus`: this instance's;
    // `index`: its place in its pool (the owner of its reads in the tracker).
    NixlConnector(Role role, int block_size, const DisaggregationConfig& config, const Topology* topology,
                  TransferTracker* tracker, std::vector<std::vector<std::size_t>> prefill_gpus,
                  std::vector<std::size_t> own_gpus, std::size_t index);

    // Decode role: request `id` arrives with do_remote_prefill from prefill replica `prefill`.
    void expect(core::RequestId id, std::size_t prefill, core::SimTime arrival);
    // Decode role: forget a request refused before its read; returns its prefill replica, if it was expected.
    std::optional<std::size_t> forget(core::RequestId id);
    // Reads started since the last call.
    [[nodiscard]] std::vector<Read> take_reads() { return std::exchange(reads_, {}); }

    std::int64_t lookup(std::span<const core::BlockHash>, std::int64_t, std::int64_t) override { return 0; }
    core::Duration start_load(std::int64_t, core::SimTime) override { return core::Duration::from_ns(0); }
    std::int64_t lookup_request(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                                std::int64_t local_hit_tokens, std::int64_t num_tokens) override;
    core::Duration start_load_request(core::RequestId id, std::int64_t external_tokens, core::SimTime now) override;
    bool request_finished(core::RequestId id) override;
    void record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens) override;
    void store(std::span<const core::BlockHash>, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
               std::int64_t) override {}  // the NixlConnector saves nothing (no host buffer modelled)
    void on_step_end() override {}
    [[nodiscard]] const cache::ExternalCacheStats& stats() const override { return stats_; }
    [[nodiscard]] const cache::CpuOffloadConfig& config() const override { return store_config_; }

private:
    struct Pending {
        std::size_t prefill = 0;
        std::int64_t local_hit_tokens = 0;
        core::SimTime arrival;
    };
    Role role_;
    int block_size_;
    DisaggregationConfig config_;
    const Topology* topology_;
    TransferTracker* tracker_;
    std::uint32_t index_;
    std::vector<std::vector<std::size_t>> prefill_gpus_;
    std::vector<std::size_t> own_gpus_;
    std::unordered_map<std::uint64_t, Pending> pending_;  // do_remote_prefill still set
    std::vector<Read> reads_;
    // GPU to GPU: across nodes each GPU's own rail NIC (its nearest), one slice; inside a node NVLink.
    RailPathCache paths_;
    cache::ExternalCacheStats stats_;
    cache::CpuOffloadConfig store_config_;
};

// The run: prefill replicas [0, P) and decode replicas [P, P+D) on one event queue; the cluster's router type picks
// within each pool (one instance per pool, as llm-d's prefill and decode scheduling profiles). The Summary is the
// client's (the decode instances' tokens, times from the client's send); its prefix-cache counters are the prefill
// pool's, where prompts are computed.
class DisaggregatedSimulation {
public:
    DisaggregatedSimulation(const SimulationConfig& common, const DisaggregationConfig& config,
                            const engine::CostModel& prefill_cost, const engine::CostModel& decode_cost,
                            workloads::Workload& workload, std::unique_ptr<Router> prefill_router,
                            std::unique_ptr<Router> decode_router);

    SimulationResult run();

    // For tests: a prefill replica's engine, and the reads done so far.
    [[nodiscard]] const engine::Replica& prefill_replica(std::size_t i) const { return *prefill_[i]; }
    [[nodiscard]] const std::vector<NixlConnector::Read>& reads() const { return all_reads_; }

private:
    void arm_arrival();
    void handle_arrivals(core::SimTime now);
    void start_step(std::size_t target, core::SimTime now);
    void end_step(std::size_t target, core::SimTime now);
    void free_sent(core::SimTime now);
    void notify_free(std::size_t prefill, core::RequestId id, core::SimTime at);
    void to_decode(const engine::IncomingRequest& in, std::size_t prefill, core::SimTime now);
    void to_prefill(engine::IncomingRequest client, std::size_t p, core::SimTime now);
    void decode_arrives(const engine::IncomingRequest& in, std::size_t prefill, std::size_t d, core::SimTime now);
    void deliver_due(core::SimTime now);
    // cluster::follow_transfers for the decode pool's reads; then a read that ended frees its prefill blocks and is
    // recorded.
    void follow_reads(core::SimTime now);
    [[nodiscard]] metrics::PrefixCounters prefill_counters() const;
    [[nodiscard]] engine::Replica& replica(std::size_t target);

    SimulationConfig common_;
    DisaggregationConfig config_;
    const engine::CostModel& prefill_cost_;
    const engine::CostModel& decode_cost_;
    workloads::Workload& workload_;
    std::unique_ptr<Router> prefill_router_;
    std::unique_ptr<Router> decode_router_;
    metrics::MetricsCollector metrics_;          // the client's (decode instances)
    metrics::MetricsCollector prefill_metrics_;  // the proxy's prefill leg
    TransferTracker tracker_;
    std::vector<std::unique_ptr<NixlConnector>> connectors_;  // prefill then decode
    std::vector<std::unique_ptr<engine::Replica>> prefill_;
    std::vector<std::unique_ptr<engine::Replica>> decode_;
    core::EventQueue queue_;
    std::optional<core::SimTime> armed_arrival_;
    std::unordered_map<std::uint64_t, engine::IncomingRequest> at_prefill_;  // the client's request, by id
    struct Free {
        core::SimTime at;
        std::size_t prefill = 0;
        core::RequestId id{};
        bool operator>(const Free& o) const {
            return at != o.at ? at > o.at : core::to_int(id) > core::to_int(o.id);
        }
    };
    std::priority_queue<Free, std::vector<Free>, std::greater<>> frees_;
    // The proxy's hops (vLLM's toy_proxy_server.py): the path latency between the proxy and each instance's host.
    std::vector<core::Duration> hop_;  // by target (prefill then decode)
    // Requests on their way between the proxy and an instance, in time order (ties in the order sent).
    struct Delivery {
        enum class Kind { kToPrefill, kAtProxy, kToDecode };
        core::SimTime at;
        std::uint64_t seq = 0;
        Kind kind = Kind::kToPrefill;
        std::size_t target = 0;   // prefill replica (kToPrefill, kAtProxy: the one that prefilled) or decode index
        std::size_t prefill = 0;  // kToDecode: the prefill replica holding its blocks
        engine::IncomingRequest in;
    };
    struct LaterDelivery {
        bool operator()(const Delivery& a, const Delivery& b) const {
            return a.at != b.at ? a.at > b.at : a.seq > b.seq;
        }
    };
    std::priority_queue<Delivery, std::vector<Delivery>, LaterDelivery> deliveries_;
    std::uint64_t delivery_seq_ = 0;
    void send(Delivery d, core::Duration hop, core::SimTime now);
    std::unordered_map<std::uint64_t, NixlConnector::Read> open_reads_;  // started, not yet ended, by request id
    std::optional<core::SimTime> armed_transfer_;
    std::vector<NixlConnector::Read> all_reads_;  // in the order they ended
    std::vector<double> measured_transfer_ms_;
    std::int64_t held_ = 0;
    std::int64_t peak_held_ = 0;
    std::int64_t decode_local_hit_tokens_ = 0;
    bool warmup_snapshot_taken_ = false;
    std::int64_t preemptions_at_warmup_ = 0;
    std::vector<ReplicaLoad> loads_;
};

}  // namespace servesim::cluster
