// Version-dependent hybrid and sliding-window cache rules (docs/VLLM-VERSIONS.md), each on the release before the
// change and on the one that brought it: the hybrid defaults of PR #50991 (0.28), the resolution of
// prefix_cache_retention_interval (PRs #45845, #52216), where a state sparse retention does not keep goes once
// freed (PR #43447) and the sliding-window admission cap of the full-ISL check.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/core/vllm_version.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

MemoryPlan plan(const std::string& model, const std::string& version,
                const std::function<void(MemoryPlanRequest&)>& edit = {}) {
    MemoryPlanRequest r;
    r.gpu_memory_bytes = calibration::find_gpu("H200").memory_bytes;
    r.vllm_version = parse_vllm_version(version);
    if (edit) {
        edit(r);
    }
    return plan_memory(models::resolve_model(model), r);
}

TEST_CASE("Hybrid defaults (vLLM #50991, 0.28): prefix caching on and mamba_cache_mode align for every hybrid",
          "[cache][versions]") {
    // Qwen3.5-4B (GDN, no `all` interface). 0.27: prefix caching off for hybrids → mode none, one state block for
    // the request's life (mamba_block_size = max_model_len). 0.28: on by default → align, B = 528.
    const MemoryPlan q27 = plan("Qwen3.5-4B", "0.27");
    CHECK_FALSE(q27.enable_prefix_caching);
    CHECK(q27.mamba_cache_mode == MambaCacheMode::kNone);
    CHECK(q27.mamba_block_size == q27.max_model_len);
    const MemoryPlan q28 = plan("Qwen3.5-4B", "0.28");
    CHECK(q28.enable_prefix_caching);
    CHECK(q28.mamba_cache_mode == MambaCacheMode::kAlign);
    CHECK(q28.block_size == 528);
    // Nemotron-H-8B (Mamba2, supports `all`) with prefix caching asked for and no mode: 0.27 picks all, 0.28 align.
    // The modes differ in block size. Mamba page: conv 3 × (8192 + 2·8·128) × 2 B = 61,440 + ssm 128 × 64 × 128 × 4 B
    // = 4,194,304 → 4,255,744 B; attention 8 × 128 × 2 × 2 B = 4,096 B per token → 1,039 tokens. all: a multiple of
    // lcm(chunk 128, 16) = 128 → 9 × 128 = 1,152. align: 16 × cdiv(4,255,744, 16 × 4,096) = 16 × 65 = 1,040.
    const auto with_caching = [](MemoryPlanRequest& r) { r.enable_prefix_caching = true; };
    const MemoryPlan n27 = plan("Nemotron-H-8B", "0.27", with_caching);
    const MemoryPlan n28 = plan("Nemotron-H-8B", "0.28", with_caching);
    CHECK(n27.mamba_cache_mode == MambaCacheMode::kAll);
    CHECK(n28.mamba_cache_mode == MambaCacheMode::kAlign);
    CHECK(n27.block_size == 1152);
    CHECK(n28.block_size == 1040);
    // 0.28 without any setting: on, align. An explicit choice still wins in every release.
    CHECK(plan("Nemotron-H-8B", "0.28").mamba_cache_mode == MambaCacheMode::kAlign);
    CHECK(plan("Nemotron-H-8B", "0.28", [](MemoryPlanRequest& r) { r.mamba_cache_mode = MambaCacheMode::kAll; })
              .mamba_cache_mode == MambaCacheMode::kAll);
    CHECK_FALSE(plan("Qwen3.5-4B", "0.30", [](MemoryPlanRequest& r) { r.enable_prefix_caching = false; })
                    .enable_prefix_caching);
    // A dense model is unaffected: on in both.
    CHECK(plan("Qwen3-4B", "0.27").enable_prefix_caching);
}

