// Tests of the hybrid groups (sim/cache/managers/mamba_manager.*, sliding_window_manager.*, kv_cache_coordinator.*):
// Mamba state blocks per mamba_cache_mode, the hybrid hit rule and the same-step rule (docs/VLLM-RULES.md §2.4-2.7,
// §10 item 7), sliding-window hits and freeing (§8). Every operation is followed by check_invariants().
#include <algorithm>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::admit;
using testing::advance;
using testing::content;
using testing::count_real;
using testing::release;
using testing::TestRequest;

constexpr int kB = 528;

KvCacheConfig hybrid_config(std::int64_t num_gpu_blocks, MambaCacheMode mode, int num_mamba_groups = 1,
                            int block_size = kB, bool enable_prefix_caching = true) {
    KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, block_size, 0, 12});
    for (int i = 0; i < num_mamba_groups; ++i) {
        c.groups.push_back(KvCacheGroup{KvGroupKind::kMamba, block_size, 0, 12});
    }
    c.enable_prefix_caching = enable_prefix_caching;
    c.mamba_cache_mode = mode;
    return c;
}

// The first pass of a 2,000-token prompt under the align split (§2.5): last = 2000 - 2000 % 528 = 1,584, so the
// first chunk stops at 1,584 (a snapshot at 3·528), the second computes the remaining 416, then one decode step.
void run_first_pass(KvCacheManager& m, TestRequest& r) {
    m.begin_step();
    REQUIRE(admit(m, r, 1584) == 0);
    m.begin_step();
    REQUIRE(advance(m, r, 416));
    m.begin_step();
    r.append_output(content(900), 1);
    REQUIRE(advance(m, r, 1));
}

TEST_CASE("Mamba align: a 2,000-token prompt whose first pass stopped at 1,584 hits 1,584 when sent again",
          "[cache]") {
    // Full attention caches blocks 0..2 (3·528 = 1,584 <= 2,000); Mamba cached only the state at 1,584 (block 2).
    // Again: L_fa = floor(1999/528)·528 = 1,584; the Mamba scan from block 2 finds it: hit 1,584.
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAlign));
    TestRequest first(0, {{content(1), 1000}, {content(2), 1000}}, kB);
    run_first_pass(m, first);
    release(m, first);
    m.begin_step();
    TestRequest again(1, {{content(1), 1000}, {content(2), 1000}}, kB);
    CHECK(admit(m, again) == 1584);
    CHECK(m.stats().hits == 1584);
}

TEST_CASE("Mamba align holds one running-state block, transiently two", "[cache]") {
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAlign));
    TestRequest r(0, {{content(1), 2000}}, kB);
    m.begin_step();
    REQUIRE(admit(m, r, 1584) == 0);
    // [null, null, state@1584]
    auto blocks = m.get_block_ids(r.id)[1];
    CHECK(blocks.size() == 3);
    CHECK(count_real(blocks) == 1);
    CHECK(blocks[0] == core::BlockId{0});
    m.begin_step();
    REQUIRE(advance(m, r, 416));
    CHECK(count_real(m.get_block_ids(r.id)[1]) == 2);  // the 1,584 state seeds the new block this step
    m.begin_step();
    r.append_output(content(900), 1);
    REQUIRE(advance(m, r, 1));
    CHECK(count_real(m.get_block_ids(r.id)[1]) == 1);  // freed on the next allocation (hashed: stays evictable)
    // Full attention: cdiv(2001, 528) = 4 blocks; Mamba: 1.
    CHECK(m.num_blocks_held(r.id) == 5);
}

TEST_CASE("A Mamba snapshot cached in the same step blocks the allocation for one step", "[cache]") {
    // req0's first chunk caches the 1,584 state in this step; req1 (same prompt) looked up in the same step finds
    // the hit but cannot be allocated (num_gpu_blocks + 1 needed). Next step it is admitted with the hit, and the
    // failed lookup was counted too.
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAlign));
    TestRequest req0(0, {{content(1), 2000}}, kB);
    TestRequest req1(1, {{content(1), 2000}}, kB);
    m.begin_step();
    REQUIRE(admit(m, req0, 1584) == 0);
    const auto free_before = m.get_all_free_blocks();
    CHECK(admit(m, req1, 416) == -1);
    CHECK(m.get_all_free_blocks() == free_before);
    CHECK(m.num_blocks_held(req1.id) == 0);
    m.begin_step();
    CHECK(admit(m, req1, 416) == 1584);
    CHECK(m.stats().requests == 3);
    CHECK(m.stats().hits == 2 * 1584);
}

TEST_CASE("A shared system prompt gives no hybrid hit without a snapshot at a boundary inside it", "[cache]") {
    // req0 = system 1,000 + user 500 = 1,500 tokens: the align split stops at 1,500 - 1,500 % 528 = 1,056, then
    // computes 444. Snapshot at 1,056 only (it includes user tokens). req1 shares the 1,000-token system prompt:
    // L_fa = 528 (block 0), but no Mamba state at 528 -> hit 0.
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAlign));
    TestRequest req0(0, {{content(1), 1000}, {content(2), 500}}, kB);
    m.begin_step();
    REQUIRE(admit(m, req0, 1056) == 0);
    m.begin_step();
    REQUIRE(advance(m, req0, 444));
    m.begin_step();
    TestRequest req1(1, {{content(1), 1000}, {content(3), 500}}, kB);
    CHECK(admit(m, req1, 1056) == 0);
    // Had a step ended at 528 (a chunk limited by the budget), the same request would hit 528.
    TestRequest req2(2, {{content(4), 1000}, {content(5), 500}}, kB);
    REQUIRE(admit(m, req2, 528) == 0);
    m.begin_step();
    TestRequest req3(3, {{content(4), 1000}, {content(6), 500}}, kB);
    CHECK(admit(m, req3, 528) == 528);
}

