// Client time-outs in one replica (engine::Replica::time_out, Scheduler::abort_request): the timed-out request is
// counted, left out of every latency figure, and aborted at the next step boundary as vLLM's engine core reads an
// abort between steps (Scheduler.finish_requests(..., FINISHED_ABORTED) → _free_request), which frees its blocks.
// Every time and block count below is worked by hand: FixedCost(4) makes every step 4 ms.
#include <memory>
#include <vector>

#include "sim/engine/replica.h"
#include "sim/metrics/metrics.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

using namespace servesim;
using namespace servesim::engine;
using namespace servesim::engine::testing;

namespace {

core::SimTime ms(double v) {
    return core::SimTime::from_ns(static_cast<std::int64_t>(v * 1e6));
}

ReplicaConfig timeout_config(bool async) {
    ReplicaConfig c;
    c.scheduler = scheduler_config(8192);
    c.scheduler.async_scheduling = async;
    c.async_scheduling = async;
    c.kv_cache = full_attention_config(64);  // 63 usable blocks of 16 tokens
    c.check_invariants = true;
    c.hold_token_gaps = true;  // a run whose clients time requests out
    return c;
}

IncomingRequest incoming(std::uint64_t id, std::uint64_t c, std::int64_t prompt_tokens, std::int64_t outputs) {
    IncomingRequest in;
    in.id = core::RequestId{id};
    in.arrival = core::SimTime::zero();
    in.prompt = {{content(c), prompt_tokens}};
    in.max_output_tokens = outputs;
    in.answer_content = content(900 + id);
    return in;
}

// R0: 100-token prompt, 1000 outputs (still running when its client gives up); R1: 50-token prompt, 3 outputs.
// Step 1 [0, 4] prefills both: R0 ceil(100/16) = 7 blocks, R1 ceil(50/16) = 4, free 63 − 11 = 52. Decodes stay in
// those blocks (R0 reaches 103 tokens, R1 53, both within their last block): free stays 52 until a request leaves.
// R1's tokens come at 4, 8, 12 ms: TTFT 4, ITL 4 and 4, E2E 12.
void check_only_r1_measured(const metrics::MetricsCollector& m) {
    const metrics::Summary s = m.summarize({}, 0, ms(12));
    CHECK(s.num_requests_sent == 2);
    CHECK(s.num_requests_finished == 1);
    CHECK(s.num_requests_timed_out == 1);
    CHECK(s.ttft_ms.count == 1);  // R0's first token came at 4 ms, but its client discarded the request
    CHECK(close(s.ttft_ms.max, 4));
    CHECK(s.itl_ms.count == 2);  // R1's two gaps; R0's gaps (4 ms at 8 and 12) are dropped with it
    CHECK(close(s.itl_ms.mean, 4));
    CHECK(close(s.e2e_ms.max, 12));
    CHECK(close(s.mean_output_tokens, 3));  // R0's 3 tokens count nowhere
}

}  // namespace

TEST_CASE("Replica: a request timed out during a step is aborted at the step's end and its blocks are freed",
          "[engine][timeout]") {
    FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    Replica r(timeout_config(false), cost, m);
    REQUIRE(r.add_request(incoming(0, 1, 100, 1000)));
    REQUIRE(r.add_request(incoming(1, 2, 50, 3)));
    REQUIRE(r.try_start_step(ms(0)) == ms(4));
    CHECK(r.kv_cache().num_free_blocks() == 52);
    (void)r.end_step(ms(4));
    REQUIRE(r.try_start_step(ms(4)) == ms(8));
    (void)r.end_step(ms(8));
    REQUIRE(r.try_start_step(ms(8)) == ms(12));  // step 3 [8, 12] in flight

    // R0's client gives up at 10 ms: counted now, but the step in flight keeps it (and its 7 blocks).
    CHECK(r.time_out(core::RequestId{0}));
    CHECK_FALSE(r.is_live(core::RequestId{0}));
    CHECK(r.kv_cache().num_free_blocks() == 52);
    CHECK_FALSE(r.time_out(core::RequestId{0}));  // once only

    // 12 ms: R1 finishes (its 4 blocks back: 56) and the abort frees R0's 7: all 63 free. Only R1 is reported.
    const std::vector<core::RequestId> finished = r.end_step(ms(12));
    CHECK(finished == std::vector<core::RequestId>{core::RequestId{1}});
    CHECK(r.kv_cache().num_free_blocks() == 63);
    CHECK(r.num_requests() == 0);
    CHECK(r.num_running() == 0);
    CHECK_FALSE(r.try_start_step(ms(12)).has_value());  // nothing left to run
    check_only_r1_measured(m);
}

