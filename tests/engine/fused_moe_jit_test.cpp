// Tests sim/engine/fused_moe_jit.*: which fused-MoE variants vLLM's start-up compiles, which eager steps meet a new
// one, and the step that waits for its two compiles (the gate/up and the down projection), worked by hand for
// Mixtral-8x7B's routing (8 experts, top-2) and Qwen3-30B-A3B's (128, top-8).
#include "sim/engine/fused_moe_jit.h"

#include "sim/engine/replica.h"
#include "sim/metrics/metrics.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {

using testing::close;
using testing::content;

namespace {

core::SimTime ms(double v) {
    return core::SimTime::zero() + core::Duration::from_ms(v);
}

}  // namespace

TEST_CASE("Fused-MoE JIT: the tuned files' key nearest M, ties to the smaller", "[engine][fused_moe_jit]") {
    CHECK(FusedMoeJit::config_key(1) == 1);
    CHECK(FusedMoeJit::config_key(3) == 2);      // |2 − 3| = |4 − 3|: the smaller
    CHECK(FusedMoeJit::config_key(384) == 256);  // 128 from both 256 and 512
    CHECK(FusedMoeJit::config_key(385) == 512);
    CHECK(FusedMoeJit::config_key(768) == 512);  // 256 from both 512 and 1024
    CHECK(FusedMoeJit::config_key(769) == 1024);
    CHECK(FusedMoeJit::config_key(1281) == 1536);
    CHECK(FusedMoeJit::config_key(9000) == 4096);
}

TEST_CASE("Fused-MoE JIT: Mixtral's divisibility classes, M = 0, 4 or other mod 8", "[engine][fused_moe_jit]") {
    // E = 8, top-2: num_valid = 2M, EM ≡ 2M − 8 (mod 16). Second: 2 · [16 | 2M] + [16 | 2M − 8].
    const FusedMoeJit jit(270, 8, 2, CudaGraphSizes(256), 128, 2048);
    CHECK(jit.variant(600) == FusedMoeJit::Variant{512, 2});  // 1200 = 75 · 16; 1192 = 74 · 16 + 8
    CHECK(jit.variant(604) == FusedMoeJit::Variant{512, 1});  // 1208 = 75 · 16 + 8; 1200
    CHECK(jit.variant(601) == FusedMoeJit::Variant{512, 0});  // 1202, 1194: neither
    // Qwen3-30B-A3B: E = 128, top-8: num_valid = 8M, EM ≡ 8M − 128: both divisible when M is even, neither when odd.
    const FusedMoeJit qwen(270, 128, 8, CudaGraphSizes(512), 1024, 8192);
    CHECK(qwen.variant(602) == FusedMoeJit::Variant{512, 3});
    CHECK(qwen.variant(601) == FusedMoeJit::Variant{512, 0});
}

TEST_CASE("Fused-MoE JIT: start-up's variants; an eager step's new variant waits for two compiles",
          "[engine][fused_moe_jit]") {
    // max_num_seqs 128 → graphs up to min(256, 512, 2048) = 256; max_num_batched_tokens 2048 (the development set's
    // Mixtral runs). Start-up compiles the profile run's 2048 → (2048, 2), every capture size — 1 → (1, 0): 2 and
    // −6 not divisible; 2 → (2, 0); 4 → (4, 1): 8 no, 0 yes; 8 … 256, all multiples of 8 → (key, 2) — and the sampler
    // warm-up's min(128, 2048) = 128 → (128, 2).
    FusedMoeJit jit(270, 8, 2, CudaGraphSizes(256), 128, 2048);
    const std::size_t at_start = jit.compiled_variants();
    CHECK(jit.stall_ms(200) == 0);    // a graph replay
    CHECK(jit.stall_ms(2040) == 0);   // eager, (2048, 2): the profile run's
    CHECK(jit.stall_ms(600) == 540);  // (512, 2): 512 tokens are above the graphs; 2 × 270 ms
    CHECK(jit.stall_ms(608) == 0);    // the same variant
    CHECK(jit.stall_ms(604) == 540);  // (512, 1)
    CHECK(jit.stall_ms(601) == 540);  // (512, 0)
    CHECK(jit.stall_ms(299) == 540);  // (256, 0): 598, 590; capture sizes compiled only (256, 2)
    CHECK(jit.stall_ms(300) == 540);  // (256, 1): 600 = 37 · 16 + 8, 592 = 37 · 16
    CHECK(jit.stall_ms(296) == 0);    // (256, 2): 592, 584 — as the captured 256
    CHECK(jit.compiles() == 10);
    CHECK(jit.compiled_variants() == at_start + 5);
    // --enforce-eager: start-up compiles only the profile run's and the sampler's; a 37-token decode is eager:
    // (32, 0) (74, 66), new.
    FusedMoeJit eager(270, 8, 2, CudaGraphSizes(), 128, 2048);
    CHECK(eager.compiled_variants() == 2);
    CHECK(eager.stall_ms(37) == 540);
    CHECK(eager.stall_ms(37) == 0);
}

TEST_CASE("Replica: the first eager step of a new fused-MoE variant waits for its compiles; the next does not",
          "[engine][fused_moe_jit]") {
    // 4 ms steps (FixedCost), graphs up to 256 tokens, 270 ms a compile. R1: a 600-token prompt, 2 outputs, alone:
    // its prefill step is eager (600 > 256) at (512, 2), new: 4 + 540 = 544 ms, so TTFT 544 ms, and its decode step
    // 4 ms (1 token, a graph replay): done at 548 ms. R2 arrives at 1,000 ms with 608 tokens, (512, 2) again: TTFT
    // 4 ms. R3 at 2,000 ms with 604 tokens, (512, 1): TTFT 544 ms again.
    testing::FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    ReplicaConfig rc;
    rc.scheduler = testing::scheduler_config(2048);
    rc.kv_cache = testing::full_attention_config(200);
    rc.check_invariants = true;
    rc.fused_moe_jit = FusedMoeJit(270, 8, 2, CudaGraphSizes(256), 128, 2048);
    Replica replica(rc, cost, m);
    const auto run_one = [&](std::uint64_t id, std::int64_t prompt, core::SimTime at) {
        IncomingRequest in;
        in.id = core::RequestId{id};
        in.arrival = at;
        in.prompt = {{content(id), prompt}};
        in.max_output_tokens = 2;
        in.answer_content = content(900 + id);
        REQUIRE(replica.add_request(in));
        core::SimTime now = at;
        while (auto end = replica.try_start_step(now)) {
            now = *end;
            (void)replica.end_step(now);
        }
        return now;
    };
    CHECK(run_one(1, 600, ms(0)) == ms(548));
    CHECK(run_one(2, 608, ms(1000)) == ms(1008));
    CHECK(run_one(3, 604, ms(2000)) == ms(2548));
    CHECK(close(replica.total_cost().jit_ms, 1080));
    const metrics::Summary s = m.summarize({}, 0, ms(3000));
    CHECK(close(s.ttft_ms.mean, (544.0 + 4.0 + 544.0) / 3));
}

}  // namespace servesim::engine
