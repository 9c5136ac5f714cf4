// The scheduler with a host KV tier: a host hit parks the request (WAITING_FOR_REMOTE_KVS) for at least one step,
// then it resumes with the loaded tokens computed (vllm-v1-behaviour.md §6.2, checklist §10 item 16).
#include <memory>

#include "sim/cache/cpu_offload.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

using namespace servesim;
using namespace servesim::engine;
using namespace servesim::engine::testing;

namespace {

// Emits the step's tokens like the replica, and completes the host tier's copies at the step end.
void emit(Scheduler& s, cache::CpuOffloadManager& cpu, const StepPlan& plan) {
    for (const auto& sr : plan.scheduled) {
        if (sr.samples_token && sr.request->status == RequestStatus::kRunning) {
            sr.request->append_output_token();
            if (sr.request->is_finished()) {
                s.finish_request(sr.request);
            }
        }
    }
    cpu.on_step_end();
}

}  // namespace

TEST_CASE("Offload: a host hit costs an extra step, then resumes with the loaded prefix", "[engine][offload]") {
    // B = 16, GPU pool of 6 blocks (5 usable). A: 64 tokens (4 blocks), 1 output token. B: 80 other tokens
    // (5 blocks) evicts all of A's cached blocks from the GPU. C repeats A's prompt: no GPU hit, but A's 4 blocks
    // are on the host (stored in step 1, copied in step 2, resident after it): external hit 64 tokens.
    cache::CpuOffloadConfig oc;
    oc.num_cpu_blocks = 100;
    oc.block_size_tokens = 16;
    oc.load_s_per_token = 28e-6;  // 64 tokens → 1.792 ms
    cache::CpuOffloadManager cpu(oc);
    cache::KvCacheManager kv(full_attention_config(6));
    Scheduler s(scheduler_config(2048), kv, &cpu);
    auto make = [](std::uint64_t id, std::uint64_t c, std::int64_t len) {
        return std::make_unique<Request>(core::RequestId{id}, core::TokenContent{{core::ContentId{c}, len}}, 1,
                                         core::ContentId{900 + id}, core::SimTime::zero(), 16);
    };
    auto a = make(1, 7, 64);
    auto b = make(2, 8, 80);
    auto c = make(3, 7, 64);

    s.add_request(a.get());
    const core::SimTime t1 = core::SimTime::from_s(0.0);
    emit(s, cpu, s.schedule(t1));  // step 1: A prefills 64 and finishes; its 4 blocks queued for the host
    REQUIRE(a->status == RequestStatus::kFinished);

    s.add_request(b.get());
    emit(s, cpu, s.schedule(core::SimTime::from_s(0.1)));  // step 2: B takes all 5 free blocks (evicting A's)
    REQUIRE(b->status == RequestStatus::kFinished);
    kv.check_invariants();

    s.add_request(c.get());
    const core::SimTime t3 = core::SimTime::from_s(0.2);
    const StepPlan p3 = s.schedule(t3);  // step 3: GPU miss, host hit 64 → parked, not scheduled
    REQUIRE(p3.empty());
    REQUIRE(c->status == RequestStatus::kWaitingForRemoteKvs);
    REQUIRE(c->num_external_cached_tokens == 64);
    REQUIRE(cpu.stats().queries == 64 + 80 + 64);  // every admission records num_tokens − local hit
    REQUIRE(cpu.stats().hits == 64);
    REQUIRE(s.next_load_done() == t3 + core::Duration::from_s(64 * 28e-6));
    emit(s, cpu, p3);

    // Before the load lands nothing runs; once it has, C resumes with 63 computed (the last token is recomputed).
    REQUIRE(s.schedule(core::SimTime::from_s(0.2001)).empty());
    const StepPlan p5 = s.schedule(core::SimTime::from_s(0.21));
    REQUIRE(p5.scheduled.size() == 1);
    REQUIRE(p5.scheduled[0].request == c.get());
    REQUIRE(p5.scheduled[0].num_computed_before == 63);
    REQUIRE(p5.scheduled[0].num_new_tokens == 1);
    REQUIRE(p5.scheduled[0].samples_token);
    kv.check_invariants();
}
