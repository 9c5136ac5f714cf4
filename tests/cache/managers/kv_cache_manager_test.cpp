// Tests of sim/cache/managers/kv_cache_manager.* with full attention: lookup, capacity, free order, counters
// (docs/VLLM-RULES.md §3 and §10 items 4-6, 9, 10, 14). Every operation is followed by check_invariants().
#include "sim/cache/managers/kv_cache_manager.h"

#include <vector>

#include "common/error.h"

#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::admit;
using testing::advance;
using testing::content;
using testing::ids;
using testing::release;
using testing::TestRequest;

constexpr int kB = 16;

TEST_CASE("KvCacheManager frees two requests into the exact order of vLLM test_evict", "[cache]") {
    // 11 blocks, block 0 null, 10 usable. req0: 5·16+7 = 87 tokens -> 6 blocks [1..6]; req1: 48 other tokens ->
    // [7,8,9]; block 10 stays free. Freeing req0 then req1, each tail first, appends 6,5,4,3,2,1 then 9,8,7:
    // queue [10, 6, 5, 4, 3, 2, 1, 9, 8, 7].
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest req0(0, {{content(1), 87}}, kB);
    TestRequest req1(1, {{content(2), 48}}, kB);
    REQUIRE(admit(m, req0) == 0);
    CHECK(m.get_block_ids(req0.id)[0] == ids({1, 2, 3, 4, 5, 6}));
    REQUIRE(admit(m, req1) == 0);
    CHECK(m.get_block_ids(req1.id)[0] == ids({7, 8, 9}));
    CHECK(m.num_free_blocks() == 1);
    release(m, req0);
    release(m, req1);
    CHECK(m.num_free_blocks() == 10);
    CHECK(m.get_all_free_blocks() == ids({10, 6, 5, 4, 3, 2, 1, 9, 8, 7}));
    // req2 shares req0's first 35 tokens: hits blocks [1, 2] (32 tokens), computes 3 tokens in the head block 10.
    TestRequest req2(2, {{content(1), 35}}, kB);
    REQUIRE(admit(m, req2) == 32);
    CHECK(m.get_block_ids(req2.id)[0] == ids({1, 2, 10}));
    CHECK(m.num_free_blocks() == 7);
}

TEST_CASE("A 2,000-token prompt looked up a second time hits 1,984 tokens at B = 16", "[cache]") {
    // The cap is num_tokens - 1 = 1,999: floor(1999/16) = 124 blocks = 1,984 tokens; 16 are recomputed.
    KvCacheManager m(testing::full_attention_config(300, kB));
    TestRequest first(0, {{content(1), 1200}, {content(2), 800}}, kB);
    REQUIRE(admit(m, first) == 0);
    release(m, first);
    TestRequest again(1, {{content(1), 1200}, {content(2), 800}}, kB);
    CHECK(admit(m, again) == 1984);
    CHECK(m.stats().queries == 4000);
    CHECK(m.stats().hits == 1984);
    CHECK(m.stats().requests == 2);
}

TEST_CASE("A fully cached prompt recomputes between 1 and B tokens", "[cache]") {
    // P = 32: cap 31 -> 1 block, hit 16, recompute 16 = B. P = 33: cap 32 -> 2 blocks, hit 32, recompute 1.
    KvCacheManager m(testing::full_attention_config(50, kB));
    TestRequest a(0, {{content(1), 32}}, kB);
    REQUIRE(admit(m, a) == 0);
    TestRequest a2(1, {{content(1), 32}}, kB);
    CHECK(admit(m, a2) == 16);
    CHECK(a2.num_tokens() - 16 == kB);
    TestRequest b(2, {{content(2), 33}}, kB);
    REQUIRE(admit(m, b) == 0);
    TestRequest b2(3, {{content(2), 33}}, kB);
    CHECK(admit(m, b2) == 32);
    CHECK(b2.num_tokens() - 32 == 1);
}

