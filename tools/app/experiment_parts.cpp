// The pieces prepare_experiment (experiment_prepare.cpp) builds an experiment from: vLLM's memory-plan request, the
// CUDA-graph sizes and host-work constants of the engine keys, the CPU offload tier and the KV connector's store,
// and the cost model's parameters (a profile's fit to the experiment, the measured kernel tables); see
// experiment.h and experiment_parts.h.
#include "tools/app/experiment.h"
#include "tools/app/experiment_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

namespace {

// resolve_speculative without the acceptance (which the memory plan does not read).
std::optional<SpeculativeSetup> resolve_speculative_drafter(const EngineSettings& e, const models::ModelSpec& target) {
    if (!e.speculative_config) {
        return std::nullopt;
    }
    SpeculativeSetup s;
    s.config = engine::parse_speculative_config(*e.speculative_config);
    // NgramProposer's lookup per context token, host time (docs/SPECULATIVE-DECODING.md: measured).
    s.config.ngram_ns_per_context_token =
        e.speculative_ngram_ns_per_context_token.value_or(engine::kNgramLookupNsPerContextToken);
    const int tp = std::max(1, e.tensor_parallel_size);
    if (s.config.draft_tensor_parallel_size != 0 && s.config.draft_tensor_parallel_size != tp) {
        throw ConfigError(fmt::format(
            "speculative_config: key 'draft_tensor_parallel_size': {} with tensor_parallel_size {}; vLLM "
            "allows 1 or the target's, and servesim models only the target's ({}): leave it out or set {}",
            s.config.draft_tensor_parallel_size, tp, tp, tp));
    }
    if (s.config.method == engine::SpeculativeMethod::kDraftModel) {
        models::ModelSpec draft;
        try {
            // SpeculativeConfig builds the draft's ModelConfig with the target's dtype and its own `quantization`
            // (none unless given, which servesim does not read): the checkpoint's quantization_config only.
            draft = models::apply_engine_quantization(models::resolve_model(s.config.draft_model), std::nullopt, e.dtype);
        } catch (const ConfigError& err) {
            throw ConfigError(fmt::format("speculative_config: key 'model': draft model '{}': {}",
                                          s.config.draft_model, err.what()));
        }
        if (draft.vocab_size != target.vocab_size) {
            throw ConfigError(fmt::format(
                "speculative_config: key 'model': draft model '{}' has vocab_size {} and model '{}' {}; vLLM "
                "requires the same vocabulary (SpeculativeConfig.verify_equal_vocab_size_if_draft_model)",
                draft.name, draft.vocab_size, target.name, target.vocab_size));
        }
        const std::int64_t max_len = e.max_model_len.value_or(target.max_position_embeddings);
        if (draft.max_position_embeddings > 0 && max_len > draft.max_position_embeddings) {
            throw ConfigError(fmt::format(
                "speculative_config: key 'model': draft model '{}' handles {} tokens (max_position_embeddings) "
                "and max_model_len is {}; sequences beyond the draft's length are not modelled: set "
                "engine.max_model_len to {} or less",
                draft.name, draft.max_position_embeddings, max_len, draft.max_position_embeddings));
        }
        s.draft_model = std::move(draft);
    }
    s.memory = engine::drafter_memory(s.config, target, s.draft_model ? &*s.draft_model : nullptr, tp);
    return s;
}

}  // namespace

std::optional<SpeculativeSetup> resolve_speculative(const EngineSettings& e, const models::ModelSpec& target) {
    std::optional<SpeculativeSetup> s = resolve_speculative_drafter(e, target);
    if (s) {
        engine::resolve_acceptance(s->config, e.speculative_acceptance,
                                   e.speculative_mean_acceptance_length.value_or(0), "engine.");
    }
    return s;
}

void add_speculative_memory(cache::MemoryPlanRequest& request, const EngineSettings& e,
                            const models::ModelSpec& target) {
    if (const auto s = resolve_speculative_drafter(e, target)) {
        request.drafter = s->memory;
        request.num_speculative_tokens = s->config.num_speculative_tokens;
    }
}

