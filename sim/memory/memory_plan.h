// MemoryPlan: vLLM's start-up arithmetic for the KV cache — available KV memory, page sizes, KV cache groups,
// hybrid block-size alignment and Mamba page padding, num_blocks with the null block, and the "GPU KV cache size" /
// "Maximum concurrency" log lines. Follows (docs/VLLM-RULES.md §1, §2, §5):
//   vllm/v1/worker/gpu_worker.py Worker.determine_available_memory (memory budget),
//   vllm/platforms/interface.py Platform._align_hybrid_block_size (block size 528 for Qwen3.5-4B),
//   vllm/v1/core/kv_cache_utils.py get_kv_cache_groups, get_num_blocks, _report_kv_cache_config,
//   get_max_concurrency_for_kv_cache_config, _check_enough_kv_cache_memory,
//   vllm/config/model.py is_prefix_caching_supported, vllm/model_executor/models/config.py (mamba_cache_mode).
// It owns no blocks: it sizes the pool that sim/cache/prefix_cache/block_pool manages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/model_spec.h"
#include "sim/core/vllm_version.h"
#include "sim/cache/managers/kv_cache_manager.h"

namespace servesim::cache {

using core::parse_vllm_version;
using core::VllmVersion;

[[nodiscard]] const char* mamba_cache_mode_name(MambaCacheMode m);

[[nodiscard]] MambaCacheMode parse_mamba_cache_mode(const std::string& text);  // none|align|all

// prefix_cache_retention_interval: None (dense retention), as a value.
inline constexpr std::int64_t kRetentionDense = -1;

// A speculative drafter's memory on one rank (sim/engine/speculative.h drafter_memory builds it): its weights come
// off the memory left for the KV cache, and its attention layers join the KV cache spec (vLLM get_kv_cache_spec
// walks the drafter's Attention layers too; 0.33 tags them is_draft, #53558), at the target's KV dtype and TP.
struct DrafterMemoryRequest {
    std::string name;
    std::int64_t weight_bytes = 0;  // per rank
    std::vector<models::AttentionMixer> attention_layers;
};

// What the user asked for; unset optionals take vLLM's defaults for the model and GPU.
struct MemoryPlanRequest {
    std::int64_t gpu_memory_bytes = 0;  // total device memory as torch.cuda.mem_get_info reports it
    bool gpu_is_large_for_defaults = true;  // ≥ 70 GiB and not an A100: batch defaults 8192 / 1024 (§4.6)
    // sm_XY as XY (90 = Hopper): picks the MLA attention backend and so the default block size of MLA models.
    int gpu_compute_capability = 90;
    VllmVersion vllm_version = core::kNewestModelled;
    std::optional<double> gpu_memory_utilization;
    bool kv_cache_dtype_fp8 = false;
    std::optional<int> block_size;
    std::optional<bool> enable_prefix_caching;
    std::optional<MambaCacheMode> mamba_cache_mode;
    // --prefix-cache-retention-interval (PR #52216; VLLM_PREFIX_CACHE_RETENTION_INTERVAL before): tokens, 0 = only
    // the replay boundary and shared-prefix junctions, kRetentionDense = every boundary; unset = the version's default.
    std::optional<std::int64_t> prefix_cache_retention_interval;
    // --prefix-match-unit (PRs #45939, #46384; from 0.26): the prefix-cache matching granularity in tokens. Unset =
    // vLLM's default, the gcd of the groups' block sizes (= the block size: servesim's groups share one). Only that
    // value is modelled; a smaller unit (partial-block hits) is refused (docs/VLLM-VERSIONS.md).
    std::optional<std::int64_t> prefix_match_unit;
    std::optional<std::int64_t> max_model_len;
    std::optional<std::int64_t> max_num_batched_tokens;
    std::optional<std::int64_t> max_num_seqs;
    std::optional<std::int64_t> kv_cache_memory_bytes;
    // --enable-chunked-prefill. Off: max_num_batched_tokens defaults to max(max_model_len, the chunked default) and
    // a smaller explicit value is refused (vllm/config/scheduler.py SchedulerConfig, verify_max_model_len).
    bool enable_chunked_prefill = true;
    // Tensor parallelism: every rank holds 1/TP of the weights and heads (KV heads per rank max(1, total/TP),
    // Mamba state shapes divided by TP: mamba_utils.py); the plan is one rank's (all ranks are alike).
    int tensor_parallel_size = 1;
    // Pipeline parallelism (--pipeline-parallel-size): the layers split over stages as get_pp_indices splits them;
    // each stage's GPUs plan their own KV memory and the engine takes the smallest num_blocks (get_kv_cache_configs).
    // The plan's per-GPU figures are then the stage that limits it; `stages` lists every stage.
    int pipeline_parallel_size = 1;
    // Expert parallelism (--enable-expert-parallel): the routed experts spread whole over this many ranks (TP × DP,
    // sim/memory/expert_placement.h); 1 = sliced by TP like every other matrix.
    int expert_parallel_size = 1;
    // Memory outside torch's allocator that the profile run adds (cuBLAS workspaces, NCCL, allocator slack):
    // vLLM's non_torch_increase. Not derivable from the model; a documented assumption (see DESIGN notes).
    std::int64_t non_torch_memory_bytes = 512LL << 20;
    // CUDA-graph memory estimate subtracted from the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS); unset =
    // the release's rule: cudagraph_memory_estimate_bytes from 0.21, none before.
    std::optional<std::int64_t> cudagraph_memory_bytes;
    // --skip-mm-profiling (MultiModalConfig.skip_mm_profiling): no dummy encoder forward in the profile run.
    bool skip_mm_profiling = false;
    // --speculative-config's drafter (EAGLE/MTP head or draft model); unset = none (or ngram).
    std::optional<DrafterMemoryRequest> drafter;
    // --speculative-config's num_speculative_tokens (any method; 0 = off): the GDN conv state's extra columns
    // (models::state_bytes_layer) and MambaSpec.num_speculative_blocks, the state blocks a request holds beyond
    // the mode's (max_memory_usage_bytes: 1, 2 or ⌈len / block⌉, plus this).
    int num_speculative_tokens = 0;
};

struct KvGroupPlan {
    KvGroupKind kind = KvGroupKind::kFullAttention;
    int num_layers = 0;          // real layers in this group
    int num_padding_layers = 0;  // "Add N padding layers"
    int window_tokens = 0;       // kSlidingWindow: the window; kChunkedLocal: the attention chunk; else 0
};

// One pipeline stage's GPU (pipeline_parallel_size > 1).
struct StagePlan {
    int first_layer = 0;
    int num_layers = 0;
    std::int64_t weight_bytes = 0;
    std::int64_t kv_cache_memory_bytes = 0;
    int group_size = 0;               // tensors per block in this stage: max over groups of its layers in the group
    std::int64_t num_gpu_blocks = 0;  // before the engine takes the minimum over stages
    std::int64_t kv_bytes_per_token = 0;
};

struct MemoryPlan {
    // Resolved engine settings.
    VllmVersion vllm_version = core::kNewestModelled;  // the release whose rules resolved this plan
    bool enable_prefix_caching = false;
    MambaCacheMode mamba_cache_mode = MambaCacheMode::kNone;
    // Retention interval the Mamba groups follow (nullopt = dense; see KvCacheConfig).
    std::optional<std::int64_t> mamba_retention_interval_tokens;
    // The prefix-cache matching granularity (--prefix-match-unit as resolved): the block size; 0 before 0.26,
    // which has no such argument.
    std::int64_t prefix_match_unit_tokens = 0;
    bool swa_admission_cap = false;  // VllmVersion::swa_admission_cap
    std::int64_t max_model_len = 0;
    std::int64_t max_num_batched_tokens = 0;
    std::int64_t max_num_seqs = 0;
    double gpu_memory_utilization = 0;
    models::DType kv_cache_dtype = models::DType::kBFloat16;
    int tensor_parallel_size = 1;
    int pipeline_parallel_size = 1;
    std::vector<StagePlan> stages;  // empty without pipeline parallelism
    int expert_parallel_size = 1;