TEST_CASE("Blocks are hittable as soon as they are scheduled, before they are computed", "[cache]") {
    // req0 (100 tokens) is scheduled a 40-token chunk: floor(40/16) = 2 full blocks cached at once; a request with
    // the same prompt looked up in the same step hits 32 tokens.
    KvCacheManager m(testing::full_attention_config(50, kB));
    TestRequest req0(0, {{content(1), 100}}, kB);
    REQUIRE(admit(m, req0, 40) == 0);
    TestRequest req1(1, {{content(1), 100}}, kB);
    CHECK(admit(m, req1, 20) == 32);
    // The hit blocks are shared: ref 2, still 3 + (32 + 20 -> 4 blocks, 2 new) = 5 blocks used.
    CHECK(m.num_free_blocks() == 49 - 5);
}

TEST_CASE("Output-token blocks are cached and a preempted request hits its own blocks", "[cache]") {
    // Prompt 20 tokens, then decode: the 12th generated token completes block 1 (tokens 16..31), which is cached
    // when scheduled. Preempted (freed) and resumed with 33 tokens: cap 32 -> hit 32, counted as preempted.
    KvCacheManager m(testing::full_attention_config(20, kB));
    TestRequest r(0, {{content(1), 20}}, kB);
    REQUIRE(admit(m, r) == 0);
    for (int i = 0; i < 12; ++i) {
        r.append_output(content(99), 1);  // the token sampled in the previous step
        REQUIRE(advance(m, r, 1));
    }
    CHECK(r.num_computed_tokens == 32);
    release(m, r);  // preemption: blocks freed, hashed ones stay evictable
    r.append_output(content(99), 1);
    r.preempted_before = true;
    CHECK(admit(m, r) == 32);
    CHECK(m.stats().preempted_requests == 1);
    CHECK(m.stats().preempted_queries == 33);
    CHECK(m.stats().preempted_hits == 32);
    CHECK(m.stats().requests == 1);
    CHECK(m.stats().queries == 20);
    CHECK(m.stats().hits == 0);
}

TEST_CASE("Evictable cache hits cost capacity", "[cache]") {
    // 11 blocks (10 usable). req0 (64 tokens) -> blocks [1..4], freed: queue [5..10, 4, 3, 2, 1]. A filler of 96
    // tokens takes 6 blocks [5..10]: 4 free blocks left, all req0's cached ones. req1 (80 tokens) hits 64 (4 blocks,
    // ref 0) and needs 1 new block: 1 + 4 evictable = 5 > 4 free -> fails, changing nothing.
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest req0(0, {{content(1), 64}}, kB);
    REQUIRE(admit(m, req0) == 0);
    release(m, req0);
    TestRequest filler(1, {{content(2), 96}}, kB);
    REQUIRE(admit(m, filler) == 0);
    CHECK(m.num_free_blocks() == 4);
    const auto queue_before = m.get_all_free_blocks();
    TestRequest req1(2, {{content(1), 80}}, kB);
    CHECK(admit(m, req1) == -1);
    CHECK(m.num_free_blocks() == 4);
    CHECK(m.get_all_free_blocks() == queue_before);
    CHECK(m.num_blocks_held(req1.id) == 0);
    // Counted anyway, before the check: one record per lookup attempt.
    CHECK(m.stats().hits == 64);
    release(m, filler);
    CHECK(admit(m, req1) == 64);
    // Freeing the filler appended [10, 9, ..., 5] behind [4, 3, 2, 1]; the hits leave the queue, block 10 is the head.
    CHECK(m.get_block_ids(req1.id)[0] == ids({1, 2, 3, 4, 10}));
}

TEST_CASE("A hit block evicted between the lookup and allocate_slots is refused", "[cache]") {
    // 11 blocks (10 usable). req0 (64 tokens) -> blocks [1..4], freed: queue [5..10, 4, 3, 2, 1]. req1 (80 tokens)
    // looks up a 64-token hit (blocks 1..4); before it allocates, a filler of 112 tokens takes 7 blocks, [5..10]
    // then 4, evicting req1's fourth hit block. allocate_slots must notice (the pool counted an eviction since the
    // lookup, so the hit is re-checked block by block) instead of taking a block that holds other tokens now.
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest req0(0, {{content(1), 64}}, kB);
    REQUIRE(admit(m, req0) == 0);
    release(m, req0);
    TestRequest req1(1, {{content(1), 80}}, kB);
    const CacheHit hit = m.get_computed_blocks(req1.view());
    REQUIRE(hit.num_tokens == 64);
    TestRequest filler(2, {{content(2), 112}}, kB);
    REQUIRE(admit(m, filler) == 0);
    CHECK(m.get_block_ids(filler.id)[0] == ids({5, 6, 7, 8, 9, 10, 4}));
    CHECK_THROWS_AS(m.allocate_slots(req1.view(), 16, hit), InvariantError);
}

