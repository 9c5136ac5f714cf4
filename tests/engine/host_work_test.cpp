// Host work per step (sim/engine/host_work.*) and CUDA-graph capture sizes (sim/engine/cuda_graphs.*): a step's
// host work worked by hand, with and without async scheduling's overlap; a host-bound step; --enforce-eager against
// graph replay; a capture-size list padding a 7-token decode to 8 and leaving a batch above its largest size unpadded.
#include <memory>
#include <vector>

#include "models/model_registry.h"
#include "sim/engine/cuda_graphs.h"
#include "sim/engine/host_work.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::close;
using testing::FixedCost;

// The priors of docs/HOST-WORK.md, written out so each test's arithmetic reads from here.
HostWorkParams params() {
    HostWorkParams h;
    h.step_us = 300;
    h.per_request_us = 5;
    h.per_new_request_us = 30;
    h.per_finished_request_us = 15;
    h.per_prefill_token_us = 0.08;
    h.exposed_us = 30;
    h.launch_us = 8;
    h.graph_launch_us = 10;
    return h;
}

// 8 requests: 2 new prompts of 200 tokens each (prefill chunks) and 6 decodes, 406 tokens; 1 request finished in
// the step before.
BatchShape mixed_step(bool overlapped) {
    BatchShape s;
    s.num_tokens = 406;
    s.num_prefill_tokens = 400;
    s.num_prefill_seqs = 2;
    s.num_decode_seqs = 6;
    s.num_seqs = 8;
    s.num_sampled_seqs = 8;
    s.num_new_seqs = 2;
    s.num_finished_seqs = 1;
    s.host_overlapped = overlapped;
    return s;
}

BatchShape decode_step(std::int64_t batch, bool overlapped) {
    BatchShape s;
    s.num_tokens = batch;
    s.num_decode_seqs = batch;
    s.num_seqs = batch;
    s.num_sampled_seqs = batch;
    s.decode_context_tokens = 1000 * batch;
    s.host_overlapped = overlapped;
    return s;
}

TEST_CASE("Host work: kernels an eager, a piecewise and a full-graph forward launch", "[engine][host_work]") {
    // Qwen3-4B: 36 attention layers, dense MLPs. Eager: 36 × 10 per layer + 2 (embedding, final norm) + 6 (lm_head
    // and sampler) = 368 launches. Piecewise: 36 + 1 = 37 graphs and 36 × 2 attention kernels + 6 = 78 eager ones.
    // TP 2 adds two all-reduces per layer to the eager forward: 368 + 72 = 440.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    REQUIRE(qwen.layers.size() == 36);
    const HostWorkModel h(params(), qwen, 1, CudaGraphSizes(512));
    CHECK(h.eager_kernels_per_step() == 368);
    CHECK(h.piecewise_graphs_per_step() == 37);
    CHECK(h.piecewise_eager_kernels_per_step() == 78);
    CHECK(HostWorkModel(params(), qwen, 2, CudaGraphSizes(512)).eager_kernels_per_step() == 440);
}

TEST_CASE("Host work: a step of 8 requests, 2 new, 406 tokens, with and without async scheduling's overlap",
          "[engine][host_work]") {
    // CPU: 300 + 5 × 8 requests + 30 × 2 new + 15 × 1 finished + 0.08 × 400 prompt tokens = 447 µs.
    // 406 tokens ≤ 512 and not uniform decode: a piecewise forward, 37 graphs × 10 + 78 kernels × 8 = 994 µs of
    // launches. Exposed (sampled-token copy back): 30 µs.
    const HostWorkModel h(params(), models::resolve_model("Qwen3-4B"), 1, CudaGraphSizes(512));
    const HostStepWork w = h.step_work(mixed_step(false));
    CHECK(close(w.cpu_us, 447.0));
    CHECK(close(w.launch_us, 994.0));
    CHECK(close(w.exposed_us, 30.0));
    // GPU 2.0 ms. Without overlap the CPU work runs before and after the forward, whose launches the 2 ms hide:
    // 0.447 + max(0, 0.994 − 2.0) + 0.030 = 0.477 ms → step 2.477 ms.
    const HostWorkCostModel cost(std::make_unique<FixedCost>(2.0), h);
    const StepCost serial = cost.step_cost(mixed_step(false));
    CHECK(close(serial.host_ms, 0.477));
    CHECK(close(serial.total_ms(), 2.477));
    // Async scheduling (scheduled while the previous step ran): the 1.441 ms of CPU and launches fit under the 2 ms
    // of GPU; only the 0.030 ms copy back shows: step 2.030 ms.
    const StepCost overlapped = cost.step_cost(mixed_step(true));
    CHECK(close(overlapped.host_ms, 0.030));
    CHECK(close(overlapped.total_ms(), 2.030));
}

TEST_CASE("Host work: a step whose GPU time is shorter than its host work is host-bound", "[engine][host_work]") {
    // The same step on a GPU that needs 1.0 ms: with async scheduling the step lasts the host cycle, 0.447 + 0.994 =
    // 1.441 ms, plus the 0.030 ms copy back = 1.471 ms, whatever the GPU's 1.0 ms (host_ms = 0.471).
    const HostWorkModel h(params(), models::resolve_model("Qwen3-4B"), 1, CudaGraphSizes(512));
    const HostWorkCostModel cost(std::make_unique<FixedCost>(1.0), h);
    const StepCost c = cost.step_cost(mixed_step(true));
    CHECK(close(c.host_ms, 0.471));
    CHECK(close(c.total_ms(), 1.471));
    // A GPU twice as fast changes nothing: the host bounds the step.
    const HostWorkCostModel faster(std::make_unique<FixedCost>(0.5), h);
    CHECK(close(faster.step_cost(mixed_step(true)).total_ms(), 1.471));
}

