// Hybrid (GDN/Mamba + attention) prefix-caching rules that changed between vLLM releases, one TEST_CASE per rule,
// each run on the release before the change and on the release that brought it (docs/VLLM-VERSIONS.md lists them):
// Marconi shared-prefix admission (PR #37898, 0.24), the junction kept on the request (PR #47782, 0.27) and sparse
// Mamba state retention (PRs #45845 / #52216, default from 0.29). All drive the real Scheduler over the real
// KvCacheManager step by step (tests/engine/engine_test_util.h). B is the block size; "state at t" is the Mamba
// snapshot after t tokens; the full-attention (FA) hit of a lookup is capped at floor((P − 1)/B) blocks.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/core/vllm_version.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::content;
using testing::Harness;
using testing::hybrid_align_config;
using testing::scheduler_config;
using testing::tokens_of;

SchedulerConfig align_scheduler(std::int64_t budget, int block_size, core::VllmVersion version) {
    SchedulerConfig s = scheduler_config(budget, block_size);
    s.mamba_align = true;
    s.vllm_version = version;
    return s;
}

// The prefill chunks of a request run alone: every step until its first token.
std::vector<std::int64_t> prefill_chunks(Harness& h, Request* r) {
    std::vector<std::int64_t> chunks;
    while (r->num_output_tokens == 0 && chunks.size() < 100) {
        chunks.push_back(tokens_of(h.step(), r));
    }
    (void)h.run_to_completion();
    return chunks;
}

TEST_CASE("Marconi admission (vLLM #37898, 0.24): a second request sharing a prefix stops at the junction, the third "
          "hits it",
          "[engine][versions][marconi]") {
    // B = 528, budget 8192, requests one after another, 1 output token each.
    // A [X 1100][Y 900]: align split → 1,584 (forced stop at 2000 − 2000 % 528), then 416; its only state is at
    //   1,584, inside Y.
    // B [X 1100][Z 900]: FA hits floor(1100/528) = 2 blocks = 1,056, no Mamba state inside X → hybrid hit 0,
    //   uncached common prefix u = 1,056 − 0. Before #37898: 1,584 then 416 (like A). From 0.24: the align split
    //   gives 1,584 > u, so the chunk is cut to floor(1056/528)·528 = 1,056 → a state is cached at 1,056; then the
    //   split continues 528 (to 1,584) and 416.
    // C [X 1100][W 900]: before: hit 0; from 0.24: the state at 1,056 is cached in all three GDN groups → hit 1,056.
    for (const auto& [version, marconi] : {std::pair{core::VllmVersion{0, 23, 0}, false},
                                           std::pair{core::VllmVersion{0, 24, 0}, true},
                                           std::pair{core::VllmVersion{0, 26, 0}, true}}) {
        INFO("vLLM " << version.str());
        CHECK(version.marconi_shared_prefix_admission() == marconi);
        Harness h(align_scheduler(8192, 528, version), hybrid_align_config(200, 528));
        Request* a = h.add(1, {{content(1), 1100}, {content(2), 900}}, 1);
        CHECK(prefill_chunks(h, a) == std::vector<std::int64_t>{1584, 416});
        Request* b = h.add(2, {{content(1), 1100}, {content(3), 900}}, 1);
        CHECK(prefill_chunks(h, b) ==
              (marconi ? std::vector<std::int64_t>{1056, 528, 416} : std::vector<std::int64_t>{1584, 416}));
        CHECK(b->num_cached_prompt_tokens == 0);
        Request* c = h.add(3, {{content(1), 1100}, {content(4), 900}}, 1);
        (void)h.run_to_completion();
        CHECK(c->num_cached_prompt_tokens == (marconi ? 1056 : 0));
        CHECK(h.kv().stats().hits == (marconi ? 1056 : 0));
    }
}

