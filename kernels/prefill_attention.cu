// Causal prefill attention, FlashAttention-2 style (kernels-and-models.md D.1): one CTA of 4 warps per 64-query tile
// and query head, heaviest (last) tiles first; K/V tiles of 64 keys through cp.async (K_{j+1} loads during softmax
// and P·V_j, V_{j+1} during Q·K_{j+1}ᵀ); S = Q·Kᵀ and O += P·V with mma.sync m16n8k16 (bf16 in, fp32 accumulate);
// online softmax in exp2; P reused from the accumulator layout as the A operand. GQA by head / (Hq/Hkv). A chunk
// sits on top of a cached prefix: query i is at position cached + i.
#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"

namespace servesim::kernels {

namespace {

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
void launch(const PrefillAttentionArgs& a, cudaStream_t stream) {
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

}  // namespace

void prefill_attention(const PrefillAttentionArgs& a, StreamHandle stream) {
    SERVESIM_REQUIRE(a.chunk_tokens > 0 && a.cached_tokens >= 0, "prefill_attention: chunk must be positive");
    SERVESIM_REQUIRE(a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0,
                     "prefill_attention: q heads must be a multiple of kv heads");
    auto s = static_cast<cudaStream_t>(stream);
    if (a.head_dim == 128) {
        launch<128>(a, s);
    } else if (a.head_dim == 256) {
        launch<256>(a, s);
    } else {
        SERVESIM_REQUIRE(false, "prefill_attention: head_dim must be 128 or 256");
    }
}

}  // namespace servesim::kernels
