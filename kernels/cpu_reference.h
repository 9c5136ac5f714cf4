// CPU references for every calibration kernel (built everywhere, tested in CI): plain loops in double precision on
// float inputs, same layouts as kernels/kernels.h. Also the bf16 / fp8-e4m3 conversions the checks need. These define
// what the CUDA kernels must compute; the GPU checks compare against them by ‖out − ref‖ / ‖ref‖.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace servesim::kernels::ref {

[[nodiscard]] float bf16_to_float(std::uint16_t bits);
[[nodiscard]] std::uint16_t float_to_bf16(float x);  // round to nearest even; NaN stays NaN

[[nodiscard]] inline float round_bf16(float x) {
    return bf16_to_float(float_to_bf16(x));
}

[[nodiscard]] float fp8_e4m3_to_float(std::uint8_t bits);
[[nodiscard]] std::uint8_t float_to_fp8_e4m3(float x);  // round to nearest even, saturating at ±448

// ‖a − b‖₂ / ‖b‖₂ (NaN anywhere → +inf).
[[nodiscard]] double rel_l2_error(const std::vector<float>& a, const std::vector<float>& b);

// c[M,N] = a[M,K] · w[N,K]ᵀ.
[[nodiscard]] std::vector<float> gemm(const std::vector<float>& a, const std::vector<float>& w, int m, int n, int k);

// Causal attention of a chunk on a cached prefix (kernels.h PrefillAttentionArgs layouts).
[[nodiscard]] std::vector<float> prefill_attention(const std::vector<float>& q,
                                                   const std::vector<float>& k,
                                                   const std::vector<float>& v,
                                                   int chunk,
                                                   int cached,
                                                   int hq,
                                                   int hkv,
                                                   int hd,
                                                   float scale);

// Paged decode attention; caches already dequantised to float, layout [blocks, block_size, hkv, hd].
[[nodiscard]] std::vector<float> decode_attention(const std::vector<float>& q,
                                                  const std::vector<float>& k_cache,
                                                  const std::vector<float>& v_cache,
                                                  const std::vector<int>& block_table,
                                                  int max_blocks,
                                                  const std::vector<int>& seq_lens,
                                                  int hq,
                                                  int hkv,
                                                  int hd,
                                                  int block_size,
                                                  float scale);

// KV write: cache[slot[t]] = k[t] (rows of hkv·hd).
void kv_cache_write(const std::vector<float>& k,
                    const std::vector<int>& slots,
                    int row_elems,
                    std::vector<float>& cache);

// Gated delta rule, token by token (A.1 implementation form), q/k L2-normalised (eps 1e-6), q scaled; state
// [seqs, hv, dk, dv] updated in place; returns o [seqs·len, hv, dv].
[[nodiscard]] std::vector<float> gdn_recurrent(const std::vector<float>& q,
                                               const std::vector<float>& k,
                                               const std::vector<float>& v,
                                               const std::vector<float>& g,
                                               const std::vector<float>& beta,
                                               std::vector<float>& state,
                                               int num_seqs,
                                               int seq_len,
                                               int hk,
                                               int hv,
                                               int dk,
                                               int dv,
                                               float scale);

// Causal depthwise conv (width 4) + SiLU over [seqs·len, C]; state [seqs, 3, C] is the initial window (zeros when
// empty) and receives the last three inputs.
[[nodiscard]] std::vector<float> conv1d(const std::vector<float>& x,
                                        const std::vector<float>& w,
                                        std::vector<float>& state,
                                        int num_seqs,
                                        int seq_len,
                                        int channels);

[[nodiscard]] std::vector<float> rms_norm(
    const std::vector<float>& x, const std::vector<float>& w, int rows, int width, float eps);
[[nodiscard]] std::vector<float> silu_mul(const std::vector<float>& x, int rows, int width);
// Neox rotate-half on the first rot_dim dims; x [tokens, heads, hd] in place.
void rope(std::vector<float>& x, const std::vector<int>& positions, int heads, int hd, int rot_dim, float theta);
[[nodiscard]] std::vector<int> argmax_rows(const std::vector<float>& logits, int rows, int vocab);

// MoE (kernels.h MoeRunner). Top-k softmax over logits [T, E]: the k largest logits (ties to the lower expert id),
// probabilities softmax(logits) of those, renormalised to sum 1 when `renormalize`; ids and weights [T, k].
void moe_topk(const std::vector<float>& logits,
              int tokens,
              int num_experts,
              int top_k,
              bool renormalize,
              std::vector<int>& ids,
              std::vector<float>& weights);
// A MoE layer's weights on the host (floats holding bf16 values), shapes as kernels.h MoeShape: router [E, h],
// w13 [E, 2I, h] (each expert's gate rows then its up rows), w2 [E, h, I], shared_w13 [2Is, h], shared_w2 [h, Is],
// shared_gate [h] (used when MoeShape::shared_expert_gate).
struct MoeRefWeights {
    std::vector<float> router;
    std::vector<float> w13;
    std::vector<float> w2;
    std::vector<float> shared_w13;
    std::vector<float> shared_w2;
    std::vector<float> shared_gate;
};

// Routed experts and shared expert for a given routing (ids, weights [T, k]), rounding to bf16 where the GPU path
// stores bf16 (each GEMM output, SiLU·mul output). Returns out [T, h].
[[nodiscard]] std::vector<float> moe_experts(const std::vector<float>& x,
                                             const std::vector<int>& ids,
                                             const std::vector<float>& weights,
                                             const MoeRefWeights& w,
                                             const MoeShape& shape,
                                             int tokens);
// The whole layer: router logits = bf16(x · routerᵀ), moe_topk (renormalised when shape.norm_topk_prob),
// moe_experts.
[[nodiscard]] std::vector<float> moe_layer(const std::vector<float>& x,
                                           const MoeRefWeights& w,
                                           const MoeShape& shape,
                                           int tokens);

}  // namespace servesim::kernels::ref
