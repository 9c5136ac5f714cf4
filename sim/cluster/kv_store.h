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

#include "sim/cache/cpu_offload.h"
#include "common/yaml_reader.h"
#include "sim/cache/kv_connector.h"
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

// An open-addressing hash map from a block key (a chained block hash) to a value, `kEmpty` marking a free slot (never
// stored): linear probing, backward-shift deletion, load at most 1/2, Fibonacci hashing. The precise router index
// (ReplicaBlockSets) probes it once per prompt block, so a node-based map's cache miss per probe dominated a cluster
// run (bench/README.md, "The cluster benchmark"); the LRU tiers' index is NodeKeyIndex, with half-size slots.
template <typename V, V kEmpty>
class FlatKeyMap {
public:
    FlatKeyMap() { rehash(16); }
    // The value of `key`, or kEmpty.
    [[nodiscard]] V find(std::uint64_t key) const {
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.value == kEmpty || s.key == key) {
                return s.value;
            }
        }
    }
    // The stored value of `key` for an update in place (not to kEmpty), or nullptr.
    [[nodiscard]] V* find_value(std::uint64_t key) {
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.value == kEmpty) {
                return nullptr;
            }
            if (s.key == key) {
                return &s.value;
            }
        }
    }
    // Where find(key) starts probing, for __builtin_prefetch by a caller that knows its keys ahead (the prefetch sits
    // in the caller's body, as for cache::PrefixIndex::probe_address).
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return &slots_[home(key)]; }
    // `key` must be absent and `value` not kEmpty.
    void insert(std::uint64_t key, V value) {
        if (size_ >= max_size_) {  // load at most 1/2
            rehash(2 * slots_.size());
        }
        std::size_t i = home(key);
        while (slots_[i].value != kEmpty) {
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{key, value};
        ++size_;
    }
    // `key` must be present.
    void erase(std::uint64_t key) {
        // No free slot lies between a present key's home and its slot, so the first slot holding `key` is its own
        // (a free slot's key is not read as a match before it).
        std::size_t i = home(key);
        while (slots_[i].key != key) {
            i = (i + 1) & mask_;
        }
        // Backward shift: pull later entries of the probe run into the hole unless their home lies after it.
        for (std::size_t j = (i + 1) & mask_; slots_[j].value != kEmpty; j = (j + 1) & mask_) {
            if (((j - home(slots_[j].key)) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Slot{};
        --size_;
    }
    [[nodiscard]] std::size_t size() const { return size_; }

private:
    struct Slot {
        std::uint64_t key = 0;
        V value = kEmpty;
    };
    [[nodiscard]] std::size_t home(std::uint64_t key) const {
        return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
    }
    void rehash(std::size_t num_slots) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(num_slots, Slot{});
        mask_ = num_slots - 1;
        shift_ = 64 - std::countr_zero(num_slots);
        max_size_ = num_slots / 2;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.value != kEmpty) {
                insert(s.key, s.value);
            }
        }
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 64;
    std::size_t size_ = 0;
    std::size_t max_size_ = 0;  // half the slots: an insert at this size grows the table first
};

// The LRU tiers' index: block key → node, for keys whose node holds them (LruBlockTiers's key array). A slot is 8
// bytes, the node and a 32-bit tag of the key (the high half of its Fibonacci hash), not the 16 of a FlatKeyMap slot
// (an 8-byte key and a 4-byte value, padded): half the memory, so a probe run crosses a cache line half as often and
// the table is half the lines (the pool's 2^20 slots: 8 MiB instead of 16; bench/README.md, "Cluster memory
// traffic"). A tag that matches is confirmed against the node's key, which a walk that finds a key reads next anyway;
// a key that is absent is mostly told by its tag alone. The home slot is the tag's top bits (as FlatKeyMap's: the
// same hash, the same slots), so erase's backward shift and the growth need no key. Linear probing, load at most 1/2.
class NodeKeyIndex {
public:
    static constexpr std::uint32_t npos = 0xffffffffu;
    NodeKeyIndex() { rehash(16); }
    // The node holding `key` (npos: none); node_keys[n] is node n's key.
    [[nodiscard]] std::uint32_t find(std::uint64_t key, const std::uint64_t* node_keys) const {
        const std::uint32_t t = tag(key);
        for (std::size_t i = home(t);; i = (i + 1) & mask_) {
            const Slot s = slots_[i];
            if (s.node == npos || (s.tag == t && node_keys[s.node] == key)) {
                return s.node;
            }
        }
    }
    // Where find(key) starts probing, for __builtin_prefetch.
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return &slots_[home(tag(key))]; }
    // `key` must be absent and `node` not npos.
    void insert(std::uint64_t key, std::uint32_t node) {
        if (size_ >= max_size_) {  // load at most 1/2
            rehash(2 * slots_.size());
        }
        put(tag(key), node);
    }
    // erase(old_key, old_node) then insert(new_key, new_node), without insert's growth check (the size is back to
    // what it was).
    void replace(std::uint64_t old_key, std::uint32_t old_node, std::uint64_t new_key, std::uint32_t new_node) {
        erase(old_key, old_node);
        put(tag(new_key), new_node);
    }
    // `key` must be present, in `node` (the slot is found by its node: each node is in one slot at most).
    void erase(std::uint64_t key, std::uint32_t node) {
        std::size_t i = home(tag(key));
        while (slots_[i].node != node) {
            i = (i + 1) & mask_;
        }
        // Backward shift: pull later entries of the probe run into the hole unless their home lies after it.
        for (std::size_t j = (i + 1) & mask_; slots_[j].node != npos; j = (j + 1) & mask_) {
            if (((j - home(slots_[j].tag)) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Slot{};
        --size_;
    }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] std::size_t num_slots() const { return slots_.size(); }

private:
    struct Slot {
        std::uint32_t tag = 0;
        std::uint32_t node = npos;
    };
    static_assert(sizeof(Slot) == 8);
    [[nodiscard]] static std::uint32_t tag(std::uint64_t key) {
        return static_cast<std::uint32_t>((key * 0x9e3779b97f4a7c15ULL) >> 32);
    }
    [[nodiscard]] std::size_t home(std::uint32_t t) const { return static_cast<std::size_t>(t >> shift_); }
    void put(std::uint32_t t, std::uint32_t node) {
        std::size_t i = home(t);
        while (slots_[i].node != npos) {
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{t, node};
        ++size_;
    }
    // The table regrown to num_slots (a power of two, at most 2^32: the home is the tag's top bits).
    void rehash(std::size_t num_slots);

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 32;
    std::size_t size_ = 0;
    std::size_t max_size_ = 0;  // half the slots: an insert at this size grows the table first
};

// Tiers of blocks under one index, each block in at most one tier (Mooncake's pool: one copy of a key over all the
// hosts' segments): per tier a capacity in blocks and an LRU order, eviction only when inserting into a full tier. Each
// block is a node (its key, and the previous and next nodes of its tier's list: 16 bytes, in two arrays) in an arena of
// up to twice the tiers' capacity; an index (NodeKeyIndex) maps the key to its node. An insert given a walk's cursor
// takes the node after the cursor's when it is free, else a new node below the limit, else the next free node of a
// sweep over the arena (about half the nodes are free once the tiers are full, and the sweep reaches the oldest
// regions, emptied first by the LRU). So the blocks inserted together (a step's saves, a routed prompt) sit in
// consecutive nodes, and stay so while they live. The walks follow that: a walk remembers the node of the block it
// touched last (Cursor) and looks for the next block in the node after it before probing the index, which on a chain of
// consecutive nodes turns a random read per block (the index's slot) into a sequential one (bench/README.md, "Fourth
// round"). The list relinks a touch does are then on neighbouring nodes too. Each tier allocates in its own region of
// the arena (tier t: nodes from t << region_shift_), so a node's tier is its index shifted, not a second array's line.
// Only where nodes lie is new: which blocks a tier holds and its LRU order are those of any LRU.
// (Reusing each victim's node for the block that replaced it kept chains in a row at 100k requests of the cluster
// benchmark, but they frayed as the run went on: 45 s at 1M against 32 s with the sweep.)
class LruBlockTiers {
public:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    // Where a walk over a chain of blocks stands: the node of the block it touched or inserted last.
    struct Cursor {
        std::uint32_t node = 0xffffffffu;
    };
    LruBlockTiers(std::size_t num_tiers, std::int64_t capacity_blocks_each);

    // The tier holding `key`, or npos.
    [[nodiscard]] std::size_t tier_of(std::uint64_t key) const {
        const std::uint32_t n = index_.find(key, keys_.data());
        return n == kNil ? npos : tier_at(n);
    }
    [[nodiscard]] bool contains(std::uint64_t key) const { return index_.find(key, keys_.data()) != kNil; }
    // contains(key) in a walk: the node after `at` is tried first; `at` moves to the key's node when it is held.
    [[nodiscard]] bool contains(std::uint64_t key, Cursor& at) const {
        const std::uint32_t n = find_node(key, at);
        if (n == kNil) {
            return false;
        }
        at.node = n;
        return true;
    }
    // Whether `key` is still in the node a walk found it in earlier (`at`, from contains or touch_find): since then it
    // may have been evicted, its node freed or given to another key. No two live nodes hold the same key, so a yes is
    // what contains(key) would answer, without the index probe; a no says nothing (the key may sit elsewhere).
    [[nodiscard]] bool holds_at(std::uint64_t key, const Cursor& at) const {
        return at.node < keys_.size() && holds(at.node, key);
    }
    // A prefetch for a holds_at(·, at) coming later: the node's line. A hint only: nothing observable changes.
    void prefetch_node(const Cursor& at) const {
        if (at.node < keys_.size()) {
            __builtin_prefetch(&keys_[at.node]);
        }
    }
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return index_.probe_address(key); }
    // A prefetch for a touch of `key` coming later in a walk: the key's home slot in the index. A hint only: nothing
    // observable changes.
    void prefetch_touch(std::uint64_t key) const { __builtin_prefetch(probe_address(key)); }
    // A prefetch for a walk at `at` that will touch `key` `distance` blocks later: when the node that many places on
    // does not hold it (the chain breaks before), the key's index slot is requested, which the walk will probe.
    void prefetch_walk(std::uint64_t key, std::size_t distance, const Cursor& at) const {
        const std::size_t guess = static_cast<std::size_t>(at.node + 1) + distance;
        if (guess >= keys_.size() || keys_[guess] != key) {
            __builtin_prefetch(probe_address(key));
        }
    }
    // Moves `key` to its tier's most-recent end; nothing when absent.
    void touch(std::uint64_t key) {
        Cursor at;
        (void)touch_find(key, at);
    }
    // touch(key), returning the tier that holds it (npos when absent): one probe instead of tier_of + touch.
    std::size_t touch_find(std::uint64_t key) {
        Cursor at;
        return touch_find(key, at);
    }
    // touch_find(key) in a walk: the node after `at` is tried first; `at` moves to the key's node when it is held.
    std::size_t touch_find(std::uint64_t key, Cursor& at);
    // A walk that touches blocks in turn (the pool's lookup, the router's index update) with the moves to the
    // most-recent end deferred: the blocks touched last that follow one another in their tier's list (a run) are
    // moved together when the run ends. Touching x then y one at a time, where y comes right after x in the list,
    // leaves ... x y at the end, which is the run [x, y] moved as one, so the order is that of the single touches
    // (vLLM's and Mooncake's LRU semantics unchanged) for one relink per run instead of one per block. A prompt's
    // blocks, touched or put in order before, mostly follow one another in the list.
    struct TouchWalk {
        Cursor at;                       // the node touched last: the run's last node when one is pending
        std::uint32_t run_first = 0xffffffffu;  // the pending run's first node (none: 0xffffffff)
        std::uint32_t run_len = 0;              // the pending run's nodes (what end_touches moves)
    };
    // touch_find(key) in a deferred walk. The run must be ended (end_touches) before anything else reads or changes
    // the tiers' order: an insert, an eviction, another walk. Inline for the common case, a run going on: the key is
    // in the node after the run's last, which is also next in the list (what the general case finds first, and then
    // it only moves the cursor); the rest is touch_find_general.
    std::size_t touch_find(std::uint64_t key, TouchWalk& walk) {
        const std::uint32_t guess = walk.at.node + 1;
        // (next == guess says guess is live: a live node's next is a live node of its list.)
        if (walk.run_first != kNil && guess < keys_.size() && keys_[guess] == key &&
            links_[walk.at.node].next == guess) {
            walk.at.node = guess;
            ++walk.run_len;
            return tier_at(guess);
        }
        return touch_find_general(key, walk);
    }
    // Moves the walk's pending run, if any, to its tier's most-recent end.
    void end_touches(TouchWalk& walk);

    // A proof, without reading the nodes, that blocks at a tier's most-recent end are still held. A tier counts its
    // shifts: each eviction, and each node a touch moves to the most-recent end. Each shift brings any other node at
    // most one place nearer the least-recent end (an insert adds a node behind it); a node is evicted only from that
    // end. So the `count` nodes at a tier's most-recent end when the guard is taken, with `ahead` = size − count
    // nodes before them, are all still held while at most `ahead` shifts have happened since (SharedKvStore uses it
    // for the blocks a lookup has just touched: their saves need no probe, docs/CLUSTER.md "Store traffic").
    struct TailGuard {
        std::size_t tier = 0;
        std::uint64_t shifts = 0;  // the tier's shifts when the guard was taken
        std::int64_t ahead = 0;    // nodes of the tier before the guarded ones
    };
    [[nodiscard]] TailGuard guard_tail(std::size_t tier, std::int64_t count) const {
        const List& l = lists_[tier];
        return TailGuard{tier, l.shifts, l.size - count};
    }
    [[nodiscard]] bool guard_holds(const TailGuard& g) const {
        return lists_[g.tier].shifts - g.shifts <= static_cast<std::uint64_t>(g.ahead);
    }

    // The walks' common case as one loop. A prompt's blocks, put or routed together, sit in consecutive nodes (see
    // above), so a walk mostly finds key i + 1 in the node after key i's; these loops go along such a stretch and
    // stop at the first key that is elsewhere or absent, which the caller then looks up as one key. Each key of the
    // stretch is what the one-key call would find, in the same node, so which keys are held, their order and every
    // output are unchanged; the loop only drops the per-key call, bounds and member reloads (bench/README.md,
    // "Seventh round"). Both issue prefetch_walk's hint for the key `distance` places on (distance 0: none).
    //
    // How many leading keys[i] are held in the nodes after `at`'s, in order (what contains(keys[i], at) finds one by
    // one); `at` moves to the last one's node.
    template <typename Key>
    std::size_t contains_run(std::span<const Key> keys, std::size_t distance, Cursor& at) const {
        const std::uint32_t first = at.node + 1;  // kNil + 1 wraps to node 0, as in find_node
        if (first >= keys_.size()) {
            return 0;
        }
        const std::uint64_t* p = keys_.data() + first;  // p[i]: keys[i]'s candidate's key
        const Key* k = keys.data();
        const std::size_t found = run_loop(
            std::min(keys.size(), keys_.size() - first), distance,
            [&](std::size_t i) { return p[i] == key_value(k[i]) && live_if_free_key(first + i, p[i]); },
            [&](std::size_t i) { return p[i] == key_value(k[i]); }, [&](std::size_t i) { return key_value(k[i]); });
        if (found > 0) {
            at.node = static_cast<std::uint32_t>(first + found - 1);
        }
        return found;
    }
    // How many leading keys[i] continue the walk's pending run (what touch_find(keys[i], walk) finds one by one on
    // its inline path: the node after the run's last, next in its list); `walk.at` moves to the last one's node. 0
    // when no run is pending. The keys found all sit in the run's tier (a list links nodes of one tier).
    template <typename Key>
    std::size_t touch_run(std::span<const Key> keys, std::size_t distance, TouchWalk& walk) const {
        if (walk.run_first == kNil) {
            return 0;
        }
        // Node c + 1 + i is keys[i]'s candidate; a live node's next is a live node of its list (or kNil), so
        // next == c + 1 + i says it is live (and exists).
        const std::uint32_t c = walk.at.node;
        const Link* p = links_.data() + c;           // p[i]: the node before keys[i]'s candidate
        const std::uint64_t* q = keys_.data() + c + 1;  // q[i]: the candidate's key
        const Key* k = keys.data();
        const std::size_t found = run_loop(
            std::min(keys.size(), keys_.size() - c - 1), distance,
            [&](std::size_t i) { return p[i].next == c + 1 + i && q[i] == key_value(k[i]); },
            [&](std::size_t i) { return q[i] == key_value(k[i]); },
            [&](std::size_t i) { return key_value(k[i]); });
        walk.at.node = static_cast<std::uint32_t>(c + found);
        walk.run_len += static_cast<std::uint32_t>(found);
        return found;
    }
    // How many leading keys[i] are still held in the nodes found[i] a walk found them in earlier (what holds_at
    // answers one by one); `at` moves to the last one's node. The hint, for the key `distance` places on: its node's
    // line when it was found, else prefetch_walk's.
    template <typename Key>
    std::size_t held_run(std::span<const Key> keys, std::span<const Cursor> found, std::size_t distance,
                         Cursor& at) const {
        const std::uint64_t* node_keys = keys_.data();
        const std::size_t num_nodes = keys_.size();
        const Key* k = keys.data();
        const Cursor* f = found.data();
        const std::size_t n = keys.size();
        const auto held = [&](std::size_t i) {
            const std::uint32_t node = f[i].node;
            return node < num_nodes && node_keys[node] == key_value(k[i]) && live_if_free_key(node, node_keys[node]);
        };
        // Found nodes mostly follow one another (their lines stream in): four places a round, the four `distance` on
        // are looked at only when they do not (a jump's node is requested ahead, a key found nowhere gets
        // prefetch_walk's hint).
        const auto hint_round = [&](std::size_t pos) {
            if (f[pos + 3].node == f[pos - 1].node + 4) {
                return;
            }
            for (std::size_t j = pos; j < pos + 4; ++j) {
                const std::uint32_t ahead = f[j].node;
                if (ahead == f[j - 1].node + 1) {
                    continue;
                }
                if (ahead == kNil) {
                    prefetch_walk(key_value(k[j]), distance, at);
                } else if (ahead < num_nodes) {
                    __builtin_prefetch(&node_keys[ahead]);
                }
            }
        };
        std::size_t i = 0;
        for (; i + 4 <= n; i += 4) {
            if (distance != 0 && i + distance + 3 < n) {
                hint_round(i + distance);
            }
            for (std::size_t j = i; j < i + 4; ++j) {
                if (!held(j)) {
                    if (j > 0) {
                        at.node = f[j - 1].node;
                    }
                    return j;
                }
            }
            at.node = f[i + 3].node;
        }
        while (i < n && held(i)) {
            ++i;
        }
        if (i > 0) {
            at.node = f[i - 1].node;
        }
        return i;
    }
    // The tier of the node a walk stands on (a cursor on a live node).
    [[nodiscard]] std::size_t tier_at(const Cursor& at) const { return tier_at(at.node); }
    // Inserts an absent `key` at `tier`'s most-recent end, first evicting that tier's least recent block when it is
    // full (that key is written to *evicted when given). Nothing when the key is held somewhere or the capacity is 0.
    // Returns whether a block was evicted. `at`, when given, is a walk's cursor (the node after it is tried first for
    // the key) and moves to the key's node, held already or inserted.
    bool insert(std::size_t tier, std::uint64_t key, std::uint64_t* evicted = nullptr, Cursor* at = nullptr);
    // insert() of a key the caller has just found absent (a touch or contains that missed, nothing inserted since):
    // the same without the probe that would find it absent again.
    bool insert_absent(std::size_t tier, std::uint64_t key, std::uint64_t* evicted = nullptr, Cursor* at = nullptr);
    [[nodiscard]] std::int64_t size(std::size_t tier) const { return lists_[tier].size; }
    [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(live_); }

private:
    static constexpr std::uint32_t kNil = NodeKeyIndex::npos;
    static constexpr std::uint32_t kFree = kNil - 1;  // a free node's prev (node indices stay below it)
    // A free node's key, so that a key compare alone says a node is live unless the key sought is this one (a
    // block hash may be; then the node's prev decides).
    static constexpr std::uint64_t kFreeKey = ~std::uint64_t{0};
    // A node's place in its tier's list: the previous and next nodes (node indices; kNil at the ends); prev kFree:
    // a free node.
    struct Link {
        std::uint32_t prev = kFree;
        std::uint32_t next = kNil;
    };
    static_assert(sizeof(Link) == 8);
    // Whether node n, whose key is `key`, is live: yes unless the key is kFreeKey (a free node's key); then its
    // prev says.
    [[nodiscard]] bool live_if_free_key(std::uint32_t n, std::uint64_t key) const {
        return key != kFreeKey || links_[n].prev != kFree;
    }
    // Whether node n (< the node count) is live and holds `key`.
    [[nodiscard]] bool holds(std::uint32_t n, std::uint64_t key) const {
        return keys_[n] == key && live_if_free_key(n, key);
    }
    // A tier: its LRU list and its region of the arena, [begin, limit): nodes below `end` have been used, the sweep
    // goes round [begin, end).
    struct List {
        std::uint32_t head = kNil;  // least recent
        std::uint32_t tail = kNil;  // most recent
        std::int64_t size = 0;
        std::uint32_t begin = 0;
        std::uint32_t end = 0;
        std::uint32_t limit = 0;
        std::uint32_t sweep = 0;
        std::uint64_t shifts = 0;  // evictions and nodes moved to the most-recent end so far (TailGuard)
    };
    [[nodiscard]] std::size_t tier_at(std::uint32_t n) const {
        return static_cast<std::size_t>(static_cast<std::uint64_t>(n) >> region_shift_);
    }
    // The node holding `key` (kNil: none), the one after `at` tried first. No two live nodes hold the same key, so a
    // live node whose key matches is the key's node.
    [[nodiscard]] std::uint32_t find_node(std::uint64_t key, const Cursor& at) const {
        const std::uint32_t guess = at.node + 1;  // kNil + 1 wraps to node 0: a valid guess too
        if (guess < keys_.size() && holds(guess, key)) {
            return guess;
        }
        return index_.find(key, keys_.data());
    }
    std::size_t touch_find_general(std::uint64_t key, TouchWalk& walk);
    [[nodiscard]] static std::uint64_t key_value(std::uint64_t key) { return key; }
    [[nodiscard]] static std::uint64_t key_value(core::BlockHash key) { return core::to_int(key); }
    // The loop contains_run and touch_run share: how many leading positions i < limit pass `ok` (key i is in its
    // candidate node and the run may go on there). Its hint: while no break is foreseen, every fourth position it
    // compares the candidate `distance` + 3 places on (`same`: the key is there, the part of `ok` that predicts); a
    // difference means the stretch ends by then, so the first differing of those four has its index slot requested
    // (`key_at`), which the walk will probe once the run stops there. One hint per call: the keys after a break lie in
    // another stretch, which these nodes cannot predict. Four positions a round, so the loop tests its bound and the
    // hint a quarter as often.
    template <typename Ok, typename Same, typename KeyAt>
    std::size_t run_loop(std::size_t limit, std::size_t distance, Ok ok, Same same, KeyAt key_at) const {
        std::size_t i = 0;
        bool hinted = distance == 0;
        for (; i + 4 <= limit; i += 4) {
            if (!hinted && i + distance + 3 < limit && !same(i + distance + 3)) {
                std::size_t b = i + distance;
                while (same(b)) {
                    ++b;
                }
                __builtin_prefetch(probe_address(key_at(b)));
                hinted = true;
            }
            if (!ok(i)) {
                return i;
            }
            if (!ok(i + 1)) {
                return i + 1;
            }
            if (!ok(i + 2)) {
                return i + 2;
            }
            if (!ok(i + 3)) {
                return i + 3;
            }
        }
        while (i < limit && ok(i)) {
            ++i;
        }
        return i;
    }
    void unlink(std::uint32_t n);
    void append(std::uint32_t n);
    // insert_absent into tier `l`, capacity > 0.
    [[gnu::always_inline]] bool put_absent(List& l, std::uint64_t key, std::uint64_t* evicted, Cursor* at);
    // Node n (free, of `l`'s region) takes `key` at `l`'s most-recent end; `at`, when given, moves to it.
    [[gnu::always_inline]] void link_new(List& l, std::uint32_t n, std::uint64_t key, Cursor* at);
    // A node of `l`'s region for a key inserted after the one at `at` (nullptr: none): the node after `at` when it is
    // a free node of the region, else a new one while the region is below its limit, else the next free node from
    // the region's sweep.
    [[gnu::always_inline]] std::uint32_t allocate(List& l, const Cursor* at);
    // The nodes grown to hold node n (a region's new node past the end).
    [[gnu::noinline]] void grow_nodes(std::uint32_t n);
    // The next free node of `l`'s region from its sweep (the region is at its limit).
    [[gnu::noinline]] std::uint32_t sweep(List& l);

    std::int64_t capacity_;
    NodeKeyIndex index_;                     // key → node
    // The nodes, live and free. Per tier up to twice its capacity (List::limit), so that about half are free once
    // the tier is full: a run of inserts then takes a run of consecutive free nodes (a chain of blocks stays in a
    // row) instead of its victims' nodes, wherever those lay. The unused end of a region holds free nodes.
    // A node is its key (keys_) and its links (links_), in two arrays: the walks that only ask whether a node holds
    // a key (contains_run, held_run, the hints) read the keys alone, eight nodes a cache line instead of four
    // (bench/README.md, "Cluster memory traffic"); a free node's key is kFreeKey.
    std::vector<std::uint64_t> keys_;
    std::vector<Link> links_;
    std::size_t live_ = 0;
    int region_shift_ = 32;  // tier t's nodes start at t << region_shift_ (one tier: all nodes are tier 0's)
    std::vector<List> lists_;
};

// One tier: capacity in blocks, LRU order (front = least recent), eviction only when inserting into a full tier.
class LruBlockTier {
public:
    using Cursor = LruBlockTiers::Cursor;
    explicit LruBlockTier(std::int64_t capacity_blocks) : tiers_(1, capacity_blocks) {}
    [[nodiscard]] bool contains(std::uint64_t key) const { return tiers_.contains(key); }
    [[nodiscard]] bool contains(std::uint64_t key, Cursor& at) const { return tiers_.contains(key, at); }
    [[nodiscard]] bool holds_at(std::uint64_t key, const Cursor& at) const { return tiers_.holds_at(key, at); }
    void prefetch_node(const Cursor& at) const { tiers_.prefetch_node(at); }
    void touch(std::uint64_t key) { tiers_.touch(key); }
    // touch(key), returning whether it is held.
    bool touch_if_held(std::uint64_t key) { return tiers_.touch_find(key) != LruBlockTiers::npos; }
    // The same in a walk (LruBlockTiers::touch_find with a cursor).
    bool touch_if_held(std::uint64_t key, Cursor& at) { return tiers_.touch_find(key, at) != LruBlockTiers::npos; }
    // The same in a deferred walk (LruBlockTiers::TouchWalk), ended by end_touches.
    using TouchWalk = LruBlockTiers::TouchWalk;
    bool touch_if_held(std::uint64_t key, TouchWalk& walk) {
        return tiers_.touch_find(key, walk) != LruBlockTiers::npos;
    }
    void end_touches(TouchWalk& walk) { tiers_.end_touches(walk); }
    // As LruBlockTiers::contains_run, touch_run and held_run.
    template <typename Key>
    std::size_t contains_run(std::span<const Key> keys, std::size_t distance, Cursor& at) const {
        return tiers_.contains_run(keys, distance, at);
    }
    template <typename Key>
    std::size_t touch_run(std::span<const Key> keys, std::size_t distance, TouchWalk& walk) const {
        return tiers_.touch_run(keys, distance, walk);
    }
    template <typename Key>
    std::size_t held_run(std::span<const Key> keys, std::span<const Cursor> found, std::size_t distance,
                         Cursor& at) const {
        return tiers_.held_run(keys, found, distance, at);
    }
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return tiers_.probe_address(key); }
    void prefetch_touch(std::uint64_t key) const { tiers_.prefetch_touch(key); }
    void prefetch_walk(std::uint64_t key, std::size_t distance, const Cursor& at) const {
        tiers_.prefetch_walk(key, distance, at);
    }
    // As LruBlockTiers::insert and insert_absent.
    bool insert(std::uint64_t key, std::uint64_t* evicted = nullptr, Cursor* at = nullptr) {
        return tiers_.insert(0, key, evicted, at);
    }
    bool insert_absent(std::uint64_t key, std::uint64_t* evicted = nullptr, Cursor* at = nullptr) {
        return tiers_.insert_absent(0, key, evicted, at);
    }
    [[nodiscard]] std::int64_t size() const { return tiers_.size(); }

private:
    LruBlockTiers tiers_;
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
