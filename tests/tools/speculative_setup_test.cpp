// engine.speculative_config resolved against the target (tools/app/experiment_parts.cpp resolve_speculative,
// add_speculative_memory → cache::plan_memory): a draft_model checkpoint resolved as `model` is, vLLM's rules on
// it (draft TP, vocabulary), the drafter's weights and KV per rank for each method, and the block size of the
// #45238 deployment (Qwen3.x-27B, fp8 KV, MTP k = 3: 1,600 tokens).
#include <string>

#include "calibration/gpu_spec.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"
#include "tests/config_error.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

cache::MemoryPlan plan_with(const std::string& model, const EngineSettings& e) {
    const models::ModelSpec target = resolve_engine_model(model, e);
    cache::MemoryPlanRequest r = memory_plan_request(e, calibration::find_gpu("H100-SXM"));
    add_speculative_memory(r, e, target);
    return cache::plan_memory(target, r);
}

TEST_CASE("draft_model: Llama-3.1-8B drafting for Llama-3.1-70B at TP 4 — its weights and 32 KV layers per rank",
          "[tools][speculative]") {
    EngineSettings e;
    e.tensor_parallel_size = 4;
    e.speculative_config = R"({"method": "draft_model", "model": "Llama-3.1-8B", "num_speculative_tokens": 4})";
    e.speculative_mean_acceptance_length = 2.5;
    const models::ModelSpec target = resolve_engine_model("Llama-3.1-70B", e);
    const auto s = resolve_speculative(e, target);
    REQUIRE(s);
    REQUIRE(s->draft_model);
    CHECK(s->draft_model->name == models::resolve_model("Llama-3.1-8B").name);
    REQUIRE(s->memory);
    // Llama-3.1-8B's 8,030,261,248 parameters less its 65 RMSNorm vectors of 4,096 (servesim counts the matrices:
    // docs/MODELS.md) = 8,029,995,008, bf16: 16,059,990,016 B over 4 ranks = 4,014,997,504 B.
    CHECK(models::weight_bytes_total(*s->draft_model) == 16'059'990'016);
    CHECK(s->memory->weight_bytes == 4'014'997'504);
    CHECK(s->memory->attention_layers.size() == 32);

    const cache::MemoryPlan plain = [&] {
        EngineSettings p = e;
        p.speculative_config.reset();
        p.speculative_mean_acceptance_length.reset();
        return plan_with("Llama-3.1-70B", p);
    }();
    const cache::MemoryPlan draft = plan_with("Llama-3.1-70B", e);
    // Both models have 8 KV heads × 128: 2 per rank, 2 · 2 · 128 · 2 B = 1,024 B per layer and token; the draft's
    // 32 layers join the target's 80 in one group of 112.
    CHECK(plain.group_size == 80);
    CHECK(draft.group_size == 112);
    CHECK(draft.draft_kv_bytes_per_token == 32'768);  // 32 · 1,024
    CHECK(draft.kv_bytes_per_token == 114'688);       // 112 · 1,024
    CHECK(draft.weight_bytes == plain.weight_bytes + 4'014'997'504);
    CHECK(draft.kv_cache_memory_bytes == plain.kv_cache_memory_bytes - 4'014'997'504);
    CHECK(draft.num_gpu_blocks == draft.kv_cache_memory_bytes / (16 * 1'024 * 112));
    CHECK(draft.num_gpu_blocks < plain.num_gpu_blocks);
}

TEST_CASE("EAGLE-3 and MTP heads: one target layer and the input projection per rank", "[tools][speculative]") {
    EngineSettings e;
    e.tensor_parallel_size = 4;
    e.speculative_config =
        R"({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 3})";
    const models::ModelSpec target = resolve_engine_model("Llama-3.1-70B", e);
    const auto s = resolve_speculative(e, target);
    REQUIRE(s->memory);
    // One Llama-3.1-70B layer (h 8,192, 64 q / 8 KV heads × 128, MLP 28,672): q 8,192², k and v 8,192 · 1,024 each,
    // o 8,192², MLP 3 · 8,192 · 28,672: 67,108,864 · 2 + 16,777,216 + 704,643,072 = 855,638,016 parameters (norms
    // not counted); EAGLE-3's fc 3 · 8,192 · 8,192 = 201,326,592; bf16: 2,113,929,216 B / 4 ranks = 528,482,304 B.
    CHECK(s->memory->weight_bytes == 528'482'304);
    CHECK(s->memory->attention_layers.size() == 1);
    const cache::MemoryPlan p = plan_with("Llama-3.1-70B", e);
    CHECK(p.group_size == 81);
    CHECK(p.draft_kv_bytes_per_token == 1'024);
}

TEST_CASE("draft_model refusals: another vocabulary, a draft TP that is not the target's", "[tools][speculative]") {
    EngineSettings e;
    e.tensor_parallel_size = 4;
    e.speculative_config = R"({"method": "draft_model", "model": "Qwen3-4B", "num_speculative_tokens": 4})";
    const models::ModelSpec target = resolve_engine_model("Llama-3.1-70B", e);
    // Qwen3-4B's 151,936 tokens against Llama's 128,256 (verify_equal_vocab_size_if_draft_model).
    CHECK(testing::config_error_of([&] { (void)resolve_speculative(e, target); })
              .find("key 'model': draft model 'Qwen3-4B' has vocab_size 151936") != std::string::npos);
    e.speculative_config = R"({"method": "draft_model", "model": "Llama-3.1-8B", "num_speculative_tokens": 4,
                              "draft_tensor_parallel_size": 1})";
    CHECK(testing::config_error_of([&] { (void)resolve_speculative(e, target); })
              .find("key 'draft_tensor_parallel_size': 1 with tensor_parallel_size 4") != std::string::npos);
    e.speculative_config = R"({"method": "draft_model", "model": "no-such-model", "num_speculative_tokens": 4})";
    CHECK(testing::config_error_of([&] { (void)resolve_speculative(e, target); })
              .find("key 'model': draft model 'no-such-model'") != std::string::npos);
    // Acceptance has no published default for a draft model: it stays an input.
    e.speculative_config = R"({"method": "draft_model", "model": "Llama-3.1-8B", "num_speculative_tokens": 4})";
    CHECK(testing::config_error_of([&] { (void)resolve_speculative(e, target); })
              .find("method draft_model has no default acceptance") != std::string::npos);
}

TEST_CASE("#45238's deployment: fp8 KV and MTP k = 3 raise Qwen3.x-27B's attention block to 1,600 tokens",
          "[tools][speculative]") {
    // The thread (vLLM #45238, comment of 2026-08-24): Qwen3.8-27B (the Qwen3.5-27B architecture), fp8_e4m3 KV,
    // MTP k = 3, prefix caching: "forces attention block size to 1600". GDN layer: 16 K heads, 48 V heads × 128,
    // conv kernel 4. State: ssm 48 · 128 · 128 · 4 B = 3,145,728; conv (4 − 1 + 3) · (2·16·128 + 48·128) · 2 B =
    // 6 · 10,240 · 2 = 122,880; 3,268,608 B. fp8 attention: 2 · 4 KV heads · 256 · 1 B = 2,048 B per token.
    // ⌈3,268,608 / (16 · 2,048)⌉ = ⌈99.75⌉ = 100 → 1,600 tokens. Without MTP the conv holds 3 columns (61,440 B):
    // ⌈3,207,168 / 32,768⌉ = ⌈97.87⌉ = 98 → 1,568; the MTP layer is the one thing that makes 1,600.
    EngineSettings e;
    e.kv_cache_dtype_fp8 = true;
    e.max_model_len = 32'768;
    e.kv_cache_memory_bytes = 16LL << 30;
    const cache::MemoryPlan plain = plan_with("Qwen3.5-27B", e);
    CHECK(plain.block_size == 1'568);
    e.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 3})";
    const cache::MemoryPlan mtp = plan_with("Qwen3.5-27B", e);
    CHECK(mtp.mamba_page_size_bytes == 3'268'608);
    CHECK(mtp.block_size == 1'600);
    CHECK(mtp.enable_prefix_caching);
    CHECK(mtp.mamba_cache_mode == cache::MambaCacheMode::kAlign);
}

}  // namespace
}  // namespace servesim::app
