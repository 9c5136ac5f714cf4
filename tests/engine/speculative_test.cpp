// Speculative decoding (sim/engine/speculative.h, docs/SPECULATIVE-DECODING.md): vLLM's --speculative-config read
// and checked, the acceptance model (per-position rates, a mean length, sampling), the scheduler's 1 + k tokens and
// lookahead slots (Scheduler.schedule → allocate_slots(num_lookahead_tokens)), the verification's batch shape and
// the drafter's cost, and a request's steps through a Replica. Every figure below is worked by hand.
#include "sim/engine/speculative.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "sim/engine/replica.h"
#include "sim/metrics/metrics.h"
#include "tests/catch.h"
#include "tests/config_error.h"
#include "tests/engine/engine_test_util.h"

using namespace servesim;
using namespace servesim::engine;
using namespace servesim::engine::testing;

namespace {

// The ConfigError message `fn` throws ("" when it throws none; tests/config_error.h).
template <typename Fn>
std::string error_of(Fn&& fn) {
    return servesim::testing::config_error_of(fn);
}

core::SimTime ms(double v) {
    return core::SimTime::from_ns(static_cast<std::int64_t>(v * 1e6));
}

SpeculativeConfig config_with(SpeculativeMethod method, std::vector<double> rates) {
    SpeculativeConfig c;
    c.method = method;
    c.num_speculative_tokens = static_cast<int>(rates.size());
    c.acceptance_per_position = std::move(rates);
    return c;
}

SchedulerConfig spec_scheduler(const SpeculativeConfig& c, std::int64_t budget = 8192) {
    SchedulerConfig s = scheduler_config(budget);
    s.num_spec_tokens = c.num_speculative_tokens;
    s.num_lookahead_tokens = c.num_lookahead_tokens();
    return s;
}

// What Replica::emit_tokens does for one request's entry, with `accepted` drafts accepted (no sampler).
void emit(const ScheduledRequest& s, int accepted) {
    Request* r = s.request;
    const std::int64_t rejected = s.num_draft_tokens - accepted;
    r->num_computed_tokens -= rejected;
    r->num_output_placeholders -= rejected;
    for (int i = 0; i < accepted + 1; ++i) {
        r->append_output_token();
    }
}

// A cost model of round coefficients: gemm 0.01 ms per token, decode attention 0.001 ms per context token, lm_head
// 0.1 ms per logit row, overhead 1 ms per step.
class RoundCost : public CostModel {
  public:
    [[nodiscard]] StepCost step_cost(const BatchShape& s) const override {
        StepCost c;
        c.gemm_ms = 0.01 * static_cast<double>(s.num_tokens);
        c.attn_decode_ms = 0.001 * static_cast<double>(s.decode_context_tokens);
        c.lm_head_ms = 0.1 * static_cast<double>(s.num_sampled_seqs);
        c.overhead_ms = 1.0;
        return c;
    }

    [[nodiscard]] std::string describe() const override { return "round"; }
};

}  // namespace