TEST_CASE("Retention interval (vLLM #45845, #52216): dense until 0.28, 0 by default from 0.29; Mamba honours a set "
          "interval from 0.25; must be a multiple of the block size",
          "[cache][versions][retention]") {
    const auto with_caching = [](MemoryPlanRequest& r) { r.enable_prefix_caching = true; };
    CHECK_FALSE(plan("Qwen3.5-4B", "0.28").mamba_retention_interval_tokens.has_value());
    CHECK(plan("Qwen3.5-4B", "0.29").mamba_retention_interval_tokens == std::optional<std::int64_t>{0});
    // An explicit interval (2 × 528) on 0.26 (VLLM_PREFIX_CACHE_RETENTION_INTERVAL then), none on 0.30 → dense.
    CHECK(plan("Qwen3.5-4B", "0.26",
               [](MemoryPlanRequest& r) {
                   r.enable_prefix_caching = true;
                   r.prefix_cache_retention_interval = 1056;
               })
              .mamba_retention_interval_tokens == std::optional<std::int64_t>{1056});
    CHECK_FALSE(plan("Qwen3.5-4B", "0.30", [](MemoryPlanRequest& r) {
                    r.prefix_cache_retention_interval = kRetentionDense;
                }).mamba_retention_interval_tokens.has_value());
    // Before #45845 the interval applied to sliding-window groups only: Mamba stays dense.
    CHECK_FALSE(plan("Qwen3.5-4B", "0.24",
                     [](MemoryPlanRequest& r) {
                         r.enable_prefix_caching = true;
                         r.prefix_cache_retention_interval = 0;
                     })
                    .mamba_retention_interval_tokens.has_value());
    // Prefix caching off: nothing is retained anyway.
    CHECK_FALSE(plan("Qwen3.5-4B", "0.27", with_caching).mamba_retention_interval_tokens.has_value());
    // 1,000 is not a multiple of 528: refused, naming the key, the value and the block size.
    std::string message;
    try {
        (void)plan("Qwen3.5-4B", "0.29", [](MemoryPlanRequest& r) { r.prefix_cache_retention_interval = 1000; });
    } catch (const ConfigError& e) {
        message = e.what();
    }
    CHECK(message.find("prefix_cache_retention_interval: 1000") != std::string::npos);
    CHECK(message.find("(528)") != std::string::npos);
}

// One full-attention group and one Mamba group in align mode, B = 16.
KvCacheConfig hybrid_config(std::int64_t num_gpu_blocks, std::optional<std::int64_t> retention) {
    KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, 16, 0, 1});
    c.groups.push_back(KvCacheGroup{KvGroupKind::kMamba, 16, 0, 1});
    c.enable_prefix_caching = true;
    c.mamba_cache_mode = MambaCacheMode::kAlign;
    c.mamba_retention_interval_tokens = retention;
    return c;
}

std::vector<core::BlockHash> hashes(int n, std::uint64_t seed) {
    std::vector<core::BlockHash> out;
    for (int i = 0; i < n; ++i) {
        out.push_back(core::BlockHash{seed * 1000 + static_cast<std::uint64_t>(i) + 1});
    }
    return out;
}

TEST_CASE("Sparse retention (vLLM #43447): a state it does not keep is never hashed and, once freed, is allocated "
          "first",
          "[cache][versions][retention]") {
    // A 100-token prompt (6 full blocks of 16) prefilled as the align split does: 32, 64 (forced stop at
    // 100 − 100 % 16 = 96), 4. Replay boundary P − 1 = 99 → the state at floor(99/16)·16 = 96 (position 5) is kept
    // under retention 0; the state at 32 (position 1) is not. Pool: 20 blocks, block 0 null, 1..19 queued in order.
    //   chunk 1: FA blocks 1, 2; Mamba state block 3 at position 1 (hashed only when dense).
    //   chunk 2: FA blocks 4–7, Mamba block 8 at position 5 (state at 96: hashed in both).
    //   chunk 3: the previous state block 3 is freed (align keeps one running state). Dense: it holds the state at
    //   32 → the queue tail like any cached block. Retention 0: no hash → the queue head, allocated first.
    //   (remove_skipped_blocks runs before chunk 3 allocates.)
    for (const auto& retention : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{0}}) {
        INFO((retention ? "retention 0" : "dense"));
        KvCacheManager kv(hybrid_config(20, retention));
        const auto h = hashes(7, 1);
        CacheRequest r{core::RequestId{1}, &h, 100, 0, false, 100, 0};
        REQUIRE(kv.allocate_slots(r, 32, CacheHit{}));
        CHECK(kv.get_block_ids(r.id)[1] == std::vector<core::BlockId>{core::BlockId{0}, core::BlockId{3}});
        r.num_computed_tokens = 32;
        REQUIRE(kv.allocate_slots(r, 64, CacheHit{}));
        CHECK(kv.get_block_ids(r.id)[1][5] == core::BlockId{8});
        r.num_computed_tokens = 96;
        REQUIRE(kv.allocate_slots(r, 4, CacheHit{}));
        kv.check_invariants();
        const std::vector<std::int64_t> cached = kv.num_cached_blocks_per_group();
        // FA blocks 0–5 (96 tokens) in both; states: dense at 32 and 96, retention 0 at 96 only.
        CHECK(cached == std::vector<std::int64_t>{6, retention ? 1 : 2});
        // Chunk 3's new FA block (position 6) comes from the queue head right after the free: dense → 9 (block 3
        // waits at the tail), retention 0 → block 3 itself, reused before any cached block.
        CHECK(kv.get_block_ids(r.id)[0][6] == core::BlockId{retention ? 3u : 9u});
        if (!retention) {
            CHECK(kv.get_all_free_blocks().back() == core::BlockId{3});
        }
    }
}

