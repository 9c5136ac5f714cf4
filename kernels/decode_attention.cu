// Paged decode attention with split-K (Flash-Decoding / vLLM PagedAttention v2; docs/SOURCES.md, "Attention
// kernels") and the
// KV-cache write (vLLM reshape_and_cache). Grid (kv head, sequence, split): one CTA holds the G query heads of the
// group so each K/V element read from HBM serves G heads; partials (normalised O, max, sum) are merged by a second
// kernel when num_splits > 1. The default (variants 0, 2, 3) streams 16-token tiles through a per-warp cp.async ring
// and does both products on the tensor cores, so loads stay in flight while the warp computes and fp8 costs a few
// bit moves per element instead of a convert and G FMAs (see the comment at decode_mma_kernel). Variant 1 is the
// previous kernel (CUDA-core dot products, registers only), kept as a fallback and for block sizes not a multiple
// of 16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"

namespace servesim::kernels {

namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ void load8(const __nv_bfloat16* p, float scale, float (&x)[8]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        x[2 * i] = f.x * scale;
        x[2 * i + 1] = f.y * scale;
    }
}

__device__ __forceinline__ void load8(const __nv_fp8_e4m3* p, float scale, float (&x)[8]) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hr));
        x[2 * i] = f.x * scale;
        x[2 * i + 1] = f.y * scale;
    }
}

template <int HD, int G, typename KV>
__global__ void __launch_bounds__(kWarps * 32) decode_attention_kernel(const __nv_bfloat16* __restrict__ q,
                                                                       const KV* __restrict__ kc,
                                                                       const KV* __restrict__ vc,
                                                                       float k_scale,
                                                                       float v_scale,
                                                                       const int* __restrict__ block_table,
                                                                       int max_blocks,
                                                                       const int* __restrict__ seq_lens,
                                                                       int hq,
                                                                       int hkv,
                                                                       int block_size,
                                                                       float scale_log2,
                                                                       int num_splits,
                                                                       __nv_bfloat16* __restrict__ out,
                                                                       float* __restrict__ part_o,
                                                                       float* __restrict__ part_ml) {
    constexpr int kLpt = HD / 8;     // lanes per token
    constexpr int kTpw = 32 / kLpt;  // tokens per warp step
    constexpr int kStep = kWarps * kTpw;
    __shared__ float sm_m[kWarps][G];
    __shared__ float sm_l[kWarps][G];
    __shared__ float sm_acc[kWarps][G][HD];

    const int kvh = blockIdx.x;
    const int seq = blockIdx.y;
    const int split = blockIdx.z;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int sub = lane % kLpt;
    const int grp = lane / kLpt;
    const int d0 = sub * 8;
    const int len = seq_lens[seq];
    const int per_split = ((len + num_splits - 1) / num_splits + kStep - 1) / kStep * kStep;
    const int t_begin = split * per_split;
    const int t_end = min(len, t_begin + per_split);

    float qv[G][8];
    float acc[G][8];
    float m[G];
    float l[G];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        load8(q + (static_cast<std::size_t>(seq) * hq + kvh * G + h) * HD + d0, scale_log2, qv[h]);
        m[h] = -FLT_MAX;
        l[h] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            acc[h][i] = 0.f;
        }
    }
    const int* bt = block_table + static_cast<std::size_t>(seq) * max_blocks;
    const std::size_t tok_stride = static_cast<std::size_t>(hkv) * HD;
    // Warp-uniform trip count: every lane runs the same iterations (the shuffles below need the whole warp).
    // kU tokens per lane group in flight (16-byte loads issued before any use).
    constexpr int kU = G <= 4 ? 4 : 2;
    for (int wb = t_begin + warp * kTpw; wb < t_end; wb += kU * kStep) {
        float kx[kU][8];
        float vx[kU][8];
        bool valid[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int tok = wb + grp + u * kStep;
            valid[u] = tok < t_end;
            const int tt = valid[u] ? tok : wb;
            const std::size_t slot = static_cast<std::size_t>(bt[tt / block_size]) * block_size + tt % block_size;
            const std::size_t off = slot * tok_stride + kvh * HD + d0;
            load8(kc + off, k_scale, kx[u]);
            load8(vc + off, v_scale, vx[u]);
        }
#pragma unroll
        for (int h = 0; h < G; ++h) {
            float s[kU];
            float m_new = m[h];
#pragma unroll
            for (int u = 0; u < kU; ++u) {
                float d = 0.f;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    d += qv[h][i] * kx[u][i];
                }
#pragma unroll
                for (int o = kLpt / 2; o > 0; o /= 2) {
                    d += __shfl_xor_sync(0xffffffff, d, o);
                }
                s[u] = valid[u] ? d : -FLT_MAX;
                m_new = fmaxf(m_new, s[u]);
            }
            const float corr = exp2f(m[h] - m_new);
            m[h] = m_new;
            float lsum = l[h] * corr;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                acc[h][i] *= corr;
            }
