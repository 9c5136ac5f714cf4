// Tests the quantized GEMM term of sim/engine/roofline_cost_model.*: decode reads the scheme's bytes, W8A8 fp8
// prefill runs at the fp8 rate, weight-only schemes and fp8 on a GPU without fp8 (vLLM's fp8 Marlin) multiply at the
// bf16 rate. Llama-3.1-8B, all figures from the H100-SXM / A100-80GB datasheet numbers of calibration/gpu_spec.cpp.
#include <cmath>
#include <optional>
#include <string>

#include "models/hf_config.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"

namespace servesim::engine {
namespace {

// |value − expected| ≤ rel · |expected|.
bool near(double value, double expected, double rel) { return std::fabs(value - expected) <= rel * std::fabs(expected); }

RooflineParams h100() {
    RooflineParams p;
    p.gpu_name = "H100-SXM";
    p.peak_flops_per_s = 989.4e12;
    p.memory_bandwidth_bytes_per_s = 3350e9;
    p.fp8_flops_per_s = 1978.9e12;
    p.int8_flops_per_s = 1978.9e12;
    return p;
}

RooflineParams a100() {
    RooflineParams p;
    p.gpu_name = "A100-80GB";
    p.peak_flops_per_s = 312e12;
    p.memory_bandwidth_bytes_per_s = 2039e9;
    p.int8_flops_per_s = 624e12;
    return p;
}

BatchShape decode_one() {
    BatchShape s;
    s.num_tokens = 1;
    s.num_decode_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = 1;
    s.decode_context_tokens = 100;
    return s;
}

BatchShape prefill(std::int64_t tokens) {
    BatchShape s;
    s.num_tokens = tokens;
    s.num_prefill_tokens = tokens;
    s.num_prefill_seqs = 1;
    s.num_seqs = 1;
    s.prefill_attention_work = static_cast<double>(tokens) * tokens / 2;
    return s;
}

models::ModelSpec llama8(const std::optional<std::string>& quantization) {
    return models::apply_engine_quantization(models::resolve_model("Llama-3.1-8B"), quantization, std::nullopt);
}

TEST_CASE("Decode of an fp8 model reads half the bytes of bf16 (bandwidth-bound GEMM term)", "[engine][quant]") {
    // Layer weights without the lm_head: bf16 218,103,808 · 32 · 2 = 13,958,643,712 B; fp8 (online, per-tensor)
    // 6,979,321,856 + 7 · 32 · 4 (scales) = 6,979,322,752 B; activations 4 · 1 · 4096 · 2 · 32 = 1,048,576 B.
    // Bandwidth 3350e9 · 0.85 = 2.8475e12 B/s: bf16 4.90244 ms, fp8 2.45140 ms (compute 0.02 ms either way).
    const RooflineCostModel bf16(llama8(std::nullopt), models::DType::kBFloat16, h100());
    const RooflineCostModel fp8(llama8(std::string("fp8")), models::DType::kBFloat16, h100());
    CHECK(near(bf16.step_cost(decode_one()).gemm_ms, 4.902438, 1e-6));
    CHECK(near(fp8.step_cost(decode_one()).gemm_ms, 2.451403, 1e-6));
    // The lm_head stays bf16: its term is the same.
    CHECK(fp8.step_cost(decode_one()).lm_head_ms == bf16.step_cost(decode_one()).lm_head_ms);
}

TEST_CASE("W8A8 fp8 prefill runs at the fp8 tensor rate; weight-only GPTQ at the bf16 rate", "[engine][quant]") {
    // 8192 tokens · 2 · 6,979,321,856 FLOPs = 1.1435e17: at 989.4e12 · 0.72 → 160.520 ms (bf16, and GPTQ's
    // dequantize-GEMM), at 1978.9e12 · 0.72 → 80.256 ms (fp8). Memory is far below (≤ 8 ms).
    const RooflineCostModel bf16(llama8(std::nullopt), models::DType::kBFloat16, h100());
    const RooflineCostModel fp8(llama8(std::string("fp8")), models::DType::kBFloat16, h100());
    const auto gptq_spec = models::read_hf_config(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/quant/Llama-3.1-8B-Instruct-GPTQ-INT4.json");
    const RooflineCostModel gptq(gptq_spec, models::DType::kBFloat16, h100());
    CHECK(near(bf16.step_cost(prefill(8192)).gemm_ms, 160.51986, 1e-6));
    CHECK(near(fp8.step_cost(prefill(8192)).gemm_ms, 80.25587, 1e-6));
    CHECK(near(gptq.step_cost(prefill(8192)).gemm_ms, 160.51986, 1e-6));
    // GPTQ decode reads its 4-bit bytes: 3,608,674,304 + 1,048,576 over 2.8475e12 → 1.26768 ms.
    CHECK(near(gptq.step_cost(decode_one()).gemm_ms, 1.267681, 1e-6));
}

TEST_CASE("fp8 on an A100 (no fp8 tensor cores) runs weight-only fp8 Marlin: bf16 math, fp8 bytes", "[engine][quant]") {
    // Prefill 1.1435e17 FLOPs at 312e12 · 0.72 → 509.033 ms, as bf16; decode reads 6,980,371,328 B over
    // 2039e9 · 0.85 → 4.02756 ms (bf16 would read twice that).
    const RooflineCostModel bf16(llama8(std::nullopt), models::DType::kBFloat16, a100());
    const RooflineCostModel fp8(llama8(std::string("fp8")), models::DType::kBFloat16, a100());
    CHECK(near(fp8.step_cost(prefill(8192)).gemm_ms, 509.03316, 1e-6));
    CHECK(near(fp8.step_cost(prefill(8192)).gemm_ms, bf16.step_cost(prefill(8192)).gemm_ms, 1e-12));
    CHECK(near(fp8.step_cost(decode_one()).gemm_ms, 4.027563, 1e-6));
    CHECK(fp8.describe().find("fp8 Marlin") != std::string::npos);
}

}  // namespace
}  // namespace servesim::engine
