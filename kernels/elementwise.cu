// Memory-bound small ops timed by calibration: causal depthwise conv1d (+SiLU) prefill (16-byte vectors, tokens
// per thread; the scalar kernel kept as variant 1) and single-step update,
// RMSNorm (optionally fused with the residual add, vLLM fused_add_rms_norm), SiLU·mul, neox RoPE (partial rotary),
// greedy argmax sampling and the embedding gather. One thread per element or a block per row; fp32 math.
#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"

namespace servesim::kernels {

namespace {

constexpr int kConvK = 4;

__device__ __forceinline__ float silu(float x) {
    return x / (1.f + __expf(-x));
}

__device__ __forceinline__ const __nv_bfloat16* bf(const bf16_t* p) {
    return reinterpret_cast<const __nv_bfloat16*>(p);
}

__device__ __forceinline__ __nv_bfloat16* bf(bf16_t* p) {
    return reinterpret_cast<__nv_bfloat16*>(p);
}

__global__ void conv1d_prefill_kernel(const bf16_t* x,
                                      const bf16_t* w,
                                      const bf16_t* state,
                                      bool use_state,
                                      bf16_t* y,
                                      int seq_len,
                                      int channels,
                                      std::size_t total) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= total) {
        return;
    }
    const int c = static_cast<int>(idx % channels);
    const std::size_t row = idx / channels;
    const int seq = static_cast<int>(row / seq_len);
    const int t = static_cast<int>(row % seq_len);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kConvK; ++j) {
        const int src_t = t - (kConvK - 1) + j;
        float xv = 0.f;
        if (src_t >= 0) {
            xv = __bfloat162float(bf(x)[(row - (kConvK - 1) + j) * channels + c]);
        } else if (use_state) {
            xv = __bfloat162float(
                bf(state)[(static_cast<std::size_t>(seq) * (kConvK - 1) + (kConvK - 1 + src_t)) * channels + c]);
        }
        acc += __bfloat162float(bf(w)[static_cast<std::size_t>(c) * kConvK + j]) * xv;
    }
    bf(y)[idx] = __float2bfloat16(silu(acc));
}

// Vectorised prefill (variant 0): thread = 8 channels (one 16-byte vector) × kConvTok consecutive tokens of one
// sequence. All kConvTok input vectors are loaded before any math so each thread has them in flight together; the
// 3-token history comes from the previous tile's rows (L2 hits) or the conv state, and slides in registers.
constexpr int kConvTok = 16;
constexpr int kConvThreads = 128;

__device__ __forceinline__ void unpack8(const uint4& raw, float (&f)[8]) {
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 p = __bfloat1622float2(h[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}

__global__ void __launch_bounds__(kConvThreads) conv1d_prefill_vec_kernel(const bf16_t* __restrict__ x,
                                                                          const bf16_t* __restrict__ w,
                                                                          const bf16_t* __restrict__ state,
                                                                          bool use_state,
                                                                          bf16_t* __restrict__ y,
                                                                          int seq_len,
                                                                          int channels,
                                                                          int tiles_per_seq) {
    const int c = (blockIdx.y * kConvThreads + threadIdx.x) * 8;
    if (c >= channels) {
        return;
    }
    const int seq = blockIdx.x / tiles_per_seq;
    const int t0 = (blockIdx.x % tiles_per_seq) * kConvTok;
    const std::size_t row0 = static_cast<std::size_t>(seq) * seq_len;
    uint4 xr[kConvTok];
#pragma unroll
    for (int i = 0; i < kConvTok; ++i) {
        xr[i] = t0 + i < seq_len
                    ? *reinterpret_cast<const uint4*>(bf(x) + (row0 + t0 + i) * channels + c)
                    : make_uint4(0u, 0u, 0u, 0u);
    }
    float hist[kConvK - 1][8];  // inputs t0−3, t0−2, t0−1
#pragma unroll
    for (int j = 0; j < kConvK - 1; ++j) {
        const int src_t = t0 - (kConvK - 1) + j;
        uint4 raw = make_uint4(0u, 0u, 0u, 0u);
        if (src_t >= 0) {
            raw = *reinterpret_cast<const uint4*>(bf(x) + (row0 + src_t) * channels + c);
        } else if (use_state) {
            raw = *reinterpret_cast<const uint4*>(
                bf(state) + (static_cast<std::size_t>(seq) * (kConvK - 1) + (kConvK - 1 + src_t)) * channels + c);
        }
        unpack8(raw, hist[j]);
    }
    float wf[8][kConvK];  // channel c+i, tap j: weight [C, 4] row-major, so 32 contiguous values
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        float f[8];
        unpack8(*reinterpret_cast<const uint4*>(bf(w) + static_cast<std::size_t>(c) * kConvK + q * 8), f);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            wf[(q * 8 + e) / kConvK][(q * 8 + e) % kConvK] = f[e];
        }
    }
#pragma unroll
    for (int i = 0; i < kConvTok; ++i) {
        float cur[8];
        unpack8(xr[i], cur);
        uint4 out;
        auto* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            float acc[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int ch = e + u;
                float a = 0.f;
                a += wf[ch][0] * hist[0][ch];
                a += wf[ch][1] * hist[1][ch];
                a += wf[ch][2] * hist[2][ch];
                a += wf[ch][3] * cur[ch];
                acc[u] = silu(a);
            }
            o[e / 2] = __floats2bfloat162_rn(acc[0], acc[1]);
        }
        if (t0 + i < seq_len) {
            *reinterpret_cast<uint4*>(bf(y) + (row0 + t0 + i) * channels + c) = out;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            hist[0][e] = hist[1][e];
            hist[1][e] = hist[2][e];
            hist[2][e] = cur[e];
        }
    }
}

