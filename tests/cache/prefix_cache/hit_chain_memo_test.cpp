// Tests of sim/cache/prefix_cache/hit_chain_memo.* and its use by FullAttentionManager::find_longest_cache_hit: a
// remembered block counts only while the pool still has it cached under that hash with no duplicate key, so a lookup
// returns exactly what probing the prefix index returns (vLLM FullAttentionManager.find_longest_cache_hit).
#include "sim/cache/prefix_cache/hit_chain_memo.h"

#include <vector>

#include "sim/cache/managers/full_attention_manager.h"
#include "sim/cache/prefix_cache/block_pool.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::block_numbers;
using testing::hash_chain;

TEST_CASE("A remembered block evicted since is not counted: the lookup probes and finds its replacement", "[cache]") {
    // Chain h10 h11 h12 cached in blocks [1,2,3]; the first lookup hits all three and remembers them. Freed tail
    // first, the queue is [4,5,3,2,1]; allocating three blocks pops 4, 5 and 3, evicting h12. h12 is then cached
    // again in block 5 (positions 0–1 of the list are the still-cached 1 and 2). The memo's third block (3) no longer
    // holds h12, so the second lookup takes 1 and 2 from the memo, probes h12 and finds block 5: [1,2,5].
    BlockPool pool(6, true);
    FullAttentionManager manager(pool, 0, 16);
    std::vector<core::BlockId> got;
    pool.get_new_blocks(3, got);
    const auto hashes = hash_chain({10, 11, 12});
    pool.cache_full_blocks(got, hashes, 0, 3, 0);
    const int groups[] = {0};
    std::vector<std::vector<core::BlockId>> hit(1);
    REQUIRE(manager.find_longest_cache_hit(hashes, 48, groups, hit) == 3);
    CHECK(block_numbers(hit[0]) == std::vector<std::uint32_t>{1, 2, 3});
    const std::vector<core::BlockId> reversed{core::BlockId{3}, core::BlockId{2}, core::BlockId{1}};
    pool.free_blocks(reversed);
    std::vector<core::BlockId> other;
    pool.get_new_blocks(3, other);
    REQUIRE(block_numbers(other) == std::vector<std::uint32_t>{4, 5, 3});
    const std::vector<core::BlockId> recached{core::BlockId{1}, core::BlockId{2}, core::BlockId{5}};
    pool.cache_full_blocks(recached, hashes, 2, 3, 0);
    REQUIRE(manager.find_longest_cache_hit(hashes, 48, groups, hit) == 3);
    CHECK(block_numbers(hit[0]) == std::vector<std::uint32_t>{1, 2, 5});
    CHECK(*pool.get_cached_block(hashes[2], 0) == core::BlockId{5});
}

TEST_CASE("With a duplicate key in the prefix index the memo is bypassed: the earliest cached block is returned",
          "[cache]") {
    // Requests 1 and 2 each compute h10 h11: request 1 in blocks [1,2], then request 2 in [3,4] (no dedupe, vLLM
    // BlockHashToBlockMap). Freeing request 2 remembers [3,4]; but the index returns the earliest inserted, [1,2],
    // and so must the lookup.
    BlockPool pool(8, true);
    FullAttentionManager manager(pool, 0, 16);
    const auto hashes = hash_chain({10, 11});
    manager.allocate_new_blocks(core::RequestId{1}, 32, 32);
    manager.cache_blocks(core::RequestId{1}, hashes, 32);
    manager.allocate_new_blocks(core::RequestId{2}, 32, 32);
    manager.cache_blocks(core::RequestId{2}, hashes, 32);
    REQUIRE(block_numbers(std::vector<core::BlockId>(manager.blocks(core::RequestId{2}).begin(),
                                           manager.blocks(core::RequestId{2}).end())) ==
            std::vector<std::uint32_t>{3, 4});
    manager.free(core::RequestId{2});
    const int groups[] = {0};
    std::vector<std::vector<core::BlockId>> hit(1);
    REQUIRE(manager.find_longest_cache_hit(hashes, 48, groups, hit) == 2);
    CHECK(block_numbers(hit[0]) == std::vector<std::uint32_t>{1, 2});
}

