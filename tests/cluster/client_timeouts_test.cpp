// Client time-outs on the event loop (sim/cluster/simulation.*, request_timeouts.h): a request whose client gives up
// `timeout` after its send is a failure — counted, told to the workload at its deadline, in no latency figure — and
// a request that finishes first is untouched. FixedCost(4) makes every step 4 ms, so every instant is exact.
#include <memory>
#include <vector>

#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/workload.h"

namespace servesim::cluster {
namespace {

using engine::testing::close;
using engine::testing::content;
using engine::testing::FixedCost;
using engine::testing::full_attention_config;
using engine::testing::scheduler_config;
using engine::testing::ScriptedWorkload;
using engine::testing::spec;

SimulationConfig timeout_config(bool timeouts) {
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192, 16, 1024, 200'000);
    c.replica.kv_cache = full_attention_config(8000);  // 7,999 blocks: room for R0's 100,032 tokens
    c.replica.check_invariants = false;               // 100,000 steps: the replica test checks the blocks
    c.exact_percentiles = true;
    c.sample_interval = core::Duration::from_s(0);
    c.request_timeouts = timeouts;
    return c;
}

workloads::RequestSpec with_timeout(workloads::RequestSpec s, double timeout_s) {
    s.timeout = core::Duration::from_s(timeout_s);
    return s;
}

}  // namespace

TEST_CASE("Simulation: a request timed out at 300 s is a failure, in no latency figure; the other is untouched",
          "[cluster][timeout]") {
    // R0 (32-token prompt, 100,000 outputs) sent at 0 with a 300 s time-out; steps back to back from 0, each 4 ms,
    // so R0's token k comes at 4k ms and its 100,000th would come at 400 s. R1 (32 tokens, 2 outputs) sent at 1 s
    // lands while step 250 [996, 1000] runs, joins step 251 [1000, 1004] and finishes at 1008: TTFT 4, ITL 4,
    // E2E 8. At 300 s step 75,000 ends first (a step end before a time-out at the same instant: token 75,000
    // arrives), then R0's client gives up; step 75,001 [300, 300.004] already runs, so the engine aborts R0 at
    // 300.004 s and the run ends there.
    FixedCost cost(4);
    ScriptedWorkload w({with_timeout(spec(0, 0, {{content(1), 32}}, 100'000), 300),
                        with_timeout(spec(1, 1000, {{content(2), 32}}, 2), 300)});
    Simulation sim(timeout_config(true), cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    const metrics::Summary& s = r.summary;
    CHECK(s.num_requests_sent == 2);
    CHECK(s.num_requests_finished == 1);
    CHECK(s.num_requests_timed_out == 1);
    CHECK(r.num_unfinished == 0);
    CHECK(s.ttft_ms.count == 1);  // R0's first token came at 4 ms; its client discarded the whole request
    CHECK(close(s.ttft_ms.max, 4));
    CHECK(s.itl_ms.count == 1);  // R1's one gap; none of R0's 74,999
    CHECK(close(s.itl_ms.max, 4));
    CHECK(close(s.e2e_ms.max, 8));
    CHECK(s.tpot_ms.count == 1);
    CHECK(close(s.duration_s, 300.004));
    CHECK(close(s.output_tokens_per_s, 2 / 300.004));  // R0's 75,001 tokens count nowhere
    CHECK(s.num_steps == 75'001);
    REQUIRE(w.timed_out.size() == 1);
    CHECK(w.timed_out[0].first == core::RequestId{0});
    CHECK(w.timed_out[0].second == core::SimTime::from_s(300));  // told at its deadline, not at the abort
    CHECK(w.finished == std::vector<core::RequestId>{core::RequestId{1}});

    // Without time-outs R0 runs to 400 s; R1's figures are the same.
    ScriptedWorkload plain({spec(0, 0, {{content(1), 32}}, 100'000), spec(1, 1000, {{content(2), 32}}, 2)});
    Simulation base(timeout_config(false), cost, plain, make_router("round_robin"));
    const metrics::Summary b = base.run().summary;
    CHECK(b.num_requests_finished == 2);
    CHECK(b.num_requests_timed_out == 0);
    CHECK(close(b.ttft_ms.min, 4));
    CHECK(close(b.e2e_ms.min, 8));
    CHECK(close(b.duration_s, 400));
}

TEST_CASE("Simulation: a request whose last token comes exactly at its deadline has finished",
          "[cluster][timeout]") {
    // One request, 32-token prompt, 10 outputs: tokens at 4, 8, …, 40 ms. With a 40 ms time-out the step end at 40
    // runs before the time-out at 40: finished. With 39.999 ms the client gives up first: timed out, and the step
    // in flight [36, 40] ends the run at 40 ms with the abort.
    FixedCost cost(4);
    SECTION("40 ms") {
        ScriptedWorkload w({with_timeout(spec(0, 0, {{content(1), 32}}, 10), 0.040)});
        Simulation sim(timeout_config(true), cost, w, make_router("round_robin"));
        const metrics::Summary s = sim.run().summary;
        CHECK(s.num_requests_finished == 1);
        CHECK(s.num_requests_timed_out == 0);
        CHECK(close(s.e2e_ms.max, 40));
        CHECK(w.timed_out.empty());
    }
    SECTION("39.999 ms") {
        ScriptedWorkload w({with_timeout(spec(0, 0, {{content(1), 32}}, 10), 0.039999)});
        Simulation sim(timeout_config(true), cost, w, make_router("round_robin"));
        const SimulationResult r = sim.run();
        CHECK(r.summary.num_requests_finished == 0);
        CHECK(r.summary.num_requests_timed_out == 1);
        CHECK(r.summary.ttft_ms.count == 0);
        CHECK(close(r.summary.duration_s, 0.040));
        REQUIRE(w.timed_out.size() == 1);
        CHECK(w.timed_out[0].second == core::SimTime::from_ns(39'999'000));
        CHECK(w.finished.empty());
    }
}

TEST_CASE(
    "Simulation: a request finished in the engine whose last chunk reaches its client after the deadline "
    "timed out",
    "[cluster][timeout]") {
    // The request path adds 1 ms each way (client_ms): one request sent at 0 reaches the engine at 1 ms, its 10 tokens
    // end steps at 5, 9, …, 41 ms and reach the client 1 ms later, the last at 42 ms. A 41.5 ms time-out: the engine
    // finishes the request at 41, before the deadline, but the client gives up at 41.5, before the last chunk: a
    // time-out, told at 41.5, in no figure. A 42 ms time-out: finished, E2E 42 ms.
    FixedCost cost(4);
    SimulationConfig c = timeout_config(true);
    c.request_path.client_ms = 1;
    SECTION("41.5 ms") {
        ScriptedWorkload w({with_timeout(spec(0, 0, {{content(1), 32}}, 10), 0.0415)});
        Simulation sim(c, cost, w, make_router("round_robin"));
        const metrics::Summary s = sim.run().summary;
        CHECK(s.num_requests_finished == 0);
        CHECK(s.num_requests_timed_out == 1);
        CHECK(s.e2e_ms.count == 0);
        CHECK(s.ttft_ms.count == 0);
        REQUIRE(w.timed_out.size() == 1);
        CHECK(w.timed_out[0].second == core::SimTime::from_ns(41'500'000));
        CHECK(w.finished.empty());
    }
    SECTION("42 ms") {
        ScriptedWorkload w({with_timeout(spec(0, 0, {{content(1), 32}}, 10), 0.042)});
        Simulation sim(c, cost, w, make_router("round_robin"));
        const metrics::Summary s = sim.run().summary;
        CHECK(s.num_requests_finished == 1);
        CHECK(s.num_requests_timed_out == 0);
        CHECK(close(s.e2e_ms.max, 42));
        CHECK(w.timed_out.empty());
    }
}

TEST_CASE("Simulation: a time-out that is not reached leaves no trace in the run", "[cluster][timeout]") {
    // Both requests finish long before their 300 s deadlines (at 8 ms and 12 ms): the run ends at 12 ms, not at a
    // deadline, and every figure equals the run without time-outs. A 1 s time series is sampled at 0 only, as
    // without: a finished request's deadline is no event.
    FixedCost cost(4);
    auto run = [&](bool timeouts) {
        std::vector<workloads::RequestSpec> specs = {spec(0, 0, {{content(1), 32}}, 2),
                                                     spec(1, 4, {{content(2), 32}}, 2)};
        if (timeouts) {
            for (auto& s : specs) {
                s.timeout = core::Duration::from_s(300);
            }
        }
        ScriptedWorkload w(specs);
        SimulationConfig c = timeout_config(timeouts);
        c.sample_interval = core::Duration::from_s(1);
        Simulation sim(c, cost, w, make_router("round_robin"));
        return sim.run();
    };
    const SimulationResult with = run(true);
    const SimulationResult without = run(false);
    CHECK(close(with.summary.duration_s, 0.012));
    CHECK(with.summary.duration_s == without.summary.duration_s);
    CHECK(with.summary.ttft_ms.mean == without.summary.ttft_ms.mean);
    CHECK(with.summary.itl_ms.count == without.summary.itl_ms.count);
    CHECK(with.summary.e2e_ms.mean == without.summary.e2e_ms.mean);
    CHECK(with.num_events == without.num_events);
    CHECK(with.timeseries.size() == without.timeseries.size());
    CHECK_FALSE(with.hit_max_time);
}

TEST_CASE("Simulation: runs with time-outs are deterministic", "[cluster][timeout]") {
    // An overloaded bench_serve run (400 prompts at 200 req/s, 300 tokens out each, 4 ms + 0.01 ms/token steps)
    // whose clients give up after 2 s: run twice, every figure is the same, and some but not all time out.
    const auto yaml = workloads::test::yaml(
        "type: bench_serve\nnum_prompts: 400\nrequest_rate: 200\nrandom_input_len: 500\nrandom_output_len: 300\n"
        "random_range_ratio: 0.5\nrequest_timeout: 2s\n");
    FixedCost cost(4, 0.01);
    auto run = [&] {
        auto w = workloads::make_workload(yaml, 7);
        SimulationConfig c = timeout_config(true);
        c.replica.kv_cache = full_attention_config(2000);
        c.replica.check_invariants = true;
        c.keep_request_records = true;
        Simulation sim(c, cost, *w, make_router("round_robin"));
        return sim.run();
    };
    const SimulationResult a = run();
    const SimulationResult b = run();
    CHECK(a.summary.num_requests_timed_out > 0);
    CHECK(a.summary.num_requests_finished > 0);
    CHECK(a.summary.num_requests_timed_out + a.summary.num_requests_finished == 400);
    CHECK(a.summary.num_requests_timed_out == b.summary.num_requests_timed_out);
    CHECK(a.summary.ttft_ms.p99 == b.summary.ttft_ms.p99);
    CHECK(a.summary.itl_ms.mean == b.summary.itl_ms.mean);
    CHECK(a.summary.e2e_ms.max == b.summary.e2e_ms.max);
    CHECK(a.summary.duration_s == b.summary.duration_s);
    CHECK(a.num_events == b.num_events);
    CHECK(a.summary.e2e_ms.max <= 2000.0);  // no finished request took longer than its client waited
}

}  // namespace servesim::cluster
