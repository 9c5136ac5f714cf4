// `servesim validate` (tools/app/validation.h, docs/VALIDATION.md): measured runs read as their clients defined
// their figures, and compared with a replay.
#include "tools/app/validation.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::app {
namespace {

const std::string kDir = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/validation/";

bool near(const std::optional<double>& a, double b) { return a && std::abs(*a - b) < 1e-9; }

// Both fixtures hold the same four requests: sends 0, 0.5, 1.0, 1.5 s (after rebasing), three finished:
//   TTFT 20, 30, 40 ms; E2E 42 (20 + 10 + 12), 41 (30 + 11), 40 (one token); outputs 3, 2, 1; the fourth failed.
//   TTFT: mean 30, p50 30, p90 = 30 + 0.8 × 10 = 38 (numpy's linear rank 1.8), p99 = 39.8.
//   E2E: sorted 40, 41, 42: mean 41, p50 41, p90 41.8, p99 41.98.
//   Pooled ITL: Σ(E2E − TTFT) / Σ(output − 1) = (22 + 11 + 0) / (2 + 1 + 0) = 11 ms.
//   Window: first send 0 to last finish 1.0 + 0.040 = 1.04 s: 3 / 1.04 req/s, (3 + 2 + 1) / 1.04 tokens/s.
void check_hand_worked(const RunStats& s) {
    CHECK(near(s.completed, 3));
    CHECK(near(s.failed, 1));
    CHECK(near(s.ttft_mean_ms, 30));
    CHECK(near(s.ttft_p50_ms, 30));
    CHECK(near(s.ttft_p90_ms, 38));
    CHECK(near(s.ttft_p99_ms, 39.8));
    CHECK(near(s.e2e_mean_ms, 41));
    CHECK(near(s.e2e_p90_ms, 41.8));
    CHECK(near(s.e2e_p99_ms, 41.98));
    CHECK(near(s.itl_mean_ms, 11));
    CHECK(near(s.throughput_rps, 3 / 1.04));
    CHECK(near(s.output_tokens_per_s, 6 / 1.04));
}

TEST_CASE("validate: a vllm bench serve --save-detailed file is read as the tool computes its figures",
          "[tools][validate]") {
    const MeasuredRun run = read_measured_run(kDir + "bench-detailed.json", true);
    CHECK(run.format == "vllm-bench");
    REQUIRE(run.requests.size() == 4);
    CHECK(run.requests[1].send_s == 0.5);  // request_submit_times, rebased to the first send
    CHECK(run.requests[3].failed);
    REQUIRE(run.windows.size() == 1);
    check_hand_worked(run.windows[0].measured);
}

TEST_CASE("validate: a per-request CSV gives the same figures", "[tools][validate]") {
    const MeasuredRun run = read_measured_run(kDir + "requests.csv", true);
    CHECK(run.format == "requests-csv");
    REQUIRE(run.requests.size() == 4);
    CHECK(run.requests[0].send_s == 0.0);
    check_hand_worked(run.windows[0].measured);
}

TEST_CASE("validate: inference-perf's ITL is divided by the client's own token count", "[tools][validate]") {
    // (E2E mean − TTFT mean) / (counted − 1) = (41 − 30) / (2.1 − 1) = 10 ms with 2.1 tokens counted per answer.
    std::vector<MeasuredRequest> r(1);
    r[0].send_s = 0;
    r[0].output_tokens = 5;
    r[0].ttft_ms = 30;
    r[0].e2e_ms = 41;
    CHECK(near(client_stats(r, 2.1).itl_mean_ms, 10));
    CHECK(near(client_stats(r, std::nullopt).itl_mean_ms, 11.0 / 4));  // pooled: 11 ms over 4 gaps
}

TEST_CASE("validate: a prediction's error is signed, relative to the measurement", "[tools][validate]") {
    const MetricComparison m{"ttft_mean_ms", 30.0, 33.0};
    CHECK(near(m.error_pct(), 10.0));
    const MetricComparison unmeasured{"ttft_mean_ms", std::nullopt, 33.0};
    CHECK_FALSE(unmeasured.error_pct().has_value());
}

TEST_CASE("validate: overall errors are means over runs, kept apart for overloaded runs", "[tools][validate]") {
    // Run A: +10 %, run B: −20 % (both not overloaded): mean |err| 15, mean err −5. Run C overloaded: +50 %.
    auto run = [](const char* name, double predicted, bool overloaded) {
        RunComparison c;
        c.run = name;
        c.overloaded = overloaded;
        c.windows.push_back(WindowComparison{"all", {MetricComparison{"e2e_mean_ms", 100.0, predicted}}});
        return c;
    };
    const auto overall = overall_errors({run("A", 110, false), run("B", 80, false), run("C", 150, true)});
    REQUIRE(overall.size() == 3);
    CHECK(overall[0].runs == "not overloaded");
    CHECK(overall[0].num_runs == 2);
    CHECK(near(overall[0].mean_abs_error_pct, 15));
    CHECK(near(overall[0].mean_signed_error_pct, -5));
    CHECK(overall[1].runs == "overloaded");
    CHECK(near(overall[1].mean_abs_error_pct, 50));
    CHECK(overall[2].runs == "all");
    CHECK(overall[2].num_runs == 3);
    CHECK(near(overall[2].mean_signed_error_pct, 40.0 / 3));
}

TEST_CASE("validate: bad input names the file and the key", "[tools][validate]") {
    const auto message = [](const std::string& path, bool engine) {
        try {
            (void)read_measured_run(path, engine);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(message(kDir + "bench-detailed.json", false).find("give --model and --gpu") != std::string::npos);
    CHECK(message(kDir + "missing.json", true).find("missing.json: no such file") != std::string::npos);
    CHECK(message(kDir + "no-such-run", true).find("no-such-run: no such file or folder") != std::string::npos);
    CHECK(message(kDir, true).find("a folder without experiment.json") != std::string::npos);
    CHECK(message(kDir + "../traces/mooncake_small.jsonl", true).find("'send_s': missing") != std::string::npos);
}

}  // namespace
}  // namespace servesim::app
