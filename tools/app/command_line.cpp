// vLLM's flags on servesim's command line; see command_line.h.
#include "tools/app/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "tools/app/engine_keys.h"

namespace servesim::app {
namespace {

// vLLM's -dp: replicas behind the router (servesim models data parallelism as independent replicas).
constexpr std::string_view kDataParallelFlag = "--data-parallel-size";
constexpr ValueSpec kReplicasSpec{ValueKind::Int, 1, 1024};  // cluster.replicas: docs/INPUT-RANGES.md

[[noreturn]] void fail(std::string_view flag, const std::string& message) {
    throw ConfigError(fmt::format("command line: {}: {}", flag, message));
}

// "--max_num_seqs" → "--max-num-seqs" (vLLM's FlexibleArgumentParser); -tp, -dp → their long names.
std::string normalise(const std::string& name) {
    if (name == "-tp") {
        return "--tensor-parallel-size";
    }
    if (name == "-pp") {
        return "--pipeline-parallel-size";
    }
    if (name == "-dp") {
        return std::string(kDataParallelFlag);
    }
    if (!name.starts_with("--")) {
        return name;
    }
    std::string out = name;
    std::replace(out.begin() + 2, out.end(), '_', '-');
    return out;
}

std::string check(std::string_view flag, const ValueSpec& spec, const std::string& text) {
    try {
        (void)parse_value(spec, text);
    } catch (const ConfigError& e) {
        fail(flag, e.what());
    }
    return text;
}

std::int64_t whole_flag(std::string_view flag, const std::string& text, double lo) {
    try {
        return std::get<std::int64_t>(parse_value(ValueSpec{ValueKind::Int, lo, 1 << 30}, text));
    } catch (const ConfigError& e) {
        fail(flag, e.what());
    }
}

// --random-range-ratio: a number in [0, 1) for both lengths, or {"input": r, "output": r} (vLLM _parse_range_ratio).
std::pair<double, double> range_ratios(const std::string& text) {
    const auto one = [](const std::string& t) {
        double r = 0;
        try {
            r = std::get<double>(parse_value(ValueSpec{ValueKind::Number, 0, 1}, t));
        } catch (const ConfigError& e) {
            fail("--random-range-ratio", e.what());
        }
        if (!(r < 1)) {
            fail("--random-range-ratio", fmt::format("{} is out of range; allowed: [0, 1) as in vLLM", t));
        }
        return r;
    };
    if (text.find('{') == std::string::npos) {
        return {one(text), one(text)};
    }
    YAML::Node n;
    try {
        n = YAML::Load(text);
    } catch (const YAML::Exception&) {
        fail("--random-range-ratio", "expected a number or {\"input\": r, \"output\": r}, got '" + text + "'");
    }
    if (!n.IsMap() || !n["input"] || !n["output"] || n.size() != 2 || !n["input"].IsScalar() ||
        !n["output"].IsScalar()) {
        fail("--random-range-ratio", "a mapping must hold exactly the keys input and output, got '" + text + "'");
    }
    return {one(n["input"].Scalar()), one(n["output"].Scalar())};
}

}  // namespace

EngineFlags take_engine_flags(const std::vector<std::string>& args) {
    EngineFlags out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const auto eq = arg.find('=');
        const std::string name = normalise(arg.substr(0, eq));
        const std::optional<std::string> inline_value =
            eq == std::string::npos ? std::nullopt : std::optional<std::string>(arg.substr(eq + 1));
        const bool negated = name.starts_with("--no-");
        const EngineKey* key = find_engine_flag(negated ? "--" + name.substr(5) : name);
        if (negated && (key == nullptr || key->spec.kind != ValueKind::Bool)) {
            key = nullptr;
        }
        if (key == nullptr && name != kDataParallelFlag) {
            out.rest.push_back(arg);
            continue;
        }
        if (key != nullptr && key->spec.kind == ValueKind::Bool) {
            // argparse BooleanOptionalAction: --flag turns it on, --no-flag off; neither takes a value.
            if (inline_value) {
                fail(name, fmt::format("takes no value; use --{0} or --no-{0}", key->flag.substr(2)));
            }
            out.overrides.push_back({"engine." + std::string(key->key), YAML::Node(negated ? "false" : "true"), name});
            continue;
        }
        std::string value;
        if (inline_value) {
            value = *inline_value;
        } else if (i + 1 < args.size()) {
            value = args[++i];
            if (key != nullptr && key->spec.kind == ValueKind::SizeList) {
                // vLLM's nargs="+": the sizes are the following arguments while they are whole numbers.
                while (i + 1 < args.size() && !args[i + 1].empty() &&
                       args[i + 1].find_first_not_of("0123456789,") == std::string::npos) {
                    value += "," + args[++i];
                }
            }
        } else {
            fail(name, fmt::format("expects a value: {}", value_forms(key ? key->spec.kind : ValueKind::Int)));
        }
        if (key == nullptr) {
            out.overrides.push_back({"cluster.replicas", YAML::Node(check(name, kReplicasSpec, value)), name});
        } else {
            out.overrides.push_back({"engine." + std::string(key->key), YAML::Node(check(name, key->spec, value)), name});
        }
    }
    return out;
}

