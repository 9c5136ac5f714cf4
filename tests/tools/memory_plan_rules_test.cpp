// vLLM's start-up arithmetic as the engine uses it (docs/VLLM-RULES.md §1, §2, §4.6; §10 items 1–3 and 18): the
// memory budget and num_blocks, page sizes, the hybrid block size, and the defaults picked for an H200 against an
// RTX 3090 (app::memory_plan_request → cache::plan_memory). Also the hybrid hit of §10 item 7 on the real
// Qwen3.5-4B plan: a 2,000-token prompt sent twice hits 1,584.
#include <cmath>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

cache::MemoryPlan plan_for(const std::string& model, const std::string& gpu, EngineSettings engine = {}) {
    return cache::plan_memory(models::resolve_model(model), memory_plan_request(engine, calibration::find_gpu(gpu)));
}

TEST_CASE("Memory: available KV = ceil(total·util) − weights − activation peak − non-torch − CUDA graphs; "
          "num_blocks = floor(available / page / group_size); usable = num_blocks − 1, one pool",
          "[tools][rule1]") {
    const calibration::GpuSpec h200 = calibration::find_gpu("H200");
    const cache::MemoryPlan p = plan_for("Qwen3-4B", "H200");
    // requested = ceil(total × 0.92), on *total* memory.
    CHECK(p.requested_memory_bytes ==
          static_cast<std::int64_t>(std::ceil(static_cast<double>(h200.memory_bytes) * 0.92)));
    CHECK(p.kv_cache_memory_bytes == p.requested_memory_bytes - p.weight_bytes - p.activation_peak_bytes -
                                         p.non_torch_bytes - p.cudagraph_bytes);
    // Qwen3-4B: 36 full-attention layers in one group → group_size 36; page 65,536 B (rule 2).
    REQUIRE(p.group_size == 36);
    CHECK(p.num_gpu_blocks == p.kv_cache_memory_bytes / (p.page_size_bytes * 36));
    // The pool hands out num_blocks − 1 blocks (block 0 is the null block).
    const cache::KvCacheManager kv(p.kv_cache_config());
    CHECK(kv.num_free_blocks() == p.num_gpu_blocks - 1);
    // A hybrid's 4 groups (1 attention + 3 GDN) draw from one pool of the same size.
    const cache::MemoryPlan h = plan_for("Qwen3.5-4B", "H200", [] {
        EngineSettings e;
        e.enable_prefix_caching = true;
        return e;
    }());
    REQUIRE(h.kv_cache_config().groups.size() == 4);
    CHECK(h.group_size == 8);
    CHECK(h.num_gpu_blocks == h.kv_cache_memory_bytes / (h.page_size_bytes * 8));
    CHECK(cache::KvCacheManager(h.kv_cache_config()).num_free_blocks() == h.num_gpu_blocks - 1);
}

TEST_CASE("Page sizes: full attention 2·B·kv_heads·head_dim·bytes; Mamba state padded to the attention page",
          "[tools][rule2]") {
    // Qwen3-4B: 8 KV heads × 128, bf16: one token 2·8·128·2 = 4,096 B; a 16-token page 65,536 B.
    const cache::MemoryPlan q3 = plan_for("Qwen3-4B", "H200");
    CHECK(q3.attn_page_size_1tok_bytes == 4096);
    CHECK(q3.page_size_bytes == 65536);
    // Qwen3.5-4B GDN: conv 3 × (2·16·128 + 32·128) × 2 B = 49,152; ssm 32 × 128 × 128 × 4 B (fp32) = 2,097,152;
    // mamba page 2,146,304 B. Attention 4 KV heads × 256: 4,096 B per token; at B = 528 the page is 2,162,688 B,
    // so the Mamba page is padded by 16,384 / 2,146,304 = 0.763 %.
    EngineSettings e;
    e.enable_prefix_caching = true;
    const cache::MemoryPlan q35 = plan_for("Qwen3.5-4B", "H200", e);
    CHECK(q35.mamba_page_size_bytes == 2146304);
    CHECK(q35.attn_page_size_1tok_bytes == 4096);
    CHECK(q35.page_size_bytes == 2162688);
    CHECK(std::abs(q35.mamba_page_padding_pct - 100.0 * 16384 / 2146304) < 1e-3);
}

