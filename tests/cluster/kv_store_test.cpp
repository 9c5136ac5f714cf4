// Tests of sim/cluster/kv_store.*: whole runs of replicas sharing a KV store over a hand-made topology with a
// FixedCost model, so each hit, load and first-token time is worked out by hand: a remote hit that saves recompute
// but waits for its load, the pooled hit rate of a 3-replica toy trace against local-only routing, LMCache's local
// tier before its remote store. The tiers' LRU and the block-key indexes: lru_block_tiers_test.cpp and
// block_key_index_test.cpp.
#include "sim/cluster/kv_store.h"

#include <memory>
#include <vector>

#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::cluster {
namespace {

using engine::testing::close;
using engine::testing::content;
using engine::testing::FixedCost;
using engine::testing::full_attention_config;
using engine::testing::scheduler_config;
using engine::testing::ScriptedWorkload;
using engine::testing::spec;

constexpr double kGB = 1e9;

// host0 —(10 GB/s, 5 µs)— sw —(10 GB/s, 5 µs)— host_k, each host with one GPU over a 100 GB/s, 2 µs link, and a
// storage server on the switch (20 GB/s, 5 µs).
std::shared_ptr<const Topology> hosts_on_a_switch(int n) {
    auto t = std::make_shared<Topology>();
    const auto sw = t->add_node({"sw", NodeKind::kSwitch, 0});
    const auto st = t->add_node({"store", NodeKind::kStorage, 1'000'000'000'000});
    t->add_link(st, sw, 20 * kGB, 5e-6);
    for (int i = 0; i < n; ++i) {
        const auto g = t->add_node({"gpu" + std::to_string(i), NodeKind::kGpu, 80'000'000'000});
        const auto h = t->add_node({"host" + std::to_string(i), NodeKind::kHost, 1'000'000'000'000});
        t->add_link(g, h, 100 * kGB, 2e-6);
        t->add_link(h, sw, 10 * kGB, 5e-6);
    }
    return t;
}

SimulationConfig pooled_config(int replicas, std::optional<KvStoreKind> kind, std::int64_t host_blocks = 1000) {
    SimulationConfig c;
    c.num_replicas = replicas;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    c.replica.check_invariants = true;
    c.exact_percentiles = true;
    c.topology = hosts_on_a_switch(replicas);
    if (kind) {
        KvStoreConfig k;
        k.kind = *kind;
        k.block_size_tokens = 16;
        k.bytes_per_block = 2.5e7;  // 25 MB a block: 4 blocks = 1e8 bytes
        k.host_capacity_blocks = host_blocks;
        k.remote_capacity_blocks = 1000;
        k.remote_vertex = c.topology->find("store");
        c.kv_store = k;
    }
    return c;
}

TEST_CASE("KV store: a remote hit saves the prefill's recompute but waits for its load", "[cluster][kv_store]") {
    // Step = 4 ms + 0.25 ms per token. R0 [A 64] → replica 0 at 0: prefill step [0, 20] (4 + 16); its 4 blocks are
    // saved into host0's segment by the step's end. R1 [A 64] → replica 1 at 100 ms: nothing local; the pool holds
    // blocks 0–3 → external 64 tokens. Load host0 → sw → host1 → gpu1: 5 + 5 + 2 = 12 µs, bottleneck 10 GB/s,
    // 1e8 B → 10 ms: lands at 110.012 ms. The whole prompt is loaded, so its last token is recomputed: one step of
    // 1 token, 4.25 ms → R1's first token at 114.262 ms, TTFT 14.262 ms (without the pool: 20 ms).
    // Counters (connector_prefix_cache_stats): queries 64 + 64, hits 0 + 64.
    FixedCost cost(4, 0.25);
    auto run = [&](std::optional<KvStoreKind> kind) {
        ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 100, {{content(1), 64}}, 1)});
        Simulation sim(pooled_config(2, kind), cost, w, make_router("round_robin"));
        return sim.run().summary;
    };
    const metrics::Summary pooled = run(KvStoreKind::kMooncake);
    REQUIRE(pooled.num_requests_finished == 2);
    CHECK(close(pooled.ttft_ms.min, 14.262));
    CHECK(close(pooled.ttft_ms.max, 20));
    CHECK(close(pooled.external_hit_rate, 64.0 / 128.0));
    CHECK(pooled.prefix_cache_hits == 0);
    const metrics::Summary local = run(std::nullopt);
    CHECK(close(local.ttft_ms.min, 20));
    CHECK(close(local.ttft_ms.max, 20));
}

TEST_CASE("KV store: the pooled hit rate of a 3-replica toy trace against local-only routing", "[cluster][kv_store]") {
    // Prompts A, B, C (64 tokens, 4 blocks) sent in the order A B C B C A C A B, 100 ms apart, one output each.
    // round_robin puts request k on replica k mod 3: replica 0 sees A B C, replica 1 B C A, replica 2 C A B — no
    // prompt twice on one replica, so the local prefix caches hit nothing (0 of 576 tokens).
    // With the global pool the 6 repeats each find all 4 blocks in some segment: 6 × 64 = 384 external hit
    // tokens of 576 queried → 2/3.
    // prefix_affinity (local cache-aware routing) sends each prompt to one replica: the 6 repeats hit locally
    // floor(63 / 16) · 16 = 48 tokens each (the last token is never a local hit) → 288 / 576 = 1/2.
    FixedCost cost(4, 0.25);
    std::vector<workloads::RequestSpec> specs;
    const int order[] = {1, 2, 3, 2, 3, 1, 3, 1, 2};
    for (int k = 0; k < 9; ++k) {
        specs.push_back(spec(static_cast<std::uint64_t>(k), 100.0 * k, {{content(order[k]), 64}}, 1));
    }
    auto run = [&](std::optional<KvStoreKind> kind, const char* router) {
        ScriptedWorkload w(specs);
        Simulation sim(pooled_config(3, kind), cost, w, make_router(router));
        return sim.run().summary;
    };
    const metrics::Summary local_rr = run(std::nullopt, "round_robin");
    CHECK(local_rr.prefix_cache_queries == 576);
    CHECK(local_rr.prefix_cache_hits == 0);
    const metrics::Summary affinity = run(std::nullopt, "prefix_affinity");
    CHECK(affinity.prefix_cache_hits == 288);
    CHECK(close(affinity.total_hit_rate, 0.5));
    const metrics::Summary pooled = run(KvStoreKind::kMooncake, "round_robin");
    CHECK(pooled.prefix_cache_hits == 0);
    CHECK(close(pooled.external_hit_rate, 384.0 / 576.0));
    CHECK(close(pooled.total_hit_rate, 384.0 / 576.0));
}

