// The mixture-of-experts layer (kernels.h MoeRunner), step by step as vLLM's FusedMoE runs it
// (vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts): router GEMM, top-k over the softmax
// (csrc/moe/topk_softmax_kernels.cu, renormalised when norm_topk_prob), rows permuted into expert order
// (moe_align_block_size / moe_permute), expert gate_up and down GEMMs (cuBLAS grouped GEMM here, vLLM's Triton
// fused_moe_kernel there), SiLU·mul, the weighted un-permute sum (moe_sum), plus the shared expert scaled by
// sigmoid(shared_expert_gate(x)) (Qwen3NextSparseMoeBlock). Owns the kernels and the grouping; not the routing policy.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/gpu_runtime.h"
#include "kernels/kernels.h"

namespace servesim::kernels {

namespace {

constexpr int kThreads = 128;  // every kernel here: a multiple of 32 (block reductions)

__device__ __forceinline__ float bf2f(bf16_t v) {
    return __uint_as_float(static_cast<unsigned>(v) << 16);
}

// Sum or max over the block; every thread gets the result. `scratch` holds 32 floats.
__device__ float block_reduce(float v, bool is_max, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    __syncthreads();  // scratch free from a previous reduction
    if ((threadIdx.x & 31) == 0) {
        scratch[threadIdx.x >> 5] = v;
    }
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) {
        v = is_max ? fmaxf(v, scratch[w]) : v + scratch[w];
    }
    return v;
}

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);  // larger logit first, ties to the lower expert id
}

// Largest (value, index) over the block, ties to the lower index; every thread gets the result.
__device__ void block_argmax(float& v, int& i, float* sv, int* si) {
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        const int j = __shfl_xor_sync(0xffffffffu, i, o);
        if (better(u, j, v, i)) {
            v = u;
            i = j;
        }
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        sv[threadIdx.x >> 5] = v;
        si[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    v = sv[0];
    i = si[0];
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) {
        if (better(sv[w], si[w], v, i)) {
            v = sv[w];
            i = si[w];
        }
    }
}

// One block per token: softmax over E logits, the k largest (selection on logits = on probabilities), their
// probabilities renormalised to sum 1 when `renormalize` (vLLM fused_topk / topk_softmax).
__global__ void topk_softmax_kernel(
    const bf16_t* logits, int num_experts, int top_k, bool renormalize, int* topk_ids, float* topk_weights) {
    extern __shared__ float s_logit[];  // [E]
    __shared__ float scratch[32];
    __shared__ int scratch_i[32];
    __shared__ float s_prob[32];
    const std::size_t t = blockIdx.x;
    const bf16_t* row = logits + t * num_experts;
    float mx = -INFINITY;
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
        s_logit[e] = bf2f(row[e]);
        mx = fmaxf(mx, s_logit[e]);
    }
    mx = block_reduce(mx, true, scratch);
    float sum = 0;
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
        sum += expf(s_logit[e] - mx);
    }
    sum = block_reduce(sum, false, scratch);
    for (int j = 0; j < top_k; ++j) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
            if (better(s_logit[e], e, bv, bi)) {
                bv = s_logit[e];
                bi = e;
            }
        }
        block_argmax(bv, bi, scratch, scratch_i);
        if (threadIdx.x == 0) {
            s_prob[j] = expf(bv - mx) / sum;
            topk_ids[t * top_k + j] = bi;
            s_logit[bi] = -INFINITY;
        }
        __syncthreads();
    }
    if (threadIdx.x < top_k) {
        float denom = 1.0f;
        if (renormalize) {
            denom = 0;
            for (int j = 0; j < top_k; ++j) {
                denom += s_prob[j];
            }
        }
        topk_weights[t * top_k + threadIdx.x] = s_prob[threadIdx.x] / denom;
    }
}

// xp[p] = x[src_token[p]]: rows of `hidden` (a multiple of 8) copied 16 bytes at a time.
__global__ void permute_kernel(const bf16_t* x, const int* src_token, bf16_t* xp, int hidden) {
    const std::size_t p = blockIdx.x;
    const auto* src = reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(src_token[p]) * hidden);
    auto* dst = reinterpret_cast<uint4*>(xp + p * hidden);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
        dst[i] = src[i];
    }
}

