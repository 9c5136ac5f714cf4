// Causal prefill attention, FlashAttention-2 style (arXiv:2307.08691; docs/SOURCES.md, "Attention kernels"), in
// runtime-selected variants
// (PrefillAttentionArgs::variant; 0 picks the per-head-dim default in default_variant below):
//   1  the previous kernel, kept as the fallback: 64 query rows × 64 keys, 4 warps × 16 rows, Q in registers (hd 128).
//   2  128 × 64, 4 warps × 32 rows (two m16 tiles): every K/V fragment read from shared memory feeds two MMAs, which
//      halves shared-memory reads of K and V per FLOP; the O accumulator is then 128 fp32 registers, so Q fragments
//      are re-read from shared memory per k-slice instead of held. hd 128 only (hd 256 would need 256 registers).
//   3  128 × 64, 8 warps × 16 rows (FlashAttention-2's hd 256 tiling): K/V tiles loaded once for twice the rows.
//   4  256 × 64, 8 warps × 32 rows: variant 2 with K/V loads shared by twice the rows. hd 128 only.
// Common to all: one CTA per (query tile, query head), GQA by head / (Hq/Hkv); K/V tiles of 64 keys through cp.async
// into one padded buffer each (row stride hd + 8 elements keeps ldmatrix conflict-free), V_{j+1} loading during
// Q·K_{j+1}ᵀ and softmax; mma.sync m16n8k16 (bf16 in, fp32 accumulate); online softmax in exp2 with the scale folded
// into log2(e); P reused from the accumulator layout as the A operand. Variant 1 issues K_{j+1} before softmax; 2-4
// issue it after softmax, during P·V_j (issuing it while S and O are both live spilled), with 3 barriers per tile
// instead of 4, re-read Q per k16 slice in a rolled loop (registers), launch heads fastest and the last (heaviest)
// query tiles first (the whole grid runs longest-first, so the tail is short), mask per warp, and skip the
// arithmetic of a warp whose rows see none of a tile. A variant whose shared memory exceeds the device's per-block
// limit (sm86: 99 KiB) falls back to variant 1. A chunk sits on top of a cached prefix: query i is at position
// cached + i.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"

namespace servesim::kernels {

namespace {


// ---- Variant 1: the previous kernel, kept verbatim as the fallback (64×64 tiles, 4 warps × 16 query rows) ----
constexpr int kBr = 64;
constexpr int kBc = 64;
constexpr int kThreads = 128;

template <int HD>
__device__ __forceinline__ void load_tile(
    __nv_bfloat16* dst, const __nv_bfloat16* src, int row0, int rows_valid, std::size_t row_stride, int tid) {
    constexpr int kLd = HD + 8;
    constexpr int kChunks = HD / 8;
    for (int c = tid; c < kBr * kChunks; c += kThreads) {
        const int r = c / kChunks;
        const int col = (c % kChunks) * 8;
        const int gr = row0 + r;
        const bool ok = gr < rows_valid;
        const __nv_bfloat16* s = src + (ok ? static_cast<std::size_t>(gr) * row_stride + col : 0);
        mma::cp_async16(dst + r * kLd + col, s, ok ? 16 : 0);
    }
}

template <int HD>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(const __nv_bfloat16* __restrict__ q,
                                                                     const __nv_bfloat16* __restrict__ k,
                                                                     const __nv_bfloat16* __restrict__ v,
                                                                     __nv_bfloat16* __restrict__ o,
                                                                     int chunk,
                                                                     int cached,
                                                                     int hq,
                                                                     int hkv,
                                                                     float scale_log2) {
    constexpr int kLd = HD + 8;
    constexpr bool kQInRegs = HD <= 128;
    constexpr int kKSteps = HD / 16;
    constexpr int kOTiles = HD / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* ks = qs + kBr * kLd;
    __nv_bfloat16* vs = ks + kBc * kLd;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int head = blockIdx.y;
    const int kvh = head / (hq / hkv);
    const int total = cached + chunk;
    const int q_row0 = qt * kBr;
    const int q_last = min(q_row0 + kBr, chunk) - 1;
    const int n_tiles = (cached + q_last) / kBc + 1;
    const std::size_t q_stride = static_cast<std::size_t>(hq) * HD;
    const std::size_t kv_stride = static_cast<std::size_t>(hkv) * HD;

    load_tile<HD>(qs, q + head * HD, q_row0, chunk, q_stride, tid);
    mma::cp_async_commit();
    load_tile<HD>(ks, k + kvh * HD, 0, total, kv_stride, tid);
    mma::cp_async_commit();
    load_tile<HD>(vs, v + kvh * HD, 0, total, kv_stride, tid);
    mma::cp_async_commit();
    mma::cp_async_wait<1>();
    __syncthreads();

    std::uint32_t qf[kQInRegs ? kKSteps : 1][4];
    if constexpr (kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            mma::load_a(qf[kk], qs, warp * 16, kk * 16, kLd, lane);
        }
    }
    float m_i[2] = {-FLT_MAX, -FLT_MAX};
    float l_i[2] = {0.f, 0.f};
    float acc[kOTiles][4];
#pragma unroll
    for (int i = 0; i < kOTiles; ++i) {
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    }
    const int row_a = q_row0 + warp * 16 + g;  // this thread's rows: row_a and row_a + 8
    const int qabs_a = cached + row_a;

