// The fused-MoE compiles through the experiment (sim/engine/fused_moe_jit.h, docs/HOST-WORK.md "Triton compiles
// mid-serving"): charged only for a freshly started server (engine.triton_jit_compile_ms given), never by default.
#include <string>

#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

// Qwen3-30B-A3B (128 experts, top-8, bf16) on an H100, one request of a 601-token prompt.
ExperimentConfig mixtral_one_request() {
    ExperimentConfig x;
    x.file = "jit.yaml";
    x.name = "jit";
    x.model = "Qwen3-30B-A3B";
    x.gpu = "H100";
    x.workload = YAML::Load("{type: synthetic, rate: 1, prompt_tokens: 601, output_tokens: 2, num_requests: 1}");
    return x;
}

TEST_CASE("Fused-MoE compiles: none by default (steady state); a fresh server's first eager step waits for two",
          "[tools][fused_moe_jit]") {
    // The prefill step holds 601 tokens, above the largest captured size (min(2 · max_num_seqs, 512,
    // max_num_batched_tokens) = 512): eager, tile 512, num_valid 8 · 601 = 4,808 and EM ≡ 4,808 − 128 = 4,680, neither
    // divisible by 16 — a variant start-up did not compile (its 512-token capture: 4,096 and 3,968, both divisible).
    // Two compiles at 270 ms: 540 ms.
    const auto steady = run_experiments({mixtral_one_request()}, 1, {});
    REQUIRE(steady.size() == 1);
    CHECK(steady[0].sim.total_cost.jit_ms == 0);
    ExperimentConfig fresh = mixtral_one_request();
    fresh.engine.triton_jit_compile_ms = 270;
    const auto cold = run_experiments({fresh}, 1, {});
    REQUIRE(cold.size() == 1);
    CHECK(cold[0].sim.total_cost.jit_ms == 540);
    CHECK(cold[0].sim.summary.ttft_ms.mean - steady[0].sim.summary.ttft_ms.mean == Approx(540).margin(1e-6));
}

}  // namespace
}  // namespace servesim::app
