// Mamba layers in the roofline (sim/engine/roofline_cost_model.cpp, mamba2_scan_work): the projections are GEMMs
// like any linear layer; between them a prefill runs the causal conv and the chunked SSD scan, a decode the
// selective-state update, and every sequence of the step reads and writes its conv + ssm state once per layer.
// Figures worked by hand below (H200: 989 TFLOP/s × gdn_efficiency 0.25 = 2.4725e14 FLOP/s for the scan kernels;
// 4.8 TB/s × 0.85 = 4.08e12 B/s).
#include "models/hf_config.h"
#include "models/model_derived.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::close;

std::string fixture(const std::string& name) { return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name; }

RooflineParams h200(int tp = 1) {
    RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    p.tensor_parallel_size = tp;
    p.tp_link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
    return p;
}

BatchShape prefill(std::int64_t tokens) {
    BatchShape s;
    s.num_tokens = tokens;
    s.num_prefill_tokens = tokens;
    s.num_prefill_seqs = 1;
    s.prefill_attention_work = static_cast<double>(tokens) * static_cast<double>(tokens) / 2.0;
    s.prefill_max_context_tokens = tokens;
    s.num_sampled_seqs = 1;
    s.num_seqs = 1;
    return s;
}

BatchShape decodes(std::int64_t seqs, std::int64_t context_each) {
    BatchShape s;
    s.num_tokens = seqs;
    s.num_decode_seqs = seqs;
    s.decode_context_tokens = seqs * context_each;
    s.num_sampled_seqs = seqs;
    s.num_seqs = seqs;
    return s;
}

TEST_CASE("Roofline: Mamba-Codestral-7B prefill runs the SSD scan, compute-bound; decode is state-bound",
          "[engine][cost][mamba2]") {
    // 64 Mamba2 layers: H 128 heads × P 64, N 128, G 8, chunk Q 256, conv 4 over D = 8,192 + 2·8·128 = 10,240.
    // Scan FLOPs per token and layer: conv 2·4·10,240 = 81,920; Bᵀx 2·H·P·N = 2,097,152; state passing
    //   2·H·P·N/Q = 8,192; C·Bᵀ 2·G·Q·N = 524,288; C·state 2,097,152; (CBᵀ∘L)·x 2·H·Q·P = 4,194,304 → 9,003,008.
    // Bytes per token and layer: (3·10,240 + 128 + 8,192) · 2 = 78,080; chunk states 1,048,576 · (8 + 4)/256 =
    //   49,152; CB 8·8·256 = 16,384 → 143,616.
    // A 2,048-token prefill: 64 · 9,003,008 · 2,048 / 2.4725e14 = 4.772668 ms against 64 · 143,616 · 2,048 /
    //   4.08e12 = 4.613734 ms: compute-bound. State read + write: 2 · 138,149,888 / 4.08e12 = 0.067721 ms.
    //   gdn term 4.840389 ms.
    const models::ModelSpec spec = models::read_hf_config(fixture("Mamba-Codestral-7B-v0.1.json"));
    REQUIRE(models::state_bytes_per_sequence(spec) == 138'149'888);
    const RooflineCostModel cost(spec, spec.dtype, h200());
    const StepCost p = cost.step_cost(prefill(2048));
    CHECK(close(p.gdn_ms, 4.840389, 1e-6));
    CHECK(p.attn_prefill_ms == 0.0);  // no attention layer
    // 8 decodes: state 8 · 2 · 138,149,888 / 4.08e12 = 0.541764 ms; the updates' FLOPs 8 · 64 · (81,920 + 5·H·P·N
    //   = 5,324,800) / 2.4725e14 = 0.011026 ms stay under it.
    const StepCost d = cost.step_cost(decodes(8, 4096));
    CHECK(close(d.gdn_ms, 0.541764, 1e-6));
    CHECK(d.attn_decode_ms == 0.0);
    // TP 2: heads, groups and conv channels split, so every figure halves: 4.840389 / 2 = 2.420194 ms.
    const RooflineCostModel tp2(spec, spec.dtype, h200(2));
    CHECK(close(tp2.step_cost(prefill(2048)).gdn_ms, 2.420194, 1e-6));
}

