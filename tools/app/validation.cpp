// Reading real runs and comparing them with their replay; see validation.h and docs/VALIDATION.md.
// Size (~830 lines): the readers of the measured-run formats (vllm bench serve JSON, per-request CSV and JSONL,
// inference-perf folders) fill the MeasuredRun the comparison below reads; one file keeps each rule beside its use.
#include "tools/app/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "common/error.h"
#include "common/input_file.h"
#include "sim/core/rng.h"
#include "tools/app/output.h"
#include "tools/app/output_vllm_bench.h"
#include "workloads/arrival_process.h"
#include "workloads/trace_reader.h"

namespace servesim::app {
namespace fs = std::filesystem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Files read here are small measurement files; a bound keeps a wrong path (a device, a huge log) from being read
// whole into memory.
constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{1} << 30;

std::string read_text_file(const std::string& path) {
    return read_input_file(path, "measurement file",
                           kMaxInputBytes);
}

nlohmann::json parse_json(const std::string& path, const std::string& text) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw ConfigError(fmt::format("{}: not valid JSON ({})", path, e.what()));
    }
}

// A finite number at `key` of `j`, or a ConfigError naming the file and the key.
double number_at(const nlohmann::json& j, const std::string& key, const std::string& path, const std::string& where) {
    if (!j.contains(key) || !j[key].is_number()) {
        throw ConfigError(fmt::format("{}: {}{}: missing or not a number", path, where, key));
    }
    const double v = j[key].get<double>();
    if (!std::isfinite(v)) {
        throw ConfigError(fmt::format("{}: {}{}: not a finite number", path, where, key));
    }
    return v;
}

std::optional<double> optional_number(const nlohmann::json& j, const std::string& key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number()) {
        return std::nullopt;
    }
    const double v = j[key].get<double>();
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}


// ---- inference-perf run folders (the development set's format) ----

// The stages of an inference-perf load (effective_workload.stages): each sends int(rate × duration) requests
// (inference-perf's constant load type), one after the other.
std::vector<std::int64_t> stage_sizes(const nlohmann::json& e, const std::string& path) {
    std::vector<std::int64_t> sizes;
    const nlohmann::json* stages = nullptr;
    if (e.contains("effective_workload") && e["effective_workload"].contains("stages")) {
        stages = &e["effective_workload"]["stages"];
    } else if (e.contains("profile_as_written") && e["profile_as_written"].contains("stages")) {
        stages = &e["profile_as_written"]["stages"];
    }
    if (stages == nullptr || !stages->is_array()) {
        return sizes;
    }
    for (const auto& st : *stages) {
        const double rate = number_at(st, "rate", path, "stages[].");
        const double duration = number_at(st, "duration", path, "stages[].");
        sizes.push_back(static_cast<std::int64_t>(rate * duration));
    }
    return sizes;
}

RunStats inference_perf_stats(const nlohmann::json& measured, const nlohmann::json& extra) {
    RunStats s;
    s.ttft_mean_ms = optional_number(measured, "ttft_mean");
    s.ttft_p90_ms = optional_number(measured, "ttft_p90");
    s.ttft_p99_ms = optional_number(measured, "ttft_p99");
    s.e2e_mean_ms = optional_number(measured, "e2e_mean");
    s.e2e_p90_ms = optional_number(measured, "e2e_p90");
    s.e2e_p99_ms = optional_number(measured, "e2e_p99");
    s.itl_mean_ms = optional_number(measured, "itl_mean");
    s.ttft_p50_ms = optional_number(extra, "ttft_median");
    s.e2e_p50_ms = optional_number(extra, "e2e_median");
    s.completed = optional_number(extra, "count");
    s.failed = optional_number(extra, "failures");
    s.throughput_rps = optional_number(extra, "requests_per_sec");
    // output_tokens_per_sec counts the client's re-tokenisation of the returned text (README: ~195 counted for 247
    // generated on Llama-2), not the tokens the engine made: not compared.
    return s;
}

// The GPU catalog name of the development set's `hardware` (README: one H100 80GB HBM3, SXM, per rank).
std::string catalog_gpu(const std::string& hardware) {
    if (hardware == "H100") {
        return "H100-SXM";
    }
    return hardware;
}