TEST_CASE("Shared-prefix boundary on the request (vLLM #47782, 0.27): a later chunk that would cross the junction "
          "stops on it",
          "[engine][versions][marconi]") {
    // B = 528, budget 2112 (4 blocks). Requests have 1 output token.
    // A [X 1700][Y 900], P = 2600, last = 2600 − 2600 % 528 = 2112: chunks 2112 (exactly 4 blocks), 488. Its only
    //   state is at 2112 (block 3 = tokens 1584..2112 holds X and Y).
    // Then F [W 3200] (last = 3168) and B [X 1700][Z 900] arrive together, F first:
    //   step 1: F 2112 (floored, budget used up; B not looked up).
    //   step 2: F running: 1088 left → crosses 3168 → 1056; 1056 budget left. B looks up: FA hits 3 blocks = 1,584
    //           (X fills blocks 0–2), no state inside X → hit 0, junction 0 + 1,584. B's chunk min(2600, 1056) =
    //           1056 → floored → 1056 (< u = 1584, no cut in either version): state at 1,056.
    //   step 3: F's last 32; B running: 1544 → crosses last 2112 → 1056. Up to 0.26 only a waiting request's first
    //           chunk is cut, so B runs 1,056 → 2,112 and no state is cached at 1,584. From 0.27 the junction 1,584
    //           lies inside (1056, 2112) → B runs 528 and caches the state at 1,584; then 528 (to 2112) and 488.
    // C [X 1700][V 900]: the deepest state inside X is 1,056 (≤ 0.26) or 1,584 (0.27).
    for (const auto& [version, on_request] : {std::pair{core::VllmVersion{0, 26, 0}, false},
                                              std::pair{core::VllmVersion{0, 27, 0}, true}}) {
        INFO("vLLM " << version.str());
        CHECK(version.shared_prefix_boundary_on_request() == on_request);
        Harness h(align_scheduler(2112, 528, version), hybrid_align_config(300, 528));
        Request* a = h.add(1, {{content(1), 1700}, {content(2), 900}}, 1);
        CHECK(prefill_chunks(h, a) == std::vector<std::int64_t>{2112, 488});
        Request* f = h.add(2, {{content(9), 3200}}, 1);
        Request* b = h.add(3, {{content(1), 1700}, {content(3), 900}}, 1);
        const StepPlan p1 = h.step();
        CHECK(tokens_of(p1, f) == 2112);
        CHECK(tokens_of(p1, b) == 0);
        const StepPlan p2 = h.step();
        CHECK(tokens_of(p2, f) == 1056);
        CHECK(tokens_of(p2, b) == 1056);
        CHECK(b->shared_prefix_boundary == (on_request ? 1584 : 0));
        const StepPlan p3 = h.step();
        CHECK(tokens_of(p3, f) == 32);
        CHECK(tokens_of(p3, b) == (on_request ? 528 : 1056));
        (void)h.run_to_completion();
        Request* c = h.add(4, {{content(1), 1700}, {content(4), 900}}, 1);
        (void)h.run_to_completion();
        CHECK(c->num_cached_prompt_tokens == (on_request ? 1584 : 1056));
    }
}

// A hybrid with one full-attention group and four Mamba groups (a 1:4 attention-to-state layout).
cache::KvCacheConfig one_to_four_config(std::int64_t num_gpu_blocks, int block_size,
                                        std::optional<std::int64_t> retention) {
    cache::KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kFullAttention, block_size, 0, 8});
    for (int i = 0; i < 4; ++i) {
        c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kMamba, block_size, 0, 8});
    }
    c.enable_prefix_caching = true;
    c.mamba_cache_mode = cache::MambaCacheMode::kAlign;
    c.mamba_retention_interval_tokens = retention;
    return c;
}

