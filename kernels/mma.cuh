// Warp-level tensor-core helpers (sm_80+ mma.sync.m16n8k16 bf16 → fp32, ldmatrix, cp.async) shared by the
// FlashAttention-2-style prefill kernel and the GDN chunk-output kernel. Fragment layouts follow the PTX ISA
// (g = lane/4, t = lane%4): A regs {(g,2t),(g+8,2t),(g,2t+8),(g+8,2t+8)}, B regs {(k=2t,n=g),(k=2t+8,n=g)},
// C {(g,2t),(g,2t+1),(g+8,2t),(g+8,2t+1)}.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace servesim::kernels::mma {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global → shared; src_bytes < 16 zero-fills the rest (0 = all zeros, src not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l/8, row l%8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4],
                                         const std::uint32_t (&a)[4],
                                         std::uint32_t b0,
                                         std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
}

// A fragment (16x16) of a row-major bf16 tile in shared memory: rows row0.., cols col0.., row stride `ld` elements.
__device__ __forceinline__ void load_a(
    std::uint32_t (&a)[4], const __nv_bfloat16* tile, int row0, int col0, int ld, int lane) {
    ldmatrix_x4(a, tile + (row0 + (lane % 16)) * ld + col0 + (lane / 16) * 8);
}

// A fragment (16x16) of Aᵀ stored row-major: A[m][k] = M[k][m] with M [k][m] in shared memory (e.g. Kᵀ from K).
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], const __nv_bfloat16* tile, int m0, int k0, int ld,
                                             int lane) {
    const int q = lane / 8;
    ldmatrix_x4_trans(a, tile + (k0 + (q / 2) * 8 + lane % 8) * ld + m0 + (q % 2) * 8);
}

// B fragments for B[k][n] = M[n][k] with M row-major [n][k] (e.g. K for S = Q·Kᵀ): one n-tile of 8 (rows n0..),
// two k-steps (k0 and k0+16): b[0],b[1] for k0; b[2],b[3] for k0+16.
__device__ __forceinline__ void load_b_nk(
    std::uint32_t (&b)[4], const __nv_bfloat16* tile, int n0, int k0, int ld, int lane) {
    ldmatrix_x4(b, tile + (n0 + (lane % 8)) * ld + k0 + (lane / 8) * 8);
}

// B fragments for B[k][n] = M[k][n] with M row-major [k][n] (e.g. V for O = P·V): one k-step (k0..k0+15), two
// n-tiles (n0 and n0+8): b[0],b[1] for n0; b[2],b[3] for n0+8.
__device__ __forceinline__ void load_b_kn(
    std::uint32_t (&b)[4], const __nv_bfloat16* tile, int k0, int n0, int ld, int lane) {
    ldmatrix_x4_trans(b, tile + (k0 + (lane % 8) + ((lane / 8) % 2) * 8) * ld + n0 + (lane / 16) * 8);
}

}  // namespace servesim::kernels::mma