TEST_CASE("--speculative-config: vLLM's keys read, bad ones refused by name", "[engine][speculative]") {
    const SpeculativeConfig e = parse_speculative_config(
        R"({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3})");
    CHECK(e.method == SpeculativeMethod::kEagle3);
    CHECK(e.num_speculative_tokens == 3);
    CHECK(e.draft_model == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B");
    CHECK(e.num_lookahead_tokens() == 3);  // use_eagle: lookahead = k

    const SpeculativeConfig m = parse_speculative_config(R"({"method": "deepseek_mtp", "num_speculative_tokens": 2})");
    CHECK(m.method == SpeculativeMethod::kMtp);
    CHECK(m.num_lookahead_tokens() == 2);

    const SpeculativeConfig n = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4})");
    CHECK(n.num_lookahead_tokens() == 0);  // ngram allocates no lookahead slots
    CHECK(n.prompt_lookup_min == 5);       // both bounds absent: 5
    CHECK(n.prompt_lookup_max == 5);
    const SpeculativeConfig n2 =
        parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})");
    CHECK(n2.prompt_lookup_min == 3);  // the missing bound takes the given one

    CHECK(error_of([&] {
              (void)parse_speculative_config(R"({"method": "eagle3", "num_speculative_tokens": 3})");
          }).find("key 'model': required with method eagle3") != std::string::npos);
    CHECK(error_of([&] {
              (void)parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 3, "x": 1})");
          }).find("key 'x': not modelled") != std::string::npos);
    // draft_model (DraftModelProposer): the draft checkpoint is required; draft_tensor_parallel_size is read.
    const SpeculativeConfig d = parse_speculative_config(
        R"({"method": "draft_model", "model": "Llama-3.1-8B", "num_speculative_tokens": 4,
            "draft_tensor_parallel_size": 4})");
    CHECK(d.method == SpeculativeMethod::kDraftModel);
    CHECK(d.draft_model == "Llama-3.1-8B");
    CHECK(d.draft_tensor_parallel_size == 4);
    CHECK(d.num_lookahead_tokens() == 4);  // uses_draft_model: lookahead = k
    CHECK_FALSE(d.uses_head());
    CHECK(error_of([&] {
              (void)parse_speculative_config(R"({"method": "draft_model", "num_speculative_tokens": 3})");
          }).find("key 'model': required with method draft_model") != std::string::npos);
    CHECK(error_of([&] {
              (void)parse_speculative_config(
                  R"({"method": "ngram", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})");
          }).find("key 'draft_tensor_parallel_size': not with method ngram") != std::string::npos);
    CHECK(error_of([&] {
              (void)parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 0})");
          }).find("out of range") != std::string::npos);
    CHECK(error_of([&] {
              (void)parse_speculative_config(R"({"method": "mtp"})");
          }).find("key 'num_speculative_tokens': required") != std::string::npos);
    CHECK(error_of([&] { (void)parse_speculative_config("{method: mtp}"); }).find("not JSON") != std::string::npos);
}

TEST_CASE("Acceptance inputs: per-position rates checked, a mean length spread at a constant ratio",
          "[engine][speculative]") {
    SpeculativeConfig c = config_with(SpeculativeMethod::kMtp, {0, 0, 0});
    // Mean acceptance length 2 with k = 3: p + p² + p³ = 1, whose root is p = 0.543689 (p³ + p² + p − 1 = 0).
    resolve_acceptance(c, {}, 2.0, "engine.");
    REQUIRE(c.acceptance_per_position.size() == 3);
    CHECK(close(c.acceptance_per_position[0], 0.543689, 1e-6));
    CHECK(close(c.acceptance_per_position[1], 0.543689 * 0.543689, 1e-6));
    CHECK(close(c.mean_accepted_tokens(), 1.0, 1e-9));

    resolve_acceptance(c, {0.8, 0.6, 0.4}, 0, "engine.");
    CHECK(close(c.mean_accepted_tokens(), 1.8));
    CHECK(error_of([&] {
              (void)resolve_acceptance(c, {0.8, 0.6}, 0, "engine.");
          }).find("2 rates for num_speculative_tokens 3") != std::string::npos);
    CHECK(error_of([&] {
              (void)resolve_acceptance(c, {0.5, 0.6, 0.4}, 0, "engine.");
          }).find("never grows") != std::string::npos);
    CHECK(error_of([&] { (void)resolve_acceptance(c, {}, 4.5, "engine."); }).find("allowed: 1 to 4") !=
          std::string::npos);

    // The default for mtp with k = 10: PR #48892's 8 positions, then ×(0.2365 / 0.2722) per position.
    resolve_acceptance(c, {}, 0, "engine.");
    CHECK(close(c.acceptance_per_position[0], 0.7617));
    SpeculativeConfig ten = config_with(SpeculativeMethod::kMtp, std::vector<double>(10, 0));
    resolve_acceptance(ten, {}, 0, "engine.");
    CHECK(close(ten.acceptance_per_position[8], 0.2365 * 0.2365 / 0.2722));
    // eagle: PR #16035's mean length 1.89 at k = 2: p + p² = 0.89, p = (−1 + √4.56) / 2 = 0.567708.
    SpeculativeConfig eagle = config_with(SpeculativeMethod::kEagle, {0, 0});
    resolve_acceptance(eagle, {}, 0, "engine.");
    CHECK(close(eagle.acceptance_per_position[0], (-1 + std::sqrt(4.56)) / 2, 1e-6));
}

