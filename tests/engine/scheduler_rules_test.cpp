// The scheduling and prefix-cache rules of docs/VLLM-RULES.md §10 (items 4–15), one TEST_CASE per rule, each
// driving the real Scheduler (sim/engine/scheduler.*) over the real KvCacheManager with small hand-made requests.
// Every step is followed by KvCacheManager::check_invariants() (the Harness does it). Numbers are worked out in the
// comment above each check; B is the block size, "blocks" are usable pool blocks (num_gpu_blocks − 1: block 0 is
// vLLM's null block).
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/engine/replica.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::content;
using testing::full_attention_config;
using testing::Harness;
using testing::hybrid_align_config;
using testing::scheduler_config;
using testing::tokens_of;

std::vector<core::BlockId> block_ids(std::initializer_list<std::uint32_t> values) {
    std::vector<core::BlockId> out;
    for (auto v : values) {
        out.push_back(core::BlockId{v});
    }
    return out;
}

SchedulerConfig align_scheduler(std::int64_t budget, int block_size = 528) {
    SchedulerConfig s = scheduler_config(budget, block_size);
    s.mamba_align = true;
    return s;
}

// StepPlan::first_admitted (Replica::mark_scheduled marks first-scheduled times only from there) -----------------

TEST_CASE("StepPlan::first_admitted: the running requests come first, the requests admitted this step after them",
          "[engine]") {
    // Step 1 admits a and b (both new: first_admitted 0). Step 2: a and b decode (running, entries 0 and 1), c is
    // admitted after them: first_admitted 2. Step 3: all three run, none admitted: first_admitted 3 = size.
    Harness h(scheduler_config(8192), full_attention_config(64));
    Request* a = h.add(1, {{content(1), 20}}, 4);
    Request* b = h.add(2, {{content(2), 20}}, 4);
    StepPlan plan = h.step();
    CHECK(plan.first_admitted == 0);
    CHECK(plan.scheduled.size() == 2);
    Request* c = h.add(3, {{content(3), 20}}, 4);
    plan = h.step();
    REQUIRE(plan.scheduled.size() == 3);
    CHECK(plan.first_admitted == 2);
    CHECK(plan.scheduled[0].request == a);
    CHECK(plan.scheduled[1].request == b);
    CHECK(plan.scheduled[2].request == c);
    plan = h.step();
    CHECK(plan.scheduled.size() == 3);
    CHECK(plan.first_admitted == 3);
}

TEST_CASE("StepPlan's running decode sums give batch_shape the shape its own loop gives", "[engine]") {
    // a and b (20-token prompts, 4 outputs) are admitted in step 1 (prefill chunks: no claim over the admitted part;
    // the running part is empty, so the flag holds vacuously). Step 2: both decode one token at contexts 20 and 20
    // (computed before = 20): Σ (context + 1) = 42, both sample. c (20 tokens) is admitted after them as a prefill.
    Harness h(scheduler_config(8192), full_attention_config(64));
    h.add(1, {{content(1), 20}}, 4);
    h.add(2, {{content(2), 20}}, 4);
    (void)h.step();
    h.add(3, {{content(3), 20}}, 4);
    StepPlan plan = h.step();
    REQUIRE(plan.first_admitted == 2);
    CHECK(plan.running_all_decode);
    CHECK(plan.running_decode_context_tokens == 42);
    CHECK(plan.running_num_sampled == 2);
    const BatchShape fast = Replica::batch_shape(plan, 16, false);
    StepPlan unclaimed = plan;
    unclaimed.running_all_decode = false;
    const BatchShape slow = Replica::batch_shape(unclaimed, 16, false);
    // 2 decodes + c's 20-token chunk: 22 tokens, 3 sequences, decode context 42, 3 sampled.
    CHECK(fast.num_tokens == 22);
    CHECK(fast.num_seqs == 3);
    CHECK(fast.num_decode_seqs == 2);
    CHECK(fast.decode_context_tokens == 42);
    CHECK(fast.num_sampled_seqs == 3);
    CHECK(fast.num_prefill_tokens == 20);
    CHECK(slow.num_tokens == fast.num_tokens);
    CHECK(slow.num_decode_seqs == fast.num_decode_seqs);
    CHECK(slow.decode_context_tokens == fast.decode_context_tokens);
    CHECK(slow.num_sampled_seqs == fast.num_sampled_seqs);
    CHECK(slow.num_prefill_tokens == fast.num_prefill_tokens);
    CHECK(slow.prefill_attention_work == fast.prefill_attention_work);
}

