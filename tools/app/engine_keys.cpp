// The engine key table and one parser per value kind; see engine_keys.h. Flags and forms follow vLLM's
// EngineArgs.add_cli_args (vllm/engine/arg_utils.py) as of v0.22.
#include "tools/app/engine_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/units.h"
#include "common/yaml_reader.h"
#include "models/quantization_config.h"
#include "sim/cache/hybrid/hybrid_cache_policy.h"
#include "sim/engine/expert_parallel.h"
#include "sim/engine/speculative.h"
#include "sim/memory/memory_plan.h"

namespace servesim::app {
namespace {

constexpr double kMaxInt = 9.0e18;

std::int64_t as_int(const EngineValue& v) { return std::get<std::int64_t>(v); }
double as_double(const EngineValue& v) { return std::get<double>(v); }
bool as_bool(const EngineValue& v) { return std::get<bool>(v); }
const std::string& as_string(const EngineValue& v) { return std::get<std::string>(v); }

// vLLM CacheDType (vllm/config/cache.py): the values servesim models (2-byte or 1-byte KV elements) and the rest.
constexpr std::array<std::string_view, 6> kModelledDtypes = {"auto", "bfloat16", "float16", "fp8", "fp8_e4m3",
                                                             "fp8_e5m2"};
constexpr std::array<std::string_view, 9> kUnmodelledDtypes = {
    "fp8_inc",          "fp8_ds_mla",         "turboquant_k8v4",     "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "int8_per_token_head", "fp8_per_token_head", "nvfp4"};
constexpr std::array<std::string_view, 3> kMambaModes = {"none", "align", "all"};
// vLLM All2AllBackend values (vllm/config/parallel.py) servesim does not model: AMD's MoRI, NIXL-EP, DeepEP v2.
constexpr std::array<std::string_view, 4> kUnmodelledAll2All = {"deepep_v2", "mori_high_throughput",
                                                                 "mori_low_latency", "nixl_ep"};

template <std::size_t N>
std::string join(const std::array<std::string_view, N>& items) {
    std::string out;
    for (auto s : items) {
        out += (out.empty() ? "" : ", ") + std::string(s);
    }
    return out;
}

// Adding a key: one entry here (and its field in EngineSettings).
const EngineKey kEngineKeys[] = {
    {"max_num_seqs", "--max-num-seqs", {ValueKind::Int, 1, 1 << 24},
     "most requests in one step (default: vLLM's for the GPU)",
     [](EngineSettings& s, const EngineValue& v) { s.max_num_seqs = as_int(v); }},
    {"max_num_batched_tokens", "--max-num-batched-tokens", {ValueKind::Tokens, 1, 1 << 30},
     "token budget per step (vLLM's default for the GPU and usage context)",
     [](EngineSettings& s, const EngineValue& v) { s.max_num_batched_tokens = as_int(v); }},
    {"max_model_len", "--max-model-len", {ValueKind::Tokens, 1, 1 << 30, false, 1, true},
     "context limit in tokens (default: the model's max_position_embeddings)",
     [](EngineSettings& s, const EngineValue& v) { s.max_model_len = as_int(v); }},
    {"block_size", "--block-size", {ValueKind::Int, 16, 1 << 20, false, 16},
     "attention block size in tokens, a multiple of 16 (hybrid models raise it to fit the Mamba page)",
     [](EngineSettings& s, const EngineValue& v) { s.block_size = static_cast<int>(as_int(v)); }},
    {"gpu_memory_utilization", "--gpu-memory-utilization", {ValueKind::Number, 0, 1, true},
     "fraction of GPU memory vLLM may use, in (0, 1] (default: the vLLM release's)",
     [](EngineSettings& s, const EngineValue& v) { s.gpu_memory_utilization = as_double(v); }},
    {"kv_cache_memory_bytes", "--kv-cache-memory-bytes", {ValueKind::Bytes, 1, kMaxInt},
     "KV pool size per GPU, replacing the memory profile (e.g. 12GiB, 12G, 12e9)",
     [](EngineSettings& s, const EngineValue& v) { s.kv_cache_memory_bytes = as_int(v); }},
    {"kv_cache_dtype", "--kv-cache-dtype", {ValueKind::KvDtype},
     "auto (the model's dtype), bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2 (1-byte KV)",
     [](EngineSettings& s, const EngineValue& v) { s.kv_cache_dtype_fp8 = as_string(v).starts_with("fp8"); }},
    {"enable_prefix_caching", "--enable-prefix-caching", {ValueKind::Bool},
     "prefix caching (default: on for plain decoders, off for hybrid models)",
     [](EngineSettings& s, const EngineValue& v) { s.enable_prefix_caching = as_bool(v); }},
    {"enable_chunked_prefill", "--enable-chunked-prefill", {ValueKind::Bool}, "chunked prefill (default on)",
     [](EngineSettings& s, const EngineValue& v) { s.enable_chunked_prefill = as_bool(v); }},
    {"long_prefill_token_threshold", "--long-prefill-token-threshold", {ValueKind::Tokens, 0, 1 << 30},
     "cap on one request's prefill chunk per step, 0 = none (default 0)",
     [](EngineSettings& s, const EngineValue& v) { s.long_prefill_token_threshold = as_int(v); }},
    {"scheduler_reserve_full_isl", "--scheduler-reserve-full-isl", {ValueKind::Bool},
     "admit a waiting request only if its whole prompt fits the free KV blocks (default on)",
     [](EngineSettings& s, const EngineValue& v) { s.scheduler_reserve_full_isl = as_bool(v); }},
    {"async_scheduling", "--async-scheduling", {ValueKind::Bool},
     "schedule step n+1 while step n runs (default on since vLLM PR #27614)",
     [](EngineSettings& s, const EngineValue& v) { s.async_scheduling = as_bool(v); }},
    {"cudagraph_capture_sizes", "--cudagraph-capture-sizes", {ValueKind::SizeList, 1, 1 << 20},
     "token counts vLLM captures CUDA graphs for (CompilationConfig.cudagraph_capture_sizes); a batch runs padded to "
     "the next one, above the largest without graphs (default: 1, 2, 4, 8..248 step 8, 256..max step 16)",
     [](EngineSettings& s, const EngineValue& v) { s.cudagraph_capture_sizes = size_list(as_string(v)); }},
    {"cuda_graph_sizes", "--cuda-graph-sizes", {ValueKind::SizeList, 1, 1 << 20},
     "the older spelling of --cudagraph-capture-sizes, deprecated by vLLM PR #26016 (read the same way)",
     [](EngineSettings& s, const EngineValue& v) { s.cudagraph_capture_sizes = size_list(as_string(v)); }},
    {"max_cudagraph_capture_size", "--max-cudagraph-capture-size", {ValueKind::Int, 1, 1 << 20},
     "largest CUDA-graph size: vLLM's default ladder up to it (default min(2 x max_num_seqs, 512, "
     "max_num_batched_tokens))",
     [](EngineSettings& s, const EngineValue& v) { s.max_cudagraph_capture_size = as_int(v); }},
    {"enforce_eager", "--enforce-eager", {ValueKind::Bool},
     "no CUDA graphs: every kernel launched from the host, no padding (default off)",
     [](EngineSettings& s, const EngineValue& v) { s.enforce_eager = as_bool(v); }},
    {"host_work", "", {ValueKind::Bool},
     "servesim: charge the engine's host work per step (default true); false prices the GPU alone, for synthetic "
     "servers (docs/HOST-WORK.md)",
     [](EngineSettings& s, const EngineValue& v) { s.host_work = as_bool(v); }},
    {"host_step_us", "", {ValueKind::Number, 0, 1e6},
     "servesim: engine-core host work per step in us, fixed part (default 300, a prior; calibrate "
     "--from-measurements --host-work-gpu fits it, docs/HOST-WORK.md)",
     [](EngineSettings& s, const EngineValue& v) { s.host_step_us = as_double(v); }},
    {"host_per_request_us", "", {ValueKind::Number, 0, 1e5},
     "servesim: engine-core host work per scheduled request in us (default 5, a prior; fitted likewise)",
     [](EngineSettings& s, const EngineValue& v) { s.host_per_request_us = as_double(v); }},
    {"host_exposed_us", "", {ValueKind::Number, 0, 1e5},
     "servesim: host work per step the GPU never hides (sampled-token copy back and its wait), us (default 30, a "
     "prior; calibrate --from-measurements --host-work-gpu fits it from async-scheduling step times)",
     [](EngineSettings& s, const EngineValue& v) { s.host_exposed_us = as_double(v); }},
    {"triton_jit_compile_ms", "", {ValueKind::Number, 0, 1e6},
     "servesim: ms one Triton compile of vLLM's fused-MoE kernel takes when an eager step of an MoE model meets a "
     "variant start-up did not compile: a freshly started server (default unset = 0, steady state; servesim "
     "validate uses 490, measured on an H100 host), docs/HOST-WORK.md",
     [](EngineSettings& s, const EngineValue& v) { s.triton_jit_compile_ms = as_double(v); }},
    {"mamba_cache_mode", "--mamba-cache-mode", {ValueKind::MambaMode},
     "hybrid models' Mamba state caching: none, align or all (default: vLLM's for the model)",
     [](EngineSettings& s, const EngineValue& v) { s.mamba_cache_mode = cache::parse_mamba_cache_mode(as_string(v)); }},
    {"tensor_parallel_size", "--tensor-parallel-size", {ValueKind::Int, 1, 1024},
     "GPUs per replica (-tp); per-GPU figures are per rank (default 1)",
     [](EngineSettings& s, const EngineValue& v) { s.tensor_parallel_size = static_cast<int>(as_int(v)); }},
    {"pipeline_parallel_size", "--pipeline-parallel-size", {ValueKind::Int, 1, 1024},
     "pipeline stages per replica (-pp): layers split as vLLM's get_pp_indices, docs/PARALLELISM.md (default 1)",
     [](EngineSettings& s, const EngineValue& v) { s.pipeline_parallel_size = static_cast<int>(as_int(v)); }},
    {"enable_expert_parallel", "--enable-expert-parallel", {ValueKind::Bool},
     "MoE experts spread whole over TP x DP ranks (DP = replicas, -dp), docs/PARALLELISM.md (default off)",
     [](EngineSettings& s, const EngineValue& v) { s.enable_expert_parallel = as_bool(v); }},
    {"all2all_backend", "--all2all-backend", {ValueKind::All2AllBackend},
     "with expert parallelism, how MoE layers move tokens to experts: allgather_reducescatter (vLLM's default), "
     "naive, pplx, deepep_high_throughput, deepep_low_latency, flashinfer_nvlink_two_sided, "
     "flashinfer_nvlink_one_sided (docs/PARALLELISM.md)",
     [](EngineSettings& s, const EngineValue& v) { s.all2all_backend = as_string(v); }},
    {"disable_custom_all_reduce", "--disable-custom-all-reduce", {ValueKind::Bool},
     "all-reduces always through NCCL, never vLLM's custom all-reduce (default off)",
     [](EngineSettings& s, const EngineValue& v) { s.disable_custom_all_reduce = as_bool(v); }},
    {"expert_load_imbalance", "", {ValueKind::Number, 1, 1000},
     "servesim: with expert parallelism, the busiest rank's routed tokens over the mean (default 1, balanced)",
     [](EngineSettings& s, const EngineValue& v) { s.expert_load_imbalance = as_double(v); }},
    {"speculative_config", "--speculative-config", {ValueKind::SpeculativeJson},
     "speculative decoding as vLLM's JSON: method (ngram, eagle, eagle3, mtp, draft_model), num_speculative_tokens, "
     "model (draft_model: a catalogued model or config.json path), draft_tensor_parallel_size, prompt_lookup_max/min "
     "(default off; docs/SPECULATIVE-DECODING.md)",
     [](EngineSettings& s, const EngineValue& v) { s.speculative_config = as_string(v); }},
    {"speculative_acceptance", "", {ValueKind::RateList, 0, 1},
     "servesim: vLLM's per-position acceptance rates, one per draft position, not growing (default: the method's "
     "published rates, docs/SPECULATIVE-DECODING.md; draft_model has none and needs this or the mean length)",
     [](EngineSettings& s, const EngineValue& v) { s.speculative_acceptance = rate_list(as_string(v)); }},
    {"speculative_mean_acceptance_length", "", {ValueKind::Number, 1, 65},
     "servesim: mean acceptance length (1 + accepted drafts per step, vLLM's log line) instead of per-position rates",
     [](EngineSettings& s, const EngineValue& v) { s.speculative_mean_acceptance_length = as_double(v); }},
    {"speculative_ngram_ns_per_context_token", "", {ValueKind::Number, 0, 1e6},
     "servesim: ngram drafter's host time per context token of a speculating request per step, ns (default 3.25, "
     "measured: docs/SPECULATIVE-DECODING.md)",
     [](EngineSettings& s, const EngineValue& v) { s.speculative_ngram_ns_per_context_token = as_double(v); }},
    {"kv_offloading_size", "--kv-offloading-size", {ValueKind::GiB, 0, 1e9, true},
     "CPU KV offloading tier in GiB, vLLM's native connector (default none)",
     [](EngineSettings& s, const EngineValue& v) { s.kv_offloading_size_gib = as_double(v); }},
    {"offload_prompt_only", "", {ValueKind::Bool},
     "CPU offloading stores prompt blocks only (the OffloadingConnector's kv_connector_extra_config "
     "offload_prompt_only, PR #43797; default: the vLLM version's)",
     [](EngineSettings& s, const EngineValue& v) { s.offload_prompt_only = as_bool(v); }},
    {"skip_mm_profiling", "--skip-mm-profiling", {ValueKind::Bool},
     "leave the multimodal encoder out of the start-up memory profile (default off: its dummy forward counts)",
     [](EngineSettings& s, const EngineValue& v) { s.skip_mm_profiling = as_bool(v); }},
    {"kv_offloading_load_us_per_token", "", {ValueKind::Number, 0, 1e9},
     "servesim: host-to-GPU load time per token in µs (default: KV bytes per token over the host link)",
     [](EngineSettings& s, const EngineValue& v) { s.kv_offloading_load_us_per_token = as_double(v); }},
    {"prefix_cache_retention_interval", "--prefix-cache-retention-interval", {ValueKind::Retention},
     "hybrid state snapshots kept (vLLM PR #52216): none = every block boundary, 0 = the replay boundary and "
     "shared-prefix junctions, N = every N tokens (default: the vLLM version's)",
     [](EngineSettings& s, const EngineValue& v) { s.prefix_cache_retention_interval = as_int(v); }},
    {"prefix_match_unit", "--prefix-match-unit", {ValueKind::Tokens, 1, 1 << 30},
     "prefix-cache matching granularity (vLLM PRs #45939/#46384, from 0.26; default the block size, the only "
     "value modelled: partial-block hits are not)",
     [](EngineSettings& s, const EngineValue& v) { s.prefix_match_unit = as_int(v); }},
    {"quantization", "--quantization", {ValueKind::Quantization},
     "weight quantization: the checkpoint's method (or its Marlin override), or fp8 / fp8_per_tensor / "
     "fp8_per_block / bitsandbytes to quantize an unquantized checkpoint online (docs/QUANTIZATION.md)",
     [](EngineSettings& s, const EngineValue& v) { s.quantization = as_string(v); }},
    {"dtype", "--dtype", {ValueKind::ModelDtype},
     "dtype of activations and unquantized weights: auto (the checkpoint's), half, float16, bfloat16, float, float32",
     [](EngineSettings& s, const EngineValue& v) { s.dtype = as_string(v); }},
    {"hybrid_cache_policy", "", {ValueKind::HybridPolicy},
     "servesim: hybrid models' state-cache policy: vllm (default), sglang-no-buffer, sglang-extra-buffer, marconi, "
     "checkpoint (docs/HYBRID-POLICIES.md)",
     [](EngineSettings& s, const EngineValue& v) { s.hybrid_cache_policy = as_string(v); }},
    {"hybrid_state_memory_ratio", "", {ValueKind::Number, 0, 1000, true},
     "servesim: state pool : attention pool for the policies other than vllm (SGLang --mamba-full-memory-ratio, "
     "default 0.9)",
     [](EngineSettings& s, const EngineValue& v) { s.hybrid_state_memory_ratio = as_double(v); }},
    {"hybrid_checkpoint_interval_tokens", "", {ValueKind::Tokens, 16, 1 << 30, false, 16},
     "servesim: checkpoint's state interval K (default 2048) or sglang-extra-buffer's mamba_track_interval "
     "(default 256)",
     [](EngineSettings& s, const EngineValue& v) { s.hybrid_checkpoint_interval_tokens = as_int(v); }},
    {"vllm_version", "--vllm-version", {ValueKind::Version},
     "servesim: the vLLM release whose rules to follow (default the newest modelled)",
     [](EngineSettings& s, const EngineValue& v) { s.vllm_version = as_string(v); }},
};

// A plain number as vLLM and YAML write it; nullopt when `text` is not entirely one.
std::optional<double> plain_number(const std::string& text) {
    try {
        std::size_t pos = 0;
        const double v = std::stod(text, &pos);
        if (pos == text.size() && std::isfinite(v)) {
            return v;
        }
    } catch (const std::logic_error&) {
    }
    return std::nullopt;
}

// vLLM human_readable_int: 25.6k → 25,600 (k m g t decimal), 4K → 4,096 (K M G T binary, whole numbers only).
std::optional<double> human_readable(const std::string& text) {
    static const std::regex re(R"((\d+(?:\.\d+)?)([kKmMgGtT]))");
    std::smatch m;
    if (!std::regex_match(text, m, re)) {
        return std::nullopt;
    }
    const std::string number = m[1];
    const char suffix = m[2].str()[0];
    const std::string_view decimal = "kmgt";
    const std::string_view binary = "KMGT";
    if (const auto d = decimal.find(suffix); d != std::string_view::npos) {
        return std::floor(std::stod(number) * std::pow(1000.0, static_cast<double>(d + 1)));
    }
    if (number.find('.') != std::string::npos) {
        throw ConfigError(fmt::format("'{}': decimals are not allowed with binary suffixes like {} (as in vLLM); "
                                      "did you mean {}{}?",
                                      text, suffix, number, static_cast<char>(std::tolower(suffix))));
    }
    return std::stod(number) * std::pow(1024.0, static_cast<double>(binary.find(suffix) + 1));
}

// Bytes with a unit: 12GiB, 512MiB, 12GB, 512MB, 4KiB, 4kB, 1TiB, 1TB, 100B (space before the unit allowed).
std::optional<double> with_byte_unit(const std::string& text) {
    static const std::regex re(R"(([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?) ?(B|kB|KB|KiB|MB|MiB|GB|GiB|TB|TiB))");
    std::smatch m;
    if (!std::regex_match(text, m, re)) {
        return std::nullopt;
    }
    const std::string unit = m[2];
    double scale = 1;
    if (unit == "kB" || unit == "KB") {
        scale = 1e3;
    } else if (unit == "KiB") {
        scale = 1024.0;
    } else if (unit == "MB") {
        scale = 1e6;
    } else if (unit == "MiB") {
        scale = 1024.0 * 1024.0;
    } else if (unit == "GB") {
        scale = 1e9;
    } else if (unit == "GiB") {
        scale = kGiB;
    } else if (unit == "TB") {
        scale = 1e12;
    } else if (unit == "TiB") {
        scale = kGiB * 1024.0;
    }
    return std::stod(m[1]) * scale;
}

std::string range_text(const ValueSpec& spec) {
    const auto num = [](double x) {
        if (x >= kMaxInt) {
            return std::string("no limit");
        }
        return x == std::floor(x) && std::fabs(x) < 1e15 ? fmt::format("{}", static_cast<std::int64_t>(x))
                                                         : fmt::format("{:g}", x);
    };
    if (spec.lo_exclusive) {
        return fmt::format("({}, {}]", num(spec.lo), num(spec.hi));
    }
    return fmt::format("{} to {}", num(spec.lo), num(spec.hi));
}

void check_range(const ValueSpec& spec, double v, const std::string& shown) {
    const bool low = spec.lo_exclusive ? !(v > spec.lo) : !(v >= spec.lo);
    if (low || !(v <= spec.hi)) {
        throw ConfigError(fmt::format("{} is out of range; allowed: {}", shown, range_text(spec)));
    }
}

std::int64_t whole(const ValueSpec& spec, double v, const std::string& text) {
    if (v != std::floor(v) || std::fabs(v) >= kMaxInt) {
        throw ConfigError(fmt::format("expected a whole number, got '{}'", text));
    }
    const auto i = static_cast<std::int64_t>(v);
    if (spec.multiple_of > 1 && (i % spec.multiple_of != 0 || v < spec.lo)) {
        throw ConfigError(fmt::format("{} is not supported by the attention backend; allowed: a positive multiple of "
                                      "{} ({}, {}, {}, …)",
                                      text, spec.multiple_of, spec.multiple_of, 2 * spec.multiple_of,
                                      4 * spec.multiple_of));
    }
    check_range(spec, v, text);
    return i;
}

}  // namespace

std::vector<std::int64_t> size_list(const std::string& canonical) {
    std::vector<std::int64_t> sizes;
    std::istringstream in(canonical);
    std::string item;
    while (std::getline(in, item, ',')) {
        sizes.push_back(std::stoll(item));
    }
    return sizes;
}

std::vector<double> rate_list(const std::string& canonical) {
    std::vector<double> rates;
    std::istringstream in(canonical);
    std::string item;
    while (std::getline(in, item, ',')) {
        rates.push_back(std::stod(item));
    }
    return rates;
}

std::span<const EngineKey> engine_keys() { return kEngineKeys; }

const EngineKey* find_engine_key(std::string_view key) {
    const auto keys = engine_keys();
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const EngineKey& k) { return k.key == key; });
    return it == keys.end() ? nullptr : &*it;
}