    for (int j = 0; j < n_tiles; ++j) {
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
        }
#pragma unroll
        for (int kk2 = 0; kk2 < kKSteps / 2; ++kk2) {
            std::uint32_t a0[4];
            std::uint32_t a1[4];
            if constexpr (kQInRegs) {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    a0[r] = qf[2 * kk2][r];
                    a1[r] = qf[2 * kk2 + 1][r];
                }
            } else {
                mma::load_a(a0, qs, warp * 16, kk2 * 32, kLd, lane);
                mma::load_a(a1, qs, warp * 16, kk2 * 32 + 16, kLd, lane);
            }
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
                std::uint32_t b[4];
                mma::load_b_nk(b, ks, nt * 8, kk2 * 32, kLd, lane);
                mma::mma_bf16(s[nt], a0, b[0], b[1]);
                mma::mma_bf16(s[nt], a1, b[2], b[3]);
            }
        }
        __syncthreads();
        if (j + 1 < n_tiles) {
            load_tile<HD>(ks, k + kvh * HD, (j + 1) * kBc, total, kv_stride, tid);
        }
        mma::cp_async_commit();

        const int key0 = j * kBc;
        const bool need_mask = key0 + kBc - 1 > cached + q_row0 || key0 + kBc > total;
        float mx[2] = {-FLT_MAX, -FLT_MAX};
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float val = s[nt][e] * scale_log2;
                if (need_mask) {
                    const int col = key0 + nt * 8 + 2 * t + (e & 1);
                    const int qabs = qabs_a + (e >= 2 ? 8 : 0);
                    if (col > qabs || col >= total) {
                        val = -FLT_MAX;
                    }
                }
                s[nt][e] = val;
                mx[e >> 1] = fmaxf(mx[e >> 1], val);
            }
        }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 2));
            const float m_new = fmaxf(m_i[r], mx[r]);
            alpha[r] = exp2f(m_i[r] - m_new);
            m_i[r] = m_new;
        }
        float rs[2] = {0.f, 0.f};
        std::uint32_t pa[4][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = s[nt][e] <= -FLT_MAX ? 0.f : exp2f(s[nt][e] - m_i[e >> 1]);
                s[nt][e] = p;
                rs[e >> 1] += p;
            }
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            pa[kk][0] = mma::pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            pa[kk][1] = mma::pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            pa[kk][2] = mma::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[kk][3] = mma::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }
        l_i[0] = l_i[0] * alpha[0] + rs[0];
        l_i[1] = l_i[1] * alpha[1] + rs[1];