__global__ void conv1d_state_kernel(
    const bf16_t* x, bf16_t* state, bool use_state, int seq_len, int channels, int num_seqs) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= static_cast<std::size_t>(num_seqs) * channels) {
        return;
    }
    const int c = static_cast<int>(idx % channels);
    const int seq = static_cast<int>(idx / channels);
    float old[kConvK - 1];
#pragma unroll
    for (int j = 0; j < kConvK - 1; ++j) {
        old[j] = use_state
                     ? __bfloat162float(bf(state)[(static_cast<std::size_t>(seq) * (kConvK - 1) + j) * channels + c])
                     : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kConvK - 1; ++j) {
        const int src_t = seq_len - (kConvK - 1) + j;  // index into this sequence's inputs
        const float v = src_t >= 0
                            ? __bfloat162float(bf(x)[(static_cast<std::size_t>(seq) * seq_len + src_t) * channels + c])
                            : old[kConvK - 1 + src_t];
        bf(state)[(static_cast<std::size_t>(seq) * (kConvK - 1) + j) * channels + c] = __float2bfloat16(v);
    }
}

__global__ void conv1d_update_kernel(
    const bf16_t* x, const bf16_t* w, bf16_t* state, bf16_t* y, int channels, std::size_t total) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= total) {
        return;
    }
    const int c = static_cast<int>(idx % channels);
    const std::size_t seq = idx / channels;
    float win[kConvK];
#pragma unroll
    for (int j = 0; j < kConvK - 1; ++j) {
        win[j] = __bfloat162float(bf(state)[(seq * (kConvK - 1) + j) * channels + c]);
    }
    win[kConvK - 1] = __bfloat162float(bf(x)[idx]);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kConvK; ++j) {
        acc += __bfloat162float(bf(w)[static_cast<std::size_t>(c) * kConvK + j]) * win[j];
    }
#pragma unroll
    for (int j = 0; j < kConvK - 1; ++j) {
        bf(state)[(seq * (kConvK - 1) + j) * channels + c] = __float2bfloat16(win[j + 1]);
    }
    bf(y)[idx] = __float2bfloat16(silu(acc));
}

__global__ void rms_norm_kernel(const bf16_t* x, bf16_t* residual, const bf16_t* w, bf16_t* y, int width, float eps) {
    __shared__ float red[32];
    const std::size_t row = blockIdx.x;
    const __nv_bfloat16* xr = bf(x) + row * width;
    __nv_bfloat16* rr = residual != nullptr ? bf(residual) + row * width : nullptr;
    float ss = 0.f;
    for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
        uint4 raw = *reinterpret_cast<const uint4*>(xr + i);
        auto* h = reinterpret_cast<__nv_bfloat162*>(&raw);
        if (rr != nullptr) {
            const uint4 rraw = *reinterpret_cast<const uint4*>(rr + i);
            const auto* rh = reinterpret_cast<const __nv_bfloat162*>(&rraw);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 a = __bfloat1622float2(h[j]);
                const float2 b = __bfloat1622float2(rh[j]);
                h[j] = __floats2bfloat162_rn(a.x + b.x, a.y + b.y);
            }
            *reinterpret_cast<uint4*>(rr + i) = raw;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 a = __bfloat1622float2(h[j]);
            ss += a.x * a.x + a.y * a.y;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        ss += __shfl_xor_sync(0xffffffff, ss, o);
    }
    if (threadIdx.x % 32 == 0) {
        red[threadIdx.x / 32] = ss;
    }
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) {
        total += red[i];
    }
    const float inv = rsqrtf(total / width + eps);
    const __nv_bfloat16* src = rr != nullptr ? rr : xr;
    for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(src + i);
        const uint4 wraw = *reinterpret_cast<const uint4*>(bf(w) + i);
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
        const auto* wh = reinterpret_cast<const __nv_bfloat162*>(&wraw);
        uint4 out;
        auto* oh = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 a = __bfloat1622float2(h[j]);
            const float2 b = __bfloat1622float2(wh[j]);
            oh[j] = __floats2bfloat162_rn(a.x * inv * b.x, a.y * inv * b.y);
        }
        *reinterpret_cast<uint4*>(bf(y) + row * width + i) = out;
    }
}

