// Tensor parallelism in vLLM's memory plan and the roofline cost: per-rank KV heads max(1, total/TP), Mamba state
// shapes divided by TP (mamba_utils.py), weights sharded, divisibility checks, and the all-reduce term.
#include <cmath>
#include <string>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

cache::MemoryPlan plan_for(const std::string& model, int tp, bool prefix_caching = false) {
    EngineSettings e;
    e.tensor_parallel_size = tp;
    if (prefix_caching) {
        e.enable_prefix_caching = true;
    }
    return cache::plan_memory(models::resolve_model(model), memory_plan_request(e, calibration::find_gpu("H200")));
}

TEST_CASE("TP: Qwen3-Next-80B-A3B at TP=2 keeps block 544 because both pages halve", "[tools][tp]") {
    // docs/VLLM-RULES.md §2.3: per rank attn_1tok = 2·max(1, 2/2)·256·2 = 1,024 B; Mamba page = conv
    // 3·(8,192/2)·2 = 24,576 + ssm (32/2)·128·128·2 = 524,288 → 548,864 B (half of 1,097,728).
    // B = 16·cdiv(548,864, 16·1,024) = 16·34 = 544; padding (544·1,024 − 548,864)/548,864 = 1.49 %.
    const cache::MemoryPlan p = plan_for("Qwen3-Next-80B-A3B", 2, true);
    CHECK(p.block_size == 544);
    CHECK(p.attn_page_size_1tok_bytes == 1024);
    CHECK(p.mamba_page_size_bytes == 548'864);
    CHECK(p.page_size_bytes == 544 * 1024);
    CHECK(std::abs(p.mamba_page_padding_pct - 1.4925) < 1e-3);
}

TEST_CASE("TP: Llama-3.1-70B needs two H200s; each rank holds half the KV heads and weights", "[tools][tp]") {
    // TP=1: 70.55 B params × 2 B = 131.4 GiB of weights > 0.92 × 139.8 GiB → no KV memory (vLLM's error).
    try {
        (void)plan_for("Llama-3.1-70B", 1);
        FAIL("Llama-3.1-70B fitted one H200");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("No available memory for the cache blocks") != std::string::npos);
    }
    // TP=2: KV per token per rank = 80 layers × 2 × (8/2) × 128 × 2 = 163,840 B (half of 327,680).
    const cache::MemoryPlan p = plan_for("Llama-3.1-70B", 2);
    CHECK(p.kv_bytes_per_token == 163'840);
    CHECK(p.weight_bytes == models::weight_bytes_total(models::resolve_model("Llama-3.1-70B")) / 2);
    CHECK(p.kv_cache_tokens > 0);
}

TEST_CASE("TP: KV heads are replicated when TP exceeds them", "[tools][tp]") {
    // Qwen3-Next has 2 KV heads: at TP=4 each rank still holds max(1, 2/4) = 1 head: 2·1·256·2 = 1,024 B per layer.
    const cache::MemoryPlan p = plan_for("Qwen3-Next-80B-A3B", 4, true);
    CHECK(p.attn_page_size_1tok_bytes == 1024);
}

TEST_CASE("TP: heads not divisible by the TP size are rejected as vLLM does", "[tools][tp][errors]") {
    try {
        (void)plan_for("Qwen3-4B", 3);
        FAIL("TP=3 accepted");
    } catch (const ConfigError& e) {
        const std::string m = e.what();
        CHECK(m.find("tensor_parallel_size") != std::string::npos);
        CHECK(m.find("(32) must be divisible by tensor parallel size (3)") != std::string::npos);
    }
}

TEST_CASE("TP: the roofline adds two all-reduces per layer", "[tools][tp]") {
    // Qwen3-4B, one decode token at TP=2 on NVSwitch 450 GB/s: each all-reduce is 2,560 × 2 B = 5,120 B, vLLM's
    // custom all-reduce one-shot at 2 ranks (bus 329 GB/s): 4.3 µs + 5,120 / 329e9 s = 0.0043156 ms; 36 layers × 2 =
    // 72 all-reduces → 0.310720 ms.
    const models::ModelSpec spec = models::resolve_model("Qwen3-4B");
    engine::RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    p.tensor_parallel_size = 2;
    p.tp_link = engine::CollectiveLink{engine::LinkKind::kNvlinkSwitch, 450e9};
    const engine::RooflineCostModel cost(spec, spec.dtype, p);
    engine::BatchShape s;
    s.num_tokens = 1;
    s.num_decode_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = 1;
    s.decode_context_tokens = 1000;
    CHECK(std::abs(cost.step_cost(s).comm_ms - 0.310720) < 1e-5);
    // The rank reads half the KV: 147,456 / 2 B per token × 1,000 / 4.08e12 = 0.018071 ms.
    CHECK(std::abs(cost.step_cost(s).attn_decode_ms - 0.018071) < 1e-5);
}

}  // namespace
}  // namespace servesim::app
