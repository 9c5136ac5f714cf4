// Tests of sim/cache/prefix_cache/block_pool.* and the prefix index: ref counts, lazy eviction, touch, no dedupe, the
// invariant (docs/VLLM-RULES.md §10 item 9).
#include "sim/cache/prefix_cache/block_pool.h"

#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "sim/cache/managers/full_attention_manager.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::hash_chain;

std::vector<std::uint32_t> order(const BlockPool& pool) { return testing::block_numbers(pool.get_all_free_blocks()); }

// Holders as a request-less test sees them: the ref counts it took itself.
void check(const BlockPool& pool, const std::vector<std::int32_t>& holders) { pool.check_invariants(holders); }

TEST_CASE("BlockPool never hands out the null block: usable blocks = num_gpu_blocks - 1", "[cache]") {
    BlockPool pool(5, true);
    std::vector<std::int32_t> holders(5, 0);
    check(pool, holders);
    CHECK(pool.num_free_blocks() == 4);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(4, got);
    for (const auto b : got) {
        CHECK(b != kNullBlock);
        holders[core::to_int(b)] = 1;
    }
    check(pool, holders);
    CHECK(pool.num_free_blocks() == 0);
    CHECK(pool.usage() == 1.0);
}

TEST_CASE("BlockPool frees blocks to the tail in the given order", "[cache]") {
    // 7 blocks, 6 usable: take [1,2,3], free them as a request would (reverse): queue [4,5,6,3,2,1].
    BlockPool pool(7, true);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(3, got);
    const std::vector<core::BlockId> reversed{got.rbegin(), got.rend()};
    pool.free_blocks(reversed);
    check(pool, std::vector<std::int32_t>(7, 0));
    CHECK(order(pool) == std::vector<std::uint32_t>{4, 5, 6, 3, 2, 1});
}

TEST_CASE("BlockPool free_blocks_tail_first frees a request's list tail first, as free_blocks on it reversed",
          "[cache]") {
    // 7 blocks, 6 usable: take [1,2,3], free them tail first: queue [4,5,6,3,2,1] (the test above, no copy).
    // With unhashed_to_front (sparse retention): take [4,5,6] too, cache 4 and 6 (h=1, h=3), block 5 plain; free
    // [1..6] tail first: 6 and 4 go to the tail (6 first), the plain 5, 3, 2, 1 to the head, the first of them
    // freed (5) ending up first: [5, 3, 2, 1, 6, 4].
    {
        BlockPool pool(7, true);
        std::vector<core::BlockId> got;
        pool.get_new_blocks(3, got);
        pool.free_blocks_tail_first(got);
        check(pool, std::vector<std::int32_t>(7, 0));
        CHECK(order(pool) == std::vector<std::uint32_t>{4, 5, 6, 3, 2, 1});
    }
    {
        BlockPool pool(7, true);
        std::vector<core::BlockId> got;
        pool.get_new_blocks(6, got);
        pool.cache_full_blocks(std::span<const core::BlockId>(got).subspan(3, 1), hash_chain({1}), 0, 1, 0);
        pool.cache_full_blocks(std::span<const core::BlockId>(got).subspan(5, 1), hash_chain({3}), 0, 1, 0);
        pool.free_blocks_tail_first(got, /*unhashed_to_front=*/true);
        check(pool, std::vector<std::int32_t>(7, 0));
        CHECK(order(pool) == std::vector<std::uint32_t>{5, 3, 2, 1, 6, 4});
        // The same as free_blocks on the reversed list.
        BlockPool other(7, true);
        std::vector<core::BlockId> taken;
        other.get_new_blocks(6, taken);
        other.cache_full_blocks(std::span<const core::BlockId>(taken).subspan(3, 1), hash_chain({1}), 0, 1, 0);
        other.cache_full_blocks(std::span<const core::BlockId>(taken).subspan(5, 1), hash_chain({3}), 0, 1, 0);
        const std::vector<core::BlockId> reversed{taken.rbegin(), taken.rend()};
        other.free_blocks(reversed, /*unhashed_to_front=*/true);
        CHECK(order(other) == order(pool));
    }
}

