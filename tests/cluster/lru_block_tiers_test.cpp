// Tests of sim/cluster/lru_block_tiers.*: LRU eviction per tier under one index, each tier's region of the arena,
// walks with cursors (chained and scattered blocks, deferred touches, runs) keeping the order a plain LRU list keeps,
// and the tail guards of held runs.
#include "sim/cluster/lru_block_tiers.h"

#include <initializer_list>
#include <list>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "tests/catch.h"

namespace servesim::cluster {
namespace {

TEST_CASE("KV store: a full segment evicts its least recently used block", "[cluster][kv_store]") {
    LruBlockTier t(2);
    t.insert(1);
    t.insert(2);
    t.touch(1);   // 2 is now the least recent
    t.insert(3);  // evicts 2
    CHECK(t.contains(1));
    CHECK_FALSE(t.contains(2));
    CHECK(t.contains(3));
    CHECK(t.size() == 2);
}

TEST_CASE("KV store: tiers under one index evict within their own tier", "[cluster][kv_store]") {
    // Two tiers of 2 blocks. Tier 0 gets 1, 2; tier 1 gets 3. Inserting 4 into tier 0 evicts its least recent (1),
    // not tier 1's 3; a key held in one tier is not inserted into another.
    LruBlockTiers t(2, 2);
    t.insert(0, 1);
    t.insert(0, 2);
    t.insert(1, 3);
    std::uint64_t evicted = 0;
    CHECK(t.insert(0, 4, &evicted));
    CHECK(evicted == 1);
    CHECK(t.tier_of(1) == LruBlockTiers::npos);
    CHECK(t.tier_of(3) == 1);
    CHECK_FALSE(t.insert(1, 2));
    CHECK(t.tier_of(2) == 0);
    CHECK(t.size(0) == 2);
    CHECK(t.size(1) == 1);
}

TEST_CASE("KV store: each tier takes its nodes from its own region of the arena", "[cluster][kv_store]") {
    // Two tiers of 3 blocks: each region is twice that, 6 nodes, rounded up to 8 in index space, so tier 0 uses
    // nodes 0-5 and tier 1 nodes 8-13 (a node's tier is its index >> 3). By hand: 1 into tier 0 takes node 0; 11 into
    // tier 1 after it does not take node 1 (tier 0's region) but 8; 12 after 11 takes 9; 2 into tier 0 after 12 takes
    // 1. Then 13, 14, 15, 16 into tier 1 (no cursor): 13 takes 10; 14 evicts 11 (node 8 freed) and takes 11; 15
    // evicts 12 (node 9 freed), takes 12; 16 evicts 13 (node 10 freed), takes 13: the region is at its limit. 17
    // evicts 14 (node 11 freed) and the region's sweep, from its start, gives node 8; 18 after 17 evicts 15 (node 12
    // freed) and takes node 9, the free one after 8. Tier 0 keeps 1 and 2 throughout.
    LruBlockTiers t(2, 3);
    LruBlockTiers::Cursor at;
    t.insert(0, 1, nullptr, &at);
    CHECK(at.node == 0);
    t.insert(1, 11, nullptr, &at);
    CHECK(at.node == 8);
    t.insert(1, 12, nullptr, &at);
    CHECK(at.node == 9);
    t.insert(0, 2, nullptr, &at);
    CHECK(at.node == 1);
    CHECK(t.tier_of(1) == 0);
    CHECK(t.tier_of(2) == 0);
    CHECK(t.tier_of(11) == 1);
    CHECK(t.tier_of(12) == 1);
    std::uint64_t evicted = 0;
    const std::uint32_t nodes[] = {10, 11, 12, 13};
    for (std::uint64_t k = 13; k <= 16; ++k) {
        LruBlockTiers::Cursor put;
        CHECK(t.insert(1, k, &evicted, &put) == (k >= 14));
        CHECK(put.node == nodes[k - 13]);
        if (k >= 14) {
            CHECK(evicted == k - 3);
        }
    }
    LruBlockTiers::Cursor put;
    CHECK(t.insert(1, 17, &evicted, &put));
    CHECK(evicted == 14);
    CHECK(put.node == 8);
    CHECK(t.insert(1, 18, &evicted, &put));
    CHECK(evicted == 15);
    CHECK(put.node == 9);
    CHECK(t.tier_of(17) == 1);
    CHECK(t.tier_of(18) == 1);
    CHECK(t.tier_of(1) == 0);
    CHECK(t.size(0) == 2);
    CHECK(t.size(1) == 3);
}

TEST_CASE("KV store: a walk's cursor finds chained and scattered blocks alike", "[cluster][kv_store]") {
    // Capacity 4 (an arena of up to 8 nodes), by hand. Inserts 1, 2, 3, 4 take nodes 0-3 (order 1 2 3 4). A walk
    // touches 3, 4 (nodes 2, 3 in a row: the second is found as the node after the first), then 1 (node 0, back to
    // the index), then 9 (absent): order 2 3 4 1, the cursor on node 0. Inserting 5 evicts 2 (node 1 is freed) and,
    // below the arena's limit, takes a new node 4; 6 evicts 3 (node 2 freed) and takes node 5, the one after 5's. A
    // walk of 1, 5, 6 (node 0, node 4 through the index since node 1 is free, node 5 as the next) gives order
    // 4 1 5 6, so 7 evicts 4 (node 3 freed) and 8 evicts 1 (node 0 freed); they take nodes 6 and 7, the arena is at
    // its limit (order 5 6 7 8).
    LruBlockTier t(4);
    for (std::uint64_t k = 1; k <= 4; ++k) {
        t.insert(k);
    }
    LruBlockTier::Cursor at;
    CHECK(t.touch_if_held(3, at));
    CHECK(at.node == 2);
    CHECK(t.touch_if_held(4, at));
    CHECK(at.node == 3);
    CHECK(t.touch_if_held(1, at));
    CHECK(at.node == 0);
    CHECK_FALSE(t.touch_if_held(9, at));
    CHECK(at.node == 0);
    std::uint64_t evicted = 0;
    LruBlockTier::Cursor put;
    CHECK(t.insert(5, &evicted, &put));
    CHECK(evicted == 2);
    CHECK(put.node == 4);
    CHECK(t.insert(6, &evicted, &put));
    CHECK(evicted == 3);
    CHECK(put.node == 5);
    LruBlockTier::Cursor walk;
    CHECK(t.touch_if_held(1, walk));
    CHECK(t.touch_if_held(5, walk));
    CHECK(walk.node == 4);
    CHECK(t.touch_if_held(6, walk));
    CHECK(walk.node == 5);
    CHECK(t.insert(7, &evicted));
    CHECK(evicted == 4);
    CHECK(t.insert(8, &evicted));
    CHECK(evicted == 1);
    CHECK(t.size() == 4);
    // At the limit. A touch of 6 gives order 5 7 8 6. After 6's node (5) comes 7's (6), live, so 9 (evicting 5, node
    // 4 freed) takes the sweep's first free node, 0. After 9's node 0 comes node 1, free: 10 (evicting 7, node 6
    // freed) takes it (order 8 6 9 10).
    LruBlockTier::Cursor after_six;
    CHECK(t.touch_if_held(6, after_six));
    CHECK(after_six.node == 5);
    CHECK(t.insert(9, &evicted, &after_six));
    CHECK(evicted == 5);
    CHECK(after_six.node == 0);
    CHECK(t.insert(10, &evicted, &after_six));
    CHECK(evicted == 7);
    CHECK(after_six.node == 1);
    CHECK(t.contains(6));
    CHECK(t.contains(8));
    CHECK(t.contains(9));
    CHECK(t.contains(10));
    CHECK(t.size() == 4);
}

TEST_CASE("KV store: a node found earlier answers for its key only while the key is still there",
          "[cluster][kv_store]") {
    // Capacity 2 (an arena of up to 4 nodes), by hand, as a step's saves checked at its launch and put at its end.
    // Inserts 1, 2 take nodes 0, 1; a check finds 2 in node 1, and node 1 holds 2 (a put of 2 is skipped). Inserting
    // 3 (node 2) and 4 (node 3) evicts 1 then 2: node 1 is free, so it no longer holds 2 (the put probes the index,
    // which has no 2). Inserting 5 evicts 3 and, at the arena's limit, the sweep gives it node 0; inserting 2 again
    // evicts 4 and takes node 1, the next free: node 1 holds 2 again and a cursor on it answers yes, while a cursor on
    // node 0 (key 5) answers no for 2. A cursor on no node, or past the arena, answers no.
    LruBlockTier t(2);
    t.insert(1);
    t.insert(2);
    LruBlockTier::Cursor found;
    CHECK(t.contains(2, found));
    CHECK(found.node == 1);
    CHECK(t.holds_at(2, found));
    CHECK_FALSE(t.holds_at(1, found));
    t.insert(3);
    std::uint64_t evicted = 0;
    CHECK(t.insert(4, &evicted));
    CHECK(evicted == 2);
    CHECK_FALSE(t.holds_at(2, found));
    CHECK_FALSE(t.contains(2));
    CHECK(t.insert(5, &evicted));
    CHECK(evicted == 3);
    CHECK(t.insert(2, &evicted));
    CHECK(evicted == 4);
    CHECK(t.holds_at(2, found));
    CHECK_FALSE(t.holds_at(2, LruBlockTier::Cursor{0}));
    CHECK(t.holds_at(5, LruBlockTier::Cursor{0}));
    CHECK_FALSE(t.holds_at(2, LruBlockTier::Cursor{}));
    CHECK_FALSE(t.holds_at(2, LruBlockTier::Cursor{7}));
}

TEST_CASE("KV store: a walk's deferred touches leave the order of single touches", "[cluster][kv_store]") {
    // Capacity 6, by hand. Inserts 1..6 (order 1 2 3 4 5 6). A deferred walk touches 2, 3, 4 (each right after the
    // last in the list: one run), then 1 (not after 4: the run [2, 4] goes to the end, order 1 5 6 2 3 4, and 1 starts
    // a run), then 9 (absent), and ends: 1 goes to the end, order 5 6 2 3 4 1, as six single touches give. A walk
    // touching 4 then 1 (the list's last two) moves nothing. Inserting 7, 8, 9, 10, 11, 12 then evicts 5, 6, 2, 3, 4,
    // 1 in that order.
    LruBlockTier t(6);
    for (std::uint64_t k = 1; k <= 6; ++k) {
        t.insert(k);
    }
    LruBlockTier::TouchWalk walk;
    CHECK(t.touch_if_held(2, walk));
    CHECK(t.touch_if_held(3, walk));
    CHECK(t.touch_if_held(4, walk));
    CHECK(walk.run_first == 1);  // 2's node
    CHECK(walk.at.node == 3);    // 4's node
    CHECK(t.touch_if_held(1, walk));
    CHECK(walk.run_first == 0);
    CHECK_FALSE(t.touch_if_held(9, walk));
    t.end_touches(walk);
    LruBlockTier::TouchWalk tail;
    CHECK(t.touch_if_held(4, tail));
    CHECK(t.touch_if_held(1, tail));
    t.end_touches(tail);
    std::uint64_t evicted = 0;
    for (const std::uint64_t expected : std::initializer_list<std::uint64_t>{5, 6, 2, 3, 4, 1}) {
        CHECK(t.insert(100 + expected, &evicted));
        CHECK(evicted == expected);
    }
}

TEST_CASE("KV store: a deferred walk goes on with its run only when the next node is also next in the list",
          "[cluster][kv_store]") {
    // Capacity 4, by hand: the inline case of touch_find (the key in the node after the run's last) must also be the
    // next in the list. Inserts 1, 2, 3 take nodes 0, 1, 2 (order 1 2 3); a single touch of 2 gives order 1 3 2. A
    // deferred walk touches 1 (node 0, a run starts), then 2: node 1 follows node 0 and holds 2, but 1's next in the
    // list is 3, so the run [1] is moved (order 3 2 1) and 2 starts its own; then 3: node 2 follows node 1, but 2's
    // next in the list is 1, so [2] is moved (order 3 1 2) and 3 starts a run, moved at the end: order 1 2 3, as three
    // single touches of 1, 2, 3 give. Inserting 5 fills the tier; 101, 102, 103 then evict 1, 2, 3.
    LruBlockTier t(4);
    for (std::uint64_t k = 1; k <= 3; ++k) {
        t.insert(k);
    }
    t.touch(2);
    LruBlockTier::TouchWalk walk;
    CHECK(t.touch_if_held(1, walk));
    CHECK(walk.run_first == 0);
    CHECK(t.touch_if_held(2, walk));
    CHECK(walk.run_first == 1);
    CHECK(walk.at.node == 1);
    CHECK(t.touch_if_held(3, walk));
    CHECK(walk.run_first == 2);
    t.end_touches(walk);
    std::uint64_t evicted = 0;
    CHECK_FALSE(t.insert(5, &evicted));
    for (const std::uint64_t expected : std::initializer_list<std::uint64_t>{1, 2, 3}) {
        CHECK(t.insert(100 + expected, &evicted));
        CHECK(evicted == expected);
    }
}

TEST_CASE("KV store: an insert of a key just found absent skips the probe and does what insert does",
          "[cluster][kv_store]") {
    // Capacity 2 (an arena of up to 4 nodes), by hand, as the router's index update: a deferred walk misses a key,
    // ends its run and inserts the key. 1 and 2 take nodes 0 and 1 (order 1 2). A walk touches 1 (order 2 1 once the
    // run ends), misses 3, ends the run and inserts 3 without the second probe: 3 evicts 2 (the least recent) and
    // takes node 1, just freed and the one after the cursor's (1's node 0), the cursor on it; order 1 3. A miss of 4
    // then evicts 1 and takes a new node, 2.
    LruBlockTier t(2);
    t.insert_absent(1);
    t.insert_absent(2);
    LruBlockTier::TouchWalk walk;
    CHECK(t.touch_if_held(1, walk));
    CHECK_FALSE(t.touch_if_held(3, walk));
    t.end_touches(walk);
    std::uint64_t evicted = 0;
    CHECK(t.insert_absent(3, &evicted, &walk.at));
    CHECK(evicted == 2);
    CHECK(walk.at.node == 1);
    CHECK_FALSE(t.touch_if_held(4, walk));
    t.end_touches(walk);
    CHECK(t.insert_absent(4, &evicted, &walk.at));
    CHECK(evicted == 1);
    CHECK(walk.at.node == 2);
    CHECK(t.contains(3));
    CHECK(t.contains(4));
    CHECK(t.size() == 2);
}

TEST_CASE("KV store: walks with cursors keep the same LRU order as a plain list", "[cluster][kv_store]") {
    // Two tiers of 50 blocks (an arena of up to 200 nodes, so the sweep and the free-node reuse both run), against
    // one std::list per tier. 4,000 walks of chains: each picks a tier and a chain start among 120 (so chains
    // overlap and get evicted), walks 1-12 consecutive keys with one cursor, touching the held ones and inserting
    // the others, as the pool's lookup and puts do; a key already in the other tier stays there. Every eviction
    // must name its list's front, and at the end each list must match its tier, in order (checked by evicting all).
    LruBlockTiers t(2, 50);
    std::list<std::uint64_t> order[2];
    std::uint64_t seed = 12345;
    auto next = [&](std::uint64_t n) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (seed >> 33) % n;
    };
    auto where = [&](std::uint64_t key) -> int {
        for (int i = 0; i < 2; ++i) {
            for (const std::uint64_t k : order[i]) {
                if (k == key) {
                    return i;
                }
            }
        }
        return -1;
    };
    for (int w = 0; w < 4000; ++w) {
        const std::size_t tier = next(2);
        const std::uint64_t start = next(120) * 16;
        const std::uint64_t len = 1 + next(12);
        LruBlockTiers::Cursor at;
        LruBlockTiers::TouchWalk deferred;  // every other walk defers its touches (ended before each insert)
        const bool defer = w % 2 == 1;
        for (std::uint64_t k = start; k < start + len; ++k) {
            const std::uint64_t key = (k + 1) * 0x9e3779b97f4a7c15ULL;
            const int held = where(key);
            if (defer) {
                deferred.at = at;
            }
            const std::size_t found = defer ? t.touch_find(key, deferred) : t.touch_find(key, at);
            if (defer) {
                at = deferred.at;
                if (held < 0) {
                    t.end_touches(deferred);
                }
            }
            CHECK(found == (held < 0 ? LruBlockTiers::npos : static_cast<std::size_t>(held)));
            if (held >= 0) {
                order[held].remove(key);
                order[held].push_back(key);
                continue;
            }
            std::uint64_t gone = 0;
            const bool did_evict = t.insert(tier, key, &gone, &at);
            CHECK(did_evict == (order[tier].size() == 50));
            if (did_evict) {
                CHECK(gone == order[tier].front());
                order[tier].pop_front();
            }
            order[tier].push_back(key);
        }
        if (defer) {
            t.end_touches(deferred);
        }
    }
    for (std::size_t tier = 0; tier < 2; ++tier) {
        CHECK(t.size(tier) == static_cast<std::int64_t>(order[tier].size()));
        // Fresh keys push the tier's blocks out in its LRU order.
        for (const std::uint64_t key : order[tier]) {
            std::uint64_t gone = 0;
            CHECK(t.insert(tier, ~key, &gone));
            CHECK(gone == key);
        }
    }
}

TEST_CASE("KV store: a contains run follows consecutive nodes and stops where the chain leaves them",
          "[cluster][kv_store]") {
    // One tier of 8 (an arena of up to 16 nodes), by hand. Inserts 1..5 take nodes 0..4; a walk from no node (its next
    // node is node 0) over keys 1 2 3 9 4 finds 1, 2, 3 in nodes 0, 1, 2 and stops at 9 (node 3 holds 4): 3 keys, the
    // cursor on node 2. From there over 4 5 6: 4 and 5 in nodes 3 and 4, 6 absent: 2 keys, cursor on node 4. The hint
    // distance changes nothing found. Six more inserts (10..15) fill the tier and evict 1, 2, 3, the least recent;
    // node 2 is then free (still with 3 in it), and a run over 3 4 from node 1 finds nothing (contains(3) is false).
    LruBlockTier t(8);
    for (std::uint64_t k = 1; k <= 5; ++k) {
        t.insert(k);
    }
    for (const std::size_t distance : {std::size_t{0}, std::size_t{2}}) {
        const std::vector<std::uint64_t> a = {1, 2, 3, 9, 4};
        LruBlockTier::Cursor at;
        CHECK(t.contains_run(std::span<const std::uint64_t>(a), distance, at) == 3);
        CHECK(at.node == 2);
        const std::vector<std::uint64_t> b = {4, 5, 6};
        CHECK(t.contains_run(std::span<const std::uint64_t>(b), distance, at) == 2);
        CHECK(at.node == 4);
    }
    std::uint64_t evicted = 0;
    for (std::uint64_t k = 10; k < 16; ++k) {
        t.insert(k, &evicted);
    }
    CHECK(evicted == 3);
    LruBlockTier::Cursor at{1};
    const std::vector<std::uint64_t> c = {3, 4};
    CHECK(t.contains_run(std::span<const std::uint64_t>(c), 0, at) == 0);
    CHECK(at.node == 1);
    CHECK_FALSE(t.contains(3));
}

TEST_CASE("KV store: a block whose key is a free node's key is found only while it is held", "[cluster][kv_store]") {
    // A node's key alone says it is live, except for the key a free node holds (all ones); a block hash may be that
    // key too, and then the node's links decide. One tier of 2 (an arena of up to 4 nodes), by hand. K (all ones)
    // takes node 0 and 5 node 1: K is held, in node 0, and a contains run from no node over K 5 counts 2 (nodes 0, 1).
    // Inserting 6 evicts K, the least recent (node 0 freed, its key all ones again), and 6 takes new node 2. Node 0
    // now holds K's key but is free: contains(K) with or without a cursor, holds_at(K, node 0), a contains run and a
    // held run over K all say no. Inserting K after no node (the node after it is node 0, free) evicts 5 and takes
    // node 0: K is held there again, and a held run over K at node 0 counts 1.
    constexpr std::uint64_t K = ~std::uint64_t{0};
    LruBlockTier t(2);
    t.insert(K);
    t.insert(5);
    CHECK(t.contains(K));
    CHECK(t.holds_at(K, LruBlockTier::Cursor{0}));
    const std::vector<std::uint64_t> both = {K, 5};
    LruBlockTier::Cursor at;
    CHECK(t.contains_run(std::span<const std::uint64_t>(both), 0, at) == 2);
    CHECK(at.node == 1);
    std::uint64_t evicted = 0;
    CHECK(t.insert(6, &evicted));
    CHECK(evicted == K);
    const std::vector<std::uint64_t> k_only = {K};
    const std::vector<LruBlockTier::Cursor> in_node_0 = {{0}};
    LruBlockTier::Cursor none;
    CHECK_FALSE(t.contains(K));
    CHECK_FALSE(t.contains(K, none));
    CHECK_FALSE(t.holds_at(K, LruBlockTier::Cursor{0}));
    CHECK(t.contains_run(std::span<const std::uint64_t>(k_only), 0, none) == 0);
    CHECK(t.held_run(std::span<const std::uint64_t>(k_only), std::span<const LruBlockTier::Cursor>(in_node_0), 0,
                     none) == 0);
    LruBlockTier::Cursor put;
    CHECK(t.insert(K, &evicted, &put));
    CHECK(evicted == 5);
    CHECK(put.node == 0);
    CHECK(t.contains(K));
    LruBlockTier::Cursor walk;
    CHECK(t.held_run(std::span<const std::uint64_t>(k_only), std::span<const LruBlockTier::Cursor>(in_node_0), 0,
                     walk) == 1);
    CHECK(walk.node == 0);
}

TEST_CASE("KV store: a touch run goes on only while the next node is also next in the list", "[cluster][kv_store]") {
    // One tier of 8, by hand. Inserts 1..4 take nodes 0..3 (list 1 2 3 4); a single touch of 3 gives 1 2 4 3. No run is
    // pending at a walk's start, so a touch run finds nothing; the one-key touch of 1 starts the run [node 0]. The run
    // then takes 2 (node 1 follows node 0 in the arena and the list) and stops at 3: node 2 holds 3, but 2's next in
    // the list is 4. Count 1, cursor on node 1. The one-key touch of 3 ends [1 2] (list 4 3 1 2) and starts [3]; a run
    // over 4 then fails (3's next is 1), so 4 is touched alone, ending [3]: list 1 2 3 4 once the walk ends, as four
    // single touches of 1, 2, 3, 4 leave it. Fresh keys then evict 1, 2, 3, 4 in turn.
    LruBlockTier t(4);
    for (std::uint64_t k = 1; k <= 4; ++k) {
        t.insert(k);
    }
    t.touch(3);
    const std::vector<std::uint64_t> keys = {1, 2, 3, 4};
    const std::span<const std::uint64_t> all(keys);
    LruBlockTier::TouchWalk walk;
    CHECK(t.touch_run(all, 2, walk) == 0);
    CHECK(t.touch_if_held(1, walk));
    CHECK(t.touch_run(all.subspan(1), 2, walk) == 1);
    CHECK(walk.at.node == 1);
    CHECK(t.touch_if_held(3, walk));
    CHECK(t.touch_run(all.subspan(3), 2, walk) == 0);
    CHECK(t.touch_if_held(4, walk));
    t.end_touches(walk);
    std::uint64_t evicted = 0;
    for (const std::uint64_t expected : std::initializer_list<std::uint64_t>{1, 2, 3, 4}) {
        CHECK(t.insert(100 + expected, &evicted));
        CHECK(evicted == expected);
    }
}

TEST_CASE("KV store: a held run checks each key in the node it was found in", "[cluster][kv_store]") {
    // One tier of 3 (an arena of up to 6 nodes), by hand. Inserts 1, 2, 3 take nodes 0, 1, 2; found = nodes 0, 1, 2
    // and "nowhere" for 7. All three are held: a run over 1 2 3 7 counts 3 and ends on node 2 (7 was found nowhere).
    // Insert 4 evicts 1 (node 0 freed; 4 takes node 3): the run over 1 2 now stops at once, and from 2 it counts
    // 2 (2 and 3), the cursor on node 2.
    LruBlockTier t(3);
    for (std::uint64_t k = 1; k <= 3; ++k) {
        t.insert(k);
    }
    const std::vector<std::uint64_t> keys = {1, 2, 3, 7};
    const std::vector<LruBlockTier::Cursor> found = {{0}, {1}, {2}, {}};
    LruBlockTier::Cursor at;
    CHECK(t.held_run(std::span<const std::uint64_t>(keys), std::span<const LruBlockTier::Cursor>(found), 1, at) == 3);
    CHECK(at.node == 2);
    std::uint64_t evicted = 0;
    CHECK(t.insert(4, &evicted));
    CHECK(evicted == 1);
    LruBlockTier::Cursor again;
    CHECK(t.held_run(std::span<const std::uint64_t>(keys), std::span<const LruBlockTier::Cursor>(found), 0, again) ==
          0);
    CHECK(t.held_run(std::span<const std::uint64_t>(keys).subspan(1, 2),
                     std::span<const LruBlockTier::Cursor>(found).subspan(1, 2), 0, again) == 2);
    CHECK(again.node == 2);
}

TEST_CASE("KV store: run loops find, touch and order exactly as one-key calls do", "[cluster][kv_store]") {
    // Two copies of one tier of 40 blocks driven by the same 3,000 random walks over overlapping chains (as the
    // router's index and the pool see prompts): copy A with the one-key calls only, copy B with the run loops and a
    // one-key call where a run stops. Every walk must give both the same count of leading held keys (contains), the
    // same cursor, the same touch results and the same evictions; at the end both evict in the same order.
    LruBlockTier a(40);
    LruBlockTier b(40);
    std::uint64_t seed = 777;
    auto next = [&](std::uint64_t n) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (seed >> 33) % n;
    };
    for (int w = 0; w < 3000; ++w) {
        const std::uint64_t start = next(60) * 8 + next(3);
        const std::size_t len = 1 + next(20);
        std::vector<std::uint64_t> keys;
        for (std::uint64_t k = start; k < start + len; ++k) {
            keys.push_back((k + 1) * 0x9e3779b97f4a7c15ULL);
        }
        const std::span<const std::uint64_t> all(keys);
        const std::size_t distance = next(4) * 4;
        // contains: leading held keys.
        LruBlockTier::Cursor ca;
        std::size_t na = 0;
        while (na < len && a.contains(keys[na], ca)) {
            ++na;
        }
        LruBlockTier::Cursor cb;
        std::size_t nb = 0;
        while (nb < len) {
            nb += b.contains_run(all.subspan(nb), distance, cb);
            if (nb == len || !b.contains(keys[nb], cb)) {
                break;
            }
            ++nb;
        }
        CHECK(na == nb);
        CHECK(ca.node == cb.node);
        // A deferred touch walk, inserting what is absent (the router's index update).
        LruBlockTier::TouchWalk wa;
        LruBlockTier::TouchWalk wb;
        std::size_t i = 0;
        while (i < len) {
            i += b.touch_run(all.subspan(i), distance, wb);
            if (i == len) {
                break;
            }
            if (!b.touch_if_held(keys[i], wb)) {
                b.end_touches(wb);
                b.insert_absent(keys[i], nullptr, &wb.at);
            }
            ++i;
        }
        b.end_touches(wb);
        for (const std::uint64_t key : keys) {
            if (a.touch_if_held(key, wa)) {
                continue;
            }
            a.end_touches(wa);
            a.insert_absent(key, nullptr, &wa.at);
        }
        a.end_touches(wa);
        CHECK(wa.at.node == wb.at.node);
        CHECK(a.size() == b.size());
    }
    std::uint64_t gone_a = 0;
    std::uint64_t gone_b = 0;
    for (std::uint64_t k = 0; k < 40; ++k) {
        CHECK(a.insert(~k, &gone_a) == b.insert(~k, &gone_b));
        CHECK(gone_a == gone_b);
    }
}

