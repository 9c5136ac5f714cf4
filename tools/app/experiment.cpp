// Running prepared experiments and assessing their results (run_experiment, run_experiments): the cluster
// simulation's settings from a prepared experiment, the plain or disaggregated run, its status, warnings and
// goodput, and the worker threads or MPI ranks a batch runs on. Assembly is experiment_prepare.cpp; see experiment.h.
#include "tools/app/experiment.h"
#include "tools/app/experiment_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <tuple>

#include "calibration/hardware_profile.h"
#include "common/error.h"
#include "common/units.h"
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
#include "tools/app/memory_projection.h"
#include "tools/app/partial_results.h"
#include "workloads/open_loop_workload.h"
#include "workloads/trace_reader.h"
#include "workloads/workload.h"


namespace servesim::app {

namespace {

// The workload's asked-for rate: a finite `rate` (synthetic and tenant workloads) or `request_rate` (bench_serve,
// vllm bench serve's --request-rate), else none (traces, multi_turn_bench whose request_rate is a per-client sleep,
// ramp-ups, inf).
std::optional<double> offered_rate(const YAML::Node& workload) {
    const YAML::Node type = workload["type"];
    const bool bench_serve = type && type.IsScalar() && type.Scalar() == "bench_serve";
    if (type && type.IsScalar() && type.Scalar() == "multi_turn_bench") {
        return std::nullopt;
    }
    // Tenants paced by a sleep after each answer: the rate sets the sleeps, not what is sent.
    const YAML::Node pacing = workload["pacing"];
    if (pacing && pacing.IsScalar() && pacing.Scalar() == "sleep_after_answer") {
        return std::nullopt;
    }
    const YAML::Node rate = workload[bench_serve ? "request_rate" : "rate"];
    if (!rate || !rate.IsScalar()) {
        return std::nullopt;
    }
    try {
        const double v = rate.as<double>();
        if (std::isfinite(v) && v > 0) {
            return v;
        }
    } catch (const YAML::Exception&) {
    }
    return std::nullopt;
}

// The coefficient of variation of the workload's send gaps, for the held-back rule's noise allowance
// (run_status.h kSendNoiseSigmas): 1 for Poisson (the default of every open-loop type), 1/√burstiness for gamma
// (bench_serve's burstiness ≠ 1, or `arrival: gamma`), 0 for constant spacing.
double arrival_cv(const YAML::Node& workload) {
    const YAML::Node type = workload["type"];
    const bool bench_serve = type && type.IsScalar() && type.Scalar() == "bench_serve";
    const YAML::Node arrival = workload["arrival"];
    const std::string process = arrival && arrival.IsScalar() ? arrival.Scalar() : "poisson";
    if (process == "constant") {
        return 0.0;
    }
    const YAML::Node b = workload["burstiness"];
    if ((bench_serve || process == "gamma") && b && b.IsScalar()) {
        try {
            const double k = b.as<double>();
            if (std::isinf(k)) {
                return 0.0;  // bench_serve: an infinite shape is constant spacing
            }
            if (k > 0) {
                return 1.0 / std::sqrt(k);
            }
        } catch (const YAML::Exception&) {
        }
    }
    return 1.0;
}

// A duration in seconds as a message prints it, in the unit it was likely written in: below a second in ms
// ("10 ms", not "0 s"), else seconds with thousands separators ("86,400 s") or, with a fraction, "1.5 s".
std::string duration_text(double seconds) {
    if (seconds > 0 && seconds < 1) {
        return fmt::format("{:g} ms", seconds * 1e3);
    }
    if (seconds == std::floor(seconds)) {
        return thousands(static_cast<std::int64_t>(seconds)) + " s";
    }
    return fmt::format("{:g} s", seconds);
}

}  // namespace

std::int64_t count_good_requests(const std::vector<metrics::RequestRecord>& requests, const GoodputConfig& g) {
    std::int64_t good = 0;
    for (const auto& r : requests) {
        const bool ok = (!g.ttft_ms || r.ttft_ms <= *g.ttft_ms) && (!g.tpot_ms || r.tpot_ms() <= *g.tpot_ms) &&
                        (!g.e2el_ms || r.e2e_ms <= *g.e2el_ms);
        good += ok ? 1 : 0;
    }
    return good;
}

void assess_result(ExperimentResult& r) {
    if (r.order_only) {
        return;
    }
    const auto& s = r.sim.summary;
    const ExperimentConfig& c = r.config;
    if (c.goodput.any()) {
        r.num_requests_good = count_good_requests(s.requests, c.goodput);
        if (s.duration_s > 0) {
            r.request_goodput_rps = static_cast<double>(*r.num_requests_good) / s.duration_s;
        }
    }
    r.status = RunStatus::kOk;
    r.status_reason.clear();
    const auto& rej = s.rejections;
    std::string rejected_why;
    std::string max_time_why;
    if (s.num_requests_rejected > 0) {
        std::string why;
        if (rej.longer_than_max_model_len > 0 &&
            rej.largest_prompt_tokens + rej.largest_output_tokens <= r.plan.max_model_len) {
            // The frontend's one other refusal counted here: an empty prompt (the replica refuses prompt_tokens == 0
            // with the same reason; vLLM's v1 Processor._validate_model_input). The workload readers refuse a
            // workload that can draw one, so this is for the readers that cannot know in advance.
            why = fmt::format("{} with an empty prompt (vLLM refuses an empty prompt)",
                              thousands(rej.longer_than_max_model_len));
        } else if (rej.longer_than_max_model_len > 0) {
            why = fmt::format("{} longer than max_model_len: prompt + output up to {} + {} = {} > max_model_len {}",
                              thousands(rej.longer_than_max_model_len), thousands(rej.largest_prompt_tokens),
                              thousands(rej.largest_output_tokens),
                              thousands(rej.largest_prompt_tokens + rej.largest_output_tokens),
                              thousands(r.plan.max_model_len));
        }
        if (rej.never_fits_kv_cache > 0) {
            why += fmt::format("{}{} whose prompt can never fit the KV cache ({} tokens)", why.empty() ? "" : "; ",
                               thousands(rej.never_fits_kv_cache), thousands(r.plan.kv_cache_tokens));
        }
        rejected_why = fmt::format("{} of {} requests rejected: {}", thousands(s.num_requests_rejected),
                                   thousands(s.num_requests_sent), why);
        r.warnings.push_back(rejected_why);
    }
    if (r.sim.hit_max_time) {
        max_time_why = fmt::format(
            "stopped at max_time {}{} before the workload was done, with {} requests unfinished; the figures "
            "cover only the {} that finished",
            duration_text(c.max_time_s),
            c.max_time_given ? "" : " (the default; set the scenario key max_time)", thousands(r.sim.num_unfinished),
            thousands(s.num_requests_finished));
        r.warnings.push_back(max_time_why);
    }
    if (!r.profile_mismatch.empty()) {
        r.warnings.push_back("allow_profile_mismatch: " + r.profile_mismatch);
    }
    // A pool given by engine.kv_cache_memory_bytes is used as written (vLLM skips the memory profile), and the
    // planner allows pools past the card for what-if studies (sim/memory/memory_plan.cpp); say when vLLM itself
    // could not allocate it: the KV tensors and the weights do not fit the GPU.
    if (const auto& p = r.plan;
        p.kv_cache_memory_overridden && p.gpu_memory_bytes > 0 && p.kv_cache_memory_bytes + p.weight_bytes > p.gpu_memory_bytes) {
        r.warnings.push_back(fmt::format(
            "engine.kv_cache_memory_bytes: a {:.1f} GiB pool and {:.1f} GiB of weights exceed the GPU's {:.1f} GiB; "
            "vLLM could not allocate it, so these figures are a what-if (leave the key out for the pool vLLM's "
            "memory profile would give)",
            static_cast<double>(p.kv_cache_memory_bytes) / kGiB, static_cast<double>(p.weight_bytes) / kGiB,
            static_cast<double>(p.gpu_memory_bytes) / kGiB));
    }
    // Prefix caching that can never hit (vLLM issue #48401, NemotronH Super: attention block 8,320 > max_model_len
    // 4,096, 0 hits, no warning from vLLM; #48402 would add one). Only full blocks are cached and a hit stops one
    // token short of the prompt (KVCacheManager.get_computed_blocks), so a hit needs a prompt of at least B + 1
    // tokens, and a prompt is at most max_model_len − 1 (one output token must fit): no hit when B > max_model_len − 2.
    if (r.plan.enable_prefix_caching && r.plan.block_size > r.plan.max_model_len - 2) {
        r.warnings.push_back(fmt::format(
            "prefix caching can never hit: the attention block ({} tokens) leaves no room for a cached block and a "
            "token after it within max_model_len {} (vLLM caches full blocks only and does not warn, vLLM issue "
            "#48401); raise max_model_len to at least {} or lower the block size",
            thousands(r.plan.block_size), thousands(r.plan.max_model_len), thousands(r.plan.block_size + 2)));
    }
    // The status: the first rule that applies (docs/OUTPUTS.md "Status", tools/app/run_status.h); its reason is the
    // status_reason and, as every other rule that applies, a warning.
    auto set_status = [&](RunStatus status, const std::string& reason) {
        if (r.status == RunStatus::kOk) {
            r.status = status;
            r.status_reason = reason;
        }
    };
    if (s.num_requests_sent == 0) {
        const std::string why = fmt::format(
            "no request was sent in the measured window (after the warm-up of {}): nothing was measured",
            duration_text(c.warmup_s));
        set_status(RunStatus::kNoRequestsMeasured, why);
        r.warnings.insert(r.warnings.begin(), why);
        return;
    }
    if (s.num_requests_rejected == s.num_requests_sent) {
        set_status(RunStatus::kRejected, rejected_why);
        return;
    }
    if (r.sim.hit_max_time) {
        set_status(RunStatus::kTruncatedByMaxTime, max_time_why);
        return;
    }
    StatusInputs in;
    in.warmup_s = c.warmup_s;
    in.offered_rps = r.offered_rps;
    in.arrival_cv = arrival_cv(c.workload);
    in.all_at_once = r.offered_all_at_once;
    std::string timed_out;
    if (s.num_requests_timed_out > 0) {
        timed_out = fmt::format(
            "{} of {} requests timed out after {}: their clients gave up (workload.request_timeout), so they are "
            "in no latency, token or throughput figure; the figures cover the {} that finished",
            thousands(s.num_requests_timed_out), thousands(s.num_requests_sent),
            c.workload["request_timeout"] ? c.workload["request_timeout"].Scalar() : std::string("?"),
            thousands(s.num_requests_finished));
        r.warnings.push_back(timed_out);
    }
    bool timed_out_placed = timed_out.empty();
    for (const StatusFinding& f : load_findings(s, r.sim.timeseries, in)) {
        // timed_out ranks below overloaded and above too_short.
        if (!timed_out_placed && f.status == RunStatus::kTooShort) {
            set_status(RunStatus::kTimedOut, timed_out);
            timed_out_placed = true;
        }
        set_status(f.status, f.reason);
        r.warnings.push_back(fmt::format("{}: {}", run_status_name(f.status), f.reason));
    }
    if (!timed_out_placed) {
        set_status(RunStatus::kTimedOut, timed_out);
    }
}

bool workload_times_out(const ExperimentConfig& c) {
    const YAML::Node& w = c.workload;
    return w.IsMap() && w["request_timeout"];
}

namespace {

// What keeping a state costs (engine::StateSnapshotCost), the same for every hybrid scheme whatever the step cost
// model (issue 44; docs/HYBRID-POLICIES.md "What a snapshot costs"): a copy is one read and one write of this rank's
// state at the GPU file's bandwidth × bandwidth_efficiency — on an H200 that gives 0.0252 ms for Qwen3.5-4B's
// 51.5 MB against 0.0247 ms measured by the calibration sweep's gdn_snapshot_copy (calibration/profiles/h200/points/
// Qwen3.5-4B/snapshot.csv, 6.33 ms for 256); a cut off the scan's grid costs one more chunk of the scan at the
// roofline's GDN / Mamba rates. The chunk: Mamba2's chunk_size, else fla's 64 (Gated DeltaNet).
engine::StateSnapshotCost state_snapshot_cost(const PreparedExperiment& p, const cache::MemoryPlan& plan) {
    engine::StateSnapshotCost cost;
    cost.copy_ms = 1e3 * 2.0 * static_cast<double>(plan.state_bytes_per_sequence) /
                   (p.gpu.memory_bandwidth_bytes_per_s * p.gpu.bandwidth_efficiency);
    for (const auto& layer : p.model.layers) {
        if (const auto* m2 = std::get_if<models::Mamba2Mixer>(&layer.mixer); m2 != nullptr && m2->chunk_size > 0) {
            cost.kernel_chunk_tokens = m2->chunk_size;
            break;
        }
    }
    engine::RooflineParams params = roofline_params(p.gpu);
    params.tensor_parallel_size = plan.tensor_parallel_size;
    cost.kernel_chunk_ms =
        engine::RooflineCostModel(p.model, plan.kv_cache_dtype, params).scan_chunk_ms(cost.kernel_chunk_tokens);
    return cost;
}

// The fused-MoE compiles a replica may wait for (sim/engine/fused_moe_jit.h): an MoE model whose routed experts
// run vLLM's Triton fused_moe kernel — unquantized experts on an NVIDIA GPU (vLLM's select_unquantized_moe_backend
// picks TRITON there), without expert parallelism (whose all-to-all backends batch tokens across ranks) — and only
// when engine.triton_jit_compile_ms is given and > 0: by default a run is a server in steady state, which has
// compiled every variant it meets; `servesim validate` sets it for the freshly started servers it replays
// (docs/HOST-WORK.md "Triton compiles mid-serving").
std::optional<engine::FusedMoeJit> fused_moe_jit(const PreparedExperiment& p, const cache::MemoryPlan& plan) {
    const double compile_ms = p.config.engine.triton_jit_compile_ms.value_or(0);
    if (compile_ms <= 0 || p.model.quantization || p.gpu.vendor != "nvidia" || p.config.engine.enable_expert_parallel) {
        return std::nullopt;
    }
    for (const auto& layer : p.model.layers) {
        if (const auto* moe = std::get_if<models::MoeMlp>(&layer.mlp); moe != nullptr && moe->num_experts > 0) {
            return engine::FusedMoeJit(compile_ms, moe->num_experts, moe->num_experts_per_tok,
                                       cuda_graph_sizes(p.config, plan), plan.max_num_seqs,
                                       plan.max_num_batched_tokens);
        }
    }
    return std::nullopt;
}

// The cluster run's settings for a prepared experiment (one pool's engines with cluster.disaggregation).
// One replica's engine settings from its memory plan.
engine::ReplicaConfig replica_config(const PreparedExperiment& p, const cache::MemoryPlan& plan) {
    engine::ReplicaConfig rc;
    rc.kv_cache = plan.kv_cache_config();
    if (plan.enable_prefix_caching && plan.state_bytes_per_sequence > 0) {
        rc.snapshot_cost = state_snapshot_cost(p, plan);
        rc.mamba_state_every_block = !plan.hybrid_state && plan.mamba_cache_mode == cache::MambaCacheMode::kAll;
        if (rc.kv_cache.hybrid_state) {
            rc.kv_cache.hybrid_state->kernel_chunk_tokens = rc.snapshot_cost.kernel_chunk_tokens;
        }
    }
    rc.check_invariants = p.config.check_invariants;
    // vLLM turns async scheduling off for spec methods other than EAGLE/MTP/ngram_gpu (VllmConfig.__post_init__):
    // plain ngram and draft_model run synchronously (vLLM keeps it for draft_model only when --async-scheduling is
    // given explicitly, which servesim's boolean key cannot tell from its default: docs/SPECULATIVE-DECODING.md).
    const bool sync_spec = p.speculative && (p.speculative->method == engine::SpeculativeMethod::kNgram ||
                                             p.speculative->method == engine::SpeculativeMethod::kDraftModel);
    rc.async_scheduling = p.config.engine.async_scheduling && !sync_spec;
    rc.seed = p.config.seed;
    rc.speculative = p.speculative;
    rc.fused_moe_jit = fused_moe_jit(p, plan);
    // SpeculativeConfig.use_eagle (EAGLE, EAGLE-3, MTP): prefix hits drop their last full-attention block.
    rc.kv_cache.use_eagle = p.speculative && p.speculative->uses_head();
    auto& s = rc.scheduler;
    s.max_num_batched_tokens = plan.max_num_batched_tokens;
    s.max_num_seqs = plan.max_num_seqs;
    s.max_model_len = plan.max_model_len;
    s.enable_chunked_prefill = p.config.engine.enable_chunked_prefill;
    s.long_prefill_token_threshold = p.config.engine.long_prefill_token_threshold;
    s.scheduler_reserve_full_isl = p.config.engine.scheduler_reserve_full_isl;
    s.block_size = plan.block_size;
    s.mamba_align = plan.enable_prefix_caching && plan.mamba_cache_mode == cache::MambaCacheMode::kAlign &&
                    plan.mamba_block_size > 0;
    s.vllm_version = cache::parse_vllm_version(p.config.engine.vllm_version);
    s.async_scheduling = rc.async_scheduling;
    if (p.speculative) {
        s.num_spec_tokens = p.speculative->num_speculative_tokens;
        s.num_lookahead_tokens = p.speculative->num_lookahead_tokens();
        s.use_eagle = p.speculative->uses_head();
    }
    if (p.config.engine.kv_offloading_size_gib) {
        rc.offload = offload_config(p.config.engine, plan, p.gpu);
    }
    return rc;
}

cluster::SimulationConfig simulation_config(const PreparedExperiment& p) {
    cluster::SimulationConfig sc;
    sc.request_timeouts = workload_times_out(p.config);
    sc.num_replicas = p.config.replicas;
    sc.warmup_end = core::SimTime::from_s(p.config.warmup_s);
    sc.max_time = core::SimTime::from_s(p.config.max_time_s);
    sc.exact_percentiles = p.config.exact_percentiles;
    sc.keep_request_records = p.config.keep_request_records || p.config.goodput.any();
    sc.keep_request_itls = p.config.keep_request_itls;
    sc.stop_when_waiting_exceeds = p.config.stop_when_waiting_exceeds;
    sc.request_path = p.config.request_path;
    sc.replica = replica_config(p, p.plan);
    for (const cache::MemoryPlan& plan : p.replica_plans) {  // replicas on GPUs of unequal memory
        sc.replica_configs.push_back(replica_config(p, plan));
    }
    sc.topology = p.config.topology;
    sc.gpus_per_replica = p.plan.tensor_parallel_size * p.plan.pipeline_parallel_size;
    if (p.config.kv_connector) {
        sc.kv_store = kv_store_config(p);
    }
    return sc;
}

// The scenario's router settings with what only the run knows: each replica's KV blocks (the approximate index's
// capacity and Dynamo's active-block scale), per replica when their GPUs differ.
cluster::RouterOptions router_options_for(cluster::RouterOptions o, const cluster::SimulationConfig& sc) {
    o.replica_capacity_blocks = sc.replica.kv_cache.num_gpu_blocks;
    for (const auto& rc : sc.replica_configs) {
        o.replica_capacities_blocks.push_back(rc.kv_cache.num_gpu_blocks);
    }
    return o;
}

cluster::SimulationResult run_disaggregated(const PreparedExperiment& p, const cluster::SimulationConfig& common,
                                            workloads::Workload& workload) {
    const PreparedExperiment& pp = *p.prefill_pool;
    const PreparedExperiment& dp = *p.decode_pool;
    const cluster::SimulationConfig prefill_sc = simulation_config(pp);
    const cluster::SimulationConfig decode_sc = simulation_config(dp);
    cluster::DisaggregationConfig d;
    d.prefill_replica = prefill_sc.replica;
    d.decode_replica = decode_sc.replica;
    d.prefill_replicas = prefill_sc.replica_configs;
    d.decode_replicas = decode_sc.replica_configs;
    d.num_prefill = pp.config.replicas;
    d.num_decode = dp.config.replicas;
    d.prefill_tp = pp.plan.tensor_parallel_size;
    d.decode_tp = dp.plan.tensor_parallel_size;
    d.prefill_first_gpu = std::max(0, p.config.disaggregation->prefill.first_gpu);
    d.decode_first_gpu = p.config.disaggregation->decode.first_gpu;
    if (!p.config.disaggregation->proxy.empty()) {
        d.proxy_vertex = p.config.topology->find(p.config.disaggregation->proxy);
    }
    // One block id across all KV tensors of every decode rank, as offload_config counts a CPU block.
    d.bytes_per_block = static_cast<double>(dp.plan.bytes_per_block()) * dp.plan.tensor_parallel_size;
    auto router = [&](const cluster::SimulationConfig& pool) {
        return cluster::make_router(p.config.router, router_options_for(p.config.router_options, pool));
    };
    cluster::DisaggregatedSimulation sim(common, d, *pp.cost_model, *dp.cost_model, workload, router(prefill_sc),
                                         router(decode_sc));
    return sim.run();
}

}  // namespace

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
    r.cost_model_source = p.config.cost_model;
    r.profile_mismatch = p.profile_mismatch;
    r.offered_rps = offered_rate(p.config.workload);
    {
        const YAML::Node& w = p.config.workload;
        const bool bench_serve = w["type"] && w["type"].IsScalar() && w["type"].Scalar() == "bench_serve";
        const YAML::Node rate = w[bench_serve ? "request_rate" : "rate"];
        const std::string text = rate && rate.IsScalar() ? rate.Scalar() : "";
        // bench_serve's request_rate defaults to inf, as vllm bench serve's --request-rate.
        r.offered_all_at_once = text == "inf" || text == ".inf" || text == "Inf" || text == ".Inf" ||
                                (bench_serve && !rate && !w["ramp_up_strategy"]);
    }
    r.plan = p.plan;