TEST_CASE("Roofline: Bamba-9B's 29 Mamba2 layers cost their scan; one more scan chunk for a cut state copy",
          "[engine][cost][mamba2]") {
    // 29 Mamba2 layers (attention at 9, 18, 27): H 128 × P 64, N 128, G 1, Q 256, D = 8,192 + 256 = 8,448.
    // FLOPs per token and layer 67,584 + 4,194,304 + 8,192 + 65,536 + 4,194,304 = 8,529,920 (the C·state term
    // counted in 4·H·P·N); bytes (3·8,448 + 128 + 8,192)·2 + 49,152 + 2,048 = 118,528.
    // A 1,000-token prefill: 29 · 8,529,920 · 1,000 / 2.4725e14 = 1.000476 ms (bytes: 0.842478 ms); state
    //   2 · 62,287,360 / 4.08e12 = 0.030533 ms → 1.031009 ms. State copies are the replica's (StateSnapshotCost),
    //   not the cost model's: snapshot_ms stays 0. One more scan chunk of Q = 256 tokens (scan_chunk_ms): FLOPs
    //   29 · 8,529,920 · 256 / 2.4725e14 = 0.256122 ms, bytes 29 · 118,528 · 256 / 4.08e12 = 0.215675 ms → 0.256122,
    //   plus one state write 62,287,360 / 4.08e12 = 0.015267 ms → 0.271388 ms.
    const models::ModelSpec spec = models::read_hf_config(fixture("Bamba-9B.json"));
    REQUIRE(models::state_bytes_per_sequence(spec) == 62'287'360);
    const RooflineCostModel cost(spec, spec.dtype, h200());
    BatchShape s = prefill(1000);
    s.num_snapshots = 1;
    const StepCost c = cost.step_cost(s);
    CHECK(close(c.gdn_ms, 1.031009, 1e-6));
    CHECK(c.snapshot_ms == 0.0);
    CHECK(close(cost.scan_chunk_ms(256), 0.271388, 1e-6));
    CHECK(c.attn_prefill_ms > 0.0);  // its 3 attention layers are costed as before
}

TEST_CASE("Roofline: Jamba's Mamba-1 selective scan is bound by its activations", "[engine][cost][mamba1]") {
    // Jamba-v0.1: 28 Mamba-1 layers, inner 2 · 4,096 = 8,192, N 16, conv 4. Per token and layer: FLOPs conv
    // 2·4·8,192 = 65,536 + scan 7·8,192·16 = 917,504 → 983,040; bytes (6·8,192 + 2·16)·2 = 98,368.
    // A 1,000-token prefill: FLOPs 28 · 983,040 · 1,000 / 2.4725e14 = 0.111325 ms, bytes 28 · 98,368 · 1,000 /
    //   4.08e12 = 0.675075 ms: bandwidth-bound; state 2 · 8,716,288 / 4.08e12 = 0.004273 ms → 0.679347 ms.
    const models::ModelSpec spec = models::read_hf_config(fixture("Jamba-v0.1.json"));
    REQUIRE(models::state_bytes_per_sequence(spec) == 8'716'288);
    const RooflineCostModel cost(spec, spec.dtype, h200());
    CHECK(close(cost.step_cost(prefill(1000)).gdn_ms, 0.679347, 1e-6));
    // 8 decodes: the state traffic 8 · 2 · 8,716,288 / 4.08e12 = 0.034182 ms.
    CHECK(close(cost.step_cost(decodes(8, 1000)).gdn_ms, 0.034182, 1e-6));
}

}  // namespace
}  // namespace servesim::engine