struct PtrBases {
    const bf16_t* w13;
    const bf16_t* w2;
    const bf16_t* xp;
    bf16_t* h1;
    const bf16_t* act;
    bf16_t* y;
    int hidden;
    int inter;
};

// The six pointer arrays of the two grouped GEMMs, written on the device from pointers passed by value, so a captured
// graph carries its own bases: [A1 | B1 | C1 | A2 | B2 | C2], n entries each, in group order.
__global__ void pointer_arrays_kernel(PtrBases b, const int* group_expert, const int* group_offset, int n,
                                      void** ptrs) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const std::size_t e = group_expert[i];
    const std::size_t off = group_offset[i];
    const std::size_t h = b.hidden;
    const std::size_t inter = b.inter;
    ptrs[i] = const_cast<bf16_t*>(b.w13 + e * 2 * inter * h);
    ptrs[n + i] = const_cast<bf16_t*>(b.xp + off * h);
    ptrs[2 * n + i] = b.h1 + off * 2 * inter;
    ptrs[3 * n + i] = const_cast<bf16_t*>(b.w2 + e * h * inter);
    ptrs[4 * n + i] = const_cast<bf16_t*>(b.act + off * inter);
    ptrs[5 * n + i] = b.y + off * h;
}

__device__ __forceinline__ void add8(float* acc, uint4 raw, float w) {
    const auto* v = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(v[j]);
        acc[2 * j] += w * f.x;
        acc[2 * j + 1] += w * f.y;
    }
}

// One block per token: out[t] = Σ_j w[t,j] · y[pos[t,j]] + sigmoid(x[t] · w_gate) · shared[t] (vLLM moe_sum, then
// Qwen3NextSparseMoeBlock adds the gated shared expert). Sums in fp32, one bf16 rounding at the end.
__global__ void combine_kernel(const bf16_t* y,
                               const int* inv_pos,
                               const float* topk_w,
                               int top_k,
                               const bf16_t* shared_out,
                               const bf16_t* x,
                               const bf16_t* shared_gate,
                               bf16_t* out,
                               int hidden) {
    __shared__ float scratch[32];
    const std::size_t t = blockIdx.x;
    const std::size_t h = hidden;
    float gate = 1.0f;
    if (shared_gate != nullptr) {
        float part = 0;
        for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
            part += bf2f(x[t * h + c]) * bf2f(shared_gate[c]);
        }
        gate = 1.0f / (1.0f + expf(-block_reduce(part, false, scratch)));
    }
    for (int c8 = threadIdx.x; c8 < hidden / 8; c8 += blockDim.x) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < top_k; ++j) {
            const std::size_t p = inv_pos[t * top_k + j];
            add8(acc, reinterpret_cast<const uint4*>(y + p * h)[c8], topk_w[t * top_k + j]);
        }
        if (shared_out != nullptr) {
            add8(acc, reinterpret_cast<const uint4*>(shared_out + t * h)[c8], gate);
        }
        uint4 o;
        auto* oh = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            oh[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
        }
        reinterpret_cast<uint4*>(out + t * h)[c8] = o;
    }
}

// C[M,N] = A[M,K] · W[N,K]ᵀ, row-major (the GemmRunner convention), on `h`'s current stream.
void linear(cublasHandle_t h, const bf16_t* a, const bf16_t* w, bf16_t* c, int m, int n, int k) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    SERVESIM_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, a, CUDA_R_16BF, k,
                                 &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

std::vector<int> moe_random_routing(int num_tokens, int top_k, int num_experts, std::uint64_t seed) {
    if (num_tokens < 0 || top_k <= 0 || top_k > num_experts) {
        throw std::runtime_error("moe_random_routing: need 0 < top_k <= num_experts");
    }
    std::mt19937_64 rng(seed);
    std::vector<int> ids(static_cast<std::size_t>(num_tokens) * top_k);
    for (int t = 0; t < num_tokens; ++t) {
        int* row = ids.data() + static_cast<std::size_t>(t) * top_k;
        for (int j = 0; j < top_k; ++j) {
            int e = 0;
            do {
                e = static_cast<int>(rng() % static_cast<std::uint64_t>(num_experts));
            } while (std::find(row, row + j, e) != row + j);
            row[j] = e;
        }
    }
    return ids;
}

