// FP8 W8A8 GEMM as vLLM runs an fp8 checkpoint's linear layers on Hopper (Fp8LinearMethod / compressed-tensors
// W8A8Fp8: `scaled_fp8_quant` of the activations, then a scaled fp8 matmul with fp32 accumulation and a bf16
// output; vllm/model_executor/layers/quantization/utils/w8a8_utils.py). The matmul is cuBLASLt's e4m3 × e4m3
// kernel with per-tensor scales (QGMMA on sm_90); vLLM's CUTLASS kernels apply per-token × per-channel scales in
// the epilogue, which changes the epilogue, not the main loop. The activation quantization is dynamic per token:
// one pass for the row's absolute maximum, one to scale and convert (vLLM's dynamic_per_token_scaled_fp8_quant).
// Block-wise fp8 checkpoints (`weight_block_size: [128, 128]`: DeepSeek-V3, Qwen3-*-FP8) run W8A8BlockFp8LinearOp
// (vllm/model_executor/layers/quantization/utils/fp8_utils.py): activations quantized per token and 128-column
// group, then a GEMM that applies the 1×128 activation and 128×128 weight scales inside the main loop (CUTLASS's
// sm90 blockwise kernel or DeepGEMM in vLLM; cuBLASLt's VEC128 × BLK128x128 scale modes here, the same recipe
// that torch._scaled_mm runs on Hopper).
#include <cublas_api.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <map>
#include <tuple>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"

namespace servesim::kernels {

namespace {

struct Fp8Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;  // W  [N,K] row-major = K×N column-major, used transposed
    cublasLtMatrixLayout_t b = nullptr;  // A  [M,K] row-major = K×M column-major
    cublasLtMatrixLayout_t c = nullptr;  // C  [M,N] row-major = N×M column-major (bf16)
    cublasLtMatmulAlgo_t algo{};
};

}  // namespace

struct Fp8GemmRunner::Plans {
    std::map<std::tuple<int, int, int>, Fp8Plan> by_shape;
};

Fp8GemmRunner::Fp8GemmRunner(Fp8Scaling scaling) : plans_(std::make_unique<Plans>()), scaling_(scaling) {
    cublasLtHandle_t h = nullptr;
    SERVESIM_CUBLAS(cublasLtCreate(&h));
    handle_ = h;
    workspace_bytes_ = 32u << 20;
    SERVESIM_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
}

Fp8GemmRunner::~Fp8GemmRunner() {
    for (auto& [shape, p] : plans_->by_shape) {
        cublasLtMatrixLayoutDestroy(p.a);
        cublasLtMatrixLayoutDestroy(p.b);
        cublasLtMatrixLayoutDestroy(p.c);
        cublasLtMatmulDescDestroy(p.desc);
    }
    if (handle_ != nullptr) {
        cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
    }
    if (workspace_ != nullptr) {
        cudaFree(workspace_);
    }
}

void Fp8GemmRunner::run(const fp8_t* a, const fp8_t* w, bf16_t* c, int m, int n, int k, const float* a_scale,
                        const float* w_scale, StreamHandle stream) {
    SERVESIM_REQUIRE(m > 0 && n > 0 && k > 0, "fp8 gemm sizes must be positive");
    SERVESIM_REQUIRE(m % 16 == 0 && k % 16 == 0 && n % 16 == 0,
                     "fp8 gemm: M, N and K must be multiples of 16 (cuBLASLt's fp8 kernels need 16-byte aligned "
                     "dimensions; pad the token count)");
    const bool block = scaling_ == Fp8Scaling::kBlock128;
    SERVESIM_REQUIRE(!block || k % 128 == 0, "fp8 block-scaled gemm: K must be a multiple of 128");
    auto h = static_cast<cublasLtHandle_t>(handle_);
    auto [it, fresh] = plans_->by_shape.try_emplace({m, n, k});
    Fp8Plan& p = it->second;
    if (fresh) {
        SERVESIM_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t t = CUBLAS_OP_T;
        const cublasOperation_t nt = CUBLAS_OP_N;
        SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
        SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
        // Per-tensor: fast accumulation, as vLLM's per-tensor path (torch._scaled_mm use_fast_accum). Block scales
        // are applied per 128-deep K slice in fp32, which is what the blockwise kernels do instead.
        const std::int8_t fast_accum = block ? 0 : 1;
        SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                       sizeof(fast_accum)));
        if (block) {  // cuBLASLt's A is the weight (128×128 tiles), its B the activations (1×128 groups)
#if CUBLAS_VERSION < 120900
            throw std::runtime_error("fp8 block-scaled gemm needs cuBLASLt 12.9 or newer (this build has " +
                                     std::to_string(CUBLAS_VERSION) + ")");
#else
            const cublasLtMatmulMatrixScale_t w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
            const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
            SERVESIM_CUBLAS(
                cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &w_mode, sizeof(w_mode)));
            SERVESIM_CUBLAS(
                cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &a_mode, sizeof(a_mode)));
