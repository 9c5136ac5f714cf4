// Step costs: the roofline model's terms worked by hand for one decode step, vLLM's CUDA-graph padding, and the
// profile model's sum of curves with fp8 KV scaling (sim/engine/roofline_cost_model.*, profile_cost_model.*).
#include <cmath>

#include "calibration/hardware_profile.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/profile_cost_model.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

using testing::close;
using testing::kProfileText;

TEST_CASE("Roofline: a batch-1 decode of Qwen3-4B on an H200 is weight-bound", "[engine][cost]") {
    // 4,022,272,000 params × 2 B = 8,044,544,000 B read per step; the tied lm_head (2,560 × 151,936 × 2 =
    // 777,912,320 B) is its own term. Bandwidth 4.8 TB/s × 0.85 = 4.08 TB/s.
    //   gemm     (8,044,544,000 − 777,912,320 + 4·1·2,560·2·36 activations) / 4.08e12 = 1.781218 ms
    //   attn     147,456 B/token × 1,000 context / 4.08e12                               = 0.036141 ms
    //   lm_head  (777,912,320 + 4 × 151,936 logits) / 4.08e12                              = 0.190814 ms
    //   overhead: the kernels' boundaries, (36 layers × 10 + 8) = 368 kernels × 3.4 us        = 1.2512 ms
    //            (RooflineParams::kernel_gap_us); host work is HostWorkCostModel's (host_work_test.cpp)
    //   total    1.781218 + 0.036141 + 0.190814 + 1.2512                                   = 3.259373 ms
    const models::ModelSpec spec = models::resolve_model("Qwen3-4B");
    RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 4.8e12;
    const RooflineCostModel cost(spec, spec.dtype, p);
    BatchShape s;
    s.num_tokens = 1;
    s.num_decode_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = 1;
    s.decode_context_tokens = 1000;
    const StepCost c = cost.step_cost(s);
    CHECK(close(c.gemm_ms, 1.781218, 1e-5));
    CHECK(close(c.attn_decode_ms, 0.036141, 1e-5));
    CHECK(close(c.lm_head_ms, 0.190814, 1e-5));
    CHECK(close(c.overhead_ms, 1.2512, 1e-9));
    CHECK(c.host_ms == 0.0);
    CHECK(c.attn_prefill_ms == 0.0);
    CHECK(c.gdn_ms == 0.0);
    CHECK(close(c.total_ms(), 3.259373, 1e-5));
}

TEST_CASE("Roofline: decode-only batches run vLLM's CUDA-graph sizes", "[engine][cost]") {
    // Capture sizes 1, 2, 4, 8…248 step 8, 256…max step 16 (VllmConfig._set_cudagraph_sizes); above max: eager.
    CHECK(RooflineCostModel::cudagraph_padded_tokens(1, 512) == 1);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(3, 512) == 4);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(5, 512) == 8);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(9, 512) == 16);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(250, 512) == 256);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(257, 512) == 272);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(511, 512) == 512);
    CHECK(RooflineCostModel::cudagraph_padded_tokens(600, 512) == 600);
}

// One 100-token prefill chunk (cached 0: work 100·50 = 5,000) sampling its first token, plus 3 decodes with 3,000
// context tokens in all: 103 tokens, 4 sequences, 4 sampled.
BatchShape mixed_batch() {
    BatchShape s;
    s.num_tokens = 103;
    s.num_prefill_tokens = 100;
    s.num_prefill_seqs = 1;
    s.prefill_attention_work = 5000;
    s.num_decode_seqs = 3;
    s.decode_context_tokens = 3000;
    s.num_sampled_seqs = 4;
    s.num_seqs = 4;
    return s;
}

TEST_CASE("Profile: a step is the sum of its curves; fp8 KV halves decode attention", "[engine][cost]") {
    const char* text = kProfileText;
    // mixed_batch(): 103 tokens, a mixed batch ≤ 512 runs a PIECEWISE graph padded to 104 (GEMMs only).
    //   gemm 1 + 1.04 = 2.04; lm_head 0.1 + 0.004 = 0.104; attn_prefill 0.005;
    //   attn_decode 0.05 + 0.03 + 0.006 = 0.086; overhead 0.5 + 0.04 = 0.54  → 2.775 ms
    const BatchShape s = mixed_batch();
    const ProfileCostModel bf16(calibration::load_profile_string(text, "test"), "test");
    CHECK(close(bf16.step_cost(s).gemm_ms, 2.04));
    CHECK(close(bf16.step_cost(s).total_ms(), 2.775));
    const ProfileCostModel fp8(calibration::load_profile_string(text, "test"), "test", 512, 0.5);
    CHECK(close(fp8.step_cost(s).attn_decode_ms, 0.043));
    CHECK(close(fp8.step_cost(s).total_ms(), 2.775 - 0.043));
    // With graphs capped at 64 tokens (max_num_seqs 32) the 103-token batch runs eager: gemm 1 + 1.03 = 2.03.
    const ProfileCostModel eager(calibration::load_profile_string(text, "test"), "test", 64);
    CHECK(close(eager.step_cost(s).gemm_ms, 2.03));
}