TEST_CASE("Replica: a request timed out while no step runs is aborted at once", "[engine][timeout]") {
    // As above, but R0's client gives up at 12 ms after the step ended and before the next starts (an idle engine
    // core reads the abort at once): R1's finish leaves 56 free, the abort 63, immediately.
    FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    Replica r(timeout_config(false), cost, m);
    REQUIRE(r.add_request(incoming(0, 1, 100, 1000)));
    REQUIRE(r.add_request(incoming(1, 2, 50, 3)));
    for (double t : {0.0, 4.0, 8.0}) {
        REQUIRE(r.try_start_step(ms(t)) == ms(t + 4));
        (void)r.end_step(ms(t + 4));
    }
    CHECK(r.kv_cache().num_free_blocks() == 56);
    CHECK(r.time_out(core::RequestId{0}));
    CHECK(r.kv_cache().num_free_blocks() == 63);
    CHECK(r.num_requests() == 0);
    // R0 had a 4th token at 12 ms, one gap more than above: still dropped.
    check_only_r1_measured(m);
}

TEST_CASE("Replica: with async scheduling the step launched before the abort still runs it, with no output",
          "[engine][timeout]") {
    // Async scheduling schedules step k+1 when step k starts. Step 1 [0, 4] and step 2 [4, 8] as above; step 3
    // [8, 12] carries R1's last token; step 4, scheduled at 8, holds only R0 (R1's three tokens are all placed).
    // R0 times out at 10: at 12 R1 finishes and the abort frees R0's blocks (63 free) before step 4 starts — which
    // was launched already, so it runs [12, 16] with R0 in it (vLLM runs the batch and drops the aborted request's
    // output). At 16 nothing is emitted and nothing is left.
    FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    Replica r(timeout_config(true), cost, m);
    REQUIRE(r.add_request(incoming(0, 1, 100, 1000)));
    REQUIRE(r.add_request(incoming(1, 2, 50, 3)));
    for (double t : {0.0, 4.0}) {
        REQUIRE(r.try_start_step(ms(t)) == ms(t + 4));
        (void)r.end_step(ms(t + 4));
    }
    REQUIRE(r.try_start_step(ms(8)) == ms(12));
    CHECK(r.time_out(core::RequestId{0}));
    CHECK(r.kv_cache().num_free_blocks() == 52);
    CHECK(r.end_step(ms(12)) == std::vector<core::RequestId>{core::RequestId{1}});
    CHECK(r.kv_cache().num_free_blocks() == 63);
    REQUIRE(r.try_start_step(ms(12)) == ms(16));  // the launched step 4
    CHECK(r.end_step(ms(16)).empty());
    CHECK(r.num_steps() == 4);
    CHECK_FALSE(r.try_start_step(ms(16)).has_value());
    CHECK(r.kv_cache().num_free_blocks() == 63);
    check_only_r1_measured(m);
}

TEST_CASE("Replica: time_out of a finished or unknown request changes nothing", "[engine][timeout]") {
    FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    Replica r(timeout_config(false), cost, m);
    REQUIRE(r.add_request(incoming(1, 2, 50, 1)));
    REQUIRE(r.try_start_step(ms(0)) == ms(4));
    CHECK(r.end_step(ms(4)) == std::vector<core::RequestId>{core::RequestId{1}});
    CHECK_FALSE(r.time_out(core::RequestId{1}));
    CHECK_FALSE(r.time_out(core::RequestId{7}));
    const metrics::Summary s = m.summarize({}, 0, ms(4));
    CHECK(s.num_requests_finished == 1);
    CHECK(s.num_requests_timed_out == 0);
}