TEST_CASE("KV store: LMCache reads its own host's tier over PCIe and others' blocks from the remote store",
          "[cluster][kv_store]") {
    // LMCache: R0 [A 64] on replica 0 saves A into host0's CPU tier and the remote store. R1 [A 64] on replica 1
    // at 100 ms: host1's tier lacks A, the remote store has it: store → sw → host1 → gpu1: 5 + 5 + 2 = 12 µs,
    // bottleneck 10 GB/s → 10.012 ms + 4.25 = 14.262 ms. R2 [A 64 + B 16] on replica 0 at 200 ms: its GPU cache
    // holds A's 4 blocks (an 80-token prompt may hit up to 79 tokens: 4 whole blocks, 64); the store holds nothing
    // beyond them (B was never computed) → no external tokens; a 16-token prefill, 4 + 4 = 8 ms.
    FixedCost cost(4, 0.25);
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 100, {{content(1), 64}}, 1),
                        spec(2, 200, {{content(1), 64}, {content(2), 16}}, 1)});
    Simulation sim(pooled_config(2, KvStoreKind::kLmcache), cost, w, make_router("round_robin"));
    const metrics::Summary s = sim.run().summary;
    REQUIRE(s.num_requests_finished == 3);
    CHECK(close(s.ttft_ms.min, 8));
    CHECK(close(s.ttft_ms.p50, 14.262));
    CHECK(close(s.ttft_ms.max, 20));
    // External: queries 64 + 64 + (80 − 64), hits 64.
    CHECK(close(s.external_hit_rate, 64.0 / 144.0));
}

TEST_CASE("KV store: a save in flight shares the remote store's link with a load, which takes longer",
          "[cluster][kv_store]") {
    // hosts_on_a_switch(3) with the store's link at 15 GB/s. LMCache. R0 [A 64] → replica 0 at 0: A computed and
    // saved by 20 ms. R1 [B 64] → replica 1 at 99 ms: its step [99, 119] saves B's 4 blocks (1e8 B) to host1's
    // tier and to the store, the latter gpu1 → host1 → sw → store from 99 ms: bottleneck host1–sw 10 GB/s,
    // 12 µs + 10 ms, in flight until 109.012 ms. R2 [A 64] → replica 2 at 100 ms loads A from the store:
    // store → sw → host2 → gpu2, 12 µs. On the store's link B's save is active (a drive's bandwidth is shared by
    // its reads and writes): the save has moved 1e7 B at 10 GB/s; now both get 15 / 2 = 7.5 GB/s (below host1–sw's
    // and sw–host2's 10), so the save's last 9e7 B end at 112 ms. The load has then moved 9e7 B and gets 10 GB/s
    // alone: its last 1e7 B take 1 ms → lands at 113 ms + 12 µs, then the last token's 4.25 ms step: TTFT
    // 17.262 ms. (With the share fixed at its start, 7.5 GB/s throughout: 13.345 ms + 4.25 = 17.595 ms.) Without the
    // save in flight (R1 sent at 80 ms, its save over by 90.012): 12 µs + 10 ms + 4.25 = 14.262 ms.
    FixedCost cost(4, 0.25);
    auto run = [&](double r1_ms) {
        SimulationConfig c = pooled_config(3, KvStoreKind::kLmcache);
        auto t = std::make_shared<Topology>();
        const auto sw = t->add_node({"sw", NodeKind::kSwitch, 0});
        const auto st = t->add_node({"store", NodeKind::kStorage, 1'000'000'000'000});
        t->add_link(st, sw, 15 * kGB, 5e-6);
        for (int i = 0; i < 3; ++i) {
            const auto g = t->add_node({"gpu" + std::to_string(i), NodeKind::kGpu, 80'000'000'000});
            const auto h = t->add_node({"host" + std::to_string(i), NodeKind::kHost, 1'000'000'000'000});
            t->add_link(g, h, 100 * kGB, 2e-6);
            t->add_link(h, sw, 10 * kGB, 5e-6);
        }
        c.topology = t;
        c.kv_store->remote_vertex = t->find("store");
        ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, r1_ms, {{content(2), 64}}, 1),
                            spec(2, 100, {{content(1), 64}}, 1)});
        Simulation sim(c, cost, w, make_router("round_robin"));
        return sim.run().summary;
    };
    const metrics::Summary busy = run(99);
    REQUIRE(busy.num_requests_finished == 3);
    CHECK(close(busy.ttft_ms.min, 17.262));
    const metrics::Summary quiet = run(80);
    CHECK(close(quiet.ttft_ms.min, 14.262));
}

}  // namespace
}  // namespace servesim::cluster