// §10.4 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Hashing: chained hashes over full blocks only, extended over generated tokens", "[engine][rule4]") {
    // 40 prompt tokens at B = 16: 2 full blocks (32 tokens); the last 8 tokens are not hashed yet.
    Request a(core::RequestId{1}, {{content(1), 32}, {content(2), 8}}, 16, content(100), core::SimTime::zero(), 16);
    REQUIRE(a.block_hashes.size() == 2);
    // 8 generated tokens complete block 2 (tokens 32..47): the output block is hashed too.
    for (int i = 0; i < 7; ++i) {
        a.append_output_token();
    }
    CHECK(a.block_hashes.size() == 2);
    a.append_output_token();
    CHECK(a.block_hashes.size() == 3);

    // Chaining: [S 32][U1 16][T 16] and [S 32][U2 16][T 16] share blocks 0, 1; block 2 differs, and so does block 3
    // although its own tokens (T) are equal — its parent differs.
    Request x(core::RequestId{2}, {{content(1), 32}, {content(3), 16}, {content(5), 16}}, 1, content(101),
              core::SimTime::zero(), 16);
    Request y(core::RequestId{3}, {{content(1), 32}, {content(4), 16}, {content(5), 16}}, 1, content(102),
              core::SimTime::zero(), 16);
    REQUIRE(x.block_hashes.size() == 4);
    REQUIRE(y.block_hashes.size() == 4);
    CHECK(x.block_hashes[0] == y.block_hashes[0]);
    CHECK(x.block_hashes[1] == y.block_hashes[1]);
    CHECK(x.block_hashes[2] != y.block_hashes[2]);
    CHECK(x.block_hashes[3] != y.block_hashes[3]);
}

TEST_CASE("Hashing: a next turn that contains the previous answer hits its generated-token blocks",
          "[engine][rule4]") {
    // Turn 1: prompt S (20 tokens), 13 output tokens. Its KV covers 20 + 12 = 32 tokens (the 13th token is sampled,
    // never computed), and the last decode step caches up to min(31 + 1, 32) = 32 tokens: 2 blocks, the second made
    // of S[16..20) and the first 12 answer tokens.
    Harness h(scheduler_config(8192), full_attention_config(64));
    Request* turn1 = h.add(1, {{content(1), 20}}, 13);
    h.run_to_completion();
    REQUIRE(turn1->num_output_tokens == 13);
    // Turn 2: [S 20][answer of turn 1, 12 tokens][user 10] = 42 tokens; cap floor(41/16) = 2 blocks → hit 32.
    Request* turn2 = h.add(2, {{content(1), 20}, {content(1'000'000 + 1), 12}, {content(7), 10}}, 1);
    const StepPlan plan = h.step();
    CHECK(turn2->num_cached_prompt_tokens == 32);
    CHECK(tokens_of(plan, turn2) == 10);
}

// §10.5 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Hittable when scheduled: a request hits blocks another request scheduled in the same step",
          "[engine][rule5]") {
    // A and B send the same 64-token prompt and are admitted in one step. A (hit 0) is allocated 4 blocks and
    // caches them at once; B's lookup right after hits floor(63/16) = 3 blocks = 48 tokens, before any GPU work.
    Harness h(scheduler_config(8192), full_attention_config(101));
    Request* a = h.add(1, {{content(1), 64}}, 2);
    Request* b = h.add(2, {{content(1), 64}}, 2);
    const StepPlan plan = h.step();
    CHECK(tokens_of(plan, a) == 64);
    CHECK(tokens_of(plan, b) == 16);
    CHECK(b->num_cached_prompt_tokens == 48);
    CHECK(h.kv().stats().queries == 128);
    CHECK(h.kv().stats().hits == 48);
    // No dedupe: B computes its own copy of block 3. Blocks in use: A's 4 + B's 1 → 100 − 5 = 95 free.
    CHECK(h.kv().num_free_blocks() == 95);
}

