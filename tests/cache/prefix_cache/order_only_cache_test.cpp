// Tests of sim/cache/prefix_cache/order_only_cache.*: hand-made traces with hits worked out by hand at block sizes 16,
// 512 and 528 (vLLM's rules: only full blocks are hashed, lookup stops at the first miss and covers at most
// num_tokens − 1 tokens, hits in tokens), the LRU eviction order with a tiny pool (a request's last block is evicted
// first), the pool size bound, requests larger than the pool, the copy lists behind duplicate hashes, and — on a random
// trace — the same hits and LRU order as a plain re-implementation on FreeBlockQueue (the engine's free queue).
#include "sim/cache/prefix_cache/order_only_cache.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "sim/cache/prefix_cache/free_block_queue.h"
#include "tests/catch.h"

using namespace servesim;
using namespace servesim::cache;

namespace {

// A Mooncake-like prompt: one 512-token run per hash id, the last run `last_tokens` long (1..512).
core::TokenContent mooncake_prompt(const std::vector<std::uint64_t>& hash_ids, std::int64_t last_tokens) {
    core::TokenContent runs;
    for (std::size_t i = 0; i < hash_ids.size(); ++i) {
        runs.push_back({core::ContentId{hash_ids[i]}, i + 1 == hash_ids.size() ? last_tokens : 512});
    }
    return runs;
}

// The four requests of the hand-worked trace (P = prompt tokens):
//   r1  P 1200  ids [1, 2, 3]     runs 512 512 176
//   r2  P 1024  ids [1, 2]        runs 512 512         (r1's first two blocks)
//   r3  P 1600  ids [1, 2, 4, 5]  runs 512 512 512 64  (shares runs 1, 2 with r1, then differs)
//   r4  P 1200  ids [1, 2, 3]     r1 again
std::vector<core::TokenContent> hand_trace() {
    return {mooncake_prompt({1, 2, 3}, 176), mooncake_prompt({1, 2}, 512), mooncake_prompt({1, 2, 4, 5}, 64),
            mooncake_prompt({1, 2, 3}, 176)};
}

OrderOnlyTrace build_trace(const std::vector<core::TokenContent>& prompts, int block_size) {
    OrderOnlyTraceBuilder b(block_size);
    for (const auto& p : prompts) {
        b.add_request(p);
    }
    return std::move(b).build();
}

// Hit tokens per request, unlimited pool.
std::vector<std::int64_t> hits_per_request(const OrderOnlyTrace& trace, std::optional<std::int64_t> capacity) {
    const std::int64_t num_blocks = capacity ? *capacity / trace.block_size_tokens() : trace.num_blocks_unlimited();
    OrderOnlyCache cache(num_blocks, trace.num_distinct_blocks());
    std::vector<std::int64_t> hits;
    for (std::int64_t i = 0; i < trace.num_requests(); ++i) {
        const auto lookup =
            cache.process_request(trace.block_ids(i), trace.num_prompt_tokens(i), trace.block_size_tokens());
        cache.check_invariants();
        hits.push_back(lookup.num_hit_blocks * trace.block_size_tokens());
    }
    return hits;
}

// A prompt of one run of `tokens` tokens with content `c` (for the LRU tests at block size 16).
core::TokenContent one_run(std::uint64_t c, std::int64_t tokens) {
    return {{core::ContentId{c}, tokens}};
}

}  // namespace

TEST_CASE("OrderOnlyCache hits at block size 512: one block per trace hash id, capped at num_tokens − 1",
          "[cache][order_only]") {
    // B = 512: full blocks = floor(P/512), lookup bound = floor((P−1)/512).
    //   r1 1200: full 2, bound 2; cache empty → 0. Caches h(1), h(1,2); the 176-token partial block is not hashed.
    //   r2 1024: full 2, bound floor(1023/512) = 1 → h(1) hits = 512 (not 1024: the last token is always computed).
    //            Block 2 is allocated afresh although h(1,2) is cached (vLLM does not dedupe): a second copy.
    //   r3 1600: full 3, bound 3; h(1), h(1,2) hit, h(1,2,4) misses → 1024.
    //   r4 1200: full 2, bound 2; both hit → 1024 (the partial 176 tokens are recomputed).
    // Σ hits 2560 of Σ P = 1200 + 1024 + 1600 + 1200 = 5024.
    const auto trace = build_trace(hand_trace(), 512);
    CHECK(hits_per_request(trace, std::nullopt) == std::vector<std::int64_t>{0, 512, 1024, 1024});
    CHECK(trace.num_full_blocks() == 2 + 2 + 3 + 2);
    CHECK(trace.num_distinct_blocks() == 3);   // h(1), h(1,2), h(1,2,4)
    CHECK(trace.num_blocks_unlimited() == 4);  // allocated: r1 2, r2 1 (the copy), r3 1, r4 0
    const OrderOnlyResult r = run_order_only(trace, std::nullopt);
    CHECK(r.prefix_cache_queries == 5024);
    CHECK(r.prefix_cache_hits == 2560);
    CHECK(r.num_evictions == 0);
    CHECK(r.num_cache_blocks == 4);
}