struct MoeRunner::State {
    MoeShape shape;
    int max_tokens = 0;
    cublasHandle_t handle = nullptr;
    DeviceBuffer workspace;
    DeviceBuffer logits, topk_ids, topk_w;            // route()
    DeviceBuffer src_token, inv_pos;                  // grouping: [T·k] each
    DeviceBuffer group_expert, group_offset, ptrs;    // active experts in group order; 6 pointer arrays
    DeviceBuffer xp, h1, act, y;                      // permuted rows [T·k, h], [T·k, 2I], [T·k, I], [T·k, h]
    DeviceBuffer sh1, sact, sout;                     // shared expert [T, 2Is], [T, Is], [T, h]
    // Current grouping (set_routing).
    int num_tokens = 0;
    std::vector<int> host_expert, host_offset;        // active experts in group order
    std::vector<int> group_rows, group_size;          // coalesced groups: rows per expert, experts in the group
    MoeGemmMode mode = MoeGemmMode::kGrouped;
    bool probed = false;
    // Host arrays of the grouped calls (kept alive for cuBLAS).
    std::vector<cublasOperation_t> op_t, op_n;
    std::vector<int> m1, k1, m2, k2;
    std::vector<float> alpha, beta;

    void grouped(const MoeWeights& w, cudaStream_t s);
};

MoeRunner::MoeRunner(const MoeShape& shape, int max_tokens) : s_(std::make_unique<State>()) {
    SERVESIM_REQUIRE(shape.hidden > 0 && shape.hidden % 8 == 0, "moe: hidden must be a positive multiple of 8");
    SERVESIM_REQUIRE(shape.intermediate > 0 && shape.intermediate % 8 == 0,
                     "moe: intermediate must be a positive multiple of 8");
    SERVESIM_REQUIRE(shape.shared_intermediate % 8 == 0, "moe: shared intermediate must be a multiple of 8");
    SERVESIM_REQUIRE(shape.top_k > 0 && shape.top_k <= 32 && shape.top_k <= shape.num_experts,
                     "moe: need 0 < top_k <= min(32, num_experts)");
    SERVESIM_REQUIRE(max_tokens > 0, "moe: max_tokens must be positive");
    State& s = *s_;
    s.shape = shape;
    s.max_tokens = max_tokens;
    SERVESIM_CUBLAS(cublasCreate(&s.handle));
    s.workspace = DeviceBuffer(32u << 20);
    SERVESIM_CUBLAS(cublasSetWorkspace(s.handle, s.workspace.get(), s.workspace.bytes()));
    const std::size_t t = max_tokens;
    const std::size_t tk = t * shape.top_k;
    const std::size_t h = shape.hidden;
    const std::size_t e = shape.num_experts;
    const std::size_t inter = shape.intermediate;
    const std::size_t is = shape.shared_intermediate;
    s.logits = DeviceBuffer(t * e * 2);
    s.topk_ids = DeviceBuffer(tk * 4);
    s.topk_w = DeviceBuffer(tk * 4);
    s.src_token = DeviceBuffer(tk * 4);
    s.inv_pos = DeviceBuffer(tk * 4);
    s.group_expert = DeviceBuffer(e * 4);
    s.group_offset = DeviceBuffer(e * 4);
    s.ptrs = DeviceBuffer(6 * e * sizeof(void*));
    s.xp = DeviceBuffer(tk * h * 2);
    s.h1 = DeviceBuffer(tk * 2 * inter * 2);
    s.act = DeviceBuffer(tk * inter * 2);
    s.y = DeviceBuffer(tk * h * 2);
    if (is > 0) {
        s.sh1 = DeviceBuffer(t * 2 * is * 2);
        s.sact = DeviceBuffer(t * is * 2);
        s.sout = DeviceBuffer(t * h * 2);
    }
}

MoeRunner::~MoeRunner() {
    if (s_ && s_->handle != nullptr) {
        cublasDestroy(s_->handle);
    }
}