// §10.6 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Lookup: a 2,000-token prompt sent twice hits 1,984 tokens at block 16 (last token recomputed)",
          "[engine][rule6]") {
    // 2,000 = 125 blocks of 16. The lookup caps at floor((2000 − 1)/16) = 124 blocks = 1,984 tokens, so the second
    // pass computes 16 tokens: the last token is always recomputed, even with the whole prompt cached.
    Harness h(scheduler_config(8192), full_attention_config(300));
    h.add(1, {{content(1), 2000}}, 1);
    h.run_to_completion();
    Request* again = h.add(2, {{content(1), 2000}}, 1);
    const StepPlan plan = h.step();
    CHECK(again->num_cached_prompt_tokens == 1984);
    CHECK(tokens_of(plan, again) == 16);
    CHECK(h.kv().stats().queries == 4000);
    CHECK(h.kv().stats().hits == 1984);
}

TEST_CASE("Lookup: stops at the first missing block, and only waiting requests with 0 computed tokens look up",
          "[engine][rule6]") {
    // First [S 32][U1 16][T 32]; then [S 32][U2 16][T 32]: blocks 0–1 match, block 2 misses; blocks 3–4 hold the
    // same T tokens but chain from a different parent, so the hit is 32. The second request is prefilled in chunks
    // of 16 (budget 16): 48 tokens after the hit → 3 steps, one lookup only (queries 80 + 80).
    Harness h(scheduler_config(16), full_attention_config(64));
    h.add(1, {{content(1), 32}, {content(2), 16}, {content(3), 32}}, 1);
    h.run_to_completion();
    REQUIRE(h.kv().stats().queries == 80);
    Request* second = h.add(2, {{content(1), 32}, {content(4), 16}, {content(3), 32}}, 1);
    CHECK(tokens_of(h.step(), second) == 16);
    CHECK(second->num_cached_prompt_tokens == 32);
    CHECK(tokens_of(h.step(), second) == 16);
    CHECK(tokens_of(h.step(), second) == 16);
    CHECK(second->num_output_tokens == 1);
    CHECK(h.kv().stats().requests == 2);
    CHECK(h.kv().stats().queries == 160);
    CHECK(h.kv().stats().hits == 32);
}

// §10.7 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Hybrid hit: a chunk spanning block boundaries leaves no snapshot inside it, so no hit",
          "[engine][rule7]") {
    // B = 528. First [X 1100][Y 900]: align split → one chunk 0 → 1,584 (forced stop), then 416. Snapshots exist only
    // at 1,584. Second [X 1100][Z 900]: full attention would hit floor(1100/528) = 2 blocks = 1,056, but no Mamba
    // group has a state at 528 or 1,056, so the hybrid hit is 0. The rule of vLLM ≤ 0.23: from 0.24 the second
    // request's chunk is cut at 1,056 (Marconi admission, tests/engine/hybrid_prefix_versions_test.cpp).
    SchedulerConfig before_marconi = align_scheduler(8192);
    before_marconi.vllm_version = core::VllmVersion{0, 23, 0};
    Harness hybrid(before_marconi, hybrid_align_config(200, 528));
    Request* first = hybrid.add(1, {{content(1), 1100}, {content(2), 900}}, 1);
    CHECK(tokens_of(hybrid.step(), first) == 1584);
    CHECK(tokens_of(hybrid.step(), first) == 416);
    Request* second = hybrid.add(2, {{content(1), 1100}, {content(3), 900}}, 1);
    CHECK(tokens_of(hybrid.step(), second) == 1584);
    CHECK(second->num_cached_prompt_tokens == 0);
    CHECK(hybrid.kv().stats().hits == 0);
}

