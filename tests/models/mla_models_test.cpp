// Tests the MLA model types (deepseek_v2, deepseek_v3, kimi_k2) read from config.json fixtures written from the
// published configs: the latent KV per token, the MLA projection and DeepSeek-MoE parameter counts, and the
// absorbed-decode FLOPs (models/hf_config.cpp, models/model_derived.cpp). Every number is worked by hand below.
#include <variant>

#include "models/hf_config.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::attention_of;
using sm::test::fixture;

TEST_CASE("DeepSeek-V3 holds one 576-element latent per token and layer: 61 x 576 x 2 = 70,272 bytes in bf16",
          "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    REQUIRE(spec.layers.size() == 61);
    const auto& a = attention_of(spec, 0);
    REQUIRE(a.mla.has_value());
    CHECK(a.mla->kv_lora_rank == 512);
    CHECK(a.mla->qk_rope_head_dim == 64);
    CHECK(a.head_dim == 192);  // qk_nope 128 + qk_rope 64
    // One layer: (512 + 64) · 2 B = 1,152; no separate K and V.
    CHECK(sm::kv_bytes_per_token_layer(a, DType::kBFloat16) == 1'152);
    // 61 · 576 · 2 = 70,272.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 70'272);
    // fp8 KV: 61 · 576 · 1 = 35,136.
    CHECK(sm::kv_bytes_per_token(spec, DType::kFp8) == 35'136);
}

TEST_CASE("The MLA latent is replicated on every tensor-parallel rank", "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    // vLLM MLAAttentionSpec has num_kv_heads 1: TP 8 leaves 70,272 B per token on each rank (GQA would divide).
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16, 8) == 70'272);
}

TEST_CASE("DeepSeek-V3 layers: 3 dense, then 58 MoE of 256 experts with one ungated shared expert", "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    const auto c = sm::count_layers(spec);
    CHECK(c.attention == 61);
    CHECK(c.dense_mlp == 3);  // first_k_dense_replace 3
    CHECK(c.moe_mlp == 58);
    CHECK(std::holds_alternative<sm::DenseMlp>(spec.layers[2].mlp));
    const auto& moe = std::get<sm::MoeMlp>(spec.layers[3].mlp);
    CHECK(moe.num_experts == 256);
    CHECK(moe.num_experts_per_tok == 8);
    CHECK(moe.moe_intermediate_size == 2048);
    CHECK(moe.shared_expert_intermediate_size == 2048);  // n_shared_experts 1 × 2,048
    CHECK_FALSE(moe.shared_expert_gate);
}

TEST_CASE("DeepSeek-V3 counts 671.0 B parameters, 37.6 B active per token", "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    // Attention per layer: q_a 7,168·1,536 = 11,010,048; q_b 1,536·(128·192) = 37,748,736;
    // kv_a 7,168·576 = 4,128,768; kv_b 512·(128·256) = 16,777,216; o 16,384·7,168 = 117,440,512
    // → 187,105,280; × 61 = 11,413,422,080.
    // Dense MLP 3·7,168·18,432 = 396,361,728; × 3 = 1,189,085,184.
    // MoE layer: 256 experts × 3·7,168·2,048 (44,040,192) = 11,274,289,152; shared 44,040,192;
    // router 7,168·256 = 1,835,008 → 11,320,164,352; × 58 = 656,569,532,416.
    // Embedding and lm_head 129,280·7,168 = 926,679,040 each.
    // Total 11,413,422,080 + 1,189,085,184 + 656,569,532,416 + 1,853,358,080 = 671,025,397,760 (the published
    // 671 B; the MTP layer is not loaded without speculative decoding).
    const auto p = sm::count_params(spec);
    CHECK(p.embedding == 926'679'040);
    CHECK(p.lm_head == 926'679'040);
    CHECK(p.layers == 11'413'422'080 + 1'189'085'184 + 656'569'532'416);
    CHECK(p.total() == 671'025'397'760);
    // Without the checkpoint's fp8 quantization_config, bf16 weights: 2 B each = 1,342,050,795,520 B (the fixture's
    // fp8 128x128 blocks give 673,148,539,232 B; published_configs_test.cpp works that out).
    auto bf16 = spec;
    bf16.quantization.reset();
    CHECK(sm::weight_bytes_total(bf16) == 1'342'050'795'520);
    // Active: 9 experts (8 routed + shared) 396,361,728 + router 1,835,008 = 398,196,736 per MoE layer; × 58 =
    // 23,095,410,688; + attention, dense and embeddings = 37,551,276,032 (published: 37 B activated).
    CHECK(sm::count_active_params(spec).total() == 37'551'276'032);
}

TEST_CASE("MLA decode is absorbed over the latent; prefill runs unabsorbed", "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    const auto& a = attention_of(spec, 0);
    // Decode: scores 2·128·(512 + 64) = 147,456; values 2·128·512 = 131,072 → 278,528 per context token and layer,
    // against 1,152 KV bytes read: 241.8 FLOPs per byte.
    CHECK(sm::decode_attention_flops_per_key(a) == 278'528.0);
    // Prefill: K of 192 and V of 128 per head: 2·128·(192 + 128) = 81,920 per (query, key) pair.
    CHECK(sm::attention_flops_per_key(a) == 81'920.0);
}

TEST_CASE("DeepSeek-V2-Lite: q_lora_rank null is a plain q_proj; 15.7 B parameters", "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V2-Lite.json"));
    REQUIRE(spec.layers.size() == 27);
    const auto& a = attention_of(spec, 0);
    REQUIRE(a.mla.has_value());
    CHECK(a.mla->q_lora_rank == 0);
    // KV: 27 · 576 · 2 = 31,104 B per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 31'104);
    // Attention per layer: q_proj 2,048·(16·192) = 6,291,456; kv_a 2,048·576 = 1,179,648;
    // kv_b 512·(16·256) = 2,097,152; o 2,048·2,048 = 4,194,304 → 13,762,560; × 27 = 371,589,120.
    // Layer 0 dense: 3·2,048·10,944 = 67,239,936. 26 MoE layers: 64 × 3·2,048·1,408 (8,650,752) = 553,648,128,
    // 2 shared experts 17,301,504, router 2,048·64 = 131,072 → 571,080,704; × 26 = 14,848,098,304.
    // Embeddings 2 · 102,400·2,048 = 419,430,400. Total 15,706,357,760.
    CHECK(sm::count_params(spec).total() == 15'706'357'760);
    CHECK(sm::count_layers(spec).moe_mlp == 26);
}

TEST_CASE("Kimi-K2 is DeepSeek-V3's architecture: 384 experts, 64 heads, 1.03 T parameters, 32.9 B active",
          "[models][mla]") {
    const auto spec = sm::read_hf_config(fixture("Kimi-K2-Instruct.json"));
    // KV: same latent as V3: 61 · 576 · 2 = 70,272.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 70'272);
    // Attention per layer: q_a 11,010,048; q_b 1,536·(64·192) = 18,874,368; kv_a 4,128,768;
    // kv_b 512·(64·256) = 8,388,608; o 8,192·7,168 = 58,720,256 → 101,122,048; × 61 = 6,168,444,928.
    // 1 dense layer 396,361,728. 60 MoE layers: 384 × 44,040,192 = 16,911,433,728 + shared 44,040,192
    // + router 7,168·384 = 2,752,512 → 16,958,226,432; × 60 = 1,017,493,585,920.
    // Embeddings 2 · 163,840·7,168 = 2,348,810,240. Total 1,026,407,202,816.
    CHECK(sm::count_params(spec).total() == 1'026'407'202'816);
    // Active: (9 · 44,040,192 + 2,752,512) · 60 = 23,946,854,400; + 6,168,444,928 + 396,361,728 + 2,348,810,240
    // = 32,860,471,296.
    CHECK(sm::count_active_params(spec).total() == 32'860'471'296);
}