    // Memory budget (bytes).
    std::int64_t gpu_memory_bytes = 0;        // the card's total (per rank)
    std::int64_t requested_memory_bytes = 0;  // ceil(total × utilization)
    std::int64_t weight_bytes = 0;
    std::int64_t activation_peak_bytes = 0;  // the profile run's torch peak: max(encoder, decoder + encoder outputs)
    std::int64_t encoder_peak_bytes = 0;     // its multimodal encoder part (0 without a vision tower)
    std::int64_t non_torch_bytes = 0;
    std::int64_t cudagraph_bytes = 0;
    std::int64_t kv_cache_memory_bytes = 0;  // "Available KV cache memory"
    bool kv_cache_memory_overridden = false;

    // Pages and blocks.
    int block_size = 16;               // attention block size (tokens); hash granularity
    bool block_size_raised = false;    // "Setting attention block size to … tokens"
    std::string block_size_reason;     // the log line's reason, empty when not raised
    bool user_block_size_overridden = false;  // --block-size was given and replaced
    int mamba_block_size = 0;          // 0 when no Mamba layers
    std::int64_t attn_page_size_1tok_bytes = 0;  // one attention layer, one token
    std::int64_t mamba_page_size_bytes = 0;      // unpadded, largest Mamba layer
    std::int64_t page_size_bytes = 0;            // per layer, after padding (all groups equal)
    double mamba_page_padding_pct = 0;
    int group_size = 0;                // tensors per group: layers of one group sharing a page tensor
    std::vector<KvGroupPlan> groups;
    std::int64_t num_gpu_blocks = 0;   // vLLM num_blocks, including the null block
    std::int64_t blocks_per_request = 0;  // at max_model_len, all groups
    double max_concurrency = 0;        // num_gpu_blocks / blocks_per_request
    std::int64_t kv_cache_tokens = 0;  // "GPU KV cache size: N tokens"

