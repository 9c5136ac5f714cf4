// servesim command line: `inspect` (vLLM's start-up arithmetic), `run` (one scenario, side by side), `sweep` (a grid
// on threads with a progress bar), `list` (presets, GPUs, policies). Argument parsing and exit codes only; all the
// work lives in tools/app and the libraries. Bad input → message on stderr and exit status 2, before simulating.
#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "calibration/gpu_spec.h"
#include "calibration/runner/calibrate.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "sim/cache/memory_plan.h"
#include "sim/cluster/router.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/scenario.h"
#include "tools/plan_command.h"
#include "workloads/trace_reader.h"
#include "workloads/workload.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace servesim;

namespace {

constexpr const char* kUsage =
    "usage: servesim <command> [options]\n"
    "commands:\n"
    "  run [SCENARIO]     simulate a scenario (default scenarios/quickstart.yaml) and print its figures\n"
    "  sweep SCENARIO     run a scenario's sweep grid on threads, one row per point\n"
    "  plan SCENARIO      max sustainable load, GPUs for a target load, cheapest configuration under SLOs\n"
    "  inspect            vLLM's KV-cache sizing for a model on a GPU (block size, pages, capacity)\n"
    "  calibrate          fit a hardware profile: on a GPU (--model M), or from measured timings\n"
    "                     (--from-measurements FILE); see calibration/README.md\n"
    "  list               model presets, GPUs and routers\n"
    "run `servesim <command> --help` for a command's options\n";

std::string default_scenario() {
    const fs::path local = "scenarios/quickstart.yaml";
    if (fs::exists(local)) {
        return local.string();
    }
    return (fs::path(SERVESIM_SOURCE_DIR) / "scenarios" / "quickstart.yaml").string();
}

void check_format(const std::string& format) {
    if (format != "table" && format != "json" && format != "csv" && format != "vllm-bench") {
        throw ConfigError("--format: '" + format + "' is not a format; allowed: table, json, csv, vllm-bench");
    }
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) {
        throw ConfigError("--out: cannot write " + path.string());
    }
}