TEST_CASE("OrderOnlyCache hits at block size 16: a 512-token trace block is 32 hashed blocks", "[cache][order_only]") {
    // B = 16: runs 1, 2 (hash ids 1, 2) are blocks 0..63; r1's run 3 (176 tokens) blocks 64..74.
    //   r1 1200: full 75, bound 74; → 0. Caches blocks 0..74.
    //   r2 1024: full 64, bound floor(1023/16) = 63 → blocks 0..62 hit = 63·16 = 1008.
    //   r3 1600: full 100, bound 99; blocks 0..63 hit, block 64 (run of id 4) misses → 64·16 = 1024.
    //   r4 1200: full 75 (1200 = 75·16 exactly), bound floor(1199/16) = 74 → blocks 0..73 = 1184; block 74 is
    //            cached but beyond the num_tokens − 1 bound.
    const auto trace = build_trace(hand_trace(), 16);
    CHECK(hits_per_request(trace, std::nullopt) == std::vector<std::int64_t>{0, 1008, 1024, 1184});
    const OrderOnlyResult r = run_order_only(trace, std::nullopt);
    CHECK(r.prefix_cache_hits == 0 + 1008 + 1024 + 1184);
    CHECK(r.prefix_cache_queries == 5024);
}

TEST_CASE("OrderOnlyCache hits at block size 528: a block straddles two trace blocks", "[cache][order_only]") {
    // B = 528: block 0 = run1 [0,512) + run2 [0,16); block 1 = run2 [16,512) + run3 [0,64); block 2 = run3 [64,512)
    // + run4 [0,80) …
    //   r1 1200: full floor(1200/528) = 2, bound floor(1199/528) = 2 → 0. Caches block 0 and block 1 (ids 1,2,3).
    //   r2 1024: full 1, bound floor(1023/528) = 1; block 0 (run 1 + 16 tokens of run 2) hits → 528 (more than the
    //            512 of B = 512: the straddling block needs only the first 16 tokens of run 2, which r2 has).
    //   r3 1600: full 3, bound 3; block 0 hits; block 1 = run2 [16,512) + run of id 4 [0,64) ≠ r1's → 528 (B = 512
    //            gave 1024: the straddle carries the difference of the third run back into block 1).
    //   r4 1200: full 2, bound 2; blocks 0, 1 equal r1's → 1056.
    const auto trace = build_trace(hand_trace(), 528);
    CHECK(hits_per_request(trace, std::nullopt) == std::vector<std::int64_t>{0, 528, 528, 1056});
    CHECK(run_order_only(trace, std::nullopt).prefix_cache_hits == 2112);
}