TEST_CASE("Profile at TP 2: one rank's curves plus the roofline's all-reduce term", "[engine][cost]") {
    // Same curves as above, measured for tensor_parallel_size 2, costing Qwen3-Next-80B-A3B at TP 2 over NVSwitch at
    // 450 GB/s. 48 layers × (mixer + MoE MLP) = 96 all-reduces of the 104 padded tokens × 2,048 × 2 B = 425,984 B,
    // under 8 MiB on 2 GPUs: vLLM's custom all-reduce, one-shot (sim/engine/collectives.h). Bus bandwidth at 2 ranks
    // 450 · 329/450 = 329 GB/s: 4.3 µs + (2−1) · 425,984 / 329e9 s = 0.0043 + 0.0012948 = 0.0055948 ms, × 96 =
    // 0.537099 ms; total 2.775 (curves) + 0.537099 = 3.312099 ms
    const std::string text = std::string(kProfileText) + "tensor_parallel_size: 2\n";
    const models::ModelSpec spec = models::resolve_model("Qwen3-Next-80B-A3B");
    const CollectiveLink nvswitch{LinkKind::kNvlinkSwitch, 450e9};
    const TensorParallelComm comm = make_tensor_parallel_comm(spec, 2, nvswitch);
    CHECK(comm.num_allreduces_per_step == 96);
    const ProfileCostModel cost(calibration::load_profile_string(text, "tp2.yaml"), "tp2.yaml", 512, 1.0, comm);
    const BatchShape s = mixed_batch();
    CHECK(close(cost.step_cost(s).comm_ms, 0.537099, 1e-6));
    CHECK(close(cost.step_cost(s).total_ms(), 3.312099, 1e-6));
    // The roofline's comm term for the same step is the same function.
    RooflineParams rp;
    rp.peak_flops_per_s = 989e12;
    rp.memory_bandwidth_bytes_per_s = 4.8e12;
    rp.tensor_parallel_size = 2;
    rp.tp_link = nvswitch;
    const RooflineCostModel roof(spec, spec.dtype, rp);
    CHECK(close(roof.step_cost(s).comm_ms, 0.537099, 1e-6));
}

TEST_CASE("Profile: a tensor_parallel_size unlike the engine's is refused naming file and both", "[engine][cost]") {
    const std::string text = std::string(kProfileText) + "tensor_parallel_size: 2\n";
    const models::ModelSpec spec = models::resolve_model("Qwen3-Next-80B-A3B");
    std::string msg;
    try {
        const ProfileCostModel cost(calibration::load_profile_string(text, "h200-tp2.yaml"), "h200-tp2.yaml", 512, 1.0,
                                    make_tensor_parallel_comm(spec, 4, CollectiveLink{LinkKind::kNvlinkSwitch, 450e9}));
    } catch (const ConfigError& e) {
        msg = e.what();
    }
    CHECK(msg.find("h200-tp2.yaml") != std::string::npos);
    CHECK(msg.find("tensor_parallel_size 2") != std::string::npos);
    CHECK(msg.find("tensor_parallel_size 4") != std::string::npos);
    // A TP-1 profile (no key) with a TP-1 engine is accepted and adds no comm term.
    const ProfileCostModel one(calibration::load_profile_string(kProfileText, "tp1.yaml"), "tp1.yaml");
    CHECK(one.step_cost(mixed_batch()).comm_ms == 0.0);
}


TEST_CASE("Profile: attn_prefill is the work-span bound max(work curve, span line)", "[engine][cost]") {
    // attn_prefill(work) = 1e-6·work; attn_prefill_span(max_context_tokens) = 0.2 + 1e-3·max_context_tokens.
    // A 256-token chunk on 16,128 cached tokens: work 256·(16,128 + 128) = 4,161,536 → 4.161536 ms; span 16,384
    //   → 0.2 + 16.384 = 16.584 ms: span-bound, 16.584 ms.
    // A 2,048-token chunk on 1,008 cached: the same work, 4.161536 ms; span 3,056 → 3.256 ms: work-bound.
    std::string text = kProfileText;
    const std::string anchor = "  overhead:";
    text.insert(text.find(anchor),
                "  attn_prefill_span: {variables: [max_context_tokens], pieces: [{x_min: 1024, x_max: 16896, "
                "coefficients: [0.2, 1.0e-3, 0]}], r2: 1, max_rel_residual: 0, num_points: 6}\n");
    const ProfileCostModel cost(calibration::load_profile_string(text, "test"), "test");
    BatchShape s;
    s.num_tokens = 256;
    s.num_prefill_tokens = 256;
    s.num_prefill_seqs = 1;
    s.prefill_attention_work = 256.0 * (16128 + 128);
    s.prefill_max_context_tokens = 16128 + 256;
    s.num_seqs = 1;
    CHECK(close(cost.step_cost(s).attn_prefill_ms, 16.584));
    s.num_tokens = 2048;
    s.num_prefill_tokens = 2048;
    s.prefill_attention_work = 2048.0 * (1008 + 1024);
    s.prefill_max_context_tokens = 1008 + 2048;
    CHECK(close(cost.step_cost(s).attn_prefill_ms, 4.161536));
    // Without the span curve the term is the work curve alone.
    const ProfileCostModel work_only(calibration::load_profile_string(kProfileText, "test"), "test");
    s.prefill_attention_work = 256.0 * (16128 + 128);
    s.prefill_max_context_tokens = 16128 + 256;
    CHECK(close(work_only.step_cost(s).attn_prefill_ms, 4.161536));
}

TEST_CASE("Profile: a profile built in code without a required curve is refused naming it", "[engine][cost]") {
    calibration::HardwareProfile p = calibration::load_profile_string(kProfileText, "test");
    p.curves.erase("attn_decode");
    try {
        const ProfileCostModel cost(p, "in-code.yaml");
        FAIL("a profile without attn_decode was accepted");
    } catch (const ConfigError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("in-code.yaml") != std::string::npos);
        CHECK(msg.find("attn_decode") != std::string::npos);
        CHECK(msg.find("missing required curve") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::engine
