// Error checking shared by the .cu files: every CUDA / cuBLAS call and every launch is checked and turned into a
// std::runtime_error naming the call (METHOD.md: exit code 0 proves nothing).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define SERVESIM_CUDA(call)                                                                                   \
    do {                                                                                                      \
        const cudaError_t servesim_err_ = (call);                                                             \
        if (servesim_err_ != cudaSuccess) {                                                                   \
            throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(servesim_err_) + " at " + \
                                     __FILE__ + ":" + std::to_string(__LINE__));                              \
        }                                                                                                     \
    } while (false)

#define SERVESIM_CUBLAS(call)                                                                                          \
    do {                                                                                                               \
        const cublasStatus_t servesim_st_ = (call);                                                                    \
        if (servesim_st_ != CUBLAS_STATUS_SUCCESS) {                                                                   \
            throw std::runtime_error(std::string(#call) + ": cuBLAS status " + std::to_string(servesim_st_) + " at " + \
                                     __FILE__ + ":" + std::to_string(__LINE__));                                       \
        }                                                                                                              \
    } while (false)

#define SERVESIM_LAUNCH_CHECK(what) SERVESIM_CUDA(cudaGetLastError())

#define SERVESIM_REQUIRE(cond, msg)                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            throw std::runtime_error(std::string("kernel argument check failed: ") + msg); \
        }                                                                                  \
    } while (false)