#pragma unroll
            for (int u = 0; u < kU; ++u) {
                const float p = valid[u] ? exp2f(s[u] - m_new) : 0.f;
                lsum += p;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    acc[h][i] += p * vx[u][i];
                }
            }
            l[h] = lsum;
        }
    }
    // Merge the token groups of this warp (lanes with equal `sub`).
#pragma unroll
    for (int o = kLpt; o < 32; o *= 2) {
#pragma unroll
        for (int h = 0; h < G; ++h) {
            const float mo = __shfl_xor_sync(0xffffffff, m[h], o);
            const float lo = __shfl_xor_sync(0xffffffff, l[h], o);
            const float m_new = fmaxf(m[h], mo);
            const float a = exp2f(m[h] - m_new);
            const float b = exp2f(mo - m_new);
            l[h] = l[h] * a + lo * b;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float ao = __shfl_xor_sync(0xffffffff, acc[h][i], o);
                acc[h][i] = acc[h][i] * a + ao * b;
            }
            m[h] = m_new;
        }
    }
    if (grp == 0) {
#pragma unroll
        for (int h = 0; h < G; ++h) {
            if (sub == 0) {
                sm_m[warp][h] = m[h];
                sm_l[warp][h] = l[h];
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                sm_acc[warp][h][d0 + i] = acc[h][i];
            }
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < G * HD; e += kWarps * 32) {
        const int h = e / HD;
        const int d = e % HD;
        float mm = -FLT_MAX;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            mm = fmaxf(mm, sm_m[w][h]);
        }
        float ll = 0.f;
        float oo = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            const float f = exp2f(sm_m[w][h] - mm);
            ll += sm_l[w][h] * f;
            oo += sm_acc[w][h][d] * f;
        }
        const int qh = kvh * G + h;
        if (num_splits == 1) {
            out[(static_cast<std::size_t>(seq) * hq + qh) * HD + d] = __float2bfloat16(ll > 0.f ? oo / ll : 0.f);
        } else {
            const std::size_t pidx = (static_cast<std::size_t>(seq) * hq + qh) * num_splits + split;
            part_o[pidx * HD + d] = ll > 0.f ? oo / ll : 0.f;
            if (d == 0) {
                part_ml[2 * pidx] = mm;
                part_ml[2 * pidx + 1] = ll;
            }
        }
    }
}

// ---- Variant 0/2/3: per-warp cp.async pipeline + mma.sync (the default) ----
// A CTA of kW warps serves one (kv head, sequence, split); warp w takes the split's 16-token tiles w, w+kW, ...
// and streams them through its own ring of kS shared-memory stages (K and V rows of 16 tokens, 16-byte cp.async,
// chunks XOR-swizzled by row so ldmatrix / 16-byte reads are bank-conflict-free). Each warp runs its own online
// softmax, so the main loop has no CTA barrier: a warp waits only on its own copies. Scores S = Q·Kᵀ and O += P·V
// are m16n8k16 mma with the G ≤ 8 query heads of the group as rows 0..G-1 of A (rows 8..15 are zero): K/V come
// from HBM once for the whole group and the tensor cores do the arithmetic, leaving the warp free to keep
// (kS-1) tiles in flight. bf16 K/V feed ldmatrix directly. fp8 e4m3 K/V are widened to f16 by bit moves (an e4m3
// byte placed in the high byte of a half, exponent and mantissa shifted right by one, is the same value × 2⁻⁸:
// exact, subnormals included), so the f16 mma runs on them; the 2⁸ and the per-tensor scales are applied once,
// to the scores and to the final O. To read each fp8 lane's operands with a few wide loads, head_dim is permuted
// consistently between Q and K (lane t's k-slots of every k-step live in its own HD/4 contiguous bytes) and, for
// P·V, the output columns are permuted (lane g's n-slot of n-tile 4q+i is column 32q + 4g + i) and undone when
// O is written.
constexpr int kTile = 16;  // tokens per tile = mma k of P·V; block_size must be a multiple

