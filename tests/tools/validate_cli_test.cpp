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

}  // namespace
