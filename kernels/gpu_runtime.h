// Device helpers for calibration and the GPU checks: buffers, random fills, poisoning, event timing (median after
// warm-up), device facts and the copy-bandwidth ceiling. CUDA-free header (implementation in gpu_runtime.cu), so
// plain C++ sweep code can use it. Method: CUDA-event medians of repeated launches after a warm-up, inputs filled
// with random data (never zeros), docs/SOURCES.md "Collectives".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/kernels.h"

namespace servesim::kernels {

class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    [[nodiscard]] void* get() const { return ptr_; }

    template <typename T>
    [[nodiscard]] T* as() const {
        return static_cast<T*>(ptr_);
    }

    [[nodiscard]] std::size_t bytes() const { return bytes_; }

  private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

// Uniform random values in [lo, hi) from a counter-based hash of (seed, index): fresh inputs per seed.
void fill_random_bf16(bf16_t* p, std::size_t n, float lo, float hi, std::uint64_t seed);
void fill_random_f32(float* p, std::size_t n, float lo, float hi, std::uint64_t seed);
void fill_bytes(void* p, std::size_t bytes, int value);  // poisoning (0xFF bytes are NaN in bf16/fp32)
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void device_synchronize();
void check_last_launch(const char* what);  // throws std::runtime_error naming `what`

struct DeviceInfo {
    std::string name;
    int multiprocessors = 0;
    std::size_t l2_bytes = 0;
    std::size_t total_memory_bytes = 0;
    int driver_version = 0;
    int runtime_version = 0;
    int cublas_version = 0;
};

// False when no CUDA device is usable (no driver, no GPU, bad index).
[[nodiscard]] bool query_device(int device, DeviceInfo* info);
void set_device(int device);

// Median milliseconds of `body(rep)` between CUDA events on the default stream, after `warmup` untimed calls.
// body receives the repetition index so callers can rotate input sets larger than L2. With sustain_ms > 0 the
// warm-up goes on (body after body) until the GPU has been busy that long, so the timed calls run at the clocks
// the card holds under continuous load — a serving GPU's state — rather than its boost from idle.
[[nodiscard]] double time_median_ms(const std::function<void(int)>& body, int warmup, int reps,
                                    double sustain_ms = 0);

// A CUDA stream (blocking, so default-stream events bracket its work) and a captured CUDA graph.
[[nodiscard]] StreamHandle create_stream();
void destroy_stream(StreamHandle stream);

class CudaGraph {
  public:
    CudaGraph() = default;
    ~CudaGraph();
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;
    // Captures everything `body` launches on `stream` (warm the kernels up first: capture forbids attribute calls).
    void capture(StreamHandle stream, const std::function<void()>& body);
    void replay(StreamHandle stream);

  private:
    void* graph_ = nullptr;
    void* exec_ = nullptr;
};

// Device-to-device copy of `bytes`; returns GB/s counting bytes read plus bytes written.
[[nodiscard]] double measure_copy_bandwidth_gbps(std::size_t bytes);

}  // namespace servesim::kernels
