// servesim command line: `inspect` (vLLM's start-up arithmetic), `run` (one scenario, side by side, or a
// `vllm bench serve`-style run without a file), `sweep` (a grid on threads with a progress bar), `plot` (PNGs of an
// --out folder), `list` (presets, GPUs, policies). Engine settings take vLLM's flags (tools/app/command_line.h).
// Argument parsing and exit codes only; all the work lives in tools/app and the libraries. Bad input → message on
// stderr and exit status 2, before simulating.
// Size (~740 lines): `run`/`sweep` (cmd_run_or_sweep, ~240 lines of options and output files) still lives here beside
// dispatch and `list`; the next split moves it to a run_command.cpp, as inspect, plan and validate were moved.
#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <sys/wait.h>

#include <unistd.h>

#include "calibration/gpu_spec.h"
#include "calibration/runner/calibrate.h"
#include "calibration/runner/exec_calibrate.h"
#include "tools/app/host_work_fit.h"
#include "common/error.h"
#include "common/heap_huge_pages.h"
#include "models/hf_config.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "sim/cache/hybrid/hybrid_cache_policy.h"
#include "sim/memory/memory_plan.h"
#include "sim/cluster/router.h"
#include "calibration/kernel_table.h"
#include "tools/app/command_line.h"
#include "tools/app/engine_keys.h"
#include "tools/app/executor.h"
#include "tools/app/experiment.h"
#include "tools/app/memory_projection.h"
#include "tools/app/flag_suggestions.h"
#include "tools/app/kernel_checks.h"
#include "tools/app/launch_command.h"
#include "tools/app/multi_turn_stats.h"
#include "tools/app/output.h"
#include "tools/app/output_inspect.h"
#include "tools/app/output_vllm_bench.h"
#include "tools/app/partial_results.h"
#include "tools/app/scenario.h"
#include "tools/app/step_costs.h"
#include "tools/inspect_command.h"
#include "tools/plan_command.h"
#include "tools/validate_command.h"
#ifdef SERVESIM_FAULT_INJECTION
#include "tests/tools/fault_injection.h"
#endif
#ifdef SERVESIM_WITH_MPI
#include "tools/mpi/mpi_executor.h"
#endif
#include "workloads/trace_reader.h"
#include "workloads/workload.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace servesim;

namespace {

constexpr const char* kUsage =
    "usage: servesim <command> [options]\n"
    "commands:\n"
    "  run [SCENARIO]     simulate a scenario (default scenarios/quickstart.yaml) and print its figures;\n"
    "                     without a file: servesim run --model M --request-rate R --num-prompts N ...\n"
    "  sweep SCENARIO     run a scenario's sweep grid on threads, one row per point\n"
    "  plan SCENARIO      max sustainable load, GPUs for a target load, cheapest configuration under SLOs\n"
    "                     without a file: servesim plan --model M --gpu G [vLLM flags] --slo ttft_p99=2s ...\n"
    "                     --gpus N: every TP x PP x DP (x EP) layout of N GPUs (nodes of --gpus-per-node)\n"
    "  inspect            vLLM's KV-cache sizing for a model on a GPU (block size, pages, capacity);\n"
    "                     inspect SCENARIO: each replica's topology GPUs, their memory and KV blocks;\n"
    "                     --step-costs prefill=2048 decode=64x2048: one step's cost term by term\n"
    "  validate RUN...    replay real runs (vllm bench serve --save-detailed JSON, per-request CSV/JSONL, run\n"
    "                     folders) and print each measured metric beside its prediction (docs/VALIDATION.md);\n"
    "                     --metrics-after FILE: a server's /metrics, its hit rate beside the prediction\n"
    "  plot OUT_DIR       draw the PNGs of a run's --out folder (latency, hit rate, queue and KV usage)\n"
    "  calibrate          fit a hardware profile: on a GPU (--model M), or from measured timings\n"
    "                     (--from-measurements FILE); see calibration/README.md\n"
    "  list               model presets, GPUs and routers\n"
    "  help [COMMAND]     this text, or a command's options\n"
    "options: --version (release, git commit, default vLLM version), --help\n"
    "run `servesim help <command>` or `servesim <command> --help` for a command's options\n";

// Where the data the binary reads lives: <prefix>/share/servesim after `cmake --install`, else the source tree.
fs::path data_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path installed = exe.parent_path().parent_path() / "share" / "servesim";
        if (fs::exists(installed / "scenarios", ec)) {
            return installed;
        }
    }
    return SERVESIM_SOURCE_DIR;
}

