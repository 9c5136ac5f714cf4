// Building and running experiments; see experiment.h.
#include "tools/app/experiment.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "calibration/hardware_profile.h"
#include "common/error.h"
#include "common/yaml_reader.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "sim/engine/profile_cost_model.h"
#include "sim/engine/roofline_cost_model.h"
#include "workloads/open_loop_workload.h"
#include "workloads/trace_reader.h"
#include "workloads/workload.h"

namespace servesim::app {

cache::MemoryPlanRequest memory_plan_request(const EngineSettings& e, const calibration::GpuSpec& gpu) {
    cache::MemoryPlanRequest r;
    r.gpu_memory_bytes = gpu.memory_bytes;
    // EngineArgs.get_batch_defaults: ≥ 70 GiB and not an A100 → 8192 / 1024 (vllm-v1-behaviour.md §4.6).
    r.gpu_is_large_for_defaults = gpu.memory_bytes >= 70LL * 1024 * 1024 * 1024 && !gpu.is_a100;
    r.vllm_version = cache::parse_vllm_version(e.vllm_version);
    r.gpu_memory_utilization = e.gpu_memory_utilization;
    r.kv_cache_dtype_fp8 = e.kv_cache_dtype_fp8;
    r.block_size = e.block_size;
    r.enable_prefix_caching = e.enable_prefix_caching;
    r.mamba_cache_mode = e.mamba_cache_mode;
    r.prefix_cache_retention_interval = e.prefix_cache_retention_interval;
    r.max_model_len = e.max_model_len;
    r.max_num_batched_tokens = e.max_num_batched_tokens;
    r.max_num_seqs = e.max_num_seqs;
    r.kv_cache_memory_bytes = e.kv_cache_memory_bytes;
    r.enable_chunked_prefill = e.enable_chunked_prefill;
    r.tensor_parallel_size = e.tensor_parallel_size;
    r.skip_mm_profiling = e.skip_mm_profiling;
    return r;
}

cache::CpuOffloadConfig offload_config(const EngineSettings& engine, const cache::MemoryPlan& plan,
                                       const calibration::GpuSpec& gpu) {
    SERVESIM_CHECK(engine.kv_offloading_size_gib.has_value(), "offload_config without kv_offloading_size");
    // CPUOffloadingSpec (cpu/spec.py): kv_bytes_per_block = Σ GPU KV tensor bytes / num_blocks × world_size —
    // one CPU block holds one GPU block id across all KV tensors (group_size pages) of every tensor-parallel
    // rank, as cpu_bytes_to_use is the total over ranks; each (hash, group) key takes one.
    cache::CpuOffloadConfig o;
    const double unit_bytes =
        static_cast<double>(plan.page_size_bytes) * plan.group_size * plan.tensor_parallel_size;
    o.num_cpu_blocks = static_cast<std::int64_t>(*engine.kv_offloading_size_gib * 1024.0 * 1024.0 *
                                                 1024.0 / unit_bytes);
    o.block_size_tokens = plan.block_size;
    for (const auto& g : plan.groups) {
        if (g.kind == cache::KvGroupKind::kMamba) {
            ++o.num_mamba_groups;
        }
    }
    o.num_attention_groups = static_cast<int>(plan.groups.size()) - o.num_mamba_groups;
    o.offload_prompt_only =
        engine.offload_prompt_only.value_or(plan.vllm_version.offload_prompt_only_by_default());
    const bool hybrid_cached = o.num_mamba_groups > 0 && plan.enable_prefix_caching;
    o.mamba_align_hit_cap = hybrid_cached && plan.mamba_cache_mode == cache::MambaCacheMode::kAlign;
    o.state_at_every_block = hybrid_cached && plan.mamba_cache_mode == cache::MambaCacheMode::kAll;
    const double us_per_token = engine.kv_offloading_load_us_per_token.value_or(
        1e6 * static_cast<double>(plan.kv_bytes_per_token) / gpu.host_link_bytes_per_s);
    o.load_s_per_token = us_per_token * 1e-6;
    return o;
}

namespace {

// What decides an order-only trace: the same key ⇒ the same OrderOnlyTrace, so a sweep over capacities reads and
// hashes each trace once.
std::string order_only_trace_key(const ExperimentConfig& config) {
    return YAML::Dump(config.workload) + fmt::format("\nblock_size: {}", config.engine.block_size.value_or(16));
}

using OrderOnlyTraces = std::map<std::string, std::shared_ptr<const cache::OrderOnlyTrace>>;

}  // namespace

std::shared_ptr<const cache::OrderOnlyTrace> load_order_only_trace(const ExperimentConfig& config) {
    const workloads::TraceConfig t =
        workloads::parse_trace_workload(YamlMap(config.workload, config.file, "workload"));
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
        builder.add_request(record->prompt);
    }
    return std::make_shared<const cache::OrderOnlyTrace>(std::move(builder).build());
}