TEST_CASE("Acceptance sampling: means and per-position shares match the rates; same seed, same draws",
          "[engine][speculative]") {
    // Rates 0.8, 0.6, 0.4: E[accepted] = 1.8 of 3. Over 200,000 draws the mean's standard error is under 0.003 (the
    // count's variance is at most 9/4), so 0.015 is five of them.
    AcceptanceSampler sampler({0.8, 0.6, 0.4}, 7, 0);
    SpeculativeStats stats;
    for (int i = 0; i < 200'000; ++i) {
        stats.observe(3, sampler.sample(3));
    }
    CHECK(close(stats.mean_acceptance_length(), 2.8, 0.015));
    CHECK(close(stats.acceptance_rate(), 0.6, 0.005));
    const std::vector<double> per_pos = stats.acceptance_per_position();
    CHECK(close(per_pos[0], 0.8, 0.005));
    CHECK(close(per_pos[1], 0.6, 0.005));
    CHECK(close(per_pos[2], 0.4, 0.005));
    // Fewer drafts scheduled (the budget cut them): at most that many accepted.
    for (int i = 0; i < 1000; ++i) {
        CHECK(sampler.sample(1) <= 1);
    }
    AcceptanceSampler a({0.8, 0.6, 0.4}, 7, 3);
    AcceptanceSampler b({0.8, 0.6, 0.4}, 7, 3);
    AcceptanceSampler other_replica({0.8, 0.6, 0.4}, 7, 4);
    int same = 0;
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
        const int x = a.sample(3);
        same += x == b.sample(3) ? 1 : 0;
        differ += x != other_replica.sample(3) ? 1 : 0;
    }
    CHECK(same == 1000);
    CHECK(differ > 0);
}

TEST_CASE("Scheduler: a decode verifies 1 + k tokens and holds k lookahead slots past them (EAGLE), none for ngram",
          "[engine][speculative]") {
    // Block 16, prompt 26, k = 3. Step 1 prefills 26 tokens (a fresh prefill gets no lookahead): ⌈26/16⌉ = 2 blocks.
    // Its token makes 27; step 2 schedules the last token + 3 drafts = 4 tokens after 26 computed, slots to 30:
    // 2 blocks for ngram, but 30 + 3 lookahead = 33 slots = ⌈33/16⌉ = 3 blocks for EAGLE.
    // A draft model (uses_draft_model) reserves the same k lookahead slots as EAGLE.
    for (const auto method : {SpeculativeMethod::kEagle3, SpeculativeMethod::kDraftModel, SpeculativeMethod::kNgram}) {
        const SpeculativeConfig c = config_with(method, {0.8, 0.6, 0.4});
        Harness h(spec_scheduler(c), full_attention_config(10));
        Request* r = h.add(1, {{content(1), 26}}, 100);
        StepPlan p1 = h.scheduler().schedule();
        REQUIRE(tokens_of(p1, r) == 26);
        CHECK(p1.scheduled[0].num_draft_tokens == 0);
        CHECK(h.kv().num_blocks_held(r->id) == 2);
        emit(p1.scheduled[0], 0);
        CHECK(r->num_tokens() == 27);
        CHECK(r->num_spec_tokens == 3);  // drafted after the prefill's forward

        StepPlan p2 = h.scheduler().schedule();
        REQUIRE(p2.scheduled.size() == 1);
        CHECK(p2.scheduled[0].num_new_tokens == 4);
        CHECK(p2.scheduled[0].num_draft_tokens == 3);
        CHECK(p2.scheduled[0].samples_token);
        CHECK(p2.num_scheduled_tokens == 4);  // the budget counts the drafts
        CHECK(h.kv().num_blocks_held(r->id) == (method == SpeculativeMethod::kNgram ? 2 : 3));
        h.kv().check_invariants();

        // One draft accepted: 2 rejected leave the computed count (30 → 28), 2 tokens join (27 → 29): 28 = 29 − 1,
        // a decode again, whose next step schedules 1 + 3 tokens after 28.
        emit(p2.scheduled[0], 1);
        CHECK(r->num_tokens() == 29);
        CHECK(r->num_computed_tokens == 28);
        CHECK(r->num_output_placeholders == 0);
        StepPlan p3 = h.scheduler().schedule();
        CHECK(p3.scheduled[0].num_new_tokens == 4);
        CHECK(p3.scheduled[0].num_computed_before == 28);
    }
}

