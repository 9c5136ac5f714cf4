// LRU tiers of KV blocks under one index, the capacity and eviction rule of the cluster's KV stores (a Mooncake
// segment per host, LMCache's local and remote tiers; kv_store.h) and of the routers' per-replica block sets
// (router.cpp): per tier a capacity in blocks and an LRU order, eviction only on inserting into a full tier, a hit
// refreshing its block, as the stores' own LRU eviction does. The arena layout keeps chained blocks in consecutive
// nodes so walks read them sequentially (bench/README.md, "Fourth round"); it changes only where nodes lie.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/cluster/block_key_index.h"
#include "sim/core/ids.h"

namespace servesim::cluster {

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

}  // namespace servesim::cluster
