// Building and running experiments; see experiment.h.
#include "tools/app/experiment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
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
#include "sim/cache/hybrid_state_plan.h"
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

std::string profile_weight_dtype_for(const models::ModelSpec& model) {
    if (!model.quantization) {
        return "bf16";
    }
    const models::WeightQuantization& q = *model.quantization;
    // An ignore list of only `lm_head` (Qwen3-*-FP8's modules_to_not_convert) changes nothing: vLLM's fp8 method
    // never quantizes the LM head (ParallelLMHead takes no quant method unless lm_head_quantized).
    const bool ignores_only_lm_head = q.ignore == std::vector<std::string>{"lm_head"};
    if (q.experts_only || !(q.ignore.empty() || ignores_only_lm_head) || q.lm_head_quantized || q.rules.empty()) {
        return "mixed (" + q.description + ")";
    }
    // Two calibrated fp8 recipes (kernels/gemm_fp8.cu): per-tensor/per-channel W8A8 ("fp8") and the 128×128
    // block-scaled one of DeepSeek-V3 and the Qwen3 FP8 checkpoints ("fp8-block", vLLM's W8A8BlockFp8LinearOp).
    std::string recipe;
    for (const models::QuantRule& r : q.rules) {
        const models::QuantScheme& s = r.scheme;
        const bool fp8_w8a8 = s.weight_bits == 8 && s.float_weights && s.activations == models::ActivationQuant::kFp8;
        const bool per_tensor_or_channel = s.granularity == models::ScaleGranularity::kTensor ||
                                           s.granularity == models::ScaleGranularity::kChannel;
        const bool block128 = s.granularity == models::ScaleGranularity::kBlock && s.block_n == 128 && s.block_k == 128;
        if (!fp8_w8a8 || !(per_tensor_or_channel || block128) || r.targets != std::vector<std::string>{"Linear"}) {
            return q.description;
        }
        const std::string this_recipe = block128 ? "fp8-block" : "fp8";
        if (!recipe.empty() && recipe != this_recipe) {
            return q.description;
        }
        recipe = this_recipe;
    }
    return recipe;
}

models::ModelSpec resolve_engine_model(const std::string& model, const EngineSettings& engine) {
    return models::apply_engine_quantization(models::resolve_model(model), engine.quantization, engine.dtype);
}

cache::MemoryPlanRequest memory_plan_request(const EngineSettings& e, const calibration::GpuSpec& gpu,
                                             int data_parallel_size, std::int64_t gpu_memory_bytes) {
    cache::MemoryPlanRequest r;
    r.gpu_memory_bytes = gpu_memory_bytes > 0 ? gpu_memory_bytes : gpu.memory_bytes;
    // EngineArgs.get_batch_defaults: ≥ 70 GiB and not an A100 → 8192 / 1024 (vllm-v1-behaviour.md §4.6); it reads
    // the device's total memory, so a topology's GPU memory decides it.
    r.gpu_is_large_for_defaults = r.gpu_memory_bytes >= 70LL * 1024 * 1024 * 1024 && !gpu.is_a100;
    r.gpu_compute_capability = gpu.compute_capability;
    r.vllm_version = cache::parse_vllm_version(e.vllm_version);
    r.gpu_memory_utilization = e.gpu_memory_utilization;
    r.kv_cache_dtype_fp8 = e.kv_cache_dtype_fp8;
    r.block_size = e.block_size;
    r.enable_prefix_caching = e.enable_prefix_caching;
    r.mamba_cache_mode = e.mamba_cache_mode;
    r.prefix_cache_retention_interval = e.prefix_cache_retention_interval;
    r.prefix_match_unit = e.prefix_match_unit;
    r.max_model_len = e.max_model_len;
    r.max_num_batched_tokens = e.max_num_batched_tokens;
    r.max_num_seqs = e.max_num_seqs;
    r.kv_cache_memory_bytes = e.kv_cache_memory_bytes;
    r.enable_chunked_prefill = e.enable_chunked_prefill;
    r.tensor_parallel_size = e.tensor_parallel_size;
    r.pipeline_parallel_size = e.pipeline_parallel_size;
    // FusedMoEParallelConfig.make: with --enable-expert-parallel, ep_size = tp_size × dp_size.
    r.expert_parallel_size = e.enable_expert_parallel ? e.tensor_parallel_size * std::max(1, data_parallel_size) : 1;
    r.skip_mm_profiling = e.skip_mm_profiling;
    if (e.enforce_eager) {
        r.cudagraph_memory_bytes = 0;  // cudagraph_mode NONE: nothing captured, profile_cudagraph_memory not run
    }
    return r;
}

