// CPU references of the calibration kernels (kernels/cpu_reference.h) on small cases with answers worked out by
// hand; these references are what the GPU checks (servesim-kernel-check, ctest label "gpu") compare against.
#include "kernels/cpu_reference.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "tests/catch.h"

namespace ref = servesim::kernels::ref;

TEST_CASE("bf16 and fp8 e4m3 conversions round to nearest even", "[kernels]") {
    CHECK(ref::bf16_to_float(ref::float_to_bf16(1.0f)) == 1.0f);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even → 1.
    CHECK(ref::round_bf16(1.0f + 1.0f / 256) == 1.0f);
    CHECK(ref::round_bf16(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256);
    CHECK(std::isnan(ref::bf16_to_float(0xFFFF)));
    CHECK(ref::float_to_fp8_e4m3(1.0f) == 0x38);
    CHECK(ref::float_to_fp8_e4m3(-2.0f) == 0xC0);
    CHECK(ref::float_to_fp8_e4m3(448.0f) == 0x7E);
    CHECK(ref::float_to_fp8_e4m3(1000.0f) == 0x7E);               // saturates
    CHECK(ref::fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
    CHECK_THAT(ref::fp8_e4m3_to_float(ref::float_to_fp8_e4m3(0.3f)), Catch::Matchers::WithinRel(0.3, 0.07));
}

TEST_CASE("gemm reference computes A·Wᵀ", "[kernels]") {
    // A = [[1, 2], [3, 4]], W = [[1, 0], [1, 1], [0, 2]] → C = [[1, 3, 4], [3, 7, 8]].
    const auto c = ref::gemm({1, 2, 3, 4}, {1, 0, 1, 1, 0, 2}, 2, 3, 2);
    CHECK(c == std::vector<float>{1, 3, 4, 3, 7, 8});
    CHECK(ref::rel_l2_error({1, 2}, {1, 2}) == 0.0);
    CHECK(std::isinf(ref::rel_l2_error({NAN, 2}, {1, 2})));
}

TEST_CASE("prefill attention reference is causal, GQA-grouped and continues a cached prefix", "[kernels]") {
    // 1 kv head, 2 q heads, hd 2, two tokens, no cache. Token 0 sees only itself: output = v0 for both heads.
    // Token 1 with equal scores on both keys averages v0 and v1.
    const std::vector<float> q = {0, 0, 0, 0, 0, 0, 0, 0};  // zero queries: uniform attention
    const std::vector<float> k = {1, 0, 0, 1};
    const std::vector<float> v = {2, 4, 6, 8};
    const auto o = ref::prefill_attention(q, k, v, 2, 0, 2, 1, 2, 1.0f);
    CHECK(o == std::vector<float>{2, 4, 2, 4, 4, 6, 4, 6});
    // Same data as a one-token chunk on one cached token equals the second row.
    const auto o2 = ref::prefill_attention({0, 0, 0, 0}, k, v, 1, 1, 2, 1, 2, 1.0f);
    CHECK(o2 == std::vector<float>{4, 6, 4, 6});
    // A sharp query picks its key: q·k0 = 100 ≫ q·k1 = 0.
    const auto o3 = ref::prefill_attention({0, 0, 100, 0}, k, v, 2, 0, 1, 1, 2, 1.0f);
    CHECK_THAT(o3[2], Catch::Matchers::WithinRel(2.0, 1e-5));
    CHECK_THAT(o3[3], Catch::Matchers::WithinRel(4.0, 1e-5));
}

TEST_CASE("paged decode reference equals attention over the gathered context", "[kernels]") {
    // One sequence of 5 tokens in blocks of 2, stored in shuffled blocks {2, 0, 1}; hkv 1, hq 1, hd 1.
    const int bs = 2;
    std::vector<float> k_cache(6, 0.f);
    std::vector<float> v_cache(6, 0.f);
    const std::vector<int> table = {2, 0, 1};
    const std::vector<float> keys = {0.1f, -0.3f, 0.5f, 0.2f, -0.1f};
    const std::vector<float> vals = {1, 2, 3, 4, 5};
    for (int t = 0; t < 5; ++t) {
        const int slot = table[t / bs] * bs + t % bs;
        k_cache[slot] = keys[t];
        v_cache[slot] = vals[t];
    }
    const auto o = ref::decode_attention({2.0f}, k_cache, v_cache, table, 3, {5}, 1, 1, 1, bs, 1.0f);
    double num = 0;
    double den = 0;
    for (int t = 0; t < 5; ++t) {
        num += std::exp(2.0 * keys[t]) * vals[t];
        den += std::exp(2.0 * keys[t]);
    }
    CHECK_THAT(o[0], Catch::Matchers::WithinRel(num / den, 1e-5));
    std::vector<float> cache(4 * 3, -1.f);
    ref::kv_cache_write({1, 2, 3, 4, 5, 6}, {3, 1}, 3, cache);
    CHECK(cache[9] == 1.f);
    CHECK(cache[3] == 4.f);
    CHECK(cache[0] == -1.f);
}

TEST_CASE("gated delta rule reference: one token from a zero state and the decay of a second", "[kernels]") {
    // dk = dv = 2, one head. From S = 0: δ = β·v, S = k̂ δᵀ, o = Sᵀ q̂ = β v (k̂·q̂).
    const std::vector<float> q = {3, 4};  // q̂ = (0.6, 0.8) (scale 1)
    const std::vector<float> k = {1, 0};  // k̂ = (1, 0)
    const std::vector<float> v = {2, -1};
    std::vector<float> state(4, 0.f);
    const auto o = ref::gdn_recurrent(q, k, v, {-0.5f}, {0.5f}, state, 1, 1, 1, 1, 2, 2, 1.0f);
    CHECK_THAT(o[0], Catch::Matchers::WithinRel(0.5 * 2 * 0.6, 1e-5));
    CHECK_THAT(o[1], Catch::Matchers::WithinRel(0.5 * -1 * 0.6, 1e-5));
    CHECK_THAT(state[0], Catch::Matchers::WithinRel(1.0, 1e-5));   // S[0][0] = k̂0·δ0 = 1
    CHECK_THAT(state[1], Catch::Matchers::WithinRel(-0.5, 1e-5));  // S[0][1]
    CHECK(state[2] == 0.f);
    // A second token with k orthogonal to the first: S decays by e^g then adds k̂2 δ2ᵀ with r = 0.
    const auto o2 = ref::gdn_recurrent({0, 1}, {0, 1}, {1, 1}, {std::log(0.5f)}, {1.0f}, state, 1, 1, 1, 1, 2, 2, 1.0f);
    CHECK_THAT(state[0], Catch::Matchers::WithinRel(0.5, 1e-5));
    CHECK_THAT(state[2], Catch::Matchers::WithinRel(1.0, 1e-5));
    CHECK_THAT(o2[0], Catch::Matchers::WithinRel(1.0, 1e-5));  // row 1 of S, q̂ = (0, 1)
}

TEST_CASE("conv1d, rms_norm, silu_mul, rope and argmax references", "[kernels]") {
    // Conv: weights (0, 0, 0, 1) pass the current input through SiLU; state keeps the last three inputs.
    std::vector<float> state;
    const auto y = ref::conv1d({1, 2, 3, 4}, {0, 0, 0, 1}, state, 1, 4, 1);
    CHECK_THAT(y[1], Catch::Matchers::WithinRel(2.0 / (1.0 + std::exp(-2.0)), 1e-5));
    CHECK(state == std::vector<float>{2, 3, 4});
    // Weights (1, 0, 0, 0) see the input three steps back, from the state on the first step.
    const auto y2 = ref::conv1d({10}, {1, 0, 0, 0}, state, 1, 1, 1);
    CHECK_THAT(y2[0], Catch::Matchers::WithinRel(2.0 / (1.0 + std::exp(-2.0)), 1e-5));
    CHECK(state == std::vector<float>{3, 4, 10});

    const auto n = ref::rms_norm({3, 4}, {1, 2}, 1, 2, 0.0f);  // rms = sqrt(12.5)
    CHECK_THAT(n[0], Catch::Matchers::WithinRel(3 / std::sqrt(12.5), 1e-5));
    CHECK_THAT(n[1], Catch::Matchers::WithinRel(8 / std::sqrt(12.5), 1e-5));
    const auto s = ref::silu_mul({0, 1, 5, 7}, 1, 2);  // silu(0)·5 = 0, silu(1)·7
    CHECK(s[0] == 0.f);
    CHECK_THAT(s[1], Catch::Matchers::WithinRel(7.0 / (1.0 + std::exp(-1.0)), 1e-5));

    std::vector<float> x = {1, 0, 0, 0};  // one head, hd 4, full rotary
    ref::rope(x, {0}, 1, 4, 4, 10000.0f);
    CHECK(x == std::vector<float>{1, 0, 0, 0});  // position 0 is the identity
    std::vector<float> r = {1, 0, 0, 0};
    ref::rope(r, {1}, 1, 4, 4, 10000.0f);  // pair (0, 2) rotated by 1 rad
    CHECK_THAT(r[0], Catch::Matchers::WithinRel(std::cos(1.0), 1e-5));
    CHECK_THAT(r[2], Catch::Matchers::WithinRel(std::sin(1.0), 1e-5));
    CHECK(ref::argmax_rows({0, 5, 1, 9, 2, 3}, 2, 3) == std::vector<int>{1, 0});
}

TEST_CASE("moe reference: top-1 routing, SwiGLU expert, gated shared expert, worked by hand", "[kernels]") {
    // One token x = [1, 0], hidden 2, two experts, top-1, intermediate 1.
    // Router rows [1, 0] and [0, 1]: logits [1, 0] → expert 0, softmax probability e/(e+1) = 0.731059.
    // Expert 0: gate row [1, 0], up row [2, 0] → silu(1)·2 = 1.462117 → bf16 1.4609375; down [[1], [3]] →
    //   [1.4609375, 4.3828125] → bf16 [1.4609375, 4.375].
    // Renormalised top-1 weight 1 → out [1.4609375, 4.375]; not renormalised: × 0.731059.
    // Shared expert (Is 1): gate row [1, 0], up [1, 0] → silu(1) = 0.731059 → bf16 0.73046875; down [[1], [1]];
    //   sigmoid(x · [0, 0]) = 0.5 → + 0.365234375 on both.
    servesim::kernels::MoeShape shape;
    shape.hidden = 2;
    shape.num_experts = 2;
    shape.top_k = 1;
    shape.intermediate = 1;
    shape.shared_intermediate = 0;
    shape.shared_expert_gate = false;
    shape.norm_topk_prob = true;
    ref::MoeRefWeights w;
    w.router = {1, 0, 0, 1};
    w.w13 = {1, 0, 2, 0, /* expert 1 */ 0, 1, 0, 1};
    w.w2 = {1, 3, /* expert 1 */ 1, 1};
    const std::vector<float> x = {1, 0};
    std::vector<float> out = ref::moe_layer(x, w, shape, 1);
    CHECK(out[0] == 1.4609375f);
    CHECK(out[1] == 4.375f);

    shape.norm_topk_prob = false;
    const double p = std::exp(1.0) / (std::exp(1.0) + 1.0);
    out = ref::moe_layer(x, w, shape, 1);
    CHECK_THAT(out[0], Catch::Matchers::WithinRel(p * 1.4609375, 1e-6));
    CHECK_THAT(out[1], Catch::Matchers::WithinRel(p * 4.375, 1e-6));

    shape.norm_topk_prob = true;
    shape.shared_intermediate = 1;
    shape.shared_expert_gate = true;
    w.shared_w13 = {1, 0, 1, 0};
    w.shared_w2 = {1, 1};
    w.shared_gate = {0, 0};
    out = ref::moe_layer(x, w, shape, 1);
    CHECK_THAT(out[0], Catch::Matchers::WithinRel(1.4609375 + 0.365234375, 1e-6));
    CHECK_THAT(out[1], Catch::Matchers::WithinRel(4.375 + 0.365234375, 1e-6));
}

TEST_CASE("moe_topk: the k largest logits, ties to the lower id, softmax over all experts", "[kernels]") {
    // Logits [0, 2, 2, 1]: top-2 = experts 1 and 2 (tie broken toward id 1 first); softmax denominator
    // 1 + 2e² + e = 18.496; each weight e²/18.496 = 0.39949, renormalised 0.5 each.
    std::vector<int> ids;
    std::vector<float> weights;
    ref::moe_topk({0, 2, 2, 1}, 1, 4, 2, false, ids, weights);
    REQUIRE(ids.size() == 2);
    CHECK(ids[0] == 1);
    CHECK(ids[1] == 2);
    const double denom = 1 + 2 * std::exp(2.0) + std::exp(1.0);
    CHECK_THAT(weights[0], Catch::Matchers::WithinRel(std::exp(2.0) / denom, 1e-6));
    ref::moe_topk({0, 2, 2, 1}, 1, 4, 2, true, ids, weights);
    CHECK_THAT(weights[0], Catch::Matchers::WithinRel(0.5, 1e-6));
    CHECK_THAT(weights[1], Catch::Matchers::WithinRel(0.5, 1e-6));
}
