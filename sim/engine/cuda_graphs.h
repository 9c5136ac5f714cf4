// CudaGraphSizes: the token counts vLLM captures CUDA graphs for, and how a batch of n tokens runs against them.
// vLLM (0.11 on, cudagraph_mode FULL_AND_PIECEWISE, the default in every modelled release) captures one graph per
// size in compilation_config.cudagraph_capture_sizes (VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py): by
// default 1, 2, 4, 8…248 step 8, 256…max step 16 with max = min(2·max_num_seqs, 512, max_num_batched_tokens), or
// the list given by --cudagraph-capture-sizes, or the default ladder up to --max-cudagraph-capture-size. At run time
// CudagraphDispatcher.dispatch (vllm/v1/cudagraph_dispatcher.py) pads a batch of n ≤ max tokens to the next
// captured size and replays a FULL graph when the batch is uniform decode (every request one token), a PIECEWISE
// graph otherwise (the model's graphs split at attention, which runs eagerly between them); a batch above the
// largest size runs without graphs, unpadded. --enforce-eager (cudagraph_mode NONE) captures nothing: every batch
// runs unpadded and every kernel is launched from the host. docs/HOST-WORK.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::engine {

class CudaGraphSizes {
public:
    // How a batch runs.
    enum class Mode { kEager, kPiecewise, kFull };

    // No graphs (--enforce-eager).
    CudaGraphSizes() = default;

    // vLLM's default ladder up to max_capture_size: 1, 2, 4, 8…248 step 8, 256…max step 16, and max itself when the
    // steps skip it (the largest size is always captured, as vLLM appends max_num_batched_tokens when it is the
    // bound). max_capture_size ≤ 0: no graphs. Implicit: an int is the default ladder wherever sizes are expected.
    CudaGraphSizes(int max_capture_size);  // NOLINT(google-explicit-constructor)

    // An explicit list (--cudagraph-capture-sizes): sorted and deduplicated as vLLM does; every size must be ≥ 1
    // (std::invalid_argument otherwise: callers check user input first and say which key was wrong).
    [[nodiscard]] static CudaGraphSizes from_list(std::vector<std::int64_t> sizes);

    // The largest captured size; 0 when there are no graphs.
    [[nodiscard]] std::int64_t max_size() const { return sizes_.empty() ? 0 : sizes_.back(); }
    [[nodiscard]] bool enabled() const { return !sizes_.empty(); }
    [[nodiscard]] const std::vector<std::int64_t>& sizes() const { return sizes_; }

    // The token count a batch of n tokens runs as: the smallest captured size ≥ n, or n itself (above the largest
    // size, or no graphs).
    [[nodiscard]] std::int64_t padded_tokens(std::int64_t n) const {
        if (n <= 0 || n > max_size()) {
            return n;
        }
        return pad_[static_cast<std::size_t>(n)];
    }

    // The graph mode of a batch of n tokens: kFull for a uniform-decode batch (no prefill chunk) within the
    // captured sizes, kPiecewise for any other batch within them, kEager above them or without graphs.
    [[nodiscard]] Mode mode(std::int64_t num_tokens, bool uniform_decode) const {
        if (num_tokens <= 0 || num_tokens > max_size()) {
            return Mode::kEager;
        }
        return uniform_decode ? Mode::kFull : Mode::kPiecewise;
    }

    // "eager" or "CUDA graphs up to 512 tokens (51 sizes)".
    [[nodiscard]] std::string describe() const;

private:
    void fill_pad_table();

    std::vector<std::int64_t> sizes_;  // ascending, distinct
    std::vector<std::int64_t> pad_;    // pad_[n] for 1 ≤ n ≤ max_size(): the smallest size ≥ n
};

}  // namespace servesim::engine