__device__ __forceinline__ void mma_f16(float (&d)[4], std::uint32_t a0, std::uint32_t a2, std::uint32_t b0,
                                        std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], std::uint32_t a0, std::uint32_t a2, std::uint32_t b0,
                                         std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
    std::uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// Two e4m3 bytes sitting in bits 8..15 and 24..31 (the other bytes are ignored) → f16x2 of value × 2⁻⁸.
__device__ __forceinline__ std::uint32_t e4m3_hi_to_f16x2(std::uint32_t t) {
    return ((t >> 1) & 0x3f803f80u) | (t & 0x80008000u);
}

__device__ __forceinline__ std::uint32_t pack_f16(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
}

// Byte offset of (row, byte b) in a tile of rows of kRowBytes with 16-byte chunks swizzled by row % 8.
template <int kRowBytes>
__device__ __forceinline__ int swz(int row, int b) {
    return row * kRowBytes + ((((b >> 4) ^ (row & 7)) << 4) | (b & 15));
}

template <int HD, typename KV, int kWarpBytes>
struct MmaShape {
    static constexpr int kRowBytes = HD * static_cast<int>(sizeof(KV));
    static constexpr int kHalfBytes = kTile * kRowBytes;  // K (or V) part of a stage
    static constexpr int kStageBytes = 2 * kHalfBytes;
    static constexpr int kStages = std::max(2, kWarpBytes / kStageBytes);
    static constexpr int kWarps = std::clamp(98304 / (kStages * kStageBytes), 1, 4);
    static constexpr int kSmemBytes = kWarps * kStages * kStageBytes;
    static constexpr int kChunks = kRowBytes / 16;  // 16-byte chunks per row
    static constexpr int kCopies = kTile * kChunks / 32;  // cp.async per lane per half
};