TEST_CASE("Hybrid hit: a shared 1,000-token system prompt hits at its floor(P/B)·B snapshot, 528", "[engine][rule7]") {
    // First [S 1000]: last = 1000 − 1000 % 528 = 528, so the first chunk stops at 528 (snapshot), then 472.
    // Second [S 1000][U 500]: the full-attention chain matches block 0 only (block 1 of the first was never full);
    // the snapshot at 528 exists → hit 528; then 1,500 − 528 = 972 tokens, forced to stop at last = 1,056.
    Harness h(align_scheduler(8192), hybrid_align_config(200, 528));
    Request* first = h.add(1, {{content(1), 1000}}, 1);
    CHECK(tokens_of(h.step(), first) == 528);
    CHECK(tokens_of(h.step(), first) == 472);
    Request* second = h.add(2, {{content(1), 1000}, {content(2), 500}}, 1);
    CHECK(tokens_of(h.step(), second) == 1056 - 528);
    CHECK(second->num_cached_prompt_tokens == 528);
}

TEST_CASE("Hybrid hit: a snapshot cached in this step blocks admission for one step (same-step rule)",
          "[engine][rule7]") {
    // A and B send the same 2,000 tokens. Step 1: A is forced to stop at 1,584 and caches its state there; B's
    // lookup finds it (hit 1,584, counted) but the snapshot was cached this step → allocation fails, B waits.
    // Step 2: A runs its last 416; B looks up again (counted again) and is admitted with 2,000 − 1,584 = 416.
    Harness h(align_scheduler(8192), hybrid_align_config(200, 528));
    Request* a = h.add(1, {{content(1), 2000}}, 2);
    Request* b = h.add(2, {{content(1), 2000}}, 2);
    StepPlan p1 = h.step();
    CHECK(tokens_of(p1, a) == 1584);
    CHECK(tokens_of(p1, b) == 0);
    CHECK(b->status == RequestStatus::kWaiting);
    CHECK(h.kv().stats().queries == 4000);
    CHECK(h.kv().stats().hits == 1584);
    StepPlan p2 = h.step();
    CHECK(tokens_of(p2, a) == 416);
    CHECK(tokens_of(p2, b) == 416);
    CHECK(b->num_cached_prompt_tokens == 1584);
    CHECK(h.kv().stats().queries == 6000);
    CHECK(h.kv().stats().hits == 3168);
}

// §10.8 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Mamba align split: chunks floored to multiples of B, forced stop at floor(P/B)·B, 0 tokens = not scheduled",
          "[engine][rule8]") {
    // B = 528, budget 1,000. A and B each 2,000 tokens (last = 1,584).
    //   step 1: A min(2000, 1000) = 1000 → floor → 528; B gets 472 → floor → 0: not scheduled (its lookup counted).
    //   step 2: A 528 + 1000 = 1528 < 1584 → 528 (A at 1,056); B 0 again.
    //   step 3: A min(944, 1000) crosses 1,584 → forced stop: 528 (A at 1,584); B 0.
    //   step 4: A's final remainder 416 (< B, unchanged); B gets 584 → 528: admitted.
    Harness h(align_scheduler(1000), hybrid_align_config(200, 528));
    Request* a = h.add(1, {{content(1), 2000}}, 1);
    Request* b = h.add(2, {{content(2), 2000}}, 1);
    const std::vector<std::int64_t> a_chunks = {528, 528, 528, 416};
    const std::vector<std::int64_t> b_chunks = {0, 0, 0, 528};
    for (std::size_t i = 0; i < a_chunks.size(); ++i) {
        const StepPlan p = h.step();
        CHECK(tokens_of(p, a) == a_chunks[i]);
        CHECK(tokens_of(p, b) == b_chunks[i]);
    }
    // One lookup for A, four for B (n = 0 after the split is a failed admission, re-counted): 5 × 2,000.
    CHECK(h.kv().stats().queries == 10000);
}

