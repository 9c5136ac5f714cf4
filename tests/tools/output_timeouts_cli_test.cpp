// Client time-outs as a user meets them through the servesim binary (tools/app/output_fields.cpp, experiment.cpp):
// `requests_timed_out` appears in table, CSV and JSON with the same value when the workload sets request_timeout and
// not otherwise; the run warns and its status says so; --format vllm-bench counts the time-outs in `failed`; a run
// without a scenario file takes the key through --set; a bad value, a disaggregated run and an order-only replay
// are refused naming the key.
#include <nlohmann/json.hpp>

#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran run(const std::string& args, bool with_stderr = true) {
    return servesim::test::run_servesim(args, "", with_stderr);
}

// An open-loop vllm bench serve run past the H100's capacity (40 req/s of 4,000-token prompts and 400-token
// answers): its clients give up after 20 s.
const std::string kOverloaded =
    "run --model Qwen3-4B --gpu H100 --request-rate 40 --num-prompts 300 --random-input-len 4000 "
    "--random-output-len 400 --set workload.request_timeout=20s";

}  // namespace

TEST_CASE("CLI: a run with client time-outs reports them in every format and warns", "[tools][cli][timeout]") {
    const Ran json_run = run(kOverloaded + " --format json", /*with_stderr=*/false);
    REQUIRE(json_run.status == 0);
    const auto j = nlohmann::json::parse(json_run.output).at(0);
    const std::int64_t timed_out = j.at("requests_timed_out").get<std::int64_t>();
    const std::int64_t finished = j.at("requests_finished").get<std::int64_t>();
    CHECK(timed_out > 0);
    CHECK(finished > 0);
    CHECK(timed_out + finished == 300);  // every request either finished in time or was given up
    CHECK(j.at("requests_unfinished").get<std::int64_t>() == 0);
    const std::string status = j.at("status").get<std::string>();
    CHECK((status == "timed_out" || status == "overloaded"));
    CHECK(j.at("e2e_ms_max").get<double>() <= 20000.0);  // no finished request took longer than its client waited

    const Ran table = run(kOverloaded);
    CHECK(contains(table.output, "servesim: warning: experiment 'command-line': " + std::to_string(timed_out) +
                                     " of 300 requests timed out after 20s"));
    CHECK(contains(table.output, "requests_timed_out"));

    const Ran csv = run(kOverloaded + " --format csv", false);
    CHECK(contains(csv.output, "requests_rejected,requests_timed_out,requests_unfinished"));

    const Ran bench = run(kOverloaded + " --format vllm-bench", false);
    const auto b = nlohmann::json::parse(bench.output);
    CHECK(b.at("failed").get<std::int64_t>() == timed_out);  // nothing rejected, nothing unfinished
    CHECK(b.at("completed").get<std::int64_t>() == finished);
}

TEST_CASE("CLI: without request_timeout there is no requests_timed_out column", "[tools][cli][timeout]") {
    const Ran csv = run("run scenarios/quickstart.yaml --set workload.num_requests=20 --set warmup=0s --format csv",
                        false);
    REQUIRE(csv.status == 0);
    CHECK(contains(csv.output, "requests_rejected,requests_unfinished"));
    CHECK_FALSE(contains(csv.output, "requests_timed_out"));
}

TEST_CASE("CLI: a bad request_timeout is refused naming the key", "[tools][cli][timeout]") {
    const Ran zero = run("run --model Qwen3-4B --num-prompts 10 --set workload.request_timeout=0");
    CHECK(zero.status == 2);
    CHECK(contains(zero.output, "workload.request_timeout=0: must be a duration above 0"));
    const Ran word = run("run --model Qwen3-4B --num-prompts 10 --set workload.request_timeout=soon");
    CHECK(word.status == 2);
    CHECK(contains(word.output, "expected a duration like 30s"));
    const Ran disaggregated = run("run scenarios/cluster/pd-disagg.yaml --set workload.request_timeout=300s");
    CHECK(disaggregated.status == 2);
    CHECK(contains(disaggregated.output, "client time-outs are not modelled with cluster.disaggregation"));
    // An order-only replay keeps no client clock, with or without a model's engine.
    const Ran replay = run("run scenarios/traces/mooncake-capacity.yaml --set workload.request_timeout=10s");
    CHECK(replay.status == 2);
    CHECK(contains(replay.output, "'workload.request_timeout': not used in order_only mode"));
    const Ran engine_replay =
        run("run scenarios/hybrid-policies/mooncake-order-only.yaml --set workload.request_timeout=10s");
    CHECK(engine_replay.status == 2);
    CHECK(contains(engine_replay.output, "workload.request_timeout: not used in order_only mode"));
}
