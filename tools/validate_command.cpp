// `servesim validate RUN... [options]`; see validate_command.h.
#include "tools/validate_command.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "common/error.h"
#include "common/input_file.h"
#include "sim/engine/fused_moe_jit.h"
#include "tools/app/command_line.h"
#include "tools/app/output.h"
#include "tools/app/scenario.h"
#include "tools/app/flag_suggestions.h"
#include "tools/app/validation.h"

namespace servesim::cli {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) {
        throw ConfigError(path.string() + ": cannot be written");
    }
}

// The stream of a per-request input as a servesim csv trace (t_s,prompt_tokens,output_tokens[,prefix_id]).
std::string trace_csv(const app::MeasuredRun& run) {
    bool prefix = false;
    for (const auto& r : run.requests) {
        prefix = prefix || r.prefix_id.has_value();
    }
    std::string s = prefix ? "t_s,prompt_tokens,output_tokens,prefix_id\n" : "t_s,prompt_tokens,output_tokens\n";
    for (const auto& r : run.requests) {
        // A request with no output still asks for one token (vLLM's max_tokens ≥ 1).
        s += fmt::format("{:.9f},{},{}", r.send_s, r.prompt_tokens, std::max<std::int64_t>(1, r.output_tokens));
        if (prefix) {
            s += r.prefix_id ? fmt::format(",{}", *r.prefix_id) : std::string(",");
        }
        s += "\n";
    }
    return s;
}

// What the replays of measured runs need from the command line.
struct ReplayOptions {
    std::optional<std::string> model, gpu, cost_model;
    std::string scenario;
    std::vector<std::string> sets;
    std::vector<app::Override> engine_overrides;
    fs::path trace_dir;  // where traces of per-request inputs are written
};

// A campaign folder (no experiment.json of its own, run folders below it) stands for its runs, by name.
std::vector<std::string> expand_runs(const std::vector<std::string>& runs) {
    std::vector<std::string> expanded;
    for (const auto& r : runs) {
        std::error_code ec;
        const fs::path p = fs::path(r);
        if (fs::is_directory(p, ec) && !fs::exists(p / "experiment.json")) {
            std::vector<std::string> below;
            for (const auto& entry : fs::directory_iterator(p, ec)) {
                if (entry.is_directory() && fs::exists(entry.path() / "experiment.json")) {
                    below.push_back(entry.path().string());
                }
            }
            std::sort(below.begin(), below.end());
            if (!below.empty()) {
                expanded.insert(expanded.end(), below.begin(), below.end());
                continue;
            }
        }
        expanded.push_back(r);
    }
    return expanded;
}

// Reads each run and builds the experiment that replays it (every input checked before anything runs).
void prepare_replays(const std::vector<std::string>& runs, const ReplayOptions& o,
                     std::vector<app::MeasuredRun>& measured, std::vector<app::ExperimentConfig>& configs) {
    const bool engine_given = o.model.has_value() || !o.scenario.empty();
    for (std::size_t i = 0; i < runs.size(); ++i) {
        app::MeasuredRun run = app::read_measured_run(runs[i], engine_given);
        std::string text;
        if (run.format == "inference-perf") {
            text = run.scenario_yaml;
        } else {
            if (!o.scenario.empty()) {
                text = read_input_file(o.scenario, "scenario file");
            } else {
                text = "name: " + run.name + "\n";
            }
            fs::create_directories(o.trace_dir);
            const fs::path trace = o.trace_dir / fmt::format("{}-{}.trace.csv", i, run.name);
            write_text(trace, trace_csv(run));
            run.trace_path = fs::absolute(trace).string();
        }
        std::vector<app::Override> overrides;
        for (const auto& [value, key, flag] : {std::tuple{&o.model, "model", "--model"}, {&o.gpu, "gpu", "--gpu"},
                                               {&o.cost_model, "cost_model", "--cost-model"}}) {
            if (*value) {
                overrides.push_back({key, YAML::Node(**value), flag});
            }
        }
        YAML::Node workload(YAML::NodeType::Map);
        workload["type"] = "trace";
        workload["format"] = "csv";
        workload["trace"] = run.trace_path;
        if (run.request_timeout_s) {
            workload["request_timeout"] = fmt::format("{}s", *run.request_timeout_s);  // the run's client gave up then
        }
        overrides.push_back({"workload", workload, "validate (the measured request stream)"});
        overrides.push_back({"name", YAML::Node(run.name), "validate"});
        overrides.push_back({"warmup", YAML::Node("0s"), "validate"});
        for (const auto& set : o.sets) {
            overrides.push_back(app::parse_set_override(set));
        }
        overrides.insert(overrides.end(), o.engine_overrides.begin(), o.engine_overrides.end());
        app::Scenario sc = app::load_scenario_text(text, run.path, overrides);
        if (sc.experiments.size() != 1) {
            throw ConfigError(fmt::format("{}: the scenario for {} holds {} experiments; validate replays one", run.path,
                                          run.name, sc.experiments.size()));
        }
        app::ExperimentConfig x = sc.experiments.front();
        x.keep_request_records = true;
        // A measured run is a benchmark of a server started for it: its first eager steps of an MoE model wait for
        // the fused-MoE compiles start-up left (docs/HOST-WORK.md "Triton compiles mid-serving"), unless the
        // engine settings say otherwise.
        if (!x.engine.triton_jit_compile_ms) {
            x.engine.triton_jit_compile_ms = engine::kColdTritonCompileMs;
        }
        configs.push_back(std::move(x));
        measured.push_back(std::move(run));
    }
}