__global__ void silu_mul_kernel(const bf16_t* x, bf16_t* y, int width, std::size_t total8) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= total8) {
        return;
    }
    const std::size_t e = idx * 8;
    const std::size_t row = e / width;
    const std::size_t col = e % width;
    const uint4 graw = *reinterpret_cast<const uint4*>(bf(x) + row * 2 * width + col);
    const uint4 uraw = *reinterpret_cast<const uint4*>(bf(x) + row * 2 * width + width + col);
    const auto* gh = reinterpret_cast<const __nv_bfloat162*>(&graw);
    const auto* uh = reinterpret_cast<const __nv_bfloat162*>(&uraw);
    uint4 out;
    auto* oh = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 a = __bfloat1622float2(gh[j]);
        const float2 b = __bfloat1622float2(uh[j]);
        oh[j] = __floats2bfloat162_rn(silu(a.x) * b.x, silu(a.y) * b.y);
    }
    *reinterpret_cast<uint4*>(bf(y) + e) = out;
}

__global__ void rope_kernel(
    bf16_t* x, const int* positions, int heads, int head_dim, int rot_dim, float log2_theta, std::size_t total) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= total) {
        return;
    }
    const int half = rot_dim / 2;
    const int i = static_cast<int>(idx % half);
    const std::size_t th = idx / half;  // token·heads + head
    const std::size_t tok = th / heads;
    const float inv_freq = exp2f(-log2_theta * (2.f * i) / rot_dim);
    float sn = 0.f;
    float cs = 0.f;
    __sincosf(static_cast<float>(positions[tok]) * inv_freq, &sn, &cs);
    __nv_bfloat16* p = bf(x) + th * head_dim;
    const float a = __bfloat162float(p[i]);
    const float b = __bfloat162float(p[i + half]);
    p[i] = __float2bfloat16(a * cs - b * sn);
    p[i + half] = __float2bfloat16(b * cs + a * sn);
}

__global__ void argmax_kernel(const bf16_t* logits, int* out, int vocab) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const std::size_t row = blockIdx.x;
    float best = -FLT_MAX;
    int best_i = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = __bfloat162float(bf(logits)[row * vocab + i]);
        if (v > best) {
            best = v;
            best_i = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        const float ov = __shfl_xor_sync(0xffffffff, best, o);
        const int oi = __shfl_xor_sync(0xffffffff, best_i, o);
        if (ov > best || (ov == best && oi < best_i)) {
            best = ov;
            best_i = oi;
        }
    }
    if (threadIdx.x % 32 == 0) {
        sv[threadIdx.x / 32] = best;
        si[threadIdx.x / 32] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
            if (sv[w] > best || (sv[w] == best && si[w] < best_i)) {
                best = sv[w];
                best_i = si[w];
            }
        }
        out[row] = best_i;
    }
}

__global__ void gather_kernel(const bf16_t* table, const int* ids, bf16_t* out, int width8, std::size_t total8) {
    const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (idx >= total8) {
        return;
    }
    const std::size_t tok = idx / width8;
    const std::size_t c = idx % width8;
    reinterpret_cast<uint4*>(out)[idx] =
        reinterpret_cast<const uint4*>(table)[static_cast<std::size_t>(ids[tok]) * width8 + c];
}

