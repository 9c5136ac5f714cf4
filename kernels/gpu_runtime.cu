// Device buffers, random fills, event timing and device facts (kernels/gpu_runtime.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/gpu_runtime.h"

namespace servesim::kernels {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) {
        SERVESIM_CUDA(cudaMalloc(&ptr_, bytes));
    }
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_ != nullptr) {
        cudaFree(ptr_);
    }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_ != nullptr) {
            cudaFree(ptr_);
        }
        ptr_ = o.ptr_;
        bytes_ = o.bytes_;
        o.ptr_ = nullptr;
        o.bytes_ = 0;
    }
    return *this;
}

namespace {

__device__ __forceinline__ float hash_uniform(std::uint64_t seed, std::uint64_t i) {
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        p[i] = __float2bfloat16(lo + (hi - lo) * hash_uniform(seed, i));
    }
}

__global__ void fill_f32_kernel(float* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        p[i] = lo + (hi - lo) * hash_uniform(seed, i);
    }
}

int fill_blocks(std::size_t n) {
    return static_cast<int>(std::min<std::size_t>((n + 255) / 256, 132 * 32));
}

}  // namespace

void fill_random_bf16(bf16_t* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
    if (n == 0) {
        return;
    }
    fill_bf16_kernel<<<fill_blocks(n), 256>>>(reinterpret_cast<__nv_bfloat16*>(p), n, lo, hi, seed);
    SERVESIM_LAUNCH_CHECK("fill_random_bf16");
}

void fill_random_f32(float* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
    if (n == 0) {
        return;
    }
    fill_f32_kernel<<<fill_blocks(n), 256>>>(p, n, lo, hi, seed);
    SERVESIM_LAUNCH_CHECK("fill_random_f32");
}

void fill_bytes(void* p, std::size_t bytes, int value) {
    SERVESIM_CUDA(cudaMemset(p, value, bytes));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    SERVESIM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    SERVESIM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void device_synchronize() {
    SERVESIM_CUDA(cudaDeviceSynchronize());
}

void check_last_launch(const char* what) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
    }
}

bool query_device(int device, DeviceInfo* info) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
        cudaGetLastError();
        return false;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        return false;
    }
    info->name = prop.name;
    info->multiprocessors = prop.multiProcessorCount;
    info->l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
    info->total_memory_bytes = prop.totalGlobalMem;
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasGetVersion(h, &info->cublas_version);
        cublasDestroy(h);
    }
    return true;
}

void set_device(int device) {
    SERVESIM_CUDA(cudaSetDevice(device));
}

double time_median_ms(const std::function<void(int)>& body, int warmup, int reps, double sustain_ms) {
    for (int i = 0; i < warmup; ++i) {
        body(i);
    }
    SERVESIM_CUDA(cudaDeviceSynchronize());
    if (sustain_ms > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = warmup; std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() <
                             sustain_ms;
             ++i) {
            body(i);
            SERVESIM_CUDA(cudaDeviceSynchronize());
        }
    }
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    SERVESIM_CUDA(cudaEventCreate(&start));
    SERVESIM_CUDA(cudaEventCreate(&stop));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
        SERVESIM_CUDA(cudaEventRecord(start));
        body(warmup + i);
        SERVESIM_CUDA(cudaEventRecord(stop));
        SERVESIM_CUDA(cudaEventSynchronize(stop));
        SERVESIM_CUDA(cudaEventElapsedTime(&ms[i], start, stop));
    }
    SERVESIM_CUDA(cudaGetLastError());
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(ms.begin(), ms.end());
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

StreamHandle create_stream() {
    cudaStream_t s = nullptr;
    SERVESIM_CUDA(cudaStreamCreate(&s));
    return s;
}

void destroy_stream(StreamHandle stream) {
    if (stream != nullptr) {
        cudaStreamDestroy(static_cast<cudaStream_t>(stream));
    }
}

CudaGraph::~CudaGraph() {
    if (exec_ != nullptr) {
        cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    }
    if (graph_ != nullptr) {
        cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
    }
}

void CudaGraph::capture(StreamHandle stream, const std::function<void()>& body) {
    auto s = static_cast<cudaStream_t>(stream);
    SERVESIM_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    body();
    cudaGraph_t g = nullptr;
    SERVESIM_CUDA(cudaStreamEndCapture(s, &g));
    graph_ = g;
    cudaGraphExec_t e = nullptr;
    SERVESIM_CUDA(cudaGraphInstantiate(&e, g, 0));
    exec_ = e;
}

void CudaGraph::replay(StreamHandle stream) {
    SERVESIM_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream)));
}

double measure_copy_bandwidth_gbps(std::size_t bytes) {
    DeviceBuffer a(bytes);
    DeviceBuffer b(bytes);
    fill_random_f32(a.as<float>(), bytes / 4, -1, 1, 7);
    const double ms = time_median_ms(
        [&](int) { SERVESIM_CUDA(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice)); }, 3, 15);
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace servesim::kernels
