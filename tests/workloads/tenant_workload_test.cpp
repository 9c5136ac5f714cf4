// Tests of workloads/tenant_workload.*: dialogue prompts contain the previous answers as runs, turns wait for the
// previous answer (+ think time), tenants have distinct system prompts that restarted dialogues reuse, per-tenant
// Poisson streams add up to the configured rate, and one tenant's draws do not depend on how many tenants exist.
#include "workloads/tenant_workload.h"

#include <cmath>
#include <map>
#include <set>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/content_ids.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::yaml;

namespace {

std::string error_of(const std::string& text) {
    return servesim::testing::config_error_of([&] { (void)make_workload(yaml(text), 1); });
}

core::Duration fixed_service(const RequestSpec&) {
    return core::Duration::from_s(5);
}

}  // namespace

TEST_CASE("TenantWorkload turn prompts contain the previous answers exactly", "[workloads][tenants]") {
    // One tenant, system 1000, user 100, answer 50, 3 turns, service 5 s:
    //   turn 1: [S 1000, u1 100]                         = 1100 tokens
    //   turn 2: [S, u1, a1 50, u2 100]                   = 1250
    //   turn 3: [S, u1, a1, u2, a2 50, u3 100]           = 1400
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 1
system_prompt_tokens: 1000
user_tokens: 100
answer_tokens: 50
turns_per_dialogue: 3
arrival: closed_loop
think_time: 2s
num_requests: 3
)"),
                           42);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 3);
    CHECK(core::total_tokens(served[0].spec.prompt) == 1100);
    CHECK(core::total_tokens(served[1].spec.prompt) == 1250);
    CHECK(core::total_tokens(served[2].spec.prompt) == 1400);
    for (std::size_t i = 0; i + 1 < served.size(); ++i) {
        const auto& prev = served[i].spec;
        const auto& next = served[i + 1].spec;
        // next = prev + [answer of prev] + [new user message]
        core::TokenContent expected = prev.prompt;
        expected.push_back({prev.answer_content, prev.max_output_tokens});
        REQUIRE(next.prompt.size() == expected.size() + 1);
        CHECK(core::TokenContent(next.prompt.begin(), next.prompt.end() - 1) == expected);
        CHECK(prev.answer_content == answer_content(prev.id));
        CHECK(next.turn == prev.turn + 1);
    }
    CHECK(w->exhausted());
}

TEST_CASE("TenantWorkload sends a turn only after the previous answer and the think time", "[workloads][tenants]") {
    // Closed loop, service 5 s, think 2 s: sends at 0, 0+5+2 = 7, 7+5+2 = 14.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 1
system_prompt_tokens: 10
user_tokens: 10
answer_tokens: 10
turns_per_dialogue: 3
arrival: closed_loop
think_time: 2s
num_requests: 3
)"),
                           1);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 3);
    CHECK(served[0].spec.arrival.ns() == 0);
    CHECK(served[1].spec.arrival.s() == 7.0);
    CHECK(served[2].spec.arrival.s() == 14.0);
}

TEST_CASE("TenantWorkload with poisson arrivals never sends before the previous answer plus think time",
          "[workloads][tenants]") {
    // 4 tenants at 8 req/s in total (2 req/s each, mean gap 0.5 s) but each answer takes 5 s: the tenants fall behind
    // their Poisson clocks, and every send is at least the previous finish + 1 s.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 4
system_prompt_tokens: 100
user_tokens: 10
answer_tokens: 10
turns_per_dialogue: 6
rate: 8
think_time: 1s
num_requests: 200
)"),
                           3);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 200);
    std::map<std::uint32_t, core::SimTime> last_finish;
    for (const auto& s : served) {
        const auto t = core::to_int(s.spec.tenant);
        if (last_finish.count(t) != 0) {
            CHECK(s.spec.arrival >= last_finish[t] + core::Duration::from_s(1));
        }
        last_finish[t] = s.finish;
    }
}