void write_outputs(const std::vector<app::ExperimentResult>& results, bool sweep, const std::string& format,
                   const std::string& out_dir, const app::BenchOptions& bench) {
    std::string text;
    if (format == "json") {
        text = app::format_json(results);
    } else if (format == "csv") {
        text = app::format_csv(results);
    } else if (format == "vllm-bench") {
        text = app::format_vllm_bench(results, bench);
    } else {
        text = app::format_table(results, sweep);
    }
    std::cout << text;
    if (!out_dir.empty()) {
        const fs::path dir(out_dir);
        write_file(dir / "summary.json", app::format_json(results));
        write_file(dir / "summary.csv", app::format_csv(results));
        write_file(dir / "summary.txt", app::format_table(results, sweep));
        write_file(dir / "timeseries.csv", app::format_timeseries_csv(results));
        const bool timed = std::none_of(results.begin(), results.end(), [](const auto& r) { return r.order_only.has_value(); });
        if (timed) {
            write_file(dir / "requests.csv", app::format_requests_csv(results));
            write_file(dir / "bench.json", app::format_vllm_bench(results, bench));
        }
        std::cerr << "servesim: wrote " << (dir / "summary.{json,csv,txt}").string() << ", "
                  << (dir / "timeseries.csv").string()
                  << (timed ? ", " + (dir / "requests.csv").string() + " and " + (dir / "bench.json").string() : "")
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

int cmd_run_or_sweep(bool sweep, int argc, char** argv) {
    std::string scenario;
    std::vector<std::string> sets;
    std::string format = sweep ? "table" : "table";
    std::string out_dir;
    std::vector<std::string> goodput;
    int replicates = 1;
    std::string percentile_metrics;
    std::string metric_percentiles;
    std::uint64_t seed = 0;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    po::options_description opts(sweep ? "servesim sweep SCENARIO [options]" : "servesim run [SCENARIO] [options]");
    opts.add_options()("help,h", "show this help")(
        "set", po::value<std::vector<std::string>>(&sets)->composing(),
        "override a scenario key: --set engine.block_size=32 (repeatable)")(
        "format", po::value<std::string>(&format),
        "table (default), json, csv or vllm-bench (the result JSON of vllm bench serve; docs/OUTPUTS.md)")(
        "out", po::value<std::string>(&out_dir),
        "also write summary.{json,csv,txt}, timeseries.csv (queue, KV usage over time), requests.csv (one row per "
        "request) and bench.json (vllm-bench) into this folder")(
        "goodput", po::value<std::vector<std::string>>(&goodput)->multitoken(),
        "service-level objectives in ms, as vllm bench serve --goodput: ttft:500 tpot:50 e2el:2000 (scenario key "
        "goodput); adds request_goodput")(
        "replicates", po::value<int>(&replicates),
        "run each experiment with N seeds (seed, seed+1, ...) and report mean, min, max and std per figure")(
        "percentile-metrics", po::value<std::string>(&percentile_metrics),
        "vllm-bench: metrics with percentiles, from ttft,tpot,itl,e2el (default ttft,tpot,itl)")(
        "metric-percentiles", po::value<std::string>(&metric_percentiles),
        "vllm-bench: comma-separated percentiles (default 99)")(
        "seed", po::value<std::uint64_t>(&seed), "master seed (replaces the scenario's)")(
        "jobs,j", po::value<int>(&jobs), "worker threads (results do not depend on it)")(
        "scenario", po::value<std::string>(&scenario), "scenario YAML");
    po::positional_options_description pos;
    pos.add("scenario", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts;
        return 0;
    }
    if (scenario.empty()) {
        if (sweep) {
            throw ConfigError("sweep: a scenario file is required, e.g. servesim sweep scenarios/seed-study/tenant-sweep.yaml");
        }
        scenario = default_scenario();
    }
    if (jobs < 1) {
        throw ConfigError("--jobs: must be at least 1");
    }
    check_format(format);
    const app::BenchOptions bench = app::parse_bench_options(percentile_metrics, metric_percentiles);
    // --goodput and --replicates are the scenario keys `goodput` and `replicates`, set for every experiment.
    for (const auto& slo : goodput) {
        const auto colon = slo.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == slo.size()) {
            throw ConfigError("--goodput: '" + slo + "' is not KEY:VALUE; give e.g. --goodput ttft:500 tpot:50 "
                              "(keys ttft, tpot, e2el; values in ms)");
        }
        sets.push_back("goodput." + slo.substr(0, colon) + "=" + slo.substr(colon + 1));
    }
    if (vm.count("replicates")) {
        if (replicates < 1) {
            throw ConfigError("--replicates: must be at least 1");
        }
        sets.push_back(fmt::format("replicates={}", replicates));
    }
    if (!out_dir.empty()) {
        app::check_out_dir(out_dir);
    }
    const app::Scenario sc = app::load_scenario(scenario, sets,
                                                vm.count("seed") ? std::optional<std::uint64_t>(seed) : std::nullopt);
    if (sweep && !sc.is_sweep) {
        std::cerr << "servesim: " << scenario << " has no sweep: block; running its experiments as points\n";
    }
    const auto start = std::chrono::steady_clock::now();
    std::mutex mu;
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
    const auto results = app::run_experiments(sc.experiments, jobs, progress);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::size_t runs = 0;
    for (const auto& r : results) {
        runs += std::max<std::size_t>(1, r.replicate_runs.size());
    }
    std::cerr << fmt::format("servesim: {} experiment(s){} in {:.2f} s wall time\n", results.size(),
                             runs > results.size() ? fmt::format(", {} runs with replicates", runs) : "", wall);
    print_warnings(results);
    write_outputs(results, sweep || sc.is_sweep, format, out_dir, bench);
    return 0;
}

int cmd_inspect(int argc, char** argv) {
    std::string model_name;
    std::string gpu_name = "H200";
    std::string format = "table";
    app::EngineSettings e;
    double util = 0;
    std::string kv_dtype = "auto";
    std::string mamba_mode;
    std::int64_t max_model_len = 0;
    int block_size = 0;
    std::int64_t batched = 0;
    std::int64_t kv_bytes = 0;
    std::string vllm_version = core::kNewestModelled.str();
    int tp = 1;
    po::options_description opts("servesim inspect --model M --gpu G [options]");
    opts.add_options()("help,h", "show this help")("model", po::value<std::string>(&model_name),
                                                   "preset name or path to a config.json / preset YAML")(
        "gpu", po::value<std::string>(&gpu_name), "GPU name (servesim list shows them); default H200")(
        "gpu-memory-utilization", po::value<double>(&util), "fraction of GPU memory vLLM may use, in (0, 1]")(
        "kv-cache-dtype", po::value<std::string>(&kv_dtype), "auto or fp8")(
        "enable-prefix-caching", "turn prefix caching on (default: on for plain decoders, off for hybrids)")(
        "no-enable-prefix-caching", "turn prefix caching off")(
        "mamba-cache-mode", po::value<std::string>(&mamba_mode), "none, align or all")(
        "max-model-len", po::value<std::int64_t>(&max_model_len), "context limit in tokens")(
        "block-size", po::value<int>(&block_size), "attention block size in tokens (multiple of 16)")(
        "max-num-batched-tokens", po::value<std::int64_t>(&batched), "token budget per step")(
        "kv-cache-memory-bytes", po::value<std::int64_t>(&kv_bytes), "KV pool size, replacing the memory profile")(
        "vllm-version", po::value<std::string>(&vllm_version), ("vLLM release whose rules to follow (default " + core::kNewestModelled.str() + ")").c_str())(
        "tensor-parallel-size", po::value<int>(&tp), "GPUs per replica (default 1); the figures are per GPU")(
        "format", po::value<std::string>(&format), "table (default) or json");
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts;
        return 0;
    }
    if (model_name.empty()) {
        throw ConfigError("inspect: --model is required; known presets: " + [] {
            std::string s;
            for (const auto& n : models::preset_names()) {
                s += (s.empty() ? "" : ", ") + n;
            }
            return s;
        }());
    }
    if (vm.count("gpu-memory-utilization")) {
        e.gpu_memory_utilization = util;
    }
    if (kv_dtype == "fp8" || kv_dtype == "fp8_e4m3" || kv_dtype == "fp8_e5m2") {
        e.kv_cache_dtype_fp8 = true;
    } else if (kv_dtype != "auto") {
        throw ConfigError("--kv-cache-dtype: '" + kv_dtype + "' is not supported; allowed: auto, fp8");
    }
    if (vm.count("enable-prefix-caching")) {
        e.enable_prefix_caching = true;
    }
    if (vm.count("no-enable-prefix-caching")) {
        e.enable_prefix_caching = false;
    }
    if (!mamba_mode.empty()) {
        e.mamba_cache_mode = cache::parse_mamba_cache_mode(mamba_mode);
    }
    if (vm.count("max-model-len")) {
        e.max_model_len = max_model_len;
    }
    if (vm.count("block-size")) {
        e.block_size = block_size;
    }
    if (vm.count("max-num-batched-tokens")) {
        e.max_num_batched_tokens = batched;
    }
    if (vm.count("kv-cache-memory-bytes")) {
        e.kv_cache_memory_bytes = kv_bytes;
    }
    e.vllm_version = vllm_version;
    e.tensor_parallel_size = tp;
    if (format != "table" && format != "json") {
        throw ConfigError("--format: '" + format + "' is not a format; allowed: table, json");
    }
    const models::ModelSpec model = models::resolve_model(model_name);
    const calibration::GpuSpec gpu = calibration::find_gpu(gpu_name);
    const cache::MemoryPlan plan = cache::plan_memory(model, app::memory_plan_request(e, gpu));
    if (format == "json") {
        std::cout << app::inspect_json(model, gpu.name, plan).dump(2) << "\n";
    } else {
        std::cout << app::inspect_table(model, gpu.name, plan);
    }
    return 0;
}