TEST_CASE("A hybrid hit needs the snapshot in every Mamba group", "[cache]") {
    // Two Mamba groups. After the first pass both hold the 1,584 snapshot (freed at the decode step, group 1 then
    // group 2, so group 1's is LRU-older). A filler pops the free queue up to group 1's snapshot: group 2's is
    // still cached, and every attention block too, yet the hit drops to 0.
    KvCacheManager m(hybrid_config(60, MambaCacheMode::kAlign, 2));
    TestRequest first(0, {{content(1), 2000}}, kB);
    m.begin_step();
    REQUIRE(admit(m, first, 1584) == 0);
    const core::BlockId snapshot_g1 = m.get_block_ids(first.id)[1][2];
    const core::BlockId snapshot_g2 = m.get_block_ids(first.id)[2][2];
    m.begin_step();
    REQUIRE(advance(m, first, 416));
    m.begin_step();
    first.append_output(content(900), 1);
    REQUIRE(advance(m, first, 1));
    release(m, first);
    TestRequest probe(1, {{content(1), 2000}}, kB);
    CHECK(m.get_computed_blocks(probe.view()).num_tokens == 1584);
    const auto queue = m.get_all_free_blocks();
    const auto pos_g1 = std::find(queue.begin(), queue.end(), snapshot_g1) - queue.begin();
    const auto pos_g2 = std::find(queue.begin(), queue.end(), snapshot_g2) - queue.begin();
    REQUIRE(pos_g2 == pos_g1 + 1);
    // The filler takes k = pos_g1 + 1 blocks from the head: k - 2 attention blocks + 1 state block per Mamba group.
    const std::int64_t k = pos_g1 + 1;
    REQUIRE(k >= 3);
    TestRequest filler(2, {{content(7), (k - 2) * kB}}, kB);
    m.begin_step();
    REQUIRE(admit(m, filler) == 0);
    CHECK(m.get_computed_blocks(probe.view()).num_tokens == 0);
}

TEST_CASE("Mamba all: every block boundary has a snapshot and all but the last state block are freed", "[cache]") {
    // B = 16, mode all. A 64-token chunk allocates and caches 4 state blocks; the next step (decode) frees the
    // first 3 (skipped = 64 - 1 -> 3 blocks) and adds one: 2 held. A 40-token prompt sharing the first 32 tokens
    // hits 32 (the state at 32 exists although no step ended there).
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAll, 1, 16));
    TestRequest r(0, {{content(1), 64}}, 16);
    m.begin_step();
    REQUIRE(admit(m, r) == 0);
    CHECK(count_real(m.get_block_ids(r.id)[1]) == 4);
    m.begin_step();
    r.append_output(content(900), 1);
    REQUIRE(advance(m, r, 1));
    CHECK(count_real(m.get_block_ids(r.id)[1]) == 2);
    TestRequest other(1, {{content(1), 32}, {content(2), 8}}, 16);
    CHECK(admit(m, other) == 32);
}

TEST_CASE("Mamba none holds one state block for the request's life", "[cache]") {
    // Prefix caching off (vLLM forces mode none): the Mamba group's block size is ignored.
    KvCacheManager m(hybrid_config(40, MambaCacheMode::kAlign, 1, 16, false));
    TestRequest r(0, {{content(1), 100}}, 16);
    m.begin_step();
    REQUIRE(admit(m, r, 50) == 0);
    CHECK(m.get_block_ids(r.id)[1].size() == 1);
    m.begin_step();
    REQUIRE(advance(m, r, 50));
    for (int i = 0; i < 40; ++i) {
        m.begin_step();
        r.append_output(content(900), 1);
        REQUIRE(advance(m, r, 1));
    }
    // Full attention cdiv(140, 16) = 9 blocks, Mamba 1.
    CHECK(m.get_block_ids(r.id)[1].size() == 1);
    CHECK(m.num_blocks_held(r.id) == 9 + 1);
    CHECK(m.stats().queries == 0);
}

TEST_CASE("Sliding window frees out-of-window blocks and hits with a window of consecutive blocks", "[cache]") {
    // One sliding-window group, window 32, B = 16. 128 tokens in two chunks of 64: at the second allocation,
    // skipped = 64 - 32 + 1 = 33 tokens -> blocks 0, 1 freed (null). A second identical prompt: cap 127 -> 7
    // blocks; scanning right to left, blocks 6 and 5 (cdiv(31,16) = 2 consecutive) are cached: hit 7·16 = 112.
    KvCacheConfig c;
    c.num_gpu_blocks = 30;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kSlidingWindow, 16, 32, 1});
    KvCacheManager m(c);
    TestRequest r(0, {{content(1), 128}}, 16);
    REQUIRE(admit(m, r, 64) == 0);
    REQUIRE(advance(m, r, 64));
    const auto blocks = m.get_block_ids(r.id)[0];
    CHECK(blocks.size() == 8);
    CHECK(blocks[0] == core::BlockId{0});
    CHECK(blocks[1] == core::BlockId{0});
    CHECK(m.num_blocks_held(r.id) == 6);
    TestRequest again(1, {{content(1), 128}}, 16);
    CHECK(admit(m, again) == 112);
    // The hit keeps only the in-window blocks: skipped = 112 - 31 = 81 tokens -> 5 null blocks, 2 shared + 1 new.
    CHECK(m.num_blocks_held(again.id) == 3);
}

}  // namespace
}  // namespace servesim::cache
