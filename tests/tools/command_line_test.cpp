// Command-line values through the scenario reader (tools/app/command_line.h, scenario.h Override): vLLM flags
// override the file, --set replaces whole mappings, errors about what the command line set name the flag, and a run
// without a scenario file is vllm bench serve's random dataset on a synthetic open-loop workload.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/command_line.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

const char* kScenario =
    "name: s\nmodel: Qwen3-4B\ngpu: H100\nengine:\n  max_num_seqs: 32\n  block_size: 16\n"
    "workload: {type: tenants, tenants: 2, system_prompt_tokens: 100, turns_per_dialogue: 2, user_tokens: 10,\n"
    "           answer_tokens: 5, rate: 1, num_requests: 4}\n";

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

Scenario with_flags(const std::vector<std::string>& args) {
    return load_scenario_text(kScenario, "s.yaml", take_engine_flags(args).overrides);
}

TEST_CASE("Command line: a vLLM flag overrides the scenario's key, others stay", "[tools][command_line]") {
    const Scenario sc = with_flags({"--max-num-seqs", "64", "-tp", "2", "-dp", "3"});
    REQUIRE(sc.experiments.size() == 1);
    const ExperimentConfig& x = sc.experiments[0];
    CHECK(x.engine.max_num_seqs == 64);  // the file says 32
    CHECK(x.engine.block_size == 16);    // from the file
    CHECK(x.engine.tensor_parallel_size == 2);
    CHECK(x.replicas == 3);
}

TEST_CASE("Command line: a flag's error found by the scenario checks names the flag", "[tools][command_line]") {
    // Qwen3-4B at 144 KiB of KV per token: a 1 GiB pool holds 7,280 tokens (455 blocks of 16), so one 16,384-token request cannot fit
    // (vLLM _check_enough_kv_cache_memory). Both values came from flags, so the message names the flag, not s.yaml.
    const std::string m =
        message_of([] { (void)with_flags({"--kv-cache-memory-bytes", "1GiB", "--max-model-len", "16K"}); });
    INFO(m);
    CHECK(m.starts_with("command line: --max-model-len: "));
    CHECK(m.find("s.yaml") == std::string::npos);
}

TEST_CASE("Command line: --set replaces a whole mapping, switching the workload type", "[tools][command_line]") {
    const Override o = parse_set_override(
        "workload={type: synthetic, rate: 2, prompt_tokens: 300, output_tokens: 7, num_requests: 5}");
    const Scenario sc = load_scenario_text(kScenario, "s.yaml", {o});
    const YAML::Node& w = sc.experiments[0].workload;
    CHECK(w["type"].as<std::string>() == "synthetic");
    CHECK(!w["tenants"]);  // nothing of the file's tenants workload is left
    const auto results = run_experiments(sc.experiments, 1, [](int, int) {});
    CHECK(results[0].sim.summary.num_requests_sent == 5);
    CHECK(results[0].sim.summary.mean_prompt_tokens == 300.0);
}

TEST_CASE("Command line: an error under a --set mapping names the --set", "[tools][command_line]") {
    const Override o = parse_set_override("workload={type: synthetic, rate: -1, prompt_tokens: 3, output_tokens: 1, "
                                          "num_requests: 5}");
    const std::string m = message_of([&] { (void)load_scenario_text(kScenario, "s.yaml", {o}); });
    INFO(m);
    CHECK(m.starts_with("command line: --set workload={type: synthetic, rate: -1, "));
    CHECK(m.find("'workload.rate'") != std::string::npos);
    CHECK(message_of([] { (void)parse_set_override("engin.block_size=32"); })
              .starts_with("command line: --set 'engin.block_size=32': unknown key 'engin'; did you mean 'engine'?; "
                           "allowed: name, "));
    // A key the file set keeps the file's location.
    const std::string file_err = message_of([] {
        (void)load_scenario_text(std::string(kScenario) + "cluster: {replicas: 0}\n", "s.yaml",
                                 take_engine_flags({"--max-num-seqs", "8"}).overrides);
    });
    CHECK(file_err.starts_with("s.yaml:"));
}

