// What a run reports (tools/app/output, tools/app/experiment; docs/OUTPUTS.md): a status and a warning for every
// run that measured less than it seems to, missing figures printed as missing (never 0), what produced the answer,
// columns that mean one thing, goodput and the `vllm bench serve` result JSON on a hand-timed run, replicates.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/output_vllm_bench.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

bool close(double a, double b) { return std::abs(a - b) < 1e-9 * std::max(1.0, std::abs(b)); }

std::vector<ExperimentResult> run_text(const std::string& text, int jobs = 1,
                                       const std::vector<std::string>& sets = {}) {
    Scenario sc = load_scenario_text(text, "output_test.yaml", sets, std::nullopt);
    for (auto& x : sc.experiments) {
        x.keep_request_records = true;  // as the command line sets it for requests.csv and --format vllm-bench
    }
    return run_experiments(sc.experiments, jobs, {});
}

std::vector<std::string> csv_header(const std::string& csv) {
    std::vector<std::string> names;
    std::string line = csv.substr(0, csv.find('\n'));
    std::string cur;
    bool quoted = false;
    for (char ch : line) {
        if (ch == '"') {
            quoted = !quoted;
        } else if (ch == ',' && !quoted) {
            names.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    names.push_back(cur);
    return names;
}

// Value of column `name` in CSV row `row` (1 = first data row); no quoted commas in the columns read here.
std::string csv_value(const std::string& csv, const std::string& name, int row) {
    const auto header = csv_header(csv);
    const auto col = static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    std::istringstream in(csv);
    std::string line;
    for (int i = 0; i <= row; ++i) {
        std::getline(in, line);
    }
    // split honouring quotes
    std::vector<std::string> cells;
    std::string cur;
    bool quoted = false;
    for (char ch : line) {
        if (ch == '"') {
            quoted = !quoted;
        } else if (ch == ',' && !quoted) {
            cells.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    cells.push_back(cur);
    return col < cells.size() ? cells[col] : "<no column>";
}

// 200 requests of 100,000 + 100 tokens on Qwen3-4B (max_model_len 40,960 by default): every one refused.
const char* kAllRejected = R"(
name: rejected
model: Qwen3-4B
gpu: H200
workload: {type: synthetic, prompt_tokens: 100000, output_tokens: 100, arrival: poisson, rate: 10, num_requests: 200}
)";

TEST_CASE("Output: a run whose requests are all rejected says so and prints no latency", "[tools][output]") {
    const auto results = run_text(kAllRejected);
    REQUIRE(results.size() == 1);
    const ExperimentResult& r = results.front();
    CHECK(r.status == RunStatus::kRejected);
    REQUIRE(!r.warnings.empty());
    CHECK(r.warnings.front() == "200 of 200 requests rejected: 200 longer than max_model_len: prompt + output up to "
                                "100,000 + 100 = 100,100 > max_model_len 40,960");
    const std::string csv = format_csv(results);
    CHECK(csv_value(csv, "status", 1) == "rejected");
    CHECK(csv_value(csv, "ttft_ms_p50", 1).empty());  // empty, not 0
    CHECK(csv_value(csv, "e2e_ms_mean", 1).empty());
    CHECK(csv_value(csv, "prefix_cache_hit_rate", 1).empty());
    const auto j = nlohmann::json::parse(format_json(results));
    CHECK(j[0]["ttft_ms_p50"].is_null());
    CHECK(j[0]["itl_ms_p99"].is_null());
    CHECK(j[0]["requests_rejected"] == 200);
    const std::string table = format_table(results, false);
    CHECK(table.find("ttft_ms_p50") != std::string::npos);
    const auto line = table.substr(table.find("ttft_ms_p50"));
    CHECK(line.substr(0, line.find('\n')).find("—") != std::string::npos);
}

TEST_CASE("Output: a warm-up longer than the workload measures nothing and says so", "[tools][output]") {
    // 20 requests at 10 req/s are all sent within ~2 s; the warm-up ends at 100 s.
    const auto results = run_text(R"(
name: late
model: Qwen3-4B
gpu: H200
warmup: 100s
workload: {type: synthetic, prompt_tokens: 100, output_tokens: 10, arrival: poisson, rate: 10, num_requests: 20}
)");
    const ExperimentResult& r = results.front();
    CHECK(r.status == RunStatus::kNoRequestsMeasured);
    REQUIRE(!r.warnings.empty());
    CHECK(r.warnings.front() ==
          "no request was sent in the measured window (after the warm-up of 100 s): nothing was measured");
    CHECK(csv_value(format_csv(results), "ttft_ms_p50", 1).empty());
    // The run ended (~2 s) before the window opened: it has no length, so no rate either.
    CHECK(csv_value(format_csv(results), "sent_rps", 1).empty());
    CHECK(csv_value(format_csv(results), "requests_sent", 1) == "0");
}

TEST_CASE("Output: prefix caching that can never hit is a warning (vLLM issue #48401)", "[tools][output]") {
    // Nemotron-H-8B on an H200 (0.34: prefix caching on, align): attention block 1,040 (docs/VLLM-VERSIONS.md).
    // A hit needs a prompt of B + 1 = 1,041 tokens (full blocks only, one token short of the prompt), and a prompt
    // is at most max_model_len − 1: max_model_len 1,041 allows 1,040-token prompts, never a hit → warned;
    // 1,042 allows a 1,041-token prompt that can hit the first block → no warning.
    const auto with_len = [](int max_model_len) {
        return run_text(fmt::format(R"(
name: inert
model: Nemotron-H-8B
gpu: H200
engine: {{max_model_len: {}}}
workload: {{type: synthetic, prompt_tokens: 900, output_tokens: 10, arrival: poisson, rate: 5, num_requests: 6}}
)",
                                    max_model_len))
            .front();
    };
    const ExperimentResult inert = with_len(1041);
    REQUIRE(inert.plan.block_size == 1040);
    const std::string expected =
        "prefix caching can never hit: the attention block (1,040 tokens) leaves no room for a cached block and a "
        "token after it within max_model_len 1,041 (vLLM caches full blocks only and does not warn, vLLM issue "
        "#48401); raise max_model_len to at least 1,042 or lower the block size";
    CHECK(std::find(inert.warnings.begin(), inert.warnings.end(), expected) != inert.warnings.end());
    const ExperimentResult ok = with_len(1042);
    for (const auto& w : ok.warnings) {
        CHECK(w.find("can never hit") == std::string::npos);
    }
}

// 3,000 requests of 4,000 + 200 tokens at 200 req/s on one H200: far beyond what one replica serves.
const char* kOverloaded = R"(
name: over
model: Qwen3-4B
gpu: H200
workload: {type: synthetic, prompt_tokens: 4000, output_tokens: 200, arrival: poisson, rate: 200, num_requests: 3000}
)";

TEST_CASE("Output: a run stopped by the default max_time is truncated, and the warning names the default",
          "[tools][output]") {
    // max_time 10 s: arrivals go on until ~15 s, so requests are left in the replica when the run stops.
    const auto results = run_text(kOverloaded, 1, {"max_time=10s"});
    const ExperimentResult& r = results.front();
    CHECK(r.status == RunStatus::kTruncatedByMaxTime);
    CHECK(r.sim.num_unfinished > 0);
    REQUIRE(!r.warnings.empty());
    CHECK(r.warnings.back().rfind("stopped at max_time 10 s before the workload was done, with ", 0) == 0);
    // Without the key the default (24 h) is named as such.
    ExperimentResult fake = r;
    fake.warnings.clear();
    fake.config.max_time_given = false;
    fake.config.max_time_s = 24 * 3600.0;
    assess_result(fake);
    CHECK(fake.warnings.back().rfind("stopped at max_time 86,400 s (the default; set the scenario key max_time) before "
                                     "the workload was done, with ",
                                     0) == 0);
    // A duration below a second is printed in ms (issue 39: `max_time: 10ms` was reported as "0 s").
    fake.warnings.clear();
    fake.config.max_time_given = true;
    fake.config.max_time_s = 0.01;
    assess_result(fake);
    CHECK(fake.warnings.back().rfind("stopped at max_time 10 ms before the workload was done, with ", 0) == 0);
}

TEST_CASE("Output: an open-loop rate beyond capacity is flagged overloaded", "[tools][output]") {
    const auto results = run_text(kOverloaded);
    const ExperimentResult& r = results.front();
    CHECK(r.sim.num_unfinished == 0);  // everything finished, after a long queue
    CHECK(r.status == RunStatus::kOverloaded);
    REQUIRE(!r.warnings.empty());
    // Every rule that applies is a warning; the queue rule, first, is the status's reason.
    CHECK(std::any_of(r.warnings.begin(), r.warnings.end(),
                      [](const std::string& w) { return w.rfind("overloaded: ", 0) == 0; }));
    CHECK(r.status_reason.find("the queue was still growing") != std::string::npos);
    CHECK(csv_value(format_csv(results), "status", 1) == "overloaded");
    // The quickstart, at 6 req/s on an idle H200, is ok.
    const auto quick = run_text(R"(
name: q
model: Qwen3-4B
gpu: H200
workload: {type: synthetic, prompt_tokens: 500, output_tokens: 50, arrival: poisson, rate: 5, num_requests: 200}
)");
    CHECK(quick.front().status == RunStatus::kOk);
    CHECK(quick.front().warnings.empty());
}

TEST_CASE("Output: a profile measured for another model is refused, naming the file and both models",
          "[tools][output]") {
    const std::string text = R"(
name: mismatch
model: Qwen3-8B
gpu: H200
cost_model: calibration/profiles/h200/Qwen3-4B.yaml
workload: {type: synthetic, prompt_tokens: 100, output_tokens: 10, arrival: poisson, rate: 5, num_requests: 10}
)";
    try {
        (void)run_text(text);
        FAIL("a mismatched profile was accepted");
    } catch (const ConfigError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("calibration/profiles/h200/Qwen3-4B.yaml") != std::string::npos);
        CHECK(msg.find("measured for 'Qwen3-4B', the experiment runs 'Qwen3-8B'") != std::string::npos);
        CHECK(msg.find("allow_profile_mismatch: true") != std::string::npos);
    }
    // On a GPU other than the profile's, too.
    try {
        (void)run_text(std::string(text) + "\n", 1, {"model=Qwen3-4B", "gpu=B200"});
        FAIL("a profile of another GPU was accepted");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("measured on 'NVIDIA H200', the experiment runs on 'B200'") !=
              std::string::npos);
    }
    // Accepted on purpose: the output says what differs.
    const auto results = run_text(text, 1, {"allow_profile_mismatch=true"});
    const std::string csv = format_csv(results);
    CHECK(csv.find("model: the profile was measured for 'Qwen3-4B', the experiment runs 'Qwen3-8B'") !=
          std::string::npos);
    CHECK(csv_value(csv, "cost_model", 1).rfind("profile calibration/profiles/h200/Qwen3-4B.yaml", 0) == 0);
    CHECK(csv_value(csv, "vllm_version", 1) == "0.34");  // the default, the newest modelled release
}

