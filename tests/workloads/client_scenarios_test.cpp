// The new clients through the whole simulator (scenario reader → engine → metrics): bench_serve's shared random
// prefix is hit by every request but the first, its max_concurrency semaphore bounds what reaches the server, and
// multi_turn_bench's turns hit on their history (which contains the server's answers).
#include <string>

#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

using namespace servesim;

namespace {

std::vector<app::ExperimentResult> run_text(const std::string& text) {
    const app::Scenario sc = app::load_scenario_text(text, "test.yaml", {}, std::nullopt);
    return app::run_experiments(sc.experiments, 1, nullptr);
}

const std::string kHeader = R"(
seed: 1
model: Qwen3-4B
gpu: H200
cost_model: roofline
engine:
  enable_prefix_caching: true
)";

}  // namespace

TEST_CASE("bench_serve through the simulator: every request but the first hits the shared random prefix",
          "[workloads][bench_serve][scenario]") {
    // random_prefix_len 1000 = 62 full blocks of 16 (992 tokens) + 8; the random part is unique. Poisson arrivals
    // at 20 req/s, 200 requests, nothing evicted (the cache holds 864k tokens): hits = 199 · 992 = 197,408 tokens.
    const auto results = run_text(kHeader + R"(
workload:
  type: bench_serve
  num_prompts: 200
  request_rate: 20
  random_input_len: 1024
  random_output_len: 32
  random_range_ratio: 0.25
  random_prefix_len: 1000
)");
    REQUIRE(results.size() == 1);
    const auto& s = results[0].sim.summary;
    CHECK(s.num_requests_finished == 200);
    CHECK(s.preemptions == 0);
    CHECK(s.prefix_cache_hits == 199 * 992);
}

TEST_CASE("bench_serve through the simulator: max_concurrency bounds the server's queue",
          "[workloads][bench_serve][scenario]") {
    // 64 requests all at t = 0 (request_rate inf). Without a semaphore they all reach the server at once; with
    // max_concurrency 4 at most 4 are in the server, so at most 4 wait.
    const std::string workload = R"(
workload:
  type: bench_serve
  num_prompts: 64
  random_input_len: 4000
  random_output_len: 64
)";
    const auto open = run_text(kHeader + workload);
    const auto limited = run_text(kHeader + workload + "  max_concurrency: 4\n");
    CHECK(open[0].sim.summary.queue_peak > 32);
    CHECK(limited[0].sim.summary.queue_peak <= 4);
    CHECK(limited[0].sim.summary.num_requests_finished == 64);
}

TEST_CASE("multi_turn_bench through the simulator: later turns hit on their history",
          "[workloads][multi_turn_bench][scenario]") {
    // 2 clients, 2 conversations of 4 messages (2 turns): user 500, answer 100, no prefixes. Turn 2's prompt is
    // [u1 500, a1 100, u2 500] = 1100 tokens, of which [u1, a1] = 600 are cached (37 full blocks = 592 tokens hit:
    // a1's blocks were cached as it was generated). Queries: 2·500 + 2·1100 = 3200 tokens; hits 2·592 = 1184.
    const auto results = run_text(kHeader + R"(
workload:
  type: multi_turn_bench
  num_clients: 2
  no_early_stop: true
  conversations:
    num_conversations: 2
    prompt_input:
      num_turns: {distribution: constant, value: 4}
      prefix_num_tokens: {distribution: constant, value: 0}
      num_tokens: {distribution: constant, value: 500}
    prompt_output:
      num_tokens: {distribution: constant, value: 100}
)");
    REQUIRE(results.size() == 1);
    const auto& s = results[0].sim.summary;
    CHECK(s.num_requests_finished == 4);
    CHECK(s.prefix_cache_queries == 3200);
    CHECK(s.prefix_cache_hits == 1184);
}