const EngineKey* find_engine_flag(std::string_view flag) {
    if (flag.empty()) {
        return nullptr;
    }
    const auto keys = engine_keys();
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const EngineKey& k) { return k.flag == flag; });
    return it == keys.end() ? nullptr : &*it;
}

std::string_view value_forms(ValueKind kind) {
    switch (kind) {
        case ValueKind::Int: return "a whole number";
        case ValueKind::Tokens: return "a number of tokens: 8192, 8k (= 8,000), 8K (= 8,192) or 1e6";
        case ValueKind::Number: return "a number";
        case ValueKind::Bool: return "true or false";
        case ValueKind::Bytes:
            return "a size: bytes, 12GiB, 512MiB, 12GB, 512MB, or vLLM's 12G (= 12 GiB) / 12g (= 12·10^9)";
        case ValueKind::GiB: return "a size in GiB (60 = 60 GiB, as vLLM's --kv-offloading-size), or 64GB, 60GiB";
        case ValueKind::KvDtype: return "one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2";
        case ValueKind::MambaMode: return "one of none, align, all";
        case ValueKind::Version: return "a vLLM release such as 0.26 or 0.30.1";
        case ValueKind::Retention:
            return "none (a state at every block boundary), 0 (only the replay boundary and shared-prefix junctions) "
                   "or a number of tokens that is a multiple of the block size";
        case ValueKind::Quantization:
            return "a vLLM quantization method: awq, awq_marlin, bitsandbytes, compressed-tensors, fbgemm_fp8, fp8, "
                   "fp8_per_block, fp8_per_tensor, gpt_oss_mxfp4, gptq, gptq_marlin, marlin, modelopt, modelopt_fp4, "
                   "mxfp4";
        case ValueKind::ModelDtype: return "one of auto, half, float16, bfloat16, float, float32";
        case ValueKind::HybridPolicy:
            return "one of vllm, sglang-no-buffer, sglang-extra-buffer, marconi, checkpoint";
        case ValueKind::SizeList:
            return "one or more token counts: 1 2 4 8 after the flag, or [1, 2, 4, 8] / \"1,2,4,8\" in a file";
        case ValueKind::SpeculativeJson:
            return "vLLM's JSON object, e.g. '{\"method\": \"eagle3\", \"model\": \"...\", "
                   "\"num_speculative_tokens\": 3}' (a mapping in a scenario file)";
        case ValueKind::RateList:
            return "one or more rates in [0, 1]: 0.8 0.6 after the flag, or [0.8, 0.6] / \"0.8,0.6\" in a file";
        case ValueKind::All2AllBackend:
            return "one of allgather_reducescatter, naive, pplx, deepep_high_throughput, deepep_low_latency, "
                   "flashinfer_nvlink_two_sided, flashinfer_nvlink_one_sided";
    }
    return "";
}

