// Tests of workloads/multi_turn_bench_workload.* and conversation_generator.*: the clients of vLLM's
// benchmark_serving_multi_turn.py — round-robin order (deque: pop right, re-enter left), a client leaving as soon as
// the conversation queue is empty, early stop after the first client leaves (each other client after its request in
// flight), random.choice picks as CPython makes them, whole-history prompts carrying the server's answers, the
// per-client Poisson sleep — and the generator's length rules. Bad input is refused naming the key.
#include "workloads/multi_turn_bench_workload.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/content_ids.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::error_of;
using servesim::workloads::test::yaml;

namespace {

// `n` conversations of `messages` messages, users 200 tokens, answers 50, no prefixes.
std::string conversations(int n, int messages) {
    return fmt::format(R"(
conversations:
  num_conversations: {}
  prompt_input:
    num_turns: {{distribution: constant, value: {}}}
    prefix_num_tokens: {{distribution: constant, value: 0}}
    num_tokens: {{distribution: constant, value: 200}}
  prompt_output:
    num_tokens: {{distribution: constant, value: 50}}
)",
                       n, messages);
}

// The conversation a request belongs to, from its first user message's content id.
std::uint64_t conversation_of(const RequestSpec& r) {
    for (std::uint64_t c = 0; c < 100; ++c) {
        if (r.prompt.front().content == conversation_message_content(c, 0)) {
            return c;
        }
    }
    return 999;
}

core::Duration seconds(double s) {
    return core::Duration::from_s(s);
}

}  // namespace

TEST_CASE("multi_turn_bench round robin takes the deque's right end and leaves when the queue is empty",
          "[workloads][multi_turn_bench]") {
    // 1 client, 3 active conversations of 4 messages (2 user turns), answers take 1 s. Refill appends 0, 1, 2 →
    // deque [0, 1, 2]; pop() → 2; after its answer appendleft → [2, 0, 1]; pop → 1; → [1, 2, 0]; pop → 0;
    // → [0, 1, 2]; pop → 2 (its turn 2). Conversation 2 is then done, the refill reads the empty queue and the
    // client leaves (client_main breaks on the termination signal even with conversations 0 and 1 unfinished).
    auto w = make_workload(
        yaml("type: multi_turn_bench\nnum_clients: 1\nmax_active_conversations: 3\n" + conversations(3, 4)), 1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 4);
    const std::vector<std::uint64_t> convs = {2, 1, 0, 2};
    const std::vector<int> turns = {1, 1, 1, 2};
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(conversation_of(served[i].spec) == convs[i]);
        CHECK(served[i].spec.turn == turns[i]);
        CHECK(served[i].spec.arrival.s() == static_cast<double>(i));  // closed loop: the next send at the answer
    }
    CHECK(w->exhausted());
}

TEST_CASE("multi_turn_bench max_turns counts messages: 4 ends a conversation after two requests",
          "[workloads][multi_turn_bench]") {
    // 1 client, 1 active, 2 conversations of 10 messages, max_turns 4: conversation 0 turns 1, 2, then conversation 1
    // turns 1, 2, then the queue is empty: 4 requests, at 0, 1, 2, 3 with 1 s answers.
    auto w = make_workload(yaml("type: multi_turn_bench\nnum_clients: 1\nmax_turns: 4\n" + conversations(2, 10)), 1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 4);
    const std::vector<std::uint64_t> convs = {0, 0, 1, 1};
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(conversation_of(served[i].spec) == convs[i]);
        CHECK(served[i].spec.turn == static_cast<int>(i % 2) + 1);
        CHECK(served[i].spec.arrival.s() == static_cast<double>(i));
    }
}

