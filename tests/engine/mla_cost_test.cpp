// Roofline decode attention for MLA (sim/engine/roofline_cost_model.cpp): the absorbed decode reads one latent per
// context token and layer but every head computes over it, so DeepSeek-V3 on one GPU is FLOP-bound where GQA is
// bandwidth-bound; at TP 8 each rank keeps the whole latent but 1/8 of the heads, and bandwidth binds again.
#include <string>

#include "models/hf_config.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::close;

BatchShape one_decode(std::int64_t context) {
    BatchShape s;
    s.num_tokens = 1;
    s.num_decode_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = 1;
    s.decode_context_tokens = context;
    return s;
}

TEST_CASE("Roofline: DeepSeek-V3's absorbed MLA decode is FLOP-bound on one GPU, bandwidth-bound at TP 8",
          "[engine][cost][mla]") {
    const auto spec =
        models::read_hf_config(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/DeepSeek-V3.json");
    RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    // TP 1, 1,000 context tokens. FLOPs 61 · 278,528 · 1,000 = 16,990,208,000 at 989e12 · 0.55 = 5.4395e14
    // → 0.0312349 ms; bytes 70,272 · 1,000 at 4.8e12 · 0.85 = 4.08e12 → 0.0172235 ms. The FLOP roof binds.
    const RooflineCostModel tp1(spec, spec.dtype, p);
    CHECK(close(tp1.step_cost(one_decode(1000)).attn_decode_ms, 0.0312349, 1e-7));
    // TP 8: FLOPs / 8 → 0.0039044 ms; bytes stay 70,272 per token on every rank → 0.0172235 ms binds.
    p.tensor_parallel_size = 8;
    p.tp_link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
    const RooflineCostModel tp8(spec, spec.dtype, p);
    CHECK(close(tp8.step_cost(one_decode(1000)).attn_decode_ms, 0.0172235, 1e-7));
}

}  // namespace
}  // namespace servesim::engine