// A folder for traces, removed at the end when it is a temporary one.
struct TraceDir {
    fs::path path;
    bool temporary = false;
    explicit TraceDir(const std::string& out_dir) {
        if (!out_dir.empty()) {
            path = fs::path(out_dir);
        } else {
            path = fs::temp_directory_path() / fmt::format("servesim-validate-{}", ::getpid());
            temporary = true;
        }
    }
    ~TraceDir() {
        if (temporary) {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    }
    TraceDir(const TraceDir&) = delete;
    TraceDir& operator=(const TraceDir&) = delete;
};

po::options_description replay_options(ReplayOptions& o, int& jobs) {
    const auto opt_string = [](std::optional<std::string>& target) {
        return po::value<std::string>()->notifier([&target](const std::string& v) { target = v; });
    };
    po::options_description opts("replay options");
    opts.add_options()("model", opt_string(o.model), "the model that served a vllm-bench or per-request file")(
        "gpu", opt_string(o.gpu), "its GPU (servesim list)")(
        "cost-model", opt_string(o.cost_model), "roofline (default) or a calibrated profile YAML")(
        "scenario", po::value<std::string>(&o.scenario),
        "a scenario whose model, GPU, engine and request_path keys serve a vllm-bench or per-request file")(
        "set", po::value<std::vector<std::string>>(&o.sets)->composing(), "override a scenario key (repeatable)")(
        "jobs,j", po::value<int>(&jobs), "worker threads (results do not depend on it)");
    return opts;
}

}  // namespace