TEST_CASE("A reused CacheHit reads as a fresh lookup's", "[cache]") {
    // The scheduler keeps one CacheHit for every admission (get_computed_blocks(req, hit)). req0 (64 tokens) ->
    // blocks [1..4], freed: queue [5..10, 4, 3, 2, 1]. A 80-token twin hits 64 tokens, blocks [1, 2, 3, 4]; the same
    // hit then filled for a 40-token twin must hold 32 tokens, blocks [1, 2] (cap 39 -> 2 blocks), and for an
    // unrelated prompt nothing, with the lookup's eviction count, as the value-returning form gives.
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest req0(0, {{content(1), 64}}, kB);
    REQUIRE(admit(m, req0) == 0);
    release(m, req0);
    TestRequest long_twin(1, {{content(1), 80}}, kB);
    TestRequest short_twin(2, {{content(1), 40}}, kB);
    TestRequest other(3, {{content(2), 40}}, kB);
    CacheHit hit;
    m.get_computed_blocks(long_twin.view(), hit);
    CHECK(hit.num_tokens == 64);
    REQUIRE(hit.blocks_per_group.size() == 1);
    CHECK(hit.blocks_per_group[0] == ids({1, 2, 3, 4}));
    m.get_computed_blocks(short_twin.view(), hit);
    const CacheHit fresh = m.get_computed_blocks(short_twin.view());
    CHECK(hit.num_tokens == 32);
    CHECK(hit.blocks_per_group[0] == ids({1, 2}));
    CHECK(hit.blocks_per_group == fresh.blocks_per_group);
    CHECK(hit.pool_evictions_at_lookup == fresh.pool_evictions_at_lookup);
    m.get_computed_blocks(other.view(), hit);
    CHECK(hit.num_tokens == 0);
    CHECK(hit.num_uncached_common_prefix_tokens == 0);
    REQUIRE(hit.blocks_per_group.size() == 1);
    CHECK(hit.blocks_per_group[0].empty());
    // reset_hit: what the scheduler does for a request that needs no lookup.
    m.get_computed_blocks(long_twin.view(), hit);
    reset_hit(hit, 1);
    CHECK(hit.num_tokens == 0);
    CHECK(hit.blocks_per_group[0].empty());
    CHECK(hit.pool_evictions_at_lookup == CacheHit::kUnknownEvictions);
}

TEST_CASE("A failed allocation's lookup is counted again when the request is retried", "[cache]") {
    // Pool of 4 usable blocks; a 48-token prompt cached, then held by a running twin so that a third request
    // (hit 32, needs 1 block) finds no free block. Two failed attempts and one success: 3 records.
    KvCacheManager m(testing::full_attention_config(5, kB));
    TestRequest a(0, {{content(1), 48}}, kB);
    REQUIRE(admit(m, a) == 0);  // blocks [1, 2, 3]
    TestRequest filler(1, {{content(2), 16}}, kB);
    REQUIRE(admit(m, filler) == 0);  // block 4; no free block left
    TestRequest b(2, {{content(1), 48}}, kB);
    CHECK(admit(m, b) == -1);
    CHECK(admit(m, b) == -1);
    release(m, filler);
    CHECK(admit(m, b) == 32);
    // a: 48 / 0; filler: 16 / 0; b three times: 3 x 48 queries, 3 x 32 hits.
    CHECK(m.stats().requests == 5);
    CHECK(m.stats().queries == 48 + 16 + 3 * 48);
    CHECK(m.stats().hits == 3 * 32);
}

