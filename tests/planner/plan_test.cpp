// Tests of tools/app/plan.*: the planner's answers on a synthetic server worked out by hand — the largest
// sustainable rate (bisection), the fewest replicas for a target rate — and bad input refused before simulating.
//
// The server (tests/fixtures/planner/one-at-a-time.yaml): one request per step (max_num_seqs 1), every step 10 ms
// (the constant-10ms profile), each request a 16-token prompt with 1 output token, so it finishes in its first
// step; 200 requests at constant intervals 1/R. Below 100 req/s nothing queues: TTFT = 10 ms. Above, the server is
// busy from the first arrival and request k starts at 10k ms: TTFT_k = 10 + k·(10 − 1000/R) ms, largest for
// k = 199. With the SLO ttft_max ≤ 25 ms: 199·(10 − 1000/R) ≤ 15 ⟺ R ≤ 1000/(10 − 15/199) = 100.7595 req/s.
#include "tools/app/plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/command_line.h"

namespace servesim::app {
namespace {

// Equal within a relative tolerance (default 1e-9).
bool close(double a, double b, double rel = 1e-9) { return std::abs(a - b) <= rel * std::max(1.0, std::abs(b)); }

const std::string kScenario = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/planner/one-at-a-time.yaml";

PlanRequest base_request() {
    PlanRequest r;
    r.scenario_path = kScenario;
    std::ifstream in(kScenario);
    std::stringstream ss;
    ss << in.rdbuf();
    r.scenario_text = ss.str();
    r.slo = planner::parse_slo("ttft_max=25ms", "--slo");
    r.prices = planner::parse_prices("gpus: {H100: 2}", "prices.yaml", planner::PriceTable{});
    r.jobs = 2;
    return r;
}

// The worst replicate's TTFT max of a probe, as the tables print it (nullopt for a stopped probe).
std::optional<double> Planner_worst_ttft_max(const PlanProbe& p) {
    std::optional<double> out;
    if (p.stopped) {
        return out;
    }
    for (const auto& s : p.summaries) {
        out = std::max(out.value_or(0.0), s.ttft_ms.max);
    }
    return out;
}

std::string error_of(const PlanRequest& r) {
    try {
        (void)run_plan(r, {});
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

TEST_CASE("Plan: bisection finds the largest sustainable rate of a server worked out by hand", "[planner][plan]") {
    // Start 25, tolerance 0.5 %: 25 ✓ 50 ✓ 100 ✓ 200 ✗ → bisect 150 ✗ 125 ✗ 112.5 ✗ 106.25 ✗ 103.125 ✗
    // 101.5625 ✗ 100.78125 ✗ (> 100.7595) 100.390625 ✓ → [100.39, 100.78]: 0.39 ≤ 0.005 × 100.39, stop.
    PlanRequest r = base_request();
    r.load_start = 25;
    r.rel_tolerance = 0.005;
    const PlanResult res = run_plan(r, {});
    REQUIRE(res.configurations.size() == 1);
    const auto& a = res.configurations[0].answer;
    CHECK(a.kind == planner::ThresholdAnswer::Kind::kFound);
    CHECK(*a.best == 100.390625);
    CHECK(*a.first_failing == 100.78125);
    std::vector<double> loads;
    for (const auto& p : res.probes) {
        loads.push_back(p.load);
    }
    CHECK(loads == std::vector<double>{25, 50, 100, 200, 150, 125, 112.5, 106.25, 103.125, 101.5625, 100.78125,
                                       100.390625});
    // A hopeless probe stops early: at 200 req/s the server falls behind by 100 req/s, so more than
    // ceil(5 % × 200) = 10 requests wait once ~20 are sent, and the rest of the run is not simulated.
    const auto& over = res.probes[3];
    REQUIRE(over.load == 200);
    REQUIRE(!over.violations.empty());
    CHECK(over.violations.front().find("stopped early: more than 10 requests waiting") != std::string::npos);
    CHECK(over.summaries.front().num_requests_sent < 200);
    // At the answer: 1 GPU at $2/h serving 100.39 req/s × 17 tokens ≈ 1,707 tokens/s → ≈ $0.33 per M tokens.
    const auto& c = res.configurations[0];
    CHECK(c.gpus == 1);
    REQUIRE(c.usd_per_mtok.has_value());
    CHECK(*c.usd_per_mtok > 0.30);
    CHECK(*c.usd_per_mtok < 0.36);
}

TEST_CASE("Plan: the fewest replicas for a target rate, round-robin over replicas worked out by hand",
          "[planner][plan]") {
    // 250 req/s round-robin over r replicas: each gets constant arrivals at 250/r, which passes iff
    // 250/r ≤ 100.7595 ⟺ r ≥ 2.48. From the scenario's 1: 1 ✗, 2 ✗, 4 ✓, 3 ✓ → 3 replicas = 3 GPUs.
    PlanRequest r = base_request();
    r.target_load = 250;
    const PlanResult res = run_plan(r, {});
    const auto& c = res.configurations[0];
    CHECK(*c.answer.best == 3);
    CHECK(*c.answer.first_failing == 2);
    CHECK(c.gpus == 3);
    std::vector<int> replicas;
    for (const auto& p : res.probes) {
        replicas.push_back(p.replicas);
    }
    CHECK(replicas == std::vector<int>{1, 2, 4, 3});
}

TEST_CASE("Plan: the same answer and output whatever the thread count", "[planner][plan][determinism]") {
    PlanRequest r = base_request();
    r.load_start = 25;
    r.replicates = 2;
    r.jobs = 1;
    const std::string one = format_plan_json(r, run_plan(r, {}));
    r.jobs = 3;
    CHECK(format_plan_json(r, run_plan(r, {})) == one);
}

TEST_CASE("Plan: a grid key that does not exist and a searched key in the grid are refused before simulating",
          "[planner][plan][errors]") {
    PlanRequest r = base_request();
    r.grid.push_back(parse_grid_axis("engine.blok_size=16,32"));
    const std::string key = error_of(r);
    CHECK(key.find("blok_size") != std::string::npos);
    CHECK(key.find("block_size") != std::string::npos);  // the allowed keys are listed

    PlanRequest s = base_request();
    s.grid.push_back(parse_grid_axis("workload.rate=1,2"));
    CHECK(error_of(s).find("what the planner searches") != std::string::npos);

    CHECK_THROWS_AS(parse_grid_axis("gpu="), ConfigError);
    CHECK_THROWS_AS(parse_grid_axis("gpu=H100,,H200"), ConfigError);
}

TEST_CASE("Plan: an early-stopped probe is shown as stopped, without latencies", "[planner][plan]") {
    // Start 200 req/s on the one-at-a-time server: more than ceil(5 % × 200) = 10 requests wait once ~20 are sent,
    // so the run stops early; its TTFT max would be that of the ~10 requests served before the stop, not the load's.
    PlanRequest r = base_request();
    r.load_start = 200;
    r.load_max = 200;
    const PlanResult res = run_plan(r, {});
    const PlanProbe& stopped = res.probes.front();
    REQUIRE(stopped.load == 200);
    CHECK(stopped.stopped);
    CHECK(stopped.status == "stopped");
    const std::string table = format_plan_table(r, res);
    // config, load, replicas, pass, ttft_max_ms (—), backlog (—), status, verdict.
    CHECK(table.find("one-at-a-time           200         1    0/1             —        —  stopped       stopped early: "
                     "more than 10 requests waiting at once") != std::string::npos);
    const std::string csv = format_plan_csv(r, res);
    // config, load, replicas, tp, pp, dp, gpus, passed, replicates, ttft_max (empty), backlog (empty), status.
    CHECK(csv.find("\"one-at-a-time\",200,1,1,1,1,1,0,1,,,stopped,\"stopped early") != std::string::npos);
    const auto json = format_plan_json(r, res);
    CHECK(json.find("\"ttft_max_ms\": null,\n      \"backlog_fraction\": null,\n      \"status\": \"stopped\"") !=
          std::string::npos);
    // A probe that ran to its end keeps its figures and says ok (100 req/s: TTFT 10 ms, nothing queued).
    const auto ran = std::find_if(res.probes.begin(), res.probes.end(), [](const PlanProbe& p) { return p.load == 100; });
    REQUIRE(ran != res.probes.end());
    CHECK(ran->status == "ok");
    CHECK(close(*Planner_worst_ttft_max(*ran), 10.0, 0.01));
}

TEST_CASE("Plan: what binds the answer of the server worked by hand, its headroom and its rounding", "[planner][plan]") {
    // The bisection above: 100.390625 req/s passes, 100.78125 fails. At the failing load TTFT max = 10 + 199·(10 −
    // 1000/100.78125) = 25.43 ms > 25: the SLO binds (no queue builds within 200 requests: nothing else fails). At the
    // answer TTFT max = 10 + 199·(10 − 1000/100.390625) = 17.74 ms: headroom (25 − 17.74)/25 = 29.0 %. The
    // constant-10ms profile has no validated band: figures to two significant digits (100.39 → "100").
    PlanRequest r = base_request();
    r.load_start = 25;
    r.rel_tolerance = 0.005;
    const PlanResult res = run_plan(r, {});
    const auto& c = res.configurations[0];
    CHECK(c.binding.kind == planner::Binding::Kind::kSlo);
    CHECK(c.binding.name(r.slo) == "ttft_max");
    REQUIRE(c.binding.headroom_pct.size() == 1);
    CHECK(close(*c.binding.headroom_pct[0], 100.0 * (25.0 - (10.0 + 199.0 * (10.0 - 1000.0 / 100.390625))) / 25.0, 1e-3));
    CHECK_FALSE(c.band_half_width_pct.has_value());
    CHECK(res.frontier_slo == std::optional<std::size_t>{0});  // ttft_max binds the one answer: the frontier is on it
    CHECK(c.on_frontier);
    const std::string table = format_plan_table(r, res);
    CHECK(table.find("binds ttft_max (at load 100.78125); headroom: ttft_max 29 %; band not validated (two "
                     "significant digits)") != std::string::npos);
    CHECK(table.find("* one-at-a-time        100      1      1      2.00") != std::string::npos);
    const std::string json = format_plan_json(r, res);
    CHECK(json.find("\"max_load\": 100.390625,\n      \"max_load_rounded\": 100.0,") != std::string::npos);
    CHECK(json.find("\"binding\": \"ttft_max\"") != std::string::npos);
}

TEST_CASE("Plan: when no SLO binds (the queue does), no Pareto star is drawn", "[planner][plan]") {
    // ttft_max ≤ 10 s: above 100 req/s the one-at-a-time server's queue grows (its TTFT stays under 10 s within 200
    // requests), so the backlog or the early stop fails the load, not the SLO: capacity binds, no frontier.
    PlanRequest r = base_request();
    r.slo = planner::parse_slo("ttft_max=10s", "--slo");
    r.load_start = 25;
    r.rel_tolerance = 0.05;
    const PlanResult res = run_plan(r, {});
    const auto& c = res.configurations[0];
    REQUIRE(c.answer.best.has_value());
    CHECK(c.binding.kind == planner::Binding::Kind::kCapacity);
    CHECK_FALSE(res.frontier_slo.has_value());
    CHECK_FALSE(c.on_frontier);
    CHECK(format_plan_table(r, res).find("no SLO binds any answer, so no cost / latency frontier is starred") !=
          std::string::npos);
}

TEST_CASE("Plan: --target-rate whose SLOs held while the clients were held back says so", "[planner][plan]") {
    // max_concurrency 1 on the one-at-a-time server: a request is sent only when the previous one (10 ms) is done,
    // so 200 req/s offered become one send per 10 ms: (200 − 1) / 1.99 s = 100 req/s. Nothing queues, TTFT is 10 ms
    // ≤ 25 ms: every SLO holds, yet the target is not reached.
    PlanRequest r = base_request();
    r.overrides.push_back("workload.max_concurrency=1");
    r.target_load = 200;
    r.search_replicas = false;
    const PlanResult res = run_plan(r, {});
    const auto& c = res.configurations[0];
    CHECK_FALSE(c.answer.best.has_value());
    REQUIRE(res.probes.size() == 1);
    CHECK(res.probes[0].slo_met);
    CHECK(res.probes[0].held_back);
    CHECK(close(res.probes[0].sent_rps, 100.0, 1e-6));
    CHECK(c.verdict == "every SLO held, but the clients sent 100 of the 200 req/s offered (held back by the server): "
                       "the target rate was not reached");
    CHECK(format_plan_table(r, res).find("without an answer: what the most favourable probe showed\n  one-at-a-time  "
                                         "misses_target: every SLO held, but the clients sent 100") != std::string::npos);
}

TEST_CASE("Plan: a GPU without a price is planned and marked unpriced, not ranked", "[planner][plan]") {
    PlanRequest r = base_request();  // prices: H100 only
    r.overrides.push_back("allow_profile_mismatch=true");  // the 10 ms profile stands for both GPUs
    r.grid.push_back(parse_grid_axis("gpu=H100,L40S"));
    r.load_start = 50;
    r.rel_tolerance = 0.1;
    const PlanResult res = run_plan(r, {});
    REQUIRE(res.configurations.size() == 2);
    const auto& l40s = res.configurations[1];
    CHECK_FALSE(l40s.price.has_value());
    CHECK(l40s.answer.best.has_value());  // planned all the same
    CHECK_FALSE(l40s.usd_per_mtok.has_value());
    CHECK(res.ranking == std::vector<std::size_t>{0});
    const std::string table = format_plan_table(r, res);
    CHECK(table.find("  L40S          unpriced: no cited price (give one with --prices FILE)") != std::string::npos);
    CHECK(table.find("  H100-SXM      $2.00/GPU-h (prices.yaml, uncited: no source or date given)") != std::string::npos);
}

TEST_CASE("Plan: a scenario's replicates: key is refused without --replicates and warned about with it",
          "[planner][plan][errors]") {
    PlanRequest r = base_request();
    r.overrides.push_back("replicates=3");
    CHECK(error_of(r) == kScenario + ": experiment 'one-at-a-time': 'replicates: 3' is what run and sweep repeat; plan "
                                     "does not read it (it runs --replicates N seeds per probe); give --replicates 3 "
                                     "to plan with that many seeds");
    r.replicates_given = true;
    r.replicates = 2;
    r.load_start = 50;
    r.rel_tolerance = 0.2;
    const PlanResult res = run_plan(r, {});
    REQUIRE(res.warnings.size() == 1);
    CHECK(res.warnings[0].find("planning with --replicates 2") != std::string::npos);
    CHECK(res.probes.front().summaries.size() == 2);  // the planner's seeds, not the key's
}

PlanRequest model_request(const std::string& model, const std::vector<Override>& engine_flags) {
    // `servesim plan --model M <engine flags> --num-prompts 200 --random-input-len 512 --random-output-len 64`.
    BenchServeFlags b;
    b.num_prompts = "200";
    b.random_input_len = "512";
    b.random_output_len = "64";
    ScenarioLessRun run = scenario_less_run(model, std::nullopt, std::nullopt, b);
    PlanRequest r;
    r.scenario_path = "command line";
    r.scenario_text = run.text;
    r.flag_overrides = run.overrides;
    r.flag_overrides.insert(r.flag_overrides.end(), engine_flags.begin(), engine_flags.end());
    r.slo = planner::parse_slo("ttft_p99=2s,tpot_p99=50ms", "--slo");
    r.prices = planner::parse_prices("gpus: {H100: 2.9, H200: 3.7}", "prices.yaml", planner::PriceTable{});
    r.jobs = 2;
    return r;
}

TEST_CASE("Plan: a model that does not fit one grid point is a does_not_fit row; the rest is planned",
          "[planner][plan]") {
    // Llama-3.1-70B in FP8 at max_model_len 8,192: on an H100 (79.1 GiB) the weights leave 1.63 GiB for KV blocks,
    // less than the 2.50 GiB one 8,192-token request needs (80 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes =
    // 320 KiB per token), so vLLM would not start; on an H200 (139.8 GiB) it fits and is planned.
    PlanRequest r = model_request("Llama-3.1-70B", {{"engine.quantization", YAML::Node("fp8"), "--quantization"},
                                                    {"engine.max_model_len", YAML::Node("8192"), "--max-model-len"}});
    r.grid.push_back(parse_grid_axis("gpu=H100,H200"));
    settle_load_key(r);
    CHECK(r.load_key == "workload.request_rate");  // vllm bench serve's --request-rate, not workload.rate
    r.load_start = 2;
    r.rel_tolerance = 0.1;
    const PlanResult res = run_plan(r, {});
    REQUIRE(res.configurations.size() == 2);
    const auto& h100 = res.configurations[0];
    const auto& h200 = res.configurations[1];
    CHECK(h100.does_not_fit.rfind("max_model_len: To serve at least one request with the models's max seq len "
                                  "(8192), (2.50 GiB KV cache is needed, which is larger than the available KV cache "
                                  "memory (1.63 GiB)",
                                  0) == 0);
    CHECK(std::none_of(res.probes.begin(), res.probes.end(), [](const PlanProbe& p) { return p.configuration == 0; }));
    CHECK(h200.does_not_fit.empty());
    CHECK(h200.answer.best.has_value());
    CHECK(res.ranking == std::vector<std::size_t>{1});
    // What the user reads: the answers row and vLLM's reason.
    const std::string table = format_plan_table(r, res);
    // Its answers row: no load, GPUs, nodes or figures; its price; the answer kind.
    const std::size_t at = table.find("\n  gpu=H100 ") + 1;  // the first gpu=H100 line: its answers row
    const std::string row = table.substr(at, table.find('\n', at) - at);
    CHECK(row.find("2.90") != std::string::npos);
    CHECK(row.substr(row.size() - 12) == "does_not_fit");
    CHECK(table.find("does_not_fit: vLLM would not start these (its start-up memory check), so they were not "
                     "probed\n  gpu=H100  max_model_len: To serve at least one request") != std::string::npos);
    const std::string csv = format_plan_csv(r, res);
    // config, load, replicas, tp, pp, dp, gpus, passed, replicates, the two SLOs, backlog, status, verdict.
    CHECK(csv.find("\"gpu=H100\",,,1,1,1,1,0,0,,,,does_not_fit,\"max_model_len: To serve at least one request") !=
          std::string::npos);
    const std::string json = format_plan_json(r, res);
    CHECK(json.find("\"answer\": \"does_not_fit\",\n      \"status_reason\": \"max_model_len: To serve") !=
          std::string::npos);
}

TEST_CASE("Plan: the layout search of 16 H100s in 8-GPU nodes for Llama-3.1-70B FP8: which fit, and why not",
          "[planner][plan][layouts]") {
    // 14 layouts (tests/planner/layouts_test.cpp). Only TP 1 × PP 1 puts the whole model on one GPU: the 70B's FP8
    // weights leave 1.63 GiB of an H100 for KV blocks, under the 2.50 GiB one 8,192-token request needs (the
    // does_not_fit test above), so vLLM would not start it. Every other layout splits the 80 layers at least in two
    // (half the weights per GPU) and fits. Each layout is evaluated once at 2 req/s (a target: no search).
    PlanRequest r = model_request("Llama-3.1-70B", {{"engine.quantization", YAML::Node("fp8"), "--quantization"},
                                                    {"engine.max_model_len", YAML::Node("8192"), "--max-model-len"}});
    r.flag_overrides.push_back({"workload.num_prompts", YAML::Node("100"), "--num-prompts"});
    r.grid.push_back(parse_grid_axis("gpu=H100"));
    r.layout_gpus = 16;
    r.gpus_per_node = 8;
    r.target_load = 2;
    settle_load_key(r);
    const PlanResult res = run_plan(r, {});
    std::vector<std::string> labels;
    std::vector<std::string> unfit;
    for (const auto& c : res.configurations) {
        labels.push_back(c.label);
        if (!c.does_not_fit.empty()) {
            unfit.push_back(c.label);
            CHECK(c.does_not_fit.find("(2.50 GiB KV cache is needed, which is larger than the available KV cache "
                                      "memory (1.63 GiB)") != std::string::npos);
        }
        CHECK(c.not_accepted.empty());
    }
    CHECK(labels == std::vector<std::string>{
                        "gpu=H100 tp1 pp1 dp16", "gpu=H100 tp1 pp2 dp8", "gpu=H100 tp1 pp4 dp4",
                        "gpu=H100 tp1 pp8 dp2", "gpu=H100 tp1 pp16 dp1", "gpu=H100 tp2 pp1 dp8",
                        "gpu=H100 tp2 pp2 dp4", "gpu=H100 tp2 pp4 dp2", "gpu=H100 tp2 pp8 dp1",
                        "gpu=H100 tp4 pp1 dp4", "gpu=H100 tp4 pp2 dp2", "gpu=H100 tp4 pp4 dp1",
                        "gpu=H100 tp8 pp1 dp2", "gpu=H100 tp8 pp2 dp1"});
    CHECK(unfit == std::vector<std::string>{"gpu=H100 tp1 pp1 dp16"});
    CHECK(res.probes.size() == 13);  // one probe per layout that fits, at the target
    for (const auto& p : res.probes) {
        const auto& c = res.configurations[p.configuration];
        CHECK(p.replicas == c.layout->data_parallel_size);  // a layout's DP is its replica count
        CHECK(p.replicas * c.tensor_parallel_size * c.pipeline_parallel_size == 16);
    }
    // The launch line of an answered layout carries its parallel sizes; the DP replicas are vLLM's data-parallel
    // engines (router vllm_dp), so --data-parallel-size is on it.
    const auto tp4 = std::find_if(res.configurations.begin(), res.configurations.end(),
                                  [](const PlanConfiguration& c) { return c.label == "gpu=H100 tp4 pp2 dp2"; });
    REQUIRE(tp4 != res.configurations.end());
    REQUIRE(tp4->best_probe.has_value());  // 2 req/s of 512-token prompts is light load for 16 H100s
    CHECK(tp4->vllm_serve.find("--tensor-parallel-size 4 --pipeline-parallel-size 2 --data-parallel-size 2") !=
          std::string::npos);
    CHECK(tp4->gpus == 16);
    CHECK(tp4->nodes == 2);
    CHECK(tp4->binding.reason == "evaluated at the target only: nothing beyond it was probed");
    CHECK(format_plan_table(r, res).find("meets_target") != std::string::npos);
    const std::string json = format_plan_json(r, res);
    CHECK(json.find("\"layout\": \"tp4 pp2 dp2\"") != std::string::npos);
    CHECK(json.find("\"data_parallel_size\": 2,") != std::string::npos);
}

TEST_CASE("Plan: an error about a value the planner set names the planner, not a --set the user never typed",
          "[planner][plan][errors]") {
    // Forcing the synthetic workloads' load key onto a bench_serve workload (which has request_rate, not rate).
    PlanRequest r = model_request("Qwen3-8B", {});
    r.load_key = "workload.rate";
    r.load_key_given = true;
    const std::string e = error_of(r);
    CHECK(e.find("the planner's probe load (workload.rate = 1; --load-key)") != std::string::npos);
    CHECK(e.find("--set") == std::string::npos);
    // A grid value names its --grid.
    PlanRequest g = model_request("Qwen3-8B", {});
    settle_load_key(g);
    g.grid.push_back(parse_grid_axis("engine.block_size=16,7"));
    CHECK(error_of(g).find("--grid engine.block_size=7") != std::string::npos);
}

}  // namespace
}  // namespace servesim::app