int cmd_list() {
    std::cout << "model presets:\n";
    for (const auto& n : models::preset_names()) {
        std::cout << "  " << n << "\n";
    }
    std::cout << "gpus:\n";
    for (const auto& g : calibration::gpu_catalog()) {
        std::cout << fmt::format("  {:<12} {:>6.1f} GiB  {:>6.0f} GB/s  {:>6.0f} TFLOP/s bf16\n", g.name,
                                 g.memory_bytes / (1024.0 * 1024.0 * 1024.0), g.memory_bandwidth_bytes_per_s / 1e9,
                                 g.bf16_dense_flops_per_s / 1e12);
    }
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
              << "  <profile.yaml>   fitted curves from calibration (calibration/profiles/)\n";
    std::cout << "routers:\n";
    for (const auto& r : cluster::router_table()) {
        std::cout << fmt::format("  {:<16} {}\n", r.name, r.description);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::cout << kUsage;
        return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    try {
        if (cmd == "run") {
            return cmd_run_or_sweep(false, argc - 1, argv + 1);
        }
        if (cmd == "sweep") {
            return cmd_run_or_sweep(true, argc - 1, argv + 1);
        }
        if (cmd == "inspect") {
            return cmd_inspect(argc - 1, argv + 1);
        }
        if (cmd == "plan") {
            return cli::cmd_plan(argc - 1, argv + 1);
        }
        if (cmd == "calibrate") {
            calibration::CalibrateOptions options;
            std::string message;
            if (!calibration::parse_calibrate_args(std::vector<std::string>(argv + 2, argv + argc), options, message)) {
                std::cerr << "servesim calibrate: " << message << "\n";
                return 2;
            }
            return calibration::run_calibrate(options, std::cout, std::cerr);
        }
        if (cmd == "list") {
            return cmd_list();
        }
        std::cerr << "servesim: unknown command '" << cmd << "'\n" << kUsage;
        return 2;
    } catch (const ConfigError& e) {
        std::cerr << "servesim: error: " << e.what() << "\n";
        return 2;
    } catch (const po::error& e) {
        std::cerr << "servesim: error: " << e.what() << "\n";
        return 2;
    } catch (const InvariantError& e) {
        std::cerr << "servesim: internal error (please report): " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "servesim: error: " << e.what() << "\n";
        return 1;
    }
}
