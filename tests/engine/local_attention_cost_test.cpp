// Sliding-window and chunked local attention in the step cost (sim/engine/cost_model.h LocalAttentionSpan,
// Replica::batch_shape, RooflineCostModel, ProfileCostModel): a local layer attends to at most its window (vLLM
// FlashAttention window_size = (W − 1, 0)) or to its own chunk (make_local_attention_virtual_batches), full layers
// to the whole context. Every figure is worked by hand in the comments (H200: 989 TFLOP/s, 4.8 TB/s; bandwidth ×
// 0.85 = 4.08e12 B/s, attention FLOP/s × 0.55 = 5.4395e14).
#include <memory>

#include "calibration/hardware_profile.h"
#include "models/hf_config.h"
#include "sim/engine/pipeline_parallel_cost_model.h"
#include "sim/engine/profile_cost_model.h"
#include "sim/engine/replica.h"
#include "sim/engine/request.h"
#include "sim/engine/roofline_cost_model.h"
#include "sim/engine/scheduler.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::close;
using testing::kProfileText;
using testing::content;
using Kind = LocalAttentionSpan::Kind;

std::string fixture(const std::string& name) { return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name; }

RooflineParams h200() {
    RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    return p;
}

// One decode at `context` tokens (its new token included), shaped as batch_shape shapes it for `spans`.
BatchShape decode_at(std::int64_t context, const LocalAttentionSpans& spans) {
    Request r(core::RequestId{1}, {{content(1), context - 1}}, 8, content(101), core::SimTime::zero(), 16);
    StepPlan plan;
    plan.scheduled.push_back({&r, 1, context - 1, true});
    return Replica::batch_shape(plan, 16, false, spans);
}

// One prefill chunk of n tokens after `computed` cached ones.
BatchShape prefill_chunk(std::int64_t computed, std::int64_t n, const LocalAttentionSpans& spans) {
    Request r(core::RequestId{1}, {{content(1), computed + n + 100}}, 8, content(101), core::SimTime::zero(), 16);
    StepPlan plan;
    plan.scheduled.push_back({&r, n, computed, false});
    return Replica::batch_shape(plan, 16, false, spans);
}

TEST_CASE("LocalAttentionSpan: keys capped at the window or at the chunk start", "[engine][cost][swa]") {
    const LocalAttentionSpan w4096{Kind::kSlidingWindow, 4096};
    // A 2,048-token chunk ending at 32,768: every query sees 4,096 keys → 4,096 · 2,048 = 8,388,608 (full: 2,048 ·
    // (30,720 + 1,024) = 65,011,712); the chunk spans min(32,768, 4,096 + 2,047) = 6,143 keys.
    CHECK(w4096.prefill_work(30720, 2048) == 8388608.0);
    CHECK(w4096.prefill_span_tokens(30720, 2048) == 6143);
    CHECK(w4096.decode_keys(32768) == 4096);
    CHECK(w4096.decode_keys(100) == 100);
    // Inside the window nothing is capped: 500 · (1,000 + 250) = 625,000, span 1,500, as full attention.
    CHECK(w4096.prefill_work(1000, 500) == 625000.0);
    CHECK(w4096.prefill_span_tokens(1000, 500) == 1500);
    // gpt-oss, 128-token window, a 1,000-token prompt from 0: ∫₀¹²⁸ x dx + 128 · 872 = 8,192 + 111,616 = 119,808.
    const LocalAttentionSpan w128{Kind::kSlidingWindow, 128};
    CHECK(w128.prefill_work(0, 1000) == 119808.0);
    CHECK(w128.prefill_span_tokens(0, 1000) == 1000);  // min(1,000, 128 + 999)
    // Llama 4, 8,192-token chunks, 400 queries at 8,000…8,400: positions to 8,192 see their chunk from 0,
    // (8,192² − 8,000²)/2 = 1,554,432; past it the new chunk restarts, 208²/2 = 21,632 → 1,576,064. The longest
    // virtual sequence is the whole first chunk, 8,192 keys.
    const LocalAttentionSpan c8192{Kind::kChunkedLocal, 8192};
    CHECK(c8192.prefill_work(8000, 400) == 1576064.0);
    CHECK(c8192.prefill_span_tokens(8000, 400) == 8192);
    CHECK(c8192.prefill_span_tokens(8192, 400) == 400);  // a chunk starting on a boundary spans only itself
    // A decode reads its own chunk: context 8,192 → 8,192 keys; 8,193 → 1; 20,000 → 19,999 mod 8,192 + 1 = 3,616.
    CHECK(c8192.decode_keys(8192) == 8192);
    CHECK(c8192.decode_keys(8193) == 1);
    CHECK(c8192.decode_keys(20000) == 3616);
}

