// The request path in a whole simulation (sim/frontend/api_server.h, docs/REQUEST-PATH.md): a client's TTFT is the
// request path in, the engine's wait and prefill step, and the first chunk's way out; under load the API server's
// event loop is a queue in front of the engine.
#include <cmath>

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

TEST_CASE("Request path: one request at zero load: TTFT = path in + prefill step + first chunk out",
          "[cluster][frontend]") {
    // Path: client 1 ms each way, hand-off 0.1 ms each way, event loop 2 ms per request, tokenizer 2 us per token,
    // 0.3 ms per output message + 40 us per chunk. Engine: 4 ms + 0.25 ms per token, synchronous scheduling.
    // R0: 32 prompt tokens, 2 outputs, sent at 0.
    //   in:  1 + 2 + 32 × 0.002 + 0.1 = 3.164 ms at the engine
    //   step 1 (prefill 32): 3.164 → 15.164; out: 15.264 at the server, + 0.3 + 0.04 = 15.604, client 16.604
    //   step 2 (decode 1):   15.164 → 19.414; out: 19.514 + 0.34 = 19.854, client 20.854
    // TTFT 16.604, E2E 20.854, ITL 4.25 (both chunks took the same way out).
    ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 2)});
    FixedCost cost(4, 0.25);
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    c.exact_percentiles = true;
    c.request_path = frontend::RequestPathConfig{1.0, 0.1, 2.0, 2.0, 0.3, 40.0};
    Simulation sim(c, cost, w, make_router("round_robin"));
    const metrics::Summary s = sim.run().summary;
    REQUIRE(s.num_requests_finished == 1);
    CHECK(close(s.ttft_ms.max, 16.604));
    CHECK(close(s.e2e_ms.max, 20.854));
    CHECK(close(s.itl_ms.max, 4.25));
    CHECK(close(s.queue_ms.max, 3.164));  // scheduled when it reached the engine
}

TEST_CASE("Request path: many requests sent together queue on the API server's event loop", "[cluster][frontend]") {
    // Only the event loop costs (2 ms per request); the engine takes 0.1 ms a step. Five one-token requests sent at 0
    // are parsed one after the other and reach the engine at 2, 4, 6, 8 and 10 ms; each finds it idle and is
    // sampled 0.1 ms later (2.1, 4.1, …). But the loop took the five parses first (queued at 0), so it streams
    // nothing before 10 ms: the first four chunks leave at 10, the last at 10.1. TTFTs 10, 10, 10, 10, 10.1: mean
    // 10.02 — the engine is idle most of the time; the API server is the queue.
    std::vector<workloads::RequestSpec> specs;
    for (std::uint64_t i = 0; i < 5; ++i) {
        specs.push_back(spec(i, 0, {{content(10 + i), 16}}, 1));
    }
    ScriptedWorkload w(specs);
    FixedCost cost(0.1);
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    c.exact_percentiles = true;
    c.request_path.request_cpu_ms = 2.0;
    Simulation sim(c, cost, w, make_router("round_robin"));
    const metrics::Summary s = sim.run().summary;
    REQUIRE(s.num_requests_finished == 5);
    CHECK(close(s.ttft_ms.min, 10.0));
    CHECK(close(s.ttft_ms.max, 10.1));
    CHECK(close(s.ttft_ms.mean, 10.02));
}

TEST_CASE("Request path: off, a run is unchanged", "[cluster][frontend]") {
    // The same request without a request path: prefill 0 → 12, decode 12 → 16.25 (TTFT 12, E2E 16.25).
    ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 2)});
    FixedCost cost(4, 0.25);
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    Simulation sim(c, cost, w, make_router("round_robin"));
    const metrics::Summary s = sim.run().summary;
    CHECK(close(s.ttft_ms.max, 12));
    CHECK(close(s.e2e_ms.max, 16.25));
}

}  // namespace
}  // namespace servesim::cluster
