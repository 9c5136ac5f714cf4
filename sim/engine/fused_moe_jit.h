// FusedMoeJit: the Triton compiles a step of an MoE model waits for when vLLM's fused-MoE kernel meets a variant the
// server's start-up did not compile. vLLM runs unquantized routed experts on NVIDIA GPUs with its Triton kernel
// (vllm/model_executor/layers/fused_moe: TritonExperts, two fused_moe_kernel calls per layer, the gate/up and the down
// projection). Triton compiles one binary per tile config (BLOCK_SIZE_M/N/K, GROUP_SIZE_M, warps, stages: constexprs,
// picked by try_get_optimal_moe_config from the tuned file's key nearest the token count M) and per specialisation
// of its integer arguments (divisible by 16 or not): of those, EM (the sorted-id buffer moe_align_block_size sizes
// M·top_k + E·(BLOCK_SIZE_M − 1)) and num_valid_tokens (M·top_k) change with M. Start-up runs the model at the
// profile run's max_num_batched_tokens, at every CUDA-graph capture size and at the sampler warm-up's
// min(max_num_seqs, max_num_batched_tokens) tokens (vllm/v1/worker/gpu_worker.py compile_or_warm_up_model); a step
// within the captured sizes replays a graph, so only eager steps (above the largest size, or --enforce-eager) can
// meet a new variant, which the kernel then compiles inside the step — for both projections, on every tensor-parallel
// rank at once (the all-reduce makes the others wait). vLLM PR #55268 (open in September 2026) names the gap and
// proposes a warm-up over these variants. docs/HOST-WORK.md "Triton compiles mid-serving".
#pragma once

#include <cstdint>
#include <set>
#include <utility>

#include "sim/engine/cuda_graphs.h"

namespace servesim::engine {

// One cold Triton compile of the fused-MoE GEMM at the tiles vLLM's tuned H100 files pick above the capture sizes
// (BLOCK_SIZE_N 256, BLOCK_SIZE_M 64 or 128), measured on the device's H100 host on 2026-12-07
// (calibration/kernels/triton_jit_probe.py: median 0.98 s for the layer's two kernels over six variants,
// logs/H100-SXM-triton-jit-cold.json); the figure a replay of a freshly started server charges (docs/HOST-WORK.md).
inline constexpr double kColdTritonCompileMs = 490;

class FusedMoeJit {
  public:
    // `compile_ms`: one compile of fused_moe_kernel (each new variant compiles two: the gate/up and the down
    // projection). `experts`, `top_k`: the model's routed experts. The variants start-up compiles follow from the
    // capture sizes `graphs`, max_num_seqs and max_num_batched_tokens.
    FusedMoeJit(double compile_ms,
                int experts,
                int top_k,
                const CudaGraphSizes& graphs,
                std::int64_t max_num_seqs,
                std::int64_t max_num_batched_tokens);

    // The ms a step of `num_tokens` scheduled tokens waits for compiles (0 when it replays a graph or its variant is
    // compiled), and the variant counted as compiled from then on.
    [[nodiscard]] double stall_ms(std::int64_t num_tokens);

    // The key of vLLM's tuned config files nearest M (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536,
    // 2048, 3072, 4096; ties to the smaller, as try_get_optimal_moe_config's min over the sorted keys): the tile.
    [[nodiscard]] static int config_key(std::int64_t m);

    // A variant: the tile's key, then which of num_valid_tokens and EM are divisible by 16. For BLOCK_SIZE_M ≥ 16 a
    // power of two, E·(BLOCK_SIZE_M − 1) ≡ −E (mod 16), so EM ≡ M·top_k − E whatever the tile.
    using Variant = std::pair<int, int>;
    [[nodiscard]] Variant variant(std::int64_t m) const;

    [[nodiscard]] std::size_t compiled_variants() const { return compiled_.size(); }

    [[nodiscard]] int compiles() const { return compiles_; }

  private:
    double compile_ms_ = 0;
    int experts_ = 0;
    int top_k_ = 0;
    std::int64_t max_graph_tokens_ = 0;  // 0: no graphs, every step eager
    std::set<Variant> compiled_;
    int compiles_ = 0;  // kernels compiled mid-serving so far
};

}  // namespace servesim::engine
