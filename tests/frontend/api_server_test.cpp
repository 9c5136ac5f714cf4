// The request path (sim/frontend/api_server.h, docs/REQUEST-PATH.md): the API server's event loop and tokenizer
// thread serve their jobs first come, first served; hand-off and client time are latency only.
#include <cmath>

#include "sim/frontend/api_server.h"
#include "tests/catch.h"

namespace servesim::frontend {
namespace {

RequestPathConfig example() {
    RequestPathConfig c;
    c.client_ms = 1.0;
    c.handoff_ms = 0.1;
    c.request_cpu_ms = 2.0;
    c.tokenize_us_per_token = 2.0;
    c.output_message_cpu_ms = 0.3;
    c.chunk_cpu_us = 40.0;
    return c;
}

double ms(core::SimTime t) { return static_cast<double>(t.ns()) / 1e6; }

// Times are whole nanoseconds: equal to 1 ns.
bool near(double a_ms, double b_ms) { return std::abs(a_ms - b_ms) < 1e-6; }

TEST_CASE("Request path: one request at zero load reaches the engine after client, parse, tokenise and hand-off",
          "[frontend]") {
    // 1 (client) + 2 (event loop) + 600 × 2 us = 1.2 (tokenizer) + 0.1 (hand-off) = 4.3 ms.
    ApiServer api(example());
    CHECK(near(ms(api.admit(core::SimTime{}, 600)), 4.3));
    CHECK(near(api.loop_busy().ms(), 2.0));
    CHECK(near(api.tokenizer_busy().ms(), 1.2));
}

TEST_CASE("Request path: requests sent together queue on the event loop, then on the tokenizer thread",
          "[frontend]") {
    // Three 600-token requests at t = 0: all at the server at 1 ms; the loop parses them by 3, 5 and 7 ms; each then
    // tokenises for 1.2 ms on a free tokenizer (4.2, 6.2, 8.2) and is handed off 0.1 ms later.
    ApiServer api(example());
    CHECK(near(ms(api.admit(core::SimTime{}, 600)), 4.3));
    CHECK(near(ms(api.admit(core::SimTime{}, 600)), 6.3));
    CHECK(near(ms(api.admit(core::SimTime{}, 600)), 8.3));
}

TEST_CASE("Request path: a long prompt holds the tokenizer thread, not the event loop", "[frontend]") {
    // Request A: 10,000 tokens (20 ms of tokenizer). Request B (100 tokens) sent at 0 too: parsed at 5 ms, but the
    // tokenizer is busy with A from 3 to 23 ms, so B tokenises 23–23.2 and reaches the engine at 23.3.
    ApiServer api(example());
    CHECK(near(ms(api.admit(core::SimTime{}, 10000)), 23.1));
    CHECK(near(ms(api.admit(core::SimTime{}, 100)), 23.3));
}

TEST_CASE("Request path: a step's chunks reach the client after hand-off, the loop's work and the client's time",
          "[frontend]") {
    // Step ends at 10 ms with 100 sampled tokens: at the server 10.1; loop work 0.3 + 100 × 0.04 = 4.3 ms → 14.4;
    // the client has them at 15.4. A second step ending at 12 ms with 10 tokens finds the loop busy until 14.4:
    // 14.4 + 0.3 + 0.4 = 15.1, client 16.1 — the first step's chunks delay the next step's.
    ApiServer api(example());
    CHECK(near(ms(api.stream((core::SimTime{} + core::Duration::from_ms(10)), 100)), 15.4));
    CHECK(near(ms(api.stream((core::SimTime{} + core::Duration::from_ms(12)), 10)), 16.1));
}

TEST_CASE("Request path: requests and outputs share the event loop", "[frontend]") {
    // A step ends at 0 with 200 chunks: loop busy 0.1 → 8.4 (0.3 + 8 ms). A request sent at 0.5 ms reaches the
    // server at 1.5, waits for the loop until 8.4, is parsed by 10.4, tokenised (100 tokens, 0.2) by 10.6 and
    // reaches the engine at 10.7.
    ApiServer api(example());
    CHECK(near(ms(api.stream(core::SimTime{}, 200)), 9.4));
    CHECK(near(ms(api.admit((core::SimTime{} + core::Duration::from_ms(0.5)), 100)), 10.7));
}

TEST_CASE("Request path: all zero is no request path", "[frontend]") {
    const RequestPathConfig none;
    CHECK_FALSE(none.enabled());
    CHECK(describe(none) == "none");
    ApiServer api(none);
    CHECK(api.admit((core::SimTime{} + core::Duration::from_ms(3)), 1000) == (core::SimTime{} + core::Duration::from_ms(3)));
    CHECK(api.stream((core::SimTime{} + core::Duration::from_ms(5)), 64) == (core::SimTime{} + core::Duration::from_ms(5)));
}

}  // namespace
}  // namespace servesim::frontend
