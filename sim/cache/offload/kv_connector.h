// KvConnector: what the scheduler asks of vLLM's KV connector (vllm/distributed/kv_transfer/kv_connector/v1/base.py
// KVConnectorBase_V1, scheduler side): after the local prefix lookup, how many more tokens an external store holds
// (get_num_new_matched_tokens), the load of those tokens while the request waits in WAITING_FOR_REMOTE_KVS
// (vllm/v1/core/sched/scheduler.py), the store of newly computed blocks (build_connector_meta), and the
// connector prefix-cache counters (Scheduler.connector_prefix_cache_stats). Implemented by the host tier of one
// engine (CpuOffloadManager, vLLM's OffloadingConnector) and by a replica's view of a cluster-wide store
// (sim/cluster/kv_store.h, Mooncake / LMCache).
#pragma once

#include <cstdint>
#include <span>

#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace servesim::cache {

struct CpuOffloadConfig;
struct ExternalCacheStats;

class KvConnector {
public:
    virtual ~KvConnector() = default;

    // External tokens beyond `local_hit_tokens` (whole blocks), for a request of `num_tokens`.
    [[nodiscard]] virtual std::int64_t lookup(std::span<const core::BlockHash> block_hashes,
                                              std::int64_t local_hit_tokens, std::int64_t num_tokens) = 0;

    // Starts the load of the external tokens the last lookup found, at `now`; returns how long it takes.
    [[nodiscard]] virtual core::Duration start_load(std::int64_t external_tokens, core::SimTime now) = 0;

    // The connector's counters after a successful allocation (queries num_tokens − local, hits external).
    virtual void record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens) = 0;

    // Stores attention blocks [first_block, end_block) and state snapshots [snapshot_first, snapshot_end).
    virtual void store(std::span<const core::BlockHash> block_hashes, std::int64_t first_block,
                       std::int64_t end_block, std::int64_t snapshot_first, std::int64_t snapshot_end,
                       std::int64_t num_hit_blocks) = 0;
    // store() of request `id`'s blocks (the scheduler's call): a connector that remembers what its lookup of the
    // request found overrides it (sim/cluster/kv_store.h: blocks the lookup has just found need no second probe).
    virtual void store_request(core::RequestId /*id*/, std::span<const core::BlockHash> block_hashes,
                               std::int64_t first_block, std::int64_t end_block, std::int64_t snapshot_first,
                               std::int64_t snapshot_end, std::int64_t num_hit_blocks) {
        store(block_hashes, first_block, end_block, snapshot_first, snapshot_end, num_hit_blocks);
    }

    // A step of the owning engine is launched at `now` (its stores were queued by the schedule() that built it: a
    // connector saves them while the step runs, KVConnectorBase_V1.save_kv_layer), and ends.
    virtual void on_step_start(core::SimTime /*now*/) {}
    virtual void on_step_end() = 0;

    [[nodiscard]] virtual const ExternalCacheStats& stats() const = 0;

    // The request-aware forms the scheduler calls (vLLM passes the Request to get_num_new_matched_tokens and to the
    // load it schedules): a connector that keeps per-request transfer parameters (the NixlConnector's
    // kv_transfer_params, sim/cluster/disaggregation.h) overrides them; the others answer as above.
    [[nodiscard]] virtual std::int64_t lookup_request(core::RequestId /*id*/,
                                                      std::span<const core::BlockHash> block_hashes,
                                                      std::int64_t local_hit_tokens, std::int64_t num_tokens) {
        return lookup(block_hashes, local_hit_tokens, num_tokens);
    }
    [[nodiscard]] virtual core::Duration start_load_request(core::RequestId /*id*/, std::int64_t external_tokens,
                                                            core::SimTime now) {
        return start_load(external_tokens, now);
    }
    // KVConnectorBase_V1.request_finished: true = the finished request's blocks stay allocated until the connector
    // reports it finished sending (Scheduler._free_request's delay_free_blocks; the replica frees them then).
    [[nodiscard]] virtual bool request_finished(core::RequestId /*id*/) { return false; }

    // The store rules the scheduler reads (block size, prompt-only, Mamba snapshots).
    [[nodiscard]] virtual const CpuOffloadConfig& config() const = 0;
};

}  // namespace servesim::cache