TEST_CASE("Sliding-window admission cap: a 32k prompt is charged 521 blocks per SWA group, not 2,048 (window 128, "
          "budget 8192, B 16)",
          "[cache][versions][swa]") {
    // max_admission_blocks_per_request = cdiv(min(window − 1 + budget, L), B) + 1 = cdiv(min(127 + 8192, 40000), 16)
    // + 1 = cdiv(8319, 16) + 1 = 520 + 1 = 521. The full-ISL check of a 32,768-token prompt charges the FA group
    // cdiv(32768, 16) = 2,048 and the SWA group min(2048, 521) = 521: 2,569 blocks. The first chunk (8,192 tokens)
    // then takes 512 + 512 blocks. Without the cap (releases before 0.22 as servesim models them) the check needs
    // 4,096. Pools: 2,569 usable blocks admit it with the cap; 2,568 do not.
    CHECK(core::VllmVersion{0, 22, 0}.swa_admission_cap());
    CHECK_FALSE(core::VllmVersion{0, 21, 0}.swa_admission_cap());
    const auto config = [](std::int64_t usable, bool cap) {
        KvCacheConfig c;
        c.num_gpu_blocks = usable + 1;
        c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, 16, 0, 1});
        c.groups.push_back(KvCacheGroup{KvGroupKind::kSlidingWindow, 16, 128, 1});
        c.swa_admission_cap = cap;
        c.max_num_batched_tokens = 8192;
        c.max_model_len = 40000;
        return c;
    };
    const auto h = hashes(2048, 2);
    const CacheRequest r{core::RequestId{1}, &h, 32768, 0, false, 32768, 0};
    {
        KvCacheManager kv(config(2569, true));
        CHECK(kv.allocate_slots(r, 8192, CacheHit{}, 0, /*full_sequence_must_fit=*/true));
        CHECK(kv.num_blocks_held(r.id) == 1024);
    }
    {
        KvCacheManager kv(config(2568, true));
        CHECK_FALSE(kv.allocate_slots(r, 8192, CacheHit{}, 0, true));
    }
    {
        KvCacheManager kv(config(4095, false));
        CHECK_FALSE(kv.allocate_slots(r, 8192, CacheHit{}, 0, true));
        KvCacheManager roomy(config(4096, false));
        CHECK(roomy.allocate_slots(r, 8192, CacheHit{}, 0, true));
    }
}

}  // namespace
}  // namespace servesim::cache

namespace servesim::cache {
namespace {

TEST_CASE("--prefix-match-unit (vLLM #45939/#46384, 0.26): the block size is the default and the only value "
          "modelled; a smaller divisor, a non-divisor and a release before 0.26 are refused by name",
          "[cache][versions]") {
    // Qwen3.5-4B on an H200 at 0.30: align, B = 528. vLLM's default unit is the gcd of the groups' block sizes
    // (all 528) = 528. 0.25 has no such argument: resolved 0 ("none").
    CHECK(plan("Qwen3.5-4B", "0.30").prefix_match_unit_tokens == 528);
    CHECK(plan("Qwen3.5-4B", "0.25").prefix_match_unit_tokens == 0);
    CHECK(plan("Qwen3.5-4B", "0.30", [](MemoryPlanRequest& r) { r.prefix_match_unit = 528; }).block_size == 528);
    const auto message = [](const std::string& version, std::int64_t unit) {
        try {
            (void)plan("Qwen3.5-4B", version, [unit](MemoryPlanRequest& r) { r.prefix_match_unit = unit; });
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    // 264 divides 528 (vLLM would take it: partial-block hits) but servesim does not model partial blocks.
    CHECK(message("0.30", 264).find("prefix_match_unit: 264 is below the block size (528)") != std::string::npos);
    // 100 does not divide 528: vLLM refuses it too.
    CHECK(message("0.30", 100).find("prefix_match_unit: 100 must be a positive divisor of the block size (528)") !=
          std::string::npos);
    CHECK(message("0.25", 528).find("vLLM 0.25 has no --prefix-match-unit") != std::string::npos);
}

}  // namespace
}  // namespace servesim::cache