// The engine's CUDA-graph capture sizes from its keys (VllmConfig._set_cudagraph_sizes): none with enforce_eager;
// the explicit list; vLLM's ladder up to max_cudagraph_capture_size; by default up to min(2·max_num_seqs, 512,
// max_num_batched_tokens). vLLM refuses a list whose largest size is not the max also given.
engine::CudaGraphSizes cuda_graph_sizes(const ExperimentConfig& config, const cache::MemoryPlan& plan) {
    const EngineSettings& e = config.engine;
    if (e.cudagraph_capture_sizes && e.max_cudagraph_capture_size &&
        *std::max_element(e.cudagraph_capture_sizes->begin(), e.cudagraph_capture_sizes->end()) !=
            *e.max_cudagraph_capture_size) {
        throw ConfigError(fmt::format(
            "{}: experiment '{}': engine.max_cudagraph_capture_size ({}) must equal the largest of "
            "engine.cudagraph_capture_sizes ({}) when both are given, as vLLM requires; give one of them",
            config.file, config.name, *e.max_cudagraph_capture_size,
            *std::max_element(e.cudagraph_capture_sizes->begin(), e.cudagraph_capture_sizes->end())));
    }
    if (e.enforce_eager) {
        return {};
    }
    if (e.cudagraph_capture_sizes) {
        return engine::CudaGraphSizes::from_list(*e.cudagraph_capture_sizes);
    }
    return engine::CudaGraphSizes(static_cast<int>(e.max_cudagraph_capture_size.value_or(
        std::min<std::int64_t>({2 * plan.max_num_seqs, 512, plan.max_num_batched_tokens}))));
}