MeasuredRun read_inference_perf(const fs::path& folder) {
    const fs::path experiment = folder / "experiment.json";
    const std::string path = experiment.string();
    const nlohmann::json e = parse_json(path, read_text_file(path));
    MeasuredRun run;
    run.format = "inference-perf";
    run.path = folder.string();
    run.name = e.contains("key") && e["key"].is_string() ? e["key"].get<std::string>() : folder.filename().string();
    const fs::path trace = folder / "requests.csv.gz";
    if (!fs::exists(trace)) {
        throw ConfigError(fmt::format("{}: no requests.csv.gz beside experiment.json (the request stream to replay)",
                                      folder.string()));
    }
    run.trace_path = trace.string();
    if (!e.contains("model_config") || !e["model_config"].is_string()) {
        throw ConfigError(path + ": model_config: missing (the path of the model's config.json)");
    }
    // model_config is relative to the campaign folder (the run folder's parent).
    fs::path model = folder.parent_path() / e["model_config"].get<std::string>();
    if (!fs::exists(model)) {
        model = folder / e["model_config"].get<std::string>();
    }
    if (!fs::exists(model)) {
        throw ConfigError(fmt::format("{}: model_config: {} not found beside the run or its campaign folder", path,
                                      e["model_config"].get<std::string>()));
    }
    const std::string hardware = e.contains("hardware") && e["hardware"].is_string() ? e["hardware"].get<std::string>()
                                                                                     : "";
    if (hardware.empty()) {
        throw ConfigError(path + ": hardware: missing (the GPU of the run, e.g. H100)");
    }
    std::ostringstream y;
    y << "name: " << nlohmann::json(run.name).dump() << "\n";
    y << "model: " << nlohmann::json(fs::absolute(model).lexically_normal().string()).dump() << "\n";
    y << "gpu: " << nlohmann::json(catalog_gpu(hardware)).dump() << "\n";
    y << "engine:\n";
    y << fmt::format("  tensor_parallel_size: {}\n", static_cast<int>(number_at(e, "tp", path, "")));
    y << fmt::format("  max_num_seqs: {}\n", static_cast<std::int64_t>(number_at(e, "max_num_seqs", path, "")));
    y << fmt::format("  max_num_batched_tokens: {}\n",
                     static_cast<std::int64_t>(number_at(e, "max_num_batched_tokens", path, "")));
    y << fmt::format("  max_model_len: {}\n", static_cast<std::int64_t>(number_at(e, "max_model_len", path, "")));
    y << fmt::format("  gpu_memory_utilization: {}\n", number_at(e, "gpu_memory_utilization", path, ""));
    if (const auto gib = optional_number(e, "kv_offloading_gib"); gib && *gib > 0) {
        y << fmt::format("  kv_offloading_size: {}\n", *gib);
    }
    y << "  enable_prefix_caching: true\n";
    if (const auto dp = optional_number(e, "dp"); dp && *dp > 1) {
        y << fmt::format("cluster: {{replicas: {}}}\n", static_cast<int>(*dp));
    }
    run.scenario_yaml = y.str();
    if (e.contains("vllm_release") && e["vllm_release"].is_string()) {
        run.notes.push_back(fmt::format("measured on vLLM {}; replayed with the rules of servesim's default release "
                                        "(engine.vllm_version)",
                                        e["vllm_release"].get<std::string>()));
    }
    // inference-perf drops a request after 300 s (its client time-out at commit e8e0aa9; shared README).
    run.request_timeout_s = 300.0;
    run.kv_blocks = optional_number(e, "measured_total_kv_blocks")
                        ? std::optional<std::int64_t>(static_cast<std::int64_t>(*optional_number(e, "measured_total_kv_blocks")))
                        : std::nullopt;
    // Windows: the whole run, then each stage, by the send time of its first request.
    const nlohmann::json& measured = e.contains("measured") ? e["measured"] : nlohmann::json::object();
    const nlohmann::json& extra = e.contains("measured_extra") ? e["measured_extra"] : nlohmann::json::object();
    auto window = [&](const std::string& key, const std::string& name, double from, double to) {
        if (!measured.contains(key)) {
            return;
        }
        MeasuredWindow w;
        w.name = name;
        w.send_from_s = from;
        w.send_to_s = to;
        const nlohmann::json& x = extra.contains(key) ? extra[key] : nlohmann::json::object();
        w.measured = inference_perf_stats(measured[key], x);
        w.itl_output_tokens = optional_number(x, "output_len_mean");
        run.windows.push_back(std::move(w));
    };
    window("-1", "all", -kInf, kInf);
    // The send times of each stage's first request come from the stream itself (read by the replay's trace
    // reader): here the stage sizes are turned into request indices, resolved once the stream is read.
    const std::vector<std::int64_t> sizes = stage_sizes(e, path);
    std::int64_t first = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        // from/to hold request indices until resolve_stage_windows turns them into send times.
        window(std::to_string(i), fmt::format("stage {}", i + 1), static_cast<double>(first),
               static_cast<double>(first + sizes[i]));
        first += sizes[i];
    }
    // The stream as the replay's trace reader reads it: send times for the stage windows.
    const auto reader = workloads::open_trace(run.trace_path, "csv");
    while (auto rec = reader->next()) {
        MeasuredRequest r;
        r.send_s = rec->arrival.s();
        r.prompt_tokens = core::total_tokens(rec->prompt);
        r.output_tokens = rec->output_tokens;
        run.requests.push_back(r);
    }
    run.notes.push_back("the ten prompts of a group share their system prompt in the real run; the replayed stream "
                        "shares only whole repeated prompts (requests.csv.gz's prefix_id)");
    return run;
}