namespace {

PreparedExperiment prepare_order_only(const ExperimentConfig& config, OrderOnlyTraces& traces) {
    PreparedExperiment p;
    p.config = config;
    auto& trace = traces[order_only_trace_key(config)];
    if (!trace) {
        trace = load_order_only_trace(config);
    }
    p.order_only_trace = trace;
    return p;
}

}  // namespace

PreparedExperiment prepare_experiment(const ExperimentConfig& config) {
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
    p.model = with_file([&] { return models::resolve_model(config.model); });
    p.gpu = with_file([&] { return calibration::find_gpu(config.gpu); });
    p.plan = with_file([&] { return cache::plan_memory(p.model, memory_plan_request(config.engine, p.gpu)); });
    if (p.plan.mamba_cache_mode == cache::MambaCacheMode::kAlign && p.plan.enable_prefix_caching &&
        p.plan.max_num_batched_tokens < p.plan.block_size) {
        throw ConfigError(fmt::format("{}: experiment '{}': engine.max_num_batched_tokens ({}) must be at least the "
                                      "block size ({}) in mamba_cache_mode align, or no prefill chunk can be scheduled",
                                      config.file, config.name, p.plan.max_num_batched_tokens, p.plan.block_size));
    }
    if (config.cost_model == "roofline") {
        engine::RooflineParams params;
        params.gpu_name = p.gpu.name;
        params.peak_flops_per_s = p.gpu.bf16_dense_flops_per_s;
        params.memory_bandwidth_bytes_per_s = p.gpu.memory_bandwidth_bytes_per_s;
        params.tensor_parallel_size = p.plan.tensor_parallel_size;
        params.interconnect_bytes_per_s = p.gpu.interconnect_bytes_per_s;
        params.max_cudagraph_tokens = static_cast<int>(
            std::min<std::int64_t>({2 * p.plan.max_num_seqs, 512, p.plan.max_num_batched_tokens}));
        p.cost_model = std::make_unique<engine::RooflineCostModel>(p.model, p.plan.kv_cache_dtype, params);
    } else {
        calibration::HardwareProfile profile =
            with_file([&] { return calibration::read_profile(config.cost_model); });
        const double kv_scale = static_cast<double>(models::kv_bytes_per_token(p.model, p.plan.kv_cache_dtype)) /
                                static_cast<double>(models::kv_bytes_per_token(p.model, p.model.dtype));
        const int graphs = static_cast<int>(
            std::min<std::int64_t>({2 * p.plan.max_num_seqs, 512, p.plan.max_num_batched_tokens}));
        // A profile holds one rank's compute for its tensor_parallel_size, which must be the engine's (the cost
        // model refuses a mismatch); the all-reduces are added as RooflineCostModel adds them.
        const engine::TensorParallelComm comm =
            engine::make_tensor_parallel_comm(p.model, p.plan.tensor_parallel_size, p.gpu.interconnect_bytes_per_s,
                                              engine::RooflineParams{}.allreduce_latency_ms);
        p.cost_model = with_file([&] {
            return std::make_unique<engine::ProfileCostModel>(std::move(profile), config.cost_model, graphs,
                                                              kv_scale > 0 ? kv_scale : 1.0, comm);
        });
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
    return p;
}

ExperimentResult run_experiment(const PreparedExperiment& p) {
    ExperimentResult r;
    r.config = p.config;
    if (p.config.order_only) {
        r.workload = "order-only replay of " + p.config.workload["trace"].as<std::string>();
        r.order_only = cache::run_order_only(*p.order_only_trace, p.config.capacity_tokens);
        return r;
    }
    r.model_name = p.model.name;
    r.gpu_name = p.gpu.name;
    r.cost_model = p.cost_model->describe();
    r.plan = p.plan;

    auto workload = workloads::make_workload(YamlMap(p.config.workload, p.config.file, "workload"), p.config.seed);
    r.workload = workload->describe();

    cluster::SimulationConfig sc;
    sc.num_replicas = p.config.replicas;
    sc.warmup_end = core::SimTime::from_s(p.config.warmup_s);
    sc.max_time = core::SimTime::from_s(p.config.max_time_s);
    sc.exact_percentiles = p.config.exact_percentiles;
    sc.replica.kv_cache = p.plan.kv_cache_config();
    sc.replica.check_invariants = p.config.check_invariants;
    sc.replica.async_scheduling = p.config.engine.async_scheduling;
    auto& s = sc.replica.scheduler;
    s.max_num_batched_tokens = p.plan.max_num_batched_tokens;
    s.max_num_seqs = p.plan.max_num_seqs;
    s.max_model_len = p.plan.max_model_len;
    s.enable_chunked_prefill = p.config.engine.enable_chunked_prefill;
    s.long_prefill_token_threshold = p.config.engine.long_prefill_token_threshold;
    s.scheduler_reserve_full_isl = p.config.engine.scheduler_reserve_full_isl;
    s.block_size = p.plan.block_size;
    s.mamba_align = p.plan.enable_prefix_caching && p.plan.mamba_cache_mode == cache::MambaCacheMode::kAlign &&
                    p.plan.mamba_block_size > 0;
    s.vllm_version = cache::parse_vllm_version(p.config.engine.vllm_version);
    s.async_scheduling = p.config.engine.async_scheduling;

    if (p.config.engine.kv_offloading_size_gib) {
        sc.replica.offload = offload_config(p.config.engine, p.plan, p.gpu);
    }
    cluster::Simulation sim(sc, *p.cost_model, *workload, cluster::make_router(p.config.router));
    r.sim = sim.run();
    return r;
}

std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                              const std::function<void(int, int)>& on_done) {
    std::vector<PreparedExperiment> prepared;
    prepared.reserve(configs.size());
    OrderOnlyTraces order_only_traces;
    for (const auto& c : configs) {
        prepared.push_back(c.order_only ? prepare_order_only(c, order_only_traces) : prepare_experiment(c));
    }
    std::vector<ExperimentResult> results(prepared.size());
    std::atomic<std::size_t> next{0};
    std::mutex mu;
    int done = 0;
    std::exception_ptr failure;
    auto worker = [&] {
        while (true) {
            const std::size_t i = next.fetch_add(1);
            if (i >= prepared.size()) {
                return;
            }
            try {
                results[i] = run_experiment(prepared[i]);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!failure) {
                    failure = std::current_exception();
                }
            }
            std::lock_guard<std::mutex> lock(mu);
            ++done;
            if (on_done) {
                on_done(done, static_cast<int>(prepared.size()));
            }
        }
    };
    const int n = std::max(1, std::min<int>(jobs, static_cast<int>(prepared.size())));
    std::vector<std::thread> threads;
    for (int t = 1; t < n; ++t) {
        threads.emplace_back(worker);
    }
    worker();
    for (auto& t : threads) {
        t.join();
    }
    if (failure) {
        std::rethrow_exception(failure);
    }
    return results;
}

}  // namespace servesim::app
