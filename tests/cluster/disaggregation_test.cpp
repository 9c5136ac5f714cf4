// Tests of sim/cluster/disaggregation.*: whole prefill–decode runs over a hand-made topology with a FixedCost model
// (step = 4 ms + 0.25 ms per token), so each prefill, read, decode start and first token is worked out by hand: a
// single request's client TTFT through a read over a known path, the prefill blocks held until the read ends (a
// second prompt waits for them), two reads sharing a link, a decode rank reading from two prefill ranks, and refusals by either frontend.
#include "sim/cluster/disaggregation.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "sim/cluster/router.h"
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

// P prefill GPUs behind NIC nicP, then D decode GPUs behind nicD (the pools take the GPUs in this order): each
// GPU–NIC link 64 GB/s, 2 µs; nicP —(25 GB/s, 3 µs)— sw —(25 GB/s, 3 µs)— nicD. A read from a prefill GPU to a
// decode GPU crosses gpu–nicP–sw–nicD–gpu: latency 2 + 3 + 3 + 2 = 10 µs, bottleneck 25 GB/s; nicP–sw and sw–nicD
// are shared by every read.
std::shared_ptr<const Topology> two_nics(int num_prefill, int num_decode) {
    auto t = std::make_shared<Topology>();
    const auto sw = t->add_node({"sw", NodeKind::kSwitch, 0});
    const auto nic_p = t->add_node({"nicP", NodeKind::kNic, 0});
    const auto nic_d = t->add_node({"nicD", NodeKind::kNic, 0});
    t->add_link(nic_p, sw, 25 * kGB, 3e-6);
    t->add_link(sw, nic_d, 25 * kGB, 3e-6);
    for (int i = 0; i < num_prefill + num_decode; ++i) {
        const auto g = t->add_node({"gpu" + std::to_string(i), NodeKind::kGpu, 80'000'000'000});
        t->add_link(g, i < num_prefill ? nic_p : nic_d, 64 * kGB, 2e-6);
    }
    return t;
}

struct Setup {
    SimulationConfig common;
    DisaggregationConfig config;
};

// `prefill_blocks` includes the null block. 25 MB a block (all ranks): 4 blocks = 1e8 B, read at 25 GB/s in 4 ms.
Setup setup(int num_prefill, int num_decode, std::int64_t prefill_blocks = 64) {
    Setup s;
    s.common.topology = two_nics(num_prefill, num_decode);
    s.common.exact_percentiles = true;
    s.config.num_prefill = num_prefill;
    s.config.num_decode = num_decode;
    s.config.prefill_replica.scheduler = scheduler_config(8192);
    s.config.prefill_replica.kv_cache = full_attention_config(prefill_blocks);
    s.config.prefill_replica.check_invariants = true;
    s.config.decode_replica.scheduler = scheduler_config(8192);
    s.config.decode_replica.kv_cache = full_attention_config(64);
    s.config.decode_replica.check_invariants = true;
    s.config.bytes_per_block = 2.5e7;
    return s;
}

TEST_CASE("disaggregation: one request's TTFT is its prefill, the read and the decode side's recompute of the last "
          "token", "[cluster][disaggregation]") {
    // R0 [A 64], 3 output tokens, sent at 0 → prefill replica 0 (gpu0) with max_tokens 1: one step of 64 tokens,
    // 4 + 16 = 20 ms; its token (dropped by the proxy) at 20. The decode leg reaches decode replica 0 (gpu1) at 20:
    // get_num_new_matched_tokens = 64 − 0 local; 4 blocks = 1e8 B over gpu0 → gpu1: 10 µs + 1e8 / 25e9 s = 4.010 ms,
    // landing at 24.010. The whole prompt was read, so the last token is recomputed (_update_waiting_for_remote_kv):
    // a 1-token step of 4.25 ms → the client's first token at 28.260 (TTFT 28.260 ms), then two decode steps of
    // 4.25 ms: tokens at 32.510 and 36.760 (ITL 4.25 ms, E2E 36.760 ms).
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1);
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 3)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.num_requests_finished == 1);
    CHECK(close(r.summary.ttft_ms.min, 28.260));
    CHECK(close(r.summary.e2e_ms.min, 36.760));
    CHECK(close(r.summary.itl_ms.min, 4.25));
    CHECK(close(r.summary.itl_ms.max, 4.25));
    CHECK(r.summary.mean_output_tokens == 3);  // the client's tokens only: the prefill's token is not streamed
    REQUIRE(sim.reads().size() == 1);
    CHECK(close(sim.reads()[0].start.ms(), 20.0));
    CHECK(close(sim.reads()[0].done.ms(), 24.010));
    CHECK(sim.reads()[0].bytes == 1e8);
    REQUIRE(r.disaggregation.has_value());
    const DisaggregationStats& d = *r.disaggregation;
    CHECK(d.num_transfers == 1);
    CHECK(close(d.transfer_ms_mean, 4.010));
    CHECK(close(d.prefill_ttft_ms_mean, 20.0));
    // The prefill pool's counters: queries 64, hits 0. Busy: prefill 20 of 36.76 ms, decode 3 × 4.25 of 36.76 ms.
    CHECK(d.prefill_prefix_queries == 64);
    CHECK(d.prefill_prefix_hits == 0);
    CHECK(close(d.prefill_busy_fraction, 20.0 / 36.76));
    CHECK(close(d.decode_busy_fraction, 12.75 / 36.76));
    CHECK(d.peak_held_requests == 1);
}