template <int HD, int G, typename KV, int kWarpBytes>
__global__ void __launch_bounds__(MmaShape<HD, KV, kWarpBytes>::kWarps * 32)
    decode_mma_kernel(const __nv_bfloat16* __restrict__ q,
                      const KV* __restrict__ kc,
                      const KV* __restrict__ vc,
                      float score_mul,  // softmax scale · log2 e · k dequant
                      float v_mul,      // v dequant
                      const int* __restrict__ block_table,
                      int max_blocks,
                      const int* __restrict__ seq_lens,
                      int hq,
                      int hkv,
                      int block_size,
                      int num_splits,
                      __nv_bfloat16* __restrict__ out,
                      float* __restrict__ part_o,
                      float* __restrict__ part_ml) {
    using Shape = MmaShape<HD, KV, kWarpBytes>;
    constexpr int kW = Shape::kWarps;
    constexpr int kS = Shape::kStages;
    constexpr int kRow = Shape::kRowBytes;
    constexpr bool kFp8 = sizeof(KV) == 1;
    constexpr int kNt = HD / 8;  // n-tiles of O
    constexpr int kKs = HD / 16;  // k-steps of Q·Kᵀ
    static_assert(G <= 8, "query heads per group must fit the 8 live rows of the mma tile");
    static_assert(Shape::kSmemBytes >= kW * (G * HD + 16) * 4, "merge buffers reuse the pipeline's shared memory");
    extern __shared__ __align__(128) unsigned char smem[];

    const int kvh = blockIdx.x;
    const int seq = blockIdx.y;
    const int split = blockIdx.z;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int len = seq_lens[seq];
    const int n_tiles = (len + kTile - 1) / kTile;
    const int per_split = (n_tiles + num_splits - 1) / num_splits;
    const int tile_begin = split * per_split;
    const int tile_end = min(n_tiles, tile_begin + per_split);
    const int n_x = tile_begin + warp < tile_end ? (tile_end - tile_begin - warp + kW - 1) / kW : 0;
    const int tiles_per_block = block_size / kTile;
    const int* bt = block_table + static_cast<std::size_t>(seq) * max_blocks;
    const std::size_t tok_stride = static_cast<std::size_t>(hkv) * kRow;  // bytes
    const auto* kb = reinterpret_cast<const unsigned char*>(kc) + static_cast<std::size_t>(kvh) * kRow;
    const auto* vb = reinterpret_cast<const unsigned char*>(vc) + static_cast<std::size_t>(kvh) * kRow;
    unsigned char* ring = smem + warp * kS * Shape::kStageBytes;

    // Block-table entries for this warp's tiles, 32 at a time in a register per lane, the next 32 loaded a chunk
    // ahead so the cp.async issue never waits on them.
    auto bt_load = [&](int x) {
        return x < n_x ? bt[(tile_begin + warp + x * kW) / tiles_per_block] : 0;
    };
    int bt_cur = bt_load(lane);
    int bt_nxt = bt_load(32 + lane);
    auto issue = [&](int x) {  // warp-uniform x
        if (x < n_x) {
            if (x % 32 == 0 && x > 0) {
                bt_cur = bt_nxt;
                bt_nxt = bt_load(x + 32 + lane);
            }
            const int blk = __shfl_sync(0xffffffffu, bt_cur, x % 32);
            const int gt = tile_begin + warp + x * kW;
            const std::size_t slot0 =
                static_cast<std::size_t>(blk) * block_size + (gt % tiles_per_block) * kTile;
            const int valid_rows = len - gt * kTile;
            unsigned char* ks = ring + (x % kS) * Shape::kStageBytes;
            unsigned char* vs = ks + Shape::kHalfBytes;
#pragma unroll
            for (int j = 0; j < Shape::kCopies; ++j) {
                const int idx = lane + 32 * j;
                const int row = idx / Shape::kChunks;
                const int ch = idx % Shape::kChunks;
                const bool ok = row < valid_rows;  // rows past the sequence are zero-filled, never read
                const std::size_t off = ok ? (slot0 + row) * tok_stride + ch * 16 : 0;
                const int dst = swz<kRow>(row, ch * 16);
                mma::cp_async16(ks + dst, kb + off, ok ? 16 : 0);
                mma::cp_async16(vs + dst, vb + off, ok ? 16 : 0);
            }
        }
        mma::cp_async_commit();
    };
#pragma unroll
    for (int x = 0; x < kS - 1; ++x) {
        issue(x);
    }

    // Q as the A operand, rows g < G live (a[1], a[3] — rows 8..15 — are the zero register).
    std::uint32_t qa[kKs][2];
    {
        const __nv_bfloat16* qrow = q + (static_cast<std::size_t>(seq) * hq + kvh * G + min(g, G - 1)) * HD;
#pragma unroll
        for (int kk = 0; kk < kKs; ++kk) {
            if constexpr (kFp8) {
                const int d = t * (HD / 4) + 4 * kk;
                const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(qrow + d));
                const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(qrow + d + 2));
                qa[kk][0] = g < G ? pack_f16(lo.x, lo.y) : 0u;
                qa[kk][1] = g < G ? pack_f16(hi.x, hi.y) : 0u;
            } else {
                qa[kk][0] = g < G ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + 2 * t) : 0u;
                qa[kk][1] = g < G ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + 2 * t + 8) : 0u;
            }
        }
    }

    float o[kNt][4];