#pragma unroll
        for (int i = 0; i < kOTiles; ++i) {
            acc[i][0] *= alpha[0];
            acc[i][1] *= alpha[0];
            acc[i][2] *= alpha[1];
            acc[i][3] *= alpha[1];
        }
        mma::cp_async_wait<1>();  // V_j (K_{j+1} may still be in flight)
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
            for (int n2 = 0; n2 < HD / 16; ++n2) {
                std::uint32_t b[4];
                mma::load_b_kn(b, vs, kk * 16, n2 * 16, kLd, lane);
                mma::mma_bf16(acc[2 * n2], pa[kk], b[0], b[1]);
                mma::mma_bf16(acc[2 * n2 + 1], pa[kk], b[2], b[3]);
            }
        }
        __syncthreads();
        if (j + 1 < n_tiles) {
            load_tile<HD>(vs, v + kvh * HD, (j + 1) * kBc, total, kv_stride, tid);
        }
        mma::cp_async_commit();
        mma::cp_async_wait<1>();  // K_{j+1}
        __syncthreads();
    }
    mma::cp_async_wait<0>();

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_i[r] += __shfl_xor_sync(0xffffffff, l_i[r], 1);
        l_i[r] += __shfl_xor_sync(0xffffffff, l_i[r], 2);
        l_i[r] = l_i[r] > 0.f ? 1.f / l_i[r] : 0.f;
    }
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
        const int col = nt * 8 + 2 * t;
        if (row_a < chunk) {
            *reinterpret_cast<__nv_bfloat162*>(o + static_cast<std::size_t>(row_a) * q_stride + head * HD + col) =
                __floats2bfloat162_rn(acc[nt][0] * l_i[0], acc[nt][1] * l_i[0]);
        }
        if (row_a + 8 < chunk) {
            *reinterpret_cast<__nv_bfloat162*>(o + static_cast<std::size_t>(row_a + 8) * q_stride + head * HD + col) =
                __floats2bfloat162_rn(acc[nt][2] * l_i[1], acc[nt][3] * l_i[1]);
        }
    }
}