const char* kBlockSweep = R"(
name: columns
model: Qwen3.5-4B
gpu: H200
engine: {enable_prefix_caching: true, kv_cache_memory_bytes: 2GiB, max_model_len: 4096}
workload: {type: synthetic, prompt_tokens: 300, output_tokens: 10, arrival: poisson, rate: 5, num_requests: 10}
sweep:
  engine.block_size: [16, 32]
  gpu: [H200, h100]
)";

TEST_CASE("Output: a swept key and the value vLLM resolved from it are two columns, never one name twice",
          "[tools][output]") {
    const auto results = run_text(kBlockSweep);
    REQUIRE(results.size() == 4);
    const std::string csv = format_csv(results);
    const auto header = csv_header(csv);
    CHECK(std::set<std::string>(header.begin(), header.end()).size() == header.size());
    // The hybrid raises a requested 16 to 528 and 32 to 544 (vLLM _align_hybrid_block_size); "h100" is the H100-SXM.
    CHECK(csv_value(csv, "block_size", 1) == "16");
    CHECK(csv_value(csv, "effective_block_size", 1) == "528");
    CHECK(csv_value(csv, "gpu", 2) == "h100");
    CHECK(csv_value(csv, "gpu_name", 2) == "H100-SXM");
    CHECK(csv_value(csv, "block_size", 3) == "32");
    CHECK(csv_value(csv, "effective_block_size", 3) == "544");
    // JSON keeps the types: the swept block size is a number, the GPU a string, prefix caching a boolean.
    const auto j = nlohmann::ordered_json::parse(format_json(results));
    CHECK(j[0]["block_size"].is_number_integer());
    CHECK(j[0]["block_size"] == 16);
    CHECK(j[0]["gpu"] == "H200");
    CHECK(j[0]["enable_prefix_caching"] == true);
    CHECK(j[0]["offered_rps"] == 5.0);
    // bench_serve's offered rate is its request_rate (vllm bench serve --request-rate); inf has none.
    const std::string bench = R"(
name: bench
model: Qwen3-4B
gpu: H200
workload: {type: bench_serve, dataset_name: random, num_prompts: 10, random_input_len: 100, random_output_len: 5,
           request_rate: 7.5}
)";
    CHECK(nlohmann::json::parse(format_json(run_text(bench)))[0]["offered_rps"] == 7.5);
    const auto bench_json = nlohmann::json::parse(format_vllm_bench(run_text(bench, 1, {"workload.max_concurrency=4"}),
                                                                   BenchOptions{}));
    CHECK(bench_json["request_rate"] == 7.5);
    CHECK(bench_json["max_concurrency"] == 4);
    CHECK(bench_json["burstiness"] == 1.0);  // vllm bench serve's default --burstiness
    // Tenants paced by a sleep after each answer send at no set rate.
    const std::string tenants = R"(