TEST_CASE("With prefix caching off nothing is cached, hit or recorded", "[cache]") {
    KvCacheManager m(testing::full_attention_config(20, kB, false));
    TestRequest a(0, {{content(1), 64}}, kB);
    REQUIRE(admit(m, a) == 0);
    release(m, a);
    TestRequest b(1, {{content(1), 64}}, kB);
    CHECK(admit(m, b) == 0);
    const PrefixCacheStats& s = m.stats();
    CHECK(s.requests == 0);
    CHECK(s.queries == 0);
    CHECK(s.hits == 0);
    CHECK(s.preempted_requests == 0);
    // No hashes needed at all.
    const CacheRequest no_hashes{core::RequestId{7}, nullptr, 40, 0, false};
    CHECK(m.get_computed_blocks(no_hashes).num_tokens == 0);
    CHECK(m.allocate_slots(no_hashes, 40, CacheHit{}));
    m.check_invariants();
}

TEST_CASE("full_sequence_must_fit rejects a prompt whose whole sequence does not fit", "[cache]") {
    // 10 usable blocks; a 200-token prompt needs cdiv(200,16) = 13 blocks. Its first 64-token chunk (4 blocks)
    // fits, but not with scheduler_reserve_full_isl.
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest r(0, {{content(1), 200}}, kB);
    CHECK(admit(m, r, 64, true) == -1);
    CHECK(m.num_free_blocks() == 10);
    CHECK(admit(m, r, 64, false) == 0);
    CHECK(m.num_blocks_held(r.id) == 4);
}

TEST_CASE("Lookahead slots are allocated but not cached", "[cache]") {
    // 20 tokens + 16 lookahead slots = 36 -> 3 blocks; only floor(20/16) = 1 block is cached.
    KvCacheManager m(testing::full_attention_config(20, kB));
    TestRequest r(0, {{content(1), 20}}, kB);
    const CacheHit hit = m.get_computed_blocks(r.view());
    REQUIRE(m.allocate_slots(r.view(), 20, hit, 16));
    m.check_invariants();
    CHECK(m.num_blocks_held(r.id) == 3);
    TestRequest twin(1, {{content(1), 40}}, kB);  // cap 39 -> up to 2 blocks, only 1 cached
    CHECK(admit(m, twin) == 16);
}

TEST_CASE("Usage counts evictable cached blocks as free", "[cache]") {
    // 11 blocks: usage = 1 - free / 10. Holding 2 blocks: 0.2; after free (cached, evictable): 0.
    KvCacheManager m(testing::full_attention_config(11, kB));
    TestRequest r(0, {{content(1), 32}}, kB);
    REQUIRE(admit(m, r) == 0);
    CHECK(m.usage() == 1.0 - 8.0 / 10.0);
    release(m, r);
    CHECK(m.usage() == 0.0);
}

TEST_CASE("Decode steps allocate and cache only at block boundaries, whatever the slot hint says", "[cache]") {
    // 20 blocks, 19 usable, B = 16. a: 20 prompt tokens -> blocks [1, 2], floor(20/16) = 1 cached; b: 16 tokens ->
    // [3], 1 cached. a then decodes one token per step with a slot hint first pointing at b's slot (1; a has slot 0):
    // tokens 21..31 need cdiv(·, 16) = 2 blocks and cache 1 block: nothing changes (the running fast path), and the
    // stale hint is corrected to 0. At 32 tokens block 2 is cached (3 cached blocks in all); at 33 a needs a third
    // block: the free-queue head, block 4 (the queue starts in block-id order, [4, 19] left).
    KvCacheManager m(testing::full_attention_config(20, kB));
    TestRequest a(0, {{content(1), 20}}, kB);
    TestRequest b(1, {{content(2), 16}}, kB);
    REQUIRE(admit(m, a) == 0);
    REQUIRE(admit(m, b) == 0);
    CHECK(m.num_cached_blocks_per_group()[0] == 2);
    std::uint32_t hint = 1;
    const auto decode_one = [&] {
        a.append_output(content(9), 1);
        CacheRequest v = a.view();
        v.kv_slot_hint = &hint;
        REQUIRE(m.allocate_slots(v, 1, CacheHit{}));
        m.check_invariants();
        ++a.num_computed_tokens;
    };
    decode_one();  // 21 tokens
    CHECK(hint == 0);
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2}));
    while (a.num_computed_tokens < 31) {
        decode_one();
    }
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2}));
    CHECK(m.num_cached_blocks_per_group()[0] == 2);
    CHECK(m.num_free_blocks() == 16);
    decode_one();  // 32 tokens: block 2 full
    CHECK(m.num_cached_blocks_per_group()[0] == 3);
    CHECK(m.num_free_blocks() == 16);
    decode_one();  // 33 tokens: a third block
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2, 4}));
    CHECK(m.num_free_blocks() == 15);
    CHECK(m.num_cached_blocks_per_group()[0] == 3);
    CHECK(m.get_block_ids(b.id)[0] == ids({3}));
}