EngineValue parse_value(const ValueSpec& spec, const std::string& raw) {
    std::string text = raw;
    text.erase(0, text.find_first_not_of(" \t"));
    text.erase(text.find_last_not_of(" \t") + 1);
    // A list (SizeList, RateList): commas or blanks between the items, brackets around them allowed (a YAML flow list
    // written as text); each item read as `item_kind` within the spec's bounds, the list given back as "a,b,c".
    const auto canonical_list = [&](ValueKind item_kind) {
        std::string items = text;
        if (!items.empty() && items.front() == '[' && items.back() == ']') {
            items = items.substr(1, items.size() - 2);
        }
        std::replace(items.begin(), items.end(), ',', ' ');
        std::istringstream in(items);
        std::string item;
        std::string canonical;
        const ValueSpec each{item_kind, spec.lo, spec.hi};
        while (in >> item) {
            EngineValue value;
            try {
                value = parse_value(each, item);
            } catch (const ConfigError& e) {
                throw ConfigError(fmt::format("'{}' in '{}': {}", item, text, e.what()));
            }
            if (!canonical.empty()) {
                canonical += ',';
            }
            canonical += std::visit([](const auto& v) { return fmt::format("{}", v); }, value);
        }
        if (canonical.empty()) {
            throw ConfigError(fmt::format("expected {}, got '{}'", value_forms(spec.kind), text));
        }
        return canonical;
    };
    switch (spec.kind) {
        case ValueKind::Int:
        case ValueKind::Tokens: {
            if (spec.vllm_auto && (text == "auto" || text == "-1")) {
                throw ConfigError("'" + text + "' (vLLM: the longest length that fits the KV memory) is not "
                                  "modelled; give a number of tokens such as 32768 or 32k");
            }
            std::optional<double> v = plain_number(text);
            if (!v && spec.kind == ValueKind::Tokens) {
                v = human_readable(text);
            }
            if (!v) {
                throw ConfigError(fmt::format("expected {}, got '{}'", value_forms(spec.kind), text));
            }
            return whole(spec, *v, text);
        }
        case ValueKind::Number: {
            const std::optional<double> v = plain_number(text);
            if (!v) {
                throw ConfigError(fmt::format("expected a number, got '{}'", text));
            }
            check_range(spec, *v, text);
            return *v;
        }
        case ValueKind::Bool:
            if (text == "true" || text == "True" || text == "TRUE") {
                return true;
            }
            if (text == "false" || text == "False" || text == "FALSE") {
                return false;
            }
            throw ConfigError(fmt::format("expected true or false, got '{}'", text));
        case ValueKind::Bytes:
        case ValueKind::GiB: {
            std::optional<double> bytes = with_byte_unit(text);
            if (!bytes) {
                if (const auto n = plain_number(text)) {
                    // A plain number is bytes, as vLLM reads --kv-cache-memory-bytes; below a mebibyte it holds not
                    // one KV block of any model vLLM serves, so it is a forgotten unit, not a pool size.
                    if (spec.kind == ValueKind::Bytes && *n > 0 && *n < 1024.0 * 1024.0) {
                        throw ConfigError(fmt::format("'{}' is {} bytes (a plain number is bytes, as in vLLM), too "
                                                      "small to hold one KV block; did you mean {}GiB?",
                                                      text, text, text));
                    }
                    bytes = spec.kind == ValueKind::GiB ? *n * kGiB : *n;
                } else {
                    bytes = human_readable(text);
                }
            }
            if (!bytes) {
                throw ConfigError(fmt::format("expected {}, got '{}'", value_forms(spec.kind), text));
            }
            if (spec.kind == ValueKind::GiB) {
                check_range(spec, *bytes / kGiB, text);
                return *bytes / kGiB;
            }
            return whole(spec, std::floor(*bytes), text);
        }
        case ValueKind::KvDtype:
            if (std::find(kModelledDtypes.begin(), kModelledDtypes.end(), text) != kModelledDtypes.end()) {
                return text;
            }
            if (std::find(kUnmodelledDtypes.begin(), kUnmodelledDtypes.end(), text) != kUnmodelledDtypes.end()) {
                throw ConfigError(fmt::format("'{}' is a vLLM KV-cache dtype that servesim does not model; allowed: {}",
                                              text, join(kModelledDtypes)));
            }
            if (text == "bf16") {  // accepted by earlier servesim scenarios
                return std::string("bfloat16");
            }
            throw ConfigError(fmt::format("'{}' is not a KV-cache dtype; allowed: {}", text, join(kModelledDtypes)));
        case ValueKind::MambaMode:
            if (std::find(kMambaModes.begin(), kMambaModes.end(), text) == kMambaModes.end()) {
                throw ConfigError(fmt::format("'{}' is not a mode; allowed: {}", text, join(kMambaModes)));
            }
            return text;
        case ValueKind::Version:
            (void)core::parse_vllm_version(text);  // throws with the modelled range
            return text;
        case ValueKind::All2AllBackend:
            if (text == "flashinfer_all2allv") {  // vLLM's temporary alias of flashinfer_nvlink_two_sided
                return std::string("flashinfer_nvlink_two_sided");
            }
            if (engine::parse_all2all_backend(text)) {
                return text;
            }
            if (std::find(kUnmodelledAll2All.begin(), kUnmodelledAll2All.end(), text) != kUnmodelledAll2All.end()) {
                throw ConfigError(fmt::format("'{}' is a vLLM all2all backend that servesim does not model; allowed: {}",
                                              text, engine::all2all_backend_names()));
            }
            throw ConfigError(
                fmt::format("'{}' is not an all2all backend; allowed: {}", text, engine::all2all_backend_names()));
        case ValueKind::HybridPolicy:
            if (cache::find_hybrid_policy(text) == nullptr) {
                throw ConfigError(
                    fmt::format("'{}' is not a policy; allowed: {}", text, cache::hybrid_policy_names()));
            }
            return text;
        case ValueKind::Retention: {
            if (text == "none" || text == "None") {
                return cache::kRetentionDense;
            }
            const std::optional<double> v = plain_number(text);
            if (!v || *v < 0 || *v > static_cast<double>(1LL << 30) || *v != std::floor(*v)) {
                throw ConfigError(fmt::format("'{}' is not allowed; allowed: {}", text, value_forms(spec.kind)));
            }
            return static_cast<std::int64_t>(*v);  // the multiple-of-block check runs with the memory plan
        }
        case ValueKind::SpeculativeJson:
            (void)engine::parse_speculative_config(text);  // throws naming the JSON key and what is allowed
            return text;
        case ValueKind::RateList:
            return canonical_list(ValueKind::Number);
        case ValueKind::SizeList:
            return canonical_list(ValueKind::Int);
        case ValueKind::Quantization:
        case ValueKind::ModelDtype: {
            const auto allowed = spec.kind == ValueKind::Quantization ? models::modelled_quantization_flags()
                                                                       : models::modelled_dtype_flags();
            if (std::find(allowed.begin(), allowed.end(), text) == allowed.end()) {
                throw ConfigError(fmt::format("'{}' is not modelled; allowed: {}", text, value_forms(spec.kind)));
            }
            return text;
        }
    }
    throw ConfigError("unknown value kind");
}