    auto workload = workloads::make_workload(YamlMap(p.config.workload, p.config.file, "workload"), p.config.seed);
    r.workload = workload->describe();

    cluster::SimulationConfig sc = simulation_config(p);
    if (p.prefill_pool) {
        r.sim = run_disaggregated(p, sc, *workload);
        r.gpu_name = fmt::format("prefill {}×{} TP{}, decode {}×{} TP{}", p.prefill_pool->config.replicas,
                                 p.prefill_pool->gpu.name, p.prefill_pool->plan.tensor_parallel_size,
                                 p.decode_pool->config.replicas, p.decode_pool->gpu.name,
                                 p.decode_pool->plan.tensor_parallel_size);
        r.plan = p.decode_pool->plan;
        assess_result(r);
        return r;
    }
    cluster::Simulation sim(sc, *p.cost_model, *workload,
                            cluster::make_router(p.config.router, router_options_for(p.config.router_options, sc)));
    r.sim = sim.run();
    if (p.order_only_engine_replay) {
        // Reported as order-only (tools/app/output.cpp): hit counters in tokens, the pool, the state pool's figures.
        const auto& s = r.sim.summary;
        cache::OrderOnlyResult o;
        o.block_size_tokens = p.plan.block_size;
        o.capacity_tokens = p.plan.kv_cache_tokens;
        o.num_cache_blocks = p.plan.num_gpu_blocks - 1;
        o.num_requests = s.num_requests_sent;
        o.prefix_cache_queries = s.prefix_cache_queries;
        o.prefix_cache_hits = s.prefix_cache_hits;
        r.order_only = o;
        r.config.order_only = true;
        r.workload = "order-only replay through the engine (one request at a time, 1 output token) of " +
                     p.config.workload["trace"].as<std::string>();
        return r;
    }
    assess_result(r);
    return r;
}