TEST_CASE("multi_turn_bench sends the whole history with the server's answers", "[workloads][multi_turn_bench]") {
    // 1 client, 1 conversation of 6 messages; common prefix 500, conversation prefix 300, user num_tokens 140,
    // answers 60. First message = max(140, 500 + 17) + 300 = 817 tokens: [common 500, own 317]. Later user messages
    // max(140, 17) = 140. Turn 3's prompt: [C 500, u0 317, a(req 0) 60, u2 140, a(req 1) 60, u4 140] = 1217.
    auto w = make_workload(yaml(R"(
type: multi_turn_bench
num_clients: 1
conversations:
  num_conversations: 1
  prompt_input:
    num_turns: {distribution: constant, value: 6}
    common_prefix_num_tokens: {distribution: constant, value: 500}
    prefix_num_tokens: {distribution: constant, value: 300}
    num_tokens: {distribution: constant, value: 140}
  prompt_output:
    num_tokens: {distribution: constant, value: 60}
)"),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(2); });
    REQUIRE(served.size() == 3);
    const core::TokenContent expected = {
        {conversation_common_prefix_content(), 500}, {conversation_message_content(0, 0), 317},
        {answer_content(served[0].spec.id), 60},     {conversation_message_content(0, 2), 140},
        {answer_content(served[1].spec.id), 60},     {conversation_message_content(0, 4), 140}};
    CHECK(served[2].spec.prompt == expected);
    CHECK(core::total_tokens(served[2].spec.prompt) == 1217);
    CHECK(served[2].spec.max_output_tokens == 60);
    CHECK(served[1].spec.arrival.s() == 2.0);
    CHECK(served[2].spec.arrival.s() == 4.0);
}

TEST_CASE("multi_turn_bench with a slow client: the first client to leave stops the others after their request",
          "[workloads][multi_turn_bench]") {
    // 3 clients, 1 active conversation each, 4 conversations of 4 messages. Client 0's answers take 10 s, the
    // others' 1 s. t=0: c0→conv0, c1→conv1, c2→conv2 (requests 0, 1, 2). t=1: c1 sends conv1 turn 2 (req 3), c2
    // conv2 turn 2 (req 4). t=2: c1 finishes conv1, takes conv3 (req 5 at 2); c2 finishes conv2, finds the queue
    // empty and leaves at 2: early stop at 2. Client 1's answer at 3 and client 0's at 10 come after the stop, so
    // they leave: 6 requests. With no_early_stop: c1 sends conv3 turn 2 at 3, c0 conv0 turn 2 at 10: 8 requests.
    const std::string base = "type: multi_turn_bench\nnum_clients: 3\n" + conversations(4, 4);
    const auto service = [](const RequestSpec& r) { return seconds(r.tenant == core::TenantId{0} ? 10 : 1); };
    auto w = make_workload(yaml(base), 1);
    const auto served = drive(*w, service);
    std::vector<std::pair<std::uint32_t, double>> sends;
    for (const auto& s : served) {
        sends.emplace_back(core::to_int(s.spec.tenant), s.spec.arrival.s());
    }
    CHECK(sends == std::vector<std::pair<std::uint32_t, double>>{{0, 0}, {1, 0}, {2, 0}, {1, 1}, {2, 1}, {1, 2}});
    CHECK(conversation_of(served[5].spec) == 3);
    CHECK(w->exhausted());

    auto all = make_workload(yaml(base + "no_early_stop: true\n"), 1);
    sends.clear();
    for (const auto& s : drive(*all, service)) {
        sends.emplace_back(core::to_int(s.spec.tenant), s.spec.arrival.s());
    }
    CHECK(sends == std::vector<std::pair<std::uint32_t, double>>{
                       {0, 0}, {1, 0}, {2, 0}, {1, 1}, {2, 1}, {1, 2}, {1, 3}, {0, 10}});
}

TEST_CASE("multi_turn_bench random sampling picks as CPython's random.choice with seed + client + 1",
          "[workloads][multi_turn_bench]") {
    // seed 5, client 0 → random.seed(6); 3 active conversations of 20 messages, 5 requests (none finishes):
    // python3 -c "import random; random.seed(6); print([random.choice([0,1,2]) for _ in range(5)])" → [2, 0, 1, 1, 0].
    auto w = make_workload(yaml("type: multi_turn_bench\nnum_clients: 1\nmax_active_conversations: 3\n"
                                "conversation_sampling: random\nmax_num_requests: 5\nseed: 5\n" +
                                conversations(3, 20)),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 5);
    const std::vector<std::uint64_t> expected = {2, 0, 1, 1, 0};
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(conversation_of(served[i].spec) == expected[i]);
    }
}

TEST_CASE("multi_turn_bench request_rate sleeps an exponential time after each answer",
          "[workloads][multi_turn_bench]") {
    // 1 client at 2 req/s, instant answers, 1000 requests: 999 gaps of mean 0.5 s (SE 0.5/√999 = 0.016; tolerance
    // 0.07 ≈ 4.4 SE). The sleep follows the answer: with 3 s answers every gap is 3 s + the sleep.
    const std::string base =
        "type: multi_turn_bench\nnum_clients: 1\nrequest_rate: 2\nmax_num_requests: 1000\n" + conversations(1, 2000);
    auto w = make_workload(yaml(base), 4);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration{}; });
    REQUIRE(served.size() == 1000);
    const double mean_gap = (served.back().spec.arrival.s() - served.front().spec.arrival.s()) / 999.0;
    CHECK(std::abs(mean_gap - 0.5) < 0.07);
    auto slow = make_workload(yaml(base), 4);
    const auto slow_served = drive(*slow, [](const RequestSpec&) { return seconds(3); });
    for (std::size_t i = 1; i < slow_served.size(); ++i) {
        CHECK(slow_served[i].spec.arrival >= slow_served[i - 1].finish);
    }
}