TEST_CASE("State retention (vLLM #45845, #52216): at block 128 dense snapshots are 80% of cached blocks in a long "
          "multi-turn run; retention 0 (0.29 default) keeps 12 states instead of 100",
          "[engine][versions][retention]") {
    // vLLM #45845: "at block_size 128 the Mamba snapshots occupy ~80% of the blocks" under dense retention, which
    // #52216 makes sparse by default (0 = replay boundary and shared-prefix junctions only). Here: B = 128, one FA
    // group and four GDN groups, budget 8192, pool of 599 usable blocks (nothing is evicted). One conversation of
    // three turns, each a new 100-token user message and a 1,000-token answer; turn k's prompt is turn k−1's prompt,
    // its answer and the new message. The last sampled token of a turn is never computed.
    //   Dense (0.28, VLLM_PREFIX_CACHE_RETENTION_INTERVAL unset):
    //   turn 1: P = 100 (< B: no boundary in prefill); decode computes up to 1,099 → boundaries 128 … 1,024: 8 FA
    //           blocks, 8 states per GDN group.
    //   turn 2: P = 1,200, hit 1,024 (FA 8 blocks, state at 1,024); split → 128 (to 1,152 = 1200 − 1200 % 128), 48;
    //           decode to 2,199 → boundaries 1,280 … 2,176 (8): FA 1 + 8 = 9 blocks, states 1 + 8 = 9 per group.
    //   turn 3: P = 2,300, hit 2,176; 124 tokens, no boundary; decode to 3,299 → 2,304 … 3,200 (8): FA 8, states 8.
    //   FA 25 blocks, states 4 × 25 = 100 → 100 / 125 = 80 %; hits 1,024 + 2,176 = 3,200.
    //   Retention 0 (0.29): a state is kept only at floor((P − 1)/B)·B and at the junction.
    //   turn 1: floor(99/128) = 0 → no state; decode states are not prompt boundaries → none. FA 8.
    //   turn 2: FA hits 1,024 but no state → hybrid hit 0, junction 1,024. Split: 1,152 (forced stop) cut at the
    //           junction → 1,024 (state kept: junction), then 128 (to 1,152 = floor(1199/128)·128: kept), 48. FA 9.
    //   turn 3: FA hits 2,176 (17 blocks), the deepest state is 1,152 → hit 1,152, junction 1,152 + 1,024 = 2,176.
    //           Split: 1,148 left → stops at 2,176 (= floor(2299/128)·128: kept), then 124. FA 8.
    //   FA: turns 2 and 3 recompute what their shorter hybrid hit left out and cache those blocks again (vLLM does
    //   not deduplicate): 8 + 17 (blocks 0–16) + 16 (blocks 9–24) = 41. States 4 × 3 = 12 → 12 / 53 = 22.6 %;
    //   hits 0 + 1,152: retention trades hits for blocks.
    for (const auto& [version, retention] :
         {std::pair{core::VllmVersion{0, 28, 0}, std::optional<std::int64_t>{}},
          std::pair{core::VllmVersion{0, 29, 0}, std::optional<std::int64_t>{0}}}) {
        INFO("vLLM " << version.str());
        CHECK(version.sparse_retention_by_default() == retention.has_value());
        Harness h(align_scheduler(8192, 128, version), one_to_four_config(600, 128, retention));
        core::TokenContent prompt;
        std::vector<std::int64_t> hits;
        for (std::uint64_t turn = 1; turn <= 3; ++turn) {
            prompt.push_back(core::ContentRun{content(100 + turn), 100});
            Request* r = h.add(turn, prompt, 1000);
            (void)h.run_to_completion();
            hits.push_back(r->num_cached_prompt_tokens);
            prompt.push_back(core::ContentRun{content(1'000'000 + turn), 1000});  // its answer, in the next prompt
        }
        const std::vector<std::int64_t> cached = h.kv().num_cached_blocks_per_group();
        const std::int64_t states = std::accumulate(cached.begin() + 1, cached.end(), std::int64_t{0});
        if (!retention) {
            CHECK(hits == std::vector<std::int64_t>{0, 1024, 2176});
            CHECK(cached == std::vector<std::int64_t>{25, 25, 25, 25, 25});
            CHECK(states * 100 / (states + cached[0]) == 80);
        } else {
            CHECK(hits == std::vector<std::int64_t>{0, 0, 1152});
            CHECK(cached == std::vector<std::int64_t>{41, 3, 3, 3, 3});
            CHECK(states == 12);
        }
    }
}

