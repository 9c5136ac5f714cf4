// Routers: which replica serves a new request (data parallelism: a separate KV cache per replica, so routing
// decides prefix-cache locality; docs/VLLM-RULES.md §8). A small interface chosen by name from one table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <span>

#include "common/yaml_reader.h"
#include "sim/cache/prefix_cache/block_pool.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace servesim::cluster {

// What a router may look at: per replica load, and the request's first content run.
struct ReplicaLoad {
    std::size_t num_waiting = 0;
    std::size_t num_running = 0;
    double kv_usage = 0;  // vllm:kv_cache_usage_perc (0–1)
};

// A request as the cache-aware routers see it: its prompt, the routing time and its full blocks' chained hashes
// (filled only for routers that read them, needs_block_hashes).
struct RouteRequest {
    const core::TokenContent& prompt;
    core::SimTime now;
    std::span<const core::BlockHash> block_hashes;
    core::TenantId tenant{};  // the request's tenant (its user); 0 when the workload has none
    std::uint64_t session = 0;     // its conversation (workloads::RequestSpec::session); 0: none
    bool last_in_session = false;  // the conversation's last request
};

// Who sent a request, as the routers see it (from workloads::RequestSpec).
struct RequestOrigin {
    core::TenantId tenant{};
    std::uint64_t session = 0;
    bool last_in_session = false;
};

// Settings of the cache-aware routers (`cluster.router_config:`), value type.
struct RouterOptions {
    // llm-d's scorers, weighted sum, highest wins (the default profile weighs queue 2, prefix cache 3).
    double prefix_weight = 3;
    double queue_weight = 2;
    double kv_utilization_weight = 0;
    // Dynamo's KV router: cost = overlap_weight × blocks to prefill + blocks in use; lowest wins.
    double overlap_weight = 1;
    // Routers see a replica's cache as it was this long ago (the routed prefixes become visible after it).
    double cache_signal_delay_s = 0;
    // Filled by the simulation: blocks per replica (the approximate index's LRU capacity) and the block size.
    std::int64_t replica_capacity_blocks = 0;
    // Replicas on GPUs of unequal memory (cluster.topology): each one's blocks, which replace
    // replica_capacity_blocks for it; empty when they are all equal.
    std::vector<std::int64_t> replica_capacities_blocks;
    // Replica r's blocks: its entry of replica_capacities_blocks when it has one, else replica_capacity_blocks.
    [[nodiscard]] std::int64_t capacity_blocks(std::size_t r) const {
        return r < replica_capacities_blocks.size() && replica_capacities_blocks[r] > 0 ? replica_capacities_blocks[r]
                                                                                         : replica_capacity_blocks;
    }
    // `prefix_scorer: precise`: llm_d and dynamo_kv read the replicas' KV events (llm-d's
    // precise-prefix-cache-scorer, Dynamo's KvIndexer) instead of the prompts they routed (approximate, the default).
    bool precise_prefix_scorer = false;
    // `session_key: conversation`: session_affinity keys a request by its conversation (a client that presents a new
    // session token for each conversation); `tenant` (the default): by its tenant, as a client keeping one cookie
    // jar for all its conversations (llm-d's cookie-based session affinity; vLLM's multi-turn benchmark keeps one
    // HTTP session per client).
    bool session_per_conversation = false;
};

[[nodiscard]] RouterOptions parse_router_options(const YamlMap& m);

// The replicas' KV cache events as a router receives them (vLLM's KVEventsConfig publisher over ZMQ, llm-d's
// kvevents.Pool): one sink per replica for its block pool; the events a replica's step emitted are published when
// that step ends (vLLM ≥ 0.14 publishes in Scheduler.update_from_output) and applied cache_signal_delay later.
class KvEventFeed {
public:
    virtual ~KvEventFeed() = default;
    [[nodiscard]] virtual cache::KvEventSink& sink(std::size_t replica) = 0;
    // The events replica `replica` emitted since its last publish leave it at `at`.
    virtual void publish(std::size_t replica, core::SimTime at) = 0;
};

class Router {
public:
    virtual ~Router() = default;

    // `loads` has one entry per replica; it is filled only for routers that read it (needs_loads), so routing stays
    // O(1) per request for the others, whatever the cluster size.
    // Each router overrides one of the two: the first (load and prompt only) or the second (time and block hashes);
    // the simulation calls the second.
    [[nodiscard]] virtual std::size_t route(const core::TokenContent& prompt, const std::vector<ReplicaLoad>& loads) {
        return route(RouteRequest{prompt, core::SimTime::zero(), {}}, loads);
    }
    [[nodiscard]] virtual std::size_t route(const RouteRequest& request, const std::vector<ReplicaLoad>& loads) {
        return route(request.prompt, loads);
    }

    [[nodiscard]] virtual bool needs_loads() const { return false; }
    [[nodiscard]] virtual bool needs_block_hashes() const { return false; }
    // Where the replicas' KV events go, for a router that reads them (nullptr: it reads none).
    [[nodiscard]] virtual KvEventFeed* kv_event_feed() { return nullptr; }
};

struct RouterEntry {
    std::string_view name;
    std::string_view description;
    std::unique_ptr<Router> (*make)(const RouterOptions&);
};

// The registry: round_robin, least_loaded, vllm_dp, prefix_affinity, llm_d, dynamo_kv, session_affinity.
[[nodiscard]] const std::vector<RouterEntry>& router_table();

// Throws ConfigError listing the known names.
[[nodiscard]] std::unique_ptr<Router> make_router(std::string_view name, const RouterOptions& options = {});

}  // namespace servesim::cluster