// §10.9 ----------------------------------------------------------------------------------------------------------

TEST_CASE("Reference counts: a hit takes blocks out of the free queue, allocation pops the head, frees go tail first",
          "[engine][rule9]") {
    // Pool of 6 (usable 1..5), free queue [1 2 3 4 5].
    Harness h(scheduler_config(8192), full_attention_config(6));
    // A (48 tokens) takes 1, 2, 3 from the head; when it finishes they go to the tail in reverse: [4 5 3 2 1].
    h.add(1, {{content(1), 48}}, 1);
    h.step();
    CHECK(h.kv().get_all_free_blocks() == block_ids({4, 5, 3, 2, 1}));
    // B (same 48 tokens, 1 output): hit floor(47/16) = 2 blocks → 1 and 2 leave the queue from wherever they are;
    // B's block 2 is new, popped from the head: 4. Queue [5 3]. B finishes in the same step: its table [1 2 4] goes
    // back reversed → [5 3 4 2 1].
    Request* b = h.add(2, {{content(1), 48}}, 1);
    h.step();
    CHECK(b->num_cached_prompt_tokens == 32);
    CHECK(h.kv().get_all_free_blocks() == block_ids({5, 3, 4, 2, 1}));
    // C (32 new tokens, 2 outputs) pops 5, then 3 (lazily evicting A's cached block 2). Queue [4 2 1].
    Request* c = h.add(3, {{content(2), 32}}, 2);
    h.step();
    CHECK(h.kv().get_block_ids(c->id)[0] == block_ids({5, 3}));
    CHECK(h.kv().get_all_free_blocks() == block_ids({4, 2, 1}));
}

// §10.10 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Capacity: evictable cached blocks count as free", "[engine][rule10]") {
    // Pool of 8 (7 usable). A (48 tokens) finishes: its 3 blocks are cached but free. D (112 new tokens) needs
    // 7 blocks = all of them, the 3 evictable included, and is admitted.
    Harness h(scheduler_config(8192), full_attention_config(8));
    h.add(1, {{content(1), 48}}, 1);
    h.step();
    REQUIRE(h.kv().num_free_blocks() == 7);
    Request* d = h.add(2, {{content(2), 112}}, 1);
    CHECK(tokens_of(h.step(), d) == 112);
}

TEST_CASE("Capacity: evictable hit blocks cost capacity", "[engine][rule10]") {
    // Pool of 8 (7 usable), full-sequence check off to isolate the rule. A (48 tokens, 3 blocks) finishes: cached,
    // free. H (16 tokens, 100 outputs) holds 1 block: 6 free. C = [A's 48][64 new] = 112 tokens hits 48 (3 blocks
    // with ref 0). Needed = cdiv(112, 16) − 3 hit blocks + 3 evictable hits = 7 > 6: not admitted, although only
    // 4 blocks are new.
    SchedulerConfig sc = scheduler_config(8192);
    sc.scheduler_reserve_full_isl = false;
    Harness h(sc, full_attention_config(8));
    h.add(1, {{content(1), 48}}, 1);
    h.step();
    h.add(2, {{content(9), 15}}, 100);
    h.step();
    REQUIRE(h.kv().num_free_blocks() == 6);
    Request* c = h.add(3, {{content(1), 48}, {content(2), 64}}, 1);
    CHECK(tokens_of(h.step(), c) == 0);
    CHECK(c->status == RequestStatus::kWaiting);
}

TEST_CASE("Capacity: with scheduler_reserve_full_isl the whole prompt must fit before admission", "[engine][rule10]") {
    // Pool of 11 (10 usable), budget 64. A 200-token prompt: the first chunk needs cdiv(64, 16) = 4 blocks, the whole
    // sequence cdiv(200, 16) = 13 > 10.
    SECTION("on (vLLM default since PR #37307): not admitted") {
        Harness h(scheduler_config(64), full_attention_config(11));
        Request* r = h.add(1, {{content(1), 200}}, 1);
        CHECK(tokens_of(h.step(), r) == 0);
        CHECK(r->status == RequestStatus::kWaiting);
    }
    SECTION("off: the first chunk is admitted") {
        SchedulerConfig sc = scheduler_config(64);
        sc.scheduler_reserve_full_isl = false;
        Harness h(sc, full_attention_config(11));
        Request* r = h.add(1, {{content(1), 200}}, 1);
        CHECK(tokens_of(h.step(), r) == 64);
    }
}