TEST_CASE("KV store: the LRU order survives the index's moves (deletion shifts, growth)", "[cluster][kv_store]") {
    // Capacity 3, by hand: insert 1, 2, 3 (order 1 2 3); touch 1 (2 3 1); insert 4 evicts 2 (3 1 4); touch 3
    // (1 4 3); insert 5 evicts 1 (4 3 5); insert 6 evicts 4.
    LruBlockTiers t(1, 3);
    std::uint64_t evicted = 0;
    t.insert(0, 1);
    t.insert(0, 2);
    t.insert(0, 3);
    t.touch(1);
    CHECK(t.insert(0, 4, &evicted));
    CHECK(evicted == 2);
    t.touch(3);
    CHECK(t.insert(0, 5, &evicted));
    CHECK(evicted == 1);
    CHECK(t.insert(0, 6, &evicted));
    CHECK(evicted == 4);
    CHECK(t.size() == 3);

    // 5,000 inserts into a tier of 600 (the index grows from 16 slots to 2,048, and every eviction shifts probe
    // runs back) with a touch of every seventh key still held, against a plain list: each eviction names the key
    // the list's front holds.
    LruBlockTiers big(2, 600);
    std::list<std::uint64_t> order;  // reference LRU of tier 1, least recent first
    for (std::uint64_t k = 1; k <= 5000; ++k) {
        const std::uint64_t key = k * 0x9e3779b97f4a7c15ULL;
        std::uint64_t gone = 0;
        const bool did_evict = big.insert(1, key, &gone);
        CHECK(did_evict == (order.size() == 600));
        if (did_evict) {
            CHECK(gone == order.front());
            order.pop_front();
        }
        order.push_back(key);
        if (k % 7 == 0) {
            const std::uint64_t back = (k - 300) * 0x9e3779b97f4a7c15ULL;
            if (k > 300 && big.tier_of(back) == 1) {
                big.touch(back);
                order.remove(back);
                order.push_back(back);
            }
        }
    }
    CHECK(big.size(1) == 600);
    CHECK(big.size(0) == 0);
    for (const std::uint64_t key : order) {
        CHECK(big.tier_of(key) == 1);
    }
}