    // Per-token and per-sequence sizes, per GPU (per tensor-parallel rank).
    std::int64_t kv_bytes_per_token = 0;        // all attention layers (the drafter's too), at the KV dtype
    std::int64_t state_bytes_per_sequence = 0;  // all recurrent layers, unpadded

    // The speculative drafter (MemoryPlanRequest::drafter), per rank; all 0 without one. Its weights are in
    // weight_bytes and its KV in kv_bytes_per_token too. A drafter whose layers have the target's attention page
    // joins the full-attention layers (group_size counts them); one with another page (a draft model of another
    // head shape on a full-attention target: vLLM UniformTypeKVCacheSpecs, page = Σ layers' pages) adds
    // draft_block_bytes to every block instead.
    std::int64_t draft_weight_bytes = 0;
    std::int64_t draft_kv_bytes_per_token = 0;
    int draft_attention_layers = 0;
    std::int64_t draft_block_bytes = 0;
    int num_speculative_blocks = 0;  // MambaSpec.num_speculative_blocks (MemoryPlanRequest::num_speculative_tokens)

    // The bytes one block id takes: group_size tensors of page_size_bytes, plus the drafter's pages of another size
    // (what num_gpu_blocks divides the KV memory by, get_num_blocks).
    [[nodiscard]] std::int64_t bytes_per_block() const {
        return static_cast<std::int64_t>(group_size) * page_size_bytes + draft_block_bytes;
    }

    // Set by apply_hybrid_state_pool (hybrid_state_plan.h) for a hybrid policy other than vllm.
    std::optional<HybridStateConfig> hybrid_state;