template <int HD>
void launch_v1(const PrefillAttentionArgs& a, cudaStream_t stream) {
    constexpr int kLd = HD + 8;
    const int smem = 3 * kBr * kLd * static_cast<int>(sizeof(__nv_bfloat16));
    static bool configured = false;
    if (!configured) {
        SERVESIM_CUDA(
            cudaFuncSetAttribute(prefill_attention_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = true;
    }
    const dim3 grid((a.chunk_tokens + kBr - 1) / kBr, a.num_q_heads);
    prefill_attention_kernel<HD><<<grid, kThreads, smem, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(a.q), reinterpret_cast<const __nv_bfloat16*>(a.k),
        reinterpret_cast<const __nv_bfloat16*>(a.v), reinterpret_cast<__nv_bfloat16*>(a.o), a.chunk_tokens,
        a.cached_tokens, a.num_q_heads, a.num_kv_heads, a.scale * 1.4426950408889634f);
    SERVESIM_LAUNCH_CHECK("prefill_attention");
}

// ---- Variants 2-4: kWarps warps, each owning kMT m16 tiles (kMT·16 consecutive query rows) ----
template <int HD, int kWarps, int kMT>
struct Tiling {
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kWarpRows = kMT * 16;
    static constexpr int kBr = kWarps * kWarpRows;
    static constexpr int kBc = 64;
    static constexpr int kLd = HD + 8;
    static constexpr int kSmemBytes = (kBr + 2 * kBc) * kLd * static_cast<int>(sizeof(__nv_bfloat16));
};

// ex2.approx of x ≤ 0: one MUFU op; -inf gives +0 (masked keys), results under 2^-126 flush to 0 (no effect on a sum
// that already holds a 1 from the row maximum).
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// B fragments for B[k][n] = M[n][k] with M row-major [n][k] (K for S = Q·Kᵀ): one k16 step (k0..), two n8 tiles:
// b[0],b[1] for rows n0..n0+7, b[2],b[3] for rows n0+8..n0+15. (mma::load_b_nk takes one n tile over two k steps.)
__device__ __forceinline__ void load_b_nk_pair(
    std::uint32_t (&b)[4], const __nv_bfloat16* tile, int n0, int k0, int ld, int lane) {
    mma::ldmatrix_x4(b, tile + (n0 + (lane % 8) + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8);
}

// ROWS rows of HD bf16 from global (row stride row_stride elements) into shared memory (row stride HD + 8); rows at or
// past rows_valid are zero-filled without reading global memory.
template <int ROWS, int HD, int THREADS>
__device__ __forceinline__ void load_rows(
    __nv_bfloat16* dst, const __nv_bfloat16* src, int row0, int rows_valid, std::size_t row_stride, int tid) {
    constexpr int kLd = HD + 8;
    constexpr int kChunks = HD / 8;
    static_assert(THREADS % kChunks == 0, "each thread copies one column of 16 bytes in every row it visits");
    constexpr int kRowStep = THREADS / kChunks;
    const int col = (tid % kChunks) * 8;
    // Rolled: the copies are asynchronous, and an unrolled loop would hold every row's address in registers while the
    // O accumulator is live.
#pragma unroll 1
    for (int r = tid / kChunks; r < ROWS; r += kRowStep) {
        const int gr = row0 + r;
        const bool ok = gr < rows_valid;
        const __nv_bfloat16* s = src + (ok ? static_cast<std::size_t>(gr) * row_stride + col : 0);
        mma::cp_async16(dst + r * kLd + col, s, ok ? 16 : 0);
    }
}

template <int HD, int kWarps, int kMT>
__global__ void __launch_bounds__(kWarps * 32) prefill_attention_tiled_kernel(const __nv_bfloat16* __restrict__ q,
                                                                              const __nv_bfloat16* __restrict__ k,
                                                                              const __nv_bfloat16* __restrict__ v,
                                                                              __nv_bfloat16* __restrict__ o,
                                                                              int chunk,
                                                                              int cached,
                                                                              int hq,
                                                                              int hkv,
                                                                              float scale_log2) {
    using T = Tiling<HD, kWarps, kMT>;
    constexpr int kBr = T::kBr;
    constexpr int kBc = T::kBc;
    constexpr int kLd = T::kLd;
    constexpr int kThreads = T::kThreads;
    constexpr int kWarpRows = T::kWarpRows;
    // With one m16 tile per warp and hd 128, Q fits in registers beside O (64 + 64); otherwise it is re-read per k-slice.
    constexpr bool kQInRegs = kMT == 1 && HD <= 128;
    constexpr int kKSteps = HD / 16;
    constexpr int kOTiles = HD / 8;
    static_assert(kMT * kOTiles * 4 <= 128, "the O accumulator must stay within 128 registers per thread");
    static_assert(kBc == 64, "the S tile is 8 n8 tiles and P four k16 slices");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* ks = qs + kBr * kLd;
    __nv_bfloat16* vs = ks + kBc * kLd;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int head = blockIdx.x;
    const int qt = gridDim.y - 1 - blockIdx.y;
    const int kvh = head / (hq / hkv);
    const int total = cached + chunk;
    const int q_row0 = qt * kBr;
    const int q_last = min(q_row0 + kBr, chunk) - 1;
    const int n_tiles = (cached + q_last) / kBc + 1;
    const std::size_t q_stride = static_cast<std::size_t>(hq) * HD;
    const std::size_t kv_stride = static_cast<std::size_t>(hkv) * HD;
    // This warp's rows are w_row0 … w_row0 + kWarpRows − 1 (chunk-relative); it needs key tiles 0 … w_tiles − 1 and
    // none at all when every row is padding past the chunk.
    const int w_row0 = q_row0 + warp * kWarpRows;
    const int w_tiles = w_row0 < chunk ? (cached + min(w_row0 + kWarpRows, chunk) - 1) / kBc + 1 : 0;

    load_rows<kBr, HD, kThreads>(qs, q + head * HD, q_row0, chunk, q_stride, tid);
    mma::cp_async_commit();
    load_rows<kBc, HD, kThreads>(ks, k + kvh * HD, 0, total, kv_stride, tid);
    mma::cp_async_commit();
    load_rows<kBc, HD, kThreads>(vs, v + kvh * HD, 0, total, kv_stride, tid);
    mma::cp_async_commit();
    mma::cp_async_wait<1>();  // Q and K_0
    __syncthreads();

    std::uint32_t qf[kQInRegs ? kKSteps : 1][4];
    if constexpr (kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            mma::load_a(qf[kk], qs, warp * kWarpRows, kk * 16, kLd, lane);
        }
    }
    // Running row max (raw scores, before scaling) and this thread's partial row sum, for rows g and g + 8 of each
    // m16 tile.
    float m_i[kMT][2];
    float l_i[kMT][2];
    float acc[kMT][kOTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
        m_i[mt][0] = m_i[mt][1] = -INFINITY;
        l_i[mt][0] = l_i[mt][1] = 0.f;
#pragma unroll
        for (int i = 0; i < kOTiles; ++i) {
            acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.f;
        }
    }

    for (int j = 0; j < n_tiles; ++j) {
        const bool active = j < w_tiles;  // warp-uniform
        const int key0 = j * kBc;
        float s[kMT][8][4];
        if (active) {
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
                    s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
                }
            }
            // One k16 slice at a time, rolled when Q comes from shared memory: kk then only moves addresses, and the
            // compiler cannot hoist later slices' fragments into registers that S and O already fill.
#pragma unroll(kQInRegs ? kKSteps : 1)
            for (int kk = 0; kk < kKSteps; ++kk) {
                std::uint32_t a[kMT][4];
#pragma unroll
                for (int mt = 0; mt < kMT; ++mt) {
                    if constexpr (kQInRegs) {
#pragma unroll
                        for (int r = 0; r < 4; ++r) {
                            a[mt][r] = qf[kk][r];
                        }
                    } else {
                        mma::load_a(a[mt], qs, warp * kWarpRows + mt * 16, kk * 16, kLd, lane);
                    }
                }
#pragma unroll
                for (int np = 0; np < 4; ++np) {
                    std::uint32_t b[4];
                    load_b_nk_pair(b, ks, np * 16, kk * 16, kLd, lane);
#pragma unroll
                    for (int mt = 0; mt < kMT; ++mt) {
                        mma::mma_bf16(s[mt][2 * np], a[mt], b[0], b[1]);
                        mma::mma_bf16(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        std::uint32_t pa[kMT][4][4];
        if (active) {
            // Only tiles reaching past this warp's first row (or past the sequence) need the causal mask.
            const bool need_mask = key0 + kBc - 1 > cached + w_row0 || key0 + kBc > total;
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
                // Element (nt, e) is key key0 + 2t + nt·8 + (e & 1); row r (g, g + 8) sees it when that offset is at most
                // last[r] (its own position, or the sequence's last key for padding rows past the chunk).
                const int qabs = cached + w_row0 + mt * 16 + g;
                const int last[2] = {min(qabs, total - 1) - key0 - 2 * t, min(qabs + 8, total - 1) - key0 - 2 * t};
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        if (need_mask && nt * 8 + (e & 1) > last[e >> 1]) {
                            s[mt][nt][e] = -INFINITY;
                        }
                        mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][nt][e]);
                    }
                }
                float alpha[2];
                float neg_m[2];
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 1));
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 2));
                    const float m_new = fmaxf(m_i[mt][r], mx[r]);
                    // A row with every key so far masked keeps max −inf; subtract 0 instead so that −inf − (−inf)
                    // never makes a NaN (its p and alpha are then exp2(−inf) = 0).
                    const float m_use = m_new == -INFINITY ? 0.f : m_new;
                    alpha[r] = exp2_approx((m_i[mt][r] - m_use) * scale_log2);
                    neg_m[r] = -m_use * scale_log2;
                    m_i[mt][r] = m_new;
                }
                float rs[2] = {0.f, 0.f};
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float p = exp2_approx(fmaf(s[mt][nt][e], scale_log2, neg_m[e >> 1]));
                        s[mt][nt][e] = p;
                        rs[e >> 1] += p;
                    }
                }
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    pa[mt][kk][0] = mma::pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    pa[mt][kk][1] = mma::pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    pa[mt][kk][2] = mma::pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    pa[mt][kk][3] = mma::pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
                l_i[mt][0] = l_i[mt][0] * alpha[0] + rs[0];
                l_i[mt][1] = l_i[mt][1] * alpha[1] + rs[1];
