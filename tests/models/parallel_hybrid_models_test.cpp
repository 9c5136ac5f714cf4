// Tests falcon_h1 (Falcon-H1: attention and Mamba2 side by side in every layer) and zamba2 (Zamba2: Mamba2 layers
// with a shared transformer block at the hybrid layers) read from config.json fixtures written from the published
// configs (tests/fixtures/hf/SOURCES.md): KV bytes per token, recurrent state per sequence and weights, worked by
// hand below.
#include <variant>

#include "common/error.h"
#include "models/hf_config.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::fixture;

TEST_CASE("Falcon-H1-7B: every layer is an attention block and a Mamba2 block with the MLP", "[models][falcon_h1]") {
    const auto spec = sm::read_hf_config(fixture("Falcon-H1-7B-Instruct.json"));
    // 44 layers, two blocks each (vLLM's KV-cache layers i and 44 + i).
    REQUIRE(spec.layers.size() == 88);
    const auto c = sm::count_layers(spec);
    CHECK(c.attention == 44);
    CHECK(c.mamba2 == 44);
    CHECK(c.dense_mlp == 44);
    CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[0].mixer));
    CHECK(std::holds_alternative<sm::NoMlp>(spec.layers[0].mlp));
    CHECK(std::holds_alternative<sm::Mamba2Mixer>(spec.layers[1].mixer));
    CHECK(std::holds_alternative<sm::DenseMlp>(spec.layers[1].mlp));
    CHECK(sm::is_hybrid(spec));
    CHECK(spec.supports_mamba_prefix_caching_all);
    // KV: 44 · 2 · 2 KV heads · 128 · 2 B = 45,056 B per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 45'056);
    // Mamba2: inner = mamba_d_ssm 3,072 = 24 heads · 128; conv_dim 3,072 + 2·1·256 = 3,584; conv (4 − 1)·3,584·2 B
    // = 21,504; ssm 24·128·256·2 B (model dtype) = 1,572,864 → 1,594,368 per layer; × 44 = 70,152,192.
    const auto s = sm::state_bytes_layer(spec.layers[1], spec.dtype);
    CHECK(s.conv_bytes == 21'504);
    CHECK(s.ssm_bytes == 1'572'864);
    CHECK(sm::state_bytes_per_sequence(spec) == 70'152'192);
    // Per layer: attention q 3,072·1,536 + k, v 2·3,072·256 + o 1,536·3,072 = 11,010,048; Mamba2 in_proj
    // 3,072·(2·3,072 + 2·256 + 24) = 20,520,960, conv (4 + 1)·3,584 = 17,920, out_proj 3,072² = 9,437,184, A_log,
    // D, dt_bias 72 → 29,976,136; MLP 3·3,072·12,288 = 113,246,208. Sum 154,232,392; × 44 = 6,786,225,248.
    // Embedding + lm_head (untied) 2 · 130,048·3,072 = 799,014,912. Total 7,585,240,160 (the model is named 7B).
    CHECK(sm::count_params(spec).total() == 7'585'240'160);
    CHECK(sm::weight_bytes_total(spec) == 2 * 7'585'240'160);
}

TEST_CASE("Falcon-H1: mamba_d_head 'auto' and a null mamba_d_ssm follow FalconH1Config", "[models][falcon_h1]") {
    YAML::Node n = YAML::LoadFile(fixture("Falcon-H1-7B-Instruct.json"));
    n["mamba_d_head"] = "auto";
    n["mamba_d_ssm"] = YAML::Node(YAML::NodeType::Null);
    n["mamba_expand"] = 2;  // inner 2 · 3,072 = 6,144 → head_dim 6,144 / 24 = 256
    const auto spec = sm::model_from_hf_config(n, "falcon-auto", "inline");
    const auto& m = std::get<sm::Mamba2Mixer>(spec.layers[1].mixer);
    CHECK(m.head_dim == 256);
    CHECK(m.num_heads == 24);
}

TEST_CASE("Falcon-H1: heads × head_dim that miss the Mamba inner width are refused", "[models][falcon_h1]") {
    YAML::Node n = YAML::LoadFile(fixture("Falcon-H1-7B-Instruct.json"));
    n["mamba_d_head"] = 64;  // 24 · 64 = 1,536 ≠ 3,072
    CHECK_THROWS_AS(sm::model_from_hf_config(n, "falcon-bad", "inline"), servesim::ConfigError);
}

TEST_CASE("Zamba2-2.7B: 54 Mamba2 layers, the shared block invoked at the 9 hybrid layers, each with its own KV",
          "[models][zamba2]") {
    const auto spec = sm::read_hf_config(fixture("Zamba2-2.7B.json"));
    // 54 Mamba2 blocks + 9 shared-block invocations placed before the Mamba2 block of layers 6, 12, …, 51.
    REQUIRE(spec.layers.size() == 63);
    const auto c = sm::count_layers(spec);
    CHECK(c.attention == 9);
    CHECK(c.mamba2 == 54);
    CHECK(c.dense_mlp == 9);
    CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[6].mixer));
    CHECK(std::holds_alternative<sm::Mamba2Mixer>(spec.layers[7].mixer));
    // Invocations 0 and 1 hold mem blocks 0 and 1 (ABAB); the other 7 reuse them.
    CHECK_FALSE(spec.layers[6].shares_weights);
    CHECK_FALSE(spec.layers[13].shares_weights);
    CHECK(spec.layers[20].shares_weights);
    CHECK(spec.tie_word_embeddings);
    // Attention: 32 heads, head_dim 2 · 2,560 / 32 = 160, no GQA (vLLM num_kv_heads = num_heads), q/k/v from the
    // 5,120-wide concatenation. KV: 9 · 2 · 32 · 160 · 2 B = 184,320 B per token.
    const auto& a = std::get<sm::AttentionMixer>(spec.layers[6].mixer);
    CHECK(a.head_dim == 160);
    CHECK(a.num_kv_heads == 32);
    CHECK(a.input_size == 5'120);
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 184'320);
    // Mamba2: inner 2 · 2,560 = 5,120 = 80 heads · 64; conv_dim 5,120 + 2·1·64 = 5,248; conv 3·5,248·2 B = 31,488;
    // ssm 80·64·64·2 B = 655,360 → 686,848 per layer; × 54 = 37,089,792.
    const auto s = sm::state_bytes_layer(spec.layers[0], spec.dtype);
    CHECK(s.conv_bytes == 31'488);
    CHECK(s.ssm_bytes == 655'360);
    CHECK(sm::state_bytes_per_sequence(spec) == 37'089'792);
}

TEST_CASE("Zamba2-2.7B: shared blocks are held once and read at every invocation", "[models][zamba2]") {
    const auto spec = sm::read_hf_config(fixture("Zamba2-2.7B.json"));
    // Mamba2 per layer: in_proj 2,560·(2·5,120 + 2·64 + 80) = 26,746,880, conv 5·5,248 = 26,240, out_proj
    // 5,120·2,560 = 13,107,200, A_log, D, dt_bias 240 → 39,880,560; × 54 = 2,153,550,240.
    // Shared block: q, k, v 3 · 5,120·5,120 = 78,643,200, o 5,120·2,560 = 13,107,200, MLP 3·2,560·10,240 =
    // 78,643,200 → 170,393,600; × 2 mem blocks = 340,787,200.
    // Per invocation: MLP adapter 2,560·128 + 128·20,480 = 2,949,120 (no attention adapters), linear 2,560² =
    // 6,553,600 → 9,502,720; × 9 = 85,524,480. Tied embedding 32,000·2,560 = 81,920,000.
    // Total 2,661,781,920 (the model is named 2.7B).
    CHECK(sm::count_params(spec).total() == 2'661'781'920);
    CHECK(sm::weight_bytes_total(spec) == 2 * 2'661'781'920);
    // One decode step reads the shared block at all 9 invocations: 81,920,000 + 2,153,550,240 + 9 · 170,393,600 +
    // 85,524,480 = 3,854,537,120 parameters · 2 B = 7,709,074,240.
    CHECK(sm::weight_bytes_read_per_step(spec, 1) == 7'709'074'240);
    CHECK(sm::linear_flops_per_token(spec) == 2.0 * 3'854'537'120.0);  // exact: integers below 2^53
}

TEST_CASE("Zamba2: attention adapters add 3 · 2 · (5,120 · rank) per invocation", "[models][zamba2]") {
    YAML::Node n = YAML::LoadFile(fixture("Zamba2-2.7B.json"));
    n["use_shared_attention_adapter"] = true;
    const auto spec = sm::model_from_hf_config(n, "zamba2-attn-adapters", "inline");
    // q, k, v: A 5,120 → 128 and B 128 → 5,120 each: 3 · 1,310,720 = 3,932,160; × 9 = 35,389,440 more.
    CHECK(sm::count_params(spec).total() == 2'661'781'920 + 35'389'440);
}

TEST_CASE("Zamba2: a hybrid_layer_ids list that disagrees with layers_block_type is refused", "[models][zamba2]") {
    YAML::Node n = YAML::LoadFile(fixture("Zamba2-2.7B.json"));
    n["hybrid_layer_ids"][0] = 5;
    CHECK_THROWS_AS(sm::model_from_hf_config(n, "zamba2-bad", "inline"), servesim::ConfigError);
}

TEST_CASE("Mamba2 state under tensor parallelism replicates a single group to every rank", "[models][falcon_h1]") {
    const auto spec = sm::read_hf_config(fixture("Falcon-H1-7B-Instruct.json"));
    // vLLM extra_groups_for_head_shards: 1 group at TP 2 becomes 2, so conv_dim = 3,072 + 2·2·256 = 4,096 and a rank
    // holds 4,096 / 2 = 2,048 channels: (4 − 1)·2,048·2 B = 12,288 (not 3·1,792·2 = 10,752). ssm (24 / 2)·128·256·2 B
    // = 786,432.
    const auto s = sm::state_bytes_layer(spec.layers[1], spec.dtype, 2);
    CHECK(s.conv_bytes == 12'288);
    CHECK(s.ssm_bytes == 786'432);
    // A group count TP divides is split, not replicated: TP 1 keeps 3,584 channels.
    CHECK(sm::state_bytes_layer(spec.layers[1], spec.dtype, 1).conv_bytes == 21'504);
}
