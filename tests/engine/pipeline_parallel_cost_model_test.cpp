// Tests sim/engine/pipeline_parallel_cost_model.*: a step of a pipelined engine is one micro-batch (the batch's
// 1/min(P, sequences) share) through every layer plus P−1 stage-to-stage sends.
#include "sim/engine/pipeline_parallel_cost_model.h"

#include <cmath>
#include <memory>

#include "tests/catch.h"

namespace servesim::engine {
namespace {

bool near(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); }

// 1 ms per token of GEMMs and 0.5 ms per sequence of overhead: easy to count.
class LinearCost final : public CostModel {
public:
    [[nodiscard]] StepCost step_cost(const BatchShape& s) const override {
        StepCost c;
        c.gemm_ms = static_cast<double>(s.num_tokens);
        c.overhead_ms = 0.5 * static_cast<double>(s.num_seqs);
        return c;
    }

    [[nodiscard]] std::string describe() const override { return "linear"; }
};

PipelineHop hop(int pp) {
    PipelineHop h;
    h.pipeline_parallel_size = pp;
    h.hidden_size = 4096;
    h.dtype_bytes = 2;
    h.link_bytes_per_s = 450e9;
    h.latency_ms = 0.01;
    return h;
}

BatchShape decodes(std::int64_t n) {
    BatchShape s;
    s.num_tokens = n;
    s.num_decode_seqs = n;
    s.num_seqs = n;
    s.num_sampled_seqs = n;
    s.decode_context_tokens = 1000 * n;
    return s;
}

TEST_CASE("PP: a send carries hidden states and residual of the micro-batch", "[engine][pp]") {
    // 2 tokens · 2 tensors · 4096 · 2 B = 32,768 B over 450 GB/s = 7.2818e-5 ms, plus 0.01 ms.
    CHECK(near(hop(4).send_ms(2), 32768.0 / 450e9 * 1e3 + 0.01));
    PipelineHop tp2 = hop(4);
    tp2.tensor_parallel_size = 2;  // each TP rank sends its half
    CHECK(near(tp2.send_ms(2), 16384.0 / 450e9 * 1e3 + 0.01));
    CHECK(hop(1).send_ms(2) == 0);
}

TEST_CASE("PP: 8 decodes on 4 stages cost one micro-batch of 2 through all layers plus 3 sends", "[engine][pp]") {
    const PipelineParallelCostModel pp(std::make_unique<LinearCost>(), hop(4));
    const StepCost c = pp.step_cost(decodes(8));
    CHECK(c.gemm_ms == 2.0);      // 8 tokens / 4 micro-batches
    CHECK(c.overhead_ms == 1.0);  // 2 sequences · 0.5
    CHECK(near(c.comm_ms, 3 * (32768.0 / 450e9 * 1e3 + 0.01)));
    CHECK(pp.describe() == "linear, PP 4");
}

TEST_CASE("PP: fewer sequences than stages leave a bubble (no split below one sequence)", "[engine][pp]") {
    const PipelineParallelCostModel pp(std::make_unique<LinearCost>(), hop(4));
    // 2 decodes on 4 stages: 2 micro-batches of 1; the other two slots idle.
    CHECK(pp.step_cost(decodes(2)).gemm_ms == 1.0);
    // One prefill chunk of 2048 tokens is never split: it crosses the 4 stages whole.
    BatchShape chunk;
    chunk.num_tokens = 2048;
    chunk.num_prefill_tokens = 2048;
    chunk.num_prefill_seqs = 1;
    chunk.num_seqs = 1;
    chunk.prefill_attention_work = 2048.0 * 1024.0;
    chunk.prefill_max_context_tokens = 2048;
    const StepCost c = pp.step_cost(chunk);
    CHECK(c.gemm_ms == 2048.0);
    // 3 sends of 2048 tokens: 2048 · 2 · 4096 · 2 B = 33,554,432 B → 0.074565 ms each + 0.01.
    CHECK(near(c.comm_ms, 3 * (33554432.0 / 450e9 * 1e3 + 0.01)));
}

TEST_CASE("PP: micro-batch shares round counts up and keep the longest chunk", "[engine][pp]") {
    BatchShape s = decodes(7);
    s.prefill_max_context_tokens = 900;
    const BatchShape b = PipelineParallelCostModel::micro_batch(s, 3);
    CHECK(b.num_seqs == 3);                   // ceil(7/3)
    CHECK(b.decode_context_tokens == 2334);  // ceil(7000/3)
    CHECK(b.prefill_max_context_tokens == 900);
    const PipelineParallelCostModel one(std::make_unique<LinearCost>(), hop(1));
    CHECK(one.step_cost(s).gemm_ms == 7.0);  // PP 1: the inner model unchanged
    CHECK(one.step_cost(s).comm_ms == 0.0);
}

}  // namespace
}  // namespace servesim::engine
