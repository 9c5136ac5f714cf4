// CpuOffloadManager: vLLM's native CPU offloading, host side (docs/VLLM-RULES.md §6.2;
// sim/cache/offload/cpu_offload.h).
#include "sim/cache/offload/cpu_offload.h"

#include <vector>

#include "tests/catch.h"

using servesim::cache::CpuOffloadConfig;
using servesim::cache::CpuOffloadManager;
using servesim::core::BlockHash;

namespace {

std::vector<BlockHash> chain(int n, std::uint64_t base) {
    std::vector<BlockHash> h;
    for (int i = 0; i < n; ++i) {
        h.push_back(BlockHash{base + static_cast<std::uint64_t>(i)});
    }
    return h;
}

CpuOffloadConfig config(std::int64_t blocks, int mamba_groups = 0) {
    CpuOffloadConfig c;
    c.num_cpu_blocks = blocks;
    c.block_size_tokens = 16;
    c.num_attention_groups = 1;
    c.num_mamba_groups = mamba_groups;
    c.load_s_per_token = 28e-6;
    return c;
}

}  // namespace

TEST_CASE("CpuOffload: a stored block is loadable only after the copy step completes", "[cache][offload]") {
    // OffloadingConnectorWorker.prepare_store_kv copies at the start of the next step; complete_store follows it:
    // stored in step k → copying during step k+1 → resident at the end of step k+1.
    CpuOffloadManager cpu(config(100));
    const auto h = chain(4, 10);
    cpu.store(h, 0, 4, -1, -1);
    REQUIRE(cpu.lookup(h, 0, 64) == 0);  // queued
    cpu.on_step_end();
    REQUIRE(cpu.lookup(h, 0, 64) == 0);  // copying
    cpu.on_step_end();
    REQUIRE(cpu.lookup(h, 0, 64) == 64);  // 4 blocks × 16
    REQUIRE(cpu.num_resident_blocks() == 4);
}

TEST_CASE("CpuOffload: the host hit extends the GPU hit contiguously, capped at num_tokens", "[cache][offload]") {
    CpuOffloadManager cpu(config(100));
    const auto h = chain(6, 100);
    cpu.store(h, 0, 3, -1, -1);  // blocks 0, 1, 2 on the host; 3.. not
    cpu.on_step_end();
    cpu.on_step_end();
    // GPU hit of 1 block (16 tokens): the host adds blocks 1 and 2, then block 3 misses → 32 external tokens.
    REQUIRE(cpu.lookup(h, 16, 96) == 32);
    // GPU hit already covers 3 blocks: nothing more on the host.
    REQUIRE(cpu.lookup(h, 48, 96) == 0);
    // num_tokens 40 caps the host hit at floor(40/16) = 2 blocks: from a 0 GPU hit, 2 blocks = 32 tokens.
    REQUIRE(cpu.lookup(h, 0, 40) == 32);
}

TEST_CASE("CpuOffload: LRU eviction on the host while storing into a full cache", "[cache][offload]") {
    // Capacity 3 blocks. Storing A0 A1 A2 inserts them in block order, then _touch refreshes A's chain reversed
    // (LRUCachePolicy.touch iterates reversed): LRU → MRU = A2, A1, A0. A lookup of A0 alone touches A0 (already
    // most recent). Storing B0 evicts the least recently used, A2 — the chain's tail, never its head.
    CpuOffloadManager cpu(config(3));
    const auto a = chain(3, 1000);
    const auto b = chain(1, 2000);
    cpu.store(a, 0, 3, -1, -1);
    cpu.on_step_end();
    cpu.on_step_end();
    const std::vector<BlockHash> a0{a[0]};
    REQUIRE(cpu.lookup(a0, 0, 32) == 16);  // touches A0
    cpu.store(b, 0, 1, -1, -1);
    cpu.on_step_end();
    cpu.on_step_end();
    REQUIRE(cpu.num_resident_blocks() == 3);
    REQUIRE(cpu.lookup(a, 0, 64) == 32);  // A0 and A1 still there, A2 evicted: 2 blocks × 16
    const std::vector<BlockHash> a2{a[2]};
    REQUIRE(cpu.lookup(a2, 0, 32) == 0);
}

