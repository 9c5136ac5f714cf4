// `--format vllm-bench --save-detailed` (issue 39): the per-request lists vllm bench serve --save-detailed keeps
// (vllm/benchmarks/serve.py `benchmark`: input_lens, output_lens, ttfts, itls, errors; start_times as recent releases
// add), the peaks calculate_metrics computes, and the console block it prints, from hand-timed requests and from the
// binary.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <numeric>
#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"
#include "tools/app/experiment.h"
#include "tools/app/output_vllm_bench.h"

namespace servesim::app {
namespace {

using servesim::test::contains;

bool close(double a, double b) { return std::abs(a - b) < 1e-9 * std::max(1.0, std::abs(b)); }

core::SimTime at(double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

// Three requests, finishing B, A, C (send order A, B, C):
//   A sent 0 ms, first token 10, gaps 4 and 6 → done at 20; 100 + 3 tokens.
//   B sent 5 ms, first token 15, one token → done at 15; 200 + 1.
//   C sent 10 ms, first token 30, gap 8 → done at 38; 300 + 2.
ExperimentResult three_requests() {
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true, /*keep_request_records=*/true,
                                /*keep_request_itls=*/true);
    for (double t : {0.0, 5.0, 10.0}) {
        m.on_sent(at(t));
    }
    auto finish = [&](double sent, double first, std::vector<double> gaps_ms, std::int64_t prompt) {
        std::vector<core::Duration> gaps;
        double done = first;
        for (double g : gaps_ms) {
            gaps.push_back(core::Duration::from_ms(g));
            m.on_token_gap(at(sent), core::Duration::from_ms(g));
            done += g;
        }
        metrics::MetricsCollector::FinishedRequest f;
        f.arrival = at(sent);
        f.first_scheduled = at(sent);
        f.first_token = at(first);
        f.finish = at(done);
        f.prompt_tokens = prompt;
        f.output_tokens = static_cast<std::int64_t>(gaps_ms.size()) + 1;
        f.token_gaps = &gaps;
        m.on_finished(f);
    };
    finish(5, 15, {}, 200);
    finish(0, 10, {4, 6}, 100);
    finish(10, 30, {8}, 300);
    ExperimentResult r;
    r.config.name = "hand";
    r.model_name = "Qwen3-4B";
    r.sim.summary = m.summarize({}, 0, at(38));
    assess_result(r);
    return r;
}

TEST_CASE("vllm-bench --save-detailed: per-request lists in send order, peaks, exact ITL statistics",
          "[tools][output][vllm-bench]") {
    const ExperimentResult r = three_requests();
    BenchOptions options;
    options.save_detailed = true;
    const auto j = to_vllm_bench(r, options);
    CHECK(j["input_lens"] == nlohmann::ordered_json({100, 200, 300}));
    CHECK(j["output_lens"] == nlohmann::ordered_json({3, 1, 2}));
    REQUIRE(j["ttfts"].size() == 3);
    CHECK(close(j["ttfts"][0], 0.010));
    CHECK(close(j["ttfts"][1], 0.010));
    CHECK(close(j["ttfts"][2], 0.020));
    REQUIRE(j["itls"].size() == 3);
    REQUIRE(j["itls"][0].size() == 2);
    CHECK(close(j["itls"][0][0], 0.004));
    CHECK(close(j["itls"][0][1], 0.006));
    CHECK(j["itls"][1].empty());
    CHECK(close(j["itls"][2][0], 0.008));
    CHECK(close(j["start_times"][1], 0.005));
    CHECK(j["errors"] == nlohmann::ordered_json({"", "", ""}));
    CHECK(!j.contains("generated_texts"));  // no text is generated, none is made up
    // Peaks: all sends and ends in the first second's bucket (the last end 38 ms): 3 requests at once; chunks
    // A 3 + B 1 + C 2 = 6 in that second.
    CHECK(j["max_concurrent_requests"] == 3);
    CHECK(close(j["max_output_tokens_per_s"], 6));
    // ITLs pooled from the lists, A's then C's: 4, 6, 8 ms: mean 6, median 6, np.std √(8/3), p99 at rank 1.98:
    // 6 + 0.98 · 2 = 7.96.
    CHECK(close(j["mean_itl_ms"], 6));
    CHECK(close(j["median_itl_ms"], 6));
    CHECK(close(j["std_itl_ms"], std::sqrt(8.0 / 3)));
    CHECK(close(j["p99_itl_ms"], 7.96));
    // Any ITL percentile may be asked for with every gap kept (97 is refused without).
    BenchOptions p97 = parse_bench_options("itl", "97");
    CHECK_THROWS(check_bench_percentiles(p97));
    p97.save_detailed = true;
    check_bench_percentiles(p97);
    CHECK(close(to_vllm_bench(r, p97)["p97_itl_ms"], 6 + 0.94 * 2));  // rank 0.97 · 2 = 1.94
    // Without the flag: no lists, and no peak output rate (it needs every chunk's time): null, not 0.
    const auto plain = to_vllm_bench(r, BenchOptions{});
    CHECK(!plain.contains("itls"));
    CHECK(!plain.contains("input_lens"));
    CHECK(plain["max_output_tokens_per_s"].is_null());
    CHECK(plain["max_concurrent_requests"] == 3);
}

TEST_CASE("vllm-bench console block: the lines vllm bench serve prints when it ends", "[tools][output][vllm-bench]") {
    BenchOptions options;
    options.save_detailed = true;
    const std::string block = format_vllm_bench_console({three_requests()}, options);
    INFO(block);
    // Labels padded to 40, a space, values padded to 10 ("{:<40} {:<10}"); headers centred in 50.
    CHECK(block.rfind("============ Serving Benchmark Result ============\n"
                      "Successful requests:                     3         \n"
                      "Failed requests:                         0         \n"
                      "Benchmark duration (s):                  0.04      \n"
                      "Total input tokens:                      600       \n"
                      "Total generated tokens:                  6         \n",
                      0) == 0);
    // No rate (the hand run has none) and no concurrency cap: those lines are left out, as the tool leaves them.
    CHECK(!contains(block, "Request rate configured"));
    CHECK(!contains(block, "Maximum request concurrency"));
    CHECK(contains(block, "Peak output token throughput (tok/s):    6.00      \n"
                          "Peak concurrent requests:                3.00      \n"));
    // TTFT 10, 10, 20 ms: mean 13.33, median 10, p99 19.80.
    CHECK(contains(block, "---------------Time to First Token----------------\n"
                          "Mean TTFT (ms):                          13.33     \n"
                          "Median TTFT (ms):                        10.00     \n"
                          "P99 TTFT (ms):                           19.80     \n"));
    CHECK(contains(block, "---------------Inter-token Latency----------------\n"
                          "Mean ITL (ms):                           6.00      \n"
                          "Median ITL (ms):                         6.00      \n"
                          "P99 ITL (ms):                            7.96      \n"
                          "==================================================\n"));
    // Without --save-detailed the peak output rate is not measured, and the line says what would measure it.
    CHECK(contains(format_vllm_bench_console({three_requests()}, BenchOptions{}),
                   "Peak output token throughput (tok/s):    — (needs --save-detailed: every token's time)\n"));
}

TEST_CASE("CLI: --format vllm-bench --save-detailed writes the lists; the block goes to stderr",
          "[tools][cli][output][vllm-bench]") {
    const std::string run = "run --model Qwen3-4B --request-rate 10 --num-prompts 20 --random-input-len 200 "
                            "--random-output-len 10 --percentile-metrics ttft,tpot,itl,e2el --format vllm-bench";
    const auto r = servesim::test::run_servesim(run + " --save-detailed", "", false);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.output);  // stdout is the JSON alone
    REQUIRE(j["completed"] == 20);
    REQUIRE(j["itls"].size() == 20);
    double e2e_sum_s = 0;
    std::size_t gaps = 0;
    double gap_sum_s = 0;
    for (std::size_t i = 0; i < 20; ++i) {
        CHECK(j["output_lens"][i] == 10);
        CHECK(j["itls"][i].size() == 9);  // 10 tokens: 9 gaps after the first (one chunk per token)
        double sum = 0;
        for (double g : j["itls"][i]) {
            sum += g;
        }
        e2e_sum_s += j["ttfts"][i].get<double>() + sum;  // the tool's latency is TTFT plus the gaps after it
        gaps += j["itls"][i].size();
        gap_sum_s += sum;
        if (i > 0) {
            CHECK(j["start_times"][i].get<double>() >= j["start_times"][i - 1].get<double>());
        }
    }
    CHECK(std::abs(j["mean_e2el_ms"].get<double>() - e2e_sum_s / 20 * 1e3) < 1e-6 * j["mean_e2el_ms"].get<double>());
    CHECK(std::abs(j["mean_itl_ms"].get<double>() - gap_sum_s / static_cast<double>(gaps) * 1e3) < 1e-9);
    CHECK(j["max_output_tokens_per_s"].is_number());
    const auto with_block = servesim::test::run_servesim(run + " --save-detailed");
    CHECK(contains(with_block.output, "============ Serving Benchmark Result ============\n"
                                      "Successful requests:                     20        \n"));
    CHECK(contains(with_block.output, "Request rate configured (RPS):           10.00     \n"));
    CHECK(contains(with_block.output, "----------------End-to-end Latency----------------\n"));
    // Without the flag: the summary keys only.
    const auto plain = nlohmann::json::parse(servesim::test::run_servesim(run, "", false).output);
    CHECK(!plain.contains("itls"));
    CHECK(plain["max_output_tokens_per_s"].is_null());
    // The flag needs an output that carries the lists.
    const auto refused = servesim::test::run_servesim("run --model Qwen3-4B --num-prompts 5 --save-detailed");
    CHECK(refused.status == 2);
    CHECK(contains(refused.output, "--save-detailed: applies to --format vllm-bench or to --out DIR's bench.json"));
}

TEST_CASE("CLI: a --save-detailed result replays through servesim validate with no error",
          "[tools][cli][output][vllm-bench]") {
    // The lists are what validate reads from a real vllm bench serve run (lengths, TTFTs, ITLs, send times): the
    // simulator's own result, replayed with the same engine, must predict itself exactly.
    const auto path = std::filesystem::temp_directory_path() /
                      ("servesim-detailed-" + std::to_string(static_cast<long>(getpid())) + ".json");
    const auto ran = servesim::test::run_servesim(
        "run --model Qwen3-4B --request-rate 10 --num-prompts 50 --random-input-len 200 --random-output-len 20 "
        "--format vllm-bench --save-detailed > '" + path.string() + "'",
        "", false);
    REQUIRE(ran.status == 0);
    const auto v = servesim::test::run_servesim("validate '" + path.string() + "' --model Qwen3-4B --gpu H200");
    std::filesystem::remove(path);
    INFO(v.output);
    REQUIRE(v.status == 0);
    for (const char* metric : {"ttft_mean_ms", "ttft_p99_ms", "e2e_mean_ms", "e2e_p99_ms", "itl_mean_ms"}) {
        const auto at = v.output.find(std::string("  all        ") + metric);
        REQUIRE(at != std::string::npos);
        const std::string line = v.output.substr(at, v.output.find('\n', at) - at);
        CHECK(line.substr(line.size() - 5) == "+0.0%");
    }
}

}  // namespace
}  // namespace servesim::app
