// CUDA-graph capture sizes; see cuda_graphs.h.
#include "sim/engine/cuda_graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace servesim::engine {

CudaGraphSizes::CudaGraphSizes(int max_capture_size) {
    if (max_capture_size <= 0) {
        return;
    }
    const std::int64_t max = max_capture_size;
    for (std::int64_t s : {1, 2, 4}) {
        if (s <= max) {
            sizes_.push_back(s);
        }
    }
    for (std::int64_t s = 8; s < 256 && s <= max; s += 8) {
        sizes_.push_back(s);
    }
    for (std::int64_t s = 256; s <= max; s += 16) {
        sizes_.push_back(s);
    }
    if (sizes_.back() != max) {
        sizes_.push_back(max);
    }
    fill_pad_table();
}

CudaGraphSizes CudaGraphSizes::from_list(std::vector<std::int64_t> sizes) {
    for (const std::int64_t s : sizes) {
        if (s < 1) {
            throw std::invalid_argument(fmt::format("CUDA-graph capture size {} is not a positive token count", s));
        }
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    CudaGraphSizes g;
    g.sizes_ = std::move(sizes);
    if (!g.sizes_.empty()) {
        g.fill_pad_table();
    }
    return g;
}

void CudaGraphSizes::fill_pad_table() {
    pad_.assign(static_cast<std::size_t>(sizes_.back()) + 1, 0);
    std::size_t i = 0;
    for (std::int64_t n = 1; n <= sizes_.back(); ++n) {
        while (sizes_[i] < n) {
            ++i;
        }
        pad_[static_cast<std::size_t>(n)] = sizes_[i];
    }
}

std::string CudaGraphSizes::describe() const {
    if (sizes_.empty()) {
        return "eager";
    }
    return fmt::format("CUDA graphs up to {} tokens ({} sizes)", sizes_.back(), sizes_.size());
}

}  // namespace servesim::engine