TEST_CASE("OrderOnlyCache evicts LRU first and a request's last block before its first", "[cache][order_only]") {
    // B = 16, pool of 4 blocks (64 tokens). Dense ids in first-seen order: A0 0, A1 1, B0 2, B1 3, C0 4.
    // Queue initially [b0 b1 b2 b3] (plain). Freed blocks go to the tail in reverse request order.
    //   A (33 tokens: 2 full blocks, bound 2): pops b0 → A0, b1 → A1; free A1, A0 → [b2 b3 | A1 A0].
    //   B (33 tokens): pops b2 → B0, b3 → B1; free B1, B0 → [A1 A0 B1 B0].
    //   C (17 tokens: 1 full block): pops A1 (LRU head: A's last block) → C0 → [A0 B1 B0 C0]; 1 eviction.
    //   A again: A0 hits (touched out of the queue), A1 misses → hit 16; allocates A1 by popping B1 (B's last block)
    //     → [B0 C0 A1 A0]: A's blocks at the tail, last block nearer the head.
    const auto trace = build_trace({one_run(10, 33), one_run(11, 33), one_run(12, 17), one_run(10, 33)}, 16);
    OrderOnlyCache cache(4, trace.num_distinct_blocks());
    using O = std::optional<DenseBlockId>;
    auto id = [](std::uint32_t i) { return O(DenseBlockId{i}); };

    CHECK(cache.process_request(trace.block_ids(0), 33, 16).num_new_blocks == 2);
    CHECK(cache.lru_order() == std::vector<O>{std::nullopt, std::nullopt, id(1), id(0)});
    CHECK(cache.process_request(trace.block_ids(1), 33, 16).num_hit_blocks == 0);
    CHECK(cache.lru_order() == std::vector<O>{id(1), id(0), id(3), id(2)});
    CHECK(cache.process_request(trace.block_ids(2), 17, 16).num_new_blocks == 1);
    CHECK(cache.lru_order() == std::vector<O>{id(0), id(3), id(2), id(4)});
    CHECK(cache.num_evictions() == 1);
    CHECK_FALSE(cache.is_cached(DenseBlockId{1}));

    const OrderOnlyLookup again = cache.process_request(trace.block_ids(3), 33, 16);
    CHECK(again.num_hit_blocks == 1);
    CHECK(again.num_new_blocks == 1);
    CHECK(cache.lru_order() == std::vector<O>{id(2), id(4), id(1), id(0)});
    CHECK(cache.num_evictions() == 2);
    cache.check_invariants();
}

TEST_CASE("OrderOnlyCache keeps only the prefix that fits of a request larger than the pool", "[cache][order_only]") {
    // B = 16, pool 2 blocks; a 65-token prompt has 4 full blocks: it keeps blocks 0, 1 (truncated). The same prompt
    // again: bound floor(64/16) = 4, but only 2 blocks can be cached → hit 32 tokens.
    const auto trace = build_trace({one_run(7, 65), one_run(7, 65)}, 16);
    const OrderOnlyResult r = run_order_only(trace, 32);
    CHECK(r.num_cache_blocks == 2);
    CHECK(r.num_truncated_requests == 2);
    CHECK(r.prefix_cache_hits == 32);
    CHECK(r.prefix_cache_queries == 130);
}

TEST_CASE("OrderOnlyCache sizes the pool min(capacity, what the trace can fill)", "[cache][order_only]") {
    // Unlimited: 4 blocks allocated in all (see the B = 512 case); 10⁹ tokens must not allocate 10⁹/512 blocks, and
    // any capacity ≥ 4 blocks gives the unlimited figures. A pool smaller than one block caches nothing.
    const auto trace = build_trace(hand_trace(), 512);
    const OrderOnlyResult huge = run_order_only(trace, 1'000'000'000);
    CHECK(huge.num_cache_blocks == 4);
    CHECK(huge.prefix_cache_hits == 2560);
    CHECK(run_order_only(trace, 4 * 512).prefix_cache_hits == 2560);
    const OrderOnlyResult tiny = run_order_only(trace, 511);
    CHECK(tiny.num_cache_blocks == 0);
    CHECK(tiny.prefix_cache_hits == 0);
    CHECK(tiny.prefix_cache_queries == 5024);
}

TEST_CASE("OrderOnlyCache looks up the oldest copy of a duplicated hash and drops copies as they are evicted",
          "[cache][order_only]") {
    // B = 16, pool 3 blocks. P = 32 (2 full blocks, bound floor(31/16) = 1):
    //   X (32): pops b0 → X0, b1 → X1; free → [b2 X1 X0].
    //   X (32): X0 hits; bound 1, so X1 is allocated afresh: pops b2 → second copy of X1; free → [X1 X1' X0].
    //   Y (17): pops the old X1 → Y0 → [X1' X0 Y0]; X1 is still cached (the copy).
    //   X (48: 3 full blocks, bound 2): X0 and X1' hit → 32 tokens.
    const auto trace = build_trace({one_run(1, 32), one_run(1, 32), one_run(2, 17), one_run(1, 48)}, 16);
    OrderOnlyCache cache(3, trace.num_distinct_blocks());
    (void)cache.process_request(trace.block_ids(0), 32, 16);
    CHECK(cache.process_request(trace.block_ids(1), 32, 16).num_new_blocks == 1);
    cache.check_invariants();
    (void)cache.process_request(trace.block_ids(2), 17, 16);
    cache.check_invariants();
    CHECK(cache.is_cached(DenseBlockId{1}));
    CHECK(cache.process_request(trace.block_ids(3), 48, 16).num_hit_blocks == 2);
    cache.check_invariants();
}

namespace {

// The obvious version of OrderOnlyCache::process_request on the engine's FreeBlockQueue and a map of copies in
// insertion order (vLLM's BlockHashToBlockMap), for comparison.
class ReferenceCache {
  public:
    explicit ReferenceCache(std::int64_t num_blocks)
        : num_blocks_(num_blocks), queue_(num_blocks), id_of_(static_cast<std::size_t>(num_blocks)) {}

    std::int64_t process(std::span<const DenseBlockId> ids, std::int64_t num_tokens, int block_size) {
        const std::int64_t kept = std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()), num_blocks_);
        const std::int64_t bound = std::min(num_tokens > 0 ? (num_tokens - 1) / block_size : 0, kept);
        std::vector<core::BlockId> held;
        std::int64_t hit = 0;
        for (; hit < bound; ++hit) {
            const auto it = copies_.find(core::to_int(ids[static_cast<std::size_t>(hit)]));
            if (it == copies_.end() || it->second.empty()) {
                break;
            }
            queue_.remove(it->second.front());
            held.push_back(it->second.front());
        }
        for (std::int64_t i = hit; i < kept; ++i) {
            const core::BlockId b = queue_.popleft();
            auto& old = id_of_[core::to_int(b)];
            if (old) {
                auto& list = copies_[*old];
                list.erase(std::find(list.begin(), list.end(), b));
            }
            old = core::to_int(ids[static_cast<std::size_t>(i)]);
            copies_[*old].push_back(b);
            held.push_back(b);
        }
        for (auto it = held.rbegin(); it != held.rend(); ++it) {
            queue_.append(*it);
        }
        return hit;
    }

    std::vector<std::optional<DenseBlockId>> lru_order() const {
        std::vector<std::optional<DenseBlockId>> out;
        for (const core::BlockId b : queue_.get_all_free_blocks()) {
            const auto& id = id_of_[core::to_int(b)];
            out.push_back(id ? std::optional<DenseBlockId>(DenseBlockId{*id}) : std::nullopt);
        }
        return out;
    }

  private:
    std::int64_t num_blocks_;
    FreeBlockQueue queue_;
    std::vector<std::optional<std::uint32_t>> id_of_;
    std::map<std::uint32_t, std::vector<core::BlockId>> copies_;
};

}  // namespace