#endif
        }
        SERVESIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n, k));
        SERVESIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, m, k));
        SERVESIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, n, m, n));
        cublasLtMatmulPreference_t pref = nullptr;
        SERVESIM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
        SERVESIM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes_, sizeof(workspace_bytes_)));
        // The scale pointers must be set before the heuristic so that it returns scale-capable kernels.
        SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                       sizeof(w_scale)));
        SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale,
                                                       sizeof(a_scale)));
        // The first heuristic result the library then actually runs on this shape; tried once per shape, outside
        // any graph capture (warm-up). C is null (beta = 0): the e4m3 kernels refuse an in-place C == D with
        // NOT_SUPPORTED, as torch's scaled_mm also passes no C.
        constexpr int kCandidates = 16;
        cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
        int found = 0;
        const cublasStatus_t st =
            cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates, results, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        const float one = 1.0f;
        const float zero = 0.0f;
        cublasStatus_t last = st;
        bool ok = false;
        for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found && !ok; ++i) {
            last = cublasLtMatmul(h, p.desc, &one, w, p.a, a, p.b, &zero, nullptr, p.c, c, p.c, &results[i].algo,
                                  workspace_, workspace_bytes_, static_cast<cudaStream_t>(stream));
            if (last == CUBLAS_STATUS_SUCCESS) {
                p.algo = results[i].algo;
                ok = true;
            }
        }
        if (!ok) {
            throw std::runtime_error(std::string("fp8 gemm") + (block ? " (block-scaled)" : "") +
                                     ": no cuBLASLt e4m3 kernel runs M=" + std::to_string(m) +
                                     " N=" + std::to_string(n) + " K=" + std::to_string(k) + " (" +
                                     std::to_string(found) + " candidates, last status " + std::to_string(last) +
                                     ")");
        }
    }
    SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                   sizeof(w_scale)));
    SERVESIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale,
                                                   sizeof(a_scale)));
    const float alpha = 1.0f;
    const float beta = 0.0f;
    SERVESIM_CUBLAS(cublasLtMatmul(h, p.desc, &alpha, w, p.a, a, p.b, &beta, nullptr, p.c, c, p.c, &p.algo, workspace_,
                                   workspace_bytes_, static_cast<cudaStream_t>(stream)));
}

namespace {

// One block per token row: the row's absolute maximum, then x / scale as e4m3 (448 = the format's largest finite
// value), scale = max(amax, 1e-12) / 448 stored per row.
__global__ void quantize_fp8_per_token_kernel(const __nv_bfloat16* x, __nv_fp8_e4m3* y, float* scales, int width) {
    __shared__ float red[32];
    const std::size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * width;
    float amax = 0.f;
    for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(xr + i);
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 v = __bfloat1622float2(h[j]);
            amax = fmaxf(amax, fmaxf(fabsf(v.x), fabsf(v.y)));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o));
    }
    if (threadIdx.x % 32 == 0) {
        red[threadIdx.x / 32] = amax;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
            v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
        }
        if (threadIdx.x == 0) {
            red[0] = v;
        }
    }
    __syncthreads();
    const float scale = fmaxf(red[0], 1e-12f) / 448.f;
    const float inv = 1.f / scale;
    if (threadIdx.x == 0) {
        scales[row] = scale;
    }
    __nv_fp8_e4m3* yr = y + row * width;
    for (int i = threadIdx.x * 8; i < width; i += blockDim.x * 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(xr + i);
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
        __nv_fp8_e4m3 out[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 v = __bfloat1622float2(h[j]);
            out[2 * j] = __nv_fp8_e4m3(v.x * inv);
            out[2 * j + 1] = __nv_fp8_e4m3(v.y * inv);
        }
        *reinterpret_cast<uint2*>(yr + i) = *reinterpret_cast<const uint2*>(out);
    }
}