    // The KvCacheConfig the simulator's cache manager is built from.
    [[nodiscard]] KvCacheConfig kv_cache_config() const;
};

// Computes the plan, or throws ConfigError with a vLLM-like message (utilization outside (0, 1], block size not
// a positive multiple of 16… , max_model_len longer than the model allows or than the KV cache holds, no memory
// left for the KV cache).
// vLLM refuses to start because the model does not fit the GPU: no memory left for KV cache blocks after the
// weights and the activation peak (vLLM: "No available memory for the cache blocks", determine_available_memory),
// or not enough for one request of max_model_len (_check_enough_kv_cache_memory's ValueError). A ConfigError like
// any other bad input for `run`; `plan` reports the configuration as `does_not_fit` and plans the rest.
class DoesNotFitError : public ConfigError {
public:
    using ConfigError::ConfigError;
};

[[nodiscard]] MemoryPlan plan_memory(const models::ModelSpec& model, const MemoryPlanRequest& request);

// CUDA-graph capture sizes (VllmConfig._set_cudagraph_sizes): 1, 2, 4, 8…248 step 8, 256…max step 16, with
// max = min(2·max_num_seqs, 512, max_num_batched_tokens).
[[nodiscard]] std::vector<std::int64_t> cudagraph_capture_sizes(std::int64_t max_num_batched_tokens,
                                                                std::int64_t max_num_seqs);

// GPUModelRunner.profile_cudagraph_memory as servesim models it: per mode (FULL_AND_PIECEWISE: PIECEWISE over every
// capture size, FULL over the uniform-decode sizes ≤ max_num_seqs) vLLM captures the two largest graphs and
// extrapolates: max over modes of the first capture + Σ_modes (n_mode − 1) × max(second capture, 1 MiB). The first
// capture is modelled as the forward working set of the largest size (the profile run's per-token bytes); the
// second reuses the pool the first reserved, so it is modelled at vLLM's own 1 MiB per-graph floor (an assumption:
// driver overhead is not derivable from the model). See docs/KV-POOL.md.
[[nodiscard]] std::int64_t cudagraph_memory_estimate_bytes(const models::ModelSpec& model,
                                                           std::int64_t max_num_batched_tokens,
                                                           std::int64_t max_num_seqs, int tensor_parallel_size = 1);

// The vision encoder's part of the profile run (GPUModelRunner.profile_run → embed_multimodal on a dummy batch of
// mm_max_items_per_batch images of the maximum feature size; vllm/multimodal/encoder_budget.py). Qwen2.5/3-VL-style
// towers: an image of the processor's max_pixels (Qwen3-VL image processor size.longest_edge = 16,777,216 px — the
// one constant not in config.json) is (max_pixels / (patch · merge)²) tokens and merge² patches per token; the
// encoder budget max(max_num_batched_tokens, tokens per item) fits items = max(1, budget // tokens per item),
// capped by max_num_seqs × max(1, max_model_len // tokens per item). Peak = patches × per-patch working set of the
// widest ViT sublayer (residual and normed input, then qkv + rotated q, k + attention output, or fc1 + activation,
// the projections split over TP) plus the pixel values; `outputs` receives the encoder outputs the encoder cache
// keeps through the decoder's dummy run. 0 without a vision tower.
[[nodiscard]] std::int64_t encoder_profile_peak_bytes(const models::ModelSpec& model, std::int64_t max_num_batched_tokens,
                                                      std::int64_t max_num_seqs, std::int64_t max_model_len,
                                                      int tensor_parallel_size, std::int64_t* outputs = nullptr);

// vLLM's activation peak of the profile run (a dummy forward of max_num_batched_tokens tokens plus the dummy
// sampler run over max_num_seqs rows): the modelled torch_peak_increase. See memory_plan.cpp for the terms.
[[nodiscard]] std::int64_t activation_peak_bytes(const models::ModelSpec& model, std::int64_t max_num_batched_tokens,
                                                 std::int64_t max_num_seqs, int tensor_parallel_size = 1);

}  // namespace servesim::cache
