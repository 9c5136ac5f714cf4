// SharedKvStore: a KV cache store shared by the replicas of a cluster, behind vLLM's KV-connector interface
// (cache::KvConnector; one view per replica). Two layouts:
//   mooncake — a global pool over the hosts' DRAM (Mooncake Store, FAST'25; vLLM's MooncakeStoreConnector,
//              vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/scheduler.py): a block is written into
//              the writer's host segment unless some segment already holds it; every replica finds every block.
//   lmcache  — LMCache (vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/vllm_v1_adapter.py): a
//              per-host CPU tier seen only by the replicas of that host, plus (optional) one remote store seen by
//              all; blocks are written to both; the local tier is searched first. Without a remote store it is a
//              node-local cache: the "local cache" of Mooncake's local-vs-global comparison. Decode blocks are not saved
//              (save_decode_cache defaults to False); Mooncake saves them.
// Both: store policy eager (every newly full block, as both connectors save on compute), capacity in blocks and LRU
// eviction per tier (a hit refreshes its blocks), lookup by chained block hash from block 0 in whole blocks
// (discard_partial_chunks; the connector returns pool hit − local hit), and the load of a hit from where its blocks
// sit over the topology (TransferTracker: shared edges split their bandwidth) while the request waits in
// WAITING_FOR_REMOTE_KVS (vllm/v1/core/sched/scheduler.py). A store lands at the end of the step that computed its
// blocks (wait_for_save); stores take no network time (docs/CLUSTER.md).
// Full-attention models only (the scenario refuses a hybrid).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cache/cpu_offload.h"
#include "common/yaml_reader.h"
#include "sim/cache/kv_connector.h"
#include "sim/cluster/topology.h"

namespace servesim::cluster {

enum class KvStoreKind { kMooncake, kLmcache };

struct KvStoreConfig {
    KvStoreKind kind = KvStoreKind::kMooncake;
    int block_size_tokens = 16;
    double bytes_per_block = 0;              // one block's KV over all layers and tensor-parallel ranks
    std::int64_t host_capacity_blocks = 0;   // per host: Mooncake's segment, LMCache's local CPU tier
    std::int64_t remote_capacity_blocks = 0; // LMCache's remote store (0: none)
    std::size_t remote_vertex = Topology::npos;  // the remote store's vertex (LMCache)
};

// One tier: capacity in blocks, LRU order (front = least recent), eviction only when inserting into a full tier.
class LruBlockTier {
public:
    explicit LruBlockTier(std::int64_t capacity_blocks) : capacity_(capacity_blocks) {}
    [[nodiscard]] bool contains(std::uint64_t key) const { return index_.count(key) != 0; }
    void touch(std::uint64_t key);
    void insert(std::uint64_t key);
    [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(lru_.size()); }

private:
    std::int64_t capacity_;
    std::list<std::uint64_t> lru_;
    std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> index_;
};

// `cluster.kv_connector:` as written (type, store, per-host and remote capacity, the remote store's node), kept
// with where it was written for messages. Sizes: *_gib (GiB, as --kv-offloading-size) or *_tokens.
struct KvConnectorSettings {
    KvStoreKind kind = KvStoreKind::kMooncake;
    std::optional<double> host_size_gib;
    std::optional<std::int64_t> host_size_tokens;
    std::optional<double> remote_size_gib;
    std::optional<std::int64_t> remote_size_tokens;
    std::string remote;  // LMCache: the remote store's node (default: the topology's first storage node)
    std::string file;
    std::string key;     // "cluster.kv_connector"
    int line = 0;
};

[[nodiscard]] KvConnectorSettings parse_kv_connector(const YamlMap& m);

// The store's configuration for a run, checked against the topology before anything is simulated: a topology is
// given, it has GPUs for replicas × tensor_parallel_size, no tier is larger than its node's memory (a host tier
// than its host's DRAM, the remote store than its node's). ConfigError names the file and key.
[[nodiscard]] KvStoreConfig make_kv_store_config(const KvConnectorSettings& s, const Topology* topology,
                                                 int block_size_tokens, double bytes_per_block, int replicas,
                                                 int gpus_per_replica);

class SharedKvStore {
public:
    // `replica_gpus[i]`: the GPU vertices of replica i (its tensor-parallel ranks); each replica's host is the one
    // nearest its first GPU.
    SharedKvStore(const KvStoreConfig& config, const Topology& topology,
                  std::vector<std::vector<std::size_t>> replica_gpus);
    ~SharedKvStore();
    SharedKvStore(const SharedKvStore&) = delete;
    SharedKvStore& operator=(const SharedKvStore&) = delete;

    [[nodiscard]] cache::KvConnector& connector(std::size_t replica);

    [[nodiscard]] std::int64_t num_resident_blocks() const;
    [[nodiscard]] std::size_t host_of(std::size_t replica) const { return replica_host_[replica]; }

private:
    class View;
    struct Source {
        std::size_t vertex = 0;
        std::int64_t blocks = 0;
    };

    std::int64_t lookup(std::size_t replica, std::span<const core::BlockHash> hashes, std::int64_t local_hit_tokens,
                        std::int64_t num_tokens, std::vector<Source>& sources);
    core::Duration start_load(std::size_t replica, const std::vector<Source>& sources, core::SimTime now);
    void commit(std::size_t replica, std::uint64_t key);
    // The tier holding `key` as replica `replica` sees it: a host index, kRemote, or kNone.
    [[nodiscard]] std::size_t where(std::size_t replica, std::uint64_t key) const;
    const TopologyPath& path(std::size_t from, std::size_t to);

    static constexpr std::size_t kRemote = static_cast<std::size_t>(-2);
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

    KvStoreConfig config_;
    const Topology& topology_;
    TransferTracker tracker_;
    std::vector<std::vector<std::size_t>> replica_gpus_;
    std::vector<std::size_t> replica_host_;  // index into hosts_
    std::vector<std::size_t> hosts_;         // host vertices in use
    std::vector<LruBlockTier> host_tiers_;
    LruBlockTier remote_;
    std::map<std::pair<std::size_t, std::size_t>, TopologyPath> paths_;
    std::vector<std::unique_ptr<View>> views_;
};

}  // namespace servesim::cluster