TEST_CASE("conversation generator: even message counts, prefixes averaging `average`, common prefix counted in",
          "[workloads][multi_turn_bench]") {
    // num_turns constant 3 → rounded up to 4 messages; prefixes lognormal average 1000: the 50 draws are rescaled to
    // average exactly 1000 before rounding (so their mean is 1000 ± 0.5). First message = max(140, 500 + 17) + P.
    const YamlMap m = yaml(R"(
num_conversations: 50
prompt_input:
  num_turns: {distribution: constant, value: 3}
  common_prefix_num_tokens: {distribution: constant, value: 500}
  prefix_num_tokens: {distribution: lognormal, average: 1000}
  num_tokens: {distribution: uniform, min: 120, max: 160}
prompt_output:
  num_tokens: {distribution: zipf, alpha: 2.0, max: 30}
)");
    core::RngStream rng(3, "test");
    const auto convs = generate_conversations(parse_conversation_generator(m), rng);
    REQUIRE(convs.size() == 50);
    double prefix_sum = 0;
    for (const auto& c : convs) {
        REQUIRE(c.message_tokens.size() == 4);
        CHECK(c.common_prefix_tokens == 500);
        prefix_sum += static_cast<double>(c.message_tokens[0] - 517);
        CHECK(c.message_tokens[2] >= 120);
        CHECK(c.message_tokens[2] <= 160);
        CHECK(c.message_tokens[1] >= 1);
        CHECK(c.message_tokens[1] <= 30);
    }
    CHECK(std::abs(prefix_sum / 50.0 - 1000.0) <= 0.5);
}

TEST_CASE("multi_turn_bench reads the tool's generate_conversations JSON file", "[workloads][multi_turn_bench]") {
    // The tool's input file format (filetype, text_files accepted and ignored): 2 conversations of constant 2
    // messages, users 300, answers 40 → one client sends 2 requests, prompts 300 tokens, outputs 40.
    const auto path = (std::filesystem::temp_directory_path() / "servesim_multi_turn_input.json").string();
    std::ofstream(path) << R"({"filetype": "generate_conversations", "num_conversations": 2, "text_files": ["a.txt"],
        "print_stats": false,
        "prompt_input": {"num_turns": {"distribution": "constant", "value": 2},
                         "prefix_num_tokens": {"distribution": "constant", "value": 0},
                         "num_tokens": {"distribution": "constant", "value": 300}},
        "prompt_output": {"num_tokens": {"distribution": "constant", "value": 40}}})";
    auto w = make_workload(yaml("type: multi_turn_bench\nnum_clients: 1\ninput_file: " + path + "\n"), 1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 2);
    for (const auto& s : served) {
        CHECK(core::total_tokens(s.spec.prompt) == 300);
        CHECK(s.spec.max_output_tokens == 40);
    }
}

TEST_CASE("multi_turn_bench refuses what the tool refuses, naming the key", "[workloads][multi_turn_bench]") {
    const std::string convs = conversations(4, 4);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 4\nmax_active_conversations: 3\n" + convs)
              .find("'workload.max_active_conversations': 3 must be at least num_clients (4)") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 2\nmax_active_conversations: 5\n" + convs)
              .find("exceeds the 4 conversations") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 5\n" + convs).find("'workload.num_clients'") !=
          std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 3\nmax_num_requests: 2\n" + convs)
              .find("'workload.max_num_requests'") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\nrequest_rate: -1\n" + convs)
              .find("'workload.request_rate'") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\nmax_turn: 4\n" + convs)
              .find("'workload.max_turn': unknown key") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\nwarmup_percentages: 10%\n" + convs).find("`warmup:`") !=
          std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\nconversation_sampling: lru\n" + convs)
              .find("allowed: round_robin, random") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\n" + conversations(0, 4))
              .find("'workload.conversations.num_conversations'") != std::string::npos);
    CHECK(error_of("type: multi_turn_bench\nnum_clients: 1\nconversations:\n  num_conversations: 2\n"
                   "  prompt_input:\n    num_turns: {distribution: pareto, alpha: 1}\n")
              .find("unknown distribution 'pareto'") != std::string::npos);
}