// ---- per-request inputs ----

// send_s of each request relative to the first send.
void rebase_sends(std::vector<MeasuredRequest>& requests) {
    if (requests.empty()) {
        return;
    }
    std::stable_sort(requests.begin(), requests.end(),
                     [](const MeasuredRequest& a, const MeasuredRequest& b) { return a.send_s < b.send_s; });
    const double t0 = requests.front().send_s;
    for (auto& r : requests) {
        r.send_s -= t0;
    }
}

MeasuredRun read_vllm_bench(const std::string& path, const nlohmann::json& j) {
    MeasuredRun run;
    run.format = "vllm-bench";
    run.path = path;
    run.name = fs::path(path).stem().string();
    for (const char* key : {"input_lens", "output_lens", "ttfts", "itls", "errors"}) {
        if (!j.contains(key) || !j[key].is_array()) {
            throw ConfigError(fmt::format("{}: {}: missing; validate needs the per-request lists that `vllm bench "
                                          "serve --save-result --save-detailed` writes (input_lens, output_lens, "
                                          "ttfts, itls, errors)",
                                          path, key));
        }
    }
    const std::size_t n = j["input_lens"].size();
    for (const char* key : {"output_lens", "ttfts", "itls", "errors"}) {
        if (j[key].size() != n) {
            throw ConfigError(fmt::format("{}: {}: {} entries for {} in input_lens; the lists must be equally long",
                                          path, key, j[key].size(), n));
        }
    }
    if (n == 0) {
        throw ConfigError(path + ": input_lens: empty; the run has no request to replay");
    }
    // Send times: the file's own when it has them (some releases write request_submit_times or start_times, in
    // seconds); otherwise drawn from its request_rate and burstiness as the tool draws them (gamma gaps), which
    // reproduces the stream's statistics, not its exact times.
    const nlohmann::json* sends = nullptr;
    for (const char* key : {"request_submit_times", "start_times"}) {
        if (j.contains(key) && j[key].is_array() && j[key].size() == n) {
            sends = &j[key];
        }
    }
    std::vector<double> send_s(n, 0.0);
    if (sends == nullptr) {
        double rate = kInf;
        if (j.contains("request_rate")) {
            const auto& r = j["request_rate"];
            if (r.is_number()) {
                rate = r.get<double>();
            } else if (!(r.is_string() && r.get<std::string>() == "inf") && !r.is_null()) {
                throw ConfigError(path + ": request_rate: expected a number or \"inf\"");
            }
        }
        if (!(rate > 0)) {
            throw ConfigError(path + ": request_rate: must be positive or \"inf\"");
        }
        if (std::isfinite(rate)) {
            workloads::ArrivalConfig a;
            const auto burst = optional_number(j, "burstiness");
            a.process = burst && *burst != 1.0 ? "gamma" : "poisson";
            a.rate_per_s = rate;
            a.burstiness = burst.value_or(1.0);
            auto process = workloads::make_arrival_process(a, core::RngStream(0, "validate-send-times"));
            double t = 0;
            for (std::size_t i = 0; i < n; ++i) {
                send_s[i] = t;
                t += process->next_gap().s();
            }
            run.notes.push_back(fmt::format("the file holds no send times: they are drawn at {} req/s{}, the same "
                                            "process but not the same draws as the real run",
                                            rate, a.burstiness != 1.0 ? fmt::format(", burstiness {}", a.burstiness)
                                                                      : ""));
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        MeasuredRequest r;
        const std::string where = fmt::format("request {}: ", i);
        if (!j["input_lens"][i].is_number_integer() || !j["output_lens"][i].is_number_integer()) {
            throw ConfigError(fmt::format("{}: input_lens/output_lens[{}]: expected whole numbers", path, i));
        }
        r.prompt_tokens = j["input_lens"][i].get<std::int64_t>();
        r.output_tokens = j["output_lens"][i].get<std::int64_t>();
        if (r.prompt_tokens < 1 || r.prompt_tokens > (std::int64_t{1} << 30) || r.output_tokens < 0 ||
            r.output_tokens > (std::int64_t{1} << 30)) {
            throw ConfigError(fmt::format("{}: input_lens/output_lens[{}]: {} and {} out of range; allowed: prompt 1 "
                                          "to 2^30, output 0 to 2^30",
                                          path, i, r.prompt_tokens, r.output_tokens));
        }
        const auto& err = j["errors"][i];
        r.failed = err.is_string() ? !err.get<std::string>().empty() : !err.is_null();
        if (sends != nullptr) {
            if (!(*sends)[i].is_number()) {
                throw ConfigError(fmt::format("{}: send times[{}]: not a number", path, i));
            }
            send_s[i] = (*sends)[i].get<double>();
        }
        r.send_s = send_s[i];
        if (!r.failed) {
            if (!j["ttfts"][i].is_number()) {
                throw ConfigError(fmt::format("{}: ttfts[{}]: not a number for a request without an error", path, i));
            }
            r.ttft_ms = j["ttfts"][i].get<double>() * 1e3;
            double itl_sum_s = 0;
            for (const auto& g : j["itls"][i]) {
                if (!g.is_number()) {
                    throw ConfigError(fmt::format("{}: itls[{}]: not a list of numbers", path, i));
                }
                itl_sum_s += g.get<double>();
            }
            r.e2e_ms = *r.ttft_ms + itl_sum_s * 1e3;  // the tool's latency is TTFT plus the gaps that follow it
        }
        run.requests.push_back(r);
    }
    rebase_sends(run.requests);
    return run;
}

// A per-request CSV with a header naming send_s (or t_s), prompt_tokens, output_tokens, ttft_ms, e2e_ms and
// optionally failed (0/1, true/false) and prefix_id, in any order.
MeasuredRun read_requests_csv(const std::string& path, const std::string& text) {
    MeasuredRun run;
    run.format = "requests-csv";
    run.path = path;
    run.name = fs::path(path).stem().string();
    std::istringstream in(text);
    std::string line;
    std::map<std::string, std::size_t> col;
    std::int64_t line_no = 0;
    auto split = [](const std::string& s) {
        std::vector<std::string> out;
        std::string cur;
        for (char c : s) {
            if (c == ',') {
                out.push_back(cur);
                cur.clear();
            } else if (c != '\r') {
                cur.push_back(c);
            }
        }
        out.push_back(cur);
        return out;
    };
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty() || line == "\r") {
            continue;
        }
        const auto cells = split(line);
        if (col.empty()) {
            for (std::size_t i = 0; i < cells.size(); ++i) {
                col[cells[i]] = i;
            }
            if (col.count("t_s") && !col.count("send_s")) {
                col["send_s"] = col["t_s"];
            }
            for (const char* need : {"send_s", "prompt_tokens", "output_tokens", "ttft_ms", "e2e_ms"}) {
                if (!col.count(need)) {
                    throw ConfigError(path, static_cast<int>(line_no), need,
                                      "missing column; the header must name send_s, prompt_tokens, output_tokens, "
                                      "ttft_ms, e2e_ms (and optionally failed, prefix_id)");
                }
            }
            continue;
        }
        auto cell = [&](const std::string& name) -> std::string {
            const std::size_t i = col.at(name);
            if (i >= cells.size()) {
                throw ConfigError(path, static_cast<int>(line_no), name, "missing value");
            }
            return cells[i];
        };
        auto num = [&](const std::string& name) -> double {
            const std::string s = cell(name);
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
                throw ConfigError(path, static_cast<int>(line_no), name, "expected a number, got '" + s + "'");
            }
            return v;
        };
        MeasuredRequest r;
        r.send_s = num("send_s");
        const double p = num("prompt_tokens");
        const double o = num("output_tokens");
        if (p < 1 || p > std::ldexp(1.0, 30) || p != std::floor(p) || o < 0 || o > std::ldexp(1.0, 30) ||
            o != std::floor(o)) {
            throw ConfigError(path, static_cast<int>(line_no), "prompt_tokens",
                              "token counts must be whole numbers: prompt 1 to 2^30, output 0 to 2^30");
        }
        r.prompt_tokens = static_cast<std::int64_t>(p);
        r.output_tokens = static_cast<std::int64_t>(o);
        if (col.count("failed")) {
            const std::string f = cell("failed");
            r.failed = f == "1" || f == "true" || f == "True";
            if (!r.failed && !(f == "0" || f == "false" || f == "False" || f.empty())) {
                throw ConfigError(path, static_cast<int>(line_no), "failed", "expected 0, 1, true or false");
            }
        }
        if (col.count("prefix_id") && !cell("prefix_id").empty()) {
            r.prefix_id = static_cast<std::int64_t>(num("prefix_id"));
        }
        if (!r.failed) {
            r.ttft_ms = num("ttft_ms");
            r.e2e_ms = num("e2e_ms");
        }
        run.requests.push_back(r);
    }
    if (run.requests.empty()) {
        throw ConfigError(path + ": no request rows");
    }
    rebase_sends(run.requests);
    return run;
}