#pragma unroll
    for (int n = 0; n < kNt; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o[n][i] = 0.f;
        }
    }
    float m_run = -FLT_MAX;  // row g's running max (log2 units), the same in the 4 lanes of the row
    float l_run = 0.f;       // this lane's part of row g's running sum

    for (int x = 0; x < n_x; ++x) {
        __syncwarp();  // every lane is done with the stage issue() refills next
        issue(x + kS - 1);
        mma::cp_async_wait<kS - 1>();
        __syncwarp();  // the other lanes' copies of tile x are visible
        const unsigned char* ks = ring + (x % kS) * Shape::kStageBytes;
        const unsigned char* vs = ks + Shape::kHalfBytes;

        // S = Q·Kᵀ: two n-tiles of 8 tokens.
        float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if constexpr (kFp8) {
                const int row = 8 * j + g;
#pragma unroll
                for (int c = 0; c < HD / 64; ++c) {
                    const uint4 w = *reinterpret_cast<const uint4*>(ks + swz<kRow>(row, t * (HD / 4) + 16 * c));
                    const std::uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        mma_f16(s[j], qa[4 * c + e][0], qa[4 * c + e][1], e4m3_hi_to_f16x2(prmt(ws[e], 0, 0x1000)),
                                e4m3_hi_to_f16x2(prmt(ws[e], 0, 0x3020)));
                    }
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < kKs; kk += 2) {
                    std::uint32_t b[4];
                    const int row = 8 * j + lane % 8;
                    mma::ldmatrix_x4(b, ks + swz<kRow>(row, (kk * 16 + (lane / 8) * 8) * 2));
                    mma_bf16(s[j], qa[kk][0], qa[kk][1], b[0], b[1]);
                    mma_bf16(s[j], qa[kk + 1][0], qa[kk + 1][1], b[2], b[3]);
                }
            }
        }

        // Online softmax on row g; tokens past the sequence get p = 0 (token 0 of a tile is always live).
        const int tok0 = (tile_begin + warp + x * kW) * kTile;
        float p[2][2];
        float mx = -FLT_MAX;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const bool live = tok0 + 8 * j + 2 * t + e < len;
                p[j][e] = live ? s[j][e] * score_mul : -INFINITY;
                mx = fmaxf(mx, p[j][e]);
            }
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run, mx);
        const float corr = exp2f(m_run - m_new);
        m_run = m_new;
        float psum = 0.f;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                p[j][e] = exp2f(p[j][e] - m_new);
                psum += p[j][e];
            }
        }
        l_run = l_run * corr + psum;
#pragma unroll
        for (int n = 0; n < kNt; ++n) {
            o[n][0] *= corr;
            o[n][1] *= corr;
        }

        // O += P·V over the tile's 16 tokens.
        if constexpr (kFp8) {
            const std::uint32_t pa0 = pack_f16(p[0][0], p[0][1]);
            const std::uint32_t pa2 = pack_f16(p[1][0], p[1][1]);
#pragma unroll
            for (int qg = 0; qg < HD / 32; ++qg) {
                const int b = qg * 32 + 4 * g;
                const std::uint32_t r0 = *reinterpret_cast<const std::uint32_t*>(vs + swz<kRow>(2 * t, b));
                const std::uint32_t r1 = *reinterpret_cast<const std::uint32_t*>(vs + swz<kRow>(2 * t + 1, b));
                const std::uint32_t r8 = *reinterpret_cast<const std::uint32_t*>(vs + swz<kRow>(2 * t + 8, b));
                const std::uint32_t r9 = *reinterpret_cast<const std::uint32_t*>(vs + swz<kRow>(2 * t + 9, b));
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const std::uint32_t sel = ((4u + i) << 12) | (static_cast<std::uint32_t>(i) << 4);
                    mma_f16(o[4 * qg + i], pa0, pa2, e4m3_hi_to_f16x2(prmt(r0, r1, sel)),
                            e4m3_hi_to_f16x2(prmt(r8, r9, sel)));
                }
            }
        } else {
            const std::uint32_t pa0 = pack_bf16(p[0][0], p[0][1]);
            const std::uint32_t pa2 = pack_bf16(p[1][0], p[1][1]);
#pragma unroll
            for (int n = 0; n < kNt; n += 2) {
                std::uint32_t b[4];
                const int row = lane % 8 + ((lane / 8) % 2) * 8;
                mma::ldmatrix_x4_trans(b, vs + swz<kRow>(row, (n * 8 + (lane / 16) * 8) * 2));
                mma_bf16(o[n], pa0, pa2, b[0], b[1]);
                mma_bf16(o[n + 1], pa0, pa2, b[2], b[3]);
            }
        }
    }
    mma::cp_async_wait<0>();
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
    __syncthreads();  // every warp is done with its ring: reuse it for the merge

    auto* sm_o = reinterpret_cast<float*>(smem);  // [kW][G][HD]
    float* sm_m = sm_o + kW * G * HD;            // [kW][8]
    float* sm_l = sm_m + kW * 8;                 // [kW][8]
    if (g < G) {
#pragma unroll
        for (int n = 0; n < kNt; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int d = kFp8 ? (n / 4) * 32 + 4 * (2 * t + e) + n % 4 : n * 8 + 2 * t + e;
                sm_o[(warp * G + g) * HD + d] = o[n][e];
            }
        }
        if (t == 0) {
            sm_m[warp * 8 + g] = m_run;
            sm_l[warp * 8 + g] = l_run;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < G * HD; e += kW * 32) {
        const int h = e / HD;
        const int d = e % HD;
        float mm = -FLT_MAX;
#pragma unroll
        for (int w = 0; w < kW; ++w) {
            mm = fmaxf(mm, sm_m[w * 8 + h]);
        }
        float ll = 0.f;
        float oo = 0.f;
#pragma unroll
        for (int w = 0; w < kW; ++w) {
            const float f = exp2f(sm_m[w * 8 + h] - mm);
            ll += sm_l[w * 8 + h] * f;
            oo += sm_o[(w * G + h) * HD + d] * f;
        }
        const float val = ll > 0.f ? oo / ll * v_mul : 0.f;
        const int qh = kvh * G + h;
        if (num_splits == 1) {
            out[(static_cast<std::size_t>(seq) * hq + qh) * HD + d] = __float2bfloat16(val);
        } else {
            const std::size_t pidx = (static_cast<std::size_t>(seq) * hq + qh) * num_splits + split;
            part_o[pidx * HD + d] = val;
            if (d == 0) {
                part_ml[2 * pidx] = mm;
                part_ml[2 * pidx + 1] = ll;
            }
        }
    }
}

