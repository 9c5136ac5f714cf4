// Tests of sim/engine/decode_cohort.*: when a steady decoder must leave the cohort (worked by hand), what a member's
// counts and token times are when it leaves, and whole runs that give the same outputs, request by request and
// sample by sample, with the cohort and without it (docs/DECODE-COHORT.md).
#include "sim/engine/decode_cohort.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"
#include "workloads/workload.h"

namespace servesim::engine {
namespace {

using testing::content;

core::SimTime at_ms(double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(ms * 1e6)); }

// A decoding request: 100 prompt tokens, 5 answer tokens back, a 6th in flight (async scheduling), so 105 computed;
// 50 answer tokens at most. Block size 16: 6 full blocks (96 tokens) cached, 7 blocks (112 slots) held.
Request decoding_request() {
    Request r(core::RequestId{7}, {{content(1), 100}}, 50, content(2), core::SimTime::zero(), 16);
    for (int i = 0; i < 5; ++i) {
        r.append_output_token();
    }
    r.num_computed_tokens = 105;
    r.num_output_placeholders = 1;
    r.kv_summary.slot_tokens = 112;
    r.kv_summary.uncached_from_tokens = 112;  // (6 cached blocks + 1) · 16
    return r;
}

TEST_CASE("DecodeCohort::leave_seq: the first plan whose step is not plain", "[engine][cohort]") {
    Request r = decoding_request();
    REQUIRE(r.next_hash_at_tokens == 112);  // the 7th block ends at token 112
    // Joining at plan 10 (c0 = 105, o0 = 5, p0 = 1), plan 10 + k's token brings the request to 107 + k tokens:
    //   last token:        o0 + p0 + k + 1 = 50       → k = 43
    //   completes a block: 107 + k = 112              → k = 5
    //   a new slot:        c0 + k + 1 > 112           → k = 7
    //   a block to cache:  c0 + k + 1 − p0 ≥ 112      → k = 7
    //   max_model_len 4096: c0 + k ≥ 4095            → k = 3990
    // so it leaves at the schedule of plan 15, whose token is the one that completes the block.
    CHECK(DecodeCohort::leave_seq(r, 10, 4096) == 15);
    // 8 answer tokens at most: k = 8 − 5 − 1 − 1 = 1, plan 11's token is the last (too short a stay to join).
    r.max_output_tokens = 8;
    CHECK(DecodeCohort::leave_seq(r, 10, 4096) == 11);
    // max_model_len 108: c0 + k ≥ 107 at k = 2.
    r.max_output_tokens = 50;
    CHECK(DecodeCohort::leave_seq(r, 10, 108) == 12);
    // Without a running summary the block lists must be asked: no stay.
    r.kv_summary = cache::KvRunningSummary{};
    CHECK(DecodeCohort::leave_seq(r, 10, 4096) == 10);
}

TEST_CASE("DecodeCohort::write_back: a member's counts and token times after the plans since it joined",
          "[engine][cohort]") {
    // Async scheduling: plan 10 is scheduled while plan 9 runs, and r (which sampled in plan 9) joins there. Plan 9
    // ends at 110 ms and appends r's token itself (r had an entry in it); plans 10, 11 and 12 end at 118, 127 and
    // 133 ms with r a member (gaps 8, 9, 6); plan 14 is scheduled while plan 13 runs, and r leaves there.
    DecodeCohort cohort;
    Request r = decoding_request();
    r.last_token = at_ms(100);
    r.max_token_gap = core::Duration::from_ms(7);
    cohort.ended(8, at_ms(100), false);
    cohort.launched(9);
    REQUIRE(cohort.sampled_in_previous_plan(r));  // its placeholder is plan 9's token
    cohort.join(r, 10, 15);
    CHECK(cohort.size() == 1);
    CHECK(cohort.num_measured() == 1);
    r.append_output_token();  // plan 9's end, for r's own entry
    r.last_token = at_ms(110);
    cohort.ended(9, at_ms(110), false);
    // Plan 10: 105 computed before r's token, 106 with it.
    CHECK(cohort.decode_context_tokens(10) == 106);
    const double ends_ms[] = {118, 127, 133};
    for (int seq = 10; seq <= 12; ++seq) {
        cohort.launched(seq);
        cohort.ended(seq, at_ms(ends_ms[seq - 10]), true);
    }
    cohort.launched(13);
    CHECK(cohort.decode_context_tokens(13) == 109);  // 105 + 3 + 1
    cohort.write_back(r, 14);
    // Scheduled in plans 10–13 (4), of which 10–12 ended (3); plan 13 owes it a token.
    CHECK(r.num_computed_tokens == 109);
    CHECK(r.num_output_tokens == 9);
    CHECK(r.num_output_placeholders == 1);
    CHECK(r.num_computed_tokens + 1 == r.num_tokens() + r.num_output_placeholders);  // still a steady decode
    CHECK(r.last_token == at_ms(133));
    CHECK(r.max_token_gap == core::Duration::from_ms(9));
    CHECK(r.cohort_key == 0);
    CHECK(cohort.size() == 0);
    CHECK(cohort.num_measured() == 0);
    REQUIRE(cohort.late_leavers().size() == 1);
    CHECK(cohort.late_leavers().front() == &r);
}

TEST_CASE("DecodeCohort::write_back: without a plan in flight every plan since the join has ended",
          "[engine][cohort]") {
    // Synchronous scheduling: plan 10 is scheduled after plan 9 ended at 110 ms (r sampled in it, so its last token
    // is 110 ms); plans 10 and 11 end at 120 and 125 ms; r leaves at plan 12's schedule.
    DecodeCohort cohort;
    Request r = decoding_request();
    r.append_output_token();  // plan 9's token: 6 back, none in flight
    r.num_output_placeholders = 0;
    r.last_token = at_ms(110);
    cohort.ended(9, at_ms(110), false);
    REQUIRE(cohort.sampled_in_previous_plan(r));
    cohort.join(r, 10, 14);
    cohort.launched(10);
    cohort.ended(10, at_ms(120), true);
    cohort.launched(11);
    cohort.ended(11, at_ms(125), true);
    cohort.write_back(r, 12);
    CHECK(r.num_computed_tokens == 107);
    CHECK(r.num_output_tokens == 8);
    CHECK(r.num_output_placeholders == 0);
    CHECK(r.last_token == at_ms(125));
    CHECK(r.max_token_gap == core::Duration::from_ms(10));
    CHECK(cohort.late_leavers().empty());
}

// Whole runs with the cohort and without it: every request record and every latency sample must be the same.
// Sketched percentiles (the default) sum value × count per run of equal gaps, so their means also pin where the runs
// break; the pooled moments (kept with the records) pin the samples' order.
struct Run {
    cluster::SimulationResult result;
    std::int64_t num_cohort_tokens = 0;
};

Run run(const cluster::SimulationConfig& base, bool cohort, const std::string& workload_yaml, std::uint64_t seed) {
    cluster::SimulationConfig c = base;
    c.replica.decode_cohort = cohort;
    c.keep_request_records = true;
    const YAML::Node node = YAML::Load(workload_yaml);
    auto workload = workloads::make_workload(YamlMap(node, "test", "workload"), seed);
    testing::FixedCost cost(2, 0.013);
    cluster::Simulation sim(c, cost, *workload, cluster::make_router("round_robin"));
    Run r{sim.run()};
    r.num_cohort_tokens = sim.num_cohort_tokens();
    return r;
}

void check_same(const metrics::Summary& a, const metrics::Summary& b) {
    REQUIRE(a.requests.size() == b.requests.size());
    for (std::size_t i = 0; i < a.requests.size(); ++i) {
        INFO("record " << i);
        const metrics::RequestRecord& x = a.requests[i];
        const metrics::RequestRecord& y = b.requests[i];
        CHECK(x.arrival_s == y.arrival_s);
        CHECK(x.queue_ms == y.queue_ms);
        CHECK(x.ttft_ms == y.ttft_ms);
        CHECK(x.e2e_ms == y.e2e_ms);
        CHECK(x.itl_max_ms == y.itl_max_ms);
        CHECK(x.cached_prompt_tokens == y.cached_prompt_tokens);
        CHECK(x.output_tokens == y.output_tokens);
        CHECK(x.num_preemptions == y.num_preemptions);
    }
    for (const auto& [p, q] : {std::pair{a.itl_ms, b.itl_ms}, std::pair{a.tpot_ms, b.tpot_ms}}) {
        CHECK(p.count == q.count);
        CHECK(p.mean == q.mean);
        CHECK(p.p50 == q.p50);
        CHECK(p.p99 == q.p99);
        CHECK(p.max == q.max);
    }
    CHECK(a.num_steps == b.num_steps);
    CHECK(a.preemptions == b.preemptions);
    CHECK(a.prefix_cache_hits == b.prefix_cache_hits);
    CHECK(a.kv_usage_mean == b.kv_usage_mean);
    CHECK(a.mean_batch_tokens == b.mean_batch_tokens);
    CHECK(a.queue_peak == b.queue_peak);
    // The pooled ITL moments are a running (order-dependent) sum: the same samples in the same order.
    CHECK(a.itl_moments.count == b.itl_moments.count);
    CHECK(a.itl_moments.mean == b.itl_moments.mean);
    CHECK(a.itl_moments.m2 == b.itl_moments.m2);
}

TEST_CASE("Decode cohort: whole runs give the same outputs with it and without it", "[engine][cohort]") {
    // Tenants' dialogues (prefix hits, turns that grow) and a synthetic mix of long and short answers. The settings
    // reach every way out of the cohort: block boundaries and last tokens (all), a pool small enough to preempt, a
    // token budget smaller than a prompt (members not reached leave), max_model_len close to the longest requests,
    // a warm-up (members whose samples do not count), async scheduling on and off.
    const std::string tenants = R"(
type: tenants
tenants: 6
system_prompt_tokens: 120
turns_per_dialogue: 3
user_tokens: {dist: uniform, min: 10, max: 60}
answer_tokens: {dist: uniform, min: 5, max: 120}
arrival: poisson
rate: 60
num_requests: 400
)";
    const std::string synthetic = R"(
type: synthetic
arrival: poisson
rate: 150
prompt_tokens: {dist: uniform, min: 1, max: 300}
output_tokens: {dist: uniform, min: 1, max: 200}
num_requests: 400
)";
    struct Case {
        std::string name;
        std::int64_t blocks;
        SchedulerConfig scheduler;
        double warmup_ms;
    };
    const std::vector<Case> cases = {
        {"roomy", 600, testing::scheduler_config(8192, 16, 256, 4000), 0},
        {"tiny pool (preemptions)", 48, testing::scheduler_config(256, 16, 64, 500), 0},
        {"small budget", 600, testing::scheduler_config(48, 16, 256, 4000), 0},
        {"max_model_len near the longest", 600, testing::scheduler_config(8192, 16, 256, 520), 0},
        {"warm-up", 600, testing::scheduler_config(8192, 16, 256, 4000), 300},
    };
    std::int64_t cohort_tokens = 0;
    std::int64_t preemptions = 0;
    for (const Case& c : cases) {
        for (const bool async : {false, true}) {
            for (const auto* yaml : {&tenants, &synthetic}) {
                for (const std::uint64_t seed : {1, 2, 3}) {
                    INFO(c.name << (async ? ", async" : ", sync") << (yaml == &tenants ? ", tenants" : ", synthetic")
                                << ", seed " << seed);
                    cluster::SimulationConfig sc;
                    sc.replica.kv_cache = testing::full_attention_config(c.blocks);
                    sc.replica.scheduler = c.scheduler;
                    sc.replica.scheduler.async_scheduling = async;
                    sc.replica.async_scheduling = async;
                    sc.replica.check_invariants = true;
                    sc.warmup_end = at_ms(c.warmup_ms);
                    sc.exact_percentiles = seed == 1;
                    const Run off = run(sc, false, *yaml, seed);
                    const Run on = run(sc, true, *yaml, seed);
                    CHECK(off.num_cohort_tokens == 0);
                    check_same(off.result.summary, on.result.summary);
                    cohort_tokens += on.num_cohort_tokens;
                    preemptions += on.result.summary.preemptions;
                }
            }
        }
    }
    // The runs exercised the cohort and its ways out.
    CHECK(cohort_tokens > 10'000);
    CHECK(preemptions > 0);
}

}  // namespace
}  // namespace servesim::engine
