// The memory plan for the architectures beyond GQA/Mamba (sim/memory/memory_plan.cpp): MLA's latent page and the
// block size of the MLA backend vLLM picks (vllm/platforms/cuda.py, vllm/v1/attention/backends/mla/*.py), and the
// window of a sliding-window or chunked-local group carried into the KvCacheConfig the cache manager is built from.
#include <string>

#include "common/error.h"
#include "models/hf_config.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

std::string fixture(const std::string& name) {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name;
}

MemoryPlanRequest request_16gib(int compute_capability, bool fp8) {
    MemoryPlanRequest r;
    r.gpu_memory_bytes = 150'109'880'320;  // H200
    r.kv_cache_memory_bytes = 16LL << 30;  // fixed, so the plan does not depend on the weights fitting
    r.gpu_compute_capability = compute_capability;
    r.kv_cache_dtype_fp8 = fp8;
    return r;
}

TEST_CASE("DeepSeek-V3 on Hopper: FLASH_ATTN_MLA's block 16, a 576-element latent page, one group of 61 layers",
          "[cache][mla]") {
    const auto spec = models::read_hf_config(fixture("DeepSeek-V3.json"));
    const MemoryPlan p = plan_memory(spec, request_16gib(90, false));
    // One token, one layer: (512 + 64) · 2 B = 1,152; page 16 · 1,152 = 18,432 B.
    CHECK(p.block_size == 16);
    CHECK(p.attn_page_size_1tok_bytes == 1'152);
    CHECK(p.page_size_bytes == 18'432);
    CHECK(p.kv_bytes_per_token == 70'272);  // 61 · 1,152
    REQUIRE(p.groups.size() == 1);
    CHECK(p.group_size == 61);
    // num_blocks = floor(17,179,869,184 / 18,432 / 61) = floor(932,067 / 61) = 15,279.
    CHECK(p.num_gpu_blocks == 15'279);
}

TEST_CASE("DeepSeek-V3 with an fp8 KV cache on Hopper takes FLASHMLA's block 64", "[cache][mla]") {
    const auto spec = models::read_hf_config(fixture("DeepSeek-V3.json"));
    const MemoryPlan p = plan_memory(spec, request_16gib(90, true));
    // FLASH_ATTN_MLA takes no fp8 KV; FLASHMLA's kernel block is 64: page 64 · 576 · 1 B = 36,864 B.
    CHECK(p.block_size == 64);
    CHECK(p.page_size_bytes == 36'864);
    // floor(17,179,869,184 / 36,864 / 61) = floor(466,033 / 61) = 7,639.
    CHECK(p.num_gpu_blocks == 7'639);
}

TEST_CASE("DeepSeek-V3 on Blackwell takes FLASHINFER_MLA's block 32; --block-size wins", "[cache][mla]") {
    const auto spec = models::read_hf_config(fixture("DeepSeek-V3.json"));
    CHECK(plan_memory(spec, request_16gib(100, false)).block_size == 32);
    MemoryPlanRequest r = request_16gib(90, true);
    r.block_size = 128;
    CHECK(plan_memory(spec, r).block_size == 128);
}

// Two sliding-window layers (window 512) and one full-attention layer, 8 KV heads × 128.
models::ModelSpec sliding_model() {
    models::ModelSpec spec;
    spec.name = "swa-test";
    spec.hidden_size = 1024;
    spec.vocab_size = 1000;
    spec.max_position_embeddings = 4096;
    models::AttentionMixer swa{8, 8, 128};
    swa.sliding_window_tokens = 512;
    models::AttentionMixer full{8, 8, 128};
    spec.layers = {{swa, models::DenseMlp{4096}}, {full, models::DenseMlp{4096}}, {swa, models::DenseMlp{4096}}};
    return spec;
}

TEST_CASE("kv_cache_config carries each sliding-window group's window (the manager needs it)", "[cache][swa]") {
    MemoryPlanRequest r = request_16gib(90, false);
    const MemoryPlan p = plan_memory(sliding_model(), r);
    // 1 full and 2 sliding layers: 2 < 1.5 · 1 fails, so group size 1 → groups full, sliding, sliding.
    REQUIRE(p.groups.size() == 3);
    const KvCacheConfig c = p.kv_cache_config();
    CHECK(c.groups[0].kind == KvGroupKind::kFullAttention);
    CHECK(c.groups[0].sliding_window_tokens == 0);
    CHECK(c.groups[1].kind == KvGroupKind::kSlidingWindow);
    CHECK(c.groups[1].sliding_window_tokens == 512);
    CHECK(c.groups[2].sliding_window_tokens == 512);
    // The manager builds (a window of 0 was refused by SlidingWindowManager's check).
    const KvCacheManager kv(c);
    CHECK(kv.num_free_blocks() == p.num_gpu_blocks - 1);
}

TEST_CASE("Sliding layers with different windows form different groups", "[cache][swa]") {
    models::ModelSpec spec = sliding_model();
    std::get<models::AttentionMixer>(spec.layers[2].mixer).sliding_window_tokens = 1024;
    const MemoryPlan p = plan_memory(spec, request_16gib(90, false));
    // Specs: full ×1, window 512 ×1, window 1024 ×1 → three groups of one layer.
    REQUIRE(p.groups.size() == 3);
    CHECK(p.group_size == 1);
    const KvCacheConfig c = p.kv_cache_config();
    CHECK(c.groups[1].sliding_window_tokens == 512);
    CHECK(c.groups[2].sliding_window_tokens == 1024);
}

TEST_CASE("Attention layers with different KV bytes per token are refused by name", "[cache][swa]") {
    models::ModelSpec spec = sliding_model();
    std::get<models::AttentionMixer>(spec.layers[1].mixer).head_dim = 256;
    std::string message;
    try {
        (void)plan_memory(spec, request_16gib(90, false));
    } catch (const ConfigError& e) {
        message = e.what();
    }
    CHECK(message.find("swa-test") != std::string::npos);
    CHECK(message.find("different KV bytes per token (4096 and 8192)") != std::string::npos);
}

TEST_CASE("Gemma-3-27B: 10 full and 52 sliding layers in 7 groups of 10, each sliding group with its window",
          "[cache][swa]") {
    const auto spec = models::read_hf_config(fixture("gemma-3-27b-it.json"));
    const MemoryPlan p = plan_memory(spec, request_16gib(90, false));
    // 52 ≥ 1.5 · 10, so the group size is the smaller count, 10: full 1 group, sliding cdiv(52, 10) = 6 groups
    // (vLLM "Add 8 padding layers"). Page 16 · 2 · 16 · 128 · 2 = 131,072 B.
    CHECK(p.group_size == 10);
    REQUIRE(p.groups.size() == 7);
    CHECK(p.page_size_bytes == 131'072);
    // floor(17,179,869,184 / 131,072 / 10) = 13,107.
    CHECK(p.num_gpu_blocks == 13'107);
    const KvCacheConfig c = p.kv_cache_config();
    CHECK(c.groups[0].kind == KvGroupKind::kFullAttention);
    for (std::size_t g = 1; g < 7; ++g) {
        CHECK(c.groups[g].kind == KvGroupKind::kSlidingWindow);
        CHECK(c.groups[g].sliding_window_tokens == 1024);
    }
    // One max-length request (131,072 tokens): full 8,192 blocks; each sliding group cdiv(min(1,023 + 8,192,
    // 131,072), 16) + 1 = 577 → 8,192 + 6 · 577 = 11,654 blocks.
    CHECK(p.blocks_per_request == 11'654);
    CHECK(KvCacheManager(c).num_free_blocks() == p.num_gpu_blocks - 1);
}

TEST_CASE("Llama-4-Scout: 12 full layers and 36 chunked-local layers in 4 groups; the chunk reaches the manager",
          "[cache][chunked]") {
    const auto spec = models::read_hf_config(fixture("Llama-4-Scout-17B-16E-Instruct.json"));
    MemoryPlanRequest r = request_16gib(90, false);
    r.max_model_len = 131'072;
    const MemoryPlan p = plan_memory(spec, r);
    // 36 ≥ 1.5 · 12 → group size 12: full 1 group, chunked 3. Page 16 · 2 · 8 · 128 · 2 = 65,536 B.
    CHECK(p.group_size == 12);
    REQUIRE(p.groups.size() == 4);
    CHECK(p.page_size_bytes == 65'536);
    // floor(17,179,869,184 / 65,536 / 12) = floor(262,144 / 12) = 21,845.
    CHECK(p.num_gpu_blocks == 21'845);
    const KvCacheConfig c = p.kv_cache_config();
    for (std::size_t g = 1; g < 4; ++g) {
        CHECK(c.groups[g].kind == KvGroupKind::kChunkedLocal);
        CHECK(c.groups[g].attention_chunk_tokens == 8192);
    }
    // Per max-length request: full cdiv(131,072, 16) = 8,192; chunked cdiv(min(8,192 + 8,192, 131,072), 16) = 1,024
    // each (ChunkedLocalAttentionSpec.max_memory_usage_bytes) → 8,192 + 3 · 1,024 = 11,264.
    CHECK(p.blocks_per_request == 11'264);
    CHECK(KvCacheManager(c).num_free_blocks() == p.num_gpu_blocks - 1);
}

TEST_CASE("Mamba-Codestral: no max_position_embeddings → vLLM's 2,048; one state page per layer", "[cache][mamba2]") {
    const auto spec = models::read_hf_config(fixture("Mamba-Codestral-7B-v0.1.json"));
    const MemoryPlan p = plan_memory(spec, request_16gib(90, false));
    CHECK(p.max_model_len == 2048);
    // Attention-free: page = one layer's state, conv 61,440 + ssm 2,097,152 = 2,158,592 B; one group of 64.
    CHECK(p.page_size_bytes == 2'158'592);
    CHECK(p.group_size == 64);
    // floor(floor(17,179,869,184 / 2,158,592) / 64) = floor(7,958 / 64) = 124.
    CHECK(p.num_gpu_blocks == 124);
    CHECK(p.state_bytes_per_sequence == 138'149'888);
}

TEST_CASE("Jamba: the attention block grows to 80 tokens so its page covers the Mamba-1 state", "[cache][jamba]") {
    const auto spec = models::read_hf_config(fixture("Jamba-v0.1.json"));
    const MemoryPlan p = plan_memory(spec, request_16gib(90, false));
    // vLLM 0.30: prefix caching on for hybrids, mamba_cache_mode align. Attention 2 · 8 · 128 · 2 = 4,096 B per
    // token; Mamba-1 page 311,296 B → block 16 · cdiv(311,296, 16 · 4,096) = 80, page 327,680 B.
    CHECK(p.mamba_cache_mode == MambaCacheMode::kAlign);
    CHECK(p.mamba_page_size_bytes == 311'296);
    CHECK(p.block_size == 80);
    CHECK(p.page_size_bytes == 327'680);
    // 4 attention and 28 Mamba layers: group size 4 → 1 + 7 groups.
    CHECK(p.group_size == 4);
    CHECK(p.groups.size() == 8);
    // floor(floor(17,179,869,184 / 327,680) / 4) = floor(52,428 / 4) = 13,107.
    CHECK(p.num_gpu_blocks == 13'107);
}

}  // namespace
}  // namespace servesim::cache