TEST_CASE("A running request's summary answers the decode steps that change nothing; free forgets it", "[cache]") {
    // 20 blocks, 19 usable, B = 16. a: 20 prompt tokens admitted with a summary: blocks [1, 2] hold 32 tokens and
    // floor(20/16) = 1 block is cached, so caching up to fewer than (1 + 1)·16 = 32 tokens adds nothing: {32, 32}.
    // Decode tokens 21..31: slots ≤ 32 and tokens to cache < 32, answered by the summary (nothing changes: 17 free).
    // Token 32: 32 tokens to cache is not < 32, the full path caches block 2: {32, 48}. Token 33 needs 33 > 32
    // slots: the queue head, block 3, is allocated: {48, 48}. Freeing through the view resets it to {−1, −1}.
    KvCacheManager m(testing::full_attention_config(20, kB));
    TestRequest a(0, {{content(1), 20}}, kB);
    KvRunningSummary summary;
    const auto view = [&] {
        CacheRequest v = a.view();
        v.kv_summary = &summary;
        return v;
    };
    const CacheHit hit = m.get_computed_blocks(view());
    REQUIRE(m.allocate_slots(view(), 20, hit));
    a.num_computed_tokens = 20;
    CHECK(summary.slot_tokens == 32);
    CHECK(summary.uncached_from_tokens == 32);
    // What the scheduler asks before calling: computed 20 + 1 new of 21 tokens fits and caches nothing new; 31 + 1
    // of 32 would cache block 2; 20 + 13 = 33 slots exceed 32; a waiting request (0 computed) always calls.
    CHECK(summary.running_step_changes_nothing(20, 1, 21));
    CHECK_FALSE(summary.running_step_changes_nothing(31, 1, 32));
    CHECK_FALSE(summary.running_step_changes_nothing(20, 13, 33));
    CHECK_FALSE(summary.running_step_changes_nothing(0, 1, 21));
    const auto decode_one = [&] {
        a.append_output(content(9), 1);
        REQUIRE(m.allocate_slots(view(), 1, CacheHit{}));
        m.check_invariants();
        ++a.num_computed_tokens;
    };
    while (a.num_computed_tokens < 31) {
        decode_one();
    }
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2}));
    CHECK(m.num_cached_blocks_per_group()[0] == 1);
    CHECK(m.num_free_blocks() == 17);
    CHECK(summary.uncached_from_tokens == 32);
    decode_one();  // 32 tokens: block 2 full
    CHECK(m.num_cached_blocks_per_group()[0] == 2);
    CHECK(summary.slot_tokens == 32);
    CHECK(summary.uncached_from_tokens == 48);
    decode_one();  // 33 tokens: a third block
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2, 3}));
    CHECK(m.num_free_blocks() == 16);
    CHECK(summary.slot_tokens == 48);
    m.free(view());
    m.check_invariants();
    CHECK(summary.slot_tokens == -1);
    CHECK(summary.uncached_from_tokens == -1);
    CHECK(m.num_free_blocks() == 19);
}