TEST_CASE("batch_shape: each local span gets its capped work beside the full-attention figures",
          "[engine][cost][swa]") {
    const LocalAttentionSpans spans{{LocalAttentionSpan{Kind::kSlidingWindow, 4096}}, 1};
    const BatchShape d = decode_at(32768, spans);
    CHECK(d.decode_context_tokens == 32768);
    CHECK(d.local[0].decode_context_tokens == 4096);
    CHECK(d.local[1].decode_context_tokens == 0);  // unused entry
    CHECK(d.num_local_spans == 1);
    const BatchShape p = prefill_chunk(30720, 2048, spans);
    CHECK(p.prefill_attention_work == 65011712.0);
    CHECK(p.prefill_max_context_tokens == 32768);
    CHECK(p.local[0].prefill_attention_work == 8388608.0);
    CHECK(p.local[0].prefill_max_context_tokens == 6143);
    // Without spans (a full-attention model) nothing local is filled.
    CHECK(decode_at(32768, {}).local[0].decode_context_tokens == 0);
}

TEST_CASE("Roofline: gemma-2 at 32k reads the window's KV in its 21 sliding layers", "[engine][cost][swa]") {
    // gemma-2-9b: 42 layers, even ones sliding over 4,096; 8 KV heads × 256 × 2 B × 2 = 8,192 B per token per layer.
    // Decode at 32,768: 21 · 8,192 · 32,768 + 21 · 8,192 · 4,096 = 6,341,787,648 B → 1.554360 ms (all 42 layers at
    // the full context: 11,274,289,152 B → 2.763306 ms). FLOPs 4·16·256 = 16,384 per key and layer, × 774,144 keys:
    // 0.023318 ms, below the bandwidth roof.
    const models::ModelSpec spec = models::read_hf_config(fixture("gemma-2-9b-it.json"));
    const RooflineCostModel cost(spec, spec.dtype, h200());
    const LocalAttentionSpans spans = cost.local_attention_spans();
    REQUIRE(spans.count == 1);
    CHECK(spans.spans[0] == LocalAttentionSpan{Kind::kSlidingWindow, 4096});
    CHECK(close(cost.step_cost(decode_at(32768, spans)).attn_decode_ms, 1.554360, 1e-6));
    // Prefill of 2,048 tokens ending at 32,768: 21 · 16,384 · (65,011,712 + 8,388,608) FLOPs = 46.427811 ms (all
    // layers full: 42 · 16,384 · 65,011,712 → 82.243551 ms).
    CHECK(close(cost.step_cost(prefill_chunk(30720, 2048, spans)).attn_prefill_ms, 46.427811, 1e-5));
    // A shape built without the model's spans (num_local_spans 0) costs every layer at the full context, the
    // upper bound: 2.763306 ms.
    CHECK(close(cost.step_cost(decode_at(32768, {})).attn_decode_ms, 2.763306, 1e-6));
    // Below the window the model costs what full attention costs: 42 layers at 1,000 keys, 42 · 8,192 · 1,000 B.
    CHECK(close(cost.step_cost(decode_at(1000, spans)).attn_decode_ms, 42.0 * 8192 * 1000 / 4.08e12 * 1e3, 1e-9));
}

TEST_CASE("Roofline: gpt-oss-20b's 128-token windows; Llama 4's 8,192-token chunks", "[engine][cost][swa]") {
    // gpt-oss-20b: 24 layers alternating sliding 128 / full; 8 KV heads × 64 × 2 B × 2 = 2,048 B per token per layer.
    // Decode at 32,768: 12 · 2,048 · (32,768 + 128) = 808,452,096 B → 0.198150 ms (all full: 0.394758 ms).
    // Prefill of a 1,000-token prompt: 12 layers · 4·64·64 = 16,384 FLOPs per key × (500,000 + 119,808) =
    // 0.224026 ms (all full: 24 · 16,384 · 500,000 → 0.361445 ms).
    const models::ModelSpec oss = models::read_hf_config(fixture("gpt-oss-20b.json"));
    const RooflineCostModel oss_cost(oss, oss.dtype, h200());
    const LocalAttentionSpans oss_spans = oss_cost.local_attention_spans();
    REQUIRE(oss_spans.count == 1);
    CHECK(oss_spans.spans[0] == LocalAttentionSpan{Kind::kSlidingWindow, 128});
    CHECK(close(oss_cost.step_cost(decode_at(32768, oss_spans)).attn_decode_ms, 0.198150, 1e-6));
    CHECK(close(oss_cost.step_cost(prefill_chunk(0, 1000, oss_spans)).attn_prefill_ms, 0.224026, 1e-6));
    // Llama-4-Scout: 48 layers, 36 chunked over 8,192, every 4th global; 8 KV heads × 128 × 2 B × 2 = 4,096 B.
    // Decode at 20,000: 12 · 4,096 · 20,000 + 36 · 4,096 · 3,616 = 1,516,240,896 B → 0.371628 ms (all global:
    // 0.963765 ms). Prefill of 400 tokens at 8,000: 4·40·128 = 20,480 FLOPs per key × (12 · 3,280,000 + 36 ·
    // 1,576,064) = 3.618151 ms (all global: 5.927698 ms).
    const models::ModelSpec scout = models::read_hf_config(fixture("Llama-4-Scout-17B-16E-Instruct.json"));
    const RooflineCostModel scout_cost(scout, scout.dtype, h200());
    const LocalAttentionSpans scout_spans = scout_cost.local_attention_spans();
    REQUIRE(scout_spans.count == 1);
    CHECK(scout_spans.spans[0] == LocalAttentionSpan{Kind::kChunkedLocal, 8192});
    CHECK(close(scout_cost.step_cost(decode_at(20000, scout_spans)).attn_decode_ms, 0.371628, 1e-6));
    CHECK(close(scout_cost.step_cost(prefill_chunk(8000, 400, scout_spans)).attn_prefill_ms, 3.618151, 1e-6));
}

