// Tests of sim/cluster/simulation.*: whole runs on the event loop with a FixedCost model, so every timestamp is exact.
// A hand-timed two-request example of TTFT/ITL/E2E/TPOT (docs/VLLM-RULES.md §7, §10 item 17), the warm-up window
// with real prefix-cache counters, and the block accounting invariant checked after every step of whole runs over
// several seeds and configurations (a tiny pool that forces preemptions, a hybrid in align mode).
#include "sim/cluster/simulation.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/cluster/router.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"
#include "workloads/workload.h"

namespace servesim::cluster {
namespace {

using engine::testing::content;
using engine::testing::FixedCost;
using engine::testing::full_attention_config;
using engine::testing::hybrid_align_config;
using engine::testing::scheduler_config;
using engine::testing::ScriptedWorkload;
using engine::testing::spec;

using engine::testing::close;

SimulationConfig small_config(double warmup_ms = 0) {
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    c.replica.check_invariants = true;
    c.warmup_end = core::SimTime::from_ns(static_cast<std::int64_t>(warmup_ms * 1e6));
    c.exact_percentiles = true;  // the hand-worked percentiles below are exact
    return c;
}

TEST_CASE("Simulation: TTFT, ITL, E2E and TPOT of two hand-timed requests", "[cluster][rule17]") {
    // Step time = 4 ms + 0.25 ms per scheduled token. R0 (32 tokens, 3 outputs) sent at 0; R1 (32, 2) at 5 ms.
    //   step 1 [0, 12]:        R0 prefill 32            → 4 + 8    = 12      R0 token 1 at 12
    //   (R1 arrives at 5 and waits: the step in flight is not interrupted)
    //   step 2 [12, 24.25]:    R0 decode + R1 prefill 33 → 4 + 8.25 = 12.25  R0 token 2, R1 token 1 at 24.25
    //   step 3 [24.25, 28.75]: two decodes              → 4 + 0.5  = 4.5     R0 token 3, R1 token 2: both finish
    // TTFT 12, 19.25; ITL 12.25, 4.5, 4.5; E2E 28.75, 23.75; TPOT 16.75/2 = 8.375, 4.5/1.
    ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 3), spec(1, 5, {{content(2), 32}}, 2)});
    FixedCost cost(4, 0.25);
    Simulation sim(small_config(), cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    const metrics::Summary& s = r.summary;
    REQUIRE(s.num_requests_finished == 2);
    CHECK(s.num_steps == 3);
    CHECK(close(s.ttft_ms.p50, (12 + 19.25) / 2));
    CHECK(close(s.ttft_ms.max, 19.25));
    CHECK(s.itl_ms.count == 3);
    CHECK(close(s.itl_ms.p50, 4.5));
    CHECK(close(s.itl_ms.max, 12.25));
    CHECK(close(s.e2e_ms.mean, (28.75 + 23.75) / 2));
    CHECK(close(s.tpot_ms.mean, (8.375 + 4.5) / 2));
    CHECK(close(s.queue_ms.mean, (0 + 7) / 2.0));
    CHECK(close(s.duration_s, 0.02875));
    CHECK(r.num_unfinished == 0);
    CHECK(w.finished.size() == 2);
}

TEST_CASE("Simulation: warm-up requests warm the cache but are not measured; counters start at the warm-up end",
          "[cluster][rule17]") {
    // R0 [S 64] sent at 0 (before a 50 ms warm-up), R1 [S 64] at 100 ms. R1 hits floor(63/16)·16 = 48.
    // With the warm-up: measured queries 64, hits 48 → 0.75, one request. Without: 128 queries → 0.375.
    FixedCost cost(4, 0.25);
    SECTION("warm-up 50 ms") {
        ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 100, {{content(1), 64}}, 1)});
        Simulation sim(small_config(50), cost, w, make_router("round_robin"));
        const metrics::Summary s = sim.run().summary;
        CHECK(s.num_requests_sent == 1);
        CHECK(s.num_requests_finished == 1);
        CHECK(s.prefix_cache_queries == 64);
        CHECK(s.prefix_cache_hits == 48);
        CHECK(close(s.prefix_cache_hit_rate, 0.75));
        CHECK(close(s.cached_prompt_fraction, 0.75));
        // R1: 16 tokens → 4 + 4 = 8 ms.
        CHECK(close(s.ttft_ms.p50, 8));
    }
    SECTION("no warm-up") {
        ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 100, {{content(1), 64}}, 1)});
        Simulation sim(small_config(0), cost, w, make_router("round_robin"));
        const metrics::Summary s = sim.run().summary;
        CHECK(s.num_requests_sent == 2);
        CHECK(s.prefix_cache_queries == 128);
        CHECK(close(s.prefix_cache_hit_rate, 0.375));
    }
}

