// `servesim plan` argument parsing and output; the planning itself is tools/app/plan.*.
#include "tools/plan_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/error.h"
#include "common/input_file.h"
#include "tools/app/command_line.h"
#include "tools/app/flag_suggestions.h"
#include "tools/app/partial_results.h"
#include "tools/app/plan.h"

namespace servesim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int cmd_plan(int argc, char** argv, const std::function<int(const std::string&)>& plot, app::Executor& executor) {
    // vLLM's engine flags first (as `run` takes them: command_line.h), the rest to the parser below.
    const app::EngineFlags flags = app::take_engine_flags(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
    std::vector<std::string> words{argc > 0 ? argv[0] : "plan"};
    words.insert(words.end(), flags.rest.begin(), flags.rest.end());
    std::vector<char*> rest_argv;
    for (auto& w : words) {
        rest_argv.push_back(w.data());
    }
    argc = static_cast<int>(rest_argv.size());
    argv = rest_argv.data();
    std::optional<std::string> model;
    std::optional<std::string> gpu;
    std::optional<std::string> cost_model;
    app::BenchServeFlags bench;
    const auto opt_string = [](std::optional<std::string>& target) {
        return po::value<std::string>()->notifier([&target](const std::string& v) { target = v; });
    };
    app::PlanRequest r;
    std::string slo;
    std::vector<std::string> grid;
    std::string format = "table";
    std::string out_dir;
    std::string prices_file;
    std::string checkpoint;
    std::string resume;
    std::uint64_t seed = 0;
    double target_rate = 0;
    double target_tenants = 0;
    r.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    po::options_description opts(
        "servesim plan SCENARIO --slo ttft_p99=500ms,itl_p99=50ms [--target-rate R | --target-tenants T] [options]\n"
        "servesim plan --model M [--gpu G] [vLLM engine flags] [vllm bench serve flags] --slo ... [options]\n"
        "  without a target: the largest sustainable load of each configuration, and its cost per token;\n"
        "  with a target: the fewest replicas (GPUs = replicas × tensor-parallel size) meeting the SLOs at it.\n"
        "  with --gpus N: every TP × PP × DP (× EP) layout of N GPUs, tokens/s per GPU against tokens/s per user.\n"
        "  configurations = the scenario's experiments/sweep points × --grid; ranked by $ per million tokens.\n"
        "  see docs/PLANNER.md");
    opts.add_options()("help,h", "show this help")("scenario", po::value<std::string>(&r.scenario_path),
                                                   "scenario YAML (one or more experiments)")(
        "slo", po::value<std::string>(&slo), "SLO bounds: <ttft|tpot|itl|e2el|queue>_<mean|p50|p90|p99|max>=<ms|s>")(
        "target-rate", po::value<double>(&target_rate), "the load to size for, in requests/s (workload.rate)")(
        "target-tenants", po::value<double>(&target_tenants), "the load to size for, in tenants (workload.tenants)")(
        "load-key", po::value<std::string>(&r.load_key),
        "the scenario key that is the load (default workload.rate; workload.tenants with --target-tenants)")(
        "min-load", po::value<double>(&r.load_min), "lowest load to probe (default 0.01)")(
        "max-load", po::value<double>(&r.load_max), "highest load to probe (default 10000)")(
        "start-load", po::value<double>(&r.load_start), "first load to probe (default 1)")(
        "tolerance", po::value<double>(&r.rel_tolerance), "relative bisection tolerance (default 0.02)")(
        "max-shortfall", po::value<double>(&r.max_shortfall),
        "fraction of requests that may still be queued at the last send, and of the offered rate that may go "
        "unsent (default 0.05)")(
        "max-replicas", po::value<int>(&r.max_replicas), "largest replica count to try with a target (default 64)")(
        "no-replica-search", "with a target: evaluate each configuration at its own replica count")(
        "grid", po::value<std::vector<std::string>>(&grid)->composing(),
        "a grid axis key=v1,v2 (repeatable; keys as --set takes them, e.g. gpu=H100,H200)")(
        "replicates", po::value<int>(&r.replicates),
        "seeds per probe (default 1; a probe passes when all do; a scenario's replicates: key is run's and sweep's: "
        "refused without this flag, warned about with it)")(
        "gpus", po::value<int>(),
        "search layouts: plan every TP x PP x DP (x EP for MoE) layout of N GPUs (whole nodes), per --grid point")(
        "gpus-per-node", po::value<int>(&r.gpus_per_node),
        "GPUs per node (default 8, an HGX board): answers count nodes, --gpus is whole nodes")(
        "max-pp", po::value<int>(), "with --gpus: at most this many pipeline stages")(
        "prices", po::value<std::string>(&prices_file),
        "price file: gpus: {NAME: {usd_per_gpu_hour: P, source: WHERE, date: YYYY-MM}} (a bare number is printed "
        "as uncited); replaces the built-in cited prices it names")(
        "rank-by", po::value<std::string>(&r.rank_by), "usd_per_mtok (all tokens, default) or usd_per_mtok_output")(
        "set", po::value<std::vector<std::string>>(&r.overrides)->composing(), "override a scenario key")(
        "seed", po::value<std::uint64_t>(&seed), "first seed (replaces the scenario's)")(
        "format", po::value<std::string>(&format), "table (default), json or csv")(
        "out", po::value<std::string>(&out_dir), "also write plan.{txt,json,csv} into this folder")(
        "plot", "with --out: also draw plan-latency.png and plan-cost.png there (tools/plot/plot_plan.py)")(
        "jobs,j", po::value<int>(&r.jobs), "worker threads (the answer does not depend on it)")(
        "checkpoint", po::value<std::string>(&checkpoint),
        "keep each finished probe run in FILE as it finishes (docs/MPI.md; a failed or interrupted plan keeps one "
        "anyway)")(
        "resume", po::value<std::string>(&resume),
        "take the probe runs FILE holds (--checkpoint, or kept by a failed or interrupted plan), run only the rest")(
        "model", opt_string(model),
        "model preset or Hugging Face repo id: without a scenario, plans vllm bench serve's random dataset on it "
        "(the load is workload.request_rate); with one, replaces its model")(
        "gpu", opt_string(gpu), "GPU name, see servesim list (replaces the scenario's; default H200)")(
        "cost-model", opt_string(cost_model), "roofline (default), measured or a calibrated profile YAML");
    po::options_description bench_opts("vllm bench serve flags, random dataset (a plan without a scenario file; "
                                       "vLLM's defaults; the rate is what the planner searches)");
    bench_opts.add_options()("burstiness", opt_string(bench.burstiness),
                             "gamma shape of the gaps; 1 = Poisson (default 1)")(
        "num-prompts", opt_string(bench.num_prompts), "requests per probe (default 1000)")(
        "random-input-len", opt_string(bench.random_input_len), "prompt tokens per request (default 1024)")(
        "random-output-len", opt_string(bench.random_output_len), "output tokens per request (default 128)")(
        "random-range-ratio", opt_string(bench.random_range_ratio),
        "lengths uniform on [L(1-r), L(1+r)], r in [0, 1) (default 0)")(
        "random-prefix-len", opt_string(bench.random_prefix_len),
        "tokens of a prefix shared by every prompt (default 0)")(
        "max-concurrency", opt_string(bench.max_concurrency), "most requests in flight (default no limit)")(
        "request-rate", opt_string(bench.request_rate), "not taken: the planner searches the rate");
    opts.add(bench_opts);
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::command_line_parser parser(argc, argv);
    parser.options(opts).positional(pos);
    app::store_or_suggest(parser, opts, vm, "plan");
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts << "\n" << app::engine_flags_help();
        return 0;
    }
    if (bench.request_rate) {
        throw ConfigError("plan: --request-rate: the planner searches the rate; give --start-load, --min-load, "
                          "--max-load, or --target-rate to size for one");
    }
    if (vm.count("plot") && out_dir.empty()) {
        throw ConfigError("plan: --plot draws into the --out folder; give --out DIR");
    }
    if (r.scenario_path.empty() && !model) {
        throw ConfigError("plan: a scenario file or --model is required, e.g. servesim plan "
                          "scenarios/plan/agentic-8b.yaml --slo ttft_p99=2s,itl_p99=50ms, or servesim plan --model "
                          "Qwen3-8B --gpu H100 --slo ttft_p99=2s,itl_p99=50ms");
    }
    if (slo.empty()) {
        throw ConfigError("plan: --slo is required; " + planner::slo_names_help());
    }
    r.slo = planner::parse_slo(slo, "--slo");
    if (vm.count("target-rate") && vm.count("target-tenants")) {
        throw ConfigError("plan: give --target-rate or --target-tenants, not both");
    }
    if (vm.count("target-rate")) {
        r.target_load = target_rate;
    }
    if (vm.count("target-tenants")) {
        r.target_load = target_tenants;
        if (!vm.count("load-key")) {
            r.load_key = "workload.tenants";
        }
    }
    r.load_key_given = vm.count("load-key") > 0 || vm.count("target-tenants") > 0;
    r.load_is_integer = r.load_key.size() >= 7 && r.load_key.substr(r.load_key.size() - 7) == "tenants";
    if (vm.count("no-replica-search")) {
        r.search_replicas = false;
    }
    if (vm.count("seed")) {
        r.seed = seed;
    }
    r.replicates_given = vm.count("replicates") > 0;
    if (vm.count("gpus")) {
        r.layout_gpus = vm["gpus"].as<int>();
    }
    if (vm.count("max-pp")) {
        r.max_pipeline_parallel_size = vm["max-pp"].as<int>();
    }
    if (r.jobs < 1) {
        throw ConfigError("--jobs: must be at least 1");
    }
    if (format != "table" && format != "json" && format != "csv") {
        throw ConfigError("--format: '" + format + "' is not a format; allowed: table, json, csv");
    }
    for (const auto& g : grid) {
        r.grid.push_back(app::parse_grid_axis(g));
    }
    r.prices = planner::default_prices();
    if (!prices_file.empty()) {
        r.prices = planner::read_prices(prices_file, r.prices);
    }
    if (r.scenario_path.empty()) {
        // The scenario-less plan: vllm bench serve's random dataset on --model (command_line.h scenario_less_run).
        app::ScenarioLessRun run = app::scenario_less_run(*model, gpu, cost_model, bench);
        r.scenario_path = "command line";
        r.scenario_text = run.text;
        r.flag_overrides = std::move(run.overrides);
    } else {
        if (bench.any()) {
            throw ConfigError("plan: the vllm bench serve flags (--num-prompts, --random-*, ...) build the workload "
                              "of a plan without a scenario file; with a scenario, set its keys: --set "
                              "workload.num_requests=500");
        }
        r.scenario_text = read_input_file(r.scenario_path, "scenario file");
        for (const auto& [value, key, flag] : {std::tuple{&model, "model", "--model"}, {&gpu, "gpu", "--gpu"},
                                               {&cost_model, "cost_model", "--cost-model"}}) {
            if (*value) {
                r.flag_overrides.push_back({key, YAML::Node(**value), flag});
            }
        }
    }
    r.flag_overrides.insert(r.flag_overrides.end(), flags.overrides.begin(), flags.overrides.end());
    app::settle_load_key(r);
    if (!out_dir.empty()) {
        std::error_code ec;
        fs::create_directories(out_dir, ec);
        if (ec || !fs::is_directory(out_dir) || access(out_dir.c_str(), W_OK) != 0) {
            throw ConfigError("--out: cannot write into '" + out_dir + "'");
        }
    }
    // Probe runs go to a partial-results file as they finish (the root only), for --resume after a failure.
    app::PartialResultsScope partial(executor, true, checkpoint, resume, out_dir, app::scenario_fingerprint(r),
                                     std::vector<std::string>(argv, argv + argc));
    r.executor = &executor;
    const bool tty = isatty(STDERR_FILENO) != 0 && executor.is_root();
    const auto result = partial.run(std::cerr, [&](app::PartialResults* file) {
        r.partial = file;
        return app::run_plan(r, [&](int round, int probes) {
            if (tty) {
                std::cerr << fmt::format("\rplan: round {}, {} probes run", round, probes) << std::flush;
            }
        });
    });
    if (!executor.is_root()) {
        return 0;  // rank 0 writes the plan
    }
    if (tty) {
        std::cerr << "\n";
    }
    for (const auto& w : result.warnings) {
        std::cerr << "warning: " << w << "\n";
    }
    const std::string table = app::format_plan_table(r, result);
    const std::string json = app::format_plan_json(r, result);
    const std::string csv = app::format_plan_csv(r, result);
    std::cout << (format == "json" ? json : format == "csv" ? csv : table);
    if (!out_dir.empty()) {
        for (const auto& [name, text] : {std::pair{"plan.txt", &table}, {"plan.json", &json}, {"plan.csv", &csv}}) {
            std::ofstream f(fs::path(out_dir) / name);
            f << *text;
            f.close();  // a full disk shows at the last flush
            if (!f) {
                throw ConfigError("--out: could not write " + (fs::path(out_dir) / name).string());
            }
        }
    }
    std::cout.flush();
    if (!std::cout) {
        throw ConfigError("could not write the plan to standard output");
    }
    if (vm.count("plot")) {
        return plot(out_dir);
    }
    return 0;
}

}  // namespace servesim::cli