TEST_CASE("disaggregation: the proxy's hops add their path latencies to the client's TTFT",
          "[cluster][disaggregation]") {
    // two_nics(1, 1) plus a host per GPU (hostP–gpu0, hostD–gpu1, 64 GB/s, 2 µs) and the proxy's host hx on the
    // switch (hx–sw, 10 GB/s, 50 µs). Each instance's server is on the host nearest its first GPU; a hop from hx
    // to hostP is hx → sw → nicP → gpu0 → hostP = 50 + 3 + 2 + 2 = 57 µs, to hostD the same. The read still goes
    // gpu0 → nicP → sw → nicD → gpu1 (10 µs, 25 GB/s: 4.010 ms).
    // R0 [A 64], 3 output tokens, sent at 0: the prefill leg reaches the prefill instance at 0.057; its 20 ms step
    // ends at 20.057; the response is back at the proxy at 20.114 (the prefill TTFT the proxy sees); the decode leg
    // reaches the decode instance at 20.171; the read lands at 24.181; the recompute step's token at 28.431 reaches
    // the client through the proxy at 28.488: TTFT 28.260 + 4 × 0.057 = 28.488 ms. The last token, at 36.931 on
    // the decode side, reaches it at 36.988 (E2E 36.760 + 0.228); ITL stays 4.25 ms.
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1);
    auto t = std::make_shared<Topology>(*s.common.topology);
    const auto hp = t->add_node({"hostP", NodeKind::kHost, 1'000'000'000'000});
    const auto hd = t->add_node({"hostD", NodeKind::kHost, 1'000'000'000'000});
    const auto hx = t->add_node({"hx", NodeKind::kHost, 1'000'000'000'000});
    t->add_link(hp, t->find("gpu0"), 64 * kGB, 2e-6);
    t->add_link(hd, t->find("gpu1"), 64 * kGB, 2e-6);
    t->add_link(hx, t->find("sw"), 10 * kGB, 50e-6);
    s.common.topology = t;
    s.config.proxy_vertex = hx;
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 3)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.num_requests_finished == 1);
    CHECK(close(r.summary.ttft_ms.min, 28.488));
    CHECK(close(r.summary.e2e_ms.min, 36.988));
    CHECK(close(r.summary.itl_ms.max, 4.25));
    REQUIRE(sim.reads().size() == 1);
    CHECK(close(sim.reads()[0].start.ms(), 20.171));
    CHECK(close(sim.reads()[0].done.ms(), 24.181));
    CHECK(close(r.disaggregation->prefill_ttft_ms_mean, 20.114));
    // The default proxy is the host nearest the prefill pool's first GPU: hostP, 0 µs to the prefill instance and
    // 2 + 10 + 2 = 14 µs to hostD (hostP → gpu0 → nicP → sw → nicD → gpu1 → hostD): TTFT 28.260 + 2 × 0.014.
    s.config.proxy_vertex = Topology::npos;
    ScriptedWorkload w2({spec(0, 0, {{content(1), 64}}, 3)});
    DisaggregatedSimulation by_default(s.common, s.config, cost, cost, w2, make_router("round_robin"),
                                       make_router("round_robin"));
    CHECK(close(by_default.run().summary.ttft_ms.min, 28.288));
}