TEST_CASE("Command line: a run without a scenario file is vllm bench serve's random dataset",
          "[tools][command_line]") {
    BenchServeFlags b;
    b.request_rate = "10";
    b.num_prompts = "40";
    b.random_input_len = "1024";
    b.random_output_len = "256";
    const ScenarioLessRun run = scenario_less_run("Llama-3.1-8B", std::string("H100"), std::nullopt, b);
    const Scenario sc = load_scenario_text(run.text, "command line", run.overrides);
    const ExperimentConfig& x = sc.experiments[0];
    CHECK(x.model == "Llama-3.1-8B");
    CHECK(x.gpu == "H100");
    CHECK(x.workload["type"].as<std::string>() == "bench_serve");  // vllm bench serve's own client
    CHECK(x.workload["dataset_name"].as<std::string>() == "random");
    CHECK(x.workload["request_rate"].as<std::string>() == "10");
    const auto results = run_experiments(sc.experiments, 1, [](int, int) {});
    const auto& s = results[0].sim.summary;
    CHECK(s.num_requests_sent == 40);
    CHECK(s.mean_prompt_tokens == 1024.0);
    CHECK(s.mean_output_tokens == 256.0);
}

TEST_CASE("Command line: --random-range-ratio and --burstiness follow vLLM's sampling", "[tools][command_line]") {
    // The flags become the bench_serve keys of the same names; that client draws input uniform on
    // [floor(1000·0.7), ceil(1000·1.3)] = [700, 1300] and output on [max(1, floor(10·0.7)), ceil(10·1.3)] = [7, 13]
    // (tests/workloads/bench_serve_workload_test.cpp pins the draws); burstiness 0.5: gamma gaps of shape 0.5.
    BenchServeFlags b;
    b.random_input_len = "1000";
    b.random_output_len = "10";
    b.random_range_ratio = "0.3";
    b.burstiness = "0.5";
    b.request_rate = "4";
    const ScenarioLessRun run = scenario_less_run("Qwen3-4B", std::nullopt, std::nullopt, b);
    const Scenario sc = load_scenario_text(run.text, "command line", run.overrides);
    const YAML::Node& w = sc.experiments[0].workload;
    CHECK(w["random_input_len"].as<int>() == 1000);
    CHECK(w["random_output_len"].as<int>() == 10);
    CHECK(w["random_range_ratio"].as<double>() == 0.3);
    CHECK(w["burstiness"].as<std::string>() == "0.5");
    // The lengths the bench_serve client then draws: every prompt in [700, 1300], every output in [7, 13].
    const auto results = run_experiments(sc.experiments, 1, [](int, int) {});
    const auto& s = results[0].sim.summary;
    CHECK(s.mean_prompt_tokens >= 700);
    CHECK(s.mean_prompt_tokens <= 1300);
    CHECK(s.mean_output_tokens >= 7);
    CHECK(s.mean_output_tokens <= 13);
    CHECK(sc.experiments[0].gpu == "H200");  // servesim's default GPU
}

TEST_CASE("Command line: bench flag errors name the flag", "[tools][command_line]") {
    BenchServeFlags b;
    b.request_rate = "-3";
    const ScenarioLessRun run = scenario_less_run("Qwen3-4B", std::nullopt, std::nullopt, b);
    CHECK(message_of([&] { (void)load_scenario_text(run.text, "command line", run.overrides); })
              .starts_with("command line: --request-rate: "));
    BenchServeFlags r;
    r.random_range_ratio = "1";
    CHECK(message_of([&] { (void)scenario_less_run("Qwen3-4B", std::nullopt, std::nullopt, r); }) ==
          "command line: --random-range-ratio: 1 is out of range; allowed: [0, 1) as in vLLM");
    BenchServeFlags z;
    z.random_input_len = "0";
    CHECK(message_of([&] { (void)scenario_less_run("Qwen3-4B", std::nullopt, std::nullopt, z); })
              .starts_with("command line: --random-input-len: the shortest prompt would have no token"));
    CHECK(message_of([] {
              const ScenarioLessRun run = scenario_less_run("Qwen9-4B", std::nullopt, std::nullopt, {});
              (void)load_scenario_text(run.text, "command line", run.overrides);
          }).starts_with("command line: --model: unknown model preset 'Qwen9-4B'; did you mean 'Qwen3-4B'?"));
}

TEST_CASE("Command line: --seed is a whole number in [0, 2^63 - 1]", "[tools][command_line]") {
    CHECK(parse_seed_flag("0") == 0);
    CHECK(parse_seed_flag("9223372036854775807") == 9223372036854775807ULL);
    for (const char* bad : {"-1", "9223372036854775808", "1e3", "", "12a"}) {
        CHECK(message_of([&] { (void)parse_seed_flag(bad); }) ==
              std::string("command line: --seed: expected a whole number from 0 to 9223372036854775807, got '") +
                  bad + "'");
    }
}

