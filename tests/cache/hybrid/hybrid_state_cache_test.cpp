// HybridStateCache under each HybridCachePolicy (sim/cache/hybrid/hybrid_state_cache.*, hybrid_cache_policy.*), on
// hand-worked request sequences: which snapshots exist afterwards, which hit a lookup finds, which snapshot goes
// next; plus the KvCacheManager path (hit cut to the state, same-step rule) and the memory split
// (hybrid_state_plan.*). Block size 16 throughout; positions are in tokens.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "sim/cache/hybrid/hybrid_cache_policy.h"
#include "sim/cache/hybrid/hybrid_state_cache.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/memory/hybrid_state_plan.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"
#include "tests/config_error.h"

namespace servesim::cache {
namespace {

using testing::content;
using testing::TestRequest;
using Positions = std::vector<std::int64_t>;

constexpr int kB = 16;

HybridStateConfig config(const std::string& policy, std::int64_t slots, std::int64_t interval = 0) {
    HybridStateConfig c;
    c.policy = policy;
    c.num_state_slots = slots;
    c.state_bytes = 1;
    c.params.checkpoint_interval_tokens = interval;
    c.linear_flops_per_token = 1.0;  // FLOPs saved by a hit at p: p (no attention term)
    return c;
}

// The scheduler's calls for one request, as KvCacheManager makes them. `tokens`: pass the request's content, as
// the engine does (token-granular policies then keep states off block boundaries).
struct Driver {
    HybridStateCache& cache;
    bool tokens = false;

    // Lookup with the attention pool's hit given; returns the state hit.
    std::int64_t lookup(const TestRequest& r, std::int64_t attention_hit) {
        const std::int64_t hit = cache.find_longest_state_hit(r.hashes, attention_hit, tokens ? &r.runs : nullptr,
                                                              r.num_tokens() - 1);
        cache.note_lookup(r.id, attention_hit, hit);
        return hit;
    }

    void admit(const TestRequest& r) {
        REQUIRE(cache.can_admit(std::nullopt));
        cache.admit(r.id, std::nullopt);
    }

    void schedule(const TestRequest& r, std::int64_t from, std::int64_t to, std::int64_t prompt) {
        cache.on_scheduled(r.id, r.hashes, from, to, prompt, tokens ? &r.runs : nullptr);
        cache.check_invariants();
        cache.begin_step();
    }