MeasuredRun read_requests_jsonl(const std::string& path, const std::string& text) {
    // The same fields as the CSV, one JSON object per line.
    std::ostringstream csv;
    csv << "send_s,prompt_tokens,output_tokens,ttft_ms,e2e_ms,failed,prefix_id\n";
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::parse_error&) {
            throw ConfigError(path, line_no, "", "not a JSON object");
        }
        auto field = [&](const char* key, bool required) -> std::string {
            const char* alt = std::string(key) == "send_s" ? "t_s" : key;
            const nlohmann::json* v = j.contains(key) ? &j[key] : j.contains(alt) ? &j[alt] : nullptr;
            if (v == nullptr || v->is_null()) {
                if (required) {
                    throw ConfigError(path, line_no, key, "missing");
                }
                return "";
            }
            if (v->is_boolean()) {
                return v->get<bool>() ? "1" : "0";
            }
            if (!v->is_number()) {
                throw ConfigError(path, line_no, key, "expected a number");
            }
            return fmt::format("{}", v->get<double>());
        };
        const std::string failed = field("failed", false);
        const bool ok = failed.empty() || failed == "0";
        csv << field("send_s", true) << ',' << field("prompt_tokens", true) << ',' << field("output_tokens", true)
            << ',' << field("ttft_ms", ok) << ',' << field("e2e_ms", ok) << ',' << failed << ','
            << field("prefix_id", false) << '\n';
    }
    MeasuredRun run = read_requests_csv(path, csv.str());
    run.format = "requests-jsonl";
    return run;
}

}  // namespace

