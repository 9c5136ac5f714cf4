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
// sit over the topology (TransferTracker: shared links split their bandwidth, rerated as transfers start and end)
// while the request waits in WAITING_FOR_REMOTE_KVS (vllm/v1/core/sched/scheduler.py); a transfer that crosses the
// network is split over the NICs nearest each end (Mooncake Transfer Engine's slices, Topology::rail_paths). A store
// lands at the end of the step that computed its blocks (wait_for_save); its transfers start with that step and
// occupy the links they cross, without delaying the engine (docs/CLUSTER.md "Store traffic").
// Full-attention models only (the scenario refuses a hybrid).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cache/offload/cpu_offload.h"
#include "common/yaml_reader.h"
#include "sim/cache/offload/kv_connector.h"
#include "sim/cluster/lru_block_tiers.h"
#include "sim/cluster/topology.h"
#include "sim/cluster/transfer_tracker.h"
#include "sim/core/ids.h"

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
    // The transfers in flight (loads and saves): the simulation advances them and moves the loads' waits.
    [[nodiscard]] TransferTracker& transfers() { return tracker_; }

private:
    class View;
    struct Source {
        std::size_t vertex = 0;
        std::int64_t blocks = 0;
    };

    // The prompt blocks [0, blocks) a Mooncake lookup found in the pool, which it touched, so they end their tiers'
    // lists: while every guard holds (LruBlockTiers::TailGuard) they are all still held, and a save of one is a
    // skipped put, known without a probe. blocks 0: nothing known (LMCache, a miss at block 0, hits in more tiers
    // than kMaxTiers).
    struct HeldPrefix {
        static constexpr std::size_t kMaxTiers = 4;
        std::int64_t blocks = 0;
        LruBlockTiers::Cursor last;  // the node of block blocks − 1
        std::array<LruBlockTiers::TailGuard, kMaxTiers> guards{};
        std::size_t num_guards = 0;
    };
    // Keys [begin, end) of a step's saves that are blocks of a HeldPrefix; `last`: the node of the key before end when
    // it is the prefix's last block, else no node.
    struct HeldRange {
        std::size_t begin = 0;
        std::size_t end = 0;
        LruBlockTiers::Cursor last;
        HeldPrefix prefix;  // its guards
    };
    [[nodiscard]] bool still_held(const HeldPrefix& h) const;
    // A walk over a step's saves that passes the held ranges still proved held; start_saves and the step end's puts
    // share it. Positions must be visited in order, each range's begin among them.
    class HeldRangeWalk {
    public:
        HeldRangeWalk(const SharedKvStore& store, std::span<const HeldRange> held, std::size_t size)
            : store_(store), held_(held), size_(size) {}
        // Where the walk goes on from position i: past a range beginning at i that is still held (`at` then moves to
        // its last node when known), else i itself (a range that lapsed is walked as any keys).
        std::size_t skip(std::size_t i, LruBlockTiers::Cursor& at) {
            if (next_ == held_.size() || i != held_[next_].begin) {
                return i;
            }
            const HeldRange& range = held_[next_++];
            if (!store_.still_held(range.prefix)) {
                return i;
            }
            if (range.last.node != LruBlockTiers::Cursor{}.node) {
                at = range.last;
            }
            return range.end;
        }
        // Where a stretch walked from the current position ends: the next held range, or the end.
        [[nodiscard]] std::size_t stop() const { return next_ < held_.size() ? held_[next_].begin : size_; }

    private:
        const SharedKvStore& store_;
        std::span<const HeldRange> held_;
        std::size_t size_;
        std::size_t next_ = 0;
    };

    // get_num_new_matched_tokens. `held`, when given, receives what the lookup proves held (HeldPrefix).
    std::int64_t lookup(std::size_t replica, std::span<const core::BlockHash> hashes, std::int64_t local_hit_tokens,
                        std::int64_t num_tokens, std::vector<Source>& sources, HeldPrefix* held = nullptr);
    core::Duration start_load(std::size_t replica, const std::vector<Source>& sources, core::SimTime now,
                              TransferOwner owner);
    // The saves of a step launched at `now` start their transfers (they occupy the links they cross until done).
    // found[i]: where keys[i] was found in the tier `replica` writes first (Mooncake's pool, LMCache's local tier), or
    // a cursor on no node; the puts at the step's end check there first (commit).
    // held: ranges of keys (ascending, disjoint) whose blocks a lookup found (HeldRange); while still_held they are
    // counted as held without a probe, and their found[i] is no node.
    void start_saves(std::size_t replica, std::span<const std::uint64_t> keys, core::SimTime now,
                     std::span<LruBlockTiers::Cursor> found, std::span<const HeldRange> held);
    // Where a walk over many keys (a lookup, a step's saves) stands in each tier it reads (LruBlockTiers::Cursor): a
    // prompt's blocks, looked up or saved, mostly sit in consecutive nodes.
    struct WalkCursor {
        LruBlockTiers::Cursor pool;
        LruBlockTiers::Cursor local;
        LruBlockTiers::Cursor remote;
    };
    // The put of `key` at its step's end. `found`: where start_saves found it in the first tier (or no node). A key
    // still there is held, and a put of a held key changes nothing (Mooncake skips it; LMCache's tier insert of a
    // held key is no touch), so only the cursor moves; otherwise the put probes as usual.
    void commit(std::size_t replica, std::uint64_t key, const LruBlockTiers::Cursor& found, WalkCursor& at);
    // commit() of the leading keys still held where start_saves found them (Mooncake's pool: LruBlockTiers::held_run,
    // each put a skip that only moves the cursor), in one loop; how many. 0 for LMCache (each put writes a copy).
    std::size_t commit_held_run(std::span<const std::uint64_t> keys, std::span<const LruBlockTiers::Cursor> found,
                                std::size_t distance, WalkCursor& at) const;
    // A prefetch for the put of `key`, `distance` keys after the walk at `at`: the node start_saves found it in, or
    // else as prefetch_walk.
    void prefetch_put(std::size_t replica, std::uint64_t key, const LruBlockTiers::Cursor& found, std::size_t distance,
                      const WalkCursor& at) const;
    // A prefetch for a walk at `at` that will reach `key` `distance` keys later, in the tier `replica` reads and
    // writes first (Mooncake's pool, LMCache's local tier): its index slot unless the chain of nodes goes on to it
    // (LruBlockTiers::prefetch_walk).
    void prefetch_walk(std::size_t replica, std::uint64_t key, std::size_t distance, const WalkCursor& at) const;
    // One transfer per tensor-parallel rank of `replica`, each its share of `blocks` blocks between `vertex` and the
    // rank's GPU (towards the GPU for a load, from it for a save), cut into the slices of Topology::rail_paths;
    // returns when the slowest ends.
    core::Duration start_rank_transfers(std::size_t replica, std::size_t vertex, std::int64_t blocks, bool to_gpu,
                                        core::SimTime now, TransferOwner owner);
    // The tier holding `key` as replica `replica` sees it: a host index, kRemote, or kNone.
    [[nodiscard]] std::size_t where(std::size_t replica, std::uint64_t key) const;

    static constexpr std::size_t kRemote = static_cast<std::size_t>(-2);
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

    KvStoreConfig config_;
    const Topology& topology_;
    TransferTracker tracker_;
    std::vector<std::vector<std::size_t>> replica_gpus_;
    std::vector<std::size_t> replica_host_;  // index into hosts_
    std::vector<std::size_t> hosts_;         // host vertices in use
    std::vector<LruBlockTier> host_tiers_;  // LMCache: one per host
    LruBlockTiers pool_;                     // Mooncake: the hosts' segments, one copy of a block in all of them
    LruBlockTier remote_;
    RailPathCache paths_;  // the slices' paths of a transfer (spread over the NICs nearest each end)
    std::vector<std::unique_ptr<View>> views_;
};

}  // namespace servesim::cluster