TEST_CASE("Hybrid block size: B = 16·cdiv(mamba_page, 16·attn_1tok); fp8 KV halves attn_1tok and B about doubles",
          "[tools][rule3]") {
    EngineSettings e;
    e.enable_prefix_caching = true;
    // Qwen3.5-4B: 16·cdiv(2,146,304, 65,536) = 16·33 = 528; align mode, mamba_block_size = block_size.
    const cache::MemoryPlan bf16 = plan_for("Qwen3.5-4B", "H200", e);
    CHECK(bf16.block_size == 528);
    CHECK(bf16.mamba_cache_mode == cache::MambaCacheMode::kAlign);
    CHECK(bf16.mamba_block_size == 528);
    CHECK(bf16.block_size_raised);
    // fp8: attn_1tok = 2,048 → 16·cdiv(2,146,304, 32,768) = 16·66 = 1,056.
    e.kv_cache_dtype_fp8 = true;
    const cache::MemoryPlan fp8 = plan_for("Qwen3.5-4B", "H200", e);
    CHECK(fp8.attn_page_size_1tok_bytes == 2048);
    CHECK(fp8.block_size == 1056);
}

TEST_CASE("Defaults: H200 gets 8192 tokens / 1024 seqs, an RTX 3090 2048 / 256; B 16, util 0.92, prefix caching on "
          "for decoders and off for hybrids",
          "[tools][rule18]") {
    const cache::MemoryPlan h200 = plan_for("Qwen3-4B", "H200");
    CHECK(h200.max_num_batched_tokens == 8192);
    CHECK(h200.max_num_seqs == 1024);
    CHECK(h200.block_size == 16);
    CHECK(h200.gpu_memory_utilization == 0.92);
    CHECK(h200.enable_prefix_caching);

    const cache::MemoryPlan rtx = plan_for("Qwen3-4B", "RTX 3090");
    CHECK(rtx.max_num_batched_tokens == 2048);
    CHECK(rtx.max_num_seqs == 256);
    CHECK(rtx.block_size == 16);

    // A100 80GB is ≥ 70 GiB but excluded by vLLM: small defaults.
    const cache::MemoryPlan a100 = plan_for("Qwen3-4B", "A100-80GB");
    CHECK(a100.max_num_batched_tokens == 2048);
    CHECK(a100.max_num_seqs == 256);

    // Hybrid by default up to vLLM 0.27: prefix caching off, mamba_cache_mode none, one state block per request
    // (mamba_block_size = max_model_len). From 0.28 (PR #50991) it is on:
    // tests/cache/managers/hybrid_versions_test.cpp.
    EngineSettings before_50991;
    before_50991.vllm_version = "0.27";
    const cache::MemoryPlan hybrid = plan_for("Qwen3.5-4B", "H200", before_50991);
    CHECK_FALSE(hybrid.enable_prefix_caching);
    CHECK(hybrid.mamba_cache_mode == cache::MambaCacheMode::kNone);
    CHECK(hybrid.mamba_block_size == hybrid.max_model_len);

    // Releases before 0.21 default to 0.90 (PR #38284).
    EngineSettings old;
    old.vllm_version = "0.20";
    CHECK(plan_for("Qwen3-4B", "H200", old).gpu_memory_utilization == 0.90);
}

TEST_CASE("Hybrid hit on the Qwen3.5-4B plan: a 2,000-token prompt sent twice hits 1,584", "[tools][rule7]") {
    // The plan gives B = 528 in align mode. First pass: last = 2000 − 2000 % 528 = 1,584, so the first chunk is
    // forced to stop at 1,584 (3·528) and caches a state snapshot there; then 416 tokens. Second pass: the
    // full-attention hit is capped at floor(1999/528) = 3 blocks = 1,584 and the snapshot at block 2 exists → 1,584
    // (computing 416 tokens).
    EngineSettings e;
    e.enable_prefix_caching = true;
    const cache::MemoryPlan plan = plan_for("Qwen3.5-4B", "H200", e);
    REQUIRE(plan.block_size == 528);
    engine::SchedulerConfig sc;
    sc.max_num_batched_tokens = plan.max_num_batched_tokens;
    sc.max_num_seqs = plan.max_num_seqs;
    sc.max_model_len = plan.max_model_len;
    sc.block_size = plan.block_size;
    sc.mamba_align = true;
    engine::testing::Harness h(sc, plan.kv_cache_config());
    engine::Request* first = h.add(1, {{engine::testing::content(1), 2000}}, 1);
    CHECK(engine::testing::tokens_of(h.step(), first) == 1584);
    CHECK(engine::testing::tokens_of(h.step(), first) == 416);
    REQUIRE(first->status == engine::RequestStatus::kFinished);
    engine::Request* again = h.add(2, {{engine::testing::content(1), 2000}}, 1);
    CHECK(engine::testing::tokens_of(h.step(), again) == 416);
    CHECK(again->num_cached_prompt_tokens == 1584);
    CHECK(h.kv().stats().hits == 1584);
}