MeasuredRun read_measured_run(const std::string& path, bool engine_from_command_line) {
    std::error_code ec;
    fs::path p = fs::path(path).lexically_normal();
    if (!p.has_filename() && p.has_parent_path()) {
        p = p.parent_path();  // "run/" names the folder "run"
    }
    if (!fs::exists(p, ec)) {
        throw ConfigError(path + ": no such file or folder");
    }
    if (fs::is_directory(p, ec)) {
        if (!fs::exists(p / "experiment.json")) {
            throw ConfigError(path + ": a folder without experiment.json; validate reads a run folder (experiment.json "
                                     "+ requests.csv.gz) or a measurement file");
        }
        return read_inference_perf(p);
    }
    if (p.filename() == "experiment.json") {
        return read_inference_perf(p.parent_path().empty() ? fs::path(".") : p.parent_path());
    }
    const std::string ext = p.extension().string();
    MeasuredRun run;
    if (ext == ".json") {
        const std::string text = read_text_file(path);
        run = read_vllm_bench(path, parse_json(path, text));
    } else if (ext == ".csv") {
        run = read_requests_csv(path, read_text_file(path));
    } else if (ext == ".jsonl") {
        run = read_requests_jsonl(path, read_text_file(path));
    } else {
        throw ConfigError(path + ": unknown kind of measurement; allowed: a run folder or experiment.json "
                                 "(inference-perf), a vllm bench serve result .json (--save-detailed), a per-request "
                                 ".csv or .jsonl");
    }
    if (!engine_from_command_line) {
        throw ConfigError(fmt::format("{}: a {} file does not say which model, GPU and engine settings served it; give "
                                      "--model and --gpu (and vLLM's flags as they were), or --scenario FILE",
                                      path, run.format));
    }
    MeasuredWindow all;
    all.name = "all";
    all.send_from_s = -kInf;
    all.send_to_s = kInf;
    all.measured = client_stats(run.requests, std::nullopt);
    run.windows.push_back(std::move(all));
    return run;
}

std::optional<double> MetricComparison::error_pct() const {
    if (!measured || !predicted || *measured == 0) {
        return std::nullopt;
    }
    return 100.0 * (*predicted - *measured) / *measured;
}