TEST_CASE("Scheduler: the token budget cuts the drafts first", "[engine][speculative]") {
    // Budget 3 tokens, k = 3: the decode gets its last token and 2 drafts (vLLM trims spec_token_ids).
    const SpeculativeConfig c = config_with(SpeculativeMethod::kMtp, {0.8, 0.6, 0.4});
    Harness h(spec_scheduler(c, 3), full_attention_config(10));
    Request* r = h.add(1, {{content(1), 3}}, 100);
    StepPlan p1 = h.scheduler().schedule();
    REQUIRE(tokens_of(p1, r) == 3);
    emit(p1.scheduled[0], 0);
    StepPlan p2 = h.scheduler().schedule();
    CHECK(p2.scheduled[0].num_new_tokens == 3);
    CHECK(p2.scheduled[0].num_draft_tokens == 2);
}

TEST_CASE("Batch shape and step cost of a verification step, and the drafter's cost", "[engine][speculative]") {
    // The step of the lookahead test: computed 26, 4 tokens (3 drafts).
    const SpeculativeConfig c = config_with(SpeculativeMethod::kEagle3, {0.8, 0.6, 0.4});
    Harness h(spec_scheduler(c), full_attention_config(10));
    Request* r = h.add(1, {{content(1), 26}}, 100);
    StepPlan p1 = h.scheduler().schedule();
    emit(p1.scheduled[0], 0);
    const StepPlan p2 = h.scheduler().schedule();
    (void)r;
    const BatchShape s = Replica::batch_shape(p2, 16, false);
    CHECK(s.num_tokens == 4);       // GEMM rows: 1 + 3
    CHECK(s.num_decode_seqs == 1);  // a decode whose 4 queries share one read of the context
    CHECK(s.num_prefill_seqs == 0);
    CHECK(s.decode_context_tokens == 30);  // 26 + 4 keys for the last query
    CHECK(s.num_sampled_seqs == 4);        // logits at every verified position
    CHECK(s.num_spec_seqs == 1);
    CHECK(s.num_draft_tokens == 3);
    CHECK(s.spec_context_tokens == 30);

    // RoundCost for the target: gemm 0.04, attention 0.030, lm_head 0.4, overhead 1 → 1.47 ms.
    // Drafter, a 1-layer head of a 4-layer target (fraction 1/4), k = 3:
    //   pass 1 (the step's tokens): 1/4 × (0.04 + 0.030) + lm_head of 1 row 0.1 = 0.1175
    //   pass 2 (1 token at context 31): 1/4 × (0.01 + 0.031) + 0.1 = 0.11025
    //   pass 3 (context 32): 1/4 × (0.01 + 0.032) + 0.1 = 0.1105          → 0.33825 ms
    SpeculativeCostModel eagle(std::make_unique<RoundCost>(), c, 4);
    const StepCost cost = eagle.step_cost(s);
    CHECK(close(cost.spec_draft_ms, 0.33825));
    CHECK(close(cost.total_ms(), 1.47 + 0.33825));
    // ngram: 3.25 ns per context token on the host: 30 × 3.25 ns = 97.5 ns.
    SpeculativeConfig ng = config_with(SpeculativeMethod::kNgram, {0.8, 0.6, 0.4});
    ng.ngram_ns_per_context_token = kNgramLookupNsPerContextToken;
    SpeculativeCostModel ngram(std::make_unique<RoundCost>(), ng, 4);
    CHECK(close(ngram.step_cost(s).spec_draft_ms, 97.5e-6, 1e-12));
    // A step without drafts costs the target alone.
    BatchShape plain;
    plain.num_tokens = 1;
    plain.num_decode_seqs = 1;
    plain.num_seqs = 1;
    plain.decode_context_tokens = 10;
    plain.num_sampled_seqs = 1;
    CHECK(eagle.step_cost(plain).spec_draft_ms == 0);
}