    // Prompt in the given chunk ends, then `decode` output tokens one step each, then release.
    void run(TestRequest& r, std::int64_t hit, const Positions& chunk_ends, std::int64_t decode) {
        admit(r);
        const std::int64_t prompt = r.num_tokens();
        std::int64_t from = hit;
        for (const std::int64_t end : chunk_ends) {
            schedule(r, from, end, prompt);
            from = end;
        }
        for (std::int64_t i = 0; i < decode; ++i) {
            r.append_output(content(900 + core::to_int(r.id)), 1);
            schedule(r, from, from + 1, prompt);
            ++from;
        }
        cache.release(r.id);
        cache.check_invariants();
        cache.begin_step();  // the next request looks up in a later step (a state from this one is not hittable)
    }
};

TEST_CASE("sglang-no-buffer keeps a state at every non-final chunk end and at the sequence end", "[cache][hybrid]") {
    // A: 64 shared + 36 own = 100 prompt tokens in chunks (0, 48], (48, 100], then 3 decode steps to 103.
    //   (0, 48] ends before the prompt does: cache_unfinished_req → a state at 48. (48, 100] is the last prefill
    //   chunk: nothing. The last block boundary reached is 96 (112 > 103): cache_finished_req keeps it → {48, 96}.
    HybridStateCache cache(config("sglang-no-buffer", 8), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    CHECK(d.lookup(a, 0) == 0);
    d.run(a, 0, {48, 100}, 3);
    CHECK(cache.snapshot_positions() == Positions{48, 96});
    // B shares the 64-token prefix; the attention pool hits 64 tokens, the deepest state on B's chain ≤ 64 is 48:
    // B resumes from 48 and recomputes 16 tokens.
    TestRequest b(2, {{content(1), 64}, {content(3), 56}}, kB);
    CHECK(d.lookup(b, 64) == 48);
    CHECK(cache.stats().attention_hit_tokens == 64);
    CHECK(cache.stats().state_hit_tokens == 48);
}

TEST_CASE("sglang-no-buffer evicts the least recently used state; a hit refreshes it", "[cache][hybrid]") {
    // 3 slots. A leaves {48, 96} (as above). B's lookup hits 48, so 96 is now the least recently used. B is admitted
    // (1 live slot: 3 used) and runs (48, 80], a non-final chunk: a state at 80 needs a slot → 96 goes.
    HybridStateCache cache(config("sglang-no-buffer", 3), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    d.run(a, 0, {48, 100}, 3);
    TestRequest b(2, {{content(1), 64}, {content(3), 56}}, kB);
    REQUIRE(d.lookup(b, 64) == 48);
    d.admit(b);
    d.schedule(b, 48, 80, 120);
    CHECK(cache.snapshot_positions() == Positions{48, 80});
    CHECK(cache.stats().num_evictions == 1);
}

TEST_CASE("sglang-no-buffer at token granularity: states at the exact chunk and sequence ends, hits inside a block",
          "[cache][hybrid]") {
    // SGLang's no_buffer radix tree has page size 1: cache_unfinished_req keeps the state at len(fill_ids) and
    // cache_finished_req at the committed KV length, wherever they fall. A: 64 shared + 36 own = 100 prompt tokens in
    // chunks (0, 50], (50, 100], then 3 decode steps to 103 → states at 50 (not 48) and 103 (not 96).
    HybridStateCache cache(config("sglang-no-buffer", 8), kB);
    Driver d{cache, true};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    CHECK(d.lookup(a, 0) == 0);
    d.run(a, 0, {50, 100}, 3);
    CHECK(cache.snapshot_positions() == Positions{50, 103});
    // B shares A's first 64 tokens; the attention pool (16-token blocks) gives 64. No state at 64 or in (64, 80);
    // in the block (48, 64) A's state at 50 has B's chain hash at 48 and B's tokens 48..49 (content 1): B resumes
    // at 50 and recomputes 14 tokens, where the block-granular cache would resume at 48.
    TestRequest b(2, {{content(1), 64}, {content(3), 56}}, kB);
    CHECK(d.lookup(b, 64) == 50);
    // C is A's next turn: A's 103 tokens (prompt, then its 3 answer tokens, content 901) and 20 new ones. The
    // attention pool holds A's full blocks to 96; A's end state at 103 lies in the block (96, 112) and its 7 tokens
    // match C's: a hit of 103 tokens, the whole previous turn.
    TestRequest c(3, {{content(1), 64}, {content(2), 36}, {content(901), 3}, {content(4), 20}}, kB);
    CHECK(d.lookup(c, 96) == 103);
    // D differs from A in token 100 (another answer): A's tail (96, 103] does not match, 96 has no state, and the
    // deepest state on D's chain is 50.
    TestRequest e(4, {{content(1), 64}, {content(2), 36}, {content(902), 3}, {content(4), 20}}, kB);
    CHECK(d.lookup(e, 96) == 50);
    // Without the tokens (a caller that passes no content) the same cache serves block boundaries only.
    Driver blocks{cache, false};
    CHECK(blocks.lookup(c, 96) == 0);
}

TEST_CASE("sglang-no-buffer at token granularity: the path refresh ages a shallower state first; it goes next",
          "[cache][hybrid]") {
    // 3 slots. A leaves {50, 103} (as above). C's lookup hits 103 and refreshes its path parents first: 50, then
    // 103. C is admitted (1 live slot: 3 used) and runs (103, 110], a non-final chunk of its 123-token prompt: the
    // state at 110 needs a slot and the least recently used is 50 → {103, 110}.
    HybridStateCache cache(config("sglang-no-buffer", 3), kB);
    Driver d{cache, true};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    d.run(a, 0, {50, 100}, 3);
    TestRequest c(3, {{content(1), 64}, {content(2), 36}, {content(901), 3}, {content(4), 20}}, kB);
    REQUIRE(d.lookup(c, 96) == 103);
    d.admit(c);
    d.schedule(c, 103, 110, 123);
    CHECK(cache.snapshot_positions() == Positions{103, 110});
    CHECK(cache.stats().num_evictions == 1);
}

TEST_CASE("KvCacheManager with sglang-no-buffer: a hit inside a block takes its full blocks and computes the rest",
          "[cache][hybrid]") {
    // One attention group at B = 16, 64 blocks, 8 state slots. A (70 + 30) is scheduled in chunks of 50: the first
    // (0, 50] is non-final → a state at 50; attention blocks 0..2 (48 tokens) are cached. B (70 shared + 50) a step
    // later: the attention pool has 3 blocks for B (block 3 is A's tokens 48..63, cached once A's second chunk runs);
    // the state at 50 is in block (48, 64): the hit is 50 tokens, 3 attention blocks, and B computes from 50.
    KvCacheConfig kv;
    kv.num_gpu_blocks = 64;
    kv.groups = {KvCacheGroup{KvGroupKind::kFullAttention, kB, 0, 8}};
    kv.hybrid_state = config("sglang-no-buffer", 8);
    KvCacheManager m(kv);
    TestRequest a(1, {{content(1), 70}, {content(2), 30}}, kB);
    CacheRequest av = a.view();
    av.content = &a.runs;
    av.num_prompt_tokens = 100;
    const CacheHit none = m.get_computed_blocks(av);
    REQUIRE(none.num_tokens == 0);
    REQUIRE(m.allocate_slots(av, 50, none, 0));
    m.begin_step();
    TestRequest b(2, {{content(1), 70}, {content(3), 50}}, kB);
    CacheRequest bv = b.view();
    bv.content = &b.runs;
    bv.num_prompt_tokens = 120;
    const CacheHit hit = m.get_computed_blocks(bv);
    CHECK(hit.num_tokens == 50);
    CHECK(hit.blocks_per_group[0].size() == 3);
    REQUIRE(m.allocate_slots(bv, 70, hit, 0));
    m.check_invariants();
    CHECK(m.num_blocks_held(b.id) == 8);  // ceil(120 / 16): 3 hit blocks + 5 new
}

TEST_CASE("Joint eviction: a state whose attention block the pool evicted goes before an older reachable one",
          "[cache][hybrid]") {
    // SGLang never keeps a state without its KV (evict_full takes a radix leaf's KV and state together). Here the
    // pools are apart, so an orphaned state is evicted first. 4 attention blocks of 16; checkpoint K = 32, 4 slots
    // (2 per running request: its live state and its end-state buffer).
    //   A (64 tokens): states at 32 and 64; its blocks a0..a3 are freed last block first: queue a3, a2, a1, a0.
    //   C (32 other tokens) takes 2 blocks from the head: a3 and a2 go, so A's state at 64 has no attention block
    //   at its position. C's interval state at 32 needs a slot (C's 2 slots + 2 snapshots fill 4): plain LRU
    //   would drop A's 32 (the oldest), orphans-first drops A's 64 → states {32 (A), 32 (C)}.
    KvCacheConfig kv;
    kv.num_gpu_blocks = 5;  // 4 + the null block
    kv.groups = {KvCacheGroup{KvGroupKind::kFullAttention, kB, 0, 8}};
    kv.hybrid_state = config("checkpoint", 4, 32);
    KvCacheManager m(kv);
    const HybridStateCache* states = m.hybrid_state_cache();
    REQUIRE(states != nullptr);
    TestRequest a(1, {{content(1), 64}}, kB);
    REQUIRE(testing::admit(m, a) == 0);
    m.free(a.id);
    m.begin_step();
    REQUIRE(states->snapshot_positions() == Positions{32, 64});
    TestRequest c(3, {{content(3), 32}}, kB);
    REQUIRE(testing::admit(m, c) == 0);
    CHECK(states->snapshot_positions() == Positions{32, 32});
    CHECK(states->stats().num_evictions == 1);
    CHECK(states->stats().num_orphans_evicted == 1);
    // A's first 32 tokens are still reachable: a repeat of A resumes there.
    m.free(c.id);
    m.begin_step();
    TestRequest a2(4, {{content(1), 64}}, kB);
    CHECK(m.get_computed_blocks(a2.view()).num_tokens == 32);
}

TEST_CASE("sglang-extra-buffer holds three slots per request and caches only tracked positions", "[cache][hybrid]") {
    // Track interval 32. A: chunks (0, 48], (48, 100], 3 decode steps. (0, 48] is non-final: the last tracked
    // position in it is 32 → a state at 32. The end state is the last tracked position reached: 96 (64 < 96 ≤ 103).
    HybridStateCache cache(config("sglang-extra-buffer", 5, 32), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    d.run(a, 0, {48, 100}, 3);
    CHECK(cache.snapshot_positions() == Positions{32, 96});
    // 5 slots: a running request takes 3 (its state + the ping-pong pair). With B running, 2 remain; the two
    // snapshots fill them, and a third request could only be admitted by evicting 3 states: there are 2.
    TestRequest b(2, {{content(5), 40}}, kB);
    d.admit(b);
    CHECK(cache.num_live_slots() == 3);
    CHECK_FALSE(cache.can_admit(std::nullopt));
}

TEST_CASE("sglang-extra-buffer checkpoints the branching point: the KV match floored to 64", "[cache][hybrid]") {
    // A (80 shared + 20) runs one chunk and reaches no multiple of 256: nothing is kept. B's attention hit is 80
    // tokens and no state is on that path: the branching point is floor(80 / 64) · 64 = 64. B's non-final chunk
    // (0, 72] caches its last tracked position, which is the branching point 64.
    HybridStateCache cache(config("sglang-extra-buffer", 12, 256), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 80}, {content(2), 20}}, kB);
    d.run(a, 0, {100}, 0);
    CHECK(cache.snapshot_positions().empty());  // nothing reached a multiple of 256
    TestRequest b(2, {{content(1), 80}, {content(3), 40}}, kB);
    CHECK(d.lookup(b, 80) == 0);
    d.admit(b);
    d.schedule(b, 0, 72, 120);
    CHECK(cache.snapshot_positions() == Positions{64});
}

TEST_CASE("marconi admits a shared prefix at its branch point: it hits from the third occurrence", "[cache][hybrid]") {
    // A (64 shared + 36) computes (0, 100] and decodes 3: only its end state (96) is kept — no chunk states.
    HybridStateCache cache(config("marconi", 8), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 64}, {content(2), 36}}, kB);
    CHECK(d.lookup(a, 0) == 0);
    d.run(a, 0, {100}, 3);
    CHECK(cache.snapshot_positions() == Positions{96});
    // B (64 shared + 40): the attention pool hits 64, no state on B's chain → miss; branch point 64, checkpointed
    // while B prefills (0, 104]. B's end state: 96 on B's own chain → {64, 96 (A), 96 (B)}.
    TestRequest b(2, {{content(1), 64}, {content(3), 40}}, kB);
    CHECK(d.lookup(b, 64) == 0);
    d.run(b, 0, {104}, 3);
    CHECK(cache.snapshot_positions() == Positions{64, 96, 96});
    // C, the third request with the prefix, hits 64.
    TestRequest c(3, {{content(1), 64}, {content(4), 40}}, kB);
    CHECK(d.lookup(c, 64) == 64);
}

TEST_CASE("marconi evicts by recency + FLOP efficiency, not by recency alone", "[cache][hybrid]") {
    // Three snapshots inserted in order: X at 1600 tokens, Y at 32, Z at 48 (end states of three requests), FLOPs
    // saved = position. Recency normalised over the three: X 0, Y 0.5, Z 1; FLOP efficiency / max: X 1, Y 0.02,
    // Z 0.03. Utility (α = 1): X 1.0, Y 0.52, Z 1.03 → Y goes (LRU would drop X, the deepest).
    HybridStateCache cache(config("marconi", 5), kB);
    Driver d{cache};
    TestRequest x(1, {{content(10), 1600}}, kB);
    d.run(x, 0, {1600}, 0);
    TestRequest y(2, {{content(11), 32}}, kB);
    d.run(y, 0, {32}, 0);
    TestRequest z(3, {{content(12), 48}}, kB);
    d.run(z, 0, {48}, 0);
    CHECK(cache.snapshot_positions() == Positions{32, 48, 1600});
    // W's lookup finds attention KV for 32 tokens and no state: branch point 32. W is admitted into the last two
    // free slots (its live state and its end-state buffer); the state at 32 then needs one while W runs → a victim
    // by utility: Y. W's end state (64) is its buffer, handed to the pool at release.
    TestRequest w(4, {{content(13), 64}}, kB);
    CHECK(d.lookup(w, 32) == 0);
    d.run(w, 0, {64}, 0);
    CHECK(cache.snapshot_positions() == Positions{32, 48, 64, 1600});
    CHECK(cache.stats().num_evictions == 1);
}

TEST_CASE("checkpoint keeps a state every K tokens and at the branch point; a hit recomputes from the nearest",
          "[cache][hybrid]") {
    // K = 32. A: 100 prompt tokens in one chunk → states at 32, 64, 96; 3 decode steps end at 103 (last boundary
    // 96, already kept).
    HybridStateCache cache(config("checkpoint", 16, 32), kB);
    Driver d{cache};
    TestRequest a(1, {{content(1), 56}, {content(2), 44}}, kB);
    d.run(a, 0, {100}, 3);
    CHECK(cache.snapshot_positions() == Positions{32, 64, 96});
    // B shares 56 tokens: the attention pool hits floor(56 / 16) · 16 = 48, the nearest state is 32: B recomputes
    // 16 tokens. Its branch point 48 is checkpointed while B computes (32, 120], with 64 and 96 of its own chain.
    TestRequest b(2, {{content(1), 56}, {content(3), 64}}, kB);
    CHECK(d.lookup(b, 48) == 32);
    d.admit(b);
    d.schedule(b, 32, 120, 120);
    CHECK(cache.snapshot_positions() == Positions{32, 48, 64, 64, 96, 96});
    // C shares the same 56 tokens: now the hit is exact at the attention granularity, 48.
    TestRequest c(3, {{content(1), 56}, {content(4), 64}}, kB);
    CHECK(d.lookup(c, 48) == 48);
}

TEST_CASE("checkpoint evicts a dialogue's superseded turn end before older states", "[cache][hybrid]") {
    // K = 2048 (no interval states here), 4 slots, 2 per running request (live state + end-state buffer). O (16
    // tokens) leaves its end state at 16. A (32 tokens) leaves 32. A2, the next turn (A's 32 + 32 new), resumes
    // from 32 and leaves 64: 32 is now superseded. A fourth request needs its 2 slots with one free ({16, 32, 64}
    // held): LRU would drop O's 16 (the oldest); checkpoint drops the superseded 32.
    HybridStateCache cache(config("checkpoint", 4, 2048), kB);
    Driver d{cache};
    TestRequest o(1, {{content(7), 16}}, kB);
    d.run(o, 0, {16}, 0);
    TestRequest a(2, {{content(1), 32}}, kB);
    d.run(a, 0, {32}, 0);
    TestRequest a2(3, {{content(1), 32}, {content(2), 32}}, kB);
    REQUIRE(d.lookup(a2, 32) == 32);
    REQUIRE(cache.can_admit(a.hashes[1]));
    cache.admit(a2.id, a.hashes[1]);
    d.schedule(a2, 32, 64, 64);
    cache.release(a2.id);
    CHECK(cache.snapshot_positions() == Positions{16, 32, 64});
    TestRequest z(4, {{content(9), 48}}, kB);
    d.admit(z);
    CHECK(cache.snapshot_positions() == Positions{16, 64});
}

TEST_CASE("KvCacheManager with a state pool: the hit ends at a state, and a state from this step does not count",
          "[cache][hybrid]") {
    // One attention group at B = 16, 64 blocks; checkpoint K = 32 with 8 state slots.
    KvCacheConfig kv;
    kv.num_gpu_blocks = 64;
    kv.groups = {KvCacheGroup{KvGroupKind::kFullAttention, kB, 0, 8}};
    kv.hybrid_state = config("checkpoint", 8, 32);
    KvCacheManager m(kv);
    TestRequest a(1, {{content(1), 70}, {content(2), 30}}, kB);
    a.num_computed_tokens = 0;
    // A: 100 tokens scheduled at once → attention blocks 0..5 cached at schedule time, states at 32, 64, 96.
    REQUIRE(testing::admit(m, a) == 0);
    // B (70 shared + 50) in the same step: the attention pool has 64 tokens (4 blocks) for B, but A's states were
    // made in this step (A computes them now): no state hit, so no hit at all.
    TestRequest b(2, {{content(1), 70}, {content(3), 50}}, kB);
    CHECK(m.get_computed_blocks(b.view()).num_tokens == 0);
    // Next step: the state at 64 is there; the hit is 64 tokens and 4 attention blocks.
    m.begin_step();
    const CacheHit hit = m.get_computed_blocks(b.view());
    CHECK(hit.num_tokens == 64);
    CHECK(hit.blocks_per_group[0].size() == 4);
    CHECK(m.stats().hits == 64);
    const HybridStateCache* states = m.hybrid_state_cache();
    REQUIRE(states != nullptr);
    CHECK(states->stats().attention_hit_tokens == 128);  // 64 in each of the two lookups
    CHECK(states->num_live_slots() == 2);                // A's live state and its end-state buffer
    // For the step cost model: 32, 64 and 96 copied (96 is also A's end state, so its buffer needs no copy of its
    // own); all three lie inside A's 100-token chunk, which the scan then runs as (0, 32], (32, 64], (64, 96],
    // (96, 100]: 4 chunks of 64 instead of ⌈100 / 64⌉ = 2, so 2 more.
    const StateCopies copies = m.take_state_copies_scheduled();
    CHECK(copies.copies == 3);
    CHECK(copies.extra_kernel_chunks == 2);
}

// ---- Who pays for a state (issue 44): slots a running request holds and copies each scheme makes ----
// One request under every state-pool policy: a 100-token prompt in chunks (0, 48] and (48, 100], then 20 decode
// steps (tokens 101..120), then release. B = 16, the scan's chunk C = 64 (fla), interval K = 32 (checkpoint's K,
// extra_buffer's track interval). A copy at p strictly inside a chunk (from, to) cuts the scan there; the chunks it
// adds are Σ ⌈piece / 64⌉ − ⌈chunk / 64⌉ (extra_kernel_chunks). docs/HYBRID-POLICIES.md "Who pays for a state"
// works the same example.
struct Owned {
    int live_slots = 0;
    StateCopies copies;
    Positions snapshots;
};

Owned own_one_request(const std::string& policy, bool tokens) {
    HybridStateCache cache(config(policy, 16, 32), kB);
    Driver d{cache, tokens};
    TestRequest r(1, {{content(1), 100}}, kB);
    CHECK(d.lookup(r, 0) == 0);
    d.admit(r);
    Owned o;
    o.live_slots = static_cast<int>(cache.num_live_slots());
    d.schedule(r, 0, 48, 100);
    d.schedule(r, 48, 100, 100);
    for (std::int64_t from = 100; from < 120; ++from) {
        r.append_output(content(900), 1);
        d.schedule(r, from, from + 1, 100);
    }
    cache.release(r.id);
    cache.check_invariants();
    o.copies = cache.take_copies_scheduled();
    CHECK(cache.stats().num_state_copies == o.copies.copies);
    o.snapshots = cache.snapshot_positions();
    return o;
}

TEST_CASE("Who pays: checkpoint holds 2 slots and copies its interval states and every end-state boundary",
          "[cache][hybrid]") {
    // (0, 48]: interval state 32, a copy inside the chunk: pieces (0, 32], (32, 48] = 2 chunks for ⌈48/64⌉ = 1 → +1.
    //   No end-state copy: 16, 32, 48 are not the prompt's last boundary (96), which the request passes for sure.
    // (48, 100]: interval states 64 and 96; 96 is also the end state (the prompt's last boundary), so the pool's
    //   copy serves both. Pieces (48, 64], (64, 96], (96, 100] = 3 chunks for ⌈52/64⌉ = 1 → +2.
    // Decode: the step computing token 112 reaches a boundary: its state is copied into the buffer (at the step's
    //   end: no cut). 113..120 reach none. Release hands the buffer (112) to the pool: no copy.
    // Total: 4 copies (32, 64, 96, 112), 3 more scan chunks, snapshots {32, 64, 96, 112}.
    const Owned o = own_one_request("checkpoint", false);
    CHECK(o.live_slots == 2);
    CHECK(o.copies.copies == 4);
    CHECK(o.copies.extra_kernel_chunks == 3);
    CHECK(o.snapshots == Positions{32, 64, 96, 112});
}

TEST_CASE("Who pays: marconi holds 2 slots and copies only its end-state boundaries", "[cache][hybrid]") {
    // No branch point (nothing cached). (0, 48]: nothing. (48, 100]: the prompt's last boundary 96 into the buffer,
    // inside the chunk: pieces (48, 96], (96, 100] = 2 chunks for 1 → +1. Decode: 112 into the buffer (no cut).
    // Release hands over 112. Total: 2 copies, 1 more scan chunk, snapshot {112}.
    const Owned o = own_one_request("marconi", false);
    CHECK(o.live_slots == 2);
    CHECK(o.copies.copies == 2);
    CHECK(o.copies.extra_kernel_chunks == 1);
    CHECK(o.snapshots == Positions{112});
}

TEST_CASE("Who pays: sglang-no-buffer holds 1 slot, copies each non-final chunk end and hands over its live state",
          "[cache][hybrid]") {
    // (0, 48] is non-final: cache_unfinished_req copies the state at 48, the chunk's end (no cut). (48, 100] is
    // final: nothing. The end state is the live state itself (token 120, the last computed), donated at release.
    // Total: 1 copy, no scan chunk, snapshots {48, 120}.
    const Owned o = own_one_request("sglang-no-buffer", true);
    CHECK(o.live_slots == 1);
    CHECK(o.copies.copies == 1);
    CHECK(o.copies.extra_kernel_chunks == 0);
    CHECK(o.snapshots == Positions{48, 120});
}

TEST_CASE("Who pays: sglang-extra-buffer holds 3 slots and copies each tracked position it reaches once",
          "[cache][hybrid]") {
    // (0, 48]: tracked 32 copied into the ping-pong buffer, inside the chunk (+1 chunk, as for checkpoint); the
    // chunk-end insert donates that buffer slot to the pool (no second copy). (48, 100]: tracked 64 and 96; only
    // the last, 96, needs the buffer: a copy inside the chunk, pieces (48, 96], (96, 100] → +1. Decode reaches no
    // multiple of 32 beyond 96 before 128. Release donates the buffer (96). Total: 2 copies, 2 more scan chunks,
    // snapshots {32, 96}.
    const Owned o = own_one_request("sglang-extra-buffer", false);
    CHECK(o.live_slots == 3);
    CHECK(o.copies.copies == 2);
    CHECK(o.copies.extra_kernel_chunks == 2);
    CHECK(o.snapshots == Positions{32, 96});
}

TEST_CASE("extra_kernel_chunks: the chunks the cut pieces need beyond the whole segment's", "[cache][hybrid]") {
    const std::vector<std::int64_t> on_grid{64};     // (0, 64], (64, 100]: 1 + 1 = ⌈100/64⌉
    const std::vector<std::int64_t> off_grid{48};    // (0, 48], (48, 100]: 1 + 1 = 2 = ⌈100/64⌉ too
    const std::vector<std::int64_t> off_grid2{80};   // (0, 80], (80, 130]: 2 + 1 = 3 vs ⌈130/64⌉ = 3
    const std::vector<std::int64_t> two{16, 112};    // (0, 16], (16, 112], (112, 128]: 1 + 2 + 1 = 4 vs 2
    CHECK(extra_kernel_chunks(0, 100, on_grid, 64) == 0);
    CHECK(extra_kernel_chunks(0, 100, off_grid, 64) == 0);
    CHECK(extra_kernel_chunks(0, 130, off_grid2, 64) == 0);
    CHECK(extra_kernel_chunks(0, 128, two, 64) == 2);
    CHECK(extra_kernel_chunks(20, 148, two, 64) == 1);  // 16 ≤ from is ignored: (20, 112], (112, 148] = 2 + 1 vs 2
    CHECK(extra_kernel_chunks(0, 112, two, 64) == 1);   // 112 is the segment's end, not a cut: (0, 16], (16, 112]
}

TEST_CASE("The memory split gives the state pool ratio / (1 + ratio) of the KV budget, in whole states",
          "[cache][hybrid]") {
    // 100,000,000 bytes, ratio 0.9: state budget 47,368,421 B → 47 states of 1,000,000 B; the attention pool gets
    // 100,000,000 − 47,000,000 = 53,000,000 B = 3,234 blocks of 16 × 1,024 B (16,384 B): 51,744 tokens.
    MemoryPlan plan;
    plan.enable_prefix_caching = true;
    plan.kv_cache_memory_bytes = 100'000'000;
    plan.kv_bytes_per_token = 1024;
    plan.state_bytes_per_sequence = 1'000'000;
    plan.max_model_len = 4096;
    plan.block_size = 528;
    plan.mamba_cache_mode = MambaCacheMode::kAlign;
    plan.groups = {KvGroupPlan{KvGroupKind::kFullAttention, 8, 0}, KvGroupPlan{KvGroupKind::kMamba, 24, 0}};
    HybridStatePoolRequest req;
    req.policy = "checkpoint";
    apply_hybrid_state_pool(plan, req);
    REQUIRE(plan.hybrid_state.has_value());
    CHECK(plan.hybrid_state->num_state_slots == 47);
    CHECK(plan.num_gpu_blocks == 3234 + 1);
    CHECK(plan.kv_cache_tokens == 51744);
    CHECK(plan.block_size == 16);
    CHECK(plan.mamba_cache_mode == MambaCacheMode::kNone);
    CHECK(plan.hybrid_state->params.checkpoint_interval_tokens == 2048);  // the policy's default K
    REQUIRE(plan.groups.size() == 1);
    CHECK(plan.groups[0].num_layers == 8);
}

using servesim::testing::config_error_of;  // tests/config_error.h

TEST_CASE("The memory split refuses what it cannot model, naming the key", "[cache][hybrid]") {
    MemoryPlan dense;
    dense.enable_prefix_caching = true;
    dense.kv_cache_memory_bytes = 100'000'000;
    dense.kv_bytes_per_token = 1024;
    HybridStatePoolRequest req;
    req.policy = "marconi";
    const std::string no_states = config_error_of([&] { apply_hybrid_state_pool(dense, req); });
    CHECK(no_states.find("engine.hybrid_cache_policy: 'marconi' needs a hybrid model") != std::string::npos);
    MemoryPlan hybrid = dense;
    hybrid.state_bytes_per_sequence = 1'000'000;
    req.policy = "checkpoint";
    req.interval_tokens = 40;  // not a multiple of 16
    const std::string interval = config_error_of([&] { apply_hybrid_state_pool(hybrid, req); });
    CHECK(interval.find("engine.hybrid_checkpoint_interval_tokens: 40") != std::string::npos);
    req.policy = "lru";
    const std::string name = config_error_of([&] { apply_hybrid_state_pool(hybrid, req); });
    CHECK(name.find("allowed: vllm, sglang-no-buffer, sglang-extra-buffer, marconi, checkpoint") != std::string::npos);
}

TEST_CASE("Every state-pool policy in the table keeps the slot invariant on a long shared-prefix run",
          "[cache][hybrid]") {
    // Contract over the table: 6 slots, 30 requests of 200 tokens sharing 96, each computed in chunks of 64 and 5
    // decode steps; after every step live + snapshots ≤ slots (check_invariants) and every lookup's state hit is a
    // multiple of 16 not beyond the attention hit.
    for (const auto& entry : hybrid_policies()) {
        if (entry.make == nullptr) {
            continue;
        }
        INFO(std::string(entry.name));
        HybridStateCache cache(config(std::string(entry.name), 6, entry.default_interval_tokens > 0 ? 64 : 0), kB);
        Driver d{cache};
        for (std::uint64_t i = 1; i <= 30; ++i) {
            TestRequest r(i, {{content(1), 96}, {content(100 + i), 104}}, kB);
            const std::int64_t hit = d.lookup(r, 96);
            CHECK(hit % kB == 0);
            CHECK(hit <= 96);
            Positions ends;
            for (std::int64_t e = hit + 64; e < 200; e += 64) {
                ends.push_back(e);
            }
            ends.push_back(200);
            d.run(r, hit, ends, 5);
        }
        CHECK(cache.num_live_slots() == 0);
        CHECK(cache.num_snapshots() <= 6);
    }
}

}  // namespace
}  // namespace servesim::cache
