// Tests of sim/engine/roofline_cost_model.*: the cost model owns what it reads, so the ModelSpec it was built from
// may move or die (app::PreparedExperiment is moved into a vector after its cost model is built); the token-count
// terms a step reads from the capture-size table are those token_terms computes.
#include "sim/engine/roofline_cost_model.h"

#include <cstdint>
#include <optional>
#include <string>

#include "models/model_registry.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

TEST_CASE("RooflineCostModel does not keep a reference to the caller's ModelSpec", "[engine]") {
    std::optional<models::ModelSpec> spec = models::resolve_model("Qwen3-4B");
    RooflineParams params;
    params.peak_flops_per_s = 989e12;
    params.memory_bandwidth_bytes_per_s = 4.8e12;
    const RooflineCostModel cost(*spec, spec->dtype, params);
    BatchShape decode;
    decode.num_tokens = 8;
    decode.num_decode_seqs = 8;
    decode.num_seqs = 8;
    decode.num_sampled_seqs = 8;
    decode.decode_context_tokens = 8 * 1000;
    const double before = cost.step_cost(decode).total_ms();
    // Another, much larger model in the same storage: a cost model holding a pointer would now price Qwen3-32B.
    spec = models::resolve_model("Qwen3-32B");
    CHECK(cost.step_cost(decode).total_ms() == before);
    spec.reset();
    CHECK(cost.step_cost(decode).total_ms() == before);
}

TEST_CASE("RooflineCostModel's tabled step terms are token_terms' and lm_head_ms' to the bit", "[engine]") {
    // max_cudagraph_tokens 40: capture sizes 1, 2, 4, 8, 16, 24, 32, 40 come from the table; 3 tokens run as 4 and
    // 33 as 40 (table), 41 runs eager and unpadded (computed), 0 tokens (no step) is computed too. A dense model
    // (Qwen3-4B: weight bytes fixed) and a MoE one (Qwen3-235B-A22B: the experts read grow with the count), at TP 1
    // and at TP 2 (the all-reduces then cost something).
    for (const std::string name : {"Qwen3-4B", "Qwen3-235B-A22B"}) {
        for (const int tp : {1, 2}) {
            const models::ModelSpec spec = models::resolve_model(name);
            RooflineParams params;
            params.peak_flops_per_s = 989e12;
            params.memory_bandwidth_bytes_per_s = 4.8e12;
            params.max_cudagraph_tokens = 40;
            params.tensor_parallel_size = tp;
            params.tp_link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
            const RooflineCostModel cost(spec, spec.dtype, params);
            for (std::int64_t n = 0; n <= 100; ++n) {
                BatchShape shape;
                shape.num_tokens = n;
                shape.num_decode_seqs = n;
                shape.num_seqs = n;
                shape.decode_context_tokens = n * 1000;
                shape.num_sampled_seqs = n;
                const std::int64_t padded = RooflineCostModel::cudagraph_padded_tokens(n, 40);
                const RooflineCostModel::TokenTerms direct = cost.token_terms(padded);
                const StepCost c = cost.step_cost(shape);
                INFO(name << " TP " << tp << " tokens " << n);
                CHECK(c.gemm_ms == direct.gemm_ms);  // exact: the same function of the same count
                CHECK(c.comm_ms == direct.comm_ms);
                // lm_head: from the table for 1..40 sampled sequences, computed above; none sampled, no term.
                CHECK(c.lm_head_ms == (n > 0 ? cost.lm_head_ms(n) : 0.0));
                if (n > 0) {
                    CHECK((tp > 1) == (c.comm_ms > 0));
                }
            }
            CHECK(RooflineCostModel::cudagraph_padded_tokens(3, 40) == 4);
            CHECK(RooflineCostModel::cudagraph_padded_tokens(33, 40) == 40);
            CHECK(RooflineCostModel::cudagraph_padded_tokens(41, 40) == 41);
            // More tokens never cost less GEMM time: 40 (a full graph) ≥ 24 ≥ 1.
            CHECK(cost.token_terms(40).gemm_ms >= cost.token_terms(24).gemm_ms);
            CHECK(cost.token_terms(24).gemm_ms >= cost.token_terms(1).gemm_ms);
        }
    }
}

TEST_CASE("RooflineCostModel prices the routed experts as their own roof at the grouped GEMM's efficiency",
          "[engine]") {
    // One MoE layer: 8 experts, top 2, hidden 1,024, experts of 3 · 1,024 · 512 = 1,572,864 params (3,145,728 B), a
    // router of 1,024 · 8 (16,384 B). H100 figures: 989 TFLOP/s, 3.35 TB/s at 0.85 = 2.8475e12 B/s, GEMMs at 0.72.
    const models::ModelSpec spec = testing::one_moe_layer();
    RooflineParams params;
    params.peak_flops_per_s = 989e12;
    params.memory_bandwidth_bytes_per_s = 3.35e12;
    const RooflineCostModel cost(spec, spec.dtype, params);
    // 1,024 tokens: m_e = 1,024 · 2 / 8 = 256 tokens per expert, where vLLM's grouped GEMMs reach 0.411 · 0.907 =
    // 0.372777 of the peak (GroupedGemmEfficiency). Experts: 2 · 1,024 · 2 · 1,572,864 = 6,442,450,944 FLOPs /
    // (989e12 · 0.372777) = 17.47454 µs, against their 8 · 3,145,728 B / 2.8475e12 = 8.83787 µs of weights:
    // compute-bound. The rest: the router's 16,384 B and 4 · 1,024 · 1,024 · 2 B of activations = 8,404,992 B →
    // 2.95171 µs (its 16.8 MFLOP take 0.024 µs). Together 20.42625 µs, where one roof over all the GEMMs at 0.72 gave
    // max(9.07, 11.79) = 11.79 µs.
    CHECK(cost.token_terms(1024).gemm_ms == Approx(0.02042625).epsilon(1e-6));
    // 8 tokens (m_e = 2): the experts stream their weights, 8 · (1 − 0.75^8) = 7.19908 experts · 3,145,728 B, plus
    // the router and 4 · 8 · 1,024 · 2 B of activations: 22,728,450 B / 2.8475e12 = 7.98185 µs.
    CHECK(cost.token_terms(8).gemm_ms == Approx(0.00798185).epsilon(1e-5));
}

}  // namespace
}  // namespace servesim::engine