TEST_CASE("draft_model: the draft checkpoint's own forwards, priced by its cost model", "[engine][speculative]") {
    // The verification step above (4 tokens, decode context 30, 4 logit rows, 1 speculating request, 3 drafts),
    // the target on RoundCost (1.47 ms) and the draft model on SmallCost: gemm 0.002 ms per token, decode attention
    // 0.0001 ms per context token, lm_head 0.05 ms per row, overhead 0.5 ms per step (not charged to the drafter).
    //   forward 1: the 4 tokens + the sampled token appended = 5 tokens, 31 keys, 1 row:
    //              0.010 + 0.0031 + 0.05 = 0.0631
    //   forward 2: 1 token at context 31: 0.002 + 0.0031 + 0.05 = 0.0551
    //   forward 3: 1 token at context 32: 0.002 + 0.0032 + 0.05 = 0.0552                → 0.1734 ms
    class SmallCost : public CostModel {
      public:
        [[nodiscard]] StepCost step_cost(const BatchShape& s) const override {
            StepCost c;
            c.gemm_ms = 0.002 * static_cast<double>(s.num_tokens);
            c.attn_decode_ms = 0.0001 * static_cast<double>(s.decode_context_tokens);
            c.lm_head_ms = 0.05 * static_cast<double>(s.num_sampled_seqs);
            c.overhead_ms = 0.5;
            return c;
        }
        [[nodiscard]] std::string describe() const override { return "small"; }
    };
    const SpeculativeConfig c = config_with(SpeculativeMethod::kDraftModel, {0.8, 0.6, 0.4});
    Harness h(spec_scheduler(c), full_attention_config(10));
    h.add(1, {{content(1), 26}}, 100);
    StepPlan p1 = h.scheduler().schedule();
    emit(p1.scheduled[0], 0);
    const BatchShape s = Replica::batch_shape(h.scheduler().schedule(), 16, false);
    REQUIRE(s.num_tokens == 4);
    REQUIRE(s.spec_context_tokens == 30);
    SpeculativeCostModel draft(std::make_unique<RoundCost>(), c, 4, std::make_unique<SmallCost>());
    const StepCost cost = draft.step_cost(s);
    CHECK(close(cost.spec_draft_ms, 0.1734));
    CHECK(close(cost.total_ms(), 1.47 + 0.1734));
    CHECK(draft.describe().find("draft_model drafter") != std::string::npos);
}