TEST_CASE("OrderOnlyCache gives FreeBlockQueue's hits and LRU order on a random trace", "[cache][order_only]") {
    // 400 prompts; each continues an earlier prompt's first runs (shared prefixes) or starts afresh, then adds 1–3
    // runs of 1–70 tokens from 12 contents; block size 16; pools of 1, 7 and 40 blocks (requests up to ~20 blocks:
    // evictions, truncation, duplicates after misses and at the num_tokens − 1 bound all occur).
    std::mt19937_64 rng(20250101);
    auto draw = [&](std::uint64_t n) { return rng() % n; };
    std::vector<core::TokenContent> prompts;
    for (int i = 0; i < 400; ++i) {
        core::TokenContent p;
        if (!prompts.empty() && draw(3) != 0) {
            const auto& base = prompts[draw(prompts.size())];
            p.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(draw(base.size() + 1)));
        }
        const auto extra = 1 + draw(3);
        for (std::uint64_t k = 0; k < extra; ++k) {
            p.push_back({core::ContentId{draw(12)}, static_cast<std::int64_t>(1 + draw(70))});
        }
        prompts.push_back(p);
    }
    const auto trace = build_trace(prompts, 16);
    for (const std::int64_t num_blocks : {1, 7, 40}) {
        OrderOnlyCache cache(num_blocks, trace.num_distinct_blocks());
        ReferenceCache reference(num_blocks);
        std::int64_t num_hit_blocks = 0;
        for (std::int64_t i = 0; i < trace.num_requests(); ++i) {
            const auto lookup = cache.process_request(trace.block_ids(i), trace.num_prompt_tokens(i), 16);
            INFO("pool " << num_blocks << ", request " << i);
            REQUIRE(lookup.num_hit_blocks == reference.process(trace.block_ids(i), trace.num_prompt_tokens(i), 16));
            REQUIRE(cache.lru_order() == reference.lru_order());
            num_hit_blocks += lookup.num_hit_blocks;
        }
        cache.check_invariants();
        CHECK(cache.num_evictions() > 0);
        CHECK(num_hit_blocks > 0);
    }
}