TEST_CASE("Command line: Hugging Face repo ids resolve to presets; an unknown id lists the known ones",
          "[tools][command_line]") {
    const Scenario sc = load_scenario_text(kScenario, "s.yaml", {{"model", YAML::Node("Qwen/Qwen3-4B"), "--model"}});
    const auto prepared = prepare_experiment(sc.experiments[0]);
    CHECK(prepared.model.name == "Qwen3-4B");
    const Scenario llama = load_scenario_text(
        kScenario, "s.yaml", {{"model", YAML::Node("meta-llama/Llama-3.1-8B-Instruct"), "--model"}});
    CHECK(prepare_experiment(llama.experiments[0]).model.name == "Llama-3.1-8B");
    const std::string m = message_of([] {
        (void)load_scenario_text(kScenario, "s.yaml", {{"model", YAML::Node("Qwen/Qwen3-4B-AWQ"), "--model"}});
    });
    CHECK(m.starts_with("command line: --model: 'Qwen/Qwen3-4B-AWQ' is neither a file nor a Hugging Face repo id "
                        "servesim knows; known ids: meta-llama/Llama-3.1-8B, "));
    CHECK(m.find("Qwen/Qwen3-Next-80B-A3B-Instruct") != std::string::npos);
}

TEST_CASE("Command line: the plain CSV trace shares prompts with equal prefix ids", "[tools][command_line]") {
    // t_s,prompt_tokens,output_tokens,prefix_id: 1,000 tokens of text 7, then 2,000 of text 7, then 500 unique.
    // The second request finds the first's 62 full blocks of 16 (992 tokens) cached: hit rate 992 / 3,500.
    const std::string path = (std::filesystem::temp_directory_path() / "servesim_plain_trace_test.csv").string();
    {
        std::ofstream f(path);
        f << "t_s,prompt_tokens,output_tokens,prefix_id\n0,1000,10,7\n0.5,2000,10,7\n1.0,500,10,\n";
    }
    const Scenario sc = load_scenario_text(
        kScenario, "s.yaml", {parse_set_override("workload={type: trace, trace: " + path + ", format: csv}")});
    const auto results = run_experiments(sc.experiments, 1, [](int, int) {});
    CHECK(results[0].sim.summary.num_requests_sent == 3);
    CHECK(std::abs(results[0].sim.summary.prefix_cache_hit_rate - 992.0 / 3500.0) < 1e-12);
    {
        std::ofstream f(path);
        f << "t_s,prompt_tokens,output_tokens\n0,1000,10\n0.5,x,10\n";
    }
    const std::string m = message_of([&] {
        (void)load_scenario_text(kScenario, "s.yaml",
                                 {parse_set_override("workload={type: trace, trace: " + path + ", format: csv}")});
    });
    CHECK(m.find(path + ":3: 'prompt_tokens': expected an integer >= 1, got 'x'") != std::string::npos);
}

TEST_CASE("Command line: a value for what a sweep axis or an experiment varies is refused, naming both",
          "[tools][command_line]") {
    // The table would label rows max_num_seqs=32, 64 while every point ran the flag's value.
    const std::string swept = std::string(kScenario) + "sweep:\n  engine.max_num_seqs: [32, 64]\n";
    CHECK(message_of([&] {
              (void)load_scenario_text(swept, "s.yaml", take_engine_flags({"--max-num-seqs", "8"}).overrides);
          }) == "command line: --max-num-seqs: the scenario sweeps engine.max_num_seqs (sweep: in s.yaml); a "
                "command-line value would replace every point's; drop one of them");
    // Replacing the whole engine mapping also replaces the swept key.
    CHECK(message_of([&] { (void)load_scenario_text(swept, "s.yaml", {parse_set_override("engine={}")}); })
              .starts_with("command line: --set engine={}: the scenario sweeps engine.max_num_seqs"));
    const std::string two = std::string(kScenario) + "experiments:\n  - {name: a, model: Qwen3-4B}\n"
                                                     "  - {name: b, model: Qwen3.5-4B}\n";
    CHECK(message_of([&] {
              (void)load_scenario_text(two, "s.yaml", {{"model", YAML::Node("Qwen3-8B"), "--model"}});
          }) == "command line: --model: experiment 'a' in s.yaml sets model itself; a command-line value would "
                "replace every experiment's");
    // What neither varies is fine: both experiments get the flag.
    const Scenario ok = load_scenario_text(two, "s.yaml", take_engine_flags({"--max-num-seqs", "8"}).overrides);
    CHECK(ok.experiments.size() == 2);
    CHECK(ok.experiments[1].engine.max_num_seqs == 8);
}