TEST_CASE("A freed request's cached blocks are remembered past its own hit, for its next turn", "[cache]") {
    // Request 1 computes h10 h11 h12 in blocks [1,2,3] and caches all three; the lookup of its next turn (h10 h11 h12
    // h13, 64 tokens, at most 4 blocks) finds them without having looked them up before; h13 is not cached: hit 3.
    BlockPool pool(8, true);
    FullAttentionManager manager(pool, 0, 16);
    const auto hashes = hash_chain({10, 11, 12, 13});
    manager.allocate_new_blocks(core::RequestId{1}, 48, 48);
    manager.cache_blocks(core::RequestId{1}, std::span<const core::BlockHash>(hashes).first(3), 48);
    manager.free(core::RequestId{1});
    const int groups[] = {0};
    std::vector<std::vector<core::BlockId>> hit(1);
    REQUIRE(manager.find_longest_cache_hit(hashes, 64, groups, hit) == 3);
    CHECK(block_numbers(hit[0]) == std::vector<std::uint32_t>{1, 2, 3});
}

TEST_CASE("The memo holds at most kMaxBlocks block ids", "[cache]") {
    // 2^20 ids under one key fill it; one more id under another key is refused; replacing the first key's segment by
    // a shorter one frees room again.
    HitChainMemo memo;
    const std::vector<core::BlockId> full(HitChainMemo::kMaxBlocks, core::BlockId{7});
    const std::vector<core::BlockId> one{core::BlockId{9}};
    memo.record(core::BlockHash{1}, full);
    CHECK(memo.num_blocks() == HitChainMemo::kMaxBlocks);
    memo.record(core::BlockHash{2}, one);
    CHECK(memo.find(core::BlockHash{2}).empty());
    CHECK(memo.num_blocks() == HitChainMemo::kMaxBlocks);
    memo.record(core::BlockHash{1}, one);
    CHECK(memo.num_blocks() == 1);
    memo.record(core::BlockHash{2}, one);
    CHECK(memo.find(core::BlockHash{2}).size() == 1);
    CHECK(memo.num_blocks() == 2);
}

TEST_CASE("leading_blocks_in_common: every length and first difference, in groups of 16, pairs and one", "[cache]") {
    // a = 1..40. For each length n ≤ 40 and each position d < n where b differs (b[d] = 1000), the answer is d; with
    // no difference it is n. Worked cases: n = 40, d = 33: two groups of 16 match (32 ids), then the pair (32, 33)
    // differs in its second id, so 32 + 1 = 33. n = 17, d = 16: one group (16), then the single last id differs: 16.
    // Shorter b: min(|a|, |b|) bounds the answer (a = 1..40, b = 1..5: 5).
    std::vector<core::BlockId> a;
    for (std::uint32_t v = 1; v <= 40; ++v) {
        a.push_back(core::BlockId{v});
    }
    for (std::size_t n = 0; n <= a.size(); ++n) {
        const std::span<const core::BlockId> an(a.data(), n);
        REQUIRE(leading_blocks_in_common(an, an) == n);
        for (std::size_t d = 0; d < n; ++d) {
            std::vector<core::BlockId> b(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n));
            b[d] = core::BlockId{1000};
            REQUIRE(leading_blocks_in_common(an, b) == d);
            REQUIRE(leading_blocks_in_common(b, an) == d);
        }
    }
    std::vector<core::BlockId> b40(a);
    b40[33] = core::BlockId{0};
    CHECK(leading_blocks_in_common(a, b40) == 33);
    CHECK(leading_blocks_in_common(a, std::span<const core::BlockId>(a.data(), 5)) == 5);
}

}  // namespace
}  // namespace servesim::cache