cache::MemoryPlanRequest memory_plan_request(const EngineSettings& e, const calibration::GpuSpec& gpu,
                                             int data_parallel_size, std::int64_t gpu_memory_bytes) {
    cache::MemoryPlanRequest r;
    r.gpu_memory_bytes = gpu_memory_bytes > 0 ? gpu_memory_bytes : gpu.memory_bytes;
    // EngineArgs.get_batch_defaults: ≥ 70 GiB and not an A100 → 8192 / 1024 (docs/VLLM-RULES.md §4.6); it reads
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
        static_cast<double>(plan.bytes_per_block()) * plan.tensor_parallel_size;
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
        static_cast<double>(p.plan.bytes_per_block()) * p.plan.tensor_parallel_size;
    return cluster::make_kv_store_config(k, p.config.topology.get(), p.plan.block_size, bytes_per_block,
                                         p.config.replicas, p.plan.tensor_parallel_size * p.plan.pipeline_parallel_size);
}

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

}  // namespace

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

namespace {

// The GPU a table was measured on: its `gpu` name in the catalog, else the catalog GPU the table is found for.
calibration::GpuSpec measured_on(const calibration::KernelTable& t) {
    try {
        return calibration::find_gpu(t.gpu);
    } catch (const ConfigError&) {
        const auto& cat = calibration::gpu_catalog();
        const auto it = std::find_if(cat.begin(), cat.end(), [&](const calibration::GpuSpec& g) {
            return calibration::find_kernel_table(g) == &t;
        });
        if (it == cat.end()) {
            throw ConfigError(fmt::format("{}: 'gpu': '{}' names no GPU of the catalog; allowed: {}", t.file, t.gpu,
                                          calibration::gpu_names()));
        }
        return *it;
    }
}

// How near a measured GPU is to `gpu`: same vendor first, then compute capability, then memory bandwidth (log).
std::tuple<int, int, double> distance(const calibration::GpuSpec& measured, const calibration::GpuSpec& gpu) {
    return {measured.vendor == gpu.vendor ? 0 : 1, std::abs(measured.compute_capability - gpu.compute_capability),
            std::fabs(std::log(measured.memory_bandwidth_bytes_per_s / gpu.memory_bandwidth_bytes_per_s))};
}

}  // namespace

const calibration::KernelTable* fused_pairs_lender(const calibration::KernelTable& table,
                                                   const calibration::GpuSpec& table_gpu,
                                                   const std::vector<calibration::KernelTable>& tables) {
    // The pairs are one kernel's speed against another's on that GPU's SMs with the tiles vLLM ships for it: a GPU
    // of the same vendor and compute capability runs the same kernels, so its pairs stand in; another architecture's
    // do not (a transfer moves the completed table as a whole, as it moves the H100's own pairs to an A100).
    if (!table.moe_vllm_fused.empty()) {
        return nullptr;
    }
    const calibration::KernelTable* best = nullptr;
    std::tuple<int, int, double> best_distance{};
    for (const auto& t : tables) {
        if (t.moe_vllm_fused.empty()) {
            continue;
        }
        const calibration::GpuSpec measured = measured_on(t);
        if (measured.vendor != table_gpu.vendor || measured.compute_capability != table_gpu.compute_capability) {
            continue;
        }
        if (best == nullptr || distance(measured, table_gpu) < best_distance) {
            best_distance = distance(measured, table_gpu);
            best = &t;
        }
    }
    return best;
}

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
    calibration::GpuSpec table_gpu = gpu;
    if (const calibration::KernelTable* own = calibration::find_kernel_table(gpu); own != nullptr) {
        m.table = own;
    } else {
        std::tuple<int, int, double> best_distance{};
        for (const auto& t : tables) {
            const calibration::GpuSpec measured = measured_on(t);
            if (m.table == nullptr || distance(measured, gpu) < best_distance) {
                best_distance = distance(measured, gpu);
                m.table = &t;
                table_gpu = measured;
            }
        }
    }
    m.table_roof = calibration::KernelRoof::of(table_gpu);
    m.table_gpu = table_gpu.name;
    m.fused_table = fused_pairs_lender(*m.table, table_gpu, tables);
    if (m.fused_table != nullptr) {
        m.fused_table_gpu = measured_on(*m.fused_table).name;
    }
    return m;
}

}  // namespace servesim::app
