// Replica::batch_shape reduces a step's plan to what costs depend on (sim/engine/cost_model.h BatchShape): per
// prefill chunk its work and the longest chunk's span of keys, per decode its context.
#include <memory>

#include "sim/engine/replica.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::content;

TEST_CASE("batch_shape: a prefill chunk on a cached prefix spans its prefix; a decode reads its context",
          "[engine][cost]") {
    // A: 4,096-token prompt, a 256-token chunk after 1,024 computed (hit or earlier chunks):
    //    work 256·(1,024 + 128) = 294,912; keys spanned 1,024 + 256 = 1,280; ⌈256/64⌉ = 4 GDN chunks.
    // B: 100-token prompt already computed, one decode token: context 100 + 1 = 101.
    // C: 300-token prompt, its first 100 tokens: work 100·50 = 5,000, keys 100, 2 GDN chunks.
    // The step: work 299,912, longest span max(1,280, 100) = 1,280, 6 GDN chunks.
    Request a(core::RequestId{1}, {{content(1), 4096}}, 8, content(101), core::SimTime::zero(), 16);
    Request b(core::RequestId{2}, {{content(2), 100}}, 8, content(102), core::SimTime::zero(), 16);
    Request c(core::RequestId{3}, {{content(3), 300}}, 8, content(103), core::SimTime::zero(), 16);
    StepPlan plan;
    plan.scheduled.push_back({&a, 256, 1024, false});
    plan.scheduled.push_back({&b, 1, 100, true});
    plan.scheduled.push_back({&c, 100, 0, false});
    const BatchShape s = Replica::batch_shape(plan, 16, false);
    CHECK(s.num_tokens == 357);
    CHECK(s.num_prefill_tokens == 356);
    CHECK(s.num_prefill_seqs == 2);
    CHECK(s.prefill_attention_work == 299912.0);
    CHECK(s.prefill_max_context_tokens == 1280);
    CHECK(s.num_gdn_chunks == 6);
    CHECK(s.num_decode_seqs == 1);
    CHECK(s.decode_context_tokens == 101);
    CHECK(s.num_sampled_seqs == 1);
}

TEST_CASE("batch_shape: vLLM's shared pool copies a state at each block boundary a step keeps (align / all)",
          "[engine][cost]") {
    // B = 16, scan chunk 64. Align: A's prefill chunk (16, 48] ends on a boundary → 1 copy into the next state
    // block; decode B (63 → 64) reaches one → 1 copy; decode C (64 → 65) none. 2 copies, no cut (align keeps states
    // only at a step's end).
    Request a(core::RequestId{1}, {{content(1), 200}}, 8, content(101), core::SimTime::zero(), 16);
    Request b(core::RequestId{2}, {{content(2), 40}}, 8, content(102), core::SimTime::zero(), 16);
    Request c(core::RequestId{3}, {{content(3), 40}}, 8, content(103), core::SimTime::zero(), 16);
    StepPlan plan;
    plan.scheduled.push_back({&a, 32, 16, false});
    plan.scheduled.push_back({&b, 1, 63, true});
    plan.scheduled.push_back({&c, 1, 64, true});
    const BatchShape align = Replica::batch_shape(plan, 16, true);
    CHECK(align.num_snapshots == 2);
    CHECK(align.num_snapshot_extra_chunks == 0);
    // All mode: a state at every boundary crossed. A's chunk (16, 48] crosses 32 and 48: 2 copies, 32 inside the
    // chunk → pieces (16, 32], (32, 48] = 2 scan chunks for ⌈32/64⌉ = 1 → +1. B: 1, C: 0. D computes (0, 100]:
    // boundaries 16 … 96, 6 copies, all inside → 7 pieces of ≤ 16 tokens for ⌈100/64⌉ = 2 → +5.
    Request d(core::RequestId{4}, {{content(4), 200}}, 8, content(104), core::SimTime::zero(), 16);
    plan.scheduled.push_back({&d, 100, 0, false});
    const BatchShape all = Replica::batch_shape(plan, 16, false, {}, /*every_block=*/true, 64);
    CHECK(all.num_snapshots == 2 + 1 + 6);
    CHECK(all.num_snapshot_extra_chunks == 1 + 5);
    // Without prefix caching of states (neither mode) nothing is copied.
    CHECK(Replica::batch_shape(plan, 16, false).num_snapshots == 0);
}

}  // namespace
}  // namespace servesim::engine
