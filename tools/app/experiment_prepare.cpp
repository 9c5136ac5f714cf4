// Assembling an experiment before it runs (prepare_experiment): the model as the engine loads it, vLLM's memory
// plan, the cost model, the replicas' placement on cluster.topology, the disaggregated pools, and order-only replays;
// everything that can fail on bad input fails here, before any simulation starts. See experiment.h.
#include "tools/app/experiment.h"
#include "tools/app/experiment_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <tuple>

#include "calibration/hardware_profile.h"
#include "common/error.h"
#include "common/yaml_reader.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "sim/engine/expert_parallel.h"
#include "sim/engine/host_work.h"
#include "sim/engine/measured_cost_model.h"
#include "sim/engine/pipeline_parallel_cost_model.h"
#include "models/quantization_config.h"
#include "sim/memory/hybrid_state_plan.h"
#include "sim/engine/profile_cost_model.h"
#include "sim/engine/roofline_cost_model.h"
#include "tools/app/host_work_fit.h"
#include "tools/app/executor.h"
#include "tools/app/partial_results.h"
#include "workloads/open_loop_workload.h"
#include "workloads/trace_reader.h"
#include "workloads/workload.h"


namespace servesim::app {

namespace {

// What decides an order-only trace: the same key ⇒ the same OrderOnlyTrace, so a sweep over capacities reads and
// hashes each trace once.
std::string order_only_trace_key(const ExperimentConfig& config) {
    return YAML::Dump(config.workload) + fmt::format("\nblock_size: {}", config.engine.block_size.value_or(16));
}

}  // namespace

std::shared_ptr<const cache::OrderOnlyTrace> load_order_only_trace(const ExperimentConfig& config) {
    const YamlMap workload(config.workload, config.file, "workload");
    const workloads::TraceConfig t = workloads::parse_trace_workload(workload);
    if (t.request_timeout) {
        workload.fail("request_timeout", "not used in order_only mode: the replay keeps no client clock, so no "
                                         "request can time out; remove it");
    }
    cache::OrderOnlyTraceBuilder builder(config.engine.block_size.value_or(16));
    auto reader = workloads::open_trace(t.path, t.format, t.reader);
    while (!t.limit || builder.num_requests() < *t.limit) {
        auto record = reader->next();
        if (!record) {
            break;
        }
        const auto send_time = core::SimTime::from_ns(
            static_cast<std::int64_t>(std::llround(static_cast<double>(record->arrival.ns()) * t.time_scale)));
        if (!t.bounds.allows(builder.num_requests(), send_time)) {
            break;
        }
        // Checked before hashing: a 10^9-token record used to take 24 s and 3.9 GB of block ids. 2^24 tokens is
        // above every model's context (10M for the longest published), so no replayed request is that long.
        constexpr std::int64_t kMaxRecordTokens = std::int64_t{1} << 24;
        if (const std::int64_t n = core::total_tokens(record->prompt); n > kMaxRecordTokens) {
            throw ConfigError(t.path, static_cast<int>(record->line), "input tokens",
                              fmt::format("{} tokens; allowed in order_only mode: up to {} (above any model's "
                                          "context)",
                                          n, kMaxRecordTokens));
        }
        builder.add_request(record->prompt);
    }
    if (builder.num_requests() == 0) {
        // A run over no request would print zeros for every hit rate.
        throw ConfigError(t.path + ": no record to replay (the trace holds none, or none is sent within the "
                                   "workload's num_requests / duration)");
    }
    return std::make_shared<const cache::OrderOnlyTrace>(std::move(builder).build());
}

ExperimentConfig order_only_engine_config(const ExperimentConfig& config) {
    const std::string where = config.file + ": experiment '" + config.name + "': ";
    if (config.capacity_tokens) {
        throw ConfigError(where + "capacity_tokens: not used with `model` in order_only mode (the model's KV memory "
                                  "is the capacity: set engine.kv_cache_memory_bytes, or leave it to the GPU's "
                                  "profile); remove `model` for a pool of capacity_tokens tokens");
    }
    if (config.replicas != 1) {
        throw ConfigError(where + "cluster.replicas: order_only mode replays the trace through one pool; got " +
                          std::to_string(config.replicas));
    }
    if (config.workload["request_timeout"]) {
        throw ConfigError(where + "workload.request_timeout: not used in order_only mode (the replay's clock is not "
                                  "reported and no request is given up); remove it");
    }
    for (const char* key : {"max_concurrency", "max_output_tokens"}) {
        if (config.workload[key]) {
            throw ConfigError(where + "workload." + key + ": not allowed in order_only mode with `model` (the "
                              "replay sends one request at a time with one output token)");
        }
    }
    ExperimentConfig e = config;
    e.order_only = false;
    e.replicas = 1;
    e.workload["max_concurrency"] = 1;
    e.workload["max_output_tokens"] = 1;
    e.warmup_s = 0;
    e.max_time_s = 1e9;  // the replay ends when the trace does, whatever its prefills add up to
    e.max_time_given = true;
    return e;
}

PreparedExperiment prepare_order_only(const ExperimentConfig& config, OrderOnlyTraces& traces) {
    if (!config.model.empty()) {
        PreparedExperiment p = prepare_experiment(order_only_engine_config(config));
        p.order_only_engine_replay = true;
        return p;
    }
    PreparedExperiment p;
    p.config = config;
    auto& trace = traces[order_only_trace_key(config)];
    if (!trace) {
        trace = load_order_only_trace(config);
    }
    p.order_only_trace = trace;
    return p;
}

namespace {

// engine.hybrid_cache_policy other than vllm: the state pool / attention pool split (hybrid_state_plan.h), with the
// roofline's prefill FLOP terms for FLOP-aware eviction.
void apply_hybrid_policy(const EngineSettings& e, const models::ModelSpec& model, cache::MemoryPlan& plan) {
    if (e.kv_offloading_size_gib) {
        throw ConfigError(fmt::format("engine.hybrid_cache_policy '{}' does not model engine.kv_offloading_size; use "
                                      "vllm",
                                      e.hybrid_cache_policy));
    }
    cache::HybridStatePoolRequest req;
    req.policy = e.hybrid_cache_policy;
    req.state_memory_ratio = e.hybrid_state_memory_ratio;
    req.interval_tokens = e.hybrid_checkpoint_interval_tokens;
    req.attention_block_size = e.block_size.value_or(16);
    req.linear_flops_per_token = models::linear_flops_per_token(model);
    for (const auto& layer : model.layers) {
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            req.attention_flops_per_work += 4.0 * a->num_q_heads * a->head_dim;
        }
    }
    cache::apply_hybrid_state_pool(plan, req);
}

}  // namespace