name: tenants
model: Qwen3-4B
gpu: H200
workload: {type: tenants, tenants: 2, system_prompt_tokens: 100, turns_per_dialogue: 2, user_tokens: 20,
           answer_tokens: 5, arrival: poisson, rate: 4, num_requests: 8}
)";
    CHECK(nlohmann::json::parse(format_json(run_text(tenants)))[0]["offered_rps"] == 4.0);
    const auto slept = run_text(tenants, 1, {"workload.pacing=sleep_after_answer"});
    CHECK(nlohmann::json::parse(format_json(slept))[0]["offered_rps"].is_null());
    const auto all_at_once = run_text(bench, 1, {"workload.request_rate=inf"});
    CHECK(nlohmann::json::parse(format_json(all_at_once))[0]["offered_rps"].is_null());
    CHECK(nlohmann::json::parse(format_vllm_bench(all_at_once, BenchOptions{}))["request_rate"] == "inf");
    // The same field set, in the same order, in CSV and JSON; the table has one row per field except the name.
    std::vector<std::string> keys;
    for (auto it = j[0].begin(); it != j[0].end(); ++it) {
        keys.push_back(it.key());
    }
    CHECK(keys == header);
    const std::string table = format_table({results.front()}, false);
    for (const auto& k : header) {
        if (k != "name") {
            CHECK(table.find("\n" + k + " ") != std::string::npos);
        }
    }
    // Any other swept key that names a resolved figure keeps the requested value; the resolved one is effective_<name>.
    const auto other = run_text(R"(
name: other
model: Qwen3-4B
gpu: H200
workload: {type: synthetic, prompt_tokens: 300, output_tokens: 10, arrival: poisson, rate: 5, num_requests: 5}
sweep:
  engine.max_model_len: [2048]
  engine.vllm_version: ["0.26"]
  cost_model: [roofline]
)");
    const std::string other_csv = format_csv(other);
    const auto other_header = csv_header(other_csv);
    CHECK(std::set<std::string>(other_header.begin(), other_header.end()).size() == other_header.size());
    CHECK(csv_value(other_csv, "max_model_len", 1) == "2048");
    CHECK(csv_value(other_csv, "effective_max_model_len", 1) == "2048");
    CHECK(csv_value(other_csv, "vllm_version", 1) == "0.26");
    CHECK(csv_value(other_csv, "effective_vllm_version", 1) == "0.26");
    CHECK(csv_value(other_csv, "cost_model", 1) == "roofline");
    CHECK(csv_value(other_csv, "effective_cost_model", 1).rfind("roofline H200 (", 0) == 0);
    const auto other_json = nlohmann::json::parse(format_json(other));
    CHECK(other_json[0]["vllm_version"] == "0.26");  // a release name, not the number 0.26
    CHECK(other_json[0]["max_model_len"] == 2048);
    // Fixed point, no exponent, anywhere in the CSV: no digit, 'e', sign, digit (text such as "inference-perf" in
    // the validation band's source is not a number).
    CHECK_FALSE(std::regex_search(csv, std::regex("[0-9][eE][-+][0-9]")));
}