// --- published facts (vLLM issue threads), pinned with the block sizes they report ------------------------------

TEST_CASE("Published (vLLM #40696, 0.19.1): Qwen3.5-4B at block 528 — under 528 tokens never hits, a 552-token repeat "
          "hits 95.7%, a 979-token one 53.9%",
          "[engine][versions][published]") {
    // A prompt sent twice. 500: no full block → nothing to hit. 552: last = 552 − 552 % 528 = 528 → chunks 528, 24;
    // the repeat's FA cap is floor(551/528) = 1 block and the state at 528 exists → 528 / 552 = 95.65 %. 979: chunks
    // 528, 451 → the repeat hits 528 / 979 = 53.93 %.
    const core::VllmVersion v{0, 19, 1};
    for (const auto& [length, hit] : {std::pair{500, 0}, std::pair{552, 528}, std::pair{979, 528}}) {
        INFO(length << " tokens");
        Harness h(align_scheduler(8192, 528, v), hybrid_align_config(100, 528));
        (void)h.add(1, {{content(7), length}}, 1);
        (void)h.run_to_completion();
        Request* again = h.add(2, {{content(7), length}}, 1);
        (void)h.run_to_completion();
        CHECK(again->num_cached_prompt_tokens == hit);
    }
}

TEST_CASE("Published (vLLM #45238): 1600/600 prompts checkpoint at 1,584 inside the shared prefix and hit; 1500/700 "
          "checkpoint at 1,584 and 2,112 in unique tokens and never hit before #37898, hit 1,056 after",
          "[engine][versions][published]") {
    // Qwen3.5-4B, B = 528, concurrency 1; the thread's checkpoints at 1,584 and 2,112 are the chunk ends of a
    // 2,048-token budget: floor(2048/528)·528 = 1,584, then the forced stop at floor(2200/528)·528 = 2,112.
    // Eight requests with one shared prefix and distinct suffixes, one after another.
    //   1600/600: the state at 1,584 lies inside the shared prefix → requests 2–8 hit 1,584 (any release).
    //   1500/700: states at 1,584 and 2,112 lie in unique tokens → 0 hits before #37898 (the thread's 0/64 on
    //     d841386d2). With #37898 request 2 has FA hit floor(1500/528) = 2 blocks, hybrid hit 0 → its first chunk
    //     is cut to 1,056 (state there); requests 3–8 hit 1,056 (the thread: "hits at block idx 1 = 1056"; its
    //     40/64 count comes from 8 groups whose composition the thread does not give, so only the position is pinned).
    for (const auto& [version, marconi] :
         {std::pair{core::VllmVersion{0, 23, 0}, false}, std::pair{core::VllmVersion{0, 24, 0}, true}}) {
        for (const auto& [shared, unique] : {std::pair{1600, 600}, std::pair{1500, 700}}) {
            INFO("vLLM " << version.str() << ", " << shared << "/" << unique);
            Harness h(align_scheduler(2048, 528, version), hybrid_align_config(100, 528));
            std::vector<std::int64_t> hits;
            for (std::uint64_t i = 1; i <= 8; ++i) {
                Request* r = h.add(i, {{content(1), shared}, {content(100 + i), unique}}, 1);
                (void)h.run_to_completion();
                hits.push_back(r->num_cached_prompt_tokens);
            }
            std::vector<std::int64_t> expected(8, 0);
            if (shared == 1600) {
                std::fill(expected.begin() + 1, expected.end(), 1584);
            } else if (marconi) {
                std::fill(expected.begin() + 2, expected.end(), 1056);
            }
            CHECK(hits == expected);
        }
    }
}