void MoeRunner::route(const bf16_t* x, int num_tokens, const MoeWeights& w, StreamHandle stream) {
    State& s = *s_;
    SERVESIM_REQUIRE(num_tokens > 0 && num_tokens <= s.max_tokens, "moe route: tokens outside 1..max_tokens");
    SERVESIM_REQUIRE(w.router != nullptr, "moe route: no router weights");
    auto st = static_cast<cudaStream_t>(stream);
    SERVESIM_CUBLAS(cublasSetStream(s.handle, st));
    linear(s.handle, x, w.router, s.logits.as<bf16_t>(), num_tokens, s.shape.num_experts, s.shape.hidden);
    const std::size_t smem = static_cast<std::size_t>(s.shape.num_experts) * 4;
    topk_softmax_kernel<<<num_tokens, kThreads, smem, st>>>(s.logits.as<bf16_t>(), s.shape.num_experts,
                                                            s.shape.top_k, s.shape.norm_topk_prob,
                                                            s.topk_ids.as<int>(), s.topk_w.as<float>());
    SERVESIM_LAUNCH_CHECK("moe topk_softmax");
}

void MoeRunner::set_routing(const int* ids, int num_tokens) {
    State& s = *s_;
    SERVESIM_REQUIRE(num_tokens > 0 && num_tokens <= s.max_tokens, "moe set_routing: tokens outside 1..max_tokens");
    const int k = s.shape.top_k;
    const int ne = s.shape.num_experts;
    const std::size_t tk = static_cast<std::size_t>(num_tokens) * k;
    // Counts and offsets in expert-id order, rows of one expert in token order (vLLM moe_align_block_size sorts
    // token slots by expert the same way, without the block padding a Triton tile needs).
    std::vector<int> count(ne, 0);
    for (std::size_t i = 0; i < tk; ++i) {
        SERVESIM_REQUIRE(ids[i] >= 0 && ids[i] < ne, "moe set_routing: expert id out of range");
        ++count[ids[i]];
    }
    std::vector<int> offset(ne + 1, 0);
    for (int e = 0; e < ne; ++e) {
        offset[e + 1] = offset[e] + count[e];
    }
    std::vector<int> fill(offset.begin(), offset.end() - 1);
    std::vector<int> src_token(tk);
    std::vector<int> inv_pos(tk);
    for (std::size_t i = 0; i < tk; ++i) {
        const int p = fill[ids[i]]++;
        src_token[p] = static_cast<int>(i / k);
        inv_pos[i] = p;
    }
    // Active experts sorted by row count: experts with equal counts form one cuBLAS group (same m, n, k).
    std::vector<int> active;
    for (int e = 0; e < ne; ++e) {
        if (count[e] > 0) {
            active.push_back(e);
        }
    }
    std::stable_sort(active.begin(), active.end(), [&](int a, int b) { return count[a] < count[b]; });
    s.host_expert = active;
    s.host_offset.clear();
    s.group_rows.clear();
    s.group_size.clear();
    for (int e : active) {
        s.host_offset.push_back(offset[e]);
        if (s.group_rows.empty() || s.group_rows.back() != count[e]) {
            s.group_rows.push_back(count[e]);
            s.group_size.push_back(0);
        }
        ++s.group_size.back();
    }
    copy_to_device(s.src_token.get(), src_token.data(), tk * 4);
    copy_to_device(s.inv_pos.get(), inv_pos.data(), tk * 4);
    copy_to_device(s.group_expert.get(), s.host_expert.data(), s.host_expert.size() * 4);
    copy_to_device(s.group_offset.get(), s.host_offset.data(), s.host_offset.size() * 4);
    const std::size_t g = s.group_rows.size();
    s.op_t.assign(g, CUBLAS_OP_T);
    s.op_n.assign(g, CUBLAS_OP_N);
    s.m1.assign(g, 2 * s.shape.intermediate);
    s.k1.assign(g, s.shape.hidden);
    s.m2.assign(g, s.shape.hidden);
    s.k2.assign(g, s.shape.intermediate);
    s.alpha.assign(g, 1.0f);
    s.beta.assign(g, 0.0f);
    s.num_tokens = num_tokens;
}

