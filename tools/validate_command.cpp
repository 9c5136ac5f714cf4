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
#include "tools/app/command_line.h"
#include "tools/app/output.h"
#include "tools/app/scenario.h"
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

}  // namespace

int cmd_validate(const std::vector<std::string>& args, app::Executor& executor) {
    const app::EngineFlags flags = app::take_engine_flags(args);
    std::vector<std::string> runs;
    std::vector<std::string> sets;
    std::string format = "table";
    std::string out_dir;
    std::string scenario;
    std::optional<std::string> model, gpu, cost_model;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const auto opt_string = [](std::optional<std::string>& target) {
        return po::value<std::string>()->notifier([&target](const std::string& v) { target = v; });
    };
    po::options_description opts(
        "usage: servesim validate RUN... [options]\n\n"
        "RUN: a run folder (experiment.json + requests.csv.gz, the load-generator format of the development set; a\n"
        "folder of such folders stands for all of them), a\n"
        "`vllm bench serve --save-result --save-detailed` JSON, or a per-request CSV/JSONL (send_s, prompt_tokens,\n"
        "output_tokens, ttft_ms, e2e_ms[, failed][, prefix_id]). Each run's request stream is replayed with its engine\n"
        "settings and every metric it measured is printed beside the prediction (docs/VALIDATION.md).\n\noptions");
    opts.add_options()("help,h", "show this help")("run", po::value<std::vector<std::string>>(&runs),
                                                    "measured run (repeatable; also positional)")(
        "format", po::value<std::string>(&format), "table (default), csv or json")(
        "out", po::value<std::string>(&out_dir), "also write validation.{txt,csv,json} into this folder")(
        "model", opt_string(model), "the model that served a vllm-bench or per-request file")(
        "gpu", opt_string(gpu), "its GPU (servesim list)")(
        "cost-model", opt_string(cost_model), "roofline (default) or a calibrated profile YAML")(
        "scenario", po::value<std::string>(&scenario),
        "a scenario whose model, GPU, engine and request_path keys serve a vllm-bench or per-request file")(
        "set", po::value<std::vector<std::string>>(&sets)->composing(), "override a scenario key (repeatable)")(
        "jobs,j", po::value<int>(&jobs), "worker threads (results do not depend on it)");
    po::positional_options_description pos;
    pos.add("run", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(flags.rest).options(opts).positional(pos).run(), vm);
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
    if (!out_dir.empty()) {
        app::check_out_dir(out_dir);
    }
    // A campaign folder (no experiment.json of its own, run folders below it) stands for its runs, by name.
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
    runs = std::move(expanded);
    const bool engine_given = model.has_value() || !scenario.empty();
    // Traces written for per-request inputs live in --out, or in a folder removed at the end.
    fs::path trace_dir;
    bool temporary = false;
    if (!out_dir.empty()) {
        trace_dir = fs::path(out_dir);
    } else {
        trace_dir = fs::temp_directory_path() / fmt::format("servesim-validate-{}", ::getpid());
        temporary = true;
    }
    struct TempDir {
        fs::path path;
        bool active;
        ~TempDir() {
            if (active) {
                std::error_code ec;
                fs::remove_all(path, ec);
            }
        }
    } cleanup{trace_dir, temporary};
    std::vector<app::MeasuredRun> measured;
    std::vector<app::ExperimentConfig> configs;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        app::MeasuredRun run = app::read_measured_run(runs[i], engine_given);
        std::string text;
        if (run.format == "inference-perf") {
            text = run.scenario_yaml;
        } else {
            if (!scenario.empty()) {
                std::ifstream in(scenario);
                if (!in) {
                    throw ConfigError(scenario + ": cannot open scenario");
                }
                text.assign(std::istreambuf_iterator<char>(in), {});
            } else {
                text = "name: " + run.name + "\n";
            }
            fs::create_directories(trace_dir);
            const fs::path trace = trace_dir / fmt::format("{}-{}.trace.csv", i, run.name);
            write_text(trace, trace_csv(run));
            run.trace_path = fs::absolute(trace).string();
        }
        std::vector<app::Override> overrides;
        for (const auto& [value, key, flag] : {std::tuple{&model, "model", "--model"}, {&gpu, "gpu", "--gpu"},
                                               {&cost_model, "cost_model", "--cost-model"}}) {
            if (*value) {
                overrides.push_back({key, YAML::Node(**value), flag});
            }
        }
        YAML::Node workload(YAML::NodeType::Map);
        workload["type"] = "trace";
        workload["format"] = "csv";
        workload["trace"] = run.trace_path;
        overrides.push_back({"workload", workload, "validate (the measured request stream)"});
        overrides.push_back({"name", YAML::Node(run.name), "validate"});
        overrides.push_back({"warmup", YAML::Node("0s"), "validate"});
        for (const auto& s : sets) {
            overrides.push_back(app::parse_set_override(s));
        }
        overrides.insert(overrides.end(), flags.overrides.begin(), flags.overrides.end());
        app::Scenario sc = app::load_scenario_text(text, run.path, overrides);
        if (sc.experiments.size() != 1) {
            throw ConfigError(fmt::format("{}: the scenario for {} holds {} experiments; validate replays one", run.path,
                                          run.name, sc.experiments.size()));
        }
        app::ExperimentConfig x = sc.experiments.front();
        x.keep_request_records = true;
        configs.push_back(std::move(x));
        measured.push_back(std::move(run));
    }
    const auto results = app::run_experiments(configs, jobs, [](int, int) {}, app::RunOptions{&executor, nullptr, false});
    if (!executor.is_root()) {
        return 0;
    }
    app::ValidationReport report;
    for (std::size_t i = 0; i < results.size(); ++i) {
        report.runs.push_back(app::compare_run(measured[i], results[i]));
    }
    report.overall = app::overall_errors(report.runs);
    std::cout << app::format_validation(report, format);
    if (!out_dir.empty()) {
        write_text(fs::path(out_dir) / "validation.txt", app::format_validation(report, "table"));
        write_text(fs::path(out_dir) / "validation.csv", app::format_validation(report, "csv"));
        write_text(fs::path(out_dir) / "validation.json", app::format_validation(report, "json"));
    }
    return 0;
}

}  // namespace servesim::cli
