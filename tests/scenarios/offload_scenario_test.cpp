// The CPU offload tier through a whole scenario: engine.kv_offloading_size wires vLLM's native offloading into the
// replica (sim/cache/cpu_offload.h), and its keys are validated like every other engine key.
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// 80 tenants with 2,000-token system prompts on an RTX 3090 with a deliberately small GPU pool (1.5 GiB of
// Qwen3-4B KV ≈ 10,900 tokens, one 8,192-token request must fit): the GPU cannot keep the tenants' prefixes, the host pool can.
const char* kScenario = R"(name: offload-test
model: Qwen3-4B
gpu: RTX 3090
engine: {max_model_len: 8192, kv_cache_memory_bytes: 1.5GiB}
workload: {type: tenants, tenants: 80, system_prompt_tokens: 2000, user_tokens: 50, answer_tokens: 20,
           turns_per_dialogue: 3, arrival: poisson, rate: 2, num_requests: 300}
check_invariants: true
experiments:
  - name: gpu-only
  - name: host-pool
    engine: {kv_offloading_size: 8, kv_offloading_load_us_per_token: 28}
)";

TEST_CASE("Offload scenario: a host pool turns GPU misses into external hits", "[scenarios][offload]") {
    const Scenario sc = load_scenario_text(kScenario, "offload.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, {});
    REQUIRE(results.size() == 2);
    const auto& gpu_only = results[0].sim.summary;
    const auto& host = results[1].sim.summary;
    // Without a host tier nothing is counted as external; with it, lost prefixes come back from the host.
    REQUIRE(gpu_only.external_hit_rate == 0.0);
    REQUIRE(gpu_only.total_hit_rate == gpu_only.prefix_cache_hit_rate);
    REQUIRE(host.external_hit_rate > 0.0);
    REQUIRE(host.total_hit_rate > gpu_only.total_hit_rate);
    REQUIRE(host.num_requests_finished == host.num_requests_sent);
}

TEST_CASE("Offload scenario: a non-positive kv_offloading_size is rejected with file, line and key",
          "[scenarios][offload][errors]") {
    const std::string text =
        "model: Qwen3-4B\nengine:\n  kv_offloading_size: -2\n"
        "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n";
    try {
        (void)load_scenario_text(text, "bad.yaml", {}, {});
        FAIL("no error");
    } catch (const ConfigError& e) {
        const std::string m = e.what();
        INFO(m);
        REQUIRE(m.find("bad.yaml:3") != std::string::npos);
        REQUIRE(m.find("engine.kv_offloading_size") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::app