TEST_CASE("Simulation: no requests gives an empty summary without NaN", "[cluster][rule17]") {
    ScriptedWorkload w({});
    FixedCost cost(4);
    Simulation sim(small_config(), cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    CHECK(r.summary.num_requests_sent == 0);
    CHECK(r.summary.prefix_cache_hit_rate == 0.0);
    CHECK(r.summary.ttft_ms.p99 == 0.0);
    CHECK(r.summary.throughput_rps == 0.0);
    CHECK_FALSE(std::isnan(r.summary.output_tokens_per_s));
}

TEST_CASE("Simulation: a request that can never fit is rejected by its own id, and the run goes on",
          "[cluster][regression]") {
    // Pool of 64 blocks of 16 (63 usable, 1,008 tokens). R7's 2,000-token prompt needs 125 blocks: with nothing
    // running it can never be admitted, so the replica drops it (the head of waiting) and rejects it. The id must be
    // read before the request's owning pointer is erased (a use-after-free in Replica::try_start_step before).
    // R8 (32 tokens, 2 outputs) sent at 1 ms still runs: step 1 [1, 5] prefill, step 2 [5, 9] decode.
    ScriptedWorkload w({spec(7, 0, {{content(1), 2000}}, 1), spec(8, 1, {{content(2), 32}}, 2)});
    FixedCost cost(4);
    SimulationConfig c = small_config();
    c.replica.scheduler.max_model_len = 4096;
    Simulation sim(c, cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    CHECK(r.summary.num_requests_rejected == 1);
    CHECK(r.summary.num_requests_finished == 1);
    REQUIRE(w.finished.size() == 2);  // the workload hears of both: R7 as rejected, R8 as finished
    CHECK(core::to_int(w.finished[0]) == 7);
    CHECK(core::to_int(w.finished[1]) == 8);
}

TEST_CASE("Simulation: each request record names the replica that served it", "[cluster][records]") {
    // Two replicas, round-robin: R0 (sent at 0) goes to replica 0, R1 (sent at 1 ms) to replica 1.
    ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 2), spec(1, 1, {{content(2), 32}}, 2)});
    FixedCost cost(4);
    SimulationConfig c = small_config();
    c.num_replicas = 2;
    c.keep_request_records = true;
    Simulation sim(c, cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.requests.size() == 2);
    for (const auto& q : r.summary.requests) {
        CHECK(q.replica == (q.arrival_s == 0.0 ? 0 : 1));
    }
}