// Three requests timed by hand (ms), one more rejected; prompts 100, 200, 300 tokens:
//   A sent 0,  tokens at 10, 14, 20 → TTFT 10, E2E 20, TPOT (20 − 10)/2 = 5, gaps 4 and 6;
//   B sent 5,  one token at 15     → TTFT 10, E2E 10, no TPOT (goodput counts it as 0);
//   C sent 10, tokens at 30, 38    → TTFT 20, E2E 28, TPOT 8, gap 8.
// The window is [0, 38 ms]: duration 0.038 s.
ExperimentResult hand_timed(const GoodputConfig& goodput) {
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true, /*keep_request_records=*/true);
    auto at = [](double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(ms * 1e6))); };
    for (double t : {0.0, 1.0, 5.0, 10.0}) {
        m.on_sent(at(t));
    }
    m.on_rejected(at(1), metrics::RejectReason::kLongerThanMaxModelLen, 50000, 10);
    m.on_token_gap(at(0), core::Duration::from_ms(4));
    m.on_token_gap(at(0), core::Duration::from_ms(6));
    m.on_token_gap(at(10), core::Duration::from_ms(8));
    m.on_finished({at(0), at(0), at(10), at(20), 100, 3, 0, core::Duration::from_ms(6), 0});
    m.on_finished({at(5), at(5), at(15), at(15), 200, 1, 0, core::Duration(), 0});
    m.on_finished({at(10), at(12), at(30), at(38), 300, 2, 0, core::Duration::from_ms(8), 1});
    ExperimentResult r;
    r.config.name = "hand";
    r.config.goodput = goodput;
    r.model_name = "Qwen3-4B";
    r.sim.summary = m.summarize({}, 0, at(38));
    assess_result(r);
    return r;
}