unsigned blocks_for(std::size_t n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

void conv1d_prefill(const bf16_t* x,
                    const bf16_t* weight,
                    bf16_t* conv_state,
                    bool use_initial_state,
                    bf16_t* y,
                    int num_seqs,
                    int seq_len,
                    int channels,
                    StreamHandle stream,
                    int variant) {
    SERVESIM_REQUIRE(num_seqs > 0 && seq_len > 0 && channels > 0, "conv1d_prefill: bad sizes");
    SERVESIM_REQUIRE(variant == 0 || variant == 1, "conv1d_prefill: variant must be 0 (vector) or 1 (scalar)");
    auto s = static_cast<cudaStream_t>(stream);
    auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vec = variant == 0 && channels % 8 == 0 && aligned16(x) && aligned16(weight) && aligned16(y) &&
                     (!use_initial_state || aligned16(conv_state));
    if (vec) {
        const int tiles_per_seq = (seq_len + kConvTok - 1) / kConvTok;
        const dim3 grid(static_cast<unsigned>(num_seqs) * tiles_per_seq,
                        (channels / 8 + kConvThreads - 1) / kConvThreads);
        conv1d_prefill_vec_kernel<<<grid, kConvThreads, 0, s>>>(x, weight, conv_state, use_initial_state, y, seq_len,
                                                                channels, tiles_per_seq);
        SERVESIM_LAUNCH_CHECK("conv1d_prefill (vector)");
    } else {
        const std::size_t total = static_cast<std::size_t>(num_seqs) * seq_len * channels;
        conv1d_prefill_kernel<<<blocks_for(total, 256), 256, 0, s>>>(x, weight, conv_state, use_initial_state, y,
                                                                     seq_len, channels, total);
        SERVESIM_LAUNCH_CHECK("conv1d_prefill");
    }
    if (conv_state != nullptr) {
        conv1d_state_kernel<<<blocks_for(static_cast<std::size_t>(num_seqs) * channels, 256), 256, 0, s>>>(
            x, conv_state, use_initial_state, seq_len, channels, num_seqs);
        SERVESIM_LAUNCH_CHECK("conv1d_prefill state");
    }
}

void conv1d_update(const bf16_t* x,
                   const bf16_t* weight,
                   bf16_t* conv_state,
                   bf16_t* y,
                   int num_seqs,
                   int channels,
                   StreamHandle stream) {
    SERVESIM_REQUIRE(num_seqs > 0 && channels > 0, "conv1d_update: bad sizes");
    const std::size_t total = static_cast<std::size_t>(num_seqs) * channels;
    conv1d_update_kernel<<<blocks_for(total, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, weight, conv_state,
                                                                                                y, channels, total);
    SERVESIM_LAUNCH_CHECK("conv1d_update");
}

void rms_norm(const bf16_t* x,
              bf16_t* residual,
              const bf16_t* weight,
              bf16_t* y,
              int rows,
              int width,
              float eps,
              StreamHandle stream) {
    SERVESIM_REQUIRE(rows > 0 && width % 8 == 0, "rms_norm: width must be a multiple of 8");
    const int threads = width >= 2048 ? 256 : 128;
    rms_norm_kernel<<<rows, threads, 0, static_cast<cudaStream_t>(stream)>>>(x, residual, weight, y, width, eps);
    SERVESIM_LAUNCH_CHECK("rms_norm");
}

void silu_mul(const bf16_t* x, bf16_t* y, int rows, int width, StreamHandle stream) {
    SERVESIM_REQUIRE(rows > 0 && width % 8 == 0, "silu_mul: width must be a multiple of 8");
    const std::size_t total8 = static_cast<std::size_t>(rows) * width / 8;
    silu_mul_kernel<<<blocks_for(total8, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, width, total8);
    SERVESIM_LAUNCH_CHECK("silu_mul");
}

void rope(bf16_t* x,
          const int* positions,
          int tokens,
          int heads,
          int head_dim,
          int rot_dim,
          float theta,
          StreamHandle stream) {
    SERVESIM_REQUIRE(tokens > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "rope: bad sizes");
    const std::size_t total = static_cast<std::size_t>(tokens) * heads * (rot_dim / 2);
    rope_kernel<<<blocks_for(total, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        x, positions, heads, head_dim, rot_dim, std::log2(theta), total);
    SERVESIM_LAUNCH_CHECK("rope");
}

void argmax_rows(const bf16_t* logits, int* tokens, int rows, int vocab, StreamHandle stream) {
    SERVESIM_REQUIRE(rows > 0 && vocab > 0, "argmax_rows: bad sizes");
    argmax_kernel<<<rows, 1024, 0, static_cast<cudaStream_t>(stream)>>>(logits, tokens, vocab);
    SERVESIM_LAUNCH_CHECK("argmax_rows");
}

void embedding_gather(const bf16_t* table, const int* ids, bf16_t* out, int tokens, int width, StreamHandle stream) {
    SERVESIM_REQUIRE(tokens > 0 && width % 8 == 0, "embedding_gather: bad sizes");
    const std::size_t total8 = static_cast<std::size_t>(tokens) * width / 8;
    gather_kernel<<<blocks_for(total8, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(table, ids, out, width / 8,
                                                                                          total8);
    SERVESIM_LAUNCH_CHECK("embedding_gather");
}

}  // namespace servesim::kernels