TEST_CASE("Memory: CUDA-graph capture sizes are 1, 2, 4, 8..248 step 8, 256..max step 16", "[tools][cudagraph]") {
    // RTX 3090 defaults (2,048 tokens, 256 seqs): max = min(512, 512, 2048) = 512 → 3 + 31 (8..248) + 17 (256..512)
    // = 51 sizes. max_num_seqs 8: max = 16 → 1, 2, 4, 8, 16.
    const auto sizes = cache::cudagraph_capture_sizes(2048, 256);
    REQUIRE(sizes.size() == 51);
    CHECK(sizes.front() == 1);
    CHECK(sizes[3] == 8);
    CHECK(sizes[33] == 248);
    CHECK(sizes[34] == 256);
    CHECK(sizes.back() == 512);
    CHECK(cache::cudagraph_capture_sizes(2048, 8) == std::vector<std::int64_t>{1, 2, 4, 8, 16});
}

TEST_CASE("Memory: from vLLM 0.21 the CUDA-graph estimate (first capture + 1 MiB per further graph and mode) "
          "comes off the KV budget; 0.20 subtracts nothing", "[tools][cudagraph]") {
    // Qwen3-4B on an RTX 3090 (2,048 / 256): PIECEWISE has 51 graphs, FULL the 35 sizes ≤ 256. The first capture is
    // the forward working set of 512 tokens = activation_peak_bytes(512 tokens, 0 sampler rows); each further graph
    // 1 MiB: estimate = first + (50 + 34) MiB.
    const auto model = models::resolve_model("Qwen3-4B");
    const std::int64_t first = cache::activation_peak_bytes(model, 512, 0);
    const std::int64_t expected = first + (50 + 34) * (1LL << 20);
    CHECK(cache::cudagraph_memory_estimate_bytes(model, 2048, 256) == expected);
    auto plan_at = [](const std::string& version) {
        EngineSettings e;
        e.vllm_version = version;
        e.gpu_memory_utilization = 0.9;
        e.max_model_len = 16384;
        return plan_for("Qwen3-4B", "RTX 3090", e);
    };
    const cache::MemoryPlan old = plan_at("0.20");
    const cache::MemoryPlan now = plan_at("0.21");
    CHECK(old.cudagraph_bytes == 0);
    CHECK(now.cudagraph_bytes == expected);
    CHECK(old.kv_cache_memory_bytes - now.kv_cache_memory_bytes == expected);
}