TEST_CASE("Host work: --enforce-eager launches every kernel; a CUDA graph is one launch", "[engine][host_work]") {
    // A decode of 8 requests, GPU 2.0 ms. CPU: 300 + 5 × 8 = 340 µs.
    // Graphs: a FULL graph (uniform decode, 8 ≤ 512): 10 + 6 sampler kernels × 8 = 58 µs of launches, hidden by the
    // GPU. Serial: 0.340 + 0 + 0.030 = 0.370 → 2.370 ms; overlapped: max(2.0, 0.398) + 0.030 = 2.030 ms.
    // Eager: 368 launches × 8 µs = 2,944 µs, more than the GPU's 2 ms: the forward is launch-bound. Serial: 0.340 +
    // 2.944 + 0.030 = 3.314 ms; overlapped: max(2.0, 0.340 + 2.944) + 0.030 = 3.314 ms.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    const HostWorkCostModel graphs(std::make_unique<FixedCost>(2.0), HostWorkModel(params(), qwen, 1, 512));
    const HostWorkCostModel eager(std::make_unique<FixedCost>(2.0), HostWorkModel(params(), qwen, 1, {}));
    CHECK(close(graphs.host().step_work(decode_step(8, false)).launch_us, 58.0));
    CHECK(close(eager.host().step_work(decode_step(8, false)).launch_us, 2944.0));
    CHECK(close(graphs.step_cost(decode_step(8, false)).total_ms(), 2.370));
    CHECK(close(graphs.step_cost(decode_step(8, true)).total_ms(), 2.030));
    CHECK(close(eager.step_cost(decode_step(8, false)).total_ms(), 3.314));
    CHECK(close(eager.step_cost(decode_step(8, true)).total_ms(), 3.314));
    CHECK(eager.describe() == "fixed, enforce-eager");
    CHECK(graphs.describe() == "fixed");
}

TEST_CASE("CUDA graphs: a capture-size list pads a 7-token decode to 8; above its largest size, no padding",
          "[engine][host_work][cudagraph]") {
    const CudaGraphSizes g = CudaGraphSizes::from_list({8, 1, 4, 2, 4});  // sorted and deduplicated: 1, 2, 4, 8
    CHECK(g.sizes() == std::vector<std::int64_t>{1, 2, 4, 8});
    CHECK(g.padded_tokens(7) == 8);
    CHECK(g.padded_tokens(3) == 4);
    CHECK(g.padded_tokens(8) == 8);
    CHECK(g.padded_tokens(9) == 9);
    CHECK(g.mode(7, true) == CudaGraphSizes::Mode::kFull);
    CHECK(g.mode(7, false) == CudaGraphSizes::Mode::kPiecewise);
    CHECK(g.mode(9, true) == CudaGraphSizes::Mode::kEager);
    // No graphs: nothing padded, every batch eager.
    const CudaGraphSizes none;
    CHECK(none.padded_tokens(7) == 7);
    CHECK(none.mode(7, true) == CudaGraphSizes::Mode::kEager);
    // The roofline with that list: a 7-token decode costs the GEMMs of 8 tokens, a 9-token one those of 9 (eager,
    // unpadded), and with enforce_eager the 7 tokens are costed as 7.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    p.cudagraph_capture_sizes = {1, 2, 4, 8};
    const RooflineCostModel listed(qwen, qwen.dtype, p);
    CHECK(listed.step_cost(decode_step(7, false)).gemm_ms == listed.token_terms(8).gemm_ms);
    CHECK(listed.step_cost(decode_step(9, false)).gemm_ms == listed.token_terms(9).gemm_ms);
    CHECK(listed.token_terms(8).gemm_ms > listed.token_terms(7).gemm_ms);  // 4·8·2,560·2·36 activation bytes more
    p.enforce_eager = true;
    const RooflineCostModel eager(qwen, qwen.dtype, p);
    CHECK(eager.step_cost(decode_step(7, false)).gemm_ms == eager.token_terms(7).gemm_ms);
}

TEST_CASE("CUDA graphs: the default ladder pads as vLLM's 1, 2, 4, 8…248 step 8, 256…max step 16",
          "[engine][host_work][cudagraph]") {
    // The same sizes RooflineCostModel::cudagraph_padded_tokens computes, for every max ≥ 8 a default can take.
    for (const int max : {8, 40, 64, 200, 256, 272, 500, 512}) {
        const CudaGraphSizes g(max);
        CHECK(g.max_size() == max);
        for (std::int64_t n = 1; n <= max + 20; ++n) {
            INFO("max " << max << ", n " << n);
            CHECK(g.padded_tokens(n) == RooflineCostModel::cudagraph_padded_tokens(n, max));
        }
    }
    CHECK(CudaGraphSizes(512).sizes().size() == 3 + 31 + 17);  // 1, 2, 4; 8…248; 256…512
}

}  // namespace
}  // namespace servesim::engine
