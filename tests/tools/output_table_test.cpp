// The table of a sweep (tools/app/output_table.cpp, docs/OUTPUTS.md "The table of a sweep"): the headline's answer
// per model from hand-set statuses, the compact columns, --all-columns, and the quickstart as `servesim run` prints
// it (issue 39: "the quickstart shows where it breaks").
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"

namespace servesim::app {
namespace {

using servesim::test::contains;

// A timed sweep point of `model` at `rate` with a hand-set status and figures.
ExperimentResult point(const std::string& model, int rate, RunStatus status, const std::string& reason = "") {
    ExperimentResult r;
    r.config.name = model + " rate=" + std::to_string(rate);
    r.config.columns = {{"experiment", model}, {"rate", std::to_string(rate)}};
    r.config.model = model;
    r.config.cost_model = "roofline";
    r.model_name = model;
    r.gpu_name = "H200";
    r.workload = "400 tenants";
    r.status = status;
    r.status_reason = reason;
    auto& s = r.sim.summary;
    s.num_requests_sent = 100;
    s.num_requests_finished = 100;
    s.duration_s = 10;
    s.throughput_rps = rate * 0.9;  // 0.9 of the offered rate, so each point's figure is its own
    s.ttft_ms = {.p50 = 20, .p90 = 30, .p95 = 35, .p99 = 40.0 + rate, .mean = 22, .max = 90, .count = 100, .min = 5};
    s.tpot_ms = {.p50 = 3, .p90 = 4, .p95 = 4.5, .p99 = 5, .mean = 3.2, .max = 9, .count = 100, .min = 2};
    return r;
}

const char* kHeldBack = "the clients were held back: they sent 31.3 req/s of the 70 offered";

TEST_CASE("Table of a sweep: the headline says per model the highest ok load and where it broke",
          "[tools][output][table]") {
    // Points in sweep order (rate outer), as the scenario expands them; A breaks at 50, B never, C at its lowest
    // point, D at 30 and is ok again at 50.
    std::vector<ExperimentResult> results;
    for (int rate : {10, 30, 50}) {
        results.push_back(point("A", rate, rate >= 50 ? RunStatus::kOverloaded : RunStatus::kOk, kHeldBack));
        results.push_back(point("B", rate, RunStatus::kOk));
        results.push_back(point("C", rate, RunStatus::kTooShort, "the send window is short"));
        results.push_back(point("D", rate, rate == 30 ? RunStatus::kOverloaded : RunStatus::kOk, kHeldBack));
    }
    const std::string table = format_table(results, true);
    INFO(table);
    CHECK(table.rfind("simulated: A, B, C and D on H200 (roofline), rate = 10, 30, 50 (first point: 400 "
                      "tenants)\n",
                      0) == 0);
    // A at 30: TTFT p99 40 + 30 = 70 ms, TPOT p99 5 ms, 0.9 · 30 = 27 req/s.
    CHECK(contains(table, "\n  A  ok up to rate = 30 (TTFT p99 70.0 ms, TPOT p99 5.0 ms, 27.0 req/s served); "
                          "overloaded from rate = 50 (the clients were held back)\n"));
    // B at 50: 90 ms, 45 req/s.
    CHECK(contains(table, "\n  B  ok at every point, up to rate = 50 (TTFT p99 90.0 ms, TPOT p99 5.0 ms, 45.0 req/s "
                          "served): the knee is beyond the sweep\n"));
    CHECK(contains(table, "\n  C  not ok at the lowest point: too_short from rate = 10 (the send window is short)\n"));
    CHECK(contains(table, "\n  D  ok up to rate = 10 (TTFT p99 50.0 ms, TPOT p99 5.0 ms, 9.0 req/s served); "
                          "overloaded from rate = 30 (the clients were held back); ok again at rate = 50\n"));
    // The rows: grouped by model, by rate within; experiment = model, so only `model`; the planner's figures.
    std::istringstream in(table.substr(table.find("\n\n") + 2));
    std::string header;
    std::getline(in, header);
    CHECK(header.rfind("model  rate  status      ttft_ms_p50  ttft_ms_p99  tpot_ms_p50  tpot_ms_p99  throughput_rps  "
                       "prefix_cache_hit_rate  kv_usage_max",
                       0) == 0);
    std::vector<std::string> first_words;
    for (std::string line; std::getline(in, line);) {
        first_words.push_back(line.substr(0, line.find("  ")) + " " + line.substr(7, 2));
    }
    CHECK(first_words == std::vector<std::string>{"A 10", "A 30", "A 50", "B 10", "B 30", "B 50", "C 10", "C 30",
                                                  "C 50", "D 10", "D 30", "D 50"});
}

TEST_CASE("Table of a sweep: --all-columns prints every field, one column per point", "[tools][output][table]") {
    const std::vector<ExperimentResult> results = {point("A", 10, RunStatus::kOk), point("A", 30, RunStatus::kOk)};
    const std::string all = format_table(results, true, /*all_columns=*/true);
    INFO(all);
    CHECK(contains(all.substr(0, all.find("\nmodel ")), "A rate=10"));  // the header line names the points
    CHECK(contains(all.substr(0, all.find("\nmodel ")), "A rate=30"));
    CHECK(contains(all, "\nitl_ms_p95 "));   // a field the compact rows leave out
    CHECK(contains(all, "\nqueue_ms_p50 "));
    CHECK(!contains(format_table(results, true), "queue_ms_p50"));
    // A sweep without a numeric swept key: what was simulated, no answer lines.
    std::vector<ExperimentResult> gpus = results;
    gpus[0].config.columns = {{"experiment", "A"}, {"gpu", "H100"}};
    gpus[1].config.columns = {{"experiment", "A"}, {"gpu", "H200"}};
    const std::string by_gpu = format_table(gpus, true);
    CHECK(by_gpu.rfind("simulated: A on H200 (roofline), gpu = H100, H200 (first point: 400 tenants)\nmodel", 0) == 0);
}

TEST_CASE("CLI: the quickstart (servesim run) shows where each model breaks", "[tools][cli][output][table]") {
    const auto r = servesim::test::run_servesim("run", "", false);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.rfind("simulated: Qwen3-4B and Qwen3.5-4B on H200 (roofline), rate = 10, 30, 50, 70, 90 (first "
                         "point: 400 tenants",
                         0) == 0);
    // The knee is inside the sweep for both models: each line says up to where it held and where it broke (the
    // full-attention model's 863k-token cache cannot hold 400 tenants' ~1.1M tokens of context, so it breaks first;
    // the figures are the simulation's, their place in the line is the test).
    for (const char* model : {"Qwen3-4B    ok up to rate = ", "Qwen3.5-4B  ok up to rate = "}) {
        const auto at = r.output.find(std::string("\n  ") + model);
        REQUIRE(at != std::string::npos);
        const std::string line = r.output.substr(at + 3, r.output.find('\n', at + 3) - at - 3);
        CHECK(contains(line, " from rate = "));
        CHECK(!contains(line, "beyond the sweep"));
    }
    CHECK(contains(r.output, "Qwen3-4B    ok up to rate = 50 "));
    CHECK(contains(r.output, "overloaded from rate = 70"));
    CHECK(contains(r.output, "Qwen3.5-4B  ok up to rate = 70 "));
    CHECK(contains(r.output, "overloaded from rate = 90"));
    // The header and ten rows (2 models × 5 rates), no more: the compact table (the leading newline is the blank
    // line's).
    const std::string rows = r.output.substr(r.output.find("\nmodel "));
    CHECK(std::count(rows.begin(), rows.end(), '\n') == 12);
}

}  // namespace
}  // namespace servesim::app