RunStats client_stats(const std::vector<MeasuredRequest>& requests, const std::optional<double>& itl_output_tokens) {
    RunStats s;
    std::vector<double> ttft, e2e;
    double gap_sum_ms = 0;
    double gap_count = 0;
    double first_send = kInf;
    double last_finish = -kInf;
    double output_tokens = 0;
    double failed = 0;
    for (const auto& r : requests) {
        first_send = std::min(first_send, r.send_s);
        if (r.failed || !r.ttft_ms || !r.e2e_ms) {
            failed += r.failed ? 1 : 0;
            continue;
        }
        ttft.push_back(*r.ttft_ms);
        e2e.push_back(*r.e2e_ms);
        if (r.output_tokens > 1) {
            gap_sum_ms += *r.e2e_ms - *r.ttft_ms;
            gap_count += static_cast<double>(r.output_tokens - 1);
        }
        output_tokens += static_cast<double>(r.output_tokens);
        last_finish = std::max(last_finish, r.send_s + *r.e2e_ms / 1e3);
    }
    s.completed = static_cast<double>(ttft.size());
    s.failed = failed;
    if (ttft.empty()) {
        return s;
    }
    auto fill = [](std::vector<double>& v, std::optional<double>& mean, std::optional<double>& p50,
                   std::optional<double>& p90, std::optional<double>& p99) {
        std::sort(v.begin(), v.end());
        double sum = 0;
        for (double x : v) {
            sum += x;
        }
        mean = sum / static_cast<double>(v.size());
        p50 = np_percentile(v, 50);
        p90 = np_percentile(v, 90);
        p99 = np_percentile(v, 99);
    };
    fill(ttft, s.ttft_mean_ms, s.ttft_p50_ms, s.ttft_p90_ms, s.ttft_p99_ms);
    fill(e2e, s.e2e_mean_ms, s.e2e_p50_ms, s.e2e_p90_ms, s.e2e_p99_ms);
    if (itl_output_tokens) {
        if (*itl_output_tokens > 1) {
            s.itl_mean_ms = (*s.e2e_mean_ms - *s.ttft_mean_ms) / (*itl_output_tokens - 1);
        }
    } else if (gap_count > 0) {
        s.itl_mean_ms = gap_sum_ms / gap_count;
    }
    const double window_s = last_finish - first_send;
    if (window_s > 0) {
        s.throughput_rps = static_cast<double>(ttft.size()) / window_s;
        s.output_tokens_per_s = output_tokens / window_s;
    }
    return s;
}

std::vector<MeasuredRequest> predicted_requests(const ExperimentResult& result) {
    std::vector<MeasuredRequest> out;
    out.reserve(result.sim.summary.requests.size());
    for (const auto& q : result.sim.summary.requests) {
        MeasuredRequest r;
        r.send_s = q.arrival_s;
        r.prompt_tokens = q.prompt_tokens;
        r.output_tokens = q.output_tokens;
        r.ttft_ms = q.ttft_ms;
        r.e2e_ms = q.e2e_ms;
        out.push_back(r);
    }
    return out;
}

namespace {

void add_metrics(WindowComparison& w, const RunStats& m, const RunStats& p) {
    const std::pair<const char*, std::optional<double> RunStats::*> fields[] = {
        {"ttft_mean_ms", &RunStats::ttft_mean_ms}, {"ttft_p50_ms", &RunStats::ttft_p50_ms},
        {"ttft_p90_ms", &RunStats::ttft_p90_ms},   {"ttft_p99_ms", &RunStats::ttft_p99_ms},
        {"e2e_mean_ms", &RunStats::e2e_mean_ms},   {"e2e_p50_ms", &RunStats::e2e_p50_ms},
        {"e2e_p90_ms", &RunStats::e2e_p90_ms},     {"e2e_p99_ms", &RunStats::e2e_p99_ms},
        {"itl_mean_ms", &RunStats::itl_mean_ms},   {"completed", &RunStats::completed},
        {"failed", &RunStats::failed},             {"throughput_rps", &RunStats::throughput_rps},
        {"output_tokens_per_s", &RunStats::output_tokens_per_s}};
    for (const auto& [name, field] : fields) {
        if (!(m.*field)) {
            continue;  // only what the run measured is compared
        }
        w.metrics.push_back(MetricComparison{name, m.*field, p.*field});
    }
}

}  // namespace