int cmd_validate(const std::vector<std::string>& args, app::Executor& executor,
                 const std::function<int(const std::string&)>& plot) {
    const app::EngineFlags flags = app::take_engine_flags(args);
    std::vector<std::string> runs;
    std::string format = "table";
    std::string out_dir;
    std::string metrics_after, metrics_before;
    ReplayOptions replay;
    replay.engine_overrides = flags.overrides;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    po::options_description opts(
        "usage: servesim validate RUN... [options]\n\n"
        "RUN: a run folder (experiment.json + requests.csv.gz, the load-generator format of the development set; a\n"
        "folder of such folders stands for all of them), a `vllm bench serve --save-result --save-detailed` JSON,\n"
        "or a per-request CSV/JSONL (send_s, prompt_tokens, output_tokens, ttft_ms, e2e_ms[, failed][, prefix_id]).\n"
        "Each run's request stream is replayed with its engine settings and every metric it measured is printed\n"
        "beside the prediction (docs/VALIDATION.md).\n\noptions");
    opts.add_options()("help,h", "show this help")("run", po::value<std::vector<std::string>>(&runs),
                                                    "measured run (repeatable; also positional)")(
        "format", po::value<std::string>(&format), "table (default), csv or json")(
        "out", po::value<std::string>(&out_dir), "also write validation.{txt,csv,json} into this folder")(
        "plot", "with --out: also draw validation.png (predicted / measured per run)")(
        "metrics-after", po::value<std::string>(&metrics_after),
        "the server's /metrics text saved after the load (curl http://HOST:PORT/metrics > after.prom): its "
        "prefix-cache hit rate, preemptions and KV usage beside the replay's (one RUN)")(
        "metrics-before", po::value<std::string>(&metrics_before),
        "the same saved before the load; without it the counters count from the server's start");
    opts.add(replay_options(replay, jobs));
    po::positional_options_description pos;
    pos.add("run", -1);
    po::variables_map vm;
    po::command_line_parser parser(flags.rest);
    parser.options(opts).positional(pos);
    app::store_or_suggest(parser, opts, vm, "validate");
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts << "\n" << app::engine_flags_help();
        return 0;
    }
    if (runs.empty()) {
        throw ConfigError("command line: validate: give at least one measured run (a run folder, a vllm bench serve "
                          "JSON, a CSV or JSONL); servesim validate --help");
    }
    if (format != "table" && format != "csv" && format != "json") {
        throw ConfigError("command line: --format: '" + format + "'; allowed: table, csv, json");
    }
    if (jobs < 1) {
        throw ConfigError("command line: --jobs: must be at least 1");
    }
    if (vm.count("plot") && out_dir.empty()) {
        throw ConfigError("command line: --plot: needs --out DIR (the folder the PNG is drawn from and into)");
    }
    if (!metrics_before.empty() && metrics_after.empty()) {
        throw ConfigError("command line: --metrics-before: needs --metrics-after FILE (the dump taken after the load)");
    }
    // The hit-rate check (docs/HIT-RATE-CHECK.md): both dumps read and checked before
    // anything is simulated.
    std::optional<app::ServerMetricsDelta> server;
    if (!metrics_after.empty()) {
        if (expand_runs(runs).size() != 1) {
            throw ConfigError(fmt::format("command line: --metrics-after: the dump covers one server's load, so give "
                                          "exactly one RUN (got {})",
                                          expand_runs(runs).size()));
        }
        std::optional<app::ServerMetrics> before;
        if (!metrics_before.empty()) {
            before = app::read_server_metrics(metrics_before);
        }
        server = app::server_metrics_delta(before, app::read_server_metrics(metrics_after));
    }
    if (!out_dir.empty()) {
        app::check_out_dir(out_dir);
    }
    const TraceDir traces(out_dir);
    replay.trace_dir = traces.path;
    std::vector<app::MeasuredRun> measured;
    std::vector<app::ExperimentConfig> configs;
    prepare_replays(expand_runs(runs), replay, measured, configs);
    const auto results = app::run_experiments(configs, jobs, [](int, int) {},
                                              app::RunOptions{&executor, nullptr, false, std::nullopt, nullptr});
    if (!executor.is_root()) {
        return 0;
    }
    app::ValidationReport report;
    for (std::size_t i = 0; i < results.size(); ++i) {
        report.runs.push_back(app::compare_run(measured[i], results[i]));
        if (server) {
            app::add_server_metrics(report.runs.back(), *server, results[i]);
        }
    }
    report.overall = app::overall_errors(report.runs);
    std::cout << app::format_validation(report, format);
    if (!out_dir.empty()) {
        write_text(fs::path(out_dir) / "validation.txt", app::format_validation(report, "table"));
        write_text(fs::path(out_dir) / "validation.csv", app::format_validation(report, "csv"));
        write_text(fs::path(out_dir) / "validation.json", app::format_validation(report, "json"));
        if (vm.count("plot")) {
            return plot(out_dir);
        }
    }
    return 0;
}

