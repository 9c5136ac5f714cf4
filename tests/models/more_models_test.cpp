// Tests phi3 (Phi-4), glm4_moe (GLM-4.5), mamba2 (Mamba-Codestral-7B), bamba and jamba read from config.json
// fixtures written from the published configs, and the bench model file scenarios/bench/Llama-2-7B.yaml: KV bytes
// per token, recurrent state per sequence and parameters, worked by hand below.
#include <variant>

#include "models/hf_config.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::fixture;

TEST_CASE("Phi-4: 40 full-attention layers (sliding_window null), 204,800 KV bytes per token, 14.66 B parameters",
          "[models][phi3]") {
    const auto spec = sm::read_hf_config(fixture("phi-4.json"));
    REQUIRE(spec.layers.size() == 40);
    CHECK(sm::count_layers(spec).sliding_window == 0);
    // head_dim 5,120 / 40 = 128; 40 · 2 · 10 · 128 · 2 = 204,800.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 204'800);
    // Per layer: q 5,120² + k, v 2·5,120·1,280 + o 5,120² = 65,536,000; MLP 3·5,120·17,920 = 275,251,200;
    // × 40 = 13,631,488,000. Embedding + lm_head 2 · 100,352·5,120 = 1,027,604,480. Total 14,659,092,480
    // (published 14.7 B).
    CHECK(sm::count_params(spec).total() == 14'659'092'480);
    CHECK(sm::state_bytes_per_sequence(spec) == 0);
}

TEST_CASE("Phi-3 with a sliding_window slides every layer", "[models][phi3]") {
    YAML::Node n = YAML::LoadFile(fixture("phi-4.json"));
    n["sliding_window"] = 2047;
    const auto spec = sm::model_from_hf_config(n, "phi3-swa", "inline");
    CHECK(sm::count_layers(spec).sliding_window == 40);
}

TEST_CASE("GLM-4.5: 3 dense layers then 89 MoE layers of 160 experts with one shared; 376,832 KV bytes per token",
          "[models][glm4_moe]") {
    const auto spec = sm::read_hf_config(fixture("GLM-4.5.json"));
    REQUIRE(spec.layers.size() == 92);
    const auto c = sm::count_layers(spec);
    CHECK(c.dense_mlp == 3);
    CHECK(c.moe_mlp == 89);
    // 92 · 2 · 8 · 128 · 2 = 376,832.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 376'832);
    // Attention: q 5,120·12,288 + k, v 2·5,120·1,024 + o 12,288·5,120 = 136,314,880; × 92 = 12,540,968,960.
    // Dense 3 · 3·5,120·12,288 = 566,231,040. MoE: 160 · 3·5,120·1,536 (23,592,960) = 3,774,873,600 + shared
    // 23,592,960 + router 5,120·160 = 819,200 → 3,799,285,760; × 89 = 338,136,432,640. Embeddings
    // 2 · 151,552·5,120 = 1,551,892,480. Total 352,795,525,120 (published 355 B with the MTP layer, which vLLM
    // loads only for speculative decoding; biases are not counted).
    CHECK(sm::count_params(spec).total() == 352'795'525'120);
    // Active: (9 · 23,592,960 + 819,200) · 89 = 18,970,869,760 + attention, dense, embeddings = 33,629,962,240.
    CHECK(sm::count_active_params(spec).total() == 33'629'962'240);
}

TEST_CASE("Mamba-Codestral-7B: 64 Mamba2 layers, no KV, 138,149,888 state bytes per sequence", "[models][mamba2]") {
    const auto spec = sm::read_hf_config(fixture("Mamba-Codestral-7B-v0.1.json"));
    REQUIRE(spec.layers.size() == 64);
    CHECK(sm::count_layers(spec).mamba2 == 64);
    CHECK(std::holds_alternative<sm::NoMlp>(spec.layers[0].mlp));
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 0);
    // inner = 128 · 64 = 8,192; conv_dim = 8,192 + 2·8·128 = 10,240. conv (4 − 1)·10,240·2 B = 61,440;
    // ssm 128·64·128·2 B (model dtype: mamba_ssm_cache_dtype auto) = 2,097,152 → 2,158,592 per layer; × 64.
    const auto s = sm::state_bytes_layer(spec.layers[0], spec.dtype);
    CHECK(s.conv_bytes == 61'440);
    CHECK(s.ssm_bytes == 2'097'152);
    CHECK(sm::state_bytes_per_sequence(spec) == 138'149'888);
    // Per layer: in_proj 4,096·(2·8,192 + 2·8·128 + 128) = 76,021,760; conv (4 + 1)·10,240 = 51,200;
    // out_proj 8,192·4,096 = 33,554,432; A_log, D, dt_bias 3·128 = 384 → 109,627,776; × 64 = 7,016,177,664.
    // Embedding + lm_head 2 · 32,768·4,096 = 268,435,456. Total 7,284,613,120 (published 7,285,403,648, which
    // adds the 64 · (4,096 + 8,192) + 4,096 = 790,528 norm weights servesim leaves out).
    CHECK(sm::count_params(spec).total() == 7'284'613'120);
    // No max_position_embeddings in Mamba2Config.
    CHECK(spec.max_position_embeddings == 0);
}

TEST_CASE("Bamba-9B: attention at layers 9, 18, 27, Mamba2 elsewhere, a dense MLP in every layer", "[models][bamba]") {
    const auto spec = sm::read_hf_config(fixture("Bamba-9B.json"));
    REQUIRE(spec.layers.size() == 32);
    const auto c = sm::count_layers(spec);
    CHECK(c.attention == 3);
    CHECK(c.mamba2 == 29);
    CHECK(c.dense_mlp == 32);
    CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[9].mixer));
    CHECK(sm::is_hybrid(spec));
    // KV: 3 · 2 · 8 · 128 · 2 = 12,288 B per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 12'288);
    // Mamba2: inner 128 · 64 = 8,192; conv_dim 8,192 + 2·1·128 = 8,448; conv 3 · 8,448 · 2 = 50,688;
    // ssm 128 · 64 · 128 · 2 B (model dtype) = 2,097,152 → 2,147,840 per layer; × 29 = 62,287,360.
    CHECK(sm::state_bytes_layer(spec.layers[0], spec.dtype).total() == 2'147'840);
    CHECK(sm::state_bytes_per_sequence(spec) == 62'287'360);
    // Attention 3 · (4,096² + 2·4,096·1,024 + 4,096²) = 3 · 41,943,040 = 125,829,120.
    // Mamba2 29 · (4,096·(2·8,192 + 2·128 + 128) + 5·8,448 + 8,192·4,096 + 3·128) = 29 · 102,278,784 =
    // 2,966,084,736. MLP 32 · 3·4,096·14,336 = 5,637,144,576. Embeddings 2 · 128,256·4,096 = 1,050,673,152.
    // Total 9,779,731,584 (published 9.78 B).
    CHECK(sm::count_params(spec).total() == 9'779'731'584);
}

TEST_CASE("Jamba-v0.1: attention every 8th layer from 4, Mamba-1 elsewhere, MoE every 2nd layer from 1",
          "[models][jamba]") {
    const auto spec = sm::read_hf_config(fixture("Jamba-v0.1.json"));
    REQUIRE(spec.layers.size() == 32);
    const auto c = sm::count_layers(spec);
    CHECK(c.attention == 4);  // layers 4, 12, 20, 28
    CHECK(c.mamba1 == 28);
    CHECK(c.moe_mlp == 16);
    CHECK(c.dense_mlp == 16);
    CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[4].mixer));
    CHECK(std::holds_alternative<sm::MoeMlp>(spec.layers[1].mlp));
    CHECK(sm::is_hybrid(spec));
    // KV: 4 · 2 · 8 · 128 · 2 = 16,384 B per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 16'384);
    // Mamba-1, inner 2 · 4,096 = 8,192: conv 3 · 8,192 · 2 = 49,152; ssm 8,192 · 16 · 2 = 262,144 → 311,296 per
    // layer; × 28 = 8,716,288.
    const auto s = sm::state_bytes_layer(spec.layers[0], spec.dtype);
    CHECK(s.conv_bytes == 49'152);
    CHECK(s.ssm_bytes == 262'144);
    CHECK(sm::state_bytes_per_sequence(spec) == 8'716'288);
    // Attention 4 · 41,943,040 = 167,772,160. Mamba-1 per layer: in_proj 4,096·16,384 = 67,108,864; conv
    // 5·8,192 = 40,960; x_proj 8,192·(256 + 32) = 2,359,296; dt_proj (256 + 1)·8,192 = 2,105,344; A_log
    // 8,192·16 = 131,072; D 8,192; out_proj 8,192·4,096 = 33,554,432 → 105,308,160; × 28 = 2,948,628,480.
    // MoE 16 · (16 · 3·4,096·14,336 + 4,096·16) = 16 · 2,818,637,824 = 45,098,205,184; dense 16 · 176,160,768 =
    // 2,818,572,288; embeddings 2 · 65,536·4,096 = 536,870,912. Total 51,570,049,024 (published 51.6 B).
    CHECK(sm::count_params(spec).total() == 51'570'049'024);
    // Active: MoE layers 2 experts 352,321,536 + router 65,536 → 16 · 352,387,072 = 5,638,193,152; total
    // 167,772,160 + 2,948,628,480 + 5,638,193,152 + 2,818,572,288 + 536,870,912 = 12,110,036,992 (published 12 B
    // active).
    CHECK(sm::count_active_params(spec).total() == 12'110'036'992);
}

TEST_CASE("scenarios/bench/Llama-2-7B.yaml holds Llama-2-7b-hf's published shape and parameter count",
          "[models][llama]") {
    const auto spec =
        sm::read_model_file(std::string(SERVESIM_TEST_DATA_DIR) + "/../scenarios/bench/Llama-2-7B.yaml");
    REQUIRE(spec.layers.size() == 32);
    CHECK(spec.max_position_embeddings == 4'096);
    CHECK(spec.dtype == DType::kFloat16);
    // 32 layers · 2 · 32 KV heads · 128 · 2 B = 524,288 B per token (multi-head attention, no GQA).
    CHECK(sm::kv_bytes_per_token(spec, DType::kFloat16) == 524'288);
    // Per layer 4 · 4,096² (q, k, v, o) + 3 · 4,096 · 11,008 = 202,375,168; × 32 = 6,476,005,376; embedding and
    // untied lm_head 2 · 32,000 · 4,096 = 262,144,000 → 6,738,149,376. The published 6,738,415,616 adds the
    // 65 · 4,096 = 266,240 RMSNorm weights servesim leaves out.
    CHECK(sm::count_params(spec).total() == 6'738'149'376);
    CHECK(sm::count_params(spec).total() + 65 * 4'096 == 6'738'415'616);
}