TEST_CASE("Profile: each layer group's share of the attention curves at its own keys", "[engine][cost][swa]") {
    // Curves of every attention layer: decode 0.05 + 1e-5·context + 0.002·sequences, prefill 1e-6·work.
    // gemma-2 (21 full, 21 sliding over 4,096), one decode at 32,768: ½ (0.05 + 0.32768 + 0.002) + ½ (0.05 +
    // 0.04096 + 0.002) = 0.18984 + 0.04648 = 0.23632 ms (the model without the split: 0.37968).
    // Its 2,048-token chunk ending at 32,768: ½ · 65.011712 + ½ · 8.388608 = 36.70016 ms.
    const models::ModelSpec gemma = models::read_hf_config(fixture("gemma-2-9b-it.json"));
    const AttentionLayerGroups g = attention_layer_groups(gemma);
    CHECK(g.full_layers == 21);
    CHECK(g.local_layers[0] == 21);
    const ProfileCostModel cost(calibration::load_profile_string(kProfileText, "test"), "test", 512, 1.0, {}, g);
    const LocalAttentionSpans spans = cost.local_attention_spans();
    CHECK(close(cost.step_cost(decode_at(32768, spans)).attn_decode_ms, 0.23632));
    CHECK(close(cost.step_cost(prefill_chunk(30720, 2048, spans)).attn_prefill_ms, 36.70016));
    const ProfileCostModel full(calibration::load_profile_string(kProfileText, "test"), "test");
    CHECK(full.local_attention_spans().count == 0);
    CHECK(close(full.step_cost(decode_at(32768, {})).attn_decode_ms, 0.37968));
    // Llama-4-Scout (12 global, 36 chunked over 8,192), one decode at 20,000: ¼ (0.05 + 0.2 + 0.002) + ¾ (0.05 +
    // 0.03616 + 0.002) = 0.063 + 0.06612 = 0.12912 ms.
    const AttentionLayerGroups scout = attention_layer_groups(
        models::read_hf_config(fixture("Llama-4-Scout-17B-16E-Instruct.json")));
    const ProfileCostModel scout_cost(calibration::load_profile_string(kProfileText, "test"), "test", 512, 1.0, {},
                                      scout);
    CHECK(close(scout_cost.step_cost(decode_at(20000, scout_cost.local_attention_spans())).attn_decode_ms, 0.12912));
}

TEST_CASE("PP: a micro-batch carries its share of the local work and forwards the inner model's spans",
          "[engine][cost][swa][pp]") {
    BatchShape s;
    s.num_seqs = 4;
    s.local[0].prefill_attention_work = 1000;
    s.local[0].decode_context_tokens = 4097;
    s.local[0].prefill_max_context_tokens = 700;
    const BatchShape m = PipelineParallelCostModel::micro_batch(s, 2);
    CHECK(m.local[0].prefill_attention_work == 500.0);
    CHECK(m.local[0].decode_context_tokens == 2049);  // rounded up, as the full-attention context
    CHECK(m.local[0].prefill_max_context_tokens == 700);
    const models::ModelSpec gemma = models::read_hf_config(fixture("gemma-2-9b-it.json"));
    PipelineHop hop;
    hop.pipeline_parallel_size = 2;
    const PipelineParallelCostModel pp(std::make_unique<RooflineCostModel>(gemma, gemma.dtype, h200()), hop);
    CHECK(pp.local_attention_spans().count == 1);
}

}  // namespace
}  // namespace servesim::engine