namespace {
std::shared_ptr<const PreparedExperiment> prepare_pool(const ExperimentConfig& config, const cluster::PoolSettings& pool,
                                                       const char* name);
void check_disaggregation(const PreparedExperiment& p);
}  // namespace

const cache::MemoryPlan& replica_plan(const PreparedExperiment& p, std::size_t i) {
    return p.replica_plans.empty() ? p.plan : p.replica_plans[i];
}

namespace {

// cluster.topology's GPUs under the replicas (docs/CLUSTER.md "Placement"): replica i takes GPUs
// [first + i·TP·PP, first + (i+1)·TP·PP) in file order, and its device memory is the smallest of theirs. A preset's
// GPUs name their catalog model, which the experiment's gpu: must name too (a dgx-h100 under `gpu: H200` would
// cost H200 compute on H100 memory); a user file's GPUs carry their memory alone, which wins over the catalog's.
void place_on_topology(PreparedExperiment& p, int first_gpu) {
    const ExperimentConfig& config = p.config;
    const cluster::Topology& t = *config.topology;
    const auto gpus = t.gpus();
    const int tp = std::max(1, config.engine.tensor_parallel_size);
    const int pp = std::max(1, config.engine.pipeline_parallel_size);
    const auto per = static_cast<std::size_t>(tp * pp);
    const auto first = static_cast<std::size_t>(std::max(0, first_gpu));
    const std::size_t needed = first + per * static_cast<std::size_t>(config.replicas);
    if (gpus.size() < needed) {
        throw ConfigError(config.file, 0, "cluster.topology",
                          fmt::format("{} replicas of {} GPUs need {} GPUs; cluster.topology has {}", config.replicas,
                                      per, needed - first, gpus.size() - std::min(first, gpus.size())));
    }
    for (int i = 0; i < config.replicas; ++i) {
        std::vector<std::size_t> own(gpus.begin() + static_cast<std::ptrdiff_t>(first + per * i),
                                     gpus.begin() + static_cast<std::ptrdiff_t>(first + per * (i + 1)));
        std::int64_t memory = std::numeric_limits<std::int64_t>::max();
        for (const std::size_t v : own) {
            const cluster::TopologyNode& n = t.node(v);
            if (!t.gpu_model(v).empty()) {
                std::string model;
                try {
                    model = calibration::find_gpu(t.gpu_model(v)).name;
                } catch (const ConfigError& e) {
                    throw ConfigError(config.file, 0, "cluster.topology",
                                      fmt::format("GPU '{}': gpu '{}': {}", n.name, t.gpu_model(v), e.what()));
                }
                if (model != p.gpu.name) {
                    throw ConfigError(
                        config.file, 0, "gpu",
                        fmt::format("'{}' ({}), but cluster.topology's GPU '{}' is a {}: the experiment's (or pool's) "
                                    "gpu: must be the GPU the topology holds; set gpu: {}, pick the preset of your "
                                    "GPU (dgx-h100: H100-SXM, 8xh200-nvlink-ib400: H200), or describe the GPUs in a "
                                    "topology file ({{file: PATH}})",
                                    config.gpu, p.gpu.name, n.name, model, model));
                }
            }
            memory = std::min(memory, n.memory_bytes);
        }
        p.replica_gpus.push_back(std::move(own));
        p.replica_gpu_memory_bytes.push_back(memory);
    }
    // engine.kv_offloading_size: each replica's CPU tier (the total over its ranks, as CPUOffloadingSpec's
    // cpu_bytes_to_use) lives in its host's DRAM, so the tiers of a host's replicas together must fit it.
    if (config.engine.kv_offloading_size_gib) {
        std::map<std::size_t, int> replicas_on_host;  // ordered: the first host over its memory is named
        for (const auto& own : p.replica_gpus) {
            ++replicas_on_host[t.nearest_host(own.front())];
        }
        const double each = *config.engine.kv_offloading_size_gib * 1024.0 * 1024.0 * 1024.0;
        for (const auto& [host, n] : replicas_on_host) {
            if (host == cluster::Topology::npos) {
                throw ConfigError(config.file, 0, "engine.kv_offloading_size",
                                  "a replica's GPU reaches no host in cluster.topology: its CPU tier lives in host DRAM");
            }
            const double host_bytes = static_cast<double>(t.node(host).memory_bytes);
            if (each * n > host_bytes) {
                throw ConfigError(config.file, 0, "engine.kv_offloading_size",
                                  fmt::format("{} replicas on host '{}' hold {:.1f} GiB of CPU tier each ({:.1f} GiB), "
                                              "more than its memory ({:.1f} GiB in cluster.topology)",
                                              n, t.node(host).name, each / (1LL << 30), each * n / (1LL << 30),
                                              host_bytes / (1LL << 30)));
            }
        }
    }
}

}  // namespace