TEST_CASE("Output: goodput counts the requests meeting every bound, as vllm bench serve --goodput", "[tools][output]") {
    // ttft ≤ 10 and tpot ≤ 6: A (10, 5) and B (10, 0) are good, C (TTFT 20) is not → 2 / 0.038 s.
    const ExperimentResult r = hand_timed(GoodputConfig{10.0, 6.0, std::nullopt});
    REQUIRE(r.num_requests_good);
    CHECK(*r.num_requests_good == 2);
    CHECK(close(*r.request_goodput_rps, 2 / 0.038));
    // e2el ≤ 19: only B (10).
    CHECK(count_good_requests(r.sim.summary.requests, GoodputConfig{std::nullopt, std::nullopt, 19.0}) == 1);
    // tpot ≤ 4.9: B only (0); A has 5, C 8.
    CHECK(count_good_requests(r.sim.summary.requests, GoodputConfig{std::nullopt, 4.9, std::nullopt}) == 1);
    // The figure is a column of every output.
    const std::string csv = format_csv({r});
    CHECK(close(std::stod(csv_value(csv, "request_goodput", 1)), 52.631579));
}

TEST_CASE("Output: the scenario key goodput adds request_goodput to every format; bad bounds are refused",
          "[tools][output]") {
    const std::string text = R"(
name: slo
model: Qwen3-4B
gpu: H200
goodput: {ttft: 100000, e2el: 100000}
workload: {type: synthetic, prompt_tokens: 500, output_tokens: 20, arrival: poisson, rate: 5, num_requests: 50}
)";
    // Bounds of 100 s: every one of the 50 requests is good, so goodput equals the request throughput.
    const auto results = run_text(text);
    const ExperimentResult& r = results.front();
    REQUIRE(r.num_requests_good);
    CHECK(*r.num_requests_good == 50);
    CHECK(close(*r.request_goodput_rps, r.sim.summary.throughput_rps));
    const auto j = nlohmann::json::parse(format_json(results));
    CHECK(close(j[0]["request_goodput"], r.sim.summary.throughput_rps));
    CHECK(format_table(results, false).find("\nrequest_goodput ") != std::string::npos);
    CHECK(csv_header(format_csv(results)).size() == j[0].size());
    // Without the key the columns are absent, not 0.
    CHECK(format_csv(run_text(kAllRejected)).find("request_goodput") == std::string::npos);
    // vllm bench serve check_goodput_args: names ttft, tpot, e2el; values non-negative.
    CHECK_THROWS_AS(run_text(text, 1, {"goodput.ttft=-1"}), ConfigError);
    CHECK_THROWS_AS(run_text(text, 1, {"goodput.latency=5"}), ConfigError);
}