TEST_CASE("A running request's one-pass allocation fails without a change, then takes the head and evicts its hash",
          "[cache]") {
    // 4 blocks, 3 usable, B = 16 (one full-attention group: SingleTypeKvCacheManager::extend_running). a: 32
    // tokens -> blocks [1, 2], both cached; b: 16 tokens -> [3], cached; no block is free. a's token 33 needs
    // cdiv(33, 16) − 2 = 1 block > 0 free: allocate_slots fails and a still holds [1, 2], b [3]. b finishes (block
    // 3 free, still cached under b's hash): a's token 33 now takes block 3 from the head, evicting b's hash (one
    // eviction, nothing cached left but a's 2 blocks), and caches nothing new (33 tokens: 2 full blocks).
    KvCacheManager m(testing::full_attention_config(4, kB));
    TestRequest a(0, {{content(1), 32}}, kB);
    TestRequest b(1, {{content(2), 16}}, kB);
    REQUIRE(admit(m, a) == 0);
    REQUIRE(admit(m, b) == 0);
    CHECK(m.num_free_blocks() == 0);
    CHECK(m.num_cached_blocks_per_group()[0] == 3);
    a.append_output(content(9), 1);
    CHECK_FALSE(m.allocate_slots(a.view(), 1, CacheHit{}));
    m.check_invariants();
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2}));
    CHECK(m.get_block_ids(b.id)[0] == ids({3}));
    release(m, b);
    CHECK(m.get_all_free_blocks() == ids({3}));
    REQUIRE(m.allocate_slots(a.view(), 1, CacheHit{}));
    m.check_invariants();
    CHECK(m.get_block_ids(a.id)[0] == ids({1, 2, 3}));
    CHECK(m.num_free_blocks() == 0);
    CHECK(m.num_cached_blocks_per_group()[0] == 2);
}

}  // namespace
}  // namespace servesim::cache

namespace servesim::cache {
namespace {

TEST_CASE("allocate_slots admits exactly when new blocks plus evictable hits fit (hits in use cost nothing)",
          "[cache]") {
    // vLLM allocate_slots: num_blocks_to_allocate = new blocks + hit blocks with ref_cnt 0; it fails when that
    // exceeds the free blocks. The count is skipped when new + all hits already fits (KvCacheCoordinator::
    // blocks_to_allocate_fit); these cases sit where that bound does not fit, so the count itself decides.
    // B = 4, 10 blocks (9 usable). Both admission checks (ordinary and full-ISL) give the same answers.
    constexpr int b = 4;
    for (const bool full_isl : {false, true}) {
        INFO("full ISL check " << full_isl);
        {
            // A: 16 tokens -> blocks 1..4, cached, held (ref 1); 5 free. B: A's 16 tokens + 8 more: hit 4 blocks
            // (cap 23 tokens -> 5 blocks, 4 cached), needs cdiv(24, 4) - 4 = 2 new, 0 evictable hits: 2 <= 5,
            // admitted (the bound 2 + 4 = 6 > 5 would not have said so); 3 free after.
            KvCacheManager m(testing::full_attention_config(10, b));
            TestRequest a(0, {{content(1), 16}}, b);
            REQUIRE(admit(m, a, -1, full_isl) == 0);
            CHECK(m.num_free_blocks() == 5);
            TestRequest bb(1, {{content(1), 16}, {content(2), 8}}, b);
            CHECK(admit(m, bb, -1, full_isl) == 16);
            CHECK(m.num_free_blocks() == 3);
        }
        {
            // A admitted and freed: its 4 cached blocks are evictable (9 free). E: 16 other tokens takes the queue
            // head, blocks 5..8: 5 free (A's 4 + block 9). B (24 tokens): 2 new + 4 evictable hits = 6 > 5,
            // refused. B' (A's 16 + 4 more, 20 tokens): cdiv(20, 4) - 4 = 1 new + 4 evictable = 5 <= 5, admitted.
            KvCacheManager m(testing::full_attention_config(10, b));
            TestRequest a(0, {{content(1), 16}}, b);
            REQUIRE(admit(m, a, -1, full_isl) == 0);
            release(m, a);
            CHECK(m.num_free_blocks() == 9);
            TestRequest e(1, {{content(3), 16}}, b);
            REQUIRE(admit(m, e, -1, full_isl) == 0);
            CHECK(m.get_block_ids(e.id)[0] == ids({5, 6, 7, 8}));
            CHECK(m.num_free_blocks() == 5);
            TestRequest bb(2, {{content(1), 16}, {content(2), 8}}, b);
            CHECK(admit(m, bb, -1, full_isl) == -1);
            CHECK(m.num_free_blocks() == 5);
            TestRequest shorter(3, {{content(1), 16}, {content(2), 4}}, b);
            CHECK(admit(m, shorter, -1, full_isl) == 16);
            CHECK(m.num_free_blocks() == 0);
        }
    }
}

}  // namespace
}  // namespace servesim::cache