PreparedExperiment prepare_experiment(const ExperimentConfig& config) { return prepare_experiment_at(config, 0); }

PreparedExperiment prepare_experiment_at(const ExperimentConfig& config, int first_gpu) {
    if (config.order_only) {
        OrderOnlyTraces traces;
        return prepare_order_only(config, traces);
    }
    PreparedExperiment p;
    p.config = config;
    auto with_file = [&](auto&& fn) {
        try {
            return fn();
        } catch (const ConfigError& e) {
            const std::string msg = e.what();
            if (msg.rfind(config.file, 0) == 0) {
                throw;
            }
            throw ConfigError(config.file + ": experiment '" + config.name + "': " + msg);
        }
    };
    p.model = with_file([&] { return resolve_engine_model(config.model, config.engine); });
    p.gpu = with_file([&] { return calibration::find_gpu(config.gpu); });
    // --speculative-config (sim/engine/speculative.h), resolved before the memory plan: the drafter's weights and KV
    // layers share the GPU with the target's.
    const std::optional<SpeculativeSetup> speculative =
        with_file([&] { return resolve_speculative(config.engine, p.model); });
    // With a topology (not the disaggregated whole, whose pools are placed and planned each on its own), each
    // replica's memory plan is its GPUs' memory; one plan per distinct memory.
    if (config.topology && !config.disaggregation) {
        place_on_topology(p, first_gpu);
    }
    auto plan_for = [&](std::int64_t gpu_memory_bytes, std::size_t replica) {
        return with_file([&] {
            try {
                cache::MemoryPlanRequest request =
                    memory_plan_request(config.engine, p.gpu, config.replicas, gpu_memory_bytes);
                if (speculative) {
                    request.drafter = speculative->memory;
                    request.num_speculative_tokens = speculative->config.num_speculative_tokens;
                }
                cache::MemoryPlan plan = cache::plan_memory(p.model, request);
                if (config.engine.hybrid_cache_policy != "vllm") {
                    apply_hybrid_policy(config.engine, p.model, plan);
                }
                return plan;
            } catch (const ConfigError& e) {
                if (gpu_memory_bytes == 0 || gpu_memory_bytes == p.gpu.memory_bytes) {
                    throw;
                }
                throw ConfigError(fmt::format("{} (replica {} on GPU '{}', {:.1f} GiB from cluster.topology)",
                                              e.what(), replica, config.topology->node(p.replica_gpus[replica].front()).name,
                                              static_cast<double>(gpu_memory_bytes) / (1LL << 30)));
            }
        });
    };
    const auto& mem = p.replica_gpu_memory_bytes;
    p.plan = plan_for(mem.empty() ? 0 : mem.front(), 0);
    if (std::any_of(mem.begin(), mem.end(), [&](std::int64_t m) { return m != mem.front(); })) {
        std::map<std::int64_t, std::size_t> planned;  // memory → its first replica in replica_plans
        for (std::size_t i = 0; i < mem.size(); ++i) {
            const auto it = planned.find(mem[i]);
            p.replica_plans.push_back(i == 0 ? p.plan
                                      : it != planned.end() ? p.replica_plans[it->second]
                                                            : plan_for(mem[i], i));
            planned.emplace(mem[i], i);
        }
    }
    if (p.plan.mamba_cache_mode == cache::MambaCacheMode::kAlign && p.plan.enable_prefix_caching &&
        p.plan.max_num_batched_tokens < p.plan.block_size) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.max_num_batched_tokens ({}) must be at least the "
                                      "block size ({}) in mamba_cache_mode align, or no prefill chunk can be scheduled",
                                      config.file, config.name, p.plan.max_num_batched_tokens, p.plan.block_size));
    }
    // The links of the tensor-parallel group and of the replica's TP × PP GPUs (pipeline sends): NVLink inside the GPU
    // file's domain; beyond it PCIe (bridged pairs) or the network between nodes (sim/engine/collectives.h).
    const int replica_gpus = p.plan.tensor_parallel_size * p.plan.pipeline_parallel_size;
    const engine::CollectiveLink tp_link = engine::collective_link_for_group(p.gpu, p.plan.tensor_parallel_size);
    const engine::CollectiveLink pp_link = engine::collective_link_for_group(p.gpu, replica_gpus);
    if (replica_gpus > 1 && !(pp_link.link_bytes_per_s > 0)) {
        throw ConfigError(fmt::format(
            "{}: experiment '{}': {} GPUs per replica (tensor_parallel_size × pipeline_parallel_size) is more than "
            "the NVLink domain of {} ({} GPUs, {}), so the group would meet over the network, and the GPU file gives "
            "no interconnect.network_gb_per_s (docs/GPUS.md)",
            config.file, config.name, replica_gpus, p.gpu.name, p.gpu.interconnect_domain_gpus, p.gpu.file));
    }
    if (p.plan.pipeline_parallel_size > 1 && config.engine.kv_offloading_size_gib) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.kv_offloading_size with pipeline_parallel_size > 1 "
                                      "is not modelled (the host tier is sized per tensor-parallel group)",
                                      config.file, config.name));
    }
    // Expert parallelism over the TP × DP ranks of all replicas (sim/engine/expert_parallel.h).
    if (config.engine.all2all_backend != "allgather_reducescatter" && !config.engine.enable_expert_parallel) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.all2all_backend is used only with "
                                      "engine.enable_expert_parallel: true (vLLM's all2all backends move MoE tokens "
                                      "between expert-parallel ranks)",
                                      config.file, config.name));
    }
    if (config.engine.expert_load_imbalance != 1.0 && !config.engine.enable_expert_parallel) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.expert_load_imbalance is used only with "
                                      "engine.enable_expert_parallel: true (without expert parallelism every rank "
                                      "holds a slice of every expert)",
                                      config.file, config.name));
    }
    engine::ExpertParallelism expert_parallelism;
    if (p.plan.expert_parallel_size > 1) {
        expert_parallelism.expert_parallel_size = p.plan.expert_parallel_size;
        expert_parallelism.tensor_parallel_size = p.plan.tensor_parallel_size;
        expert_parallelism.data_parallel_size = config.replicas;
        expert_parallelism.expert_load_imbalance = config.engine.expert_load_imbalance;
        expert_parallelism.link = engine::collective_link_for_group(p.gpu, p.plan.expert_parallel_size);
        const auto backend = engine::parse_all2all_backend(config.engine.all2all_backend);
        if (!backend) {
            throw ConfigError(fmt::format("{}: experiment '{}': engine.all2all_backend '{}' is not modelled; allowed: {}",
                                          config.file, config.name, config.engine.all2all_backend,
                                          engine::all2all_backend_names()));
        }
        expert_parallelism.backend = *backend;
        if (!(expert_parallelism.link.link_bytes_per_s > 0)) {
            throw ConfigError(fmt::format(
                "{}: experiment '{}': an expert-parallel group of {} GPUs (TP × replicas) is more than the NVLink "
                "domain of {} ({} GPUs, {}): the all-to-all would cross the network, and the GPU file gives no "
                "interconnect.network_gb_per_s (docs/GPUS.md)",
                config.file, config.name, p.plan.expert_parallel_size, p.gpu.name, p.gpu.interconnect_domain_gpus,
                p.gpu.file));
        }
    }
    // CUDA graphs (sim/engine/cuda_graphs.h): vLLM's ladder up to min(2·max_num_seqs, 512, max_num_batched_tokens)
    // unless the engine keys say otherwise (VllmConfig._set_cudagraph_sizes).
    const engine::CudaGraphSizes graphs = cuda_graph_sizes(config, p.plan);
    // The GPU file's figures (host_work_fit.h roofline_params), this replica's parallelism and graphs.
    const auto gpu_params = [&] {
        engine::RooflineParams params = roofline_params(p.gpu);
        params.tensor_parallel_size = p.plan.tensor_parallel_size;
        params.tp_link = tp_link;
        params.custom_all_reduce = !config.engine.disable_custom_all_reduce;
        params.max_cudagraph_tokens = static_cast<int>(graphs.max_size());
        params.cudagraph_capture_sizes = graphs.sizes();
        params.enforce_eager = !graphs.enabled();
        return params;
    };
    if (config.cost_model == "roofline" || config.cost_model == "measured") {
        engine::RooflineParams params = gpu_params();
        params.expert_parallel = expert_parallelism;
        if (config.cost_model == "roofline") {
            p.cost_model = std::make_unique<engine::RooflineCostModel>(p.model, p.plan.kv_cache_dtype, params);
        } else {
            p.cost_model = with_file([&] {
                return std::make_unique<engine::MeasuredCostModel>(
                    p.model, p.plan.kv_cache_dtype, measured_params(p.gpu, params, p.plan.max_num_batched_tokens));
            });
        }
    } else {
        calibration::HardwareProfile profile = with_file([&] {
            // Anything but the two model names is a profile's path: a misspelt name is not a missing file.
            if (!std::filesystem::exists(config.cost_model)) {
                throw ConfigError("cost_model: '" + config.cost_model +
                                  "' is neither a cost model nor a profile file that exists; allowed: roofline "
                                  "(the default), measured, or the path of a calibrated profile YAML "
                                  "(calibration/profiles/, docs/COST-MODEL.md)");
            }
            return calibration::read_profile(config.cost_model);
        });
        // A profile's gemm curve was measured with one kind of linear layer (HardwareProfile::weight_dtype): bf16,
        // or fp8 W8A8 with per-tensor/per-channel scales (calibration run 13, kernels/gemm_fp8.cu). No rule scales
        // one into another honestly, so any other pairing is refused rather than costed with the wrong kernel.
        const std::string model_weights = profile_weight_dtype_for(p.model);
        if (model_weights != profile.weight_dtype) {
            throw ConfigError(fmt::format(
                "{}: experiment '{}': cost_model {} holds {} GEMM curves but the model's linear layers are {}{}; use "
                "a profile calibrated for them (servesim calibrate --weight-dtype) or cost_model: roofline "
                "(docs/QUANTIZATION.md)",
                config.file, config.name, config.cost_model, profile.weight_dtype, model_weights,
                p.model.quantization && p.model.quantization->description != model_weights
                    ? " (" + p.model.quantization->description + ")"
                    : std::string()));
        }
        p.profile_mismatch = with_file([&] { return check_profile_matches(profile, config, p.model, p.gpu); });
        const double kv_scale = static_cast<double>(models::kv_bytes_per_token(p.model, p.plan.kv_cache_dtype)) /
                                static_cast<double>(models::kv_bytes_per_token(p.model, p.model.dtype));
        // A profile holds one rank's compute for its tensor_parallel_size, which must be the engine's (the cost
        // model refuses a mismatch); the all-reduces are added as RooflineCostModel adds them.
        const engine::TensorParallelComm comm =
            engine::make_tensor_parallel_comm(p.model, p.plan.tensor_parallel_size, tp_link,
                                              !config.engine.disable_custom_all_reduce);
        p.cost_model = with_file([&] {
            return std::make_unique<engine::ProfileCostModel>(std::move(profile), config.cost_model, graphs,
                                                              kv_scale > 0 ? kv_scale : 1.0, comm,
                                                              engine::attention_layer_groups(p.model));
        });
    }
    if (expert_parallelism.enabled()) {
        // The dispatch and combine of every MoE layer, for either cost model.
        p.cost_model = std::make_unique<engine::ExpertAllToAllCostModel>(std::move(p.cost_model), p.model,
                                                                         expert_parallelism);
    }
    if (p.plan.pipeline_parallel_size > 1) {
        // vLLM's batch queue of pipeline_parallel_size micro-batches (sim/engine/pipeline_parallel_cost_model.h).
        engine::PipelineHop hop;
        hop.pipeline_parallel_size = p.plan.pipeline_parallel_size;
        hop.tensor_parallel_size = p.plan.tensor_parallel_size;
        hop.hidden_size = p.model.hidden_size;
        hop.dtype_bytes = models::dtype_bytes(p.model.dtype);
        hop.link = pp_link;
        p.cost_model = std::make_unique<engine::PipelineParallelCostModel>(std::move(p.cost_model), hop);
    }
    if (speculative) {
        // --speculative-config (sim/engine/speculative.h): the drafter's cost wraps the target's GPU time.
        p.speculative = speculative->config;
        if (p.plan.pipeline_parallel_size > 1) {
            throw ConfigError(fmt::format("{}: experiment '{}': engine.speculative_config with pipeline_parallel_size "
                                          "> 1 is not modelled",
                                          config.file, config.name));
        }
        // draft_model: the draft checkpoint's own cost model, of the target's kind at the target's TP and graphs:
        // roofline, or measured kernel tables for the draft's shapes. A calibrated profile holds one model's
        // curves, the target's, so the draft is priced by the roofline then (docs/SPECULATIVE-DECODING.md).
        std::unique_ptr<engine::CostModel> draft_cost;
        if (speculative->draft_model) {
            const models::ModelSpec& draft = *speculative->draft_model;
            if (config.cost_model == "measured") {
                draft_cost = with_file([&] {
                    return std::make_unique<engine::MeasuredCostModel>(
                        draft, p.plan.kv_cache_dtype, measured_params(p.gpu, gpu_params(), p.plan.max_num_batched_tokens));
                });
            } else {
                draft_cost = std::make_unique<engine::RooflineCostModel>(draft, p.plan.kv_cache_dtype, gpu_params());
            }
        }
        p.cost_model = std::make_unique<engine::SpeculativeCostModel>(std::move(p.cost_model), *p.speculative,
                                                                      static_cast<int>(p.model.layers.size()) /
                                                                          std::max(1, p.model.blocks_per_decoder_layer),
                                                                      std::move(draft_cost));
    } else if (!config.engine.speculative_acceptance.empty() || config.engine.speculative_mean_acceptance_length ||
               config.engine.speculative_ngram_ns_per_context_token) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.speculative_acceptance, "
                                      "speculative_mean_acceptance_length and speculative_ngram_ns_per_context_token need "
                                      "engine.speculative_config (--speculative-config)",
                                      config.file, config.name));
    }
    // The engine core's host work per step around whichever GPU model (sim/engine/host_work.h): prompt blocks are
    // hashed when prefix caching or a KV connector is on (EngineCore builds its block hasher then).
    const bool hashes_prompt_blocks =
        p.plan.enable_prefix_caching || config.engine.kv_offloading_size_gib.has_value() || config.kv_connector;
    if (config.engine.host_work) {
        p.cost_model = std::make_unique<engine::HostWorkCostModel>(
            std::move(p.cost_model), engine::HostWorkModel(host_work_params(config.engine), p.model,
                                                           p.plan.tensor_parallel_size, graphs, hashes_prompt_blocks));
    }
    if (config.engine.kv_offloading_size_gib && p.plan.enable_prefix_caching &&
        p.plan.mamba_cache_mode == cache::MambaCacheMode::kAlign && p.plan.mamba_block_size > 0 &&
        !p.plan.vllm_version.offload_supports_mamba_align()) {
        // Before PRs #42554/#44599 Scheduler._mamba_block_aligned_split asserts num_external_computed_tokens == 0:
        // the engine dies on the first CPU hit. No prediction is honest there.
        throw ConfigError(fmt::format(
            "{}: experiment '{}': engine.kv_offloading_size with mamba_cache_mode align is not supported by vLLM {} "
            "(its scheduler asserts on the first CPU hit: 'External KV connector is not verified yet'; fixed by PRs "
            "#42554/#44599 in {}); set engine.vllm_version to {} or later, or use mamba_cache_mode all",
            config.file, config.name, p.plan.vllm_version.str(), core::VllmVersion{0, 24, 0}.str(),
            core::VllmVersion{0, 24, 0}.str()));
    }
    (void)cluster::make_router(config.router);  // unknown names fail here, before simulating
    if (config.disaggregation) {
        check_disaggregation(p);
        p.prefill_pool = prepare_pool(config, config.disaggregation->prefill, "prefill");
        p.decode_pool = prepare_pool(config, config.disaggregation->decode, "decode");
    }
    if (config.kv_connector) {
        (void)kv_store_config(p);  // the store's checks against the topology, before simulating
    }
    return p;
}