// Host work constants: the priors of docs/HOST-WORK.md, or the values a calibration fitted (engine keys).
engine::HostWorkParams host_work_params(const EngineSettings& e) {
    engine::HostWorkParams h;
    if (e.host_step_us) {
        h.step_us = *e.host_step_us;
    }
    if (e.host_per_request_us) {
        h.per_request_us = *e.host_per_request_us;
    }
    if (e.host_exposed_us) {
        h.exposed_us = *e.host_exposed_us;
    }
    return h;
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

cluster::KvStoreConfig kv_store_config(const PreparedExperiment& p) {
    const cluster::KvConnectorSettings& k = *p.config.kv_connector;
    auto fail = [&](const std::string& msg) { throw ConfigError(k.file, k.line, k.key, msg); };
    if (p.config.engine.kv_offloading_size_gib) {
        fail("one KV connector per engine: engine.kv_offloading_size (the OffloadingConnector) or "
             "cluster.kv_connector, not both");
    }
    for (const auto& g : p.plan.groups) {
        if (g.kind != cache::KvGroupKind::kFullAttention) {
            fail("a shared KV store is modelled for full-attention models only; '" + p.model.name +
                 "' has Mamba or sliding-window groups");
        }
    }
    // One block id across all KV tensors of every tensor-parallel rank, as offload_config counts a CPU block.
    const double bytes_per_block =
        static_cast<double>(p.plan.page_size_bytes) * p.plan.group_size * p.plan.tensor_parallel_size;
    return cluster::make_kv_store_config(k, p.config.topology.get(), p.plan.block_size, bytes_per_block,
                                         p.config.replicas, p.plan.tensor_parallel_size * p.plan.pipeline_parallel_size);
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

namespace {

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

}  // namespace

namespace {

// A profile's curves are one model on one GPU: costing another model or GPU with them is refused unless the
// scenario says `allow_profile_mismatch: true` (then the returned text is printed with the results). The tensor-
// parallel size is checked by ProfileCostModel and always refused: the curves are one rank's shapes.
// A checkpoint of the profiled model under another name (a quantized release's config.json, such as
// Qwen3-8B-FP8) is that model when its layers, widths and vocabulary equal the catalog model the profile names;
// its weight format is checked on its own (profile_weight_dtype_for).
bool same_architecture(const std::string& catalog_name, const models::ModelSpec& model) {
    models::ModelSpec profiled;
    try {
        profiled = models::resolve_model(catalog_name);
    } catch (const ConfigError&) {
        return false;
    }
    models::ModelSpec ran = model;
    for (models::ModelSpec* m : {&profiled, &ran}) {
        m->name.clear();
        m->quantization.reset();
        m->max_position_embeddings = 0;
    }
    return profiled == ran;
}

std::string check_profile_matches(const calibration::HardwareProfile& profile, const ExperimentConfig& config,
                                  const models::ModelSpec& model, const calibration::GpuSpec& gpu) {
    std::vector<std::string> diffs;
    if (profile.model != model.name && !same_architecture(profile.model, model)) {
        diffs.push_back(fmt::format("model: the profile was measured for '{}', the experiment runs '{}'", profile.model,
                                    model.name));
    }
    std::string profile_gpu;
    try {
        profile_gpu = calibration::find_gpu(profile.gpu).name;
    } catch (const ConfigError&) {
        profile_gpu = profile.gpu;
    }
    if (profile_gpu != gpu.name) {
        diffs.push_back(
            fmt::format("gpu: the profile was measured on '{}', the experiment runs on '{}'", profile.gpu, gpu.name));
    }
    std::string joined;
    for (const auto& d : diffs) {
        joined += (joined.empty() ? "" : "; ") + d;
    }
    if (!diffs.empty() && !config.allow_profile_mismatch) {
        throw ConfigError(fmt::format("cost_model {}: {} (to reuse it on purpose, set the scenario key "
                                      "`allow_profile_mismatch: true` or --set allow_profile_mismatch=true)",
                                      config.cost_model, joined));
    }
    return joined;
}

}  // namespace

engine::MeasuredParams measured_params(const calibration::GpuSpec& gpu, const engine::RooflineParams& roofline,
                                       std::int64_t max_num_batched_tokens) {
    // The GPU's own table, else the nearest measured GPU's (same vendor, then nearest compute capability, then
    // nearest memory bandwidth), whose efficiencies move onto this GPU's datasheet (docs/COST-MODEL.md).
    const auto& tables = calibration::kernel_table_catalog();
    if (tables.empty()) {
        throw ConfigError("cost_model measured: no kernel table is built in (calibration/kernels/*.yaml holds none); "
                          "use cost_model: roofline or a calibrated profile");
    }
    engine::MeasuredParams m;
    m.roofline = roofline;
    m.target = calibration::KernelRoof::of(gpu);
    m.max_table_tokens = max_num_batched_tokens;
    const calibration::KernelTable* own = calibration::find_kernel_table(gpu);
    if (own != nullptr) {
        m.table = own;
        m.table_roof = m.target;
        m.table_gpu = gpu.name;
        return m;
    }
    std::tuple<int, int, double> best_score{};
    for (const auto& t : tables) {
        calibration::GpuSpec measured;
        try {
            measured = calibration::find_gpu(t.gpu);
        } catch (const ConfigError&) {
            const auto& cat = calibration::gpu_catalog();
            const auto it = std::find_if(cat.begin(), cat.end(), [&](const calibration::GpuSpec& g) {
                return calibration::find_kernel_table(g) == &t;
            });
            if (it == cat.end()) {
                throw ConfigError(fmt::format("{}: 'gpu': '{}' names no GPU of the catalog; allowed: {}", t.file,
                                              t.gpu, calibration::gpu_names()));
            }
            measured = *it;
        }
        const std::tuple<int, int, double> score{
            measured.vendor == gpu.vendor ? 0 : 1, std::abs(measured.compute_capability - gpu.compute_capability),
            std::fabs(std::log(measured.memory_bandwidth_bytes_per_s / gpu.memory_bandwidth_bytes_per_s))};
        if (m.table == nullptr || score < best_score) {
            best_score = score;
            m.table = &t;
            m.table_roof = calibration::KernelRoof::of(measured);
            m.table_gpu = measured.name;
        }
    }
    return m;
}

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

bool workload_times_out(const ExperimentConfig& c) {
    const YAML::Node& w = c.workload;
    return w.IsMap() && w["request_timeout"];
}

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
    // With a topology (not the disaggregated whole, whose pools are placed and planned each on its own), each
    // replica's memory plan is its GPUs' memory; one plan per distinct memory.
    if (config.topology && !config.disaggregation) {
        place_on_topology(p, first_gpu);
    }
    auto plan_for = [&](std::int64_t gpu_memory_bytes, std::size_t replica) {
        return with_file([&] {
            try {
                cache::MemoryPlan plan = cache::plan_memory(
                    p.model, memory_plan_request(config.engine, p.gpu, config.replicas, gpu_memory_bytes));
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
    if (config.cost_model == "roofline" || config.cost_model == "measured") {
        // The GPU file's figures (host_work_fit.h roofline_params), this replica's parallelism and graphs.
        engine::RooflineParams params = roofline_params(p.gpu);
        params.tensor_parallel_size = p.plan.tensor_parallel_size;
        params.tp_link = tp_link;
        params.custom_all_reduce = !config.engine.disable_custom_all_reduce;
        params.expert_parallel = expert_parallelism;
        params.max_cudagraph_tokens = static_cast<int>(graphs.max_size());
        params.cudagraph_capture_sizes = graphs.sizes();
        params.enforce_eager = !graphs.enabled();
        if (config.cost_model == "roofline") {
            p.cost_model = std::make_unique<engine::RooflineCostModel>(p.model, p.plan.kv_cache_dtype, params);
        } else {
            p.cost_model = with_file([&] {
                return std::make_unique<engine::MeasuredCostModel>(
                    p.model, p.plan.kv_cache_dtype, measured_params(p.gpu, params, p.plan.max_num_batched_tokens));
            });
        }
    } else {
        calibration::HardwareProfile profile =
            with_file([&] { return calibration::read_profile(config.cost_model); });
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
    if (config.engine.speculative_config) {
        // --speculative-config (sim/engine/speculative.h): the drafter's cost wraps the target's GPU time.
        p.speculative = with_file([&] {
            engine::SpeculativeConfig sc = engine::parse_speculative_config(*config.engine.speculative_config);
            engine::resolve_acceptance(sc, config.engine.speculative_acceptance,
                                       config.engine.speculative_mean_acceptance_length.value_or(0), "engine.");
            // NgramProposer's lookup per context token, host time (docs/SPECULATIVE-DECODING.md: measured).
            sc.ngram_ns_per_context_token = config.engine.speculative_ngram_ns_per_context_token.value_or(
                engine::kNgramLookupNsPerContextToken);
            return sc;
        });
        if (p.plan.pipeline_parallel_size > 1) {
            throw ConfigError(fmt::format("{}: experiment '{}': engine.speculative_config with pipeline_parallel_size "
                                          "> 1 is not modelled",
                                          config.file, config.name));
        }
        p.cost_model = std::make_unique<engine::SpeculativeCostModel>(std::move(p.cost_model), *p.speculative,
                                                                      static_cast<int>(p.model.layers.size()) /
                                                                          std::max(1, p.model.blocks_per_decoder_layer));
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

// The cluster run's settings for a prepared experiment (one pool's engines with cluster.disaggregation).
// One replica's engine settings from its memory plan.
engine::ReplicaConfig replica_config(const PreparedExperiment& p, const cache::MemoryPlan& plan) {
    engine::ReplicaConfig rc;
    rc.kv_cache = plan.kv_cache_config();
    if (plan.hybrid_state) {
        rc.state_copy_ms = 1e3 * 2.0 * static_cast<double>(plan.hybrid_state->state_bytes) /
                           p.gpu.memory_bandwidth_bytes_per_s;
    }
    rc.check_invariants = p.config.check_invariants;
    // vLLM turns async scheduling off for spec methods other than EAGLE/MTP/ngram_gpu (VllmConfig.__post_init__):
    // plain ngram runs synchronously.
    const bool sync_spec = p.speculative && p.speculative->method == engine::SpeculativeMethod::kNgram;
    rc.async_scheduling = p.config.engine.async_scheduling && !sync_spec;
    rc.seed = p.config.seed;
    rc.speculative = p.speculative;
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
    d.bytes_per_block = static_cast<double>(dp.plan.page_size_bytes) * dp.plan.group_size * dp.plan.tensor_parallel_size;
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