// §10.11 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Step structure: running requests first, in admission order, then waiting ones", "[engine][rule11]") {
    // Budget 100. Step 1 admits A and B (30 tokens each). Step 2: A and B decode (1 each) before C, which arrived
    // in between and gets the remaining 98.
    Harness h(scheduler_config(100), full_attention_config(64));
    Request* a = h.add(1, {{content(1), 30}}, 3);
    Request* b = h.add(2, {{content(2), 30}}, 3);
    h.step();
    Request* c = h.add(3, {{content(3), 200}}, 1);
    const StepPlan p = h.step();
    REQUIRE(p.scheduled.size() == 3);
    CHECK(p.scheduled[0].request == a);
    CHECK(p.scheduled[1].request == b);
    CHECK(p.scheduled[2].request == c);
    CHECK(p.scheduled[0].num_new_tokens == 1);
    CHECK(p.scheduled[1].num_new_tokens == 1);
    CHECK(p.scheduled[2].num_new_tokens == 98);
}

TEST_CASE("Step structure: the waiting loop stops at the first request that cannot be allocated", "[engine][rule11]") {
    // Pool of 11 (10 usable). R (96 tokens) takes 6 blocks; Big (80 tokens) needs 5 > 4 → stops the loop; Small
    // (16 tokens, 1 block) would fit but is behind Big: not looked up (queries 96 + 80), not scheduled.
    Harness h(scheduler_config(8192), full_attention_config(11));
    Request* r = h.add(1, {{content(1), 96}}, 5);
    Request* big = h.add(2, {{content(2), 80}}, 1);
    Request* small = h.add(3, {{content(3), 16}}, 1);
    const StepPlan p = h.step();
    CHECK(tokens_of(p, r) == 96);
    CHECK(tokens_of(p, big) == 0);
    CHECK(tokens_of(p, small) == 0);
    CHECK(h.kv().stats().queries == 176);
    CHECK(h.kv().num_free_blocks() == 4);
}

TEST_CASE("Step structure: at most max_num_seqs requests run", "[engine][rule11]") {
    // max_num_seqs 2: A and B admitted; C is not looked up (queries 32) while two run. A and B finish after 2
    // steps (2 outputs each); C is admitted in step 3.
    Harness h(scheduler_config(8192, 16, 2), full_attention_config(64));
    h.add(1, {{content(1), 16}}, 2);
    h.add(2, {{content(2), 16}}, 2);
    Request* c = h.add(3, {{content(3), 16}}, 1);
    CHECK(tokens_of(h.step(), c) == 0);
    CHECK(h.scheduler().num_running() == 2);
    CHECK(h.kv().stats().queries == 32);
    CHECK(tokens_of(h.step(), c) == 0);
    CHECK(h.scheduler().num_running() == 0);
    CHECK(tokens_of(h.step(), c) == 16);
}

// §10.12 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Chunked prefill: a partial prefill continues next step ahead of new arrivals", "[engine][rule12]") {
    // Budget 100. A (250 tokens): 100 in step 1. B (50) arrives; step 2: A takes 100 first, the budget is spent and
    // B is not even looked up. Step 3: A's last 50 (a token is sampled), B 50. Step 4: A decodes 1 token.
    Harness h(scheduler_config(100), full_attention_config(64));
    Request* a = h.add(1, {{content(1), 250}}, 2);
    CHECK(tokens_of(h.step(), a) == 100);
    Request* b = h.add(2, {{content(2), 50}}, 2);
    StepPlan p2 = h.step();
    CHECK(tokens_of(p2, a) == 100);
    CHECK(tokens_of(p2, b) == 0);
    CHECK(h.kv().stats().queries == 250);
    StepPlan p3 = h.step();
    CHECK(tokens_of(p3, a) == 50);
    CHECK(p3.scheduled[0].samples_token);
    CHECK(tokens_of(p3, b) == 50);
    CHECK(tokens_of(h.step(), a) == 1);
}

