// FusedMoeJit: see fused_moe_jit.h.
#include "sim/engine/fused_moe_jit.h"

#include <algorithm>
#include <array>
#include <cstdlib>

namespace servesim::engine {

namespace {

// The M keys of vLLM's tuned fused-MoE config files (vllm/model_executor/layers/fused_moe/configs/*.json, e.g.
// E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json), taken here as one tile each. Some files give two keys the same
// tile (that one: 1024 and 4096, 1536 and 3072, 2 and 8), which would compile fewer variants above 2,560 tokens.
constexpr std::array<int, 18> kKeys = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096};

}  // namespace

FusedMoeJit::FusedMoeJit(double compile_ms,
                         int experts,
                         int top_k,
                         const CudaGraphSizes& graphs,
                         std::int64_t max_num_seqs,
                         std::int64_t max_num_batched_tokens)
    : compile_ms_(compile_ms), experts_(experts), top_k_(top_k), max_graph_tokens_(graphs.max_size()) {
    // GPUWorker.compile_or_warm_up_model: the profile run (determine_available_memory) at max_num_batched_tokens,
    // each capture size (eager warm-up runs, then the capture), the sampler warm-up's dummy run.
    compiled_.insert(variant(max_num_batched_tokens));
    for (const std::int64_t size : graphs.sizes()) {
        compiled_.insert(variant(size));
    }
    compiled_.insert(variant(std::min(max_num_seqs, max_num_batched_tokens)));
}

int FusedMoeJit::config_key(std::int64_t m) {
    int best = kKeys.front();
    for (const int k : kKeys) {
        if (std::llabs(k - m) < std::llabs(best - m)) {
            best = k;
        }
    }
    return best;
}

FusedMoeJit::Variant FusedMoeJit::variant(std::int64_t m) const {
    const std::int64_t num_valid = m * top_k_;
    const std::int64_t em = num_valid - experts_;  // ≡ EM (mod 16)
    const auto div16 = [](std::int64_t v) { return ((v % 16) + 16) % 16 == 0 ? 1 : 0; };
    return {config_key(m), 2 * div16(num_valid) + div16(em)};
}

double FusedMoeJit::stall_ms(std::int64_t num_tokens) {
    if (num_tokens <= 0 || (max_graph_tokens_ > 0 && num_tokens <= max_graph_tokens_)) {
        return 0;  // a graph replay (CudagraphDispatcher pads to a captured size): compiled at start-up
    }
    if (!compiled_.insert(variant(num_tokens)).second) {
        return 0;
    }
    compiles_ += 2;
    return 2 * compile_ms_;
}

}  // namespace servesim::engine
