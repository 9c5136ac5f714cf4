// Tests that config.json files load as published (tests/fixtures/hf/SOURCES.md says where each came from): the
// defaults transformers fills in for absent keys (models/hf_defaults.*), the qwen2_moe and mistral3 model types, and
// the checkpoints' own quantization_config (fp8 128x128 blocks for DeepSeek-V3 and Kimi-K2, MXFP4 experts for
// gpt-oss). Each fixture's weight bytes and KV bytes per token are worked by hand below.
#include <yaml-cpp/yaml.h>

#include <string>
#include <variant>

#include "models/hf_config.h"
#include "models/hf_defaults.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::attention_of;
using sm::test::config_error_of;
using sm::test::contains;
using sm::test::fixture;

TEST_CASE("Gemma-3-27B as published: vocab_size and max_position_embeddings come from Gemma3TextConfig",
          "[models][defaults]") {
    const auto spec = sm::read_hf_config(fixture("gemma-3-27b-it.json"));
    // text_config names neither: Gemma3TextConfig's 262,208 and 131,072; sliding_window_pattern absent → 6.
    CHECK(spec.vocab_size == 262'208);
    CHECK(spec.max_position_embeddings == 131'072);
    CHECK(sm::count_layers(spec).sliding_window == 52);  // 62 layers, (i + 1) % 6 == 0 full → 10 full
    CHECK(spec.tie_word_embeddings);                     // Gemma3TextConfig default
    // KV: 62 layers · 2 (K, V) · 16 KV heads · 128 · 2 B = 507,904 per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 507'904);
    // Weights, bf16: text 27,007,991,808 + SigLIP estimate 422,659,584 = 27,430,651,392 parameters
    // (sliding_window_models_test.cpp works both out) · 2 B = 54,861,302,784 B (51.09 GiB).
    CHECK(sm::weight_bytes_total(spec) == 54'861'302'784);
}

TEST_CASE("Qwen1.5-MoE-A2.7B (qwen2_moe): 60 experts of 1,408, a gated shared expert of 5,632; 14.3 B parameters",
          "[models][defaults]") {
    const auto spec = sm::read_hf_config(fixture("Qwen1.5-MoE-A2.7B.json"));
    REQUIRE(spec.layers.size() == 24);
    const auto c = sm::count_layers(spec);
    CHECK(c.moe_mlp == 24);  // decoder_sparse_step 1, no mlp_only_layers
    const auto& moe = std::get<sm::MoeMlp>(spec.layers[0].mlp);
    CHECK(moe.num_experts == 60);
    CHECK(moe.num_experts_per_tok == 4);
    CHECK(moe.moe_intermediate_size == 1408);
    CHECK(moe.shared_expert_intermediate_size == 5632);
    CHECK(moe.shared_expert_gate);  // Qwen2MoeSparseMoeBlock.shared_expert_gate: hidden → 1
    CHECK_FALSE(attention_of(spec, 0).qk_norm);
    // KV: 24 · 2 · 16 KV heads · 128 · 2 B = 196,608 per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 196'608);
    // Per layer: attention 4 · 2,048² = 16,777,216; experts 60 · 3 · 2,048 · 1,408 = 519,045,120; shared expert
    // 3 · 2,048 · 5,632 = 34,603,008; router 2,048 · 60 = 122,880; shared gate 2,048 → 570,550,272; × 24 =
    // 13,693,206,528. Embedding and lm_head (untied) 2 · 151,936 · 2,048 = 622,329,856. Total 14,315,536,384 (the
    // published 14.3 B; qkv biases are not counted).
    CHECK(sm::count_params(spec).total() == 14'315'536'384);
    // bf16 (no torch_dtype in the fixture: the reader's bfloat16): 28,631,072,768 B = 26.66 GiB.
    CHECK(sm::weight_bytes_total(spec) == 28'631'072'768);
    // Active: attention 16,777,216 + 4 experts 34,603,008 + shared 34,603,008 + router and gate 124,928 =
    // 86,108,160 per layer; × 24 = 2,066,595,840; + 622,329,856 = 2,688,925,696 (published: 2.7 B activated).
    CHECK(sm::count_active_params(spec).total() == 2'688'925'696);
}

TEST_CASE("Mistral-Small-3.1 (mistral3): a MistralConfig text model under text_config plus a Pixtral tower",
          "[models][defaults]") {
    const auto spec = sm::read_hf_config(fixture("Mistral-Small-3.1-24B-Instruct-2503.json"));
    REQUIRE(spec.layers.size() == 40);
    CHECK(spec.hidden_size == 5120);
    CHECK(spec.vocab_size == 131'072);
    CHECK_FALSE(spec.tie_word_embeddings);                    // MistralConfig default
    CHECK(attention_of(spec, 0).sliding_window_tokens == 0);  // "sliding_window": null → full attention
    CHECK(attention_of(spec, 0).head_dim == 128);
    // KV: 40 · 2 · 8 KV heads · 128 · 2 B = 163,840 per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 163'840);
    // Text per layer: q 5,120 · 4,096 = 20,971,520, k and v 2 · 5,120 · 1,024 = 10,485,760, o 4,096 · 5,120 =
    // 20,971,520 → 52,428,800; MLP 3 · 5,120 · 32,768 = 503,316,480 → 555,745,280; × 40 = 22,229,811,200.
    // Embedding and lm_head 2 · 131,072 · 5,120 = 1,342,177,280 → text 23,571,988,480.
    // Pixtral (estimate_pixtral_params): patch conv 3 · 14² · 1,024 = 602,112; 24 · (4 · 1,024² + 3 · 1,024 · 4,096)
    // = 402,653,184; patch merger 4,096 · 1,024 = 4,194,304; linear_1 1,024 · 5,120 = 5,242,880; linear_2 5,120² =
    // 26,214,400 → 438,906,880. Total 24,010,895,360 (the published 24 B).
    const auto p = sm::count_params(spec);
    CHECK(p.extra == 438'906'880);
    CHECK(p.total() == 24'010'895'360);
    // bf16: 48,021,790,720 B = 44.72 GiB.
    CHECK(sm::weight_bytes_total(spec) == 48'021'790'720);
}

TEST_CASE("gpt-oss-20b with its published mxfp4 quantization_config holds 12.8 GiB of weights, not 38.9",
          "[models][quantization]") {
    const auto spec = sm::read_hf_config(fixture("gpt-oss-20b.json"));
    REQUIRE(spec.quantization.has_value());
    CHECK(spec.quantization->method == "mxfp4");
    // KV unchanged by weight quantization: 24 · 2 · 8 · 64 · 2 = 49,152.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 49'152);
    // Experts only (modules_to_not_convert keeps attention, router, embeddings and lm_head in bf16): per expert
    // gate_up 2,880 → 5,760 at 4 bits = 8,294,400 B + one e8m0 byte per 32 inputs, 5,760 · 90 = 518,400;
    // down 2,880 → 2,880: 4,147,200 + 2,880 · 90 = 259,200 → 13,219,200; × 32 experts × 24 layers = 10,152,345,600.
    // bf16: attention with sinks 26,542,144 params + router 92,160 per layer → × 24 × 2 B = 1,278,446,592;
    // embedding and lm_head 2 · 201,088 · 2,880 · 2 B = 2,316,533,760. Total 13,747,325,952 B = 12.80 GiB
    // (all bf16 it would be 20,907,787,776 · 2 = 41,815,575,552 B = 38.94 GiB).
    CHECK(sm::weight_bytes_total(spec) == 13'747'325'952);
}

TEST_CASE("DeepSeek-V3 with its published fp8 quantization_config: 128x128 blocks, fp32 scales", "[models][quantization]") {
    const auto spec = sm::read_hf_config(fixture("DeepSeek-V3.json"));
    REQUIRE(spec.quantization.has_value());
    CHECK(spec.quantization->method == "fp8");
    // KV: the 576-element latent, 61 · 576 · 2 = 70,272 per token in bf16.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 70'272);
    // fp8 weights, 1 B each, plus one fp32 scale per 128 × 128 tile (⌈N/128⌉ · ⌈K/128⌉ · 4 B):
    //  attention: q_a 7,168 → 1,536: 11,010,048 + 12 · 56 · 4 = 2,688; q_b 1,536 → 24,576: 37,748,736 + 192 · 12 · 4
    //  = 9,216; kv_a 7,168 → 576: 4,128,768 + 5 · 56 · 4 = 1,120; kv_b 512 → 32,768: 16,777,216 + 256 · 4 · 4 =
    //  4,096; o 16,384 → 7,168: 117,440,512 + 56 · 128 · 4 = 28,672 → 187,151,072; × 61 = 11,416,215,392.
    //  dense MLP: gate and up 7,168 → 18,432 and down: 396,361,728 + 3 · 144 · 56 · 4 = 96,768 → 396,458,496; × 3
    //  = 1,189,375,488.
    //  expert: gate_up 7,168 → 4,096: 29,360,128 + 32 · 56 · 4 = 7,168; down 2,048 → 7,168: 14,680,064 + 56 · 16 ·
    //  4 = 3,584 → 44,050,944; the shared expert the same; router bf16 7,168 · 256 · 2 = 3,670,016. MoE layer
    //  256 · 44,050,944 + 44,050,944 + 3,670,016 = 11,324,762,624; × 58 = 656,836,232,192.
    //  embedding and lm_head stay bf16: 2 · 129,280 · 7,168 · 2 = 3,706,716,160.
    // Total 673,148,539,232 B = 626.92 GiB (78.4 GiB per GPU at TP 8).
    CHECK(sm::weight_bytes_total(spec) == 673'148'539'232);
}

TEST_CASE("Kimi-K2 with its fp8 block quantization: 958.5 GiB of weights", "[models][quantization]") {
    const auto spec = sm::read_hf_config(fixture("Kimi-K2-Instruct.json"));
    REQUIRE(spec.quantization.has_value());
    // KV: 61 · 576 · 2 = 70,272 per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 70'272);
    // As DeepSeek-V3 with 64 heads and 384 experts: attention q_a 11,010,048 + 2,688; q_b 1,536 → 12,288:
    // 18,874,368 + 96 · 12 · 4 = 4,608; kv_a 4,128,768 + 1,120; kv_b 512 → 16,384: 8,388,608 + 128 · 4 · 4 = 2,048;
    // o 8,192 → 7,168: 58,720,256 + 56 · 64 · 4 = 14,336 → 101,146,848; × 61 = 6,169,957,728. One dense layer
    // 396,458,496. MoE layer 384 · 44,050,944 + 44,050,944 + router 7,168 · 384 · 2 = 5,505,024 →
    // 16,965,118,464; × 60 = 1,017,907,107,840. Embedding and lm_head 2 · 163,840 · 7,168 · 2 = 4,697,620,480.
    // Total 1,029,171,144,544 B = 958.49 GiB.
    CHECK(sm::weight_bytes_total(spec) == 1'029'171'144'544);
}

TEST_CASE("Granite-3.3-8B (granite): a Llama-shaped decoder with tied embeddings; the µP multipliers change no size",
          "[models][defaults]") {
    const auto spec = sm::read_hf_config(fixture("granite-3.3-8b-instruct.json"));
    REQUIRE(spec.layers.size() == 40);
    CHECK(spec.tie_word_embeddings);
    CHECK(attention_of(spec, 0).head_dim == 128);  // 4,096 / 32
    // KV: 40 · 2 · 8 KV heads · 128 · 2 B = 163,840 per token.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 163'840);
    // Per layer: q and o 2 · 4,096² = 33,554,432, k and v 2 · 4,096 · 1,024 = 8,388,608, MLP 3 · 4,096 · 12,800 =
    // 157,286,400 → 199,229,440; × 40 = 7,969,177,600; tied embedding 49,159 · 4,096 = 201,355,264. Total
    // 8,170,532,864 parameters (8.17 B; norms are not counted) · 2 B = 16,341,065,728 B.
    CHECK(sm::count_params(spec).total() == 8'170'532'864);
    CHECK(sm::weight_bytes_total(spec) == 16'341'065'728);
}

TEST_CASE("A text_config that leaves out the head shapes takes Gemma3TextConfig's (Gemma-3-4B's layout)",
          "[models][defaults]") {
    // Synthetic: only the keys a Gemma-3-4B-style text_config states; heads 8, KV heads 4 and head_dim 256 are the
    // class defaults. KV: 34 · 2 · 4 · 256 · 2 B = 139,264 per token.
    const auto config = YAML::Load(R"({"model_type": "gemma3", "text_config": {"hidden_size": 2560,
        "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34, "sliding_window": 1024}})");
    const auto spec = sm::model_from_hf_config(config, "toy", "toy.json");
    CHECK(attention_of(spec, 0).num_q_heads == 8);
    CHECK(attention_of(spec, 0).num_kv_heads == 4);
    CHECK(attention_of(spec, 0).head_dim == 256);
    CHECK(attention_of(spec, 0).sliding_window_tokens == 1024);
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 139'264);
    // A key present with null stays null (transformers keeps an explicit None): no sliding window for Mistral.
    const auto mistral = YAML::Load(R"({"model_type": "mistral", "hidden_size": 1024, "num_hidden_layers": 2,
        "sliding_window": null})");
    CHECK(attention_of(sm::model_from_hf_config(mistral, "toy", "toy.json"), 0).sliding_window_tokens == 0);
    // Absent, MistralConfig's 4,096 applies to every layer.
    const auto mistral_absent = YAML::Load(R"({"model_type": "mistral", "hidden_size": 1024, "num_hidden_layers": 2})");
    const auto m = sm::model_from_hf_config(mistral_absent, "toy", "toy.json");
    CHECK(attention_of(m, 1).sliding_window_tokens == 4096);
    CHECK(m.vocab_size == 32'000);
    CHECK(attention_of(m, 0).num_kv_heads == 8);
}

TEST_CASE("hidden_size and num_hidden_layers are never defaulted; unmodelled variants are refused by key",
          "[models][defaults]") {
    // LlamaConfig would build its 4,096-wide reference model; servesim names the key instead.
    auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("missing_hidden_size.json")); });
    CHECK(contains(msg, "'hidden_size'"));
    const auto no_layers = YAML::Load(R"({"model_type": "qwen2_moe", "hidden_size": 2048})");
    msg = config_error_of([&] { (void)sm::model_from_hf_config(no_layers, "toy", "toy.json"); });
    CHECK(contains(msg, "'num_hidden_layers'"));
    // mistral3 over another decoder (Ministral 3's ministral3) is not modelled.
    const auto ministral = YAML::Load(R"({"model_type": "mistral3", "text_config": {"model_type": "ministral3",
        "hidden_size": 1024, "num_hidden_layers": 2}})");
    msg = config_error_of([&] { (void)sm::model_from_hf_config(ministral, "toy", "toy.json"); });
    CHECK(contains(msg, "'text_config.model_type'"));
    CHECK(contains(msg, "ministral3"));
    // Qwen2-MoE's sliding-window layout is refused rather than guessed.
    const auto sliding = YAML::Load(R"({"model_type": "qwen2_moe", "hidden_size": 256, "num_hidden_layers": 2,
        "use_sliding_window": true})");
    msg = config_error_of([&] { (void)sm::model_from_hf_config(sliding, "toy", "toy.json"); });
    CHECK(contains(msg, "'use_sliding_window'"));
}

TEST_CASE("Each defaults table names its transformers class", "[models][defaults]") {
    // Language-model tables hold no hidden_size or num_hidden_layers (the rule in models/hf_defaults.h); the
    // Pixtral vision tower's table does (PixtralVisionConfig's 1,024 × 24).
    for (const char* type : {"gemma3_text", "mistral", "llama", "qwen2", "qwen2_moe"}) {
        INFO(type);
        const auto d = sm::transformers_defaults(type);
        REQUIRE(d.has_value());
        CHECK(contains(std::string(d->config_class), "Config"));
        for (const auto& k : d->keys) {
            CHECK(k.key != "hidden_size");
            CHECK(k.key != "num_hidden_layers");
        }
    }
    REQUIRE(sm::transformers_defaults("pixtral").has_value());
    CHECK(sm::transformers_defaults("pixtral")->config_class == "PixtralVisionConfig");
    CHECK_FALSE(sm::transformers_defaults("deepseek_v3").has_value());
    CHECK(sm::default_text_model_type("gemma3") == "gemma3_text");
    CHECK(sm::default_text_model_type("mistral3") == "mistral");
    CHECK(sm::default_text_model_type("qwen3_5") == "qwen3_5");
}