TEST_CASE("disaggregation: with async scheduling an idle decode engine starts the read at once",
          "[cluster][disaggregation]") {
    // As the single-request case, both engines with async scheduling (vLLM's default). The prefill step [0, 20]
    // schedules no follow-up (its one token is in flight and is its last). At 20 the idle decode engine looks R0 up;
    // the load rides in an empty step that launches at once (1 ns later), so the read runs [20, 24.010] and the
    // request is promoted when it lands: the recompute step [24.010, 28.260] — the same TTFT as without async.
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1);
    s.config.prefill_replica.async_scheduling = s.config.prefill_replica.scheduler.async_scheduling = true;
    s.config.decode_replica.async_scheduling = s.config.decode_replica.scheduler.async_scheduling = true;
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.num_requests_finished == 1);
    CHECK(close(r.summary.ttft_ms.min, 28.260, 1e-5));
    REQUIRE(sim.reads().size() == 1);
    CHECK(close(sim.reads()[0].done.ms(), 24.010));
}

TEST_CASE("disaggregation: the prefill blocks stay held until the decode side has read them",
          "[cluster][disaggregation]") {
    // The prefill instance has 6 usable blocks. R0 [A 64] at 0 takes 4, prefills in [0, 20] and finishes; its 4
    // blocks stay allocated (delay_free_blocks) until its read ends at 24.010 (as above). R1 [B 48] at 21 needs 3
    // blocks with only 2 free: it waits. At 24.010 finished_sending frees R0's blocks, R1 is scheduled: 4 + 12 =
    // 16 ms, its prefill token at 40.010 (had the blocks been freed at 20, R1 would run [21, 37]). R1's read: 3
    // blocks = 7.5e7 B, 10 µs + 3 ms → 43.020 (R0's decode ended at 36.760); recompute step 4.25 → first token at
    // 47.270, TTFT 47.270 − 21 = 26.270 ms. Prefill TTFTs 20 and 19.010: mean 19.505.
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1, 7);
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 3), spec(1, 21, {{content(2), 48}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.num_requests_finished == 2);
    CHECK(r.summary.num_requests_rejected == 0);
    CHECK(close(r.summary.ttft_ms.min, 26.270));
    CHECK(close(r.summary.ttft_ms.max, 28.260));
    REQUIRE(sim.reads().size() == 2);
    CHECK(close(sim.reads()[1].start.ms(), 40.010));
    CHECK(close(sim.reads()[1].done.ms(), 43.020));
    CHECK(close(r.disaggregation->prefill_ttft_ms_mean, 19.505));
    // Every block is back in the prefill pool at the end.
    CHECK(sim.prefill_replica(0).num_delayed_free() == 0);
    CHECK(sim.prefill_replica(0).kv_cache().usage() == 0);
}

