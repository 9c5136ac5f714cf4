// Tests sim/engine/pipeline_parallel_cost_model.*: a step of a pipelined engine is one micro-batch (the batch's
// 1/min(P, sequences) share) through every layer plus P−1 stage-to-stage sends.
#include "sim/engine/pipeline_parallel_cost_model.h"

#include <algorithm>
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
    h.link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
    return h;
}

// An NCCL send between two GPUs on NVSwitch (sim/engine/collectives.h): bus bandwidth 329 GB/s at 2 ranks; the faster
// of LL (6.6 µs base + 0.6 µs step, a third of the bandwidth) and Simple (8.4 + 3.4 µs, full bandwidth).
double send(double bytes) {
    return std::min(0.0072 + 1e3 * bytes / (329e9 / 3.0), 0.0118 + 1e3 * bytes / 329e9);
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
    // 2 tokens · 2 tensors · 4096 · 2 B = 32,768 B: LL 7.2 µs + 32,768 / 109.667 GB/s = 7.4988 µs; Simple 11.8 µs +
    // 0.0996 µs = 11.8996 µs; NCCL's LL wins: 0.0074988 ms.
    CHECK(std::abs(hop(4).send_ms(2) - 0.0074988) < 1e-7);
    CHECK(near(hop(4).send_ms(2), send(32768.0)));
    PipelineHop tp2 = hop(4);
    tp2.tensor_parallel_size = 2;  // each TP rank sends its half
    CHECK(near(tp2.send_ms(2), send(16384.0)));
    CHECK(hop(1).send_ms(2) == 0);
}

TEST_CASE("PP: 8 decodes on 4 stages cost one micro-batch of 2 through all layers plus 3 sends", "[engine][pp]") {
    const PipelineParallelCostModel pp(std::make_unique<LinearCost>(), hop(4));
    const StepCost c = pp.step_cost(decodes(8));
    CHECK(c.gemm_ms == 2.0);      // 8 tokens / 4 micro-batches
    CHECK(c.overhead_ms == 1.0);  // 2 sequences · 0.5
    CHECK(near(c.comm_ms, 3 * send(32768.0)));
    CHECK(pp.describe() == "linear, PP 4");
}

TEST_CASE("PP: fewer sequences than stages leave a bubble (no split below one sequence)", "[engine][pp]") {
    const PipelineParallelCostModel pp(std::make_unique<LinearCost>(), hop(4));
    // 2 decodes on 4 stages: 2 micro-batches of 1; the other two slots idle.
    CHECK(pp.step_cost(decodes(2)).gemm_ms == 1.0);
    // One prefill chunk of 2048 tokens that ends its prompt (it samples) is never split: it crosses the 4 stages
    // whole.
    BatchShape chunk;
    chunk.num_tokens = 2048;
    chunk.num_prefill_tokens = 2048;
    chunk.num_prefill_seqs = 1;
    chunk.num_seqs = 1;
    chunk.num_sampled_seqs = 1;
    chunk.prefill_attention_work = 2048.0 * 1024.0;
    chunk.prefill_max_context_tokens = 2048;
    const StepCost c = pp.step_cost(chunk);
    CHECK(c.gemm_ms == 2048.0);
    // 3 sends of 2048 tokens: 2048 · 2 · 4096 · 2 B = 33,554,432 B → Simple: 11.8 µs + 101.989 µs = 0.113789 ms each
    // (LL's third of the bandwidth would take 0.313 ms).
    CHECK(near(c.comm_ms, 3 * send(33554432.0)));
}

// A prefill chunk of `tokens` after `computed`, the prompt's last (it samples) or not.
BatchShape chunk_of(std::int64_t tokens, std::int64_t computed, bool last) {
    BatchShape s;
    s.num_tokens = tokens;
    s.num_prefill_tokens = tokens;
    s.num_prefill_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = last ? 1 : 0;
    s.prefill_attention_work = static_cast<double>(tokens) * (static_cast<double>(computed) + tokens / 2.0);
    s.prefill_max_context_tokens = computed + tokens;
    return s;
}

TEST_CASE("PP: a lone prompt's chunks fill the pipeline; only its last chunk pays the whole pass",
          "[engine][pp]") {
    // 4 stages, an 8,192-token prompt in 4 chunks of 2,048 (LinearCost: 2,048 ms of GEMMs through all layers, 512
    // ms per stage; 0.5 ms of per-batch overhead). A send of 2,048 tokens (33,554,432 B, NCCL Simple on NVSwitch)
    // h = 0.0118 + 33,554,432 / 329e9 s = 0.113789 ms.
    //   chunks 1–3 output nothing: the next chunk enters stage 1 after this one has left it, 512 + h (+ 0.5 overhead)
    //   chunk 4 samples: the whole pass, 2,048 + 3h (+ 0.5)
    //   prompt to first token: 3 · 512 + 2,048 + 6h + 4 · 0.5 = 3,586.682735 ms — the pipeline's (C + P − 1) = 7
    //   stage times, not the 4 · (2,048 + 3h) = 8,193.365470 ms of whole passes back to back.
    const PipelineParallelCostModel pp(std::make_unique<LinearCost>(), hop(4));
    const double h = send(33554432.0);
    const StepCost first = pp.step_cost(chunk_of(2048, 0, false));
    CHECK(first.gemm_ms == 512.0);
    CHECK(first.overhead_ms == 0.5);
    CHECK(near(first.comm_ms, h));
    const StepCost last = pp.step_cost(chunk_of(2048, 6144, true));
    CHECK(last.gemm_ms == 2048.0);
    CHECK(near(last.comm_ms, 3 * h));
    double ttft = last.total_ms();
    for (std::int64_t k = 0; k < 3; ++k) {
        ttft += pp.step_cost(chunk_of(2048, 2048 * k, false)).total_ms();
    }
    CHECK(near(ttft, 3 * 512.0 + 2048.0 + 6 * h + 4 * 0.5));
    // Two prompts' non-final chunks (1,024 tokens each): 2 micro-batches of 1,024 through stage 1, 2 · 1,024 / 4 =
    // 512 ms of GEMMs and two sends of 1,024 tokens. A step with a decode in it waits for that token: the whole pass.
    BatchShape two = chunk_of(2048, 0, false);
    two.num_prefill_seqs = 2;
    two.num_seqs = 2;
    const StepCost c2 = pp.step_cost(two);
    CHECK(c2.gemm_ms == 512.0);
    CHECK(near(c2.comm_ms, 2 * send(16777216.0)));
    BatchShape with_decode = chunk_of(2048, 0, false);
    with_decode.num_tokens = 2049;
    with_decode.num_decode_seqs = 1;
    with_decode.num_seqs = 2;
    with_decode.num_sampled_seqs = 1;
    CHECK(pp.step_cost(with_decode).gemm_ms == 1025.0);  // 2 micro-batches, ⌈2,049 / 2⌉ tokens through all layers
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
