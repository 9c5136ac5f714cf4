// The memory split of a hybrid model whose states are kept apart from the attention blocks (a HybridCachePolicy
// other than vllm): the KV budget vLLM's profile found is divided into a state pool and an attention pool in
// SGLang's way (model_runner: mamba budget = rest × ratio / (1 + ratio), --mamba-full-memory-ratio, default 0.9),
// and the attention pool takes its own block size (16) instead of vLLM's page-aligned one (528 for Qwen3.5-4B).
// Owns only this arithmetic; the pools are BlockPool and HybridStateCache. docs/HYBRID-POLICIES.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/memory/memory_plan.h"

namespace servesim::cache {

struct HybridStatePoolRequest {
    std::string policy;                               // a name from hybrid_policies(), not "vllm"
    double state_memory_ratio = 0.9;                  // state pool : attention pool (SGLang's default 0.9)
    std::optional<std::int64_t> interval_tokens;      // the policy's interval; unset = its default
    double marconi_alpha = 1.0;
    int attention_block_size = 16;
    double linear_flops_per_token = 0;                // for FLOP-aware eviction (HybridStateConfig)
    double attention_flops_per_work = 0;
};

// Rewrites `plan` for the split: block_size, groups (attention only), num_gpu_blocks, kv_cache_tokens,
// max_concurrency, mamba_cache_mode none, and plan.hybrid_state. Throws ConfigError (without a location: the
// caller adds the file) when the model has no recurrent layers, prefix caching is off, the interval is not a
// positive multiple of the block size, or a pool cannot hold one request.
void apply_hybrid_state_pool(MemoryPlan& plan, const HybridStatePoolRequest& request);

}  // namespace servesim::cache