__global__ void decode_merge_kernel(const float* __restrict__ part_o,
                                    const float* __restrict__ part_ml,
                                    int num_splits,
                                    int hd,
                                    __nv_bfloat16* __restrict__ out) {
    const std::size_t sh = static_cast<std::size_t>(blockIdx.x);  // seq·hq + head
    float mm = -FLT_MAX;
    for (int s = 0; s < num_splits; ++s) {
        if (part_ml[2 * (sh * num_splits + s) + 1] > 0.f) {
            mm = fmaxf(mm, part_ml[2 * (sh * num_splits + s)]);
        }
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float wsum = 0.f;
        float o = 0.f;
        for (int s = 0; s < num_splits; ++s) {
            const std::size_t p = sh * num_splits + s;
            const float ll = part_ml[2 * p + 1];
            if (ll > 0.f) {
                const float w = ll * exp2f(part_ml[2 * p] - mm);
                wsum += w;
                o += w * part_o[p * hd + d];
            }
        }
        out[sh * hd + d] = __float2bfloat16(wsum > 0.f ? o / wsum : 0.f);
    }
}

void launch_merge(const DecodeAttentionArgs& a, const float* part_o, const float* part_ml, cudaStream_t stream) {
    if (a.num_splits > 1) {
        decode_merge_kernel<<<a.num_seqs * a.num_q_heads, 128, 0, stream>>>(part_o, part_ml, a.num_splits, a.head_dim,
                                                                            reinterpret_cast<__nv_bfloat16*>(a.o));
        SERVESIM_LAUNCH_CHECK("decode_attention merge");
    }
}

float* part_ml_of(const DecodeAttentionArgs& a) {
    return a.workspace == nullptr ? nullptr
                                  : a.workspace + static_cast<std::size_t>(a.num_seqs) * a.num_q_heads *
                                                      a.num_splits * a.head_dim;
}

// Variant 1: the previous register-streaming kernel (any block_size).
template <int HD, int G, typename KV>
void launch_simple(const DecodeAttentionArgs& a, cudaStream_t stream) {
    const dim3 grid(a.num_kv_heads, a.num_seqs, a.num_splits);
    decode_attention_kernel<HD, G, KV><<<grid, kWarps * 32, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(a.q), static_cast<const KV*>(a.k_cache),
        static_cast<const KV*>(a.v_cache), a.k_scale, a.v_scale, a.block_table, a.max_blocks_per_seq, a.seq_lens,
        a.num_q_heads, a.num_kv_heads, a.block_size, a.scale * 1.4426950408889634f, a.num_splits,
        reinterpret_cast<__nv_bfloat16*>(a.o), a.workspace, part_ml_of(a));
    SERVESIM_LAUNCH_CHECK("decode_attention");
    launch_merge(a, a.workspace, part_ml_of(a), stream);
}