std::string default_scenario() {
    const fs::path local = "scenarios/quickstart.yaml";
    if (fs::exists(local)) {
        return local.string();
    }
    return (data_dir() / "scenarios" / "quickstart.yaml").string();
}

// The plot script: installed next to the data, or tools/plot/ in the source tree.
fs::path plot_script(const std::string& name = "servesim_plot.py") {
    for (const fs::path& p : {data_dir() / name, fs::path(SERVESIM_SOURCE_DIR) / "tools/plot" / name}) {
        if (fs::exists(p)) {
            return p;
        }
    }
    throw ConfigError("plot: " + name + " not found next to the binary's data (" + data_dir().string() + ")");
}

// Runs the plot script on an --out folder with Debian's Python, isolated (-I -S: no PYTHON* variables, no user or
// site-packages; the script adds only Debian's dist-packages, where python3-matplotlib lives), so a user's own
// python3 or pip packages cannot change or break the plots.
int run_plot(const std::string& out_dir, const std::string& script_name = "servesim_plot.py",
             const std::string& needs = "summary.csv") {
    if (!fs::exists(fs::path(out_dir) / needs)) {
        throw ConfigError("plot: " + out_dir + " holds no " + needs + "; give the folder of a run's --out");
    }
    const std::string python = "/usr/bin/python3";
    if (!fs::exists(python)) {
        throw ConfigError("plot: /usr/bin/python3 not found; install Debian's python3 and python3-matplotlib");
    }
    const std::string script = plot_script(script_name).string();
    const pid_t pid = fork();
    if (pid == 0) {
        execl(python.c_str(), python.c_str(), "-I", "-S", script.c_str(), out_dir.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

void check_format(const std::string& format) {
    if (format != "table" && format != "json" && format != "csv" && format != "vllm-bench" &&
        format != "multi-turn-bench") {
        throw ConfigError("--format: '" + format +
                          "' is not a format; allowed: table, json, csv, vllm-bench, multi-turn-bench");
    }
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();  // a full disk shows at the last flush
    if (!f) {
        throw ConfigError("--out: cannot write " + path.string());
    }
}

void write_outputs(const std::vector<app::ExperimentResult>& results, bool sweep, const std::string& format,
                   const std::string& out_dir, const app::BenchOptions& bench,
                   const std::vector<double>& warmup_fractions = {0.0}, bool all_columns = false) {
    std::string text;
    if (format == "json") {
        text = app::format_json(results);
    } else if (format == "csv") {
        text = app::format_csv(results);
    } else if (format == "vllm-bench") {
        text = app::format_vllm_bench(results, bench);
        // The block the tool prints to its console, on stderr: stdout stays the result JSON (as the tool's file).
        std::cerr << app::format_vllm_bench_console(results, bench);
    } else if (format == "multi-turn-bench") {
        text = app::format_multi_turn_bench(results, warmup_fractions);
    } else {
        text = app::format_table(results, sweep, all_columns);
    }
    std::cout << text;
    if (!out_dir.empty()) {
        const fs::path dir(out_dir);
        write_file(dir / "summary.json", app::format_json(results));
        write_file(dir / "summary.csv", app::format_csv(results));
        write_file(dir / "summary.txt", app::format_table(results, sweep, all_columns));
        write_file(dir / "timeseries.csv", app::format_timeseries_csv(results));
        const bool timed = std::none_of(results.begin(), results.end(), [](const auto& r) { return r.order_only.has_value(); });
        if (timed) {
            write_file(dir / "requests.csv", app::format_requests_csv(results));
            write_file(dir / "bench.json", app::format_vllm_bench(results, bench));
            write_file(dir / "launch.sh", app::format_launch_script(results));
        }
        std::cerr << "servesim: wrote " << (dir / "summary.{json,csv,txt}").string() << ", "
                  << (dir / "timeseries.csv").string()
                  << (timed ? ", " + (dir / "requests.csv").string() + ", " + (dir / "bench.json").string() +
                                  " and " + (dir / "launch.sh").string() + " (the vllm serve / bench lines)"
                            : "")
                  << "\n";
    }
}

// What a reader of the figures must know: why a run's status is not ok, rejections, truncation (docs/OUTPUTS.md).
void print_warnings(const std::vector<app::ExperimentResult>& results) {
    for (const auto& point : results) {
        std::vector<const app::ExperimentResult*> runs;
        for (const auto& run : point.replicate_runs) {
            runs.push_back(&run);
        }
        if (runs.empty()) {
            runs.push_back(&point);
        }
        for (const auto* r : runs) {
            for (const auto& w : r->warnings) {
                std::cerr << "servesim: warning: experiment '" << r->config.name << "'"
                          << (runs.size() > 1 ? fmt::format(" (seed {})", r->config.seed) : "") << ": " << w << "\n";
            }
        }
    }
}

int cmd_run_or_sweep(bool sweep, const std::vector<std::string>& args, app::Executor& executor) {
    const app::EngineFlags flags = app::take_engine_flags(args);
    std::string scenario;
    std::vector<std::string> sets;
    std::string format = sweep ? "table" : "table";
    std::string out_dir;
    std::vector<std::string> goodput;
    int replicates = 1;
    std::string percentile_metrics;
    std::string metric_percentiles;
    std::string warmup_percentages;
    std::string seed;
    std::string checkpoint;
    std::string resume;
    std::vector<std::string> experiment_names;
    std::string max_memory;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::optional<std::string> model;
    std::optional<std::string> gpu;
    std::optional<std::string> cost_model;
    app::BenchServeFlags bench;
    const auto opt_string = [](std::optional<std::string>& target) {
        return po::value<std::string>()->notifier([&target](const std::string& v) { target = v; });
    };
    po::options_description opts(sweep ? "usage: servesim sweep SCENARIO [options]\n\noptions"
                                       : "usage: servesim run [SCENARIO] [options]\n"
                                         "       servesim run --model M [--gpu G] [vllm bench serve flags] [options]"
                                         "\n\noptions");
    opts.add_options()("help,h", "show this help")(
        "set", po::value<std::vector<std::string>>(&sets)->composing(),
        "override a scenario key: --set engine.block_size=32, or a whole mapping: --set 'workload={type: "
        "synthetic, ...}' (repeatable)")(
        "format", po::value<std::string>(&format),
        "table (default), json, csv, vllm-bench (the result JSON of vllm bench serve) or multi-turn-bench (the "
        "statistics summary of vLLM's multi-turn benchmark); docs/OUTPUTS.md")(
        "out", po::value<std::string>(&out_dir),
        "also write summary.{json,csv,txt}, timeseries.csv (queue, KV usage over time), requests.csv (one row per "
        "request), bench.json (vllm-bench) and launch.sh (the vllm serve / bench lines) into this folder")(
        "plot", "with --out: also draw the folder's PNGs (servesim plot)")(
        "all-columns", "table of a sweep: every figure, one column per point (default: a headline, then TTFT/TPOT "
                       "p50/p99, throughput, hit rate, KV usage and status per point; docs/OUTPUTS.md)")(
        "experiment", po::value<std::vector<std::string>>(&experiment_names),
        "run only the experiment of this name (an experiments: entry; in a sweep, all its points); repeatable")(
        "goodput", po::value<std::vector<std::string>>(&goodput)->multitoken(),
        "service-level objectives in ms, as vllm bench serve --goodput: ttft:500 tpot:50 e2el:2000 (scenario key "
        "goodput); adds request_goodput")(
        "replicates", po::value<int>(&replicates),
        "run each experiment with N seeds (seed, seed+1, ...) and report mean, min, max and std per figure")(
        "percentile-metrics", po::value<std::string>(&percentile_metrics),
        "vllm-bench: metrics with percentiles, from ttft,tpot,itl,e2el (default ttft,tpot,itl)")(
        "metric-percentiles", po::value<std::string>(&metric_percentiles),
        "vllm-bench: comma-separated percentiles (default 99)")(
        "save-detailed", "vllm-bench (and bench.json in --out): add vllm bench serve --save-detailed's per-request "
                         "lists (input_lens, output_lens, ttfts, itls, start_times, errors); keeps every request's "
                         "token gaps, memory growing with the output tokens")(
        "warmup-percentages", po::value<std::string>(&warmup_percentages),
        "multi-turn-bench: leave out the first X % of samples, one table per X (e.g. 0%,50%; default 0%)")(
        "seed", po::value<std::string>(&seed), "master seed, 0 to 2^63-1 (replaces the scenario's)")(
        "jobs,j", po::value<int>(&jobs), "worker threads (results do not depend on it)")(
        "max-memory", po::value<std::string>(&max_memory),
        "refuse a run whose projected peak memory is above SIZE (e.g. 32GiB; default 80 % of this machine's "
        "memory); the projection is printed before the runs start (docs/MEMORY-PROJECTION.md)")(
        "checkpoint", po::value<std::string>(&checkpoint),
        "sweep: keep each finished run in FILE as it finishes (docs/MPI.md; a failed or interrupted sweep keeps one "
        "anyway)")(
        "resume", po::value<std::string>(&resume),
        "sweep: take the runs FILE holds (--checkpoint, or kept by a failed or interrupted sweep), run only the rest")(
        "model", opt_string(model), "model preset or Hugging Face repo id (replaces the scenario's model)")(
        "gpu", opt_string(gpu), "GPU name, see servesim list (replaces the scenario's; default H200)")(
        "cost-model", opt_string(cost_model),
        "roofline (default), measured (composed from the GPU's kernel table, docs/COST-MODEL.md) or a calibrated "
        "profile YAML")(
        "scenario", po::value<std::string>(&scenario), "scenario YAML");
    po::options_description bench_opts(
        "vllm bench serve flags, random dataset (a run without a scenario file; vLLM's defaults)");
    bench_opts.add_options()("request-rate", opt_string(bench.request_rate),
                             "requests per second, Poisson arrivals (default inf: all at t = 0)")(
        "burstiness", opt_string(bench.burstiness), "gamma shape of the gaps; 1 = Poisson (default 1)")(
        "num-prompts", opt_string(bench.num_prompts), "requests to send (default 1000)")(
        "random-input-len", opt_string(bench.random_input_len), "prompt tokens per request (default 1024)")(
        "random-output-len", opt_string(bench.random_output_len), "output tokens per request (default 128)")(
        "random-range-ratio", opt_string(bench.random_range_ratio),
        "lengths uniform on [L(1-r), L(1+r)], r in [0, 1) (default 0)")(
        "random-prefix-len", opt_string(bench.random_prefix_len), "tokens of a prefix shared by every prompt (default 0)")(
        "max-concurrency", opt_string(bench.max_concurrency), "most requests in flight (default no limit)");
    po::options_description all;
    all.add(opts).add(bench_opts);
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::command_line_parser parser(flags.rest);
    parser.options(all).positional(pos);
    app::store_or_suggest(parser, all, vm, sweep ? "sweep" : "run");
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts << "\n" << app::engine_flags_help();
        if (!sweep) {
            std::cout << "\n" << bench_opts
                      << "  a client time-out has no flag in vllm bench serve (its aiohttp session gives up after 6 h):\n"
                         "  --set workload.request_timeout=300s (workloads/README.md, docs/CLIENT-TIMEOUTS.md)\n";
        }
        return 0;
    }
    if (jobs < 1) {
        throw ConfigError("command line: --jobs: must be at least 1");
    }
    const std::int64_t memory_bound = vm.count("max-memory") ? app::parse_memory_size(max_memory, "--max-memory")
                                                             : app::default_memory_bound_bytes();
    if (vm.count("plot") && out_dir.empty()) {
        throw ConfigError("command line: --plot: needs --out DIR (the folder the PNGs are drawn from and into)");
    }
    check_format(format);
    app::BenchOptions bench_options = app::parse_bench_options(percentile_metrics, metric_percentiles);
    bench_options.save_detailed = vm.count("save-detailed") > 0;
    if (bench_options.save_detailed && format != "vllm-bench" && out_dir.empty()) {
        throw ConfigError("command line: --save-detailed: applies to --format vllm-bench or to --out DIR's bench.json; "
                          "add one of them");
    }
    if (format == "vllm-bench" || !out_dir.empty()) {
        app::check_bench_percentiles(bench_options);  // bench.json / the vllm-bench result use them
    }
    if (vm.count("warmup-percentages") && format != "multi-turn-bench") {
        throw ConfigError("command line: --warmup-percentages: applies to --format multi-turn-bench only");
    }
    const std::vector<double> warmup_fractions =
        vm.count("warmup-percentages") ? app::parse_warmup_percentages(warmup_percentages) : std::vector<double>{0.0};
    // --goodput and --replicates are the scenario keys `goodput` and `replicates`, set for every experiment.
    std::vector<app::Override> output_overrides;
    for (const auto& slo : goodput) {
        const auto colon = slo.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == slo.size()) {
            throw ConfigError("command line: --goodput: '" + slo + "' is not KEY:VALUE; give e.g. --goodput ttft:500 "
                              "tpot:50 (keys ttft, tpot, e2el; values in ms)");
        }
        app::Override o = app::parse_set_override("goodput." + slo.substr(0, colon) + "=" + slo.substr(colon + 1));
        o.origin = "--goodput " + slo;
        output_overrides.push_back(std::move(o));
    }
    if (vm.count("replicates")) {
        if (replicates < 1) {
            throw ConfigError("command line: --replicates: must be at least 1");
        }
        output_overrides.push_back({"replicates", YAML::Node(replicates), fmt::format("--replicates {}", replicates)});
    }
    if (!out_dir.empty()) {
        app::check_out_dir(out_dir);
    }
    std::vector<app::Override> overrides;
    app::Scenario sc;
    // --set, the engine flags, the output flags and --seed: the last layers, in this order, with or without a file.
    auto add_command_line_overrides = [&] {
        for (const auto& s : sets) {
            overrides.push_back(app::parse_set_override(s));
        }
        overrides.insert(overrides.end(), flags.overrides.begin(), flags.overrides.end());
        overrides.insert(overrides.end(), output_overrides.begin(), output_overrides.end());
        if (vm.count("seed")) {  // given empty (--seed '') it is refused, not ignored
            overrides.push_back({"seed", YAML::Node(app::parse_seed_flag(seed)), "--seed"});
        }
    };
    if (scenario.empty() && (model || bench.any()) && !sweep) {
        if (!model) {
            throw ConfigError("command line: a run without a scenario file needs --model (a preset or a Hugging Face "
                              "repo id; servesim list shows the presets)");
        }
        app::ScenarioLessRun run = app::scenario_less_run(*model, gpu, cost_model, bench);
        overrides = std::move(run.overrides);
        scenario = "command line";
        add_command_line_overrides();
        sc = app::load_scenario_text(run.text, scenario, overrides);
    } else {
        if (bench.any()) {
            throw ConfigError("command line: the vllm bench serve flags (--request-rate, --num-prompts, --random-*) "
                              "build the workload of a run without a scenario file; with a scenario, set its keys: "
                              "--set workload.rate=10");
        }
        if (scenario.empty()) {
            if (sweep) {
                throw ConfigError(
                    "sweep: a scenario file is required, e.g. servesim sweep scenarios/seed-study/tenant-sweep.yaml");
            }
            scenario = default_scenario();
        }
        for (const auto& [value, key, flag] : {std::tuple{&model, "model", "--model"}, {&gpu, "gpu", "--gpu"},
                                               {&cost_model, "cost_model", "--cost-model"}}) {
            if (*value) {
                overrides.push_back({key, YAML::Node(**value), flag});
            }
        }
        add_command_line_overrides();
        sc = app::load_scenario(scenario, overrides);
    }
    app::keep_experiments(sc, experiment_names);
    if (sweep && !sc.is_sweep && executor.is_root()) {
        std::cerr << "servesim: " << scenario << " has no sweep: block; running its experiments as points\n";
    }
    const auto start = std::chrono::steady_clock::now();
    const bool tty = isatty(STDERR_FILENO) != 0;  // a bar only for a person watching; logs get the summary line
    auto progress = [&](int done, int total) {
        if ((!sweep && total == 1) || !tty) {
            return;
        }
        const int width = 30;
        const int filled = width * done / total;
        std::cerr << fmt::format("\r[{}{}] {}/{}", std::string(filled, '#'), std::string(width - filled, '.'), done,
                                 total)
                  << (done == total ? "\n" : "") << std::flush;
    };
    // requests.csv (--out), the vllm-bench result and the multi-turn-bench statistics need one record per request; otherwise none is kept, so memory
    // stays flat in the run length.
    if (!out_dir.empty() || format == "vllm-bench" || format == "multi-turn-bench") {
        for (auto& x : sc.experiments) {
            x.keep_request_records = true;
            x.keep_request_itls = bench_options.save_detailed;  // only then is each request's gap list kept
        }
    }
    // A sweep keeps each finished run in a partial-results file (the root only), for --resume after a failure.
    // A scenario fingerprint in its header keeps another command's file from being resumed; SIGINT/SIGTERM stop the
    // sweep after the runs in flight and print the --resume command (tools/app/interrupt.h).
    std::vector<std::string> words{sweep ? "sweep" : "run"};
    words.insert(words.end(), args.begin(), args.end());
    app::PartialResultsScope partial(executor, sweep || !checkpoint.empty() || !resume.empty(), checkpoint, resume,
                                     out_dir, app::scenario_fingerprint(sc.experiments), words);
    const auto results = partial.run(std::cerr, [&](app::PartialResults* file) {
        return app::run_experiments(sc.experiments, jobs, progress,
                                    app::RunOptions{&executor, file, false, memory_bound, &std::cerr});
    });
    if (!executor.is_root()) {
        return 0;  // rank 0 writes the outputs
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::size_t runs = 0;
    for (const auto& r : results) {
        runs += std::max<std::size_t>(1, r.replicate_runs.size());
    }
    std::cerr << fmt::format("servesim: {} experiment(s){} in {:.2f} s wall time\n", results.size(),
                             runs > results.size() ? fmt::format(", {} runs with replicates", runs) : "", wall);
    print_warnings(results);
    write_outputs(results, sweep || sc.is_sweep, format, out_dir, bench_options, warmup_fractions,
                  vm.count("all-columns") > 0);
    if (vm.count("plot")) {
        return run_plot(out_dir);
    }
    return 0;
}

int cmd_list() {
    std::cout << "model presets (and the Hugging Face repo ids that resolve to them):\n";
    for (const auto& n : models::preset_names()) {
        std::string ids;
        for (const auto& [id, preset] : models::hf_repo_ids()) {
            if (preset == n) {
                ids += (ids.empty() ? "" : ", ") + id;
            }
        }
        std::cout << (ids.empty() ? fmt::format("  {}\n", n) : fmt::format("  {:<20} {}\n", n, ids));
    }
    // Every model_type read_hf_config loads (docs/MODELS.md says what each family models).
    std::cout << "config.json model_type values that load:\n ";
    std::size_t width = 1;
    for (const auto& t : models::supported_model_types()) {
        if (width + t.size() + 1 > 100) {
            std::cout << "\n ";
            width = 1;
        }
        std::cout << ' ' << t;
        width += t.size() + 1;
    }
    std::cout << "\n";
    std::cout << "gpus:\n";
    // One line per GPU file (calibration/gpus/, docs/GPUS.md); a user file works by path: --gpu my_gpu.yaml.
    for (const auto& g : calibration::gpu_catalog()) {
        const auto tflops = [](double f) { return f > 0 ? fmt::format("{:.0f}", f / 1e12) : std::string("-"); };
        const std::string link = g.interconnect_domain_gpus > 0
                                     ? fmt::format("{} {:.0f} GB/s x{}", calibration::interconnect_topology_name(
                                                                             g.interconnect_topology),
                                                   g.interconnect_bytes_per_s / 1e9, g.interconnect_domain_gpus)
                                     : fmt::format("pcie {:.0f} GB/s{}", g.interconnect_bytes_per_s / 1e9,
                                                   g.interconnect_peer_to_peer ? "" : ", no P2P");
        std::cout << fmt::format("  {:<13} {:>6.1f} GiB  {:>6.0f} GB/s  {:>6.0f} TFLOP/s bf16  fp8 {:>5}  fp4 {:>5}  "
                                 "{:<26} {}\n",
                                 g.name, g.memory_bytes / (1024.0 * 1024.0 * 1024.0),
                                 g.memory_bandwidth_bytes_per_s / 1e9, g.bf16_dense_flops_per_s / 1e12,
                                 tflops(g.fp8_dense_flops_per_s), tflops(g.fp4_dense_flops_per_s), link,
                                 g.usd_per_gpu_hour ? fmt::format("${:.2f}/h as of {}", *g.usd_per_gpu_hour, g.price_date)
                                                     : "unpriced");
        // The other names --gpu takes for it: the driver's (nvidia-smi, torch.cuda.get_device_name) and aliases.
        std::vector<std::string> also;
        if (!g.device_name.empty()) {
            also.push_back("\"" + g.device_name + "\"");
        }
        for (const auto& a : g.aliases) {
            also.push_back(a.find(' ') == std::string::npos ? a : "\"" + a + "\"");
        }
        if (!also.empty()) {
            std::cout << fmt::format("  {:<13} also: {}\n", "", fmt::join(also, ", "));
        }
    }
    std::cout << "  <gpu.yaml>    your own GPU file, by path (format: docs/GPUS.md)\n";
    std::cout << "workload types:\n";
    for (const auto& w : workloads::workload_types()) {
        std::cout << fmt::format("  {:<16} {}\n", w.name, w.description);
    }
    std::cout << "trace formats:\n";
    for (const auto& t : workloads::trace_formats()) {
        std::cout << fmt::format("  {:<16} {}\n", t.name, t.description);
    }
    std::cout << "cost models:\n"
              << "  roofline         datasheet FLOP/s and bandwidth with stated efficiencies (any GPU above)\n"
              << "  measured         composed from measured kernel tables (" << [] {
                     std::string names;
                     for (const auto& t : calibration::kernel_table_catalog()) {
                         names += (names.empty() ? "" : ", ") + t.gpu;
                     }
                     return names.empty() ? std::string("none built in") : names;
                 }() << "; other GPUs by efficiency transfer)\n"
              << "  <profile.yaml>   fitted curves from calibration (calibration/profiles/)\n";
    std::cout << "weight quantization (config.json quantization_config; docs/QUANTIZATION.md):\n  ";
    std::string methods;
    for (const auto& m : models::supported_quantization_methods()) {
        methods += (methods.empty() ? "" : ", ") + m;
    }
    std::cout << methods << "\n";
    std::cout << "routers:\n";
    for (const auto& r : cluster::router_table()) {
        std::cout << fmt::format("  {:<16} {}\n", r.name, r.description);
    }
    // engine.hybrid_cache_policy (sim/cache/hybrid/hybrid_cache_policy.h, docs/HYBRID-POLICIES.md).
    std::cout << "hybrid cache policies (engine.hybrid_cache_policy):\n";
    for (const auto& h : cache::hybrid_policies()) {
        std::cout << fmt::format("  {:<20} {}\n", h.name, h.description);
    }
    return 0;
}

int print_version() {
    std::cout << fmt::format("servesim {} (git {})\nvLLM rules: {} by default; modelled releases {} to {}\n",
                             SERVESIM_RELEASE, SERVESIM_GIT_COMMIT, core::kNewestModelled.str(),
                             core::kOldestModelled.str(), core::kNewestModelled.str());
    return 0;
}

int dispatch(const std::string& cmd, const std::vector<std::string>& args, app::Executor& executor) {
    if (cmd == "run" || cmd == "sweep") {
        return cmd_run_or_sweep(cmd == "sweep", args, executor);
    }
    if (cmd == "inspect") {
        return cli::cmd_inspect(args);
    }
    if (cmd == "plan") {
        // Boost.Program_options wants argv; argv[0] names the command.
        std::vector<std::string> words{"plan"};
        words.insert(words.end(), args.begin(), args.end());
        std::vector<char*> plan_argv;
        for (auto& w : words) {
            plan_argv.push_back(w.data());
        }
        return cli::cmd_plan(static_cast<int>(plan_argv.size()), plan_argv.data(),
                             [](const std::string& out) { return run_plot(out, "plot_plan.py", "plan.json"); },
                             executor);
    }
    if (cmd == "validate") {
        return cli::cmd_validate(args, executor, [](const std::string& out) {
            return run_plot(out, "plot_validation.py", "validation.json");
        });
    }
    if (cmd == "plot") {
        if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
            std::cout << "usage: servesim plot OUT_DIR\n"
                         "draws latency, hit rate, queue and KV usage PNGs from a run's --out folder into it\n";
            return 0;
        }
        if (args.size() != 1 || args[0].starts_with("-")) {
            throw ConfigError("command line: plot: expected one folder (a run's --out), e.g. servesim plot results/x");
        }
        return run_plot(args[0]);
    }
    if (cmd == "calibrate") {
        if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
            std::cout << calibration::kCalibrateUsage;
            return 0;
        }
        if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--fit"; })) {
            return cli::cmd_fit_request_path(args, executor);  // a fit that replays measured runs
        }
        calibration::CalibrateOptions options;
        std::string message;
        if (!calibration::parse_calibrate_args(args, options, message)) {
            // The runner is also the standalone servesim-calibrate; here its usage is `servesim calibrate`.
            for (auto p = message.find("servesim-calibrate"); p != std::string::npos;
                 p = message.find("servesim-calibrate")) {
                message.replace(p, 18, "servesim calibrate");
            }
            std::cerr << "servesim: error: calibrate: " << message << "\n";
            return 2;
        }
        if (!options.host_work_gpu.empty()) {
            return app::run_host_work_fit(options, std::cout, std::cerr);  // docs/HOST-WORK.md
        }
        // The GPU sweep is servesim-calibrate's (a CUDA build); this binary links no CUDA library.
        return calibration::run_calibrate(
            options, std::cout, std::cerr,
            [&](const calibration::CalibrateOptions&, std::ostream&, std::ostream& log) {
                return calibration::exec_servesim_calibrate(args, log);
            },
            /*announce=*/false);
    }
    if (cmd == "list") {
        return cmd_list();
    }
    if (cmd == "help") {
        if (args.empty()) {
            std::cout << kUsage;
            return 0;
        }
        if (args[0] == "help" || args[0] == "list") {
            std::cout << kUsage;
            return 0;
        }
        return dispatch(args[0], {"--help"}, executor);
    }
    std::cerr << "servesim: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
}