TEST_CASE("KV store: an eviction frees the head before the insert takes a node", "[cluster][kv_store]") {
    // One tier of 2, inserts given a cursor. 1 -> node 0 and 2 -> node 1 (new nodes of the region, in order). 3 with
    // the cursor on no node: the tier is full, so 1 (the head, node 0) is evicted first; the node after the cursor
    // (no node + 1 wraps to node 0) is then a used, free node, so 3 takes node 0, and the index maps 3 there and no
    // longer knows 1. Then 4 after 3 (node 0): 2 is evicted (node 1 freed), and node 1, after the cursor, is taken.
    // Capacity 1: each insert evicts the only block, which is head and tail at once; the list is rebuilt each time.
    LruBlockTier t(2);
    LruBlockTier::Cursor at;
    t.insert(1, nullptr, &at);
    CHECK(at.node == 0);
    t.insert(2, nullptr, &at);
    CHECK(at.node == 1);
    std::uint64_t evicted = 0;
    at = LruBlockTier::Cursor{};
    CHECK(t.insert(3, &evicted, &at));
    CHECK(evicted == 1);
    CHECK(at.node == 0);
    CHECK(t.holds_at(3, LruBlockTier::Cursor{0}));
    CHECK_FALSE(t.contains(1));
    CHECK(t.insert(4, &evicted, &at));
    CHECK(evicted == 2);
    CHECK(at.node == 1);
    CHECK(t.contains(3));
    CHECK(t.contains(4));
    CHECK(t.size() == 2);
    t.touch(3);  // order 4 3: the next eviction takes 4
    CHECK(t.insert_absent(5, &evicted));
    CHECK(evicted == 4);

    LruBlockTier one(1);
    CHECK_FALSE(one.insert(7, &evicted));
    CHECK(one.insert(8, &evicted));
    CHECK(evicted == 7);
    CHECK(one.insert(9, &evicted));
    CHECK(evicted == 8);
    CHECK(one.contains(9));
    CHECK_FALSE(one.contains(8));
    CHECK(one.size() == 1);
}

