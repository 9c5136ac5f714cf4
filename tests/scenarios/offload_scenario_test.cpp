// The CPU offload tier through a whole scenario: engine.kv_offloading_size wires vLLM's native offloading into the
// replica (sim/cache/offload/cpu_offload.h), and its keys are validated like every other engine key.
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

PreparedExperiment prepare_one(const std::string& engine_yaml, const std::string& model = "Qwen3-4B") {
    const std::string text = "model: " + model + "\ngpu: H200\nengine: " + engine_yaml +
                             "\nworkload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, "
                             "num_requests: 1}\n";
    const Scenario sc = load_scenario_text(text, "offload.yaml", {}, {});
    REQUIRE(sc.experiments.size() == 1);
    return prepare_experiment(sc.experiments[0]);
}

TEST_CASE("Offload scenario: the host tier's capacity is per tensor-parallel group, not per rank",
          "[scenarios][offload]") {
    // CPUOffloadingSpec: num_blocks = cpu_bytes // (Σ GPU KV tensor bytes / num_blocks × world_size). Qwen3-4B:
    // 36 layers, 8 KV heads × 128 × bf16 × (K, V) = 4,096 B per layer-token; block 16 → page 65,536 B; one block
    // id across the 36 layer tensors = 2,359,296 B. 8 GiB / 2,359,296 = 3,640.9 → 3,640 blocks at TP 1. At TP 2 a
    // rank holds 4 KV heads (page 32,768 B, 1,179,648 B per block id) and the divisor is × 2: 3,640 again
    // (servesim divided by one rank's bytes and got 7,281 before).
    const auto tp1 = prepare_one("{kv_offloading_size: 8, tensor_parallel_size: 1}");
    const auto tp2 = prepare_one("{kv_offloading_size: 8, tensor_parallel_size: 2}");
    REQUIRE(tp1.plan.page_size_bytes == 65536);
    REQUIRE(tp2.plan.page_size_bytes == 32768);
    REQUIRE(offload_config(tp1.config.engine, tp1.plan, tp1.gpu).num_cpu_blocks == 3640);
    REQUIRE(offload_config(tp2.config.engine, tp2.plan, tp2.gpu).num_cpu_blocks == 3640);
}

TEST_CASE("Offload scenario: offload_prompt_only follows the release, and the key overrides it",
          "[scenarios][offload]") {
    // PR #43797: default True from 0.23 (VllmVersion::offload_prompt_only_by_default); 0.22 stores decode blocks.
    auto prompt_only = [](const std::string& engine) {
        const auto p = prepare_one(engine);
        return offload_config(p.config.engine, p.plan, p.gpu).offload_prompt_only;
    };
    REQUIRE_FALSE(prompt_only("{kv_offloading_size: 8, vllm_version: \"0.22\"}"));
    REQUIRE(prompt_only("{kv_offloading_size: 8, vllm_version: \"0.23\"}"));
    REQUIRE(prompt_only("{kv_offloading_size: 8}"));  // 0.30
    REQUIRE_FALSE(prompt_only("{kv_offloading_size: 8, offload_prompt_only: false}"));
    REQUIRE(prompt_only("{kv_offloading_size: 8, vllm_version: \"0.22\", offload_prompt_only: true}"));
}

TEST_CASE("Offload scenario: before vLLM 0.24 a Mamba align model with a host tier is refused at start-up",
          "[scenarios][offload][errors]") {
    // Qwen3.5-4B with prefix caching resolves to mamba_cache_mode align. vLLM < #42554/#44599 asserts
    // num_external_computed_tokens == 0 in _mamba_block_aligned_split on the first CPU hit.
    const std::string engine = "{kv_offloading_size: 8, enable_prefix_caching: true, vllm_version: ";
    try {
        (void)prepare_one(engine + "\"0.23\"}", "Qwen3.5-4B");
        FAIL("no error");
    } catch (const ConfigError& e) {
        const std::string m = e.what();
        INFO(m);
        REQUIRE(m.find("offload.yaml") != std::string::npos);
        REQUIRE(m.find("engine.kv_offloading_size") != std::string::npos);
        REQUIRE(m.find("mamba_cache_mode align") != std::string::npos);
        REQUIRE(m.find("0.24") != std::string::npos);
    }
    const auto ok = prepare_one(engine + "\"0.24\"}", "Qwen3.5-4B");
    REQUIRE(ok.plan.mamba_cache_mode == cache::MambaCacheMode::kAlign);
    REQUIRE(offload_config(ok.config.engine, ok.plan, ok.gpu).mamba_align_hit_cap);
    // Without prefix caching (mode none) there is no aligned split and no assertion: accepted at 0.23.
    (void)prepare_one("{kv_offloading_size: 8, enable_prefix_caching: false, vllm_version: \"0.23\"}",
                      "Qwen3.5-4B");
}

}  // namespace
}  // namespace servesim::app