TEST_CASE("Output: --format vllm-bench writes vllm bench serve's keys with its definitions", "[tools][output]") {
    const ExperimentResult r = hand_timed(GoodputConfig{10.0, 6.0, std::nullopt});
    const BenchOptions o = parse_bench_options("ttft,tpot,itl,e2el", "50,99");
    const auto j = nlohmann::json::parse(format_vllm_bench({r}, o));
    REQUIRE(j.is_object());
    CHECK(close(j["duration"], 0.038));
    CHECK(j["completed"] == 3);
    CHECK(j["failed"] == 1);  // the rejected one
    CHECK(j["num_prompts"] == 4);
    CHECK(j["total_input_tokens"] == 600);
    CHECK(j["total_output_tokens"] == 6);
    CHECK(close(j["request_throughput"], 3 / 0.038));
    CHECK(close(j["request_goodput"], 2 / 0.038));
    CHECK(close(j["output_throughput"], 6 / 0.038));
    CHECK(close(j["total_token_throughput"], 606 / 0.038));
    // TTFT 10, 10, 20: mean 13.333; median 10; np.std (population) √(((10/3)²·2 + (20/3)²)/3) = √(200/9) = 4.714;
    // p99 at rank 0.99·2 = 1.98 → 10 + 0.98·10 = 19.8.
    CHECK(close(j["mean_ttft_ms"], 40.0 / 3));
    CHECK(close(j["median_ttft_ms"], 10));
    CHECK(close(j["std_ttft_ms"], std::sqrt(200.0 / 9)));
    CHECK(close(j["p50_ttft_ms"], 10));
    CHECK(close(j["p99_ttft_ms"], 19.8));
    // TPOT 5, 8 (B has none): mean 6.5, std 1.5, p99 5 + 0.99·3 = 7.97.
    CHECK(close(j["mean_tpot_ms"], 6.5));
    CHECK(close(j["std_tpot_ms"], 1.5));
    CHECK(close(j["p99_tpot_ms"], 7.97));
    // ITL pooled 4, 6, 8: mean 6, std √(8/3), median 6, p99 6 + 0.98·2 = 7.96.
    CHECK(close(j["mean_itl_ms"], 6));
    CHECK(close(j["std_itl_ms"], std::sqrt(8.0 / 3)));
    CHECK(close(j["median_itl_ms"], 6));
    CHECK(close(j["p99_itl_ms"], 7.96));
    // E2E 20, 10, 28: mean 58/3; median 20; std √(((2/3)² + (28/3)² + (26/3)²)/3) = √(1464/27); p99 20 + 0.98·8.
    CHECK(close(j["mean_e2el_ms"], 58.0 / 3));
    CHECK(close(j["median_e2el_ms"], 20));
    CHECK(close(j["std_e2el_ms"], std::sqrt(1464.0 / 27)));
    CHECK(close(j["p99_e2el_ms"], 27.84));
    // Defaults as the tool's: ttft, tpot, itl with p99 only; no goodput config → request_goodput null.
    const auto d = nlohmann::json::parse(format_vllm_bench({hand_timed({})}, BenchOptions{}));
    CHECK(d.contains("p99_ttft_ms"));
    CHECK(!d.contains("p50_ttft_ms"));
    CHECK(!d.contains("mean_e2el_ms"));
    CHECK(d["request_goodput"].is_null());
    // Bad flags are refused by name.
    CHECK_THROWS_AS(parse_bench_options("ttft,latency", ""), ConfigError);
    CHECK_THROWS_AS(parse_bench_options("", "99,101"), ConfigError);
    // Pooled ITLs keep p50, p90, p95 (issue 39) and p99: another percentile for itl is refused.
    CHECK_THROWS_AS(format_vllm_bench({r}, parse_bench_options("itl", "97")), ConfigError);
}

TEST_CASE("Output: bimodal_split flags two clusters and not noise around one value", "[tools][output]") {
    // 1.0, 1.1 | 5.0, 5.1, 5.2: gap 3.9 > 0.5 · range 4.2, two values below → split after 2.
    CHECK(bimodal_split({5.1, 1.0, 5.0, 1.1, 5.2}) == std::optional<std::size_t>(2));
    // One outlier is not a cluster: 1, 5, 5.1, 5.2, 5.3 (one value below the gap).
    CHECK(!bimodal_split({1.0, 5.0, 5.1, 5.2, 5.3}));
    // Evenly spread: the largest gap (1) is a quarter of the range (4).
    CHECK(!bimodal_split({1, 2, 3, 4, 5}));
    // Two clusters closer than 10 % of the mean: 100, 100.1 | 104, 104.1 (range 4.1 < 10.2).
    CHECK(!bimodal_split({100, 100.1, 104, 104.1}));
    // A fraction needs the stated minimum range: 0.001, 0.001 | 0.009, 0.009 has range 0.008 < 0.02.
    CHECK(!bimodal_split({0.001, 0.001, 0.009, 0.009}, 0.02));
    CHECK(bimodal_split({0.10, 0.11, 0.40, 0.41}, 0.02) == std::optional<std::size_t>(2));
}