std::vector<const ExperimentResult*> runs_of(const ExperimentResult& point) {
    std::vector<const ExperimentResult*> runs;
    if (point.replicate_runs.size() > 1) {
        for (const auto& run : point.replicate_runs) {
            runs.push_back(&run);
        }
    } else {
        runs.push_back(&point);
    }
    return runs;
}

std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                              const std::function<void(int, int)>& on_done) {
    return run_experiments(configs, jobs, on_done, RunOptions{});
}

std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                              const std::function<void(int, int)>& on_done, const RunOptions& options) {
    // `replicates: N`: run i of an experiment uses seed + i (i = 0 … N−1); the runs are gathered back in order below.
    std::vector<PreparedExperiment> prepared;
    std::vector<std::size_t> first_run;  // index in `prepared` of each config's first run
    OrderOnlyTraces order_only_traces;
    for (const auto& c : configs) {
        first_run.push_back(prepared.size());
        const int n = c.order_only ? 1 : std::max(1, c.replicates);
        for (int i = 0; i < n; ++i) {
            ExperimentConfig run = c;
            run.seed = c.seed + static_cast<std::uint64_t>(i);
            prepared.push_back(c.order_only ? prepare_order_only(run, order_only_traces) : prepare_experiment(run));
        }
    }
    // The runs go to the executor (tools/app/executor.h); runs already in the partial-results file are read back.
    LocalExecutor local;
    Executor& executor = options.executor != nullptr ? *options.executor : local;
    if (options.max_memory_bytes) {
        const MemoryProjection projection = project_memory(prepared, jobs);
        if (options.memory_log != nullptr && executor.is_root()) {
            *options.memory_log << "servesim: " << projection_line(projection, *options.max_memory_bytes) << "\n";
        }
        check_memory_projection(projection, *options.max_memory_bytes);
    }
    std::vector<ExperimentResult> results(prepared.size());
    std::vector<std::size_t> todo;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        if (options.partial != nullptr && executor.is_root() && options.partial->find(prepared[i].config, results[i])) {
            results[i].config = prepared[i].config;
            results[i].plan = prepared[i].plan;
        } else {
            todo.push_back(i);
        }
    }
    int done = static_cast<int>(prepared.size() - todo.size());
    executor.run(prepared, todo, jobs, results, [&](std::size_t i) {
        if (options.partial != nullptr) {
            options.partial->append(prepared[i].config, results[i]);
        }
        ++done;
        if (on_done) {
            on_done(done, static_cast<int>(prepared.size()));
        }
    });
    if (options.results_on_every_rank) {
        executor.share(prepared, results);
    } else if (!executor.is_root()) {
        return {};
    }
    std::vector<ExperimentResult> gathered;
    gathered.reserve(configs.size());
    for (std::size_t k = 0; k < configs.size(); ++k) {
        const std::size_t begin = first_run[k];
        const std::size_t end = k + 1 < configs.size() ? first_run[k + 1] : results.size();
        if (end - begin == 1) {
            gathered.push_back(std::move(results[begin]));
            continue;
        }
        ExperimentResult g = results[begin];
        g.config.seed = configs[k].seed;
        for (std::size_t i = begin; i < end; ++i) {
            g.replicate_runs.push_back(std::move(results[i]));
        }
        if (configs[k].workload["seed"]) {
            // bench_serve and multi_turn_bench take the tool's own --seed as workload.seed, which pins their draws.
            g.replicate_runs.front().warnings.push_back(fmt::format(
                "workload.seed is set: the {} replicates draw the same requests (only the scenario's seed varies); "
                "remove workload.seed to vary them",
                end - begin));
        }
        gathered.push_back(std::move(g));
    }
    return gathered;
}

}  // namespace servesim::app
