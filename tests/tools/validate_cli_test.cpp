// `servesim validate` through the binary (tools/validate_command.cpp): what a user types and reads.
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran servesim(const std::string& args) { return servesim::test::run_servesim(args, "", false); }
Ran servesim_with_stderr(const std::string& args) { return servesim::test::run_servesim(args); }

const std::string kFixture = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/validation/bench-detailed.json";

TEST_CASE("validate CLI: a vllm bench serve file is replayed and every measured metric is compared",
          "[tools][cli][validate]") {
    // The fixture's four requests (tests/tools/validation_test.cpp works its figures out): TTFT mean 30 ms, E2E mean
    // 41 ms, 3 completed, 1 failed. The replay on Qwen3-4B / H100 predicts its own figures; the JSON carries both and
    // the signed error, and the failed request is replayed too (the client sent it).
    const Ran r = servesim("validate " + kFixture + " --model Qwen3-4B --gpu H100 --format json -j 1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.output);
    REQUIRE(j["runs"].size() == 1);
    const auto& run = j["runs"][0];
    CHECK(run["format"] == "vllm-bench");
    CHECK(run["overloaded"] == true);  // the client failed a request
    const auto& m = run["windows"][0]["metrics"];
    CHECK(m["ttft_mean_ms"]["measured"].get<double>() == 30.0);
    CHECK(m["completed"]["measured"].get<double>() == 3.0);
    CHECK(m["completed"]["predicted"].get<double>() == 4.0);
    const double predicted = m["ttft_mean_ms"]["predicted"].get<double>();
    CHECK(predicted > 0);
    CHECK(std::abs(m["ttft_mean_ms"]["error_pct"].get<double>() - 100 * (predicted - 30) / 30) < 1e-9);
    CHECK(j["overall"].size() > 0);
}

TEST_CASE("validate CLI: a file without its serving stack is refused with what to give", "[tools][cli][validate]") {
    const Ran r = servesim_with_stderr("validate " + kFixture);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "give --model and --gpu"));
}

TEST_CASE("validate CLI: --metrics-after sets a live server's hit rate beside the replay's", "[tools][cli][validate]") {
    // repeated-prompt.csv: one 1,000-token prompt sent three times, 5 s apart (prefix_id 1), on Qwen3-4B / H200
    // (block 16, prefix caching on). Replay, by hand: each lookup queries 1,000 tokens; the first hits 0, the next two
    // hit the prompt's full blocks short of its last token, ⌊999 / 16⌋ · 16 = 992 each → 3,000 queried, 1,984 hit,
    // 66.133 %. The dumps (fixtures' comments): +3,000 queried, +1,800 hit → 60.0 %; error (66.133 − 60) / 60 =
    // +10.22 %. 0 preemptions both; 3 successes both; the gauge (0.25 + 0.15) / 2 = 20 % measured only.
    const std::string dir = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/validation/";
    const Ran r = servesim("validate " + dir + "repeated-prompt.csv --model Qwen3-4B --gpu H200 --metrics-before " +
                           dir + "metrics-before.prom --metrics-after " + dir + "metrics-after.prom --format json -j 1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.output);
    const auto& m = j["runs"][0]["windows"][0]["metrics"];
    CHECK(m["cache_queries"]["measured"].get<double>() == 3000.0);
    CHECK(m["cache_queries"]["predicted"].get<double>() == 3000.0);
    CHECK(m["cache_hits"]["measured"].get<double>() == 1800.0);
    CHECK(m["cache_hits"]["predicted"].get<double>() == 1984.0);
    CHECK(std::abs(m["hit_rate_pct"]["measured"].get<double>() - 60.0) < 1e-9);
    CHECK(std::abs(m["hit_rate_pct"]["predicted"].get<double>() - 100.0 * 1984 / 3000) < 1e-9);
    CHECK(std::abs(m["hit_rate_pct"]["error_pct"].get<double>() - 10.2222222) < 1e-6);
    CHECK(m["preemptions"]["measured"].get<double>() == 0.0);
    CHECK(m["preemptions"]["predicted"].get<double>() == 0.0);
    CHECK(m["server_success"]["measured"].get<double>() == 3.0);
    CHECK(m["server_success"]["predicted"].get<double>() == 3.0);
    CHECK(std::abs(m["kv_usage_pct"]["measured"].get<double>() - 20.0) < 1e-9);
    CHECK(m["kv_usage_pct"]["predicted"].is_null());
    // The table prints the same figures.
    const Ran t = servesim("validate " + dir + "repeated-prompt.csv --model Qwen3-4B --gpu H200 --metrics-before " +
                           dir + "metrics-before.prom --metrics-after " + dir + "metrics-after.prom -j 1");
    INFO(t.output);
    CHECK(contains(t.output, "hit_rate_pct"));
    CHECK(contains(t.output, "+10.2%"));
}

TEST_CASE("validate CLI: --metrics-after needs one run and a vLLM dump", "[tools][cli][validate]") {
    const std::string dir = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/validation/";
    const Ran two = servesim_with_stderr("validate " + dir + "repeated-prompt.csv " + dir +
                                         "requests.csv --model Qwen3-4B --gpu H200 --metrics-after " + dir +
                                         "metrics-after.prom");
    CHECK(two.status == 2);
    CHECK(contains(two.output, "--metrics-after: the dump covers one server's load, so give exactly one RUN (got 2)"));
    const Ran not_metrics = servesim_with_stderr("validate " + dir + "repeated-prompt.csv --model Qwen3-4B --gpu H200 "
                                                 "--metrics-after " + dir + "requests.csv");
    CHECK(not_metrics.status == 2);
    CHECK(contains(not_metrics.output, "requests.csv:1: not a Prometheus sample line"));
    const Ran before_only = servesim_with_stderr("validate " + dir + "repeated-prompt.csv --model Qwen3-4B --gpu H200 "
                                                 "--metrics-before " + dir + "metrics-before.prom");
    CHECK(before_only.status == 2);
    CHECK(contains(before_only.output, "--metrics-before: needs --metrics-after FILE"));
}

}  // namespace