TEST_CASE("Chunked prefill: long_prefill_token_threshold caps each chunk", "[engine][rule12]") {
    // Threshold 30, 100 tokens: chunks 30, 30, 30, 10, then one decode token per step.
    SchedulerConfig sc = scheduler_config(8192);
    sc.long_prefill_token_threshold = 30;
    Harness h(sc, full_attention_config(64));
    Request* a = h.add(1, {{content(1), 100}}, 3);
    for (std::int64_t expected : {30, 30, 30, 10, 1, 1}) {
        CHECK(tokens_of(h.step(), a) == expected);
    }
    CHECK(a->status == RequestStatus::kFinished);
}

// §10.13 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Preemption: the last running request is preempted by recompute, to the head of waiting, no admission",
          "[engine][rule13]") {
    // Pool of 8 (7 usable, queue [1..7]). R1, R2 (32 tokens: 2 blocks each) and R3 (48: 3 blocks) fill it in step 1;
    // W (10 tokens) fails and waits. Step 2: R1's decode needs a 3rd block (33 tokens), none free → preempt the LAST
    // running request, R3: its blocks go to the tail in reverse [7 6 5], it is reset to 0 computed tokens and put
    // at the HEAD of waiting (ahead of W). R1 takes 7, R2 takes 6; block 5 stays free, yet nothing is admitted.
    Harness h(scheduler_config(8192), full_attention_config(8));
    Request* r1 = h.add(1, {{content(1), 32}}, 10);
    Request* r2 = h.add(2, {{content(2), 32}}, 10);
    Request* r3 = h.add(3, {{content(3), 48}}, 10);
    Request* w = h.add(4, {{content(4), 10}}, 1);
    const StepPlan p1 = h.step();
    CHECK(p1.scheduled.size() == 3);
    CHECK(h.kv().num_free_blocks() == 0);

    const StepPlan p2 = h.step();
    REQUIRE(p2.preempted.size() == 1);
    CHECK(p2.preempted[0] == r3);
    CHECK(r3->status == RequestStatus::kPreempted);
    CHECK(r3->num_computed_tokens == 0);
    CHECK(r3->num_preemptions == 1);
    CHECK(h.scheduler().num_preemptions() == 1);
    CHECK(tokens_of(p2, r1) == 1);
    CHECK(tokens_of(p2, r2) == 1);
    CHECK(tokens_of(p2, w) == 0);
    CHECK(h.kv().get_block_ids(r1->id)[0] == block_ids({1, 2, 7}));
    CHECK(h.kv().get_block_ids(r2->id)[0] == block_ids({3, 4, 6}));
    CHECK(h.kv().get_all_free_blocks() == block_ids({5}));
    CHECK(h.kv().num_blocks_held(r3->id) == 0);

    // Step 3: R3, at the head, looks up prompt + its 1 output (49 tokens): block 0 (5) is still cached, block 1 was
    // evicted → hit 16. It needs cdiv(49, 16) = 4 blocks (the evictable hit included) > 1 free: stays at the head,
    // and W behind it is not tried.
    const StepPlan p3 = h.step();
    CHECK(tokens_of(p3, r3) == 0);
    CHECK(tokens_of(p3, w) == 0);
    CHECK(h.kv().stats().preempted_queries == 49);
    CHECK(h.kv().stats().preempted_hits == 16);

    // Everyone finishes; R3 recomputes prompt + outputs as one prefill on resume.
    h.run_to_completion();
    CHECK(r1->num_output_tokens == 10);
    CHECK(r2->num_output_tokens == 10);
    CHECK(r3->num_output_tokens == 10);
    CHECK(w->num_output_tokens == 1);
    CHECK(h.kv().num_free_blocks() == 7);
}