const char* kReplicated = R"(
name: reps
model: Qwen3-4B
gpu: H200
replicates: 3
engine: {enable_prefix_caching: true, kv_cache_memory_bytes: 512MiB, max_model_len: 2048}
workload:
  type: tenants
  tenants: 4
  system_prompt_tokens: 500
  turns_per_dialogue: 3
  user_tokens: {dist: uniform, min: 50, max: 150}
  answer_tokens: {dist: uniform, min: 10, max: 40}
  arrival: poisson
  rate: 20
  num_requests: 40
sweep:
  workload.tenants: [2, 6]
)";

TEST_CASE("Output: replicates run seeds seed … seed+N−1 and report mean, min, max and std per figure",
          "[tools][output]") {
    const auto results = run_text(kReplicated);
    REQUIRE(results.size() == 2);
    REQUIRE(results[0].replicate_runs.size() == 3);
    std::vector<double> hit;
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(results[0].replicate_runs[i].config.seed == 1 + i);
        hit.push_back(results[0].replicate_runs[i].sim.summary.prefix_cache_hit_rate);
    }
    const auto j = nlohmann::json::parse(format_json(results));
    const double mean = (hit[0] + hit[1] + hit[2]) / 3;
    CHECK(close(j[0]["prefix_cache_hit_rate_mean"], mean));
    CHECK(close(j[0]["prefix_cache_hit_rate_min"], *std::min_element(hit.begin(), hit.end())));
    CHECK(close(j[0]["prefix_cache_hit_rate_max"], *std::max_element(hit.begin(), hit.end())));
    const double var = ((hit[0] - mean) * (hit[0] - mean) + (hit[1] - mean) * (hit[1] - mean) +
                        (hit[2] - mean) * (hit[2] - mean)) / 3;
    CHECK(close(j[0]["prefix_cache_hit_rate_std"], std::sqrt(var)));
    CHECK(j[0]["replicates"] == 3);
    CHECK(j[0]["seed"] == 1);
    CHECK(j[0]["kv_cache_tokens"].is_number_integer());  // a configuration figure stays one value
    CHECK(j[0].contains("bistable"));
    // The sweep table prints "mean [min–max]".
    const std::string table = format_table(results, true);
    CHECK(table.find(" [") != std::string::npos);
    CHECK(table.find("–") != std::string::npos);
    // Byte-identical whatever the thread count.
    const auto four = run_text(kReplicated, 4);
    CHECK(format_json(four) == format_json(results));
    CHECK(format_csv(four) == format_csv(results));
    CHECK(format_timeseries_csv(four) == format_timeseries_csv(results));
    CHECK(format_requests_csv(four) == format_requests_csv(results));
}

TEST_CASE("Output: requests.csv holds one row per measured finished request", "[tools][output]") {
    const ExperimentResult r = hand_timed({});
    const std::string csv = format_requests_csv({r});
    // Header plus A, B, C by arrival; B has one output token, so its ITL mean and max are empty.
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
    CHECK(csv.find("hand,1,0,0,10,5,6,20,100,0,3,0,0\n") != std::string::npos);
    CHECK(csv.find("hand,1,0.005,0,10,,,10,200,0,1,0,0\n") != std::string::npos);
    CHECK(csv.find("hand,1,0.01,2,20,8,8,28,300,0,2,0,1\n") != std::string::npos);
}

TEST_CASE("Output: --out is checked before simulating: a folder that cannot be created is refused by name",
          "[tools][output]") {
    // A regular file cannot hold a folder.
    const std::string file = std::string(SERVESIM_TEST_DATA_DIR) + "/tools/output_test.cpp";
    try {
        check_out_dir(file + "/out");
        FAIL("a folder under a file was accepted");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).rfind("--out " + file + "/out: cannot create the folder", 0) == 0);
    }
    // A creatable folder is created, and left without the probe file.
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "servesim-output-test-out";
    std::filesystem::remove_all(dir);
    check_out_dir(dir.string());
    CHECK(std::filesystem::is_directory(dir));
    CHECK(std::filesystem::is_empty(dir));
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace servesim::app