TEST_CASE("KV store: nodes grown ahead of a region's end are free and not taken after a cursor",
          "[cluster][kv_store]") {
    // One tier of 8 (a region of 16 nodes). The arena grows up to the storage it has reserved, so nodes past the
    // region's end may exist (with libstdc++'s doubling, 8 nodes once the sixth is used); they must read as free
    // (holds_at no, even for key 0, a free node's key) and an insert after a cursor must not take one. 1..6 -> nodes
    // 0..5; 7 with a cursor on node 6 (past the end, 6) -> node 6, the region's next new node, not 7; 8 after it ->
    // node 7; 9 evicts 1 (node 0 freed) and, the node after the cursor (8) being past the end, takes new node 8.
    LruBlockTier t(8);
    LruBlockTier::Cursor at;
    for (std::uint64_t k = 1; k <= 6; ++k) {
        t.insert(k, nullptr, &at);
        CHECK(at.node == k - 1);
    }
    for (std::uint32_t n = 6; n < 16; ++n) {
        CHECK_FALSE(t.holds_at(0, LruBlockTier::Cursor{n}));
    }
    at = LruBlockTier::Cursor{6};
    t.insert(7, nullptr, &at);
    CHECK(at.node == 6);
    t.insert(8, nullptr, &at);
    CHECK(at.node == 7);
    CHECK(t.holds_at(7, LruBlockTier::Cursor{6}));
    CHECK(t.holds_at(8, LruBlockTier::Cursor{7}));
    std::uint64_t evicted = 0;
    CHECK(t.insert(9, &evicted, &at));
    CHECK(evicted == 1);
    CHECK(at.node == 8);
    CHECK(t.size() == 8);
}

