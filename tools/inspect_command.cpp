// `servesim inspect`; see inspect_command.h. Moved out of servesim.cpp unchanged.
#include "tools/inspect_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "tools/app/command_line.h"
#include "tools/app/engine_keys.h"
#include "tools/app/experiment.h"
#include "tools/app/flag_suggestions.h"
#include "tools/app/kernel_checks.h"
#include "tools/app/output_inspect.h"
#include "tools/app/scenario.h"
#include "tools/app/step_costs.h"

namespace servesim::cli {

namespace po = boost::program_options;

int cmd_inspect(const std::vector<std::string>& args) {
    const app::EngineFlags flags = app::take_engine_flags(args);
    std::string model_name;
    std::string gpu_name = "H200";
    std::string format = "table";
    std::string scenario;
    std::string cost_model = "roofline";
    std::vector<std::string> step_costs;
    po::options_description opts("usage: servesim inspect --model M [--gpu G] [vLLM engine flags] [options]\n"
                                 "       servesim inspect --model M [--gpu G] [--cost-model C] --step-costs PART... "
                                 "(one batch's cost, term by term)\n"
                                 "       servesim inspect --gpu G --check-kernels (the kernel table's composition and "
                                 "transfer errors)\n"
                                 "       servesim inspect SCENARIO (each experiment's replicas: their topology GPUs, "
                                 "memory and KV blocks)\n\noptions");
    opts.add_options()("help,h", "show this help")("model", po::value<std::string>(&model_name),
                                                   "preset name, Hugging Face repo id, or a config.json / preset YAML")(
        "gpu", po::value<std::string>(&gpu_name), "GPU name (servesim list shows them); default H200")(
        "format", po::value<std::string>(&format), "table (default) or json")(
        "step-costs", po::value<std::vector<std::string>>(&step_costs)->multitoken(),
        "print one step's cost term by term (GEMMs by projection, attention, MoE, elementwise, sampling, comm, "
        "overhead) for a batch of parts: prefill=TOKENS[@CACHED], prefill=SEQSxTOKENS, decode=SEQSxCONTEXT, e.g. "
        "--step-costs prefill=2048 decode=64x2048 (docs/COST-MODEL.md)")(
        "cost-model", po::value<std::string>(&cost_model),
        "with --step-costs: roofline (default), measured (kernel tables) or a calibrated profile YAML")(
        "check-kernels", "the GPU's kernel table: its timed forwards against the composed steps, and its points and "
        "forwards predicted from every other GPU's table");
    po::options_description hidden;
    hidden.add_options()("scenario", po::value<std::string>(&scenario));
    po::options_description all;
    all.add(opts).add(hidden);
    po::positional_options_description positional;
    positional.add("scenario", 1);
    po::variables_map vm;
    po::command_line_parser parser(flags.rest);
    parser.options(all).positional(positional);
    app::store_or_suggest(parser, all, vm, "inspect");
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << opts << "\n" << app::engine_flags_help();
        return 0;
    }
    if (!scenario.empty()) {
        if (!model_name.empty() || !flags.overrides.empty() || vm.count("gpu") || vm.count("format") ||
            !step_costs.empty() || vm.count("cost-model") || vm.count("check-kernels")) {
            throw ConfigError("command line: inspect " + scenario + ": a scenario gives the model, GPU and engine; "
                              "give either a scenario or --model with flags");
        }
        const app::Scenario sc = app::load_scenario(scenario, std::vector<std::string>{}, std::nullopt);
        for (const auto& x : sc.experiments) {
            std::cout << app::inspect_placement(app::prepare_experiment(x));
        }
        return 0;
    }
    if (format != "table" && format != "json") {
        throw ConfigError("command line: --format: '" + format + "' is not a format; allowed: table, json");
    }
    if (vm.count("check-kernels")) {
        if (!model_name.empty() || !step_costs.empty() || format != "table") {
            throw ConfigError("command line: --check-kernels: takes only --gpu (every model of the table's forwards is "
                              "composed)");
        }
        const calibration::GpuSpec gpu = calibration::find_gpu(gpu_name);
        std::cout << app::kernel_checks(gpu);
        return 0;
    }
    if (vm.count("cost-model") && step_costs.empty()) {
        throw ConfigError("command line: --cost-model: used only with --step-costs (inspect's memory figures do not "
                          "depend on the cost model)");
    }
    if (!step_costs.empty()) {
        if (model_name.empty()) {
            throw ConfigError("command line: --step-costs: needs --model");
        }
        std::vector<app::BatchPart> parts;
        for (const auto& spec : step_costs) {
            parts.push_back(app::parse_batch_part(spec));
        }
        // The experiment a run of this model on this GPU with these engine flags would build, and its cost model.
        app::ScenarioLessRun run =
            app::scenario_less_run(model_name, gpu_name, cost_model, app::BenchServeFlags{});
        run.overrides.insert(run.overrides.end(), flags.overrides.begin(), flags.overrides.end());
        const app::Scenario sc = app::load_scenario_text(run.text, "command line", run.overrides);
        const app::PreparedExperiment p = app::prepare_experiment(sc.experiments.at(0));
        // A sequence longer than the server's max_model_len is one vLLM never runs: v1's
        // Processor._validate_model_input refuses the prompt (as Replica's refused_as_too_long, sim/engine/replica.h).
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const std::int64_t context = parts[i].cached + parts[i].chunk;
            if (context > p.plan.max_model_len) {
                throw ConfigError(fmt::format(
                    "command line: --step-costs: '{}': a sequence of {} tokens is longer than max_model_len {} of {} "
                    "(allowed: up to {}; --max-model-len sets it, within the model's context length)",
                    step_costs[i], context, p.plan.max_model_len, model_name, p.plan.max_model_len));
            }
        }
        if (format == "json") {
            std::cout << app::step_costs_json(*p.cost_model, parts).dump(2) << "\n";
        } else {
            std::cout << app::step_costs_table(*p.cost_model, parts);
        }
        return 0;
    }
    if (model_name.empty()) {
        throw ConfigError("command line: inspect: --model is required; known presets: " + [] {
            std::string s;
            for (const auto& n : models::preset_names()) {
                s += (s.empty() ? "" : ", ") + n;
            }
            return s;
        }());
    }
    // The flags as an `engine:` mapping, read by the scenario reader's code; each value was checked by its flag.
    YAML::Node engine(YAML::NodeType::Map);
    for (const auto& o : flags.overrides) {
        if (o.path == "cluster.replicas") {
            throw ConfigError("command line: " + o.origin + ": inspect shows one replica's start-up; replicas do not "
                              "change it");
        }
        engine[o.path.substr(o.path.find('.') + 1)] = o.value;
    }
    const app::EngineSettings e = app::parse_engine_settings(YamlMap(engine, "command line", "engine"));
    const auto named = [&](const std::string& flag, auto&& f) {
        try {
            return f();
        } catch (const ConfigError& err) {
            throw ConfigError("command line: " + flag + ": " + err.what());
        }
    };
    const models::ModelSpec checkpoint = named("--model", [&] { return models::resolve_model(model_name); });
    // --quantization / --dtype: their errors open with the flag's name.
    const models::ModelSpec model = [&] {
        try {
            return models::apply_engine_quantization(checkpoint, e.quantization, e.dtype);
        } catch (const ConfigError& err) {
            throw ConfigError("command line: " + std::string(err.what()));
        }
    }();
    const calibration::GpuSpec gpu = named("--gpu", [&] { return calibration::find_gpu(gpu_name); });
    cache::MemoryPlan plan;
    try {
        cache::MemoryPlanRequest request = app::memory_plan_request(e, gpu);
        app::add_speculative_memory(request, e, model);  // --speculative-config's drafter and state columns
        plan = cache::plan_memory(model, request);
    } catch (const ConfigError& err) {
        // plan_memory's messages open with the engine key they are about ("max_model_len: ..."): name its flag.
        const std::string msg = err.what();
        const app::EngineKey* key = app::find_engine_key(msg.substr(0, msg.find(':')));
        const bool given = key != nullptr && std::any_of(flags.overrides.begin(), flags.overrides.end(), [&](auto& o) {
                               return o.path == "engine." + std::string(key->key);
                           });
        throw ConfigError("command line: " + (given ? std::string(key->flag) + ": " + msg.substr(msg.find(':') + 2)
                                                    : "--model: " + msg));
    }
    if (format == "json") {
        std::cout << app::inspect_json(model, gpu.name, plan).dump(2) << "\n";
    } else {
        std::cout << app::inspect_table(model, gpu.name, plan);
        // The release's start-up facts as plan_memory resolved them (sim/core/vllm_version.h, docs/VLLM-VERSIONS.md).
        const core::VllmVersion& v = plan.vllm_version;
        const bool hybrid = plan.mamba_block_size > 0;
        auto fact = [](const std::string& k, const std::string& value) {
            std::cout << fmt::format("{:<34}{}\n", k, value);
        };
        std::cout << "\n-- vLLM " << v.str() << " start-up facts --\n";
        fact("prefix caching (resolved)", plan.enable_prefix_caching ? "on" : "off");
        fact("mamba_cache_mode (resolved)", hybrid ? cache::mamba_cache_mode_name(plan.mamba_cache_mode) : "-");
        fact("prefix_match_unit (resolved)",
             plan.prefix_match_unit_tokens > 0 ? fmt::format("{} tokens (the block size)", plan.prefix_match_unit_tokens)
                                               : std::string("- (no --prefix-match-unit before 0.26)"));
        fact("cuda-graph estimate subtracted",
             v.kv_budget_subtracts_cudagraph_estimate()
                 ? fmt::format("{:.2f} GiB (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)",
                               static_cast<double>(plan.cudagraph_bytes) / (1024.0 * 1024.0 * 1024.0))
                 : std::string("no (before 0.21)"));
        fact("non-torch (assumed)", fmt::format("{:.2f} GiB", static_cast<double>(plan.non_torch_bytes) /
                                                                   (1024.0 * 1024.0 * 1024.0)));
        fact("KV pool", fmt::format("{:.2f} GiB, {} blocks, {} tokens",
                                    static_cast<double>(plan.kv_cache_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                                    plan.num_gpu_blocks, plan.kv_cache_tokens));
        fact("CPU offload: offload_prompt_only", v.offload_prompt_only_by_default() ? "true (PR #43797)" : "false");
        if (hybrid && plan.enable_prefix_caching && plan.mamba_cache_mode == cache::MambaCacheMode::kAlign) {
            fact("CPU offload with align", v.offload_supports_mamba_align()
                                               ? "supported, hit rounded to the block (PRs #42554/#44599)"
                                               : "refused (vLLM asserts on a CPU hit before 0.24)");
        }
    }
    return 0;
}

}  // namespace servesim::cli
