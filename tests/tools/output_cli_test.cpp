// What a user of the servesim binary reads about a run (docs/OUTPUTS.md): the warning on stderr when nothing was
// measured, "—" in the table, --out refused before simulating, --format vllm-bench with --goodput, --replicates,
// --format multi-turn-bench.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran servesim(const std::string& args, bool with_stderr = true) {
    return servesim::test::run_servesim(args, "", with_stderr);
}

// The table row `label`, as printed.
std::string row(const std::string& table, const std::string& label) {
    const auto at = table.find("\n" + label + " ");
    if (at == std::string::npos) {
        return "";
    }
    return table.substr(at + 1, table.find('\n', at + 1) - at - 1);
}

// 20 prompts of 50,000 + 100 tokens on Qwen3-4B, whose max_model_len is 40,960: every one is refused.
const char* kRejected = "run --model Qwen3-4B --request-rate 10 --num-prompts 20 --random-input-len 50000 "
                        "--random-output-len 100";

TEST_CASE("CLI output: a run whose requests are all rejected warns why and prints — for its latencies",
          "[tools][cli][output]") {
    const Ran r = servesim(kRejected);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "servesim: warning: experiment 'command-line': 20 of 20 requests rejected: 20 longer "
                             "than max_model_len: prompt + output up to 50,000 + 100 = 50,100 > max_model_len "
                             "40,960\n"));
    CHECK(contains(row(r.output, "status"), "rejected"));
    for (const char* figure : {"ttft_ms_p50", "ttft_ms_p99", "itl_ms_mean", "e2e_ms_p50", "tpot_ms_p90"}) {
        const std::string line = row(r.output, figure);
        CHECK(line.substr(line.find_last_not_of(' ') - 2, 3) == "—");  // "—" is three bytes in UTF-8
    }
    // CSV: empty cells; JSON: null.
    const Ran csv = servesim(std::string(kRejected) + " --format csv", false);
    CHECK(contains(csv.output, ",rejected,"));
    const auto json = nlohmann::json::parse(servesim(std::string(kRejected) + " --format json", false).output);
    CHECK(json[0]["ttft_ms_p50"].is_null());
    CHECK(json[0]["status"] == "rejected");
}

TEST_CASE("CLI output: an --out folder that cannot be created stops the run before it simulates",
          "[tools][cli][output]") {
    const std::string file = std::string(SERVESIM_TEST_DATA_DIR) + "/tools/output_cli_test.cpp";
    const Ran r = servesim("run --out '" + file + "/out'");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "servesim: error: --out " + file + "/out: cannot create the folder"));
    CHECK(!contains(r.output, "wall time"));  // nothing was simulated
}

TEST_CASE("CLI output: --format vllm-bench with --goodput prints vllm bench serve's result keys",
          "[tools][cli][output]") {
    const Ran r = servesim("run --model Qwen3-4B --request-rate 5 --num-prompts 30 --random-input-len 200 "
                           "--random-output-len 20 --goodput ttft:1000 tpot:100 --format vllm-bench "
                           "--metric-percentiles 50,99",
                           false);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.output);
    REQUIRE(j.is_object());  // one run: one object, as vllm bench serve writes it
    CHECK(j["completed"] == 30);
    CHECK(j["num_prompts"] == 30);
    CHECK(j["request_rate"] == 5.0);
    CHECK(j["total_input_tokens"] == 30 * 200);
    CHECK(j["total_output_tokens"] == 30 * 20);
    // Bounds of 1 s and 100 ms on an idle H200: every request is good, goodput = throughput.
    CHECK(j["request_goodput"] == j["request_throughput"]);
    for (const char* key : {"duration", "output_throughput", "total_token_throughput", "mean_ttft_ms",
                            "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                            "p99_tpot_ms", "mean_itl_ms", "std_itl_ms", "p99_itl_ms"}) {
        INFO(key);
        CHECK(j[key].is_number());
    }
    CHECK(!j.contains("mean_e2el_ms"));  // not in the tool's default --percentile-metrics
}

