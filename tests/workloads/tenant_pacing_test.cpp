// Tests of the tenant pacings (workloads/tenant_workload.h TenantPacing): who is sent when, in which order, on a
// 3-tenant example worked by hand, against a slow server that takes 2 s per request. Arrivals are `constant`, so
// every gap is exact: rate 3 req/s over 3 tenants is a 1 s gap per tenant, 1/3 s for the client's one stream.
#include <cmath>
#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/tenant_workload.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::yaml;

namespace {

core::Duration slow(const RequestSpec&) { return core::Duration::from_s(2); }

struct Send {
    double t_s;
    std::uint32_t tenant;
};

std::vector<Send> sends(const std::string& pacing, int n, core::Duration (*service)(const RequestSpec&) = slow) {
    auto w = make_workload(yaml("type: tenants\ntenants: 3\nsystem_prompt_tokens: 100\nuser_tokens: 10\n"
                                "answer_tokens: 5\nturns_per_dialogue: 2\narrival: constant\nrate: 3\n"
                                "pacing: " + pacing + "\nnum_requests: " + std::to_string(n) + "\n"),
                           7);
    std::vector<Send> out;
    for (const auto& s : drive(*w, service)) {
        out.push_back({s.spec.arrival.s(), core::to_int(s.spec.tenant)});
    }
    return out;
}

void check_sends(const std::vector<Send>& got, const std::vector<Send>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("send " << i);
        CHECK(std::abs(got[i].t_s - want[i].t_s) < 1e-6);
        CHECK(got[i].tenant == want[i].tenant);
    }
}

}  // namespace

TEST_CASE("Tenant pacing per_tenant_stream: each tenant's own 1 s clock, caught up back to back when it lags",
          "[workloads][tenants][pacing]") {
    // Tenant streams tick at 1, 2, 3, … s. Turn 1 of A, B, C at 1 s; answers at 3 s; turn 2 was due at 2 s, so it
    // leaves at 3 s (ties by tenant); answers at 5 s; turn 3 due at 3 s leaves at 5 s.
    check_sends(sends("per_tenant_stream", 9),
                {{1, 0}, {1, 1}, {1, 2}, {3, 0}, {3, 1}, {3, 2}, {5, 0}, {5, 1}, {5, 2}});
}

TEST_CASE("Tenant pacing sleep_after_answer: a 1 s gap after each answer, so the server's time adds to it",
          "[workloads][tenants][pacing]") {
    // First sends after one gap (1 s); answers at 3 s; next sends at 3 + 1 = 4 s; answers at 6 s; then 7 s.
    // 3 requests every 3 s = 1 req/s sent of the 3 asked.
    check_sends(sends("sleep_after_answer", 9),
                {{1, 0}, {1, 1}, {1, 2}, {4, 0}, {4, 1}, {4, 2}, {7, 0}, {7, 1}, {7, 2}});
}

TEST_CASE("Tenant pacing global_fifo: one 1/3 s stream, each send to the tenant idle the longest",
          "[workloads][tenants][pacing]") {
    // Stream times 1/3, 2/3, 1, 4/3, 5/3, 2, 7/3, … A at 1/3, B at 2/3, C at 1. The 4th send (due 4/3) waits for a
    // tenant: A is back at 1/3 + 2 = 7/3. The 5th (due 5/3) waits for B (8/3), the 6th (due 2) for C (3). The 7th
    // (due 7/3) waits for A again (7/3 + 2 = 13/3): the order is cyclic, A B C A B C …
    check_sends(sends("global_fifo", 9), {{1.0 / 3, 0},
                                          {2.0 / 3, 1},
                                          {1, 2},
                                          {7.0 / 3, 0},
                                          {8.0 / 3, 1},
                                          {3, 2},
                                          {13.0 / 3, 0},
                                          {14.0 / 3, 1},
                                          {5, 2}});
}

TEST_CASE("Tenant pacing global_random: the same stream, each send to an idle tenant picked at random",
          "[workloads][tenants][pacing]") {
    // Under the slow server only one tenant is idle whenever a send is due after the first three, so the picks
    // are forced and the times equal global_fifo's; the first three sends pick among the idle ones at random.
    const auto got = sends("global_random", 9);
    const auto fifo = sends("global_fifo", 9);
    REQUIRE(got.size() == 9);
    for (std::size_t i = 0; i < 9; ++i) {
        CHECK(std::abs(got[i].t_s - fifo[i].t_s) < 1e-6);
    }
    // Every tenant once in the first three, and then the same order again (the tenant that left first is back first).
    CHECK(got[0].tenant + got[1].tenant + got[2].tenant == 3);
    CHECK(got[0].tenant != got[1].tenant);
    CHECK(got[3].tenant == got[0].tenant);
    CHECK(got[4].tenant == got[1].tenant);
    // On a fast server (0.01 s) all three are idle at every send: the picks are not cyclic, each tenant gets about a
    // third of 3,000 sends (binomial sd ≈ 26).
    const auto fast = sends("global_random", 3000, [](const RequestSpec&) { return core::Duration::from_ms(10); });
    int count[3] = {0, 0, 0};
    int cyclic = 0;
    for (std::size_t i = 0; i < fast.size(); ++i) {
        ++count[fast[i].tenant];
        cyclic += i >= 3 && fast[i].tenant == fast[i - 3].tenant ? 1 : 0;
    }
    for (int c : count) {
        CHECK(std::abs(c - 1000) < 130);
    }
    CHECK(cyclic < 1500);  // a cyclic order would repeat every third send (2,997 times); random, about a third
}

TEST_CASE("Tenant pacing: an unknown pacing, or one with closed_loop, is refused naming the key",
          "[workloads][tenants][pacing][errors]") {
    auto error_of = [](const std::string& text) {
        try {
            (void)make_workload(yaml(text), 1);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const std::string base =
        "type: tenants\ntenants: 3\nsystem_prompt_tokens: 100\nuser_tokens: 10\nanswer_tokens: 5\n"
        "turns_per_dialogue: 2\nnum_requests: 9\n";
    const std::string unknown = error_of(base + "rate: 3\npacing: cyclic\n");
    CHECK(unknown.find("'workload.pacing'") != std::string::npos);
    CHECK(unknown.find("per_tenant_stream, sleep_after_answer, global_fifo, global_random") != std::string::npos);
    CHECK(error_of(base + "arrival: closed_loop\npacing: global_fifo\n").find("closed_loop") != std::string::npos);
}
