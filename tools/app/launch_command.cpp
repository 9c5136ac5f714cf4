// The `vllm serve` / `vllm bench serve` / `servesim validate` lines of a simulated configuration (launch_command.h).
#include "tools/app/launch_command.h"

#include <cmath>
#include <fmt/format.h>

#include "common/yaml_reader.h"
#include "models/model_registry.h"
#include "sim/memory/memory_plan.h"
#include "tools/app/engine_keys.h"
#include "workloads/bench_serve_workload.h"

namespace servesim::app {

namespace {

// A shell word: left bare when it holds only characters no shell treats specially, else single-quoted.
std::string shell_word(const std::string& s) {
    const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789._/:=,+-@%") == std::string::npos;
    if (plain) {
        return s;
    }
    std::string out = "'";
    for (const char c : s) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// Shortest decimal text of a number ("0.9", "12", "inf").
std::string number(double v) {
    if (std::isinf(v)) {
        return "inf";
    }
    return fmt::format("{}", v);
}

// A command's flags in order: (flag, value words); a switch has no value.
using Args = std::vector<std::pair<std::string, std::vector<std::string>>>;

void flag(Args& args, const char* name, const std::string& value) { args.push_back({name, {value}}); }
void flag(Args& args, const char* name) { args.push_back({name, {}}); }

std::string joined(const Args& args) {
    std::string out;
    for (const auto& [name, values] : args) {
        out += ' ';
        out += name;
        for (const auto& v : values) {
            out += ' ';
            out += shell_word(v);
        }
    }
    return out;
}

// The engine flags of `vllm serve` (after the model).
Args serve_args(const ExperimentResult& r, std::vector<std::string>& notes) {
    const EngineSettings& e = r.config.engine;
    const cache::MemoryPlan& p = r.plan;
    Args line;
    if (p.tensor_parallel_size > 1) {
        flag(line, "--tensor-parallel-size", std::to_string(p.tensor_parallel_size));
    }
    if (p.pipeline_parallel_size > 1) {
        flag(line, "--pipeline-parallel-size", std::to_string(p.pipeline_parallel_size));
    }
    // Replicas are vLLM's data-parallel engines of one server when expert parallelism spans them (TP × DP ranks), or
    // when the router is vLLM's own DP load balancer (vllm_dp: vllm/v1/engine/core_client.py DPLBAsyncMPClient);
    // behind another router they are separate servers (a note below).
    const bool data_parallel = r.config.replicas > 1 && (e.enable_expert_parallel || r.config.router == "vllm_dp");
    if (data_parallel) {
        flag(line, "--data-parallel-size", std::to_string(r.config.replicas));
    }
    if (e.enable_expert_parallel) {
        flag(line, "--enable-expert-parallel");
        if (e.all2all_backend != "allgather_reducescatter") {
            flag(line, "--all2all-backend", e.all2all_backend);
        }
    }
    // The scheduler limits and the memory share as servesim resolved them (vLLM's defaults for the GPU and usage
    // context made explicit).
    flag(line, "--max-model-len", std::to_string(p.max_model_len));
    flag(line, "--max-num-seqs", std::to_string(p.max_num_seqs));
    flag(line, "--max-num-batched-tokens", std::to_string(p.max_num_batched_tokens));
    if (p.kv_cache_memory_overridden) {
        flag(line, "--kv-cache-memory-bytes", std::to_string(p.kv_cache_memory_bytes));
    } else {
        flag(line, "--gpu-memory-utilization", number(p.gpu_memory_utilization));
    }
    if (e.block_size) {
        // Only when the user set it: vLLM raises a hybrid model's block size itself, as servesim did.
        flag(line, "--block-size", std::to_string(*e.block_size));
    }
    if (e.kv_cache_dtype_fp8) {
        flag(line, "--kv-cache-dtype", "fp8");
    }
    flag(line, p.enable_prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
    if (e.mamba_cache_mode) {
        flag(line, "--mamba-cache-mode", cache::mamba_cache_mode_name(*e.mamba_cache_mode));
    }
    if (!e.enable_chunked_prefill) {
        flag(line, "--no-enable-chunked-prefill");
    }
    if (e.long_prefill_token_threshold > 0) {
        flag(line, "--long-prefill-token-threshold", std::to_string(e.long_prefill_token_threshold));
    }
    if (!e.async_scheduling) {
        flag(line, "--no-async-scheduling");
    }
    if (e.enforce_eager) {
        flag(line, "--enforce-eager");
    }
    if (e.cudagraph_capture_sizes) {
        std::vector<std::string> sizes;
        for (const auto size : *e.cudagraph_capture_sizes) {
            sizes.push_back(std::to_string(size));
        }
        line.push_back({"--cudagraph-capture-sizes", sizes});
    }
    if (e.max_cudagraph_capture_size) {
        flag(line, "--max-cudagraph-capture-size", std::to_string(*e.max_cudagraph_capture_size));
    }
    if (e.disable_custom_all_reduce) {
        flag(line, "--disable-custom-all-reduce");
    }
    if (e.quantization) {
        flag(line, "--quantization", *e.quantization);
    }
    if (e.dtype) {
        flag(line, "--dtype", *e.dtype);
    }
    if (e.speculative_config) {
        flag(line, "--speculative-config", *e.speculative_config);  // vLLM's JSON as given (single-quoted)
    }
    if (e.kv_offloading_size_gib) {
        flag(line, "--kv-offloading-size", number(*e.kv_offloading_size_gib));
        flag(line, "--kv-offloading-backend", "native");
    }
    if (e.prefix_cache_retention_interval) {
        flag(line, "--prefix-cache-retention-interval",
             *e.prefix_cache_retention_interval == cache::kRetentionDense
                 ? std::string("none")
                 : std::to_string(*e.prefix_cache_retention_interval));
    }
    if (e.prefix_match_unit) {
        flag(line, "--prefix-match-unit", std::to_string(*e.prefix_match_unit));
    }
    if (e.skip_mm_profiling) {
        flag(line, "--skip-mm-profiling");
    }
    // What no vLLM flag carries.
    if (r.config.replicas > 1 && !data_parallel) {
        notes.push_back(fmt::format("{} replicas: one such server per replica, behind the '{}' router",
                                    r.config.replicas, r.config.router));
    }
    if (e.hybrid_cache_policy != "vllm") {
        notes.push_back("hybrid_cache_policy '" + e.hybrid_cache_policy +
                        "' is a servesim policy study, not a vLLM setting: vLLM runs its own");
    }
    if (e.expert_load_imbalance != 1.0) {
        notes.push_back(fmt::format("expert_load_imbalance {} is an assumption about the traffic, not a flag",
                                    number(e.expert_load_imbalance)));
    }
    return line;
}

std::optional<std::string> bench_line(const ExperimentResult& r, const std::string& model, std::string& why_not) {
    const YAML::Node& w = r.config.workload;
    const std::string type = w && w.IsMap() && w["type"] ? w["type"].as<std::string>() : std::string();
    if (type != "bench_serve") {
        why_not = "the workload (type: " + (type.empty() ? std::string("?") : type) +
                  ") is not vllm bench serve's own, so no bench line reproduces it; requests.csv holds every "
                  "simulated request (send time, lengths) for a load generator of your choice";
        return std::nullopt;
    }
    const workloads::BenchServeConfig c =
        workloads::parse_bench_serve_workload(YamlMap(w, r.config.file), r.config.seed);
    if (c.dataset_name != "random") {
        why_not = "dataset '" + c.dataset_name + "': give vllm bench serve the same --dataset-path";
    }
    Args line;
    flag(line, "--backend", "vllm");
    flag(line, "--model", model);
    flag(line, "--dataset-name", c.dataset_name);
    if (!c.dataset_path.empty()) {
        flag(line, "--dataset-path", c.dataset_path);
    }
    if (c.dataset_name == "random") {
        flag(line, "--random-input-len", std::to_string(c.random_input_len));
        flag(line, "--random-output-len", std::to_string(c.random_output_len));
        if (c.random_input_range_ratio != 0 || c.random_output_range_ratio != 0) {
            flag(line, "--random-range-ratio",
                 c.random_input_range_ratio == c.random_output_range_ratio
                     ? number(c.random_input_range_ratio)
                     : fmt::format("{{\"input\": {}, \"output\": {}}}", number(c.random_input_range_ratio),
                                   number(c.random_output_range_ratio)));
        }
        if (c.random_prefix_len > 0) {
            flag(line, "--random-prefix-len", std::to_string(c.random_prefix_len));
        }
    }
    flag(line, "--num-prompts", std::to_string(c.num_prompts));
    if (c.ramp_up) {
        flag(line, "--ramp-up-strategy", c.ramp_up->exponential ? "exponential" : "linear");
        flag(line, "--ramp-up-start-rps", number(c.ramp_up->start_rps));
        flag(line, "--ramp-up-end-rps", number(c.ramp_up->end_rps));
    } else {
        flag(line, "--request-rate", number(c.request_rate_per_s));
    }
    if (c.burstiness != 1.0) {
        flag(line, "--burstiness", number(c.burstiness));
    }
    if (c.max_concurrency) {
        flag(line, "--max-concurrency", std::to_string(*c.max_concurrency));
    }
    flag(line, "--seed", std::to_string(c.seed));
    flag(line, "--ignore-eos");  // the simulated requests run to their output length
    flag(line, "--save-result");
    flag(line, "--save-detailed");
    flag(line, "--result-filename", "result.json");
    return "vllm bench serve" + joined(line);
}

}  // namespace

std::string vllm_model_argument(const ExperimentConfig& config, const std::string& model_name) {
    if (config.model.find('/') != std::string::npos) {
        return config.model;  // a repo id or a path, as given
    }
    for (const auto& [repo, preset] : models::hf_repo_ids()) {
        if (preset == model_name) {
            return repo;
        }
    }
    return config.model;
}

LaunchCommands launch_commands(const ExperimentResult& r) {
    LaunchCommands out;
    const std::string model = vllm_model_argument(r.config, r.model_name);
    const Args engine = serve_args(r, out.notes);
    out.serve = "vllm serve " + shell_word(model) + joined(engine);
    out.bench = bench_line(r, model, out.bench_note);
    // validate replays result.json with the same engine: every serve flag servesim reads as an engine flag.
    Args validate;
    for (const auto& a : engine) {
        if (find_engine_flag(a.first) != nullptr) {
            validate.push_back(a);
        }
    }
    out.validate = fmt::format("servesim validate result.json --model {} --gpu {}{}", shell_word(r.config.model),
                               shell_word(r.gpu_name), joined(validate));
    return out;
}

std::string format_launch_script(const std::vector<ExperimentResult>& results) {
    std::string out =
        "#!/bin/sh\n"
        "# The configurations servesim simulated, as commands for real GPUs (docs/OUTPUTS.md \"launch.sh\").\n"
        "# Start the server, send the load from another shell, then check the prediction with servesim validate.\n"
        "exit 0  # a record, not a script to run as a whole: copy the lines you need\n";
    for (const auto& point : results) {
        for (const ExperimentResult* r : runs_of(point)) {
            if (r->order_only) {
                continue;  // an order-only run simulates no engine
            }
            const LaunchCommands c = launch_commands(*r);
            out += fmt::format("\n# experiment '{}' (seed {}): {} on {}, simulated as vLLM {}\n", r->config.name,
                               r->config.seed, r->model_name, r->gpu_name, r->config.engine.vllm_version);
            for (const auto& n : c.notes) {
                out += "# note: " + n + "\n";
            }
            out += c.serve + "\n";
            if (c.bench) {
                if (!c.bench_note.empty()) {
                    out += "# note: " + c.bench_note + "\n";
                }
                out += *c.bench + "\n";
                out += c.validate + "\n";
            } else {
                out += "# no vllm bench serve line: " + c.bench_note + "\n";
            }
        }
    }
    return out;
}

}  // namespace servesim::app