TEST_CASE("Command line: CUDA-graph flags as vLLM spells them reach the cost model",
          "[tools][command_line][cudagraph]") {
    // --cudagraph-capture-sizes takes vLLM's nargs="+" list; the argument after it that is not a number ends it.
    const auto decode = [](std::int64_t n) {
        engine::BatchShape s;
        s.num_tokens = s.num_decode_seqs = s.num_seqs = s.num_sampled_seqs = n;
        s.decode_context_tokens = 1000 * n;
        return s;
    };
    const Scenario listed = with_flags({"--cudagraph-capture-sizes", "1", "2", "4", "8", "--max-num-seqs", "16"});
    REQUIRE(listed.experiments.size() == 1);
    CHECK(listed.experiments[0].engine.cudagraph_capture_sizes == std::vector<std::int64_t>{1, 2, 4, 8});
    CHECK(listed.experiments[0].engine.max_num_seqs == 16);
    const PreparedExperiment p = prepare_experiment(listed.experiments[0]);
    // A 7-token decode runs the 8-token graph; 9 tokens, above the largest size, run unpadded (the default ladder
    // would have padded them to 16).
    CHECK(p.cost_model->step_cost(decode(7)).gemm_ms == p.cost_model->step_cost(decode(8)).gemm_ms);
    CHECK(p.cost_model->step_cost(decode(9)).gemm_ms < p.cost_model->step_cost(decode(16)).gemm_ms);
    CHECK(p.cost_model->step_cost(decode(9)).gemm_ms > p.cost_model->step_cost(decode(8)).gemm_ms);
    // The older spelling and a scenario's YAML list mean the same.
    CHECK(with_flags({"--cuda-graph-sizes", "1,2,4,8"}).experiments[0].engine.cudagraph_capture_sizes ==
          std::vector<std::int64_t>{1, 2, 4, 8});
    const auto with_engine_lines = [](const std::string& lines) {
        std::string text = kScenario;
        text.insert(text.find("engine:\n") + 8, lines);
        return text;
    };
    const Scenario file =
        load_scenario_text(with_engine_lines("  cudagraph_capture_sizes: [8, 1, 4, 2]\n  enforce_eager: false\n"),
                           "s.yaml", {});
    CHECK(file.experiments[0].engine.cudagraph_capture_sizes == std::vector<std::int64_t>{8, 1, 4, 2});
    // --enforce-eager: no padding (7 tokens costed as 7), named in the cost model's description.
    const PreparedExperiment eager = prepare_experiment(with_flags({"--enforce-eager"}).experiments[0]);
    CHECK(eager.cost_model->step_cost(decode(7)).gemm_ms < eager.cost_model->step_cost(decode(8)).gemm_ms);
    CHECK(eager.cost_model->describe().ends_with(", enforce-eager"));
    // Bad values are refused naming the flag or the key.
    CHECK(message_of([] { (void)with_flags({"--cudagraph-capture-sizes", "0"}); })
              .starts_with("command line: --cudagraph-capture-sizes: "));
    const std::string bad = message_of(
        [&] { (void)load_scenario_text(with_engine_lines("  cudagraph_capture_sizes: [1, two]\n"), "s.yaml", {}); });
    INFO(bad);
    CHECK(bad.find("cudagraph_capture_sizes") != std::string::npos);
    CHECK(bad.find("'two'") != std::string::npos);
    const std::string disagree = message_of([] {
        (void)prepare_experiment(
            with_flags({"--cudagraph-capture-sizes", "1", "2", "4", "8", "--max-cudagraph-capture-size", "16"})
                .experiments[0]);
    });
    CHECK(disagree.find("engine.max_cudagraph_capture_size (16) must equal the largest of "
                        "engine.cudagraph_capture_sizes (8)") != std::string::npos);
}

}  // namespace
}  // namespace servesim::app