TEST_CASE("BlockPool evicts a cached block's hash only when the block is popped", "[cache]") {
    // Block 1 cached under h=100 and freed sits at the tail, still hittable; popping it evicts the hash.
    BlockPool pool(3, true);  // usable blocks 1, 2
    std::vector<core::BlockId> got;
    pool.get_new_blocks(1, got);
    pool.cache_full_blocks(got, hash_chain({100}), 0, 1, 0);
    pool.free_blocks(got);
    check(pool, {0, 0, 0});
    CHECK(order(pool) == std::vector<std::uint32_t>{2, 1});
    CHECK(pool.get_cached_block(core::BlockHash{100}, 0) == core::BlockId{1});
    CHECK_FALSE(pool.get_cached_block(core::BlockHash{100}, 1).has_value());  // other group: other key
    std::vector<core::BlockId> next;
    pool.get_new_blocks(1, next);  // block 2, plain
    CHECK(pool.get_cached_block(core::BlockHash{100}, 0).has_value());
    pool.get_new_blocks(1, next);  // block 1: evicted now
    CHECK_FALSE(pool.get_cached_block(core::BlockHash{100}, 0).has_value());
    check(pool, {0, 1, 1});
}

TEST_CASE("BlockPool touch takes a ref-0 hit block out of the free queue", "[cache]") {
    BlockPool pool(5, true);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(2, got);  // [1, 2]
    pool.cache_full_blocks(got, hash_chain({10, 11}), 0, 2, 0);
    pool.free_blocks(std::vector<core::BlockId>{got.rbegin(), got.rend()});
    CHECK(order(pool) == std::vector<std::uint32_t>{3, 4, 2, 1});
    const std::vector<core::BlockId> hit{core::BlockId{1}};
    pool.touch(hit);  // ref 0 -> 1, leaves the queue from its tail
    pool.touch(hit);  // a second request: ref 2, queue unchanged
    check(pool, {0, 2, 0, 0, 0});
    CHECK(order(pool) == std::vector<std::uint32_t>{3, 4, 2});
    pool.free_blocks(hit);
    CHECK(pool.num_free_blocks() == 3);  // still held once
    pool.free_blocks(hit);
    CHECK(order(pool) == std::vector<std::uint32_t>{3, 4, 2, 1});
    check(pool, {0, 0, 0, 0, 0});
}

TEST_CASE("BlockPool keeps several blocks under one hash (no dedupe)", "[cache]") {
    // Two requests computed the same block concurrently: blocks 1 and 2 both cached under h=7. Lookup returns the
    // first inserted; evicting it exposes the second.
    BlockPool pool(4, true);
    std::vector<core::BlockId> a;
    std::vector<core::BlockId> b;
    pool.get_new_blocks(1, a);
    pool.get_new_blocks(1, b);
    pool.cache_full_blocks(a, hash_chain({7}), 0, 1, 0);
    pool.cache_full_blocks(b, hash_chain({7}), 0, 1, 0);
    check(pool, {0, 1, 1, 0});
    CHECK(pool.get_cached_block(core::BlockHash{7}, 0) == core::BlockId{1});
    pool.free_blocks(a);
    pool.free_blocks(b);  // queue [3, 1, 2]
    std::vector<core::BlockId> c;
    pool.get_new_blocks(2, c);  // pops 3, then 1 (evicted)
    CHECK(pool.get_cached_block(core::BlockHash{7}, 0) == core::BlockId{2});
    check(pool, {0, 1, 0, 1});
}

TEST_CASE("BlockPool check_invariants catches a ref count that disagrees with the holders", "[cache]") {
    BlockPool pool(4, true);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(1, got);
    bool threw = false;
    try {
        check(pool, {0, 2, 0, 0});
    } catch (const InvariantError& e) {
        threw = std::string(e.what()).find("ref_cnt 1 but 2 holders") != std::string::npos;
    }
    CHECK(threw);
}