#ifdef SERVESIM_WITH_MPI
// What ranks other than 0 would print to stdout: nothing. Rank 0 alone writes the outputs of a farmed-out sweep or
// plan, and a command that is not farmed out (inspect, list, help, describe) is run by every rank, so printing it
// on each would repeat it once per rank. Restores std::cout's buffer when main returns.
class SilenceStdoutUnlessRoot {
  public:
    explicit SilenceStdoutUnlessRoot(bool silence) {
        if (silence) {
            previous_ = std::cout.rdbuf(&discard_);
        }
    }
    ~SilenceStdoutUnlessRoot() {
        if (previous_ != nullptr) {
            std::cout.rdbuf(previous_);
        }
    }
    SilenceStdoutUnlessRoot(const SilenceStdoutUnlessRoot&) = delete;
    SilenceStdoutUnlessRoot& operator=(const SilenceStdoutUnlessRoot&) = delete;

  private:
    struct Discard : std::streambuf {
        int overflow(int c) override { return traits_type::not_eof(c); }
        std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
    };
    Discard discard_;
    std::streambuf* previous_ = nullptr;
};
#endif

}  // namespace

int main(int argc, char** argv) {
    servesim::prepare_heap_for_huge_pages();  // before anything allocates much (common/heap_huge_pages.h)
    // Under mpirun or srun every rank runs this same command; rank 0 farms the runs out and alone writes the outputs
    // (tools/mpi/mpi_executor.h, docs/MPI.md). Otherwise, or without MPI at build time, one process runs them.
#ifdef SERVESIM_WITH_MPI
    mpi::MpiSession mpi_session(argc, argv);
    mpi::MpiExecutor mpi_executor(mpi_session);
    app::LocalExecutor local_executor;
    app::Executor& executor =
        mpi_session.size() > 1 ? static_cast<app::Executor&>(mpi_executor) : static_cast<app::Executor&>(local_executor);
    const SilenceStdoutUnlessRoot stdout_on_rank_0_only(mpi_session.size() > 1 && mpi_session.rank() != 0);
    // An error the other ranks cannot know of (one rank's own, not a failed run every rank was told of) would leave
    // them waiting: it ends the job. A rank other than 0 waits a moment before it reports, so that an error every
    // rank meets (a typo in the scenario) is reported once, by rank 0, whose MPI_Abort ends the others.
    const auto fail = [&](int status, const std::string& text) {
        if (mpi_session.size() > 1 && !mpi_executor.failed_cleanly()) {
            if (!executor.is_root()) {
                std::this_thread::sleep_for(std::chrono::seconds(2));
                std::cerr << "servesim: rank " << mpi_session.rank() << ": " << text.substr(text.find(": ") + 2);
            } else {
                std::cerr << text;
            }
            std::cerr << std::flush;
            mpi_session.abort(status);
        }
        std::cerr << text;
        return status;
    };
#else
    app::LocalExecutor executor;
    const auto fail = [](int status, const std::string& text) {
        std::cerr << text;
        return status;
    };
#endif
#ifdef SERVESIM_FAULT_INJECTION
    // The test-only build of this file (servesim-faults, tools/CMakeLists.txt): SERVESIM_FAIL_RUN fails or crashes
    // a named run (tests/tools/fault_injection.h). The released servesim is compiled without it.
#ifdef SERVESIM_WITH_MPI
    local_executor.fault_hook = test::fault_from_environment();
    mpi_executor.fault_hook = test::fault_from_environment();
#else
    executor.fault_hook = test::fault_from_environment();
#endif
#endif
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::cout << kUsage;
        return argc < 2 ? 2 : 0;
    }
    if (std::string(argv[1]) == "--version" || std::string(argv[1]) == "-V") {
        return print_version();
    }
    try {
        const int rc = dispatch(argv[1], std::vector<std::string>(argv + 2, argv + argc), executor);
        // Every command's output goes to stdout: a full disk or a closed pipe must not pass as success.
        std::cout.flush();
        if (!std::cout) {
            std::cerr << "servesim: error: could not write the output to standard output (a full disk, a closed "
                         "pipe?)\n";
            return rc == 0 ? 1 : rc;
        }
        return rc;
    } catch (const app::RunAbandoned&) {
        return 1;  // a run failed on some rank; rank 0 names it
    } catch (const app::Interrupted& e) {
        return 128 + e.signal();  // as a shell reports a process a signal ended; the partial-results scope said why
    } catch (const ConfigError& e) {
        return fail(2, fmt::format("servesim: error: {}\n", e.what()));
    } catch (const po::error& e) {
        return fail(2, fmt::format("servesim: error: command line: {}\n", e.what()));
    } catch (const InvariantError& e) {
        return fail(1, fmt::format("servesim: internal error (please report): {}\n", e.what()));
    } catch (const std::exception& e) {
        return fail(1, fmt::format("servesim: error: {}\n", e.what()));
    }
}