TEST_CASE("Memory: the profile run's vision-encoder forward sets the hybrid's torch peak", "[tools][encoder]") {
    // Qwen3.5-4B's tower: 24 × 1024, MLP 4096, patch 16, merge 2. An image of 16,777,216 px is 16,777,216 / 32² =
    // 16,384 tokens = 65,536 patches; budget max(2,048, 16,384) → 1 item. Per patch, bf16: residual + normed input
    // 2 × 1024, then max(qkv + rotated q, k + attention output 6 × 1024, fc1 + activation 2 × 4096 = 8,192), plus
    // 3 × 2 × 16 × 16 = 1,536 pixel values: 2 × (2,048 + 8,192 + 1,536) = 23,552 B → 65,536 × 23,552 =
    // 1,543,503,872 B. Encoder outputs kept: 16,384 × 2,560 × 2 = 83,886,080 B.
    const auto model = models::resolve_model("Qwen3.5-4B");
    std::int64_t outputs = 0;
    CHECK(cache::encoder_profile_peak_bytes(model, 2048, 256, 16384, 1, &outputs) == 1'543'503'872);
    CHECK(outputs == 83'886'080);
    // A 32,768-token budget and max_model_len fit 2 items: twice the patches.
    CHECK(cache::encoder_profile_peak_bytes(model, 32768, 256, 32768, 1) == 2 * 1'543'503'872LL);
    // No vision tower, no encoder term.
    CHECK(cache::encoder_profile_peak_bytes(models::resolve_model("Qwen3-4B"), 2048, 256, 16384, 1) == 0);

    EngineSettings e;
    e.vllm_version = "0.26";
    e.gpu_memory_utilization = 0.9;
    e.max_model_len = 16384;
    const cache::MemoryPlan with = plan_for("Qwen3.5-4B", "RTX 3090", e);
    e.skip_mm_profiling = true;
    const cache::MemoryPlan without = plan_for("Qwen3.5-4B", "RTX 3090", e);
    // torch peak = max(encoder 1,543,503,872, decoder + outputs): the encoder's, here.
    CHECK(with.encoder_peak_bytes == 1'543'503'872);
    CHECK(with.activation_peak_bytes == std::max<std::int64_t>(1'543'503'872, without.activation_peak_bytes + 83'886'080));
    CHECK(with.activation_peak_bytes == 1'543'503'872);
    CHECK(without.encoder_peak_bytes == 0);
    CHECK(without.kv_cache_memory_bytes - with.kv_cache_memory_bytes ==
          with.activation_peak_bytes - without.activation_peak_bytes);
}

TEST_CASE("Memory: the one-request fit check counts the padding layers' pages", "[tools][padding]") {
    // Qwen3.5-4B without two of its GDN layers: 8 attention + 22 GDN layers. 22 / 8 ≥ 1.5 → group size 8; the GDN
    // layers form cdiv(22, 8) = 3 groups (8, 8, 6 + 2 padding layers). Prefix caching off (mamba none: one state
    // page per group). _check_enough_kv_cache_memory needs group_size · page · Σ_groups blocks =
    // 8 · page · (cdiv(16384, B) + 3); counting real layers only (servesim before) needed 2 pages fewer.
    models::ModelSpec model = models::resolve_model("Qwen3.5-4B");
    model.layers.erase(model.layers.begin(), model.layers.begin() + 2);  // layers 0 and 1 are GDN
    cache::MemoryPlanRequest req;
    req.gpu_memory_bytes = 24LL << 30;
    req.max_model_len = 16384;
    req.enable_prefix_caching = false;
    req.kv_cache_memory_bytes = 8LL << 30;
    const cache::MemoryPlan roomy = cache::plan_memory(model, req);
    REQUIRE(roomy.group_size == 8);
    REQUIRE(roomy.groups.size() == 4);
    CHECK(roomy.groups.back().num_padding_layers == 2);
    const std::int64_t page = roomy.page_size_bytes;
    const std::int64_t attention_blocks = (16384 + roomy.block_size - 1) / roomy.block_size;
    const std::int64_t needed = 8 * page * (attention_blocks + 3);
    req.kv_cache_memory_bytes = needed;
    CHECK_NOTHROW(cache::plan_memory(model, req));
    // One byte less fails, although the real layers alone (needed − 2 pages) would fit.
    req.kv_cache_memory_bytes = needed - 1;
    CHECK(needed - 1 > page * (8 * attention_blocks + 22));
    CHECK_THROWS_AS(cache::plan_memory(model, req), ConfigError);
}

TEST_CASE("Batch defaults: 16,384 tokens on a GPU of >= 160 GiB from vLLM PR #51726 (servesim: 0.29)",
          "[tools][rule18]") {
    // EngineArgs.get_batch_defaults (API server): B200 reports 191,555,541,401 B = 178.4 GiB >= 160 GiB → 16,384
    // tokens and 1,024 sequences from 0.29; 8,192 before (the >= 70 GiB, not-A100 tier). H200 (141 GB = 131 GiB)
    // stays at 8,192 either way; an explicit value wins.
    const auto plan_at = [](const std::string& gpu, const std::string& version) {
        EngineSettings e;
        e.vllm_version = version;
        return plan_for("Qwen3-4B", gpu, e);
    };
    REQUIRE(calibration::find_gpu("B200").memory_bytes == 191555541401);
    CHECK(plan_at("B200", "0.29").max_num_batched_tokens == 16384);
    CHECK(plan_at("B200", "0.34").max_num_batched_tokens == 16384);
    CHECK(plan_at("B200", "0.34").max_num_seqs == 1024);
    CHECK(plan_at("B200", "0.28").max_num_batched_tokens == 8192);
    CHECK(plan_at("H200", "0.34").max_num_batched_tokens == 8192);
    EngineSettings given;
    given.max_num_batched_tokens = 4096;
    CHECK(plan_for("Qwen3-4B", "B200", given).max_num_batched_tokens == 4096);
}

}  // namespace
}  // namespace servesim::app