// Column-major view of each expert's row-major C[m_e, N] = A[m_e, K] · W_e[N, K]ᵀ: Cᵀ = W_e · Aᵀ, so cuBLAS m = N,
// n = m_e (the group's rows), k = K, A = W_e transposed, as in GemmRunner.
void MoeRunner::State::grouped(const MoeWeights& w, cudaStream_t st) {
    const int n = static_cast<int>(host_expert.size());
    const int g = static_cast<int>(group_rows.size());
    PtrBases b{w.w13, w.w2, xp.as<bf16_t>(), h1.as<bf16_t>(), act.as<bf16_t>(), y.as<bf16_t>(), shape.hidden,
               shape.intermediate};
    auto** p = ptrs.as<void*>();
    pointer_arrays_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, st>>>(b, group_expert.as<int>(),
                                                                               group_offset.as<int>(), n, p);
    SERVESIM_LAUNCH_CHECK("moe pointer arrays");
    SERVESIM_CUBLAS(cublasGemmGroupedBatchedEx(
        handle, op_t.data(), op_n.data(), m1.data(), group_rows.data(), k1.data(), alpha.data(), p, CUDA_R_16BF,
        k1.data(), p + n, CUDA_R_16BF, k1.data(), beta.data(), p + 2 * n, CUDA_R_16BF, m1.data(), g,
        group_size.data(), CUBLAS_COMPUTE_32F));
    silu_mul(h1.as<bf16_t>(), act.as<bf16_t>(), num_tokens * shape.top_k, shape.intermediate, st);
    SERVESIM_CUBLAS(cublasGemmGroupedBatchedEx(
        handle, op_t.data(), op_n.data(), m2.data(), group_rows.data(), k2.data(), alpha.data(), p + 3 * n,
        CUDA_R_16BF, k2.data(), p + 4 * n, CUDA_R_16BF, k2.data(), beta.data(), p + 5 * n, CUDA_R_16BF, m2.data(), g,
        group_size.data(), CUBLAS_COMPUTE_32F));
}

