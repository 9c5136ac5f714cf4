// Tests of the cache-aware routers in sim/cluster/router.cpp, scores worked by hand: llm-d's weighted scorers
// (prefix cache against queue depth), a stale cache signal (cache_signal_delay), Dynamo's KV router cost.
#include "sim/cluster/router.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/yaml_reader.h"
#include "tests/catch.h"

namespace servesim::cluster {
namespace {

const std::vector<core::BlockHash> kPrompt{core::BlockHash{11}, core::BlockHash{12}, core::BlockHash{13},
                                           core::BlockHash{14}};
const core::TokenContent kNoContent;

core::SimTime at_s(double s) { return core::SimTime::from_s(s); }

std::size_t route(Router& r, double t_s, const std::vector<ReplicaLoad>& loads) {
    return r.route(RouteRequest{kNoContent, at_s(t_s), kPrompt}, loads);
}

TEST_CASE("Router llm_d: the prefix-cache score against the queue score, weighted", "[cluster][router]") {
    // First request: nothing indexed, equal queues (queue score 1 each): 3·0 + 2·1 = 2 for both → replica 0 (ties
    // to the lowest index), which the index now holds all 4 blocks for.
    // Second, replica 0 has 3 waiting, replica 1 none: queue scores (3 − 3)/3 = 0 and (3 − 0)/3 = 1.
    //   default weights (prefix 3, queue 2): replica 0 = 3·4/4 + 0 = 3, replica 1 = 0 + 2 = 2 → 0.
    //   prefix weight 1: replica 0 = 1, replica 1 = 2 → 1.
    const std::vector<ReplicaLoad> even{{0, 0, 0}, {0, 0, 0}};
    const std::vector<ReplicaLoad> r0_busy{{3, 0, 0}, {0, 0, 0}};
    auto a = make_router("llm_d");
    CHECK(route(*a, 0, even) == 0);
    CHECK(route(*a, 1, r0_busy) == 0);
    RouterOptions light;
    light.prefix_weight = 1;
    auto b = make_router("llm_d", light);
    CHECK(route(*b, 0, even) == 0);
    CHECK(route(*b, 1, r0_busy) == 1);
}

TEST_CASE("Router llm_d: with a stale cache signal a repeat is routed by load until the signal arrives",
          "[cluster][router]") {
    // cache_signal_delay 1 s. The first request goes to replica 0 at t = 0 (as above); at t = 0.5 s replica 0 has
    // one waiting: the index does not show the routed blocks yet, so prefix scores are 0 and 0, queue scores 0 and
    // 1 → replica 1. At t = 2 s both routings are visible (0 + 1 s, 0.5 + 1 s): prefix 1 on both, so
    // the queue decides, 3 + 0 = 3 against 3 + 2 = 5 → replica 1. Without the delay the t = 0.5 s request already
    // sees the blocks: 3 against 2 → 0.
    RouterOptions o;
    o.cache_signal_delay_s = 1.0;
    const std::vector<ReplicaLoad> even{{0, 0, 0}, {0, 0, 0}};
    const std::vector<ReplicaLoad> r0_busy{{1, 0, 0}, {0, 0, 0}};
    auto stale = make_router("llm_d", o);
    CHECK(route(*stale, 0, even) == 0);
    CHECK(route(*stale, 0.5, r0_busy) == 1);
    CHECK(route(*stale, 2, r0_busy) == 1);
    auto fresh = make_router("llm_d");
    CHECK(route(*fresh, 0, even) == 0);
    CHECK(route(*fresh, 0.5, r0_busy) == 0);
}

TEST_CASE("Router dynamo_kv: overlap blocks against active blocks", "[cluster][router]") {
    // Capacity 100 blocks a replica. First request: costs 4 + 0 for both → replica 0, which now holds the prompt.
    // Second: replica 0 at 50 % KV usage (50 active blocks), replica 1 at 10 % (10).
    //   overlap_weight 1: replica 0 = 1·(4 − 4) + 50 = 50, replica 1 = 1·4 + 10 = 14 → 1.
    //   overlap_weight 20: replica 0 = 0 + 50 = 50, replica 1 = 80 + 10 = 90 → 0.
    const std::vector<ReplicaLoad> idle{{0, 0, 0}, {0, 0, 0}};
    const std::vector<ReplicaLoad> loaded{{0, 5, 0.5}, {0, 1, 0.1}};
    RouterOptions o;
    o.replica_capacity_blocks = 100;
    auto w1 = make_router("dynamo_kv", o);
    CHECK(route(*w1, 0, idle) == 0);
    CHECK(route(*w1, 1, loaded) == 1);
    o.overlap_weight = 20;
    auto w20 = make_router("dynamo_kv", o);
    CHECK(route(*w20, 0, idle) == 0);
    CHECK(route(*w20, 1, loaded) == 0);
}

TEST_CASE("Router dynamo_kv: the routed-prefix index over 70 replicas forgets what a replica's LRU evicted",
          "[cluster][router]") {
    // 70 replicas (two 64-replica words of the index), 4 blocks each; active blocks = kv_usage × 4.
    //   1. P, all at usage 1 (cost 4 + 4 = 8) but replica 66 at 0 (4 + 0) → 66, which now holds P.
    //   2. P, all at usage 0.5: replica 66 = 0 + 2, the others 4 + 2 → 66 (found in the second word).
    //   3. Q (4 new blocks), as in 1 → 66; its LRU of 4 evicts P's 4 blocks for Q's.
    //   4. P, all at 0.5: nobody holds P any more, 6 everywhere → replica 0 (ties to the lowest index).
    //   5. P again: replica 0 = 0 + 2 against 6 → 0.
    const std::vector<core::BlockHash> q{core::BlockHash{21}, core::BlockHash{22}, core::BlockHash{23},
                                         core::BlockHash{24}};
    RouterOptions o;
    o.replica_capacity_blocks = 4;
    auto r = make_router("dynamo_kv", o);
    std::vector<ReplicaLoad> full(70, ReplicaLoad{0, 1, 1.0});
    full[66].kv_usage = 0;
    const std::vector<ReplicaLoad> half(70, ReplicaLoad{0, 1, 0.5});
    auto to = [&](const std::vector<core::BlockHash>& prompt, double t_s, const std::vector<ReplicaLoad>& loads) {
        return r->route(RouteRequest{kNoContent, at_s(t_s), prompt}, loads);
    };
    CHECK(to(kPrompt, 0, full) == 66);
    CHECK(to(kPrompt, 1, half) == 66);
    CHECK(to(q, 2, full) == 66);
    CHECK(to(kPrompt, 3, half) == 0);
    CHECK(to(kPrompt, 4, half) == 0);
}

// Replica r's block pool emits BlockStored (or BlockRemoved) for every block of kPrompt; the step publishing them
// ends at t_s.
void emit_prompt(Router& router, std::size_t r, bool stored, double t_s) {
    KvEventFeed* feed = router.kv_event_feed();
    REQUIRE(feed != nullptr);
    for (const auto h : kPrompt) {
        stored ? feed->sink(r).block_stored(h, 0) : feed->sink(r).block_removed(h, 0);
    }
    feed->publish(r, at_s(t_s));
}

TEST_CASE("Router llm_d: the approximate and the precise prefix index disagree once a replica evicts",
          "[cluster][router]") {
    // Two replicas, cache_signal_delay 1 s, default weights (prefix 3, queue 2).
    //   t = 0: P, nothing known, equal queues → replica 0 (3·0 + 2·1 on both, ties low). Replica 0 caches P: its
    //          step ending at 0.1 s publishes 4 BlockStored (visible at 1.1 s).
    //   Replica 0 then evicts P (other prompts took its blocks): 4 BlockRemoved published at 0.5 s, visible at 1.5 s.
    //   Later requests for P find replica 0 with 2 waiting, replica 1 idle: queue scores 0 and 1.
    //   t = 1.2 s: precise sees P on replica 0 only (stored visible, removal not yet): prefix 1 (the only replica
    //          with a hit) → 3 + 0 = 3 against 0 + 2 = 2 → 0. The approximate index agrees (its routing of t = 0 is
    //          visible since 1 s): 3·4/4 = 3 against 2 → 0.
    //   t = 2 s: precise sees the removal: prefix 0 on both → 0 against 2 → replica 1. The approximate index still
    //          believes replica 0 holds P (its LRU of 100 blocks never evicted it) → 3 against 2 → replica 0.
    const std::vector<ReplicaLoad> even{{0, 0, 0}, {0, 0, 0}};
    const std::vector<ReplicaLoad> r0_busy{{2, 0, 0}, {0, 0, 0}};
    RouterOptions o;
    o.cache_signal_delay_s = 1.0;
    o.replica_capacity_blocks = 100;
    auto approx = make_router("llm_d", o);
    CHECK(approx->kv_event_feed() == nullptr);
    o.precise_prefix_scorer = true;
    auto precise = make_router("llm_d", o);
    CHECK(route(*approx, 0, even) == 0);
    CHECK(route(*precise, 0, even) == 0);
    emit_prompt(*precise, 0, true, 0.1);
    emit_prompt(*precise, 0, false, 0.5);
    CHECK(route(*approx, 1.2, r0_busy) == 0);
    CHECK(route(*precise, 1.2, r0_busy) == 0);
    CHECK(route(*approx, 2, r0_busy) == 0);
    CHECK(route(*precise, 2, r0_busy) == 1);
}

TEST_CASE("Router llm_d: the precise prefix score is min-max normalised over the replicas with a hit",
          "[cluster][router]") {
    // Three replicas hold 4, 2 and 0 leading blocks of P (events published at 0). llm-d's normalisation: replica 2
    // (no hit) scores 0; replicas 0 and 1: (4 − 2)/(4 − 2) = 1 and (2 − 2)/2 = 0. Prefix weight 3, queue weight 1
    // with replica 0 the busiest (queues 4, 0, 0 → queue scores 0, 1, 1): replica 0 = 3·1 + 0 = 3,
    // replica 1 = 0 + 1, replica 2 = 0 + 1 → 0. With queue weight 4: 3 against 4 and 4 → replica 1 (ties to the lowest index).
    const std::vector<ReplicaLoad> loads{{4, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    for (const double queue_weight : {1.0, 4.0}) {
        RouterOptions o;
        o.precise_prefix_scorer = true;
        o.queue_weight = queue_weight;
        auto r = make_router("llm_d", o);
        KvEventFeed* feed = r->kv_event_feed();
        REQUIRE(feed != nullptr);
        for (std::size_t b = 0; b < 4; ++b) {
            feed->sink(0).block_stored(kPrompt[b], 0);
        }
        feed->sink(1).block_stored(kPrompt[0], 0);
        feed->sink(1).block_stored(kPrompt[1], 0);
        feed->sink(1).block_stored(kPrompt[3], 0);  // not leading: block 2 is missing
        feed->sink(2).block_stored(kPrompt[1], 1);  // another KV cache group: not indexed
        for (std::size_t i = 0; i < 3; ++i) {
            feed->publish(i, at_s(0));
        }
        CHECK(route(*r, 1, loads) == (queue_weight == 1.0 ? 0u : 1u));
    }
}

TEST_CASE("Router session_affinity: a tenant stays on the replica of its first request", "[cluster][router]") {
    // Tenant 7's first request: loads 2 and 1 (waiting + running) → replica 1. Its next one goes to 1 even though
    // replica 1 is now the busier (1 + 4 = 5 against 0). Tenant 8's first goes to the least loaded, replica 0.
    // A request without a tenant (0) is routed by load each time.
    auto r = make_router("session_affinity");
    const std::vector<ReplicaLoad> first{{1, 1, 0}, {0, 1, 0}};
    const std::vector<ReplicaLoad> later{{0, 0, 0}, {1, 4, 0}};
    auto at = [&](std::uint32_t tenant, const std::vector<ReplicaLoad>& loads) {
        return r->route(RouteRequest{kNoContent, at_s(0), {}, core::TenantId{tenant}}, loads);
    };
    CHECK(at(7, first) == 1);
    CHECK(at(7, later) == 1);
    CHECK(at(8, later) == 0);
    CHECK(at(0, first) == 1);
    CHECK(at(0, later) == 0);
}

TEST_CASE("Router session_affinity: with session_key conversation, each conversation picks its replica afresh",
          "[cluster][router]") {
    // Tenant 7 holds conversation 100 (three turns), then conversation 101. By conversation: 100's first turn sees
    // loads 2 and 1 → replica 1; its later turns stay there though replica 1 is then the busier (5 against 0), the
    // last one included; 101's first turn, at the same loads, goes to the least loaded, replica 0. By tenant (the
    // default) 101 follows the tenant to replica 1.
    const std::vector<ReplicaLoad> first{{1, 1, 0}, {0, 1, 0}};
    const std::vector<ReplicaLoad> later{{0, 0, 0}, {1, 4, 0}};
    auto run = [&](bool per_conversation) {
        RouterOptions o;
        o.session_per_conversation = per_conversation;
        auto r = make_router("session_affinity", o);
        auto at = [&](std::uint64_t session, bool last, const std::vector<ReplicaLoad>& loads) {
            return r->route(RouteRequest{kNoContent, at_s(0), {}, core::TenantId{7}, session, last}, loads);
        };
        std::vector<std::size_t> picks{at(100, false, first), at(100, false, later), at(100, true, later),
                                       at(101, false, later)};
        return picks;
    };
    CHECK(run(true) == std::vector<std::size_t>{1, 1, 1, 0});
    CHECK(run(false) == std::vector<std::size_t>{1, 1, 1, 1});
}

TEST_CASE("Router options: session_key is tenant or conversation", "[cluster][router]") {
    auto parse = [](const std::string& yaml) {
        return parse_router_options(YamlMap(YAML::Load(yaml), "s.yaml", "cluster.router_config"));
    };
    CHECK(!parse("{}").session_per_conversation);
    CHECK(parse("{session_key: conversation}").session_per_conversation);
    try {
        (void)parse("{session_key: user}");
        FAIL("accepted session_key: user");
    } catch (const ConfigError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("s.yaml") != std::string::npos);
        CHECK(msg.find("session_key") != std::string::npos);
        CHECK(msg.find("conversation") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::cluster
