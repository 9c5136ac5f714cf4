// Tests the interleaved local-attention model types read from config.json fixtures written from the published
// configs: gemma2 (alternating sliding window), gemma3 (sliding_window_pattern 6), gpt_oss (layer_types, sinks,
// MoE) and llama4 (MoE + chunked local attention on the RoPE layers). KV bytes per token, layer patterns and
// parameter counts are worked by hand below (models/hf_config.cpp, models/model_derived.cpp).
#include <variant>

#include "models/hf_config.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::attention_of;
using sm::test::fixture;

TEST_CASE("Gemma-2-9B: even layers slide over 4,096 tokens; 344,064 KV bytes per token; 9.24 B parameters",
          "[models][swa]") {
    const auto spec = sm::read_hf_config(fixture("gemma-2-9b-it.json"));
    REQUIRE(spec.layers.size() == 42);
    CHECK(attention_of(spec, 0).sliding_window_tokens == 4096);
    CHECK(attention_of(spec, 1).sliding_window_tokens == 0);
    CHECK(sm::count_layers(spec).sliding_window == 21);
    // 42 · 2 · 8 KV heads · 256 · 2 B = 344,064 (the window does not change the per-token size).
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 344'064);
    // Per layer: q 3,584·4,096 + k, v 2·3,584·2,048 + o 4,096·3,584 = 44,040,192; gated GeLU MLP 3·3,584·14,336 =
    // 154,140,672 → 198,180,864; × 42 = 8,323,596,288. Tied embedding 256,000·3,584 = 917,504,000 (Gemma's default).
    CHECK(spec.tie_word_embeddings);
    CHECK(sm::count_params(spec).total() == 9'241'100'288);
    CHECK(sm::state_bytes_per_sequence(spec) == 0);
}

TEST_CASE("Gemma-3-27B: 5 sliding layers (window 1,024) per full one; text under text_config; SigLIP counted",
          "[models][swa]") {
    const auto spec = sm::read_hf_config(fixture("gemma-3-27b-it.json"));
    REQUIRE(spec.layers.size() == 62);
    // (i + 1) % 6 == 0 → full: layers 5, 11, …, 59 = 10 full, 52 sliding.
    CHECK(attention_of(spec, 5).sliding_window_tokens == 0);
    CHECK(attention_of(spec, 4).sliding_window_tokens == 1024);
    CHECK(sm::count_layers(spec).sliding_window == 52);
    // 62 · 2 · 16 · 128 · 2 = 507,904.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 507'904);
    // Text: per layer q 5,376·4,096 + k, v 2·5,376·2,048 + o 4,096·5,376 = 66,060,288; MLP 3·5,376·21,504 =
    // 346,816,512; × 62 = 25,598,361,600; tied embedding 262,208·5,376 = 1,409,630,208.
    // SigLIP (estimate_vit_params): patch 3·14²·1,152 = 677,376; positions 64²·1,152 = 4,718,592;
    // 27 · (4·1,152² + 2·1,152·4,304) = 411,070,464; projector 1,152·5,376 = 6,193,152 → 422,659,584.
    const auto p = sm::count_params(spec);
    CHECK(p.layers + p.embedding + p.lm_head == 27'007'991'808);
    CHECK(p.extra == 422'659'584);
    CHECK(p.total() == 27'430'651'392);  // published: 27.4 B
}

TEST_CASE("gpt-oss-20b: alternating 128-token windows, sinks, 32 experts; 49,152 KV bytes per token",
          "[models][swa]") {
    const auto spec = sm::read_hf_config(fixture("gpt-oss-20b.json"));
    REQUIRE(spec.layers.size() == 24);
    CHECK(attention_of(spec, 0).sliding_window_tokens == 128);
    CHECK(attention_of(spec, 1).sliding_window_tokens == 0);
    CHECK(attention_of(spec, 0).sinks);
    // 24 · 2 · 8 · 64 · 2 = 49,152.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 49'152);
    // Attention: q 2,880·4,096 = 11,796,480; k, v 2·2,880·512 = 2,949,120; o 4,096·2,880 = 11,796,480;
    // 64 sinks → 26,542,144. MoE: 32 · 3·2,880·2,880 = 796,262,400 + router 2,880·32 = 92,160. Per layer
    // 822,896,704; × 24 = 19,749,520,896. Embedding and unembedding 2 · 201,088·2,880 = 1,158,266,880.
    // Total 20,907,787,776 (published 21 B; biases are not counted).
    CHECK(sm::count_params(spec).total() == 20'907'787'776);
    // Active: 4 experts 99,532,800 + router 92,160 + attention 26,542,144 = 126,167,104 per layer; × 24 =
    // 3,028,010,496; + 1,158,266,880 = 4,186,277,376 (published 3.6 B counts the unembedding, not the embedding:
    // 3,028,010,496 + 579,133,440 = 3.61 B).
    CHECK(sm::count_active_params(spec).total() == 4'186'277'376);
}

TEST_CASE("Llama-4-Scout: RoPE layers are 8,192-token chunked local attention, every 4th layer global; MoE with a "
          "shared expert",
          "[models][swa]") {
    const auto spec = sm::read_hf_config(fixture("Llama-4-Scout-17B-16E-Instruct.json"));
    REQUIRE(spec.layers.size() == 48);
    CHECK(attention_of(spec, 0).attention_chunk_tokens == 8192);
    CHECK(attention_of(spec, 3).attention_chunk_tokens == 0);  // no_rope_layers[3] == 0: NoPE, global
    CHECK(attention_of(spec, 3).sliding_window_tokens == 0);
    // 48 · 2 · 8 · 128 · 2 = 196,608.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 196'608);
    const auto& moe = std::get<sm::MoeMlp>(spec.layers[0].mlp);
    CHECK(moe.num_experts == 16);
    CHECK(moe.num_experts_per_tok == 1);
    CHECK(moe.shared_expert_intermediate_size == 8192);
    // Attention: q 5,120·5,120 + k, v 2·5,120·1,024 + o 5,120·5,120 = 62,914,560; × 48 = 3,019,898,880.
    // MoE (every layer, interleave 1): 16 · 3·5,120·8,192 (125,829,120) = 2,013,265,920 + shared 125,829,120 +
    // router 81,920 = 2,139,176,960; × 48 = 102,680,494,080. Embeddings 2 · 202,048·5,120 = 2,068,971,520.
    // Vision (estimate_vit_params): 3·14²·1,408 + 24²·1,408 + 34 · (4·1,408² + 2·1,408·5,632) + 4,096·5,120 =
    // 827,904 + 811,008 + 808,845,312 + 20,971,520 = 831,455,744.
    const auto p = sm::count_params(spec);
    CHECK(p.layers + p.embedding + p.lm_head == 107'769'364'480);
    CHECK(p.extra == 831'455'744);  // total 108.6 B; published 109 B
    // Active: 1 routed + shared expert 251,658,240 + router 81,920 per layer; × 48 = 12,083,527,680; + attention
    // and embeddings = 17,172,398,080 (published: 17 B active).
    CHECK(sm::count_active_params(spec).total() == 17'172'398'080);
}

TEST_CASE("Chunked layers attend within their chunk; sliding ones within the window", "[models][swa]") {
    sm::AttentionMixer chunked{40, 8, 128};
    chunked.attention_chunk_tokens = 8192;
    // Context 10,000: the newest token sits in chunk [8,192, 16,384): (10,000 − 1) mod 8,192 + 1 = 1,808 keys.
    CHECK(sm::attended_context_tokens(chunked, 10'000) == 1'808);
    CHECK(sm::attended_context_tokens(chunked, 8'192) == 8'192);
    sm::AttentionMixer sliding{40, 8, 128};
    sliding.sliding_window_tokens = 4096;
    CHECK(sm::attended_context_tokens(sliding, 10'000) == 4'096);
}