TEST_CASE("TenantWorkload gives tenants distinct system prompts and restarts a dialogue with the same one",
          "[workloads][tenants]") {
    // 3 tenants, 2 turns per dialogue, closed loop: 12 requests = 2 dialogues per tenant. Dialogue 2 turn 1 is
    // [S, u'1] again: same system run, a new user message, no answers of dialogue 1.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 3
system_prompt_tokens: 2000
user_tokens: 200
answer_tokens: 60
turns_per_dialogue: 2
arrival: closed_loop
num_requests: 12
)"),
                           9);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 12);
    std::map<std::uint32_t, std::vector<RequestSpec>> by_tenant;
    for (const auto& s : served) {
        by_tenant[core::to_int(s.spec.tenant)].push_back(s.spec);
    }
    REQUIRE(by_tenant.size() == 3);
    std::set<std::uint64_t> systems;
    for (const auto& [tenant, specs] : by_tenant) {
        REQUIRE(specs.size() == 4);
        const auto system = specs[0].prompt[0];
        CHECK(system.content == system_prompt_content(core::TenantId{tenant}));
        CHECK(system.length_tokens == 2000);
        systems.insert(core::to_int(system.content));
        CHECK(specs[0].turn == 1);
        CHECK(specs[1].turn == 2);
        CHECK(specs[2].turn == 1);
        CHECK(specs[3].turn == 2);
        // Restarted dialogue: same system prompt, 2 runs (2000 + 200), a different user message than dialogue 1.
        REQUIRE(specs[2].prompt.size() == 2);
        CHECK(specs[2].prompt[0] == system);
        CHECK(specs[2].prompt[1].content != specs[0].prompt[1].content);
        CHECK(specs[2].prompt[1].content == user_message_content(core::TenantId{tenant}, 1, 1));
        CHECK(core::total_tokens(specs[3].prompt) == 2000 + 200 + 60 + 200);
    }
    CHECK(systems.size() == 3);
}

TEST_CASE("TenantWorkload names each dialogue's session and marks its last turn", "[workloads][tenants]") {
    // 3 tenants × 2 dialogues × 2 turns: 6 sessions, each with exactly its two turns, the second marked last; no
    // session id is 0 or shared by two tenants.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 3
system_prompt_tokens: 100
user_tokens: 10
answer_tokens: 5
turns_per_dialogue: 2
arrival: closed_loop
num_requests: 12
)"),
                           9);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 12);
    std::map<std::uint64_t, std::vector<RequestSpec>> by_session;
    for (const auto& s : served) {
        CHECK(s.spec.session != 0);
        by_session[s.spec.session].push_back(s.spec);
    }
    REQUIRE(by_session.size() == 6);
    for (const auto& [session, specs] : by_session) {
        REQUIRE(specs.size() == 2);
        CHECK(specs[0].tenant == specs[1].tenant);
        CHECK((specs[0].turn == 1 && !specs[0].last_in_session));
        CHECK((specs[1].turn == 2 && specs[1].last_in_session));
    }
}

TEST_CASE("TenantWorkload puts the shared prefix before every tenant's system prompt", "[workloads][tenants]") {
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 2
shared_prefix_tokens: 500
system_prompt_tokens: 100
user_tokens: 10
answer_tokens: 5
turns_per_dialogue: 1
arrival: closed_loop
num_requests: 4
)"),
                           5);
    for (const auto& s : drive(*w, fixed_service)) {
        REQUIRE(s.spec.prompt.size() == 3);  // [shared 500, system 100, user 10]
        CHECK(s.spec.prompt[0] == core::ContentRun{shared_prefix_content(), 500});
        CHECK(s.spec.prompt[1].content == system_prompt_content(s.spec.tenant));
    }
}

TEST_CASE("TenantWorkload poisson streams add up to the configured total rate", "[workloads][tenants]") {
    // 10 tenants at 6 req/s for 1000 s, answers instant and no think time, so sends follow the Poisson clocks:
    // expected 6000 requests, SD √6000 = 77; tolerance 300 (≈ 3.9 SD). Each tenant ≈ 600 (SD 24.5; tolerance 120).
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 10
system_prompt_tokens: 100
user_tokens: 10
answer_tokens: 5
turns_per_dialogue: 6
rate: 6
duration: 1000s
)"),
                           11);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration{}; });
    CHECK(std::abs(static_cast<double>(served.size()) - 6000.0) < 300.0);
    std::map<std::uint32_t, int> per_tenant;
    core::SimTime last;
    for (const auto& s : served) {
        CHECK(s.spec.arrival >= last);
        CHECK(s.spec.arrival.s() <= 1000.0);
        last = s.spec.arrival;
        ++per_tenant[core::to_int(s.spec.tenant)];
    }
    REQUIRE(per_tenant.size() == 10);
    for (const auto& [tenant, n] : per_tenant) {
        CHECK(std::abs(n - 600) < 120);
    }
    CHECK(w->exhausted());
}

