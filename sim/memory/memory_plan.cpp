// vLLM's KV-cache sizing at start-up; see memory_plan.h for the vLLM functions each step follows.
// Size (~760 lines): plan_memory (~400 lines) walks vLLM's start-up in vLLM's order, one commented block per step
// (defaults, block size, KV cache groups, budget, num_blocks, the fit check, log lines); above it, only the estimates
// it calls (activation peak, CUDA-graph memory, tensor-parallel checks), so the sequence reads as vLLM's in one file.
#include "sim/memory/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "common/error.h"
#include "common/units.h"
#include "models/model_derived.h"
#include "sim/memory/expert_placement.h"
#include "sim/memory/pipeline_stages.h"

namespace servesim::cache {
namespace {

// FLASH_ATTN / FLASHINFER / TRITON kernels take block sizes that are multiples of 16 (docs/VLLM-RULES.md §2.2).
constexpr int kKernelBlockAlignment = 16;

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One local-attention KV spec (vLLM SlidingWindowSpec / ChunkedLocalAttentionSpec): layers with equal specs share
// groups, so different windows make different groups (kv_cache_utils.py _get_kv_cache_groups_uniform_page_size
// keys its layers by spec).
struct LocalSpec {
    KvGroupKind kind = KvGroupKind::kSlidingWindow;
    int window_tokens = 0;  // sliding window or attention chunk
    int num_layers = 0;
};

struct LayerTypeCounts {
    int full_attention = 0;
    int sliding_window = 0;  // all local layers: sliding window and chunked local
    int mamba = 0;
    std::vector<LocalSpec> local_specs;  // in first-seen layer order
    const models::AttentionMixer* first_attention = nullptr;
    int mamba_chunk_size = 0;
    int mla_qk_nope_head_dim = 0;  // > 0 when the model has MLA layers (picks the MLA backend)
};

LayerTypeCounts count_kv_layers(const models::ModelSpec& model) {
    LayerTypeCounts c;
    for (const auto& layer : model.layers) {
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            if (c.first_attention == nullptr) {
                c.first_attention = a;
            }
            if (a->mla && c.mla_qk_nope_head_dim == 0) {
                c.mla_qk_nope_head_dim = a->mla->qk_nope_head_dim;
            }
            if (a->sliding_window_tokens > 0 || a->attention_chunk_tokens > 0) {
                ++c.sliding_window;
                const LocalSpec spec{a->sliding_window_tokens > 0 ? KvGroupKind::kSlidingWindow
                                                                  : KvGroupKind::kChunkedLocal,
                                     a->sliding_window_tokens > 0 ? a->sliding_window_tokens
                                                                  : a->attention_chunk_tokens,
                                     0};
                auto it = std::find_if(c.local_specs.begin(), c.local_specs.end(), [&](const LocalSpec& l) {
                    return l.kind == spec.kind && l.window_tokens == spec.window_tokens;
                });
                if (it == c.local_specs.end()) {
                    c.local_specs.push_back(spec);
                    it = c.local_specs.end() - 1;
                }
                ++it->num_layers;
            } else {
                ++c.full_attention;
            }
        } else if (std::holds_alternative<models::GatedDeltaNetMixer>(layer.mixer)) {
            ++c.mamba;
        } else if (const auto* m = std::get_if<models::Mamba2Mixer>(&layer.mixer)) {
            ++c.mamba;
            c.mamba_chunk_size = m->chunk_size;
        } else if (std::holds_alternative<models::Mamba1Mixer>(layer.mixer)) {
            ++c.mamba;
        }
    }
    return c;
}

// The KV group kind a layer's cache belongs to (nullopt: no cache), as count_kv_layers classifies it.
std::optional<KvGroupKind> kv_kind(const models::Layer& layer) {
    if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
        return a->sliding_window_tokens > 0 ? KvGroupKind::kSlidingWindow : KvGroupKind::kFullAttention;
    }
    if (std::holds_alternative<models::GatedDeltaNetMixer>(layer.mixer) ||
        std::holds_alternative<models::Mamba2Mixer>(layer.mixer)) {
        return KvGroupKind::kMamba;
    }
    return std::nullopt;
}

// _project_kv_cache_groups_to_worker: a stage keeps, of each global group (the kind's layers in order, group_size
// per group), the layers it holds; its pool divides by the largest such count (get_kv_cache_config_from_groups).
int stage_group_size(const models::ModelSpec& model, const PipelineStage& stage, int group_size) {
    int best = 0;
    for (KvGroupKind kind : {KvGroupKind::kFullAttention, KvGroupKind::kSlidingWindow, KvGroupKind::kMamba}) {
        int before = 0;
        int in_stage = 0;
        for (int i = 0; i < stage.first_layer + stage.num_layers; ++i) {
            if (kv_kind(model.layers[static_cast<std::size_t>(i)]) == kind) {
                (i < stage.first_layer ? before : in_stage) += 1;
            }
        }
        // The stage holds ordinals [before, before + in_stage) of this kind; group g holds [g·gs, (g+1)·gs).
        for (int g = before / group_size; g * group_size < before + in_stage; ++g) {
            const int lo = std::max(before, g * group_size);
            const int hi = std::min(before + in_stage, (g + 1) * group_size);
            best = std::max(best, hi - lo);
        }
    }
    return best;
}