TEST_CASE("Replica: a request's steps for its output length, ITL per chunk, TPOT, acceptance counters",
          "[engine][speculative]") {
    // Prompt 20, 10 output tokens, k = 3, 4 ms per step (FixedCost), synchronous steps.
    //   every draft accepted: prefill → 1 token; then 4 tokens a step: 5, 9, then 10 (3 accepted, 1 kept):
    //     4 steps; 3 verifications of 3 drafts, 9 accepted. Chunks at 4, 8, 12, 16 ms: TTFT 4, ITL 4 × 3,
    //     TPOT (16 − 4) / 9 = 1.3333 ms.
    //   none accepted: 1 token a step: 10 steps, 9 verifications, 27 drafts, 0 accepted; TPOT 4.
    struct Case {
        std::vector<double> rates;
        std::int64_t steps;
        std::int64_t drafts;
        std::int64_t accepted;
        double tpot_ms;
    };

    for (const Case& k : {Case{{1.0, 1.0, 1.0}, 4, 3, 9, 12.0 / 9.0}, Case{{0.0, 0.0, 0.0}, 10, 9, 0, 4.0}}) {
        FixedCost cost(4);
        metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
        ReplicaConfig rc;
        const SpeculativeConfig c = config_with(SpeculativeMethod::kMtp, k.rates);
        rc.scheduler = spec_scheduler(c);
        rc.kv_cache = full_attention_config(64);
        rc.check_invariants = true;
        rc.speculative = c;
        Replica replica(rc, cost, m);
        IncomingRequest in;
        in.id = core::RequestId{1};
        in.prompt = {{content(1), 20}};
        in.max_output_tokens = 10;
        in.answer_content = content(901);
        REQUIRE(replica.add_request(in));
        core::SimTime now = ms(0);
        while (auto end = replica.try_start_step(now)) {
            now = *end;
            (void)replica.end_step(now);
        }
        CHECK(replica.num_steps() == k.steps);
        CHECK(replica.num_requests() == 0);
        const SpeculativeStats& st = replica.speculative_stats();
        CHECK(st.num_drafts == k.drafts);
        CHECK(st.num_draft_tokens == 3 * k.drafts);
        CHECK(st.num_accepted_tokens == k.accepted);
        const metrics::Summary s = m.summarize({}, 0, now);
        CHECK(close(s.mean_output_tokens, 10));
        // One gap per chunk, as vllm bench serve counts them.
        CHECK(s.itl_ms.count == static_cast<std::size_t>(k.steps - 1));
        CHECK(close(s.itl_ms.mean, 4));
        CHECK(close(s.tpot_ms.mean, k.tpot_ms));
        CHECK(close(s.ttft_ms.mean, 4));
    }
}

TEST_CASE("Replica, async scheduling: a request its drafts finish while the next step holds it",
          "[engine][speculative]") {
    // Every draft accepted, k = 3, 11 outputs, 4 ms steps. Step 1 prefills R1 (token 1); steps 2, 3 and 4 each bring
    // 4 tokens (5, 9, then 11 of 13). Step 5 is scheduled when step 4 starts, with R1 at 9 tokens: 9 + 1 < 11, so
    // one more token would not surely finish it and step 5 holds R1, which step 4's chunk finishes. vLLM runs the held step and
    // drops R1's output there. R2 arrives the moment R1 finishes, before the held step runs: R1's Request must not be
    // reused for R2 while that step holds it (R2 would get R1's drafts and never a first token). R2: 11 tokens, a
    // positive TTFT of at most 4 steps (16 ms).
    FixedCost cost(4);
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true);
    ReplicaConfig rc;
    const SpeculativeConfig c = config_with(SpeculativeMethod::kMtp, {1.0, 1.0, 1.0});
    rc.scheduler = spec_scheduler(c);
    rc.scheduler.async_scheduling = true;
    rc.async_scheduling = true;
    rc.kv_cache = full_attention_config(64);
    rc.check_invariants = true;
    rc.speculative = c;
    Replica replica(rc, cost, m);
    const auto send = [&](std::uint64_t id, core::SimTime at) {
        IncomingRequest in;
        in.id = core::RequestId{id};
        in.arrival = at;
        in.prompt = {{content(id), 20}};
        in.max_output_tokens = 11;
        in.answer_content = content(900 + id);
        REQUIRE(replica.add_request(in));
    };
    send(1, ms(0));
    core::SimTime now = ms(0);
    bool sent_second = false;
    while (auto end = replica.try_start_step(now)) {
        now = *end;
        const std::vector<core::RequestId> finished = replica.end_step(now);
        if (!sent_second && !finished.empty()) {
            CHECK(replica.step_in_flight() == false);
            send(2, now);
            sent_second = true;
        }
    }
    REQUIRE(sent_second);
    const metrics::Summary s = m.summarize({}, 0, now);
    CHECK(s.num_requests_finished == 2);
    CHECK(close(s.mean_output_tokens, 11));
    CHECK(s.ttft_ms.min > 0);
    CHECK(s.ttft_ms.max <= 16);
}