namespace {

// cluster.disaggregation: each pool is the experiment on its own GPU and tensor-parallel size, prepared as one
// (memory plan, cost model); refused with the pool's key when its GPU or parallelism does not fit.
std::shared_ptr<const PreparedExperiment> prepare_pool(const ExperimentConfig& config, const cluster::PoolSettings& pool,
                                                       const char* name) {
    const cluster::DisaggregationSettings& d = *config.disaggregation;
    ExperimentConfig c = config;
    c.disaggregation.reset();
    c.replicas = pool.replicas;
    if (!pool.gpu.empty()) {
        c.gpu = pool.gpu;
    }
    c.engine.tensor_parallel_size = pool.tensor_parallel_size;
    try {
        // The pool's replicas take consecutive GPUs from its first (prefill: 0; decode: after the prefill pool).
        const int prefill_end = std::max(0, d.prefill.first_gpu) + d.prefill.replicas * d.prefill.tensor_parallel_size;
        const int first = &pool == &d.prefill ? std::max(0, pool.first_gpu)
                                              : (pool.first_gpu >= 0 ? pool.first_gpu : prefill_end);
        return std::make_shared<const PreparedExperiment>(prepare_experiment_at(c, first));
    } catch (const ConfigError& e) {
        throw ConfigError(d.file, pool.line, d.key + "." + name, e.what());
    }
}

void check_disaggregation(const PreparedExperiment& p) {
    const cluster::DisaggregationSettings& d = *p.config.disaggregation;
    auto fail = [&](const std::string& key, const std::string& msg) { throw ConfigError(d.file, d.line, key, msg); };
    const EngineSettings& e = p.config.engine;
    if (e.tensor_parallel_size != 1 || e.pipeline_parallel_size != 1) {
        fail("engine.tensor_parallel_size", "not with cluster.disaggregation: give each pool's tensor_parallel_size "
                                            "(pipeline parallelism is not modelled there)");
    }
    if (e.kv_offloading_size_gib) {
        fail("engine.kv_offloading_size", "not with cluster.disaggregation: one KV connector per engine (the "
                                          "NixlConnector)");
    }
    if (workload_times_out(p.config)) {
        YamlMap(p.config.workload, p.config.file, "workload")
            .fail("request_timeout", "client time-outs are not modelled with cluster.disaggregation (an abort "
                                     "would have to reach the prefill instance, the KV transfer and the decode "
                                     "instance through the proxy); leave the key out (docs/CLIENT-TIMEOUTS.md)");
    }
    for (const auto& g : p.plan.groups) {
        if (g.kind != cache::KvGroupKind::kFullAttention) {
            fail(d.key, "modelled for full-attention models only; '" + p.model.name +
                            "' has Mamba or sliding-window groups");
        }
    }
    const int p_begin = std::max(0, d.prefill.first_gpu);
    const int p_end = p_begin + d.prefill.replicas * d.prefill.tensor_parallel_size;
    const int d_begin = d.decode.first_gpu >= 0 ? d.decode.first_gpu : p_end;
    const std::size_t needed = static_cast<std::size_t>(
        std::max(p_end, d_begin + d.decode.replicas * d.decode.tensor_parallel_size));
    if (!d.proxy.empty()) {
        const std::size_t v = p.config.topology->find(d.proxy);
        if (v == cluster::Topology::npos || p.config.topology->node(v).kind != cluster::NodeKind::kHost) {
            fail(d.key + ".proxy",
                 fmt::format("'{}' is {} in cluster.topology; allowed: the name of a host node (the proxy runs on a "
                             "host's CPU; default: the host nearest the prefill pool's first GPU)",
                             d.proxy, v == cluster::Topology::npos ? "no node"
                                                                   : "a " + std::string(cluster::to_string(
                                                                                p.config.topology->node(v).kind))));
        }
    }
    const std::size_t have = p.config.topology->gpus().size();
    if (have < needed) {
        fail(d.key, fmt::format("{} prefill × TP {} from GPU {} and {} decode × TP {} from GPU {} need {} GPUs; "
                                "cluster.topology has {}",
                                d.prefill.replicas, d.prefill.tensor_parallel_size, p_begin, d.decode.replicas,
                                d.decode.tensor_parallel_size, d_begin, needed, have));
    }
}

}  // namespace

}  // namespace servesim::app