// Per-token working set of the largest layer in the profile forward, in bytes (model dtype b, fp32 where the
// kernels keep fp32 intermediates). Residual stream plus normed input (2·h), plus the widest layer's outputs.
std::int64_t forward_bytes_per_token(const models::ModelSpec& model, int tp) {
    const std::int64_t b = models::dtype_bytes(model.dtype);
    const std::int64_t h = model.hidden_size;
    std::int64_t widest = 0;
    for (const auto& layer : model.layers) {
        std::int64_t mixer = 0;
        if (const auto* mla = std::get_if<models::AttentionMixer>(&layer.mixer); mla != nullptr && mla->mla) {
            // MLA prefill decompresses K and V per head (MLACommonImpl._forward_prefill): q, k (nope + rope), v,
            // the latent, and the attention output.
            const std::int64_t heads = mla->num_q_heads;
            mixer = (2 * heads * mla->head_dim + 2 * heads * mla->mla->v_head_dim + mla->mla->kv_lora_rank +
                     mla->mla->qk_rope_head_dim) *
                    b;
        } else if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            const std::int64_t q = std::int64_t{a->num_q_heads} * a->head_dim * (a->output_gate ? 2 : 1);
            mixer = (q + 2LL * a->num_kv_heads * a->head_dim + std::int64_t{a->num_q_heads} * a->head_dim) * b;
        } else if (const auto* g = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            const std::int64_t conv_dim =
                2LL * g->num_k_heads * g->k_head_dim + std::int64_t{g->num_v_heads} * g->v_head_dim;
            const std::int64_t value = std::int64_t{g->num_v_heads} * g->v_head_dim;
            // projections (qkv, z, a, b), conv output and core output in the model dtype; the chunked kernels'
            // fp32 intermediates per value head: w and u (dk + dv) and the 64-wide in-chunk matrix.
            mixer = (2 * conv_dim + 2 * value + 2LL * g->num_v_heads) * b +
                    4LL * g->num_v_heads * (g->k_head_dim + g->v_head_dim + 64);
        } else if (const auto* m = std::get_if<models::Mamba2Mixer>(&layer.mixer)) {
            const std::int64_t d_inner = std::int64_t{m->num_heads} * m->head_dim;
            const std::int64_t proj = 2 * d_inner + 2LL * m->n_groups * m->state_size + m->num_heads;
            mixer = (proj + d_inner + 2LL * m->n_groups * m->state_size) * b;
        } else if (const auto* m1 = std::get_if<models::Mamba1Mixer>(&layer.mixer)) {
            // in_proj (x, z), conv output, x_proj (dt, B, C), dt and the scan output.
            const std::int64_t inner = m1->intermediate_size;
            mixer = (2 * inner + inner + m1->dt_rank + 2LL * m1->state_size + 2 * inner) * b;
        }
        std::int64_t mlp = 0;
        if (const auto* d = std::get_if<models::DenseMlp>(&layer.mlp)) {
            mlp = std::int64_t{d->intermediate_size} * (d->gated ? 3 : 2) * b;
        } else if (const auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            mlp = (3LL * e->moe_intermediate_size * e->num_experts_per_tok + 3LL * e->shared_expert_intermediate_size +
                   e->num_experts * 4LL) *
                  b;
        }
        widest = std::max({widest, mixer, mlp});
    }
    return 2 * h * b + widest / tp;  // the residual stream is replicated; layer outputs are sharded
}

// vLLM's divisibility checks for tensor parallelism (ModelConfig.verify_with_parallel_config and the layers).
void check_tensor_parallel(const models::ModelSpec& model, int tp) {
    if (tp < 1) {
        throw ConfigError(fmt::format("tensor_parallel_size: must be at least 1, got {}", tp));
    }
    for (const auto& layer : model.layers) {
        int heads = 0;
        const char* what = "";
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            heads = a->num_q_heads;
            what = "attention heads";
        } else if (const auto* g = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            heads = std::gcd(g->num_v_heads, g->num_k_heads);
            what = "Gated DeltaNet key/value heads";
        } else if (const auto* m = std::get_if<models::Mamba2Mixer>(&layer.mixer)) {
            heads = m->num_heads;
            what = "Mamba2 heads";
        } else if (const auto* m1 = std::get_if<models::Mamba1Mixer>(&layer.mixer)) {
            heads = m1->intermediate_size;
            what = "Mamba intermediate channels";
        }
        if (heads > 0 && heads % tp != 0) {
            throw ConfigError(fmt::format("tensor_parallel_size: Total number of {} ({}) must be divisible by tensor "
                                          "parallel size ({}) for model '{}'",
                                          what, heads, tp, model.name));
        }
    }
}

// The MLA backend vLLM picks when --block-size is not given and the block size it prefers (vllm/platforms/cuda.py
// _get_backend_priorities since PR #24794, v0.11.1; get_preferred_block_size in vllm/v1/attention/backend.py): on
// Hopper FLASH_ATTN_MLA (FA3, any multiple of 16) unless the KV cache is fp8, which only FLASHMLA takes (block 64);
// on Blackwell FLASHINFER_MLA (kernel sizes 32 and 64 → 32; needs qk_nope_head_dim 64, 128 or 192, else
// CUTLASS_MLA, 128); elsewhere TRITON_MLA (multiples of 16).
int mla_default_block_size(int compute_capability, bool kv_cache_fp8, int qk_nope_head_dim) {
    const int major = compute_capability / 10;
    if (major == 9) {
        return kv_cache_fp8 ? 64 : kKernelBlockAlignment;
    }
    if (major == 10) {
        return qk_nope_head_dim == 64 || qk_nope_head_dim == 128 || qk_nope_head_dim == 192 ? 32 : 128;
    }
    return kKernelBlockAlignment;
}