TEST_CASE("Simulation: the replicas' KV events reach the precise prefix scorer after cache_signal_delay, not before",
          "[cluster][records][kv_events]") {
    // Two replicas, llm_d with prefix_scorer precise (weights prefix 3, queue 2, KV utilisation 1), cache_signal_delay
    // 100 ms; step = 4 ms + 0.25 ms per token, one output token each, 64-token prompts (4 full blocks of 16).
    //   R0 [X 64] at 0: nothing indexed, equal loads → replica 0 (ties to the lower index); step [0, 20].
    //   R1 [A 64] at 1 ms: prefix 0 on both, no one waiting on either; replica 0's KV is in use by R0 (usage > 0),
    //     replica 1's is not → KV score 1 − usage higher on replica 1 → replica 1; step [1, 21]. Its block pool
    //     emits BlockStored for A's 4 blocks; published with the step's end (21 ms), applied at 121 ms.
    //   R2 [A 64] at 50 ms: both idle, usage 0, and no event applied yet (R0's at 120, R1's at 121) → all scores
    //     equal → replica 0, which computes A afresh (0 cached tokens). Its events are applied at 70 + 100 = 170.
    //   R3 [A 64] at 150 ms: replica 1's BlockStored are in (121 ≤ 150), replica 0's are not (170): replica 1 is the
    //     only replica holding A's blocks → prefix score 1 against 0 → replica 1, where A hits: 48 tokens (a
    //     64-token prompt hits at most 63, so 3 whole blocks).
    // The events' timing is the engine's: with R3 at 110 ms instead, the precise index has not yet applied R1's
    // events (121 ms) and R3 goes to replica 0, while the approximate index, fed by the router's own routing of R1 at
    // 1 ms (visible at 101 ms), already sends it to replica 1.
    auto run = [](bool precise, double r3_ms = 150) {
        ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 1, {{content(2), 64}}, 1),
                            spec(2, 50, {{content(2), 64}}, 1), spec(3, r3_ms, {{content(2), 64}}, 1)});
        FixedCost cost(4, 0.25);
        SimulationConfig c = small_config();
        c.num_replicas = 2;
        c.keep_request_records = true;
        RouterOptions o;
        o.kv_utilization_weight = 1;
        o.cache_signal_delay_s = 0.1;
        o.precise_prefix_scorer = precise;
        o.replica_capacity_blocks = 64;
        Simulation sim(c, cost, w, make_router("llm_d", o));
        return sim.run().summary;
    };
    const metrics::Summary s = run(true);
    REQUIRE(s.requests.size() == 4);
    auto at = [&](double arrival_s) {
        for (const auto& q : s.requests) {
            if (close(q.arrival_s, arrival_s)) {
                return q;
            }
        }
        FAIL("no request sent at " << arrival_s);
        return s.requests.front();
    };
    CHECK(at(0.0).replica == 0);
    CHECK(at(0.001).replica == 1);
    CHECK(at(0.050).replica == 0);  // before R1's events are applied
    CHECK(at(0.050).cached_prompt_tokens == 0);
    CHECK(at(0.150).replica == 1);  // after
    CHECK(at(0.150).cached_prompt_tokens == 48);
    CHECK(s.prefix_cache_hits == 48);
    auto replica_of_r3 = [](const metrics::Summary& m) {
        for (const auto& q : m.requests) {
            if (close(q.arrival_s, 0.110)) {
                return q.replica;
            }
        }
        return -1;
    };
    CHECK(replica_of_r3(run(true, 110)) == 0);
    CHECK(replica_of_r3(run(false, 110)) == 1);
}

// Whole runs with the block accounting invariant re-derived after every schedule and every emit phase
// (ReplicaConfig::check_invariants → KvCacheManager::check_invariants throws InvariantError when broken), plus
// request conservation: every sent request finished or was rejected, none left in a replica.
struct RunCase {
    std::string name;
    cache::KvCacheConfig kv;
    engine::SchedulerConfig scheduler;
    int replicas = 1;
    std::string router = "round_robin";
};

SimulationResult run_checked(const RunCase& c, const std::string& workload_yaml, std::uint64_t seed) {
    SimulationConfig sc;
    sc.replica.kv_cache = c.kv;
    sc.replica.scheduler = c.scheduler;
    sc.replica.check_invariants = true;
    sc.num_replicas = c.replicas;
    const YAML::Node node = YAML::Load(workload_yaml);
    auto workload = workloads::make_workload(YamlMap(node, "test", "workload"), seed);
    FixedCost cost(2, 0.01);
    Simulation sim(sc, cost, *workload, make_router(c.router));
    return sim.run();
}

TEST_CASE("Block accounting invariant holds after every step of whole runs", "[cluster][invariant]") {
    // Tenants whose prompts grow by user + answer each turn; 4 tenants × up to ~340 tokens against 39 usable blocks
    // of 16 (624 tokens) forces preemptions; max_model_len 400 rejects the longest turns.
    const std::string tenants = R"(
type: tenants
tenants: 4
system_prompt_tokens: 100
turns_per_dialogue: 3
user_tokens: {dist: uniform, min: 10, max: 60}
answer_tokens: {dist: uniform, min: 5, max: 40}
arrival: poisson
rate: 40
num_requests: 80
)";
    const std::string synthetic = R"(
