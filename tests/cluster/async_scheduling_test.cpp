// Async scheduling (vLLM's default; docs/VLLM-RULES.md §4.5): the next step is scheduled when a step starts, with
// output placeholders (AsyncScheduler._update_after_schedule), so a decode is scheduled before its previous token
// is back, a request arriving during a step joins the step after next, and a request whose last token is in flight
// is not scheduled again (Scheduler.schedule's max_tokens check).
#include <cmath>
#include <vector>

#include "sim/cluster/simulation.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::cluster {
namespace {

using engine::testing::content;
using engine::testing::FixedCost;
using engine::testing::full_attention_config;
using engine::testing::scheduler_config;
using engine::testing::ScriptedWorkload;
using engine::testing::spec;

using engine::testing::close;

TEST_CASE("Async scheduling: two hand-timed requests", "[cluster][async]") {
    // Step time = 4 ms + 0.25 ms per token. R0 (32 tokens, 3 outputs) sent at 0; R1 (32, 2) at 5 ms.
    //   t=0     A = {R0 prefill 32} runs [0, 12]; B = {R0 decode 1 (placeholder)} scheduled at 0
    //   t=5     R1 arrives: A runs and B is already scheduled
    //   t=12    R0 token 1 (TTFT 12). B runs [12, 16.25]; C = {R0 decode, R1 prefill 32} scheduled: 33 tokens
    //   t=16.25 R0 token 2 (ITL 4.25). C runs [16.25, 28.5]; D = {R1 decode}: R0's last token is in flight, so R0
    //           is not scheduled again
    //   t=28.5  R0 token 3, finishes (E2E 28.5, ITL 12.25); R1 token 1 (TTFT 23.5). D runs [28.5, 32.75]
    //   t=32.75 R1 token 2, finishes (E2E 27.75, ITL 4.25)
    // Synchronously R1's TTFT would be 19.25 (scheduled at 12 and run at once); here it waits for B.
    ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 3), spec(1, 5, {{content(2), 32}}, 2)});
    FixedCost cost(4, 0.25);
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(8192);
    c.replica.kv_cache = full_attention_config(64);
    c.replica.check_invariants = true;
    c.replica.async_scheduling = true;
    c.exact_percentiles = true;  // the hand-worked percentiles below are exact
    Simulation sim(c, cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    const metrics::Summary& s = r.summary;
    REQUIRE(s.num_requests_finished == 2);
    CHECK(s.num_steps == 4);
    CHECK(close(s.ttft_ms.max, 23.5));
    CHECK(close(s.ttft_ms.p50, (12 + 23.5) / 2));
    CHECK(s.itl_ms.count == 3);
    CHECK(close(s.itl_ms.p50, 4.25));
    CHECK(close(s.itl_ms.max, 12.25));
    CHECK(close(s.e2e_ms.mean, (28.5 + 27.75) / 2));
    CHECK(close(s.tpot_ms.mean, ((28.5 - 12) / 2 + 4.25) / 2));
    CHECK(close(s.queue_ms.mean, (0 + 7) / 2.0));  // R1 scheduled at 12 (for the step after B)
    CHECK(close(s.duration_s, 0.03275));
    CHECK(r.num_unfinished == 0);
}

// FixedCost that records each step's host-work fields (BatchShape::num_new_seqs, num_finished_seqs,
// host_overlapped) in the order the steps start.
class RecordingCost : public FixedCost {
public:
    using FixedCost::FixedCost;
    [[nodiscard]] engine::StepCost step_cost(const engine::BatchShape& shape) const override {
        shapes.push_back(shape);
        return FixedCost::step_cost(shape);
    }
    mutable std::vector<engine::BatchShape> shapes;
};

TEST_CASE("Async scheduling: which steps' host work overlaps the GPU, and who enters and leaves the batch",
          "[cluster][async][host_work]") {
    // The two hand-timed requests above. A = {R0 prefill} is scheduled with nothing running: its host work cannot
    // overlap (BatchShape::host_overlapped false), and R0 enters the batch. B, C and D are each scheduled while the
    // step before runs: overlapped. C admits R1 (new 1). R0 finishes at the end of C, so D carries its freeing
    // (num_finished_seqs 1). Without async scheduling no step overlaps.
    for (const bool async : {true, false}) {
        ScriptedWorkload w({spec(0, 0, {{content(1), 32}}, 3), spec(1, 5, {{content(2), 32}}, 2)});
        RecordingCost cost(4, 0.25);
        SimulationConfig c;
        c.replica.scheduler = scheduler_config(8192);
        c.replica.kv_cache = full_attention_config(64);
        c.replica.async_scheduling = async;
        Simulation sim(c, cost, w, make_router("round_robin"));
        (void)sim.run();
        // Synchronously: A [0, 12], then {R0 decode, R1 prefill} and {R0 decode, R1 decode}: 3 steps.
        REQUIRE(cost.shapes.size() == (async ? 4U : 3U));
        const auto& st = cost.shapes;
        CHECK(st[0].host_overlapped == false);
        for (std::size_t i = 1; i < st.size(); ++i) {
            CHECK(st[i].host_overlapped == async);
        }
        CHECK(st[0].num_new_seqs == 1);
        CHECK(st[0].num_finished_seqs == 0);
        if (async) {
            CHECK(st[1].num_new_seqs == 0);  // R0's decode
            CHECK(st[2].num_new_seqs == 1);  // R0's decode and R1's prefill
            CHECK(st[2].num_seqs == 2);
            CHECK(st[3].num_finished_seqs == 1);  // R0, finished at the end of C
        } else {
            CHECK(st[1].num_new_seqs == 1);  // R1's prefill beside R0's decode
            CHECK(st[2].num_finished_seqs == 0);  // R0 finishes at the end of the last step
        }
    }
}

TEST_CASE("Async scheduling: preemption under a tiny pool keeps the block accounting and finishes every request",
          "[cluster][async]") {
    // 12 requests of 32–87 tokens sharing a 24-token prefix, 20–53 outputs each, sent 1 ms apart into a pool of
    // 12 usable 16-token blocks (192 tokens): several are admitted, their decodes outgrow the pool, and running
    // requests are preempted (some while their token is in flight).
    std::vector<workloads::RequestSpec> specs;
    for (int i = 0; i < 12; ++i) {
        specs.push_back(spec(static_cast<std::uint64_t>(i), i * 1.0,
                             {{content(7), 24}, {content(100 + static_cast<std::uint64_t>(i)), 8 + 5 * i}},
                             20 + 3 * i));
    }
    ScriptedWorkload w(specs);
    FixedCost cost(4, 0.25);
    SimulationConfig c;
    c.replica.scheduler = scheduler_config(64);
    c.replica.kv_cache = full_attention_config(13);
    c.replica.check_invariants = true;
    c.replica.async_scheduling = true;
    Simulation sim(c, cost, w, make_router("round_robin"));
    const SimulationResult r = sim.run();
    CHECK(r.summary.preemptions > 0);
    CHECK(r.summary.num_requests_finished + r.summary.num_requests_rejected == 12);
    CHECK(r.num_unfinished == 0);
    CHECK(w.finished.size() == 12);
}

}  // namespace
}  // namespace servesim::cluster