template <int HD, int G, typename KV, int kWarpBytes>
void launch_mma(const DecodeAttentionArgs& a, cudaStream_t stream) {
    using Shape = MmaShape<HD, KV, kWarpBytes>;
    auto* kernel = decode_mma_kernel<HD, G, KV, kWarpBytes>;
    SERVESIM_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes));
    const float unit = sizeof(KV) == 1 ? 256.f : 1.f;  // the 2⁻⁸ of the e4m3 → f16 bit move
    const dim3 grid(a.num_kv_heads, a.num_seqs, a.num_splits);
    kernel<<<grid, Shape::kWarps * 32, Shape::kSmemBytes, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(a.q), static_cast<const KV*>(a.k_cache),
        static_cast<const KV*>(a.v_cache), a.scale * 1.4426950408889634f * a.k_scale * unit, a.v_scale * unit,
        a.block_table, a.max_blocks_per_seq, a.seq_lens, a.num_q_heads, a.num_kv_heads, a.block_size, a.num_splits,
        reinterpret_cast<__nv_bfloat16*>(a.o), a.workspace, part_ml_of(a));
    SERVESIM_LAUNCH_CHECK("decode_attention");
    launch_merge(a, a.workspace, part_ml_of(a), stream);
}

// Variants: 0 = mma pipeline, 24 KiB of stages per warp (default); 1 = previous kernel; 2 = mma, 48 KiB per warp
// (deeper, fewer warps per CTA); 3 = mma, 12 KiB per warp (shallower, more CTAs per SM). block_size not a
// multiple of 16 always takes variant 1.
template <int HD, int G, typename KV>
void launch_decode(const DecodeAttentionArgs& a, cudaStream_t stream) {
    const int variant = a.block_size % kTile == 0 ? a.variant : 1;
    switch (variant) {
        case 0:
            launch_mma<HD, G, KV, 24576>(a, stream);
            break;
        case 1:
            launch_simple<HD, G, KV>(a, stream);
            break;
        case 2:
            launch_mma<HD, G, KV, 49152>(a, stream);
            break;
        case 3:
            launch_mma<HD, G, KV, 12288>(a, stream);
            break;
        default:
            SERVESIM_REQUIRE(false, "decode_attention: variant must be 0..3");
    }
}

template <int HD, typename KV>
void dispatch_group(const DecodeAttentionArgs& a, cudaStream_t s) {
    switch (a.num_q_heads / a.num_kv_heads) {
        case 1:
            launch_decode<HD, 1, KV>(a, s);
            break;
        case 2:
            launch_decode<HD, 2, KV>(a, s);
            break;
        case 4:
            launch_decode<HD, 4, KV>(a, s);
            break;
        case 8:
            launch_decode<HD, 8, KV>(a, s);
            break;
        default:
            SERVESIM_REQUIRE(false, "decode_attention: q heads per kv head must be 1, 2, 4 or 8");
    }
}