TEST_CASE("TenantWorkload tenant 0 draws the same lengths when a tenant is added", "[workloads][tenants]") {
    // Each tenant draws from its own stream ("tenants.lengths", index), so tenant 0's system prompt, user message and
    // answer lengths are the same with 2 or 3 tenants.
    const auto tenant0 = [](int num_tenants) {
        auto w = make_workload(yaml(fmt::format(R"(
type: tenants
tenants: {}
system_prompt_tokens: {{dist: uniform, min: 1000, max: 3000}}
user_tokens: {{dist: normal, mean: 200, std: 50}}
answer_tokens: {{dist: uniform, min: 50, max: 100}}
turns_per_dialogue: 6
arrival: closed_loop
num_requests: 60
)",
                                                num_tenants)),
                               2024);
        std::vector<std::pair<std::int64_t, std::int64_t>> out;
        for (const auto& s : drive(*w, fixed_service)) {
            if (s.spec.tenant == core::TenantId{0}) {
                out.emplace_back(core::total_tokens(s.spec.prompt), s.spec.max_output_tokens);
            }
        }
        return out;
    };
    const auto with_two = tenant0(2);    // 30 requests of tenant 0
    const auto with_three = tenant0(3);  // 20 requests of tenant 0
    REQUIRE(with_three.size() == 20);
    CHECK(std::vector(with_two.begin(), with_two.begin() + 20) == with_three);
}

TEST_CASE("TenantWorkload stops sending after duration", "[workloads][tenants]") {
    // One tenant, closed loop, 1 s answers, no think time, duration 10 s: sends at 0, 1, …, 10 → 11 requests.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 1
system_prompt_tokens: 10
user_tokens: 10
answer_tokens: 10
turns_per_dialogue: 6
arrival: closed_loop
duration: 10s
)"),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration::from_s(1); });
    CHECK(served.size() == 11);
    CHECK(served.back().spec.arrival.s() == 10.0);
    CHECK(w->exhausted());
}

TEST_CASE("TenantWorkload ids increase in send order", "[workloads][tenants]") {
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 5
system_prompt_tokens: 10
user_tokens: 10
answer_tokens: 10
turns_per_dialogue: 2
rate: 20
num_requests: 50
)"),
                           8);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 50);
    for (std::size_t i = 0; i < served.size(); ++i) {
        CHECK(core::to_int(served[i].spec.id) == i);
    }
}

TEST_CASE("TenantWorkload rejects an unknown key and lists the allowed ones", "[workloads][tenants]") {
    const auto msg = error_of(
        "type: tenants\ntenants: 2\nsystem_prompt_tokens: 10\nuser_tokens: 1\n"
        "answer_tokens: 1\nturns_per_dialogue: 1\nrate: 1\nnum_requests: 1\nthinktime: 1s\n");
    CHECK(msg.find("test.yaml:9") != std::string::npos);
    CHECK(msg.find("'workload.thinktime'") != std::string::npos);
    CHECK(msg.find("allowed: type, tenants, system_prompt_tokens") != std::string::npos);
    CHECK(msg.find("think_time") != std::string::npos);
}

TEST_CASE("TenantWorkload rejects a negative or infinite rate", "[workloads][tenants]") {
    const std::string base =
        "type: tenants\ntenants: 2\nsystem_prompt_tokens: 10\nuser_tokens: 1\nanswer_tokens: 1\n"
        "turns_per_dialogue: 1\nnum_requests: 1\n";
    const auto negative = error_of(base + "rate: -6\n");
    CHECK(negative.find("'workload.rate'") != std::string::npos);
    CHECK(negative.find("must be a positive number") != std::string::npos);
    CHECK(error_of(base + "rate: inf\n").find("not allowed") != std::string::npos);
    CHECK(error_of(base + "arrival: closed_loop\nrate: 3\n").find("not used with `arrival: closed_loop`") !=
          std::string::npos);
}

TEST_CASE("TenantWorkload needs num_requests or duration", "[workloads][tenants]") {
    const auto msg = error_of(
        "type: tenants\ntenants: 2\nsystem_prompt_tokens: 10\nuser_tokens: 1\n"
        "answer_tokens: 1\nturns_per_dialogue: 1\nrate: 1\n");
    CHECK(msg.find("never ends by itself") != std::string::npos);
}

TEST_CASE("TenantWorkload seed-study profile has a mean prompt of 2,891 tokens", "[workloads][tenants]") {
    // workloads/README.md example: turn t's prompt = 2231 + t·135 + (t − 1)·a, a uniform 50..100 (mean 75).
    // Mean over t = 1..6: 2231 + 3.5·135 + 2.5·75 = 2231 + 472.5 + 187.5 = 2891. 6,000 requests = 1,000 whole
    // dialogues; the answer part's SE is below 1 token, tolerance 3.
    auto w = make_workload(yaml(R"(
type: tenants
tenants: 20
system_prompt_tokens: 2231
user_tokens: 135
answer_tokens: {dist: uniform, min: 50, max: 100}
turns_per_dialogue: 6
arrival: closed_loop
num_requests: 6000
)"),
                           6);
    const auto served = drive(*w, fixed_service);
    REQUIRE(served.size() == 6000);
    double sum = 0;
    for (const auto& s : served) {
        sum += static_cast<double>(core::total_tokens(s.spec.prompt));
    }
    CHECK(std::fabs(sum / 6000.0 - 2891.0) < 3.0);
}