// One tier of 5 holding 1..5 (order 1 2 3 4 5, no shifts: inserts add behind), then a walk touching 2 and 3 (one
// run, moved to the end: 2 shifts), order 1 4 5 2 3; returns the guard of those two: shifts 2, 3 blocks ahead.
LruBlockTiers::TailGuard guard_two_touched(LruBlockTiers& t) {
    for (std::uint64_t k = 1; k <= 5; ++k) {
        t.insert(0, k);
    }
    LruBlockTiers::TouchWalk walk;
    CHECK(t.touch_find(2, walk) == 0);
    CHECK(t.touch_find(3, walk) == 0);
    CHECK(walk.run_len == 2);
    t.end_touches(walk);
    const LruBlockTiers::TailGuard g = t.guard_tail(0, 2);
    CHECK(g.shifts == 2);
    CHECK(g.ahead == 3);
    return g;
}

TEST_CASE("KV store: a tail guard holds while fewer shifts than the blocks ahead have happened",
          "[cluster][kv_store]") {
    // By hand, from guard_two_touched (order 1 4 5 2 3, 3 ahead). Inserts 101, 104, 105 evict 1, 4, 5 (shifts 3, 4,
    // 5: 3 since the guard, not more than 3 ahead): it holds, and 2 and 3 are still there (order 2 3 101 104 105).
    // Insert 200 evicts 2: 4 shifts since, the guard no longer holds.
    LruBlockTiers t(1, 5);
    const LruBlockTiers::TailGuard g = guard_two_touched(t);
    std::uint64_t evicted = 0;
    for (const std::uint64_t expected : std::initializer_list<std::uint64_t>{1, 4, 5}) {
        CHECK(t.insert(0, 100 + expected, &evicted));
        CHECK(evicted == expected);
        CHECK(t.guard_holds(g));
    }
    CHECK(t.contains(2));
    CHECK(t.contains(3));
    CHECK(t.insert(0, 200, &evicted));
    CHECK(evicted == 2);
    CHECK_FALSE(t.guard_holds(g));
}