EngineSettings parse_engine_settings(const YamlMap& e) {
    std::vector<std::string_view> allowed;
    for (const auto& k : kEngineKeys) {
        allowed.push_back(k.key);
    }
    e.allow_only(allowed);
    EngineSettings s;
    for (const auto& k : kEngineKeys) {
        if (!e.has(k.key)) {
            continue;
        }
        const YAML::Node n = e.node(k.key);
        if (n.IsNull()) {
            continue;
        }
        std::string text;
        if (n.IsScalar()) {
            text = n.Scalar();
        } else if (n.IsMap() && k.spec.kind == ValueKind::SpeculativeJson) {
            // A YAML mapping of scalars written as the JSON object vLLM takes (numbers stay numbers).
            for (const auto& item : n) {
                if (!item.second.IsScalar()) {
                    e.fail(k.key, fmt::format("'{}': expected a number or a string", item.first.Scalar()));
                }
                const std::string& v = item.second.Scalar();
                const bool number = !v.empty() && v.find_first_not_of("0123456789.-+eE") == std::string::npos &&
                                    item.second.Tag() != "!";
                text += fmt::format("{}\"{}\": {}", text.empty() ? "{" : ", ", item.first.Scalar(),
                                    number ? v : "\"" + v + "\"");
            }
            text += text.empty() ? "{}" : "}";
        } else if (n.IsSequence() && (k.spec.kind == ValueKind::SizeList || k.spec.kind == ValueKind::RateList)) {
            for (const auto& item : n) {
                if (!item.IsScalar()) {
                    e.fail(k.key, fmt::format("expected {}", value_forms(k.spec.kind)));
                }
                text += (text.empty() ? "" : ",") + item.Scalar();
            }
        } else {
            e.fail(k.key, fmt::format("expected {}", value_forms(k.spec.kind)));
        }
        try {
            k.apply(s, parse_value(k.spec, text));
        } catch (const ConfigError& err) {
            e.fail(k.key, err.what());
        }
    }
    return s;
}

}  // namespace servesim::app