TEST_CASE("CLI output: --replicates reports mean [min–max] per figure and counts the runs", "[tools][cli][output]") {
    const Ran r = servesim("run --model Qwen3-4B --request-rate 5 --num-prompts 30 --random-input-len 200 "
                           "--random-output-len 20 --replicates 3");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(contains(r.output, "servesim: 1 experiment(s), 3 runs with replicates in "));
    CHECK(contains(row(r.output, "ttft_ms_p50"), " ["));
    CHECK(contains(row(r.output, "ttft_ms_p50"), "–"));
    CHECK(contains(row(r.output, "replicates"), "3"));
    // A workload seed (vllm bench serve's --seed) pins the draws: said, not hidden.
    const Ran pinned = servesim("run --model Qwen3-4B --request-rate 5 --num-prompts 10 --random-input-len 200 "
                                "--random-output-len 20 --replicates 2 --set workload.seed=3");
    CHECK(contains(pinned.output, "workload.seed is set: the 2 replicates draw the same requests"));
}

TEST_CASE("CLI output: --format multi-turn-bench prints the multi-turn benchmark's table per experiment",
          "[tools][cli][output][multi_turn]") {
    // The example's three experiments; the command line keeps the request records this format is computed from.
    const Ran r = servesim("run '" + std::string(SERVESIM_TEST_DATA_DIR) +
                               "/../scenarios/clients/multi-turn-bench.yaml' --format multi-turn-bench",
                           false);
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::size_t tables = 0;
    for (auto at = r.output.find("Statistics summary:\n"); at != std::string::npos;
         at = r.output.find("Statistics summary:\n", at + 1)) {
        ++tables;
    }
    CHECK(tables == 3);
    CHECK(!contains(r.output, "No samples to process"));
    CHECK(contains(r.output, "\ninput_num_turns "));
    CHECK(contains(r.output, "\nrequests_per_sec = "));
    CHECK(contains(r.output, "name=8-clients-1rps-sleep\n"));
    // A format that is not one is refused by name.
    const Ran bad = servesim("run --model Qwen3-4B --num-prompts 5 --format multi-turn");
    CHECK(bad.status != 0);
    CHECK(contains(bad.output, "allowed: table, json, csv, vllm-bench, multi-turn-bench"));
    // --warmup-percentages belongs to this format, and is checked before anything runs.
    const Ran other = servesim("run --model Qwen3-4B --num-prompts 5 --warmup-percentages 50%");
    CHECK(other.status != 0);
    CHECK(contains(other.output, "--warmup-percentages: applies to --format multi-turn-bench only"));
    const Ran wrong = servesim("run --model Qwen3-4B --num-prompts 5 --format multi-turn-bench "
                               "--warmup-percentages 0%,100%");
    CHECK(wrong.status != 0);
    CHECK(contains(wrong.output, "--warmup-percentages: '100%' is not a percentage"));
}

}  // namespace

namespace {

TEST_CASE("CLI output: a KV pool the GPU could not hold is run as a what-if, with a warning that says so",
          "[tools][cli][output]") {
    // engine.kv_cache_memory_bytes is used as written (vLLM skips its memory profile). 500 GiB plus Qwen3-4B's
    // 7.5 GiB of bf16 weights exceed the H100 SXM's 79.1 GiB (84,932,978,278 bytes, calibration/gpus/H100-SXM.yaml).
    const Ran r = servesim("run --model Qwen3-4B --gpu H100 --kv-cache-memory-bytes 500GiB --num-prompts 10");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "servesim: warning: experiment 'command-line': engine.kv_cache_memory_bytes: a 500.0 GiB "
                             "pool and 7.5 GiB of weights exceed the GPU's 79.1 GiB; vLLM could not allocate it"));
    // 60 GiB fits beside the weights: no warning.
    const Ran fits = servesim("run --model Qwen3-4B --gpu H100 --kv-cache-memory-bytes 60GiB --num-prompts 10");
    CHECK_FALSE(contains(fits.output, "could not allocate"));
    // A plain number is bytes: 12 is refused before anything runs, with the likely meaning.
    const Ran tiny = servesim("run --model Qwen3-4B --gpu H100 --kv-cache-memory-bytes 12 --num-prompts 10");
    CHECK(tiny.status == 2);
    CHECK(contains(tiny.output, "too small to hold one KV block; did you mean 12GiB?"));
}

}  // namespace