RunComparison compare_run(const MeasuredRun& run, const ExperimentResult& result) {
    RunComparison c;
    c.run = run.name;
    c.path = run.path;
    c.format = run.format;
    c.cost_model = result.cost_model;
    c.status = run_status_name(result.status);
    c.notes = run.notes;
    const auto& all = run.windows.front().measured;
    c.overloaded = all.failed && *all.failed > 0;
    std::vector<MeasuredRequest> predicted = predicted_requests(result);
    // Window bounds in send time; inference-perf stage windows hold request indices, turned into the send time of
    // their first request (the replayed stream's order is the file's).
    std::vector<double> sends;
    sends.reserve(run.requests.size());
    for (const auto& r : run.requests) {
        sends.push_back(r.send_s);
    }
    const bool indexed = run.format == "inference-perf";
    for (const auto& w : run.windows) {
        double from = w.send_from_s;
        double to = w.send_to_s;
        if (indexed && w.name != "all") {
            const auto send_of = [&](double index) {
                const auto i = static_cast<std::size_t>(index);
                return i < sends.size() ? sends[i] : kInf;
            };
            // The replay's records carry their send times; the stage boundary is the first send of the stage.
            from = send_of(from);
            to = send_of(to);
        }
        std::vector<MeasuredRequest> in;
        for (const auto& r : predicted) {
            if (r.send_s >= from - 1e-9 && r.send_s < to - 1e-9) {
                in.push_back(r);
            }
        }
        RunStats p = client_stats(in, w.itl_output_tokens);
        WindowComparison wc;
        wc.window = w.name;
        if (w.name == "all") {
            // Requests the client gave up on or that never finished: sent minus completed.
            const auto& s = result.sim.summary;
            p.failed = static_cast<double>(s.num_requests_sent - s.num_requests_finished);
        } else {
            p.failed.reset();
        }
        add_metrics(wc, w.measured, p);
        if (w.name == "all" && run.kv_blocks) {
            wc.metrics.push_back(MetricComparison{"kv_blocks", static_cast<double>(*run.kv_blocks),
                                                  static_cast<double>(result.plan.num_gpu_blocks)});
        }
        c.windows.push_back(std::move(wc));
    }
    return c;
}

void add_server_metrics(RunComparison& c, const ServerMetricsDelta& server, const ExperimentResult& result) {
    if (c.windows.empty() || c.windows.front().window != "all") {
        throw std::logic_error("add_server_metrics: the comparison has no window \"all\"");
    }
    WindowComparison& all = c.windows.front();
    const auto& s = result.sim.summary;
    // The replay's counters follow vLLM's (PrefixCacheStats: every lookup of a request not preempted, tokens).
    std::optional<double> predicted_rate;
    if (s.prefix_cache_queries > 0) {
        predicted_rate = 100.0 * static_cast<double>(s.prefix_cache_hits) / static_cast<double>(s.prefix_cache_queries);
    }
    std::optional<double> measured_rate;
    if (const auto r = server.hit_rate()) {
        measured_rate = 100.0 * *r;
    } else {
        c.notes.push_back("the server queried no prefix-cache token between the dumps (prefix caching off, or no "
                          "request in between): no measured hit rate");
    }
    all.metrics.push_back(MetricComparison{"hit_rate_pct", measured_rate, predicted_rate});
    all.metrics.push_back(MetricComparison{"cache_queries", server.prefix_cache_queries,
                                           static_cast<double>(s.prefix_cache_queries)});
    all.metrics.push_back(
        MetricComparison{"cache_hits", server.prefix_cache_hits, static_cast<double>(s.prefix_cache_hits)});
    if (server.preemptions) {
        all.metrics.push_back(
            MetricComparison{"preemptions", server.preemptions, static_cast<double>(s.preemptions)});
    }
    if (server.request_success) {
        all.metrics.push_back(MetricComparison{"server_success", server.request_success,
                                               static_cast<double>(s.num_requests_finished)});
    }
    if (server.kv_cache_usage) {
        all.metrics.push_back(MetricComparison{"kv_usage_pct", 100.0 * *server.kv_cache_usage, std::nullopt});
        c.notes.push_back(fmt::format(
            "kv_usage_pct is vllm:kv_cache_usage_perc at the moment of the scrape, not compared: the replay's KV usage "
            "over the run was {:.1f} % on average and {:.1f} % at most (cached blocks nobody holds count as free in "
            "both)",
            100.0 * s.kv_usage_mean, 100.0 * s.kv_usage_max));
    }
}

std::vector<OverallError> overall_errors(const std::vector<RunComparison>& runs) {
    std::vector<std::string> order;
    struct Acc {
        int n = 0;
        double abs = 0;
        double signed_sum = 0;
    };
    std::map<std::pair<std::string, std::string>, Acc> acc;
    for (const auto& r : runs) {
        for (const auto& m : r.windows.front().metrics) {
            const auto e = m.error_pct();
            if (!e) {
                continue;
            }
            if (std::find(order.begin(), order.end(), m.metric) == order.end()) {
                order.push_back(m.metric);
            }
            for (const char* group : {"all", r.overloaded ? "overloaded"
                                                           : "not overloaded"}) {
                Acc& a = acc[{m.metric, group}];
                ++a.n;
                a.abs += std::fabs(*e);
                a.signed_sum += *e;
            }
        }
    }
    std::vector<OverallError> out;
    for (const char* group : {"not overloaded", "overloaded", "all"}) {
        for (const auto& metric : order) {
            const auto it = acc.find({metric, group});
            if (it == acc.end()) {
                continue;
            }
            out.push_back(OverallError{metric, group, it->second.n, it->second.abs / it->second.n,
                                       it->second.signed_sum / it->second.n});
        }
    }
    return out;
}