type: synthetic
arrival: poisson
rate: 200
shared_prefix_tokens: 64
prompt_tokens: {dist: uniform, min: 1, max: 300}
output_tokens: {dist: uniform, min: 1, max: 50}
num_requests: 80
)";
    std::vector<RunCase> cases;
    cases.push_back({"tiny pool", full_attention_config(40), scheduler_config(256, 16, 64, 400)});
    cases.push_back({"roomy pool", full_attention_config(400), scheduler_config(8192, 16, 1024, 4000)});
    cases.push_back({"two replicas, least loaded", full_attention_config(60), scheduler_config(128, 16, 8, 400), 2,
                     "least_loaded"});
    {
        engine::SchedulerConfig s = scheduler_config(256, 64, 64, 400);
        s.mamba_align = true;
        cases.push_back({"hybrid align B=64", hybrid_align_config(60, 64), s});
    }
    std::int64_t tiny_pool_preemptions = 0;
    std::int64_t hybrid_hits = 0;
    for (const auto& c : cases) {
        for (const auto* yaml : {&tenants, &synthetic}) {
            for (std::uint64_t seed : {1, 2, 3}) {
                INFO(c.name << ", seed " << seed << (yaml == &tenants ? ", tenants" : ", synthetic"));
                SimulationResult r;
                REQUIRE_NOTHROW(r = run_checked(c, *yaml, seed));
                const auto& s = r.summary;
                CHECK_FALSE(r.hit_max_time);
                CHECK(r.num_unfinished == 0);
                CHECK(s.num_requests_sent == 80);
                CHECK(s.num_requests_finished + s.num_requests_rejected == s.num_requests_sent);
                if (c.name == "tiny pool") {
                    tiny_pool_preemptions += s.preemptions;
                }
                if (c.name.starts_with("hybrid")) {
                    hybrid_hits += s.prefix_cache_hits;
                }
            }
        }
    }
    // The runs exercised what they were built for.
    CHECK(tiny_pool_preemptions > 0);
    CHECK(hybrid_hits > 0);
}

}  // namespace
}  // namespace servesim::cluster

namespace servesim::cluster {
namespace {

TEST_CASE("Simulation: prompts hashed by the router give the replica's own hashes, turn after turn",
          "[cluster][hashing]") {
    // One replica, so llm_d (which hashes every prompt, hands the hashes to the request and gets each finished turn's
    // hashes back through the shared memo) and round_robin (the replica hashes for itself) serve the same requests
    // in the same steps. Block size 16. Turn 1: 40 prompt tokens + 8 answer tokens; the last answer token is never
    // computed, so 47 tokens are → 2 full blocks cached. Turn 2 (sent after turn 1 ends) extends turn 1's content by
    // 30 tokens (78) and hits those 2 blocks: 32 tokens. It computes 78 + 3 = 81 tokens → 5 blocks cached; turn 3
    // extends turn 2's 78 + 4 answer tokens by 20 (102) and hits the 5: 80 tokens. Hits 0 + 32 + 80 = 112 either way.
    const auto answer = [](std::uint64_t id) { return content(1'000'000 + id); };
    const core::TokenContent t1{{content(1), 40}};
    core::TokenContent t2 = t1;
    t2.push_back({answer(0), 8});
    t2.push_back({content(2), 30});
    core::TokenContent t3 = t2;
    t3.push_back({answer(1), 4});
    t3.push_back({content(3), 20});
    const auto run = [&](const char* router) {
        ScriptedWorkload w({spec(0, 0, t1, 8), spec(1, 1000, t2, 4), spec(2, 2000, t3, 2)});
        FixedCost cost(4, 0.25);
        Simulation sim(small_config(), cost, w, make_router(router));
        return sim.run().summary;
    };
    const metrics::Summary routed = run("llm_d");
    const metrics::Summary own = run("round_robin");
    REQUIRE(routed.num_requests_finished == 3);
    CHECK(own.prefix_cache_hits == 112);
    CHECK(routed.prefix_cache_hits == own.prefix_cache_hits);
    CHECK(routed.prefix_cache_queries == own.prefix_cache_queries);
    CHECK(routed.ttft_ms.max == own.ttft_ms.max);
    CHECK(routed.num_steps == own.num_steps);
}

}  // namespace
}  // namespace servesim::cluster