std::int64_t max_memory_usage_blocks(KvGroupKind kind, MambaCacheMode mode, std::int64_t max_model_len,
                                     std::int64_t block_size, std::int64_t mamba_block_size, int window,
                                     std::int64_t max_num_batched_tokens, int num_speculative_blocks) {
    switch (kind) {
        case KvGroupKind::kFullAttention:
            return cdiv(max_model_len, block_size);
        case KvGroupKind::kSlidingWindow:
            // SlidingWindowSpec.max_memory_usage_bytes: the window plus one step's tokens, plus one block.
            return cdiv(std::min<std::int64_t>(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1;
        case KvGroupKind::kChunkedLocal:
            // ChunkedLocalAttentionSpec.max_memory_usage_bytes: one chunk plus one step's tokens.
            return cdiv(std::min<std::int64_t>(window + max_num_batched_tokens, max_model_len), block_size);
        case KvGroupKind::kMamba:
            // MambaSpec.max_memory_usage_bytes, each mode plus num_speculative_blocks (speculative decoding).
            switch (mode) {
                case MambaCacheMode::kNone:
                    return 1 + num_speculative_blocks;
                case MambaCacheMode::kAlign:
                    return 2 + num_speculative_blocks;
                case MambaCacheMode::kAll:
                    return cdiv(max_model_len, mamba_block_size) + num_speculative_blocks;
            }
    }
    return 0;
}

}  // namespace

const char* mamba_cache_mode_name(MambaCacheMode m) {
    switch (m) {
        case MambaCacheMode::kNone:
            return "none";
        case MambaCacheMode::kAlign:
            return "align";
        case MambaCacheMode::kAll:
            return "all";
    }
    return "?";
}

MambaCacheMode parse_mamba_cache_mode(const std::string& text) {
    if (text == "none") {
        return MambaCacheMode::kNone;
    }
    if (text == "align") {
        return MambaCacheMode::kAlign;
    }
    if (text == "all") {
        return MambaCacheMode::kAll;
    }
    throw ConfigError("mamba_cache_mode: '" + text + "' is not a mode; allowed: none, align, all");
}

std::int64_t activation_peak_bytes(const models::ModelSpec& model, std::int64_t max_num_batched_tokens,
                                   std::int64_t max_num_seqs, int tensor_parallel_size) {
    // GPUModelRunner.profile_run: a dummy forward of max_num_batched_tokens tokens (per-token working set of the
    // widest layer), then _dummy_sampler_run over min(max_num_seqs, tokens) rows: bf16 logits plus two fp32 copies
    // (the float logits and the probabilities) of vocab entries per row.
    const std::int64_t rows = std::min(max_num_seqs, max_num_batched_tokens);
    const std::int64_t sampler = rows * std::int64_t{model.vocab_size} * (models::dtype_bytes(model.dtype) + 2 * 4);
    return max_num_batched_tokens * forward_bytes_per_token(model, tensor_parallel_size) + sampler;
}

std::int64_t encoder_profile_peak_bytes(const models::ModelSpec& model, std::int64_t max_num_batched_tokens,
                                       std::int64_t max_num_seqs, std::int64_t max_model_len, int tensor_parallel_size,
                                       std::int64_t* outputs) {
    if (outputs != nullptr) {
        *outputs = 0;
    }
    if (!model.vision) {
        return 0;
    }
    const models::VisionTower& v = *model.vision;
    constexpr std::int64_t kMaxPixels = 16'777'216;  // Qwen3-VL image processor size.longest_edge
    const std::int64_t px_per_token = std::int64_t{v.patch_size} * v.spatial_merge_size;
    const std::int64_t tokens_per_item = kMaxPixels / (px_per_token * px_per_token);
    if (tokens_per_item <= 0) {
        return 0;
    }
    const std::int64_t budget = std::max(max_num_batched_tokens, tokens_per_item);
    const std::int64_t per_prompt = std::max<std::int64_t>(1, max_model_len / tokens_per_item);
    const std::int64_t items = std::max<std::int64_t>(1, std::min(budget / tokens_per_item, max_num_seqs * per_prompt));
    const std::int64_t patches = items * tokens_per_item * v.spatial_merge_size * v.spatial_merge_size;
    const std::int64_t b = models::dtype_bytes(model.dtype);
    const std::int64_t tp = std::max(1, tensor_parallel_size);
    const std::int64_t h = v.hidden_size;
    const std::int64_t attention = 6 * h / tp;                         // qkv, rotated q and k, attention output
    const std::int64_t mlp = 2LL * v.intermediate_size / tp;          // fc1 output and its activation
    const std::int64_t pixels = std::int64_t{v.in_channels} * v.temporal_patch_size * v.patch_size * v.patch_size;
    if (outputs != nullptr) {
        *outputs = items * tokens_per_item * std::int64_t{v.out_hidden_size} * b;
    }
    return patches * b * (2 * h + std::max(attention, mlp) + pixels);
}

std::vector<std::int64_t> cudagraph_capture_sizes(std::int64_t max_num_batched_tokens, std::int64_t max_num_seqs) {
    const std::int64_t max_size = std::min<std::int64_t>({2 * max_num_seqs, 512, max_num_batched_tokens});
    std::vector<std::int64_t> sizes;
    for (std::int64_t s : {1, 2, 4}) {
        if (s <= max_size) {
            sizes.push_back(s);
        }
    }
    for (std::int64_t s = 8; s < 256 && s <= max_size; s += 8) {
        sizes.push_back(s);
    }
    for (std::int64_t s = 256; s <= max_size; s += 16) {
        sizes.push_back(s);
    }
    return sizes;
}

std::int64_t cudagraph_memory_estimate_bytes(const models::ModelSpec& model, std::int64_t max_num_batched_tokens,
                                             std::int64_t max_num_seqs, int tensor_parallel_size) {
    const std::vector<std::int64_t> sizes = cudagraph_capture_sizes(max_num_batched_tokens, max_num_seqs);
    if (sizes.empty()) {
        return 0;
    }
    const auto piecewise = static_cast<std::int64_t>(sizes.size());
    const auto full = static_cast<std::int64_t>(
        std::count_if(sizes.begin(), sizes.end(), [&](std::int64_t s) { return s <= max_num_seqs; }));
    constexpr std::int64_t kPerGraphBytes = 1LL << 20;  // profile_cudagraph_memory's per-graph floor
    // Both modes' first captures are the largest size's working set; they overlay in the shared pool (max).
    const std::int64_t first = sizes.back() * forward_bytes_per_token(model, tensor_parallel_size);
    return first + (piecewise - 1) * kPerGraphBytes + std::max<std::int64_t>(full - 1, 0) * kPerGraphBytes;
}

KvCacheConfig MemoryPlan::kv_cache_config() const {
    KvCacheConfig config;
    config.num_gpu_blocks = num_gpu_blocks;
    config.enable_prefix_caching = enable_prefix_caching;
    config.mamba_cache_mode = mamba_cache_mode;
    config.mamba_retention_interval_tokens = mamba_retention_interval_tokens;
    config.swa_admission_cap = swa_admission_cap;
    config.max_num_batched_tokens = max_num_batched_tokens;
    config.max_model_len = max_model_len;
    config.hybrid_state = hybrid_state;
    for (const auto& g : groups) {
        KvCacheGroup group;
        group.kind = g.kind;
        group.num_layers = g.num_layers;
        group.block_size_tokens = g.kind == KvGroupKind::kMamba ? mamba_block_size : block_size;
        // The group's window travels with it (vLLM SlidingWindowSpec.sliding_window,
        // ChunkedLocalAttentionSpec.attention_chunk_size); without it the manager had no window.
        if (g.kind == KvGroupKind::kSlidingWindow) {
            group.sliding_window_tokens = g.window_tokens;
        } else if (g.kind == KvGroupKind::kChunkedLocal) {
            group.attention_chunk_tokens = g.window_tokens;
        }
        config.groups.push_back(group);
    }
    return config;
}

MemoryPlan plan_memory(const models::ModelSpec& model, const MemoryPlanRequest& req) {
    MemoryPlan plan;
    LayerTypeCounts counts = count_kv_layers(model);  // a drafter's same-page layers join full_attention below
    const int num_attention = counts.full_attention + counts.sliding_window;
    const bool hybrid = num_attention > 0 && counts.mamba > 0;
    if (num_attention == 0 && counts.mamba == 0) {
        throw ConfigError(fmt::format("model '{}': no attention or recurrent layers, nothing to cache", model.name));
    }

    // --- engine defaults (EngineArgs, docs/VLLM-RULES.md §4.6) ---
    plan.vllm_version = req.vllm_version;
    plan.gpu_memory_utilization =
        req.gpu_memory_utilization.value_or(req.vllm_version.default_gpu_memory_utilization());
    if (!(plan.gpu_memory_utilization > 0.0 && plan.gpu_memory_utilization <= 1.0)) {
        throw ConfigError(fmt::format(
            "gpu_memory_utilization: the value {} is invalid; GPU memory utilization must be within (0, 1]",
            plan.gpu_memory_utilization));
    }
    // A config without a maximum length (Mamba2Config): vLLM assumes 2,048 (ModelConfig._get_and_verify_max_len).
    plan.max_model_len = req.max_model_len.value_or(model.max_position_embeddings > 0 ? model.max_position_embeddings
                                                                                       : 2048);
    if (plan.max_model_len <= 0) {
        throw ConfigError(fmt::format("max_model_len: must be a positive number of tokens, got {}", plan.max_model_len));
    }
    if (model.max_position_embeddings > 0 && plan.max_model_len > model.max_position_embeddings) {
        throw ConfigError(fmt::format(
            "max_model_len: User-specified max_model_len ({}) is greater than the derived max_model_len "
            "(max_position_embeddings={} in model '{}')",
            plan.max_model_len, model.max_position_embeddings, model.name));
    }
    // EngineArgs.get_batch_defaults, API server: 2048 tokens; 8192 on a GPU of >= 70 GiB that is not an A100; from
    // PR #51726 16384 on one of >= 160 GiB (its total memory, GiB = 2^30), checked first.
    const bool gpu_has_160_gib = req.gpu_memory_bytes >= 160LL * 1024 * 1024 * 1024;
    const std::int64_t default_batched_tokens =
        req.vllm_version.batch_tokens_16k_on_160gib_gpus() && gpu_has_160_gib ? 16384
        : req.gpu_is_large_for_defaults                                         ? 8192
                                                                                : 2048;
    plan.max_num_batched_tokens = req.max_num_batched_tokens.value_or(
        req.enable_chunked_prefill ? default_batched_tokens : std::max(plan.max_model_len, default_batched_tokens));
    if (!req.enable_chunked_prefill && plan.max_num_batched_tokens < plan.max_model_len) {
        // SchedulerConfig.verify_max_model_len: without chunked prefill a prompt must fit one step's budget.
        throw ConfigError(fmt::format(
            "engine.max_num_batched_tokens ({}) is smaller than engine.max_model_len ({}) with "
            "engine.enable_chunked_prefill: false; vLLM refuses this at start-up because no prompt longer than the "
            "budget could ever be scheduled. Increase max_num_batched_tokens or decrease max_model_len",
            plan.max_num_batched_tokens, plan.max_model_len));
    }
    plan.max_num_seqs = req.max_num_seqs.value_or(req.gpu_is_large_for_defaults ? 1024 : 256);
    if (plan.max_num_batched_tokens <= 0 || plan.max_num_seqs <= 0) {
        throw ConfigError("max_num_batched_tokens and max_num_seqs must be positive");
    }
    if (plan.max_num_seqs > plan.max_num_batched_tokens) {
        if (req.max_num_seqs) {
            throw ConfigError(fmt::format(
                "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({})",
                plan.max_num_batched_tokens, plan.max_num_seqs));
        }
        plan.max_num_seqs = plan.max_num_batched_tokens;  // default clamp: seqs ≤ batched tokens
    }
    plan.kv_cache_dtype = req.kv_cache_dtype_fp8 ? models::DType::kFp8 : model.dtype;
    check_tensor_parallel(model, req.tensor_parallel_size);
    plan.tensor_parallel_size = req.tensor_parallel_size;
    const int tp = req.tensor_parallel_size;

    // --- prefix caching and mamba_cache_mode (is_prefix_caching_supported; MambaModelConfig) ---
    // EngineArgs._set_default_chunked_prefill_and_prefix_caching_args: hybrids opt-in until PR #50991 (0.28).
    const VllmVersion& version = req.vllm_version;
    const bool default_prefix_caching =
        counts.mamba == 0 || (hybrid && version.hybrid_prefix_caching_on_by_default());
    plan.enable_prefix_caching = req.enable_prefix_caching.value_or(default_prefix_caching);
    if (counts.mamba > 0) {
        if (!plan.enable_prefix_caching) {
            plan.mamba_cache_mode = MambaCacheMode::kNone;  // forced: mamba_block_size = max_model_len
        } else {
            MambaCacheMode wanted = req.mamba_cache_mode.value_or(MambaCacheMode::kNone);
            if (wanted == MambaCacheMode::kNone) {
                // MambaModelConfig.verify_and_update_config: all for classes with the interface, else align; from
                // PR #50991 (0.28) align for every hybrid.
                const bool align_for_hybrids = hybrid && version.mamba_align_default_for_all_hybrids();
                const bool all_by_default = model.supports_mamba_prefix_caching_all && !align_for_hybrids;
                wanted = all_by_default ? MambaCacheMode::kAll : MambaCacheMode::kAlign;
            }
            if (wanted == MambaCacheMode::kAll && !model.supports_mamba_prefix_caching_all) {
                wanted = MambaCacheMode::kAlign;  // vLLM warns and falls back for classes without the interface
            }
            plan.mamba_cache_mode = wanted;
        }
    }

    // --- block size (Platform.update_block_size_for_backend → _align_hybrid_block_size) ---
    if (req.block_size) {
        if (*req.block_size <= 0 || *req.block_size % kKernelBlockAlignment != 0) {
            throw ConfigError(fmt::format(
                "block_size: {} is not supported by the attention backend; it must be a positive multiple of {} "
                "(FLASH_ATTN MultipleOf(16))",
                *req.block_size, kKernelBlockAlignment));
        }
    }
    plan.block_size = req.block_size.value_or(
        counts.mla_qk_nope_head_dim > 0
            ? mla_default_block_size(req.gpu_compute_capability, req.kv_cache_dtype_fp8, counts.mla_qk_nope_head_dim)
            : kKernelBlockAlignment);
    if (counts.first_attention != nullptr) {
        plan.attn_page_size_1tok_bytes = models::kv_bytes_per_token_layer(*counts.first_attention, plan.kv_cache_dtype, tp);
        for (const auto& layer : model.layers) {
            const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer);
            if (a != nullptr &&
                models::kv_bytes_per_token_layer(*a, plan.kv_cache_dtype, tp) != plan.attn_page_size_1tok_bytes) {
                // vLLM unify_kv_cache_spec_page_size would scale block sizes per group; servesim models one size.
                throw ConfigError(fmt::format(
                    "model '{}': attention layers with different KV bytes per token ({} and {}) are not modelled "
                    "(vLLM's per-group page unification)",
                    model.name, plan.attn_page_size_1tok_bytes,
                    models::kv_bytes_per_token_layer(*a, plan.kv_cache_dtype, tp)));
            }
        }
    }
    plan.kv_bytes_per_token = models::kv_bytes_per_token(model, plan.kv_cache_dtype, tp);
    // The speculative drafter's attention layers (MemoryPlanRequest::drafter): vLLM's KV cache spec holds them with
    // the target's (get_kv_cache_spec), at the same KV dtype. Same page per token as the target's attention: more
    // full-attention layers for get_kv_cache_groups. Another page on a full-attention-only target: one
    // UniformTypeKVCacheSpecs group whose page is the sum of its layers' (draft_block_bytes, set with the block
    // size below). Another page beside local or recurrent layers would take page unification: refused.
    std::int64_t draft_other_page_bytes_per_token = 0;
    plan.num_speculative_blocks = counts.mamba > 0 ? req.num_speculative_tokens : 0;
    if (req.drafter) {
        if (req.pipeline_parallel_size > 1) {
            throw ConfigError("speculative_config: a drafter with pipeline_parallel_size > 1 is not modelled");
        }
        plan.draft_weight_bytes = req.drafter->weight_bytes;
        for (const auto& a : req.drafter->attention_layers) {
            if (a.sliding_window_tokens > 0 || a.attention_chunk_tokens > 0) {
                throw ConfigError(fmt::format("speculative_config: drafter '{}' has local-attention layers, which "
                                              "servesim does not model in a drafter",
                                              req.drafter->name));
            }
            const std::int64_t bytes = models::kv_bytes_per_token_layer(a, plan.kv_cache_dtype, tp);
            plan.draft_kv_bytes_per_token += bytes;
            ++plan.draft_attention_layers;
            if (counts.first_attention != nullptr && bytes == plan.attn_page_size_1tok_bytes) {
                ++counts.full_attention;
            } else {
                draft_other_page_bytes_per_token += bytes;
            }
        }
        if (draft_other_page_bytes_per_token > 0 &&
            (counts.first_attention == nullptr || counts.sliding_window > 0 || counts.mamba > 0)) {
            throw ConfigError(fmt::format(
                "speculative_config: drafter '{}' has attention layers of another KV size per token than model "
                "'{}' ({} B per layer and token per rank), which has local-attention or recurrent layers; vLLM "
                "would unify the page sizes (unify_kv_cache_spec_page_size), which servesim does not model",
                req.drafter->name, model.name, plan.attn_page_size_1tok_bytes));
        }
        plan.kv_bytes_per_token += plan.draft_kv_bytes_per_token;
    }
    for (const auto& layer : model.layers) {
        const std::int64_t state = models::state_bytes_layer(layer, model.dtype, tp, req.num_speculative_tokens).total();
        plan.state_bytes_per_sequence += state;
        plan.mamba_page_size_bytes = std::max(plan.mamba_page_size_bytes, state);
    }

    if (hybrid) {
        const std::int64_t kernel_align = std::max(kKernelBlockAlignment, plan.block_size);
        std::int64_t attn_block = 0;
        if (plan.mamba_cache_mode == MambaCacheMode::kAll) {
            const std::int64_t mamba_chunk = counts.mamba_chunk_size > 0 ? counts.mamba_chunk_size : kernel_align;
            const std::int64_t chunk = std::lcm(mamba_chunk, kernel_align);
            attn_block = chunk * cdiv(cdiv(plan.mamba_page_size_bytes, plan.attn_page_size_1tok_bytes), chunk);
        } else {
            attn_block = kernel_align * cdiv(plan.mamba_page_size_bytes, kernel_align * plan.attn_page_size_1tok_bytes);
        }
        if (plan.block_size < attn_block) {
            plan.user_block_size_overridden = req.block_size.has_value();
            plan.block_size = static_cast<int>(attn_block);
            plan.block_size_raised = true;
            plan.block_size_reason = fmt::format(
                "Setting attention block size to {} tokens to ensure that attention page size is >= mamba page size.",
                attn_block);
        }
        const std::int64_t attn_page = plan.block_size * plan.attn_page_size_1tok_bytes;
        plan.page_size_bytes = attn_page;
        plan.mamba_page_padding_pct =
            100.0 * static_cast<double>(attn_page - plan.mamba_page_size_bytes) / static_cast<double>(plan.mamba_page_size_bytes);
        plan.mamba_block_size = plan.mamba_cache_mode == MambaCacheMode::kNone ? static_cast<int>(plan.max_model_len)
                                                                              : plan.block_size;
    } else if (num_attention > 0) {
        plan.page_size_bytes = plan.block_size * plan.attn_page_size_1tok_bytes;
        plan.draft_block_bytes = plan.block_size * draft_other_page_bytes_per_token;  // UniformTypeKVCacheSpecs
    } else {
        // Attention-free (pure Mamba): one state page per layer, block size = max_model_len.
        plan.page_size_bytes = plan.mamba_page_size_bytes;
        plan.mamba_block_size = static_cast<int>(plan.max_model_len);
    }

    // --- prefix_cache_retention_interval for the Mamba groups (CacheConfig; PRs #43447, #45845, #52216) ---
    if (req.prefix_cache_retention_interval) {
        const std::int64_t interval = *req.prefix_cache_retention_interval;
        if (interval != kRetentionDense && (interval < 0 || interval % plan.block_size != 0)) {
            throw ConfigError(fmt::format(
                "prefix_cache_retention_interval: {} must be none, 0 or a positive multiple of the block size ({})",
                interval, plan.block_size));
        }
    }
    if (counts.mamba > 0 && plan.enable_prefix_caching && version.mamba_honours_retention_interval()) {
        const std::int64_t interval = req.prefix_cache_retention_interval.value_or(
            version.sparse_retention_by_default() ? 0 : kRetentionDense);
        if (interval != kRetentionDense) {
            plan.mamba_retention_interval_tokens = interval;
        }
    }

    // --- --prefix-match-unit (vllm/config/cache.py; PRs #45939, #46384) ---
    // vLLM hashes prompts at this unit and, below the block size, registers partial-block entries that a later
    // request can hit (copy-on-write of the partial block, a Mamba state at the prompt's last unit boundary).
    // servesim's block pool hashes whole blocks only, so the unit is the block size and a smaller one is refused.
    if (req.prefix_match_unit) {
        const std::int64_t unit = *req.prefix_match_unit;
        if (!version.has_prefix_match_unit()) {
            throw ConfigError(fmt::format("prefix_match_unit: vLLM {} has no --prefix-match-unit (PRs #45939 and "
                                          "#46384 added it in 0.26); leave it unset",
                                          version.str()));
        }
        if (unit <= 0 || plan.block_size % unit != 0) {
            throw ConfigError(fmt::format("prefix_match_unit: {} must be a positive divisor of the block size ({}), "
                                          "as vLLM requires",
                                          unit, plan.block_size));
        }
        if (unit != plan.block_size) {
            throw ConfigError(fmt::format(
                "prefix_match_unit: {} is below the block size ({}): partial-block prefix hits (vLLM PRs #45939, "
                "#46384) are not modelled by servesim; leave it unset or set it to {} (docs/VLLM-VERSIONS.md)",
                unit, plan.block_size, plan.block_size));
        }
    }
    plan.prefix_match_unit_tokens = version.has_prefix_match_unit() ? plan.block_size : 0;

    plan.swa_admission_cap = version.swa_admission_cap();

    // --- KV cache groups (get_kv_cache_groups → _get_kv_cache_groups_uniform_page_size) ---
    std::vector<std::pair<KvGroupKind, int>> types;
    if (counts.full_attention > 0) {
        types.emplace_back(KvGroupKind::kFullAttention, counts.full_attention);
    }
    std::vector<int> type_windows(types.size(), 0);
    for (const LocalSpec& l : counts.local_specs) {
        types.emplace_back(l.kind, l.num_layers);
        type_windows.push_back(l.window_tokens);
    }
    if (counts.mamba > 0) {
        types.emplace_back(KvGroupKind::kMamba, counts.mamba);
        type_windows.push_back(0);
    }
    int min_layers = types.front().second;
    int max_layers = types.front().second;
    for (const auto& t : types) {
        min_layers = std::min(min_layers, t.second);
        max_layers = std::max(max_layers, t.second);
    }
    plan.group_size = (types.size() == 1 || static_cast<double>(max_layers) < 1.5 * min_layers) ? max_layers : min_layers;
    for (std::size_t t = 0; t < types.size(); ++t) {
        const auto& [kind, n] = types[t];
        const int num_groups = static_cast<int>(cdiv(n, plan.group_size));
        for (int g = 0; g < num_groups; ++g) {
            KvGroupPlan group;
            group.kind = kind;
            group.window_tokens = type_windows[t];
            group.num_layers = std::min(plan.group_size, n - g * plan.group_size);
            group.num_padding_layers = plan.group_size - group.num_layers;
            plan.groups.push_back(group);
        }
    }

    // --- memory budget (Worker.determine_available_memory) ---
    plan.weight_bytes = models::weight_bytes_total(model) / tp;  // every large matrix is sharded (vocab-parallel too)
    plan.expert_parallel_size = req.expert_parallel_size;
    if (req.expert_parallel_size > 1) {
        if (req.pipeline_parallel_size > 1) {
            throw ConfigError("enable_expert_parallel: with pipeline_parallel_size > 1 is not modelled");
        }
        // determine_expert_map: each GPU holds its ceil(E / EP) experts whole, the rest sharded by TP.
        plan.weight_bytes = expert_parallel_weight_bytes(model, tp, req.expert_parallel_size);
    }
    plan.pipeline_parallel_size = req.pipeline_parallel_size;
    std::vector<PipelineStage> stages;
    if (req.pipeline_parallel_size > 1) {
        // Each stage's GPU loads only its layers (get_pp_indices); the heaviest stage bounds the start-up check.
        stages = model_pipeline_stages(model, req.pipeline_parallel_size);
        plan.weight_bytes = 0;
        for (int i = 0; i < static_cast<int>(stages.size()); ++i) {
            plan.weight_bytes = std::max(plan.weight_bytes, stage_weight_bytes(model, stages, i, tp));
        }
    }
    // The drafter loads beside the target (GPUModelRunner.load_model), so its weights come off the KV budget too.
    plan.weight_bytes += plan.draft_weight_bytes;
    plan.activation_peak_bytes = activation_peak_bytes(model, plan.max_num_batched_tokens, plan.max_num_seqs, tp);
    if (!req.skip_mm_profiling) {
        // profile_run: the encoder's dummy forward first, its outputs kept in the encoder cache through the
        // decoder's dummy run; torch's peak is the larger of the two phases.
        std::int64_t encoder_outputs = 0;
        plan.encoder_peak_bytes = encoder_profile_peak_bytes(model, plan.max_num_batched_tokens, plan.max_num_seqs,
                                                             plan.max_model_len, tp, &encoder_outputs);
        plan.activation_peak_bytes =
            std::max(plan.encoder_peak_bytes, plan.activation_peak_bytes + encoder_outputs);
    }
    plan.non_torch_bytes = req.non_torch_memory_bytes;
    // Worker.determine_available_memory: − cudagraph_memory_estimate when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    // (default on from 0.21; vllm/envs.py).
    plan.cudagraph_bytes = req.cudagraph_memory_bytes.value_or(
        req.vllm_version.kv_budget_subtracts_cudagraph_estimate()
            ? cudagraph_memory_estimate_bytes(model, plan.max_num_batched_tokens, plan.max_num_seqs, tp)
            : 0);
    plan.gpu_memory_bytes = req.gpu_memory_bytes;
    plan.requested_memory_bytes =
        static_cast<std::int64_t>(std::ceil(static_cast<double>(req.gpu_memory_bytes) * plan.gpu_memory_utilization));
    if (req.kv_cache_memory_bytes) {
        if (*req.kv_cache_memory_bytes <= 0) {
            throw ConfigError("kv_cache_memory_bytes: must be positive");
        }
        // vLLM allocates the pool on the GPU (one KV tensor per layer), so a pool beyond the card is a what-if vLLM
        // could not run; servesim allows it up to 16 × the GPU's memory for "no eviction pressure" diagnostics (the
        // seed study's 100 GiB pool on a 24 GiB card) and refuses beyond, which keeps the block table (the
        // simulator's per-block memory) bounded.
        constexpr std::int64_t kMaxPoolOverGpu = 16;
        if (req.gpu_memory_bytes > 0 && *req.kv_cache_memory_bytes / kMaxPoolOverGpu > req.gpu_memory_bytes) {
            throw ConfigError(fmt::format(
                "kv_cache_memory_bytes: {} bytes ({:.1f} GiB) exceed 16 x the GPU's memory of {} bytes ({:.1f} GiB); "
                "allowed: 1 byte to 16 x the GPU's memory (beyond the GPU's own memory it is a what-if vLLM could not "
                "allocate)",
                *req.kv_cache_memory_bytes, *req.kv_cache_memory_bytes / kGiB, req.gpu_memory_bytes,
                req.gpu_memory_bytes / kGiB));
        }
        plan.kv_cache_memory_bytes = *req.kv_cache_memory_bytes;  // used as-is; utilization ignored
        plan.kv_cache_memory_overridden = true;
    } else {
        if (req.gpu_memory_bytes <= 0) {
            throw ConfigError("gpu memory size must be positive");
        }
        plan.kv_cache_memory_bytes = plan.requested_memory_bytes - plan.weight_bytes - plan.activation_peak_bytes -
                                     plan.non_torch_bytes - plan.cudagraph_bytes;
        if (plan.kv_cache_memory_bytes <= 0) {
            throw DoesNotFitError(fmt::format(
                "No available memory for the cache blocks: {:.2f} GiB requested (gpu_memory_utilization {}) but "
                "weights take {:.2f} GiB and the profiled activation peak {:.2f} GiB. Try increasing "
                "gpu_memory_utilization, a larger GPU, or a smaller max_num_batched_tokens.",
                plan.requested_memory_bytes / kGiB, plan.gpu_memory_utilization, plan.weight_bytes / kGiB,
                (plan.activation_peak_bytes + plan.non_torch_bytes + plan.cudagraph_bytes) / kGiB));
        }
    }

    // --- num_blocks (get_num_blocks): one pool shared by all groups, block 0 is the null block ---
    plan.num_gpu_blocks = plan.draft_block_bytes > 0 ? plan.kv_cache_memory_bytes / plan.bytes_per_block()
                                                     : plan.kv_cache_memory_bytes / plan.page_size_bytes / plan.group_size;
    if (!stages.empty()) {
        // get_kv_cache_configs: every stage sizes its own pool from its memory and its share of each group, then
        // "the num_blocks of each rank [becomes] the smallest among all ranks". The activation peak, non-torch and
        // CUDA-graph terms are the whole model's on every stage (an approximation: docs/PARALLELISM.md).
        const std::int64_t others = plan.activation_peak_bytes + plan.non_torch_bytes + plan.cudagraph_bytes;
        for (int i = 0; i < static_cast<int>(stages.size()); ++i) {
            StagePlan st;
            st.first_layer = stages[static_cast<std::size_t>(i)].first_layer;
            st.num_layers = stages[static_cast<std::size_t>(i)].num_layers;
            st.weight_bytes = stage_weight_bytes(model, stages, i, tp);
            st.kv_cache_memory_bytes = req.kv_cache_memory_bytes ? *req.kv_cache_memory_bytes
                                                                 : plan.requested_memory_bytes - st.weight_bytes - others;
            st.group_size = stage_group_size(model, stages[static_cast<std::size_t>(i)], plan.group_size);
            st.num_gpu_blocks = st.group_size > 0 ? st.kv_cache_memory_bytes / plan.page_size_bytes / st.group_size
                                                  : std::numeric_limits<std::int64_t>::max();
            st.kv_bytes_per_token =
                models::kv_bytes_per_token(stage_model(model, stages[static_cast<std::size_t>(i)]), plan.kv_cache_dtype, tp);
            plan.stages.push_back(st);
        }
        const auto limiting = std::min_element(plan.stages.begin(), plan.stages.end(), [](const auto& a, const auto& b) {
            return a.num_gpu_blocks < b.num_gpu_blocks;
        });
        plan.num_gpu_blocks = limiting->num_gpu_blocks;
        plan.kv_cache_memory_bytes = limiting->kv_cache_memory_bytes;
        plan.kv_bytes_per_token = 0;
        for (const auto& st : plan.stages) {
            plan.kv_bytes_per_token = std::max(plan.kv_bytes_per_token, st.kv_bytes_per_token);
        }
    }

    // --- _check_enough_kv_cache_memory: one max_model_len request must fit. vLLM counts group_size · page per
    // block of every group (kv_cache_utils.py: the padding layers' tensors included), not each group's real layers.
    // With pipeline parallelism the check runs on the limiting stage, with its share of each group (a stage's pool
    // holds its own layers' tensors only).
    const int check_group_size = plan.stages.empty() ? plan.group_size
                                                     : std::min_element(plan.stages.begin(), plan.stages.end(),
                                                                        [](const auto& a, const auto& b) {
                                                                            return a.num_gpu_blocks < b.num_gpu_blocks;
                                                                        })->group_size;
    auto needed_bytes = [&](std::int64_t len) {
        std::int64_t total = 0;
        for (const auto& g : plan.groups) {
            total += (std::int64_t{check_group_size} * plan.page_size_bytes + plan.draft_block_bytes) *
                     max_memory_usage_blocks(g.kind, plan.mamba_cache_mode, len, plan.block_size,
                                             plan.mamba_cache_mode == MambaCacheMode::kNone ? len : plan.mamba_block_size,
                                             g.window_tokens, plan.max_num_batched_tokens, plan.num_speculative_blocks);
        }
        return total;
    };
    if (needed_bytes(plan.max_model_len) > plan.kv_cache_memory_bytes) {
        std::int64_t lo = 0;
        std::int64_t hi = plan.max_model_len;
        while (lo < hi) {  // largest length that fits
            const std::int64_t mid = (lo + hi + 1) / 2;
            if (needed_bytes(mid) <= plan.kv_cache_memory_bytes) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        throw DoesNotFitError(fmt::format(
            "max_model_len: To serve at least one request with the models's max seq len ({}), ({:.2f} GiB KV cache "
            "is needed, which is larger than the available KV cache memory ({:.2f} GiB). Based on the available "
            "memory, the estimated maximum model length is {}. Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine.",
            plan.max_model_len, needed_bytes(plan.max_model_len) / kGiB, plan.kv_cache_memory_bytes / kGiB, lo));
    }

    // --- log lines (_report_kv_cache_config, get_max_concurrency_for_kv_cache_config) ---
    std::int64_t per_request_bytes = 0;
    for (const auto& g : plan.groups) {
        per_request_bytes +=
            (plan.page_size_bytes + plan.draft_block_bytes) * max_memory_usage_blocks(g.kind, plan.mamba_cache_mode, plan.max_model_len,
                                                           plan.block_size, plan.mamba_block_size,
                                                           g.window_tokens, plan.max_num_batched_tokens,
                                                           plan.num_speculative_blocks);
    }
    plan.blocks_per_request = cdiv(per_request_bytes, plan.page_size_bytes + plan.draft_block_bytes);
    plan.max_concurrency = static_cast<double>(plan.num_gpu_blocks) / static_cast<double>(plan.blocks_per_request);
    if (req.vllm_version.kv_size_from_concurrency()) {
        plan.kv_cache_tokens = static_cast<std::int64_t>(plan.max_concurrency * static_cast<double>(plan.max_model_len));
    } else {
        const int min_block = plan.mamba_block_size > 0 && num_attention == 0 ? plan.mamba_block_size : plan.block_size;
        plan.kv_cache_tokens =
            plan.num_gpu_blocks / static_cast<std::int64_t>(plan.groups.size()) * static_cast<std::int64_t>(min_block);
    }
    return plan;
}

}  // namespace servesim::cache