TEST_CASE("Published (vLLM #57467): a 3,274-token shared prompt at block 544 hits at most 6 × 544 = 3,264 tokens",
          "[engine][versions][published]") {
    // #57467 (as summarised in the project's notes; the thread was not found in the search index): CUDA block 544.
    // A [S 3274][U 100]: P = 3,374, last = 3374 − 3374 % 544 = 3,264 = 6 blocks → state at 3,264 inside S.
    // B [S 3274][V 100]: FA hits floor(3274/544) = 6 blocks (block 6 mixes S and V), state at 3,264 → hit 3,264.
    Harness h(align_scheduler(8192, 544, core::kNewestModelled), hybrid_align_config(100, 544));
    (void)h.add(1, {{content(1), 3274}, {content(2), 100}}, 1);
    (void)h.run_to_completion();
    Request* b = h.add(2, {{content(1), 3274}, {content(3), 100}}, 1);
    (void)h.run_to_completion();
    CHECK(b->num_cached_prompt_tokens == 3264);
}

TEST_CASE("Published (vLLM #53749, main 2026-09): N requests sharing S tokens cache (N - 1) * floor(S / B) * B; a "
          "908-token prefix at block 1,056 never hits, a 1,308-token one hits from the second request",
          "[engine][versions][published]") {
    // A comment on #53749 measures, on Qwen3.6-35B-A3B (GDN + attention) at its resolved block 1,056 in align mode,
    // default --prefix-match-unit (= the block), no MTP: eight requests sharing an S-token prefix, one after
    // another, hit (N − 1) · floor(S / 1056) · 1056 tokens in total; S = 908 gives 0 "permanently" and S = 1,308 the
    // first hit on the second request. Rules of 0.30 (sparse retention 0: only each request's replay boundary
    // floor((P − 1)/B)·B and shared-prefix junctions keep a state). With a short unique suffix (40 tokens):
    //   S = 1,308: P = 1,348 → the first request keeps the state at floor(1347/1056)·1056 = 1,056, inside S; every
    //     later request hits 1,056 → 7 × 1,056 = 7,392.
    //   S = 908: P = 948 < B → no full block, no state, nothing to hit: 0 (and it stays 0, whatever N).
    //   S = 2,200: P = 2,240 → state at 2 × 1,056 = 2,112 inside S → 7 × 2,112 = 14,784.
    for (const auto& [shared, expected_total] :
         {std::pair{1308, 7 * 1056}, std::pair{908, 0}, std::pair{2200, 7 * 2112}}) {
        INFO("shared prefix " << shared);
        Harness h(align_scheduler(8192, 1056, core::kNewestModelled), one_to_four_config(200, 1056, 0));
        std::int64_t total = 0;
        std::int64_t second = -1;
        for (std::uint64_t i = 1; i <= 8; ++i) {
            Request* r = h.add(i, {{content(1), shared}, {content(100 + i), 40}}, 1);
            (void)h.run_to_completion();
            total += r->num_cached_prompt_tokens;
            if (i == 2) {
                second = r->num_cached_prompt_tokens;
            }
        }
        CHECK(total == expected_total);
        CHECK(second == expected_total / 7);
    }
}

TEST_CASE("Published (vLLM #54607, 0.27.1): a 240-token system prompt with a 784-token block never hits",
          "[engine][versions][published]") {
    // The shared part (240) is shorter than one block, so the first block of every request mixes the system prompt
    // with its own user turn: no two requests share a block hash → 0 % (with short or long user turns alike).
    const core::VllmVersion v{0, 27, 1};
    for (const int user : {300, 1500}) {
        INFO("user turn " << user);
        Harness h(align_scheduler(8192, 784, v), hybrid_align_config(100, 784));
        for (std::uint64_t i = 1; i <= 4; ++i) {
            (void)h.add(i, {{content(1), 240}, {content(10 + i), user}}, 1);
            (void)h.run_to_completion();
        }
        CHECK(h.kv().stats().hits == 0);
        CHECK(h.kv().stats().queries == 4 * (240 + user));
    }
}

}  // namespace
}  // namespace servesim::engine