TEST_CASE("disaggregation: two reads that share a link split its bandwidth", "[cluster][disaggregation]") {
    // R0 and R1 [A 64], [B 64] both at 0 → prefill replicas 0 and 1 (round robin), each done at 20; their decode
    // legs go to decode replicas 0 and 1 and both reads start at 20 over nicP–sw–nicD. The first admitted gets the
    // links alone for an instant (projected 4.010 ms); the second joins it on both shared edges, and both get
    // 25 / 2 GB/s (TransferTracker rerates the first): 10 µs + 1e8 / 12.5e9 = 8.010 ms each. First tokens at
    // 20 + 8.010 + 4.25 = 32.260 for both. (With shares fixed at admission the first would take 4.010 ms.)
    FixedCost cost(4, 0.25);
    Setup s = setup(2, 2);
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1), spec(1, 0, {{content(2), 64}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(r.summary.num_requests_finished == 2);
    CHECK(close(r.summary.ttft_ms.min, 32.260));
    CHECK(close(r.summary.ttft_ms.max, 32.260));
    const DisaggregationStats& d = *r.disaggregation;
    CHECK(d.num_transfers == 2);
    CHECK(close(d.transfer_ms_max, 8.010));
    CHECK(close(d.transfer_ms_mean, 8.010));
    CHECK(close(d.transfer_bytes, 2e8));
}

TEST_CASE("disaggregation: a request refused by either frontend is the client's rejection, and a decode-side "
          "refusal frees the prefill blocks at once", "[cluster][disaggregation]") {
    // Prefill max_model_len 66, decode 66. R0 [A 64] with 3 output tokens: the prefill leg asks 64 + 1 ≤ 66 and
    // runs [0, 20]; the decode frontend refuses 64 + 3 > 66 at 20, so the prefill side frees R0's 4 blocks at 20
    // (request_finished with do_remote_prefill still set) and nothing is read. R1 [B 80] at 30: 80 + 1 > 66, refused
    // by the prefill frontend. The client saw 2 requests, both rejected, none finished.
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1);
    s.config.prefill_replica.scheduler = scheduler_config(8192, 16, 1024, 66);
    s.config.decode_replica.scheduler = scheduler_config(8192, 16, 1024, 66);
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 3), spec(1, 30, {{content(2), 80}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    CHECK(r.summary.num_requests_sent == 2);
    CHECK(r.summary.num_requests_rejected == 2);
    CHECK(r.summary.num_requests_finished == 0);
    CHECK(r.summary.rejections.longer_than_max_model_len == 2);
    CHECK(sim.reads().empty());
    CHECK(sim.prefill_replica(0).num_delayed_free() == 0);
    CHECK(sim.prefill_replica(0).kv_cache().usage() == 0);
}

TEST_CASE("disaggregation: a decode rank reads its share from each of the prefill ranks that hold its heads",
          "[cluster][disaggregation]") {
    // Prefill at TP 2 on gpu0, gpu1, each behind its own NIC (GPU–NIC 64 GB/s 2 µs, NIC–sw 25 GB/s 3 µs); decode at
    // TP 1 on gpu2 behind nicD (sw–nicD 100 GB/s 3 µs, nicD–gpu2 64 GB/s 2 µs). R0 [A 64]: 4 blocks = 1e8 B for the
    // one decode rank, read as 5e7 B from each prefill rank (nixl/tp_mapping.py: P TP > D TP). The first half gets
    // 25 GB/s: 10 µs + 2 ms; the second shares sw–nicD (100 / 2) and nicD–gpu2 (64 / 2) but its bottleneck is
    // still its 25 GB/s NIC: 2.010 ms. The read ends at 20 + 2.010 = 22.010 (from one rank over one NIC it would
    // take 4.010 ms); first token 22.010 + 4.25 = 26.260.
    auto t = std::make_shared<Topology>();
    const auto sw = t->add_node({"sw", NodeKind::kSwitch, 0});
    const auto nic_d = t->add_node({"nicD", NodeKind::kNic, 0});
    t->add_link(sw, nic_d, 100 * kGB, 3e-6);
    for (int i = 0; i < 2; ++i) {
        const auto g = t->add_node({"gpu" + std::to_string(i), NodeKind::kGpu, 80'000'000'000});
        const auto nic = t->add_node({"nic" + std::to_string(i), NodeKind::kNic, 0});
        t->add_link(g, nic, 64 * kGB, 2e-6);
        t->add_link(nic, sw, 25 * kGB, 3e-6);
    }
    const auto g2 = t->add_node({"gpu2", NodeKind::kGpu, 80'000'000'000});
    t->add_link(g2, nic_d, 64 * kGB, 2e-6);
    FixedCost cost(4, 0.25);
    Setup s = setup(1, 1);
    s.common.topology = t;
    s.config.prefill_tp = 2;
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    const SimulationResult r = sim.run();
    REQUIRE(sim.reads().size() == 1);
    CHECK(sim.reads()[0].bytes == 1e8);
    CHECK(close(sim.reads()[0].done.ms(), 22.010));
    CHECK(close(r.summary.ttft_ms.min, 26.260));
}

TEST_CASE("disaggregation: first_gpu places each pool, and the read follows the placement's path",
          "[cluster][disaggregation]") {
    // GPUs gpu0, gpu1 behind nicP and gpu2 behind nicD; the prefill pool from GPU 1, the decode pool from GPU 0: the
    // read gpu1 → gpu0 stays on nicP (2 + 2 µs, 64 GB/s): 1e8 B in 1.5625 ms + 4 µs → done at 21.5665 (across the
    // switch it would take 4.010 ms).
    FixedCost cost(4, 0.25);
    Setup s = setup(2, 1);
    s.config.num_prefill = 1;
    s.config.prefill_first_gpu = 1;
    s.config.decode_first_gpu = 0;
    ScriptedWorkload w({spec(0, 0, {{content(1), 64}}, 1)});
    DisaggregatedSimulation sim(s.common, s.config, cost, cost, w, make_router("round_robin"),
                                make_router("round_robin"));
    (void)sim.run();
    REQUIRE(sim.reads().size() == 1);
    CHECK(close(sim.reads()[0].done.ms(), 21.5665));
}

}  // namespace
}  // namespace servesim::cluster
