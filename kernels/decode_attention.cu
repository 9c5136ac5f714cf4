// Paged decode attention with split-K (Flash-Decoding / vLLM PagedAttention v2, kernels-and-models.md D.2) and the
// KV-cache write (vLLM reshape_and_cache). One CTA (4 warps) per (kv head, sequence, split) holds the G query heads
// of the group so each K/V element read from HBM serves G heads; groups of HD/8 lanes own one token (8 elements per
// lane: 16-byte bf16 or 8-byte fp8 loads), four tokens per lane group in flight (two for groups of 8); online softmax
// in exp2; partials (normalised O, max, sum) merged by a second kernel when num_splits > 1.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"

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

template <int HD, int G, typename KV>
void launch_decode(const DecodeAttentionArgs& a, cudaStream_t stream) {
    const dim3 grid(a.num_kv_heads, a.num_seqs, a.num_splits);
    float* part_o = a.workspace;
    float* part_ml = a.workspace == nullptr
                         ? nullptr
                         : a.workspace + static_cast<std::size_t>(a.num_seqs) * a.num_q_heads * a.num_splits * HD;
    decode_attention_kernel<HD, G, KV><<<grid, kWarps * 32, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(a.q), static_cast<const KV*>(a.k_cache),
        static_cast<const KV*>(a.v_cache), a.k_scale, a.v_scale, a.block_table, a.max_blocks_per_seq, a.seq_lens,
        a.num_q_heads, a.num_kv_heads, a.block_size, a.scale * 1.4426950408889634f, a.num_splits,
        reinterpret_cast<__nv_bfloat16*>(a.o), part_o, part_ml);
    SERVESIM_LAUNCH_CHECK("decode_attention");
    if (a.num_splits > 1) {
        decode_merge_kernel<<<a.num_seqs * a.num_q_heads, 128, 0, stream>>>(part_o, part_ml, a.num_splits, HD,
                                                                            reinterpret_cast<__nv_bfloat16*>(a.o));
        SERVESIM_LAUNCH_CHECK("decode_attention merge");
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