void MoeRunner::forward_experts(const bf16_t* x, const MoeWeights& w, bf16_t* out, StreamHandle stream) {
    State& s = *s_;
    SERVESIM_REQUIRE(s.num_tokens > 0, "moe forward_experts: set_routing() first");
    SERVESIM_REQUIRE(w.w13 != nullptr && w.w2 != nullptr, "moe forward_experts: no expert weights");
    const MoeShape& sh = s.shape;
    SERVESIM_REQUIRE(sh.shared_intermediate == 0 || (w.shared_w13 != nullptr && w.shared_w2 != nullptr),
                     "moe forward_experts: no shared-expert weights");
    SERVESIM_REQUIRE(!sh.shared_expert_gate || sh.shared_intermediate == 0 || w.shared_gate != nullptr,
                     "moe forward_experts: no shared-expert gate");
    auto st = static_cast<cudaStream_t>(stream);
    const int t = s.num_tokens;
    const int tk = t * sh.top_k;
    SERVESIM_CUBLAS(cublasSetStream(s.handle, st));
    permute_kernel<<<tk, kThreads, 0, st>>>(x, s.src_token.as<int>(), s.xp.as<bf16_t>(), sh.hidden);
    SERVESIM_LAUNCH_CHECK("moe permute");
    if (s.mode == MoeGemmMode::kGrouped && !s.probed) {
        // First uncaptured call: try the grouped GEMMs inside a throwaway capture on a private stream (cuBLAS may
        // refuse the call, or do something a graph cannot hold); on any error fall back to the per-expert loop.
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        SERVESIM_CUDA(cudaStreamIsCapturing(st, &cs));
        if (cs == cudaStreamCaptureStatusNone) {
            s.probed = true;
            cudaStream_t probe = nullptr;
            SERVESIM_CUDA(cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking));
            SERVESIM_CUDA(cudaStreamSynchronize(st));
            std::string why;
            bool ok = cudaStreamBeginCapture(probe, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
            if (ok) {
                SERVESIM_CUBLAS(cublasSetStream(s.handle, probe));
                try {
                    s.grouped(w, probe);
                } catch (const std::exception& e) {
                    ok = false;
                    why = e.what();
                }
                cudaGraph_t graph = nullptr;
                if (cudaStreamEndCapture(probe, &graph) != cudaSuccess) {
                    ok = false;
                }
                if (graph != nullptr) {
                    cudaGraphExec_t exec = nullptr;
                    if (ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
                        ok = cudaGraphLaunch(exec, probe) == cudaSuccess && cudaStreamSynchronize(probe) == cudaSuccess;
                        cudaGraphExecDestroy(exec);
                    } else {
                        ok = false;
                    }
                    cudaGraphDestroy(graph);
                }
            }
            (void)cudaGetLastError();  // clear a capture error so later checks see only their own
            SERVESIM_CUDA(cudaStreamDestroy(probe));
            SERVESIM_CUBLAS(cublasSetStream(s.handle, st));
            if (!ok) {
                s.mode = MoeGemmMode::kLoop;
                std::fprintf(stderr, "moe: cublasGemmGroupedBatchedEx unusable in a CUDA graph (%s); one cublasGemmEx "
                             "per expert instead\n", why.empty() ? "capture failed" : why.c_str());
            }
        }
    }
    if (s.mode == MoeGemmMode::kGrouped) {
        s.grouped(w, st);
    } else {
        const std::size_t h = sh.hidden;
        const std::size_t inter = sh.intermediate;
        std::size_t i = 0;
        for (std::size_t gi = 0; gi < s.group_rows.size(); ++gi) {
            for (int j = 0; j < s.group_size[gi]; ++j, ++i) {
                const std::size_t e = s.host_expert[i];
                const std::size_t off = s.host_offset[i];
                linear(s.handle, s.xp.as<bf16_t>() + off * h, w.w13 + e * 2 * inter * h,
                       s.h1.as<bf16_t>() + off * 2 * inter, s.group_rows[gi], static_cast<int>(2 * inter),
                       static_cast<int>(h));
            }
        }
        silu_mul(s.h1.as<bf16_t>(), s.act.as<bf16_t>(), tk, sh.intermediate, st);
        i = 0;
        for (std::size_t gi = 0; gi < s.group_rows.size(); ++gi) {
            for (int j = 0; j < s.group_size[gi]; ++j, ++i) {
                const std::size_t e = s.host_expert[i];
                const std::size_t off = s.host_offset[i];
                linear(s.handle, s.act.as<bf16_t>() + off * inter, w.w2 + e * h * inter, s.y.as<bf16_t>() + off * h,
                       s.group_rows[gi], static_cast<int>(h), static_cast<int>(inter));
            }
        }
    }
    // Shared expert: a dense SwiGLU MLP on every token (vLLM runs it beside the routed experts, SharedFusedMoE).
    const bf16_t* shared_out = nullptr;
    if (sh.shared_intermediate > 0) {
        linear(s.handle, x, w.shared_w13, s.sh1.as<bf16_t>(), t, 2 * sh.shared_intermediate, sh.hidden);
        silu_mul(s.sh1.as<bf16_t>(), s.sact.as<bf16_t>(), t, sh.shared_intermediate, st);
        linear(s.handle, s.sact.as<bf16_t>(), w.shared_w2, s.sout.as<bf16_t>(), t, sh.hidden, sh.shared_intermediate);
        shared_out = s.sout.as<bf16_t>();
    }
    combine_kernel<<<t, kThreads, 0, st>>>(s.y.as<bf16_t>(), s.inv_pos.as<int>(), s.topk_w.as<float>(), sh.top_k,
                                           shared_out, x,
                                           shared_out != nullptr && sh.shared_expert_gate ? w.shared_gate : nullptr,
                                           out, sh.hidden);
    SERVESIM_LAUNCH_CHECK("moe combine");
}

void MoeRunner::set_gemm_mode(MoeGemmMode mode) {
    s_->mode = mode;
    s_->probed = mode == MoeGemmMode::kLoop;
}

MoeGemmMode MoeRunner::gemm_mode() const {
    return s_->mode;
}

const int* MoeRunner::topk_ids() const {
    return s_->topk_ids.as<int>();
}

const float* MoeRunner::topk_weights() const {
    return s_->topk_w.as<float>();
}

const bf16_t* MoeRunner::router_logits() const {
    return s_->logits.as<bf16_t>();
}

int MoeRunner::num_active_experts() const {
    return static_cast<int>(s_->host_expert.size());
}

}  // namespace servesim::kernels