TEST_CASE("CpuOffload: every lookup refreshes the request's whole chain, the GPU-hit prefix included",
          "[cache][offload]") {
    // Capacity 4. Store A0..A2 (LRU → MRU: A2 A1 A0), then B0 (A2 A1 A0 B0). A request for A hits all 3 blocks on
    // the GPU (local hit 48 of 48 tokens): no external hit, yet _touch refreshes A's chain: B0 A2 A1 A0. Storing C0
    // into the full host then evicts B0, and A stays whole. (Touching only the newly hit host range, as servesim
    // did before, evicted A2 here.)
    CpuOffloadManager cpu(config(4));
    const auto a = chain(3, 3000);
    const auto b = chain(1, 4000);
    const auto c = chain(1, 5000);
    cpu.store(a, 0, 3, -1, -1);
    cpu.on_step_end();
    cpu.store(b, 0, 1, -1, -1);
    cpu.on_step_end();
    cpu.on_step_end();
    REQUIRE(cpu.num_resident_blocks() == 4);
    REQUIRE(cpu.lookup(a, 48, 48) == 0);  // all on the GPU: nothing to load, but the chain is touched
    cpu.store(c, 0, 1, -1, -1);
    cpu.on_step_end();
    cpu.on_step_end();
    REQUIRE(cpu.lookup(a, 0, 48) == 48);
    REQUIRE(cpu.lookup(b, 0, 16) == 0);
    REQUIRE(cpu.lookup(c, 0, 16) == 16);
}

TEST_CASE("CpuOffload: Mamba align caps the hybrid host hit at round_down(num_tokens - 1, B)", "[cache][offload]") {
    // PR #44599. B = 16, 4 blocks with a snapshot at every block on the host. A 64-token prompt (on the block
    // grid): cap = floor(63 / 16) · 16 = 48 → 3 blocks, the state after block 2 is resident → 48 tokens, the last
    // block is recomputed. A 70-token prompt: cap = floor(69 / 16) · 16 = 64 → all 4 blocks. Without the cap (the
    // pre-#44599 window) the 64-token prompt loads all 4 blocks.
    auto cfg = config(100, /*mamba_groups=*/1);
    cfg.mamba_align_hit_cap = true;
    CpuOffloadManager cpu(cfg);
    const auto h = chain(4, 600);
    cpu.store(h, 0, 4, 0, 4);
    cpu.on_step_end();
    cpu.on_step_end();
    REQUIRE(cpu.lookup(h, 0, 64) == 48);
    REQUIRE(cpu.lookup(h, 0, 70) == 64);

    CpuOffloadManager old(config(100, 1));
    old.store(h, 0, 4, 0, 4);
    old.on_step_end();
    old.on_step_end();
    REQUIRE(old.lookup(h, 0, 64) == 64);
}

TEST_CASE("CpuOffload: a hybrid host hit must end where a state snapshot is resident", "[cache][offload]") {
    // 4 attention blocks on the host, but the Mamba snapshot only after block 1 (a step ended at 32 tokens): the
    // hit shrinks from 4 blocks to 2 (Mamba groups are looked up as a one-block window at the boundary).
    CpuOffloadManager cpu(config(100, /*mamba_groups=*/3));
    const auto h = chain(4, 500);
    cpu.store(h, 0, 4, /*snapshot_first=*/1, /*snapshot_end=*/2);
    cpu.on_step_end();
    cpu.on_step_end();
    REQUIRE(cpu.lookup(h, 0, 80) == 32);
    // The snapshot costs one host block per Mamba group: 4 attention + 3 = 7 units.
    REQUIRE(cpu.num_resident_blocks() == 7);
}

TEST_CASE("CpuOffload: external counters count the tokens past the local hit", "[cache][offload]") {
    // vllm:external_prefix_cache_queries = num_tokens − local hit; _hits = external tokens.
    CpuOffloadManager cpu(config(10));
    cpu.record(100, 32, 48);
    cpu.record(50, 0, 0);
    REQUIRE(cpu.stats().queries == 68 + 50);
    REQUIRE(cpu.stats().hits == 48);
    REQUIRE(cpu.load_time_s(48) == 48 * 28e-6);
}
