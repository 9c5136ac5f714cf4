// State pool / attention pool split for the hybrid policies; see hybrid_state_plan.h.
#include "sim/memory/hybrid_state_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "sim/cache/hybrid/hybrid_cache_policy.h"

namespace servesim::cache {

void apply_hybrid_state_pool(MemoryPlan& plan, const HybridStatePoolRequest& req) {
    const HybridPolicyEntry* entry = find_hybrid_policy(req.policy);
    if (entry == nullptr) {
        throw ConfigError(fmt::format("engine.hybrid_cache_policy: '{}' is not a policy; allowed: {}", req.policy,
                                      hybrid_policy_names()));
    }
    if (entry->make == nullptr) {
        return;  // vllm: the plan as vLLM resolved it
    }
    if (plan.state_bytes_per_sequence <= 0) {
        throw ConfigError(fmt::format("engine.hybrid_cache_policy: '{}' needs a hybrid model (recurrent layers); this "
                                      "model has none, use vllm",
                                      req.policy));
    }
    if (!plan.enable_prefix_caching) {
        throw ConfigError(fmt::format("engine.hybrid_cache_policy: '{}' is a prefix-caching policy but "
                                      "engine.enable_prefix_caching is false",
                                      req.policy));
    }
    if (!(req.state_memory_ratio > 0) || !std::isfinite(req.state_memory_ratio)) {
        throw ConfigError(fmt::format("engine.hybrid_state_memory_ratio: {} is out of range; allowed: a number > 0",
                                      req.state_memory_ratio));
    }
    const int b = req.attention_block_size;
    HybridStateConfig hs;
    hs.policy = req.policy;
    hs.params.checkpoint_interval_tokens = req.interval_tokens.value_or(entry->default_interval_tokens);
    hs.params.marconi_alpha = req.marconi_alpha;
    if (entry->default_interval_tokens > 0 &&
        (hs.params.checkpoint_interval_tokens <= 0 || hs.params.checkpoint_interval_tokens % b != 0)) {
        throw ConfigError(fmt::format("engine.hybrid_checkpoint_interval_tokens: {} is not allowed for '{}'; "
                                      "allowed: a positive multiple of the attention block size {}",
                                      hs.params.checkpoint_interval_tokens, req.policy, b));
    }
    hs.state_bytes = plan.state_bytes_per_sequence;
    if (find_hybrid_policy(req.policy)->make(hs.params)->token_granular()) {
        // A state off a block boundary also holds its partial block's attention KV (fewer than B tokens), which the
        // block pool does not cache: each slot is charged B − 1 tokens of it.
        hs.state_bytes += static_cast<std::int64_t>(b - 1) * plan.kv_bytes_per_token;
    }
    hs.linear_flops_per_token = req.linear_flops_per_token;
    hs.attention_flops_per_work = req.attention_flops_per_work;
    const double total = static_cast<double>(plan.kv_cache_memory_bytes);
    const double state_budget = total * req.state_memory_ratio / (1.0 + req.state_memory_ratio);
    hs.num_state_slots = static_cast<std::int64_t>(std::floor(state_budget / static_cast<double>(hs.state_bytes)));
    const auto probe = find_hybrid_policy(req.policy)->make(hs.params);
    if (hs.num_state_slots < probe->live_slots_per_request()) {
        throw ConfigError(fmt::format("engine.hybrid_state_memory_ratio: {} leaves {} state slots of {} bytes; '{}' "
                                      "needs {} per request",
                                      req.state_memory_ratio, hs.num_state_slots, hs.state_bytes, req.policy,
                                      probe->live_slots_per_request()));
    }
    const std::int64_t attention_bytes = plan.kv_cache_memory_bytes - hs.num_state_slots * hs.state_bytes;
    const std::int64_t block_bytes = static_cast<std::int64_t>(b) * plan.kv_bytes_per_token;
    const std::int64_t num_blocks = attention_bytes / block_bytes;
    if (num_blocks * b < plan.max_model_len) {
        throw ConfigError(fmt::format("engine.hybrid_state_memory_ratio: {} leaves the attention pool {} tokens, "
                                      "fewer than max_model_len {}",
                                      req.state_memory_ratio, num_blocks * b, plan.max_model_len));
    }
    int num_attention_layers = 0;
    for (const auto& g : plan.groups) {
        if (g.kind != KvGroupKind::kMamba) {
            num_attention_layers += g.num_layers;
        }
    }
    plan.groups = {KvGroupPlan{KvGroupKind::kFullAttention, num_attention_layers, 0}};
    plan.block_size = b;
    plan.block_size_raised = false;
    plan.block_size_reason.clear();
    plan.mamba_cache_mode = MambaCacheMode::kNone;
    plan.mamba_retention_interval_tokens.reset();
    plan.num_gpu_blocks = num_blocks + 1;  // + the null block
    plan.kv_cache_tokens = num_blocks * b;
    plan.blocks_per_request = (plan.max_model_len + b - 1) / b;
    plan.max_concurrency = std::min(static_cast<double>(num_blocks) / static_cast<double>(plan.blocks_per_request),
                                    static_cast<double>(hs.num_state_slots / probe->live_slots_per_request()));
    plan.hybrid_state = hs;
}

}  // namespace servesim::cache