TEST_CASE("Evicting an early chain block makes the later cached blocks unreachable", "[cache]") {
    // A chain h0 h1 h2 in blocks [1,2,3] freed front first (queue [4,1,2,3]); allocating two blocks pops 4 then 1,
    // evicting h0. h1 and h2 are still cached, but the left-to-right lookup stops at the first miss: hit 0.
    BlockPool pool(5, true);
    FullAttentionManager manager(pool, 0, 16);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(3, got);
    const auto hashes = hash_chain({1000, 1001, 1002});
    pool.cache_full_blocks(got, hashes, 0, 3, 0);
    pool.free_blocks(got);
    const int groups[] = {0};
    std::vector<std::vector<core::BlockId>> hit(1);
    CHECK(manager.find_longest_cache_hit(hashes, 48, groups, hit) == 3);
    std::vector<core::BlockId> other;
    pool.get_new_blocks(2, other);
    check(pool, {0, 1, 0, 0, 1});
    CHECK(pool.get_cached_block(hashes[1], 0).has_value());
    CHECK(pool.get_cached_block(hashes[2], 0).has_value());
    CHECK(manager.find_longest_cache_hit(hashes, 48, groups, hit) == 0);
    CHECK(hit[0].empty());
}

TEST_CASE("BlockPool touch and tail-first free of lists without null blocks match the null-skipping loops",
          "[cache]") {
    // Two pools, 9 blocks (8 usable), the same operations; pool b is told its lists hold no null block.
    // Take [1,2,3,4] (queue [5,6,7,8]); free [1,2,3,4] tail first: queue [5,6,7,8,4,3,2,1]. Touch [3,4] (ref 1 each,
    // out of the queue: [5,6,7,8,2,1]), and again [4] (ref 2, queue unchanged). Free tail first [3,4]: 4 drops to 1,
    // 3 to 0 and rejoins: [5,6,7,8,2,1,3]. Free [4]: [5,6,7,8,2,1,3,4].
    BlockPool a(9, true);
    BlockPool b(9, true);
    std::vector<core::BlockId> got_a;
    std::vector<core::BlockId> got_b;
    a.get_new_blocks(4, got_a);
    b.get_new_blocks(4, got_b);
    a.free_blocks_tail_first(got_a);
    b.free_blocks_tail_first(got_b, false);
    CHECK(order(a) == std::vector<std::uint32_t>{5, 6, 7, 8, 4, 3, 2, 1});
    CHECK(order(b) == order(a));
    const std::vector<core::BlockId> hit{core::BlockId{3}, core::BlockId{4}};
    const std::vector<core::BlockId> four{core::BlockId{4}};
    a.touch(hit);
    b.touch(hit);
    a.touch(four);
    b.touch(four);
    CHECK(order(b) == std::vector<std::uint32_t>{5, 6, 7, 8, 2, 1});
    CHECK(b.ref_cnt(core::BlockId{3}) == 1);
    CHECK(b.ref_cnt(core::BlockId{4}) == 2);
    std::vector<std::int32_t> holders(9, 0);
    holders[3] = 1;
    holders[4] = 2;
    check(a, holders);
    check(b, holders);
    a.free_blocks_tail_first(hit);
    b.free_blocks_tail_first(hit, false);
    CHECK(order(b) == std::vector<std::uint32_t>{5, 6, 7, 8, 2, 1, 3});
    CHECK(order(b) == order(a));
    a.free_blocks_tail_first(four);
    b.free_blocks_tail_first(four, false);
    CHECK(order(b) == std::vector<std::uint32_t>{5, 6, 7, 8, 2, 1, 3, 4});
    CHECK(order(b) == order(a));
    check(b, std::vector<std::int32_t>(9, 0));
    // A block freed once too often is still caught.
    CHECK_THROWS_AS(b.free_blocks_tail_first(four, false), InvariantError);
}

}  // namespace
}  // namespace servesim::cache
