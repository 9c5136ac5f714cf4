// The scheduler with a host KV tier: a host hit parks the request (WAITING_FOR_REMOTE_KVS) for at least one step,
// then it resumes with the loaded tokens computed (docs/VLLM-RULES.md §6.2, checklist §10 item 16).
#include <memory>
#include <vector>

#include "sim/cache/offload/cpu_offload.h"
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

namespace {

// A (64 tokens) stored on the host, B (80 other tokens) evicting it from a 6-block GPU pool, C repeating A: the
// setup of the test above, with an instant load. Returns the schedule() calls after C's lookup until C runs.
int schedules_until_host_hit_runs(bool async_scheduling) {
    cache::CpuOffloadConfig oc;
    oc.num_cpu_blocks = 100;
    oc.block_size_tokens = 16;
    oc.load_s_per_token = 0;
    cache::CpuOffloadManager cpu(oc);
    cache::KvCacheManager kv(full_attention_config(6));
    SchedulerConfig sc = scheduler_config(2048);
    sc.async_scheduling = async_scheduling;
    Scheduler s(sc, kv, &cpu);
    auto make = [](std::uint64_t id, std::uint64_t c, std::int64_t len) {
        return std::make_unique<Request>(core::RequestId{id}, core::TokenContent{{core::ContentId{c}, len}}, 1,
                                         core::ContentId{900 + id}, core::SimTime::zero(), 16);
    };
    auto a = make(1, 7, 64);
    auto b = make(2, 8, 80);
    auto c = make(3, 7, 64);
    s.add_request(a.get());
    emit(s, cpu, s.schedule(core::SimTime::from_s(0.0)));
    s.add_request(b.get());
    emit(s, cpu, s.schedule(core::SimTime::from_s(0.1)));
    s.add_request(c.get());
    const StepPlan lookup = s.schedule(core::SimTime::from_s(0.2));
    REQUIRE(c->status == RequestStatus::kWaitingForRemoteKvs);
    emit(s, cpu, lookup);
    for (int calls = 1; calls <= 5; ++calls) {
        const StepPlan p = s.schedule(core::SimTime::from_s(0.2 + 0.01 * calls));
        const bool runs = !p.scheduled.empty() && p.scheduled[0].request == c.get();
        emit(s, cpu, p);
        if (runs) {
            return calls;
        }
    }
    return -1;
}

}  // namespace

TEST_CASE("Offload: a host hit runs one schedule() after its lookup, two under async scheduling",
          "[engine][offload]") {
    // Instant load (0 s). Sync: the lookup's step carries the load and reports it done; the next schedule()
    // promotes C → 1 call. Async: the lookup's step starts only at the next schedule() (which schedules the step
    // after it), and that step's output is processed after the one following was scheduled → C runs at the 2nd.
    REQUIRE(schedules_until_host_hit_runs(false) == 1);
    REQUIRE(schedules_until_host_hit_runs(true) == 2);
}

namespace {

// One request of `prompt` tokens and `outputs` output tokens run to completion in a roomy pool, then the host
// copies drained; returns the host units resident.
std::int64_t host_units_after(std::int64_t prompt, std::int64_t outputs, cache::CpuOffloadConfig oc) {
    oc.num_cpu_blocks = 100;
    oc.block_size_tokens = 16;
    cache::CpuOffloadManager cpu(oc);
    cache::KvCacheManager kv(full_attention_config(40));
    Scheduler s(scheduler_config(2048), kv, &cpu);
    Request r(core::RequestId{1}, core::TokenContent{{core::ContentId{5}, prompt}}, outputs, core::ContentId{77},
              core::SimTime::zero(), 16);
    s.add_request(&r);
    for (int step = 0; step < 100 && r.status != RequestStatus::kFinished; ++step) {
        emit(s, cpu, s.schedule(core::SimTime::from_s(0.01 * step)));
    }
    REQUIRE(r.status == RequestStatus::kFinished);
    cpu.on_step_end();
    cpu.on_step_end();
    return cpu.num_resident_blocks();
}

}  // namespace

