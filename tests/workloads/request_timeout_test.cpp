// The workload key `request_timeout` (workloads/request_bounds.h parse_request_timeout) and what each client does
// when it gives up (Workload::on_request_timed_out): every type takes the key and stamps it on its requests; a bad
// value is refused naming the key; vllm bench serve's semaphore frees the slot; a tenant abandons its dialogue; a
// multi-turn benchmark client leaves (and, with early stop, the others after their request), its time-out stretched
// to 0.2 s per max token as the tool's send_request does.
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/content_ids.h"
#include "workloads/workload.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::error_of;
using servesim::workloads::test::fixture;
using servesim::workloads::test::yaml;

namespace {

core::Duration seconds(double s) {
    return core::Duration::from_s(s);
}

core::SimTime at(std::int64_t s) {
    return core::SimTime::from_ns(s * 1'000'000'000);
}

// One workload of each type, each valid without request_timeout.
std::vector<std::string> every_type() {
    return {
        "type: synthetic\nrate: 1\nprompt_tokens: 10\noutput_tokens: 5\nnum_requests: 3\n",
        "type: trace\nformat: mooncake\ntrace: " + fixture("mooncake_small.jsonl") + "\n",
        "type: bench_serve\nnum_prompts: 3\n",
        "type: tenants\ntenants: 1\nsystem_prompt_tokens: 10\nturns_per_dialogue: 2\nuser_tokens: 5\n"
        "answer_tokens: 5\narrival: closed_loop\nnum_requests: 3\n",
        "type: multi_turn_bench\nnum_clients: 1\nconversations:\n  num_conversations: 1\n  prompt_input:\n"
        "    num_turns: {distribution: constant, value: 4}\n"
        "    prefix_num_tokens: {distribution: constant, value: 0}\n"
        "    num_tokens: {distribution: constant, value: 100}\n"
        "  prompt_output:\n    num_tokens: {distribution: constant, value: 50}\n",
    };
}

}  // namespace

TEST_CASE("request_timeout is read by every workload type and stamped on each request", "[workloads][timeout]") {
    for (const std::string& base : every_type()) {
        CAPTURE(base);
        CHECK(error_of(base + "request_timeout: 300s\n").empty());
        auto none = make_workload(yaml(base), 1);
        REQUIRE(none->next_arrival_time());
        CHECK_FALSE(none->pop_next_arrival().timeout.has_value());  // default: the client waits for ever
        auto w = make_workload(yaml(base + "request_timeout: 5min\n"), 1);
        REQUIRE(w->next_arrival_time());
        const RequestSpec r = w->pop_next_arrival();
        REQUIRE(r.timeout.has_value());
        CHECK(*r.timeout == seconds(300));  // 5 min; the multi-turn answers of 50 tokens stretch it to only 10 s
    }
}

TEST_CASE("request_timeout refuses 0, a negative value and a non-duration, naming the key", "[workloads][timeout]") {
    for (const std::string& base : every_type()) {
        CAPTURE(base);
        const std::string zero = error_of(base + "request_timeout: 0\n");
        CHECK(zero.find("workload.request_timeout") != std::string::npos);
        CHECK(zero.find("above 0") != std::string::npos);
        const std::string tiny = error_of(base + "request_timeout: 0.1ns\n");  // not a unit servesim reads
        CHECK(tiny.find("workload.request_timeout") != std::string::npos);
        const std::string negative = error_of(base + "request_timeout: -5s\n");
        CHECK(negative.find("workload.request_timeout") != std::string::npos);
        CHECK(negative.find("non-negative") != std::string::npos);
        const std::string word = error_of(base + "request_timeout: soon\n");
        CHECK(word.find("workload.request_timeout") != std::string::npos);
        CHECK(word.find("expected a duration") != std::string::npos);
        const std::string huge = error_of(base + "request_timeout: 1e12s\n");
        CHECK(huge.find("workload.request_timeout") != std::string::npos);
        CHECK(huge.find("range") != std::string::npos);
    }
    // Below a nanosecond it rounds to 0 on the simulated clock: refused as 0.
    CHECK(error_of(every_type()[0] + "request_timeout: 0.0000000001s\n").find("above 0") != std::string::npos);
}

TEST_CASE("bench_serve with max_concurrency: a timed-out request frees its slot at its time-out",
          "[workloads][timeout]") {
    // request_rate inf: all 3 scheduled at t = 0; max_concurrency 1. Request 0 takes 500 s but its client gives up
    // at 300 s (the semaphore is released when the request function returns its failure): request 1 leaves at
    // 300 s, finishes at 301 (1 s service); request 2 leaves at 301.
    auto w = make_workload(yaml("type: bench_serve\nnum_prompts: 3\nmax_concurrency: 1\nrequest_timeout: 300s\n"), 1);
    const auto served = drive(*w, [](const RequestSpec& r) { return seconds(r.id == core::RequestId{0} ? 500 : 1); });
    REQUIRE(served.size() == 3);
    CHECK(served[0].timed_out);
    CHECK(served[0].finish == at(300));
    CHECK(served[1].spec.arrival == at(300));
    CHECK_FALSE(served[1].timed_out);
    CHECK(served[2].spec.arrival == at(301));
    CHECK(w->exhausted());
}

TEST_CASE("tenants: a timed-out turn ends the dialogue; the tenant starts a new one after its think time",
          "[workloads][timeout]") {
    // 1 tenant, system prompt 100 tokens, 3 turns per dialogue, users 10, answers 5, closed loop, think time 2 s,
    // time-out 60 s. Turn 1 is answered in 1 s; turn 2 (sent at 1 + 2 = 3 s) hangs (100 s service) and is given up
    // at 63 s. The next request (at 63 + 2 = 65 s) is turn 1 of dialogue 1: [system 100, user(d1, t1) 10] only —
    // no trace of the abandoned dialogue — and dialogue 1 then continues normally.
    auto w = make_workload(yaml("type: tenants\ntenants: 1\nsystem_prompt_tokens: 100\nturns_per_dialogue: 3\n"
                                "user_tokens: 10\nanswer_tokens: 5\narrival: closed_loop\nthink_time: 2s\n"
                                "num_requests: 4\nrequest_timeout: 60s\n"),
                           1);
    const auto served = drive(*w, [](const RequestSpec& r) { return seconds(r.id == core::RequestId{1} ? 100 : 1); });
    REQUIRE(served.size() == 4);
    CHECK(served[1].spec.turn == 2);
    CHECK(served[1].timed_out);
    CHECK(served[1].finish == at(63));
    const RequestSpec& next = served[2].spec;
    CHECK(next.arrival == at(65));
    CHECK(next.turn == 1);
    const core::TenantId tenant{0};
    const core::TokenContent fresh = {{system_prompt_content(tenant), 100}, {user_message_content(tenant, 1, 1), 10}};
    CHECK(next.prompt == fresh);
    CHECK(next.session != served[1].spec.session);  // a new conversation
    CHECK(served[3].spec.turn == 2);                 // dialogue 1 goes on
    CHECK(served[3].spec.arrival == at(68));       // 65 + 1 s answer + 2 s think
}

TEST_CASE("multi_turn_bench: a timed-out client leaves, early stop ends the others after their request",
          "[workloads][timeout]") {
    // 2 clients, 1 active conversation each, 4 conversations of 6 messages, answers 1000 tokens: the tool's
    // send_request stretches the 120 s time-out to int(1000 × 0.2) = 200 s. Client 0's first request hangs (500 s
    // service) and times out at 200 s; client 0 leaves then (client_main breaks out of its loop after a time-out),
    // which stops client 1 (early stop) after the request it has in flight. Client 1's answers take 30 s: it sends
    // at 0, 30, …, 180; its request sent at 180 finishes at 210 > 200, so it sends nothing after: 8 requests.
    const std::string base =
        "type: multi_turn_bench\nnum_clients: 2\nrequest_timeout: 120s\nconversations:\n"
        "  num_conversations: 4\n  prompt_input:\n    num_turns: {distribution: constant, value: 6}\n"
        "    prefix_num_tokens: {distribution: constant, value: 0}\n"
        "    num_tokens: {distribution: constant, value: 100}\n"
        "  prompt_output:\n    num_tokens: {distribution: constant, value: 1000}\n";
    const auto service = [](const RequestSpec& r) { return seconds(r.tenant == core::TenantId{0} ? 500 : 30); };
    auto w = make_workload(yaml(base), 1);
    const auto served = drive(*w, service);
    REQUIRE(served.size() == 8);
    for (const auto& s : served) {
        REQUIRE(s.spec.timeout.has_value());
        CHECK(*s.spec.timeout == seconds(200));
    }
    CHECK(core::to_int(served[0].spec.tenant) == 0);
    CHECK(served[0].timed_out);
    CHECK(served[0].finish == at(200));
    int client0 = 0;
    for (const auto& s : served) {
        client0 += s.spec.tenant == core::TenantId{0} ? 1 : 0;
    }
    CHECK(client0 == 1);  // it never sends again
    CHECK(served.back().spec.arrival == at(180));
    CHECK(w->exhausted());

    // With no_early_stop client 1 goes on: its 3 conversations of 3 turns (its own, then 2 and 3 from the queue;
    // client 0's conversation 0 was dropped) — 9 requests from client 1, the last sent at 240 s.
    auto all = make_workload(yaml(base + "no_early_stop: true\n"), 1);
    const auto served_all = drive(*all, service);
    int client1 = 0;
    for (const auto& s : served_all) {
        client1 += s.spec.tenant == core::TenantId{1} ? 1 : 0;
    }
    CHECK(client1 == 9);
    CHECK(served_all.back().spec.arrival == at(240));
}