// §10.14 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Counters: queries and hits per lookup attempt, re-counted after a failed admission", "[engine][rule14]") {
    // Pool of 6 (5 usable). H = [X 48], 4 outputs (its context grows to 51 tokens → 4 blocks). W = [X 32][Y 48]
    // (80 tokens, 5 blocks) hits H's first 2 blocks (32 tokens) but needs 3 new blocks: free is 2 in step 1, 1 in
    // steps 2–4; H finishes at the end of step 4 and W is admitted in step 5. Each step records W's lookup:
    // queries = 48 + 5 × 80 = 448, hits = 5 × 32 = 160.
    Harness h(scheduler_config(8192), full_attention_config(6));
    h.add(1, {{content(1), 48}}, 4);
    Request* w = h.add(2, {{content(1), 32}, {content(2), 48}}, 1);
    for (int step = 1; step <= 4; ++step) {
        CHECK(tokens_of(h.step(), w) == 0);
    }
    CHECK(h.kv().stats().queries == 48 + 4 * 80);
    CHECK(tokens_of(h.step(), w) == 48);
    CHECK(h.kv().stats().requests == 6);
    CHECK(h.kv().stats().queries == 448);
    CHECK(h.kv().stats().hits == 160);
    CHECK(w->num_cached_prompt_tokens == 32);
}

TEST_CASE("Counters: lookups of preempted requests are excluded from queries and hits", "[engine][rule14]") {
    // As in the preemption test: R3 (48 tokens + 1 output) is preempted in step 2 and re-looked-up from step 3 on.
    // The exported counters stay at the four first lookups: 32 + 32 + 48 + 10 = 122 queries, 0 hits; every later
    // lookup of R3 (49 tokens) goes to preempted_*.
    Harness h(scheduler_config(8192), full_attention_config(8));
    h.add(1, {{content(1), 32}}, 10);
    h.add(2, {{content(2), 32}}, 10);
    h.add(3, {{content(3), 48}}, 10);
    Request* w = h.add(4, {{content(4), 10}}, 1);
    h.step();
    h.step();
    REQUIRE(h.scheduler().num_preemptions() == 1);
    CHECK(h.kv().stats().queries == 122);
    h.step();
    CHECK(h.kv().stats().queries == 122);
    CHECK(h.kv().stats().hits == 0);
    CHECK(h.kv().stats().preempted_requests == 1);
    CHECK(h.kv().stats().preempted_queries == 49);
    h.run_to_completion();
    // Every later ordinary lookup is W's (10 tokens); every preempted one is R3's (49 tokens).
    CHECK(w->num_output_tokens == 1);
    CHECK(h.kv().stats().queries > 122);
    CHECK((h.kv().stats().queries - 122) % 10 == 0);
    CHECK(h.kv().stats().preempted_queries % 49 == 0);
    CHECK(h.kv().stats().preempted_requests >= 2);
}

// §10.15 ---------------------------------------------------------------------------------------------------------

TEST_CASE("Per-request cached tokens: prompt_tokens_cached is counted once, at the last lookup before the first token",
          "[engine][rule15]") {
    // R3 of the preemption scenario got its first token with hit 0, then resumed after preemption with a hit of 16
    // or more: its prompt_tokens_cached stays 0. (W of the counters test, looked up five times with hit 32, records
    // 32 once: see that test.)
    Harness h(scheduler_config(8192), full_attention_config(8));
    h.add(1, {{content(1), 32}}, 10);
    h.add(2, {{content(2), 32}}, 10);
    Request* r3 = h.add(3, {{content(3), 48}}, 10);
    h.step();
    REQUIRE(r3->num_output_tokens == 1);
    h.run_to_completion();
    REQUIRE(r3->num_preemptions >= 1);
    CHECK(h.kv().stats().preempted_hits >= 16);
    CHECK(r3->num_cached_prompt_tokens == 0);
}

}  // namespace
}  // namespace servesim::engine