#pragma unroll
                for (int i = 0; i < kOTiles; ++i) {
                    acc[mt][i][0] *= alpha[0];
                    acc[mt][i][1] *= alpha[0];
                    acc[mt][i][2] *= alpha[1];
                    acc[mt][i][3] *= alpha[1];
                }
            }
        }
        // K_{j+1} is issued only now, once S has become P: issuing it while S and O are both live costs spills.
        mma::cp_async_wait<0>();  // V_j
        __syncthreads();          // V_j visible, and every warp is done reading K_j
        if (j + 1 < n_tiles) {
            load_rows<kBc, HD, kThreads>(ks, k + kvh * HD, (j + 1) * kBc, total, kv_stride, tid);
        }
        mma::cp_async_commit();
        if (active) {
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
                for (int n2 = 0; n2 < HD / 16; ++n2) {
                    std::uint32_t b[4];
                    mma::load_b_kn(b, vs, kk * 16, n2 * 16, kLd, lane);
#pragma unroll
                    for (int mt = 0; mt < kMT; ++mt) {
                        mma::mma_bf16(acc[mt][2 * n2], pa[mt][kk], b[0], b[1]);
                        mma::mma_bf16(acc[mt][2 * n2 + 1], pa[mt][kk], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();  // every warp is done reading V_j
        if (j + 1 < n_tiles) {
            load_rows<kBc, HD, kThreads>(vs, v + kvh * HD, (j + 1) * kBc, total, kv_stride, tid);
        }
        mma::cp_async_commit();
        mma::cp_async_wait<1>();  // K_{j+1}
        __syncthreads();
    }
    mma::cp_async_wait<0>();

#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float l = l_i[mt][r];
            l += __shfl_xor_sync(0xffffffff, l, 1);
            l += __shfl_xor_sync(0xffffffff, l, 2);
            inv[r] = l > 0.f ? 1.f / l : 0.f;
        }
        const int row_a = w_row0 + mt * 16 + g;
#pragma unroll
        for (int nt = 0; nt < kOTiles; ++nt) {
            const int col = nt * 8 + 2 * t;
            if (row_a < chunk) {
                *reinterpret_cast<__nv_bfloat162*>(o + static_cast<std::size_t>(row_a) * q_stride + head * HD + col) =
                    __floats2bfloat162_rn(acc[mt][nt][0] * inv[0], acc[mt][nt][1] * inv[0]);
            }
            if (row_a + 8 < chunk) {
                *reinterpret_cast<__nv_bfloat162*>(o + static_cast<std::size_t>(row_a + 8) * q_stride + head * HD +
                                                   col) =
                    __floats2bfloat162_rn(acc[mt][nt][2] * inv[1], acc[mt][nt][3] * inv[1]);
            }
        }
    }
}