namespace {

std::string cell(const std::optional<double>& v, int decimals) {
    return v ? fmt::format("{:.{}f}", *v, decimals) : "—";
}

std::string csv_cell(const std::optional<double>& v) { return v ? number_text(*v, -1) : std::string(); }

nlohmann::ordered_json json_value(const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}


}  // namespace

std::string format_validation(const ValidationReport& report, const std::string& format) {
    std::ostringstream o;
    if (format == "json") {
        nlohmann::ordered_json j;
        j["runs"] = nlohmann::ordered_json::array();
        for (const auto& r : report.runs) {
            nlohmann::ordered_json jr;
            jr["run"] = r.run;
            jr["path"] = r.path;
            jr["format"] = r.format;
            jr["cost_model"] = r.cost_model;
            jr["status"] = r.status;
            jr["overloaded"] = r.overloaded;
            jr["notes"] = r.notes;
            jr["windows"] = nlohmann::ordered_json::array();
            for (const auto& w : r.windows) {
                nlohmann::ordered_json jw;
                jw["window"] = w.window;
                for (const auto& m : w.metrics) {
                    jw["metrics"][m.metric] = {{"measured", json_value(m.measured)},
                                               {"predicted", json_value(m.predicted)},
                                               {"error_pct", json_value(m.error_pct())}};
                }
                jr["windows"].push_back(jw);
            }
            j["runs"].push_back(jr);
        }
        j["overall"] = nlohmann::ordered_json::array();
        for (const auto& e : report.overall) {
            j["overall"].push_back({{"metric", e.metric},
                                    {"runs", e.runs},
                                    {"num_runs", e.num_runs},
                                    {"mean_abs_error_pct", e.mean_abs_error_pct},
                                    {"mean_signed_error_pct", e.mean_signed_error_pct}});
        }
        o << j.dump(2) << "\n";
        return o.str();
    }
    if (format == "csv") {
        o << "run,window,metric,measured,predicted,error_pct,num_runs,mean_abs_error_pct\n";
        for (const auto& r : report.runs) {
            for (const auto& w : r.windows) {
                for (const auto& m : w.metrics) {
                    o << csv_escape(r.run) << ',' << csv_escape(w.window) << ',' << m.metric << ','
                      << csv_cell(m.measured) << ',' << csv_cell(m.predicted) << ',' << csv_cell(m.error_pct())
                      << ",,\n";
                }
            }
        }
        for (const auto& e : report.overall) {
            o << "overall," << csv_escape(e.runs) << ',' << e.metric << ",,," << csv_cell(e.mean_signed_error_pct)
              << ',' << e.num_runs << ',' << csv_cell(e.mean_abs_error_pct) << '\n';
        }
        return o.str();
    }
    // Table.
    for (const auto& r : report.runs) {
        o << fmt::format("{} ({}; {}{})\n", r.run, r.format, r.status, r.overloaded ? ", overloaded: the client "
                                                                                       "failed requests" : "");
        o << fmt::format("  cost model: {}\n", r.cost_model);
        for (const auto& note : r.notes) {
            o << "  note: " << note << "\n";
        }
        o << fmt::format("  {:<10} {:<20} {:>14} {:>14} {:>9}\n", "window", "metric", "measured", "predicted",
                         "error");
        for (const auto& w : r.windows) {
            for (const auto& m : w.metrics) {
                const int d = (m.metric == "completed" || m.metric == "failed" || m.metric == "kv_blocks" ||
                               m.metric == "cache_queries" || m.metric == "cache_hits" ||
                               m.metric == "preemptions" || m.metric == "server_success")
                                  ? 0
                                  : 3;
                const auto e = m.error_pct();
                o << fmt::format("  {:<10} {:<20} {:>14} {:>14} {:>9}\n", w.window, m.metric, cell(m.measured, d),
                                 cell(m.predicted, d), e ? fmt::format("{:+.1f}%", *e) : "—");
            }
        }
        o << "\n";
    }
    if (!report.overall.empty()) {
        o << fmt::format("overall (window \"all\" of each run)\n  {:<16} {:<20} {:>6} {:>12} {:>12}\n", "runs",
                         "metric", "n", "mean |err|", "mean err");
        for (const auto& e : report.overall) {
            o << fmt::format("  {:<16} {:<20} {:>6} {:>11.1f}% {:>+11.1f}%\n", e.runs, e.metric, e.num_runs,
                             e.mean_abs_error_pct, e.mean_signed_error_pct);
        }
    }
    return o.str();
}

}  // namespace servesim::app