// One block per token row, one half-warp per 128-column group (16 threads × 8 values): the group's absolute
// maximum by shuffles inside the half-warp, then x / scale as e4m3; the scale lands token-contiguous at g·rows + r.
__global__ void quantize_fp8_per_token_group_kernel(const __nv_bfloat16* x, __nv_fp8_e4m3* y, float* scales,
                                                    int rows, int width) {
    const std::size_t row = blockIdx.x;
    const int groups = width / 128;
    const int lane16 = threadIdx.x % 16;
    // Whole warps iterate together (two groups per warp per pass) so that every shuffle has all 32 lanes; a
    // half-warp past the last group computes on zeros and stores nothing.
    const int warps = static_cast<int>(blockDim.x / 32);
    for (int g0 = static_cast<int>(threadIdx.x / 32) * 2; g0 < groups; g0 += warps * 2) {
        const int g = g0 + static_cast<int>(threadIdx.x % 32) / 16;
        const bool active = g < groups;
        const std::size_t off = row * width + static_cast<std::size_t>(g) * 128 + lane16 * 8;
        uint4 raw = make_uint4(0, 0, 0, 0);
        if (active) {
            raw = *reinterpret_cast<const uint4*>(x + off);
        }
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
        float2 v[4];
        float amax = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            v[j] = __bfloat1622float2(h[j]);
            amax = fmaxf(amax, fmaxf(fabsf(v[j].x), fabsf(v[j].y)));
        }
#pragma unroll
        for (int o = 8; o > 0; o /= 2) {  // offsets below 16: stays inside the half-warp's group
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o));
        }
        if (!active) {
            continue;
        }
        const float scale = fmaxf(amax, 1e-12f) / 448.f;
        const float inv = 1.f / scale;
        if (lane16 == 0) {
            scales[static_cast<std::size_t>(g) * rows + row] = scale;
        }
        __nv_fp8_e4m3 out[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[2 * j] = __nv_fp8_e4m3(v[j].x * inv);
            out[2 * j + 1] = __nv_fp8_e4m3(v[j].y * inv);
        }
        *reinterpret_cast<uint2*>(y + off) = *reinterpret_cast<const uint2*>(out);
    }
}

}  // namespace

void quantize_fp8_per_token_group(const bf16_t* x, fp8_t* y, float* scales, int rows, int width,
                                  StreamHandle stream) {
    SERVESIM_REQUIRE(rows > 0 && rows % 4 == 0 && width > 0 && width % 128 == 0,
                     "quantize_fp8_per_token_group: rows must be a multiple of 4 and width of 128");
    // 256 threads = 16 groups in flight per row; a full warp's lanes always run together (the shuffles).
    const int threads = width >= 2048 ? 256 : 128;
    quantize_fp8_per_token_group_kernel<<<rows, threads, 0, static_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x), reinterpret_cast<__nv_fp8_e4m3*>(y), scales, rows, width);
    SERVESIM_LAUNCH_CHECK("quantize_fp8_per_token_group");
}

void quantize_fp8_per_token(const bf16_t* x, fp8_t* y, float* scales, int rows, int width, StreamHandle stream) {
    SERVESIM_REQUIRE(rows > 0 && width % 8 == 0, "quantize_fp8_per_token: width must be a multiple of 8");
    const int threads = width >= 2048 ? 256 : 128;
    quantize_fp8_per_token_kernel<<<rows, threads, 0, static_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x), reinterpret_cast<__nv_fp8_e4m3*>(y), scales, width);
    SERVESIM_LAUNCH_CHECK("quantize_fp8_per_token");
}

}  // namespace servesim::kernels