// The current device's opt-in shared memory per block (sm80 163 KiB, sm86 99 KiB, sm90 227 KiB).
int max_smem_per_block() {
    int dev = 0;
    SERVESIM_CUDA(cudaGetDevice(&dev));
    int bytes = 0;
    SERVESIM_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return bytes;
}

// Launches a tiled variant; false (nothing launched) when its shared memory does not fit the device.
template <int HD, int kWarps, int kMT>
bool launch_tiled(const PrefillAttentionArgs& a, cudaStream_t stream) {
    using T = Tiling<HD, kWarps, kMT>;
    static const bool fits = T::kSmemBytes <= max_smem_per_block();
    if (!fits) {
        return false;
    }
    static bool configured = false;
    if (!configured) {
        SERVESIM_CUDA(cudaFuncSetAttribute(prefill_attention_tiled_kernel<HD, kWarps, kMT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
        configured = true;
    }
    // Heads fastest, heaviest query tiles first (the kernel reverses blockIdx.y).
    const dim3 grid(a.num_q_heads, (a.chunk_tokens + T::kBr - 1) / T::kBr);
    prefill_attention_tiled_kernel<HD, kWarps, kMT><<<grid, T::kThreads, T::kSmemBytes, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(a.q), reinterpret_cast<const __nv_bfloat16*>(a.k),
        reinterpret_cast<const __nv_bfloat16*>(a.v), reinterpret_cast<__nv_bfloat16*>(a.o), a.chunk_tokens,
        a.cached_tokens, a.num_q_heads, a.num_kv_heads, a.scale * 1.4426950408889634f);
    SERVESIM_LAUNCH_CHECK("prefill_attention");
    return true;
}

// Variant 0 resolves here, to the fastest per head dim measured on the H200 (2026-11-30, REPORT.md): hd 128 →
// variant 2 (1.02/0.99/0.89× torch SDPA at 4k/8k/16k; variant 1 was 0.69/0.68/0.65×), hd 256 → variant 3
// (0.99/0.87/0.81×; variant 1 0.82/0.81/0.81×). Where a variant's shared memory does not fit (sm_86 at hd 256)
// the launcher falls back to variant 1.
int default_variant(int head_dim) {
    return head_dim == 128 ? 2 : 3;
}

template <int HD>
void launch_variant(const PrefillAttentionArgs& a, int variant, cudaStream_t s) {
    bool launched = false;
    if (variant == 2 || variant == 4) {
        SERVESIM_REQUIRE(HD == 128, "prefill_attention: variants 2 and 4 need head_dim 128");
        if constexpr (HD == 128) {
            launched = variant == 2 ? launch_tiled<128, 4, 2>(a, s) : launch_tiled<128, 8, 2>(a, s);
        }
    } else if (variant == 3) {
        launched = launch_tiled<HD, 8, 1>(a, s);
    } else {
        SERVESIM_REQUIRE(variant == 1, "prefill_attention: variant must be 0 … 4");
    }
    if (!launched) {
        launch_v1<HD>(a, s);
    }
}

}  // namespace

void prefill_attention(const PrefillAttentionArgs& a, StreamHandle stream) {
    SERVESIM_REQUIRE(a.chunk_tokens > 0 && a.cached_tokens >= 0, "prefill_attention: chunk must be positive");
    SERVESIM_REQUIRE(a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0,
                     "prefill_attention: q heads must be a multiple of kv heads");
    auto s = static_cast<cudaStream_t>(stream);
    const int variant = a.variant == 0 ? default_variant(a.head_dim) : a.variant;
    if (a.head_dim == 128) {
        launch_variant<128>(a, variant, s);
    } else if (a.head_dim == 256) {
        launch_variant<256>(a, variant, s);
    } else {
        SERVESIM_REQUIRE(false, "prefill_attention: head_dim must be 128 or 256");
    }
}

}  // namespace servesim::kernels