TEST_CASE("KV store: a touch that moves a block ahead of a guarded one counts as a shift", "[cluster][kv_store]") {
    // By hand, from guard_two_touched (order 1 4 5 2 3, 3 ahead). A touch of 3, the list's last block, moves nothing
    // and is no shift (still 2). Touches of 1, 4, 5 move each to the end (order 2 3 1 4 5): 3 shifts, the guard holds,
    // and 2 is now the least recent. Insert 6 evicts it: 4 shifts, the guard no longer holds.
    LruBlockTiers t(1, 5);
    const LruBlockTiers::TailGuard g = guard_two_touched(t);
    t.touch(3);
    CHECK(t.guard_tail(0, 0).shifts == 2);
    for (const std::uint64_t k : {1, 4, 5}) {
        t.touch(k);
    }
    CHECK(t.guard_tail(0, 0).shifts == 5);
    CHECK(t.guard_holds(g));
    std::uint64_t evicted = 0;
    CHECK(t.insert(0, 6, &evicted));
    CHECK(evicted == 2);
    CHECK_FALSE(t.guard_holds(g));
}

TEST_CASE("KV store: every block under a guard that holds is still held", "[cluster][kv_store]") {
    // Two tiers of 12 under one index, driven by 4,000 random operations: walks over overlapping chains that touch
    // what they find (runs and single touches, deferred) and insert what they miss, single touches, and inserts. After
    // each walk, a guard per tier over the blocks the walk touched there (they end their tiers' lists); after every
    // operation, each guard that holds must find all of its blocks still held. Guards are also seen to hold for a while
    // and to lapse (the test would pass vacuously otherwise).
    LruBlockTiers t(2, 12);
    std::uint64_t seed = 4242;
    auto next = [&](std::uint64_t n) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (seed >> 33) % n;
    };
    struct Guarded {
        LruBlockTiers::TailGuard guard;
        std::vector<std::uint64_t> keys;
    };
    std::vector<Guarded> guards;
    std::size_t checks_held = 0;
    std::size_t lapsed = 0;
    const auto check_guards = [&]() {
        for (auto it = guards.begin(); it != guards.end();) {
            if (!t.guard_holds(it->guard)) {
                ++lapsed;
                it = guards.erase(it);
                continue;
            }
            for (const std::uint64_t key : it->keys) {
                CHECK(t.contains(key));
            }
            ++checks_held;
            ++it;
        }
    };
    for (int op = 0; op < 4000; ++op) {
        const std::uint64_t kind = next(4);
        if (kind <= 1) {
            const std::uint64_t start = next(40);
            const std::size_t len = 1 + next(8);
            std::vector<std::uint64_t> keys;
            for (std::uint64_t k = start; k < start + len; ++k) {
                keys.push_back((k + 1) * 0x9e3779b97f4a7c15ULL);
            }
            const std::span<const std::uint64_t> all(keys);
            LruBlockTiers::TouchWalk walk;
            std::vector<std::uint64_t> touched[2];
            std::size_t i = 0;
            while (i < len) {
                const std::size_t k = t.touch_run(all.subspan(i), 0, walk);
                for (std::size_t j = 0; j < k; ++j) {
                    touched[t.tier_at(walk.at)].push_back(keys[i + j]);
                }
                i += k;
                if (i == len) {
                    break;
                }
                const std::size_t tier = t.touch_find(keys[i], walk);
                if (tier != LruBlockTiers::npos) {
                    touched[tier].push_back(keys[i]);
                    ++i;
                    continue;
                }
                if (kind == 0) {  // a lookup: stops at the first miss
                    break;
                }
                t.end_touches(walk);  // the router's update: inserts the miss
                t.insert_absent(next(2), keys[i], nullptr, &walk.at);
                ++i;
            }
            t.end_touches(walk);
            if (kind == 0) {
                for (std::size_t tier = 0; tier < 2; ++tier) {
                    if (!touched[tier].empty()) {
                        guards.push_back(Guarded{
                            t.guard_tail(tier, static_cast<std::int64_t>(touched[tier].size())), touched[tier]});
                    }
                }
            }
        } else if (kind == 2) {
            t.touch((next(48) + 1) * 0x9e3779b97f4a7c15ULL);
        } else {
            t.insert(next(2), (next(48) + 1) * 0x9e3779b97f4a7c15ULL);
        }
        check_guards();
    }
    CHECK(checks_held > 1000);
    CHECK(lapsed > 100);
}

}  // namespace
}  // namespace servesim::cluster