TEST_CASE("Offload: offload_prompt_only stores the prompt's blocks, not the generated ones", "[engine][offload]") {
    // PR #43797. B = 16, prompt 32 tokens (2 blocks), 20 output tokens: the sequence reaches 52 tokens, so block 2
    // (tokens 32–47) fills during decode. Prompt only: 2 blocks on the host; before #43797: 3.
    cache::CpuOffloadConfig oc;
    oc.offload_prompt_only = true;
    REQUIRE(host_units_after(32, 20, oc) == 2);
    oc.offload_prompt_only = false;
    REQUIRE(host_units_after(32, 20, oc) == 3);
}

TEST_CASE("Offload: Mamba all mode stores a state snapshot at every block of the chunk", "[engine][offload]") {
    // One Mamba group. A 72-token prompt prefilled in one chunk (4 full blocks + 8 tokens), 1 output token. `all`
    // mode: every block boundary has a state block, so blocks 0–3 and their 4 snapshots are stored: 8 units.
    // Otherwise (align rule): a snapshot only where the chunk ended on the grid — 72 is not — so 4 units.
    cache::CpuOffloadConfig oc;
    oc.num_mamba_groups = 1;
    oc.state_at_every_block = true;
    REQUIRE(host_units_after(72, 1, oc) == 8);
    oc.state_at_every_block = false;
    REQUIRE(host_units_after(72, 1, oc) == 4);
}

namespace {

// A connector that finds nothing and records each store the scheduler asks for.
class StoreRecorder final : public cache::KvConnector {
public:
    struct Store {
        std::int64_t first, end, snapshot_first, snapshot_end;
        bool operator==(const Store&) const = default;
    };
    explicit StoreRecorder(const cache::CpuOffloadConfig& rules) : rules_(rules) {}
    std::int64_t lookup(std::span<const core::BlockHash>, std::int64_t, std::int64_t) override { return 0; }
    core::Duration start_load(std::int64_t, core::SimTime) override { return core::Duration::from_ns(0); }
    void record(std::int64_t, std::int64_t, std::int64_t) override {}
    void store(std::span<const core::BlockHash>, std::int64_t first, std::int64_t end, std::int64_t snapshot_first,
               std::int64_t snapshot_end, std::int64_t) override {
        stores.push_back(Store{first, end, snapshot_first, snapshot_end});
    }
    void on_step_end() override {}
    const cache::ExternalCacheStats& stats() const override { return stats_; }
    const cache::CpuOffloadConfig& config() const override { return rules_; }

    std::vector<Store> stores;

private:
    cache::CpuOffloadConfig rules_;
    cache::ExternalCacheStats stats_;
};

}  // namespace

TEST_CASE("Offload: steps that fill no block past those stored and end off a boundary store nothing",
          "[engine][offload]") {
    // B = 16, a 40-token prompt in chunks of 24 then 16, 10 output tokens, the default (align) snapshot rule. Step 1
    // computes 24 tokens: block 0 is full -> store [0, 1), no snapshot (24 is off the grid). Step 2 computes 40:
    // block 1 -> [1, 2). Decode steps 3..11 compute 41..49 tokens: 41..47 lie inside block 2 (stored 2 blocks, so
    // between 32 and 48), nothing; 48 (step 10) fills block 2 and ends on the grid -> [2, 3) with snapshot [2, 3);
    // 49 nothing. Three stores in all.
    cache::CpuOffloadConfig oc;
    oc.block_size_tokens = 16;
    StoreRecorder recorder(oc);
    cache::KvCacheManager kv(full_attention_config(40));
    Scheduler s(scheduler_config(24), kv, &recorder);
    Request r(core::RequestId{1}, core::TokenContent{{core::ContentId{5}, 40}}, 10, core::ContentId{77},
              core::SimTime::zero(), 16);
    s.add_request(&r);
    int steps = 0;
    for (; steps < 100 && r.status != RequestStatus::kFinished; ++steps) {
        const StepPlan& plan = s.schedule(core::SimTime::from_s(0.01 * steps));
        for (const auto& sr : plan.scheduled) {
            if (sr.samples_token && sr.request->status == RequestStatus::kRunning) {
                sr.request->append_output_token();
                if (sr.request->is_finished()) {
                    s.finish_request(sr.request);
                }
            }
        }
    }
    CHECK(steps == 11);
    using Store = StoreRecorder::Store;
    CHECK(recorder.stores == std::vector<Store>{{0, 1, -1, -1}, {1, 2, -1, -1}, {2, 3, 2, 3}});
}