template <typename KV>
__global__ void kv_write_kernel(const __nv_bfloat16* __restrict__ k,
                                const __nv_bfloat16* __restrict__ v,
                                KV* __restrict__ kc,
                                KV* __restrict__ vc,
                                float inv_k_scale,
                                float inv_v_scale,
                                const int* __restrict__ slots,
                                int row_elems) {
    const int tok = blockIdx.x;
    const std::size_t slot = static_cast<std::size_t>(slots[tok]);
    for (int c = threadIdx.x * 8; c < row_elems; c += blockDim.x * 8) {
        const std::size_t src = static_cast<std::size_t>(tok) * row_elems + c;
        const std::size_t dst = slot * row_elems + c;
        if constexpr (sizeof(KV) == 2) {
            *reinterpret_cast<uint4*>(kc + dst) = *reinterpret_cast<const uint4*>(k + src);
            *reinterpret_cast<uint4*>(vc + dst) = *reinterpret_cast<const uint4*>(v + src);
        } else {
            const uint4 kr = *reinterpret_cast<const uint4*>(k + src);
            const uint4 vr = *reinterpret_cast<const uint4*>(v + src);
            const auto* kh = reinterpret_cast<const __nv_bfloat162*>(&kr);
            const auto* vh = reinterpret_cast<const __nv_bfloat162*>(&vr);
            __nv_fp8x2_storage_t ko[4];
            __nv_fp8x2_storage_t vo[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float2 kf = __bfloat1622float2(kh[i]);
                float2 vf = __bfloat1622float2(vh[i]);
                kf.x *= inv_k_scale;
                kf.y *= inv_k_scale;
                vf.x *= inv_v_scale;
                vf.y *= inv_v_scale;
                ko[i] = __nv_cvt_float2_to_fp8x2(kf, __NV_SATFINITE, __NV_E4M3);
                vo[i] = __nv_cvt_float2_to_fp8x2(vf, __NV_SATFINITE, __NV_E4M3);
            }
            *reinterpret_cast<uint2*>(kc + dst) = *reinterpret_cast<const uint2*>(ko);
            *reinterpret_cast<uint2*>(vc + dst) = *reinterpret_cast<const uint2*>(vo);
        }
    }
}

}  // namespace

int decode_attention_splits(int num_seqs, int num_kv_heads, int max_context_tokens, int num_sms) {
    const int base = std::max(1, num_seqs * num_kv_heads);
    const int want = (2 * num_sms + base - 1) / base;
    const int max_by_len = std::max(1, max_context_tokens / 256);
    return std::clamp(want, 1, std::min(max_by_len, 64));
}

std::size_t decode_attention_workspace_bytes(int num_seqs, int num_q_heads, int head_dim, int num_splits) {
    if (num_splits <= 1) {
        return 0;
    }
    return static_cast<std::size_t>(num_seqs) * num_q_heads * num_splits * (head_dim + 2) * sizeof(float);
}

void decode_attention(const DecodeAttentionArgs& a, StreamHandle stream) {
    SERVESIM_REQUIRE(a.num_seqs > 0 && a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0,
                     "decode_attention: bad head counts");
    SERVESIM_REQUIRE(a.num_splits >= 1 && (a.num_splits == 1 || a.workspace != nullptr),
                     "decode_attention: num_splits > 1 needs a workspace");
    auto s = static_cast<cudaStream_t>(stream);
    const bool fp8 = a.kv_dtype == KvDtype::kFp8E4m3;
    if (a.head_dim == 128) {
        fp8 ? dispatch_group<128, __nv_fp8_e4m3>(a, s) : dispatch_group<128, __nv_bfloat16>(a, s);
    } else if (a.head_dim == 256) {
        fp8 ? dispatch_group<256, __nv_fp8_e4m3>(a, s) : dispatch_group<256, __nv_bfloat16>(a, s);
    } else {
        SERVESIM_REQUIRE(false, "decode_attention: head_dim must be 128 or 256");
    }
}

void kv_cache_write(const KvWriteArgs& a, StreamHandle stream) {
    SERVESIM_REQUIRE(a.num_tokens > 0 && a.head_dim % 8 == 0, "kv_cache_write: bad sizes");
    const int row = a.num_kv_heads * a.head_dim;
    const int threads = std::min(256, row / 8);
    auto s = static_cast<cudaStream_t>(stream);
    const auto* k = reinterpret_cast<const __nv_bfloat16*>(a.k);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(a.v);
    if (a.kv_dtype == KvDtype::kFp8E4m3) {
        kv_write_kernel<__nv_fp8_e4m3><<<a.num_tokens, threads, 0, s>>>(
            k, v, static_cast<__nv_fp8_e4m3*>(a.k_cache), static_cast<__nv_fp8_e4m3*>(a.v_cache), 1.0f / a.k_scale,
            1.0f / a.v_scale, a.slot_mapping, row);
    } else {
        kv_write_kernel<__nv_bfloat16><<<a.num_tokens, threads, 0, s>>>(k, v, static_cast<__nv_bfloat16*>(a.k_cache),
                                                                        static_cast<__nv_bfloat16*>(a.v_cache), 1.0f,
                                                                        1.0f, a.slot_mapping, row);
    }
    SERVESIM_LAUNCH_CHECK("kv_cache_write");
}

}  // namespace servesim::kernels
