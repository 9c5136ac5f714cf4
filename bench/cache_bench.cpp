// Google Benchmark for sim/cache's hot path: block hashing, pool allocate/free, prefix lookup, a full
// lookup-allocate-free cycle. Not a test; numbers guide the simulator's per-request cost (O(blocks), never O(pool)).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/prefix_cache/block_hash.h"
#include "sim/cache/prefix_cache/block_pool.h"

namespace {

using servesim::cache::BlockHasher;
using servesim::cache::BlockPool;
using servesim::cache::CacheHit;
using servesim::cache::CacheRequest;
using servesim::cache::KvCacheConfig;
using servesim::cache::KvCacheGroup;
using servesim::cache::KvCacheManager;
using servesim::cache::KvGroupKind;
namespace core = servesim::core;

core::TokenContent prompt(std::uint64_t system, std::uint64_t user, std::int64_t num_tokens) {
    return {{core::ContentId{system}, num_tokens / 2}, {core::ContentId{user}, num_tokens - num_tokens / 2}};
}

// Hashing a whole prompt from scratch, per token.
void BM_HashPrompt(benchmark::State& state) {
    const int block_size = static_cast<int>(state.range(0));
    const auto runs = prompt(1, 2, 8192);
    for (auto _ : state) {
        BlockHasher hasher(block_size);
        std::vector<core::BlockHash> hashes;
        hasher.extend(hashes, runs, 8192);
        benchmark::DoNotOptimize(hashes.data());
    }
    state.SetItemsProcessed(state.iterations() * 8192);
}
BENCHMARK(BM_HashPrompt)->Arg(16)->Arg(528);

// Decode: one generated token at a time, hashing the blocks it completes.
void BM_HashDecodeToken(benchmark::State& state) {
    core::TokenContent runs = prompt(1, 2, 1000);
    runs.push_back({core::ContentId{3}, 0});
    BlockHasher hasher(16);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, runs, 1000);
    for (auto _ : state) {
        ++runs.back().length_tokens;
        hasher.extend(hashes, runs, core::total_tokens(runs));
    }
    benchmark::DoNotOptimize(hashes.data());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HashDecodeToken);

// Allocating and freeing n blocks of a 100,000-block pool (with the lazy eviction of cached blocks).
void BM_PoolAllocateFree(benchmark::State& state) {
    const auto n = state.range(0);
    BlockPool pool(100'000, true);
    std::vector<core::BlockId> blocks;
    std::vector<core::BlockHash> hashes(static_cast<std::size_t>(n));
    std::uint64_t next_hash = 1;
    for (auto _ : state) {
        // Fresh hashes each time (distinct prompts): no duplicate entries pile up under one key.
        for (auto& h : hashes) {
            h = core::BlockHash{servesim::core::mix64(next_hash++)};
        }
        blocks.clear();
        pool.get_new_blocks(n, blocks);
        pool.cache_full_blocks(blocks, hashes, 0, n, 0);
        pool.free_blocks(blocks);
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_PoolAllocateFree)->Arg(16)->Arg(128);

KvCacheConfig config() {
    KvCacheConfig c;
    c.num_gpu_blocks = 100'000;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, 16, 0, 32});
    return c;
}

// Looking up a cached 2,000-token prompt (124 blocks hit), per lookup.
void BM_LookupCachedPrompt(benchmark::State& state) {
    KvCacheManager m(config());
    BlockHasher hasher(16);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, prompt(1, 2, 2000), 2000);
    const CacheRequest warm{core::RequestId{0}, &hashes, 2000, 0, false};
    if (!m.allocate_slots(warm, 2000, CacheHit{})) {
        state.SkipWithError("warm-up allocation failed");
        return;
    }
    const CacheRequest req{core::RequestId{1}, &hashes, 2000, 0, false};
    for (auto _ : state) {
        CacheHit hit = m.get_computed_blocks(req);
        benchmark::DoNotOptimize(hit.num_tokens);
    }
}
BENCHMARK(BM_LookupCachedPrompt);

// The scheduler's cycle for one 2,000-token request sharing a 1,000-token prefix: lookup, allocate, free.
void BM_AdmitAndFree(benchmark::State& state) {
    KvCacheManager m(config());
    std::uint64_t next = 10;
    for (auto _ : state) {
        BlockHasher hasher(16);
        std::vector<core::BlockHash> hashes;
        hasher.extend(hashes, prompt(1, next, 2000), 2000);
        const CacheRequest req{core::RequestId{next}, &hashes, 2000, 0, false};
        const CacheHit hit = m.get_computed_blocks(req);
        if (!m.allocate_slots(req, 2000 - hit.num_tokens, hit)) {
            state.SkipWithError("allocation failed");
            return;
        }
        m.free(req.id);
        ++next;
    }
}
BENCHMARK(BM_AdmitAndFree);

}  // namespace