std::string engine_flags_help() {
    std::string out = "vLLM engine flags (each is also a scenario key under engine:, and overrides the scenario):\n";
    const auto line = [&](const std::string& flag, std::string_view help) {
        out += fmt::format("  {:<38} {}\n", flag, help);
    };
    for (const auto& k : engine_keys()) {
        if (k.flag.empty()) {
            continue;
        }
        std::string shown(k.flag);
        if (k.flag == "--tensor-parallel-size") {
            shown = "-tp, --tensor-parallel-size N";
        } else if (k.flag == "--pipeline-parallel-size") {
            shown = "-pp, --pipeline-parallel-size N";
        } else if (k.spec.kind == ValueKind::Bool) {
            shown = "--[no-]" + std::string(k.flag.substr(2));
        } else {
            shown += k.spec.kind == ValueKind::KvDtype || k.spec.kind == ValueKind::MambaMode ||
                             k.spec.kind == ValueKind::Quantization || k.spec.kind == ValueKind::ModelDtype
                         ? " NAME"
                     : k.spec.kind == ValueKind::Bytes || k.spec.kind == ValueKind::GiB     ? " SIZE"
                     : k.spec.kind == ValueKind::Version                                    ? " X.Y"
                     : k.spec.kind == ValueKind::Number                                     ? " X"
                     : k.spec.kind == ValueKind::SizeList                                   ? " N [N ...]"
                     : k.spec.kind == ValueKind::SpeculativeJson                            ? " JSON"
                                                                                            : " N";
        }
        line(shown, k.help);
    }
    line("-dp, --data-parallel-size N", "replicas behind the router (cluster.replicas)");
    out += "  token counts take vLLM's forms (8192, 8k = 8,000, 8K = 8,192); sizes take 12GiB, 12GB or vLLM's 12G\n";
    return out;
}

bool BenchServeFlags::any() const {
    return request_rate || burstiness || num_prompts || random_input_len || random_output_len || random_range_ratio ||
           random_prefix_len || max_concurrency;
}

ScenarioLessRun scenario_less_run(const std::string& model, const std::optional<std::string>& gpu,
                                  const std::optional<std::string>& cost_model, const BenchServeFlags& b) {
    ScenarioLessRun run;
    // `type: bench_serve` (workloads/bench_serve_workload.h) is vllm bench serve itself: its send schedule, its
    // random dataset and its defaults (--request-rate inf, --num-prompts 1000, --random-input-len 1024,
    // --random-output-len 128, --random-range-ratio 0, --random-prefix-len 0, --burstiness 1), so every flag maps
    // onto the key of the same name.
    run.text =
        "name: command-line\n"
        "workload: {type: bench_serve, dataset_name: random}\n";
    run.overrides.push_back({"model", YAML::Node(model), "--model"});
    if (gpu) {
        run.overrides.push_back({"gpu", YAML::Node(*gpu), "--gpu"});
    }
    if (cost_model) {
        run.overrides.push_back({"cost_model", YAML::Node(*cost_model), "--cost-model"});
    }
    const auto plain = [&](const std::optional<std::string>& v, const char* key, const char* flag) {
        if (v) {
            run.overrides.push_back({std::string("workload.") + key, YAML::Node(*v), flag});
        }
    };
    plain(b.request_rate, "request_rate", "--request-rate");
    plain(b.num_prompts, "num_prompts", "--num-prompts");
    plain(b.max_concurrency, "max_concurrency", "--max-concurrency");
    plain(b.burstiness, "burstiness", "--burstiness");
    const std::int64_t prefix = b.random_prefix_len ? whole_flag("--random-prefix-len", *b.random_prefix_len, 0) : 0;
    if (b.random_prefix_len) {
        run.overrides.push_back({"workload.random_prefix_len", YAML::Node(prefix), "--random-prefix-len"});
    }
    const auto [in_ratio, out_ratio] = b.random_range_ratio ? range_ratios(*b.random_range_ratio)
                                                            : std::pair<double, double>{0, 0};
    const std::int64_t in_len = b.random_input_len ? whole_flag("--random-input-len", *b.random_input_len, 0) : 1024;
    if (prefix + static_cast<std::int64_t>(std::floor(in_len * (1 - in_ratio))) < 1) {
        fail(b.random_input_len ? "--random-input-len" : "--random-prefix-len",
             "the shortest prompt would have no token (vLLM needs prefix + input·(1 − range ratio) ≥ 1)");
    }
    if (b.random_input_len) {
        run.overrides.push_back({"workload.random_input_len", YAML::Node(in_len), "--random-input-len"});
    }
    if (b.random_output_len) {
        run.overrides.push_back({"workload.random_output_len",
                                 YAML::Node(whole_flag("--random-output-len", *b.random_output_len, 1)),
                                 "--random-output-len"});
    }
    if (b.random_range_ratio) {
        YAML::Node ratio;
        if (in_ratio == out_ratio) {
            ratio = in_ratio;
        } else {
            ratio["input"] = in_ratio;
            ratio["output"] = out_ratio;
        }
        run.overrides.push_back({"workload.random_range_ratio", ratio, "--random-range-ratio"});
    }
    return run;
}

std::uint64_t parse_seed_flag(const std::string& text) {
    const bool digits = !text.empty() && text.size() <= 19 &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    const std::uint64_t v = digits ? std::stoull(text) : 0;
    if (!digits || v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail("--seed", fmt::format("expected a whole number from 0 to {}, got '{}'",
                                   std::numeric_limits<std::int64_t>::max(), text));
    }
    return v;
}

}  // namespace servesim::app
