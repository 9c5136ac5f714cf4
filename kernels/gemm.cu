// GEMM through cuBLAS (cublasGemmEx, bf16 operands, fp32 compute; cuBLASLt heuristics inside): C = A · Wᵀ with
// row-major A [M,K], W [N,K], C [M,N], i.e. a torch Linear. Column-major view: Cᵀ = W · Aᵀ.
#include <cuda_bf16.h>

#include "kernels/cuda_check.cuh"
#include "kernels/kernels.h"

namespace servesim::kernels {

GemmRunner::GemmRunner() {
    cublasHandle_t h = nullptr;
    SERVESIM_CUBLAS(cublasCreate(&h));
    handle_ = h;
    workspace_bytes_ = 32u << 20;
    SERVESIM_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
    SERVESIM_CUBLAS(cublasSetWorkspace(h, workspace_, workspace_bytes_));
}

GemmRunner::~GemmRunner() {
    if (handle_ != nullptr) {
        cublasDestroy(static_cast<cublasHandle_t>(handle_));
    }
    if (workspace_ != nullptr) {
        cudaFree(workspace_);
    }
}

void GemmRunner::run(const bf16_t* a, const bf16_t* w, bf16_t* c, int m, int n, int k, StreamHandle stream) {
    SERVESIM_REQUIRE(m > 0 && n > 0 && k > 0, "gemm sizes must be positive");
    auto h = static_cast<cublasHandle_t>(handle_);
    SERVESIM_CUBLAS(cublasSetStream(h, static_cast<cudaStream_t>(stream)));
    const float alpha = 1.0f;
    const float beta = 0.0f;
    SERVESIM_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, a, CUDA_R_16BF, k,
                                 &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace servesim::kernels
