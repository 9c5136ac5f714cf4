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

}  // namespace
}  // namespace servesim::engine