int cmd_fit_request_path(const std::vector<std::string>& args, app::Executor& executor) {
    const app::EngineFlags flags = app::take_engine_flags(args);
    std::vector<std::string> runs;
    std::string fit;
    std::string out;
    ReplayOptions replay;
    replay.engine_overrides = flags.overrides;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    po::options_description opts(
        "usage: servesim calibrate --from-measurements RUN... --fit request-path [--out FILE] [options]\n\n"
        "Fits the request path's one end-to-end constant, client_ms (the client's and the network's time each way;\n"
        "docs/REQUEST-PATH.md), to the mean TTFT of measured runs that were not overloaded: their stream is\n"
        "replayed with every other cost as it is, and client_ms is set so that the median run's TTFT mean is met\n"
        "(two passes, the second correcting for queueing). RUN as for servesim validate.\n\noptions");
    opts.add_options()("help,h", "show this help")(
        "from-measurements", po::value<std::vector<std::string>>(&runs)->multitoken(), "measured runs")(
        "fit", po::value<std::string>(&fit), "what to fit: request-path")(
        "out", po::value<std::string>(&out), "write the fitted request_path mapping (YAML) to FILE");
    opts.add(replay_options(replay, jobs));
    po::positional_options_description pos;
    pos.add("from-measurements", -1);
    po::variables_map vm;
    po::command_line_parser parser(flags.rest);
    parser.options(opts).positional(pos);
    app::store_or_suggest(parser, opts, vm, "calibrate --from-measurements");
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts;
        return 0;
    }
    if (fit != "request-path") {
        throw ConfigError("command line: --fit: '" + fit + "'; allowed: request-path");
    }
    if (runs.empty()) {
        throw ConfigError("command line: --from-measurements: give at least one measured run");
    }
    if (jobs < 1) {
        throw ConfigError("command line: --jobs: must be at least 1");
    }
    const TraceDir traces("");
    replay.trace_dir = traces.path;
    std::vector<app::MeasuredRun> measured;
    std::vector<app::ExperimentConfig> configs;
    prepare_replays(expand_runs(runs), replay, measured, configs);
    // Runs whose client failed requests are queueing, not the request path: left out of the fit.
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < measured.size(); ++i) {
        const auto& m = measured[i].windows.front().measured;
        if (m.ttft_mean_ms && !(m.failed && *m.failed > 0)) {
            used.push_back(i);
        }
    }
    if (used.empty()) {
        throw ConfigError("--from-measurements: no run with a measured TTFT mean and no failed request to fit on");
    }
    double client_ms = 0;
    for (std::size_t i : used) {
        configs[i].request_path.client_ms = 0;
    }
    for (int pass = 0; pass < 2; ++pass) {
        std::vector<app::ExperimentConfig> batch;
        for (std::size_t i : used) {
            batch.push_back(configs[i]);
            batch.back().request_path.client_ms = client_ms;
        }
        const auto results =
            app::run_experiments(batch, jobs, [](int, int) {},
                                 app::RunOptions{&executor, nullptr, true, std::nullopt, nullptr});
        std::vector<double> deficits;
        for (std::size_t k = 0; k < used.size(); ++k) {
            const auto predicted = app::client_stats(app::predicted_requests(results[k]), std::nullopt);
            if (!predicted.ttft_mean_ms) {
                throw ConfigError(measured[used[k]].path + ": the replay finished no request; nothing to fit");
            }
            deficits.push_back(*measured[used[k]].windows.front().measured.ttft_mean_ms - *predicted.ttft_mean_ms);
        }
        // The median run's deficit: the request path is the same for every run, while a run whose engine time is
        // off under load (a queue the model gets wrong) shows a deficit of a queue, not of the path.
        std::sort(deficits.begin(), deficits.end());
        const std::size_t n = deficits.size();
        const double deficit = n % 2 == 1 ? deficits[n / 2] : 0.5 * (deficits[n / 2 - 1] + deficits[n / 2]);
        client_ms = std::max(0.0, client_ms + deficit / 2);
    }
    if (!executor.is_root()) {
        return 0;
    }
    const std::string yaml = fmt::format(
        "# fitted by servesim calibrate --from-measurements --fit request-path on {} run(s): client_ms only; the\n"
        "# other terms are the defaults the fit held fixed (docs/REQUEST-PATH.md)\n"
        "request_path: {{client_ms: {:.3f}}}\n",
        used.size(), client_ms);
    std::cout << yaml;
    if (!out.empty()) {
        write_text(out, yaml);
    }
    return 0;
}

}  // namespace servesim::cli
