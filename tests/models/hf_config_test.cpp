// Tests models/hf_config.*: config.json files written from the published numbers (tests/fixtures/hf/) read into the
// same spec as the matching preset, the layer-pattern rules of B.1, and errors that name file, line and key.
#include "models/hf_config.h"

#include <string>

#include "models/model_derived.h"
#include "models/model_registry.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::test::config_error_of;
using sm::test::contains;
using sm::test::fixture;

TEST_CASE("Each config.json fixture reads into exactly its preset's spec", "[models]") {
    // Qwen3-4B: flat; Llama-3.1-8B: no head_dim; Qwen3.5-4B: text_config + vision_config; Qwen3-Next: no
    // layer_types (full_attention_interval); Nemotron-H-8B: hybrid_override_pattern.
    for (const std::string name : {"Qwen3-4B", "Llama-3.1-8B", "Qwen3.5-4B", "Qwen3-Next-80B-A3B", "Nemotron-H-8B"}) {
        INFO(name);
        const auto from_file = sm::read_hf_config(fixture(name + ".json"));
        CHECK(from_file.name == name);
        CHECK(from_file == sm::load_preset(name));
    }
}

TEST_CASE("A missing head_dim is hidden_size / num_attention_heads", "[models]") {
    // Llama-3.1-8B: 4096 / 32 = 128.
    const auto spec = sm::read_hf_config(fixture("Llama-3.1-8B.json"));
    const auto& a = std::get<sm::AttentionMixer>(spec.layers[0].mixer);
    CHECK(a.head_dim == 128);
    CHECK(a.num_kv_heads == 8);
    CHECK_FALSE(a.output_gate);
    CHECK_FALSE(spec.tie_word_embeddings);
}

TEST_CASE("full_attention_interval 4 makes layers 3, 7, 11, ... full attention", "[models]") {
    const auto spec = sm::read_hf_config(fixture("Qwen3-Next-80B-A3B.json"));
    REQUIRE(spec.layers.size() == 48);
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        INFO(i);
        CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[i].mixer) == ((i + 1) % 4 == 0));
    }
    // Qwen3-Next gates its attention output without saying so in the config.
    CHECK(std::get<sm::AttentionMixer>(spec.layers[3].mixer).output_gate);
    const auto& moe = std::get<sm::MoeMlp>(spec.layers[0].mlp);
    CHECK(moe.num_experts == 512);
    CHECK(moe.num_experts_per_tok == 10);
    CHECK(moe.shared_expert_intermediate_size == 512);
    CHECK_FALSE(spec.supports_mamba_prefix_caching_all);
}

TEST_CASE("Qwen3-Next's GDN projections are interleaved per key head, Qwen3.5's are not", "[models]") {
    // vLLM GatedDeltaNetAttention(gqa_interleaved_layout=True) in qwen3_next.py, False in qwen3_5.py.
    const auto next = sm::read_hf_config(fixture("Qwen3-Next-80B-A3B.json"));
    CHECK(std::get<sm::GatedDeltaNetMixer>(next.layers[0].mixer).interleaved_projections);
    const auto q35 = sm::read_hf_config(fixture("Qwen3.5-4B.json"));
    CHECK_FALSE(std::get<sm::GatedDeltaNetMixer>(q35.layers[0].mixer).interleaved_projections);
}

TEST_CASE("Qwen3.5 reads the language model from text_config and the ssm dtype from mamba_ssm_dtype", "[models]") {
    const auto spec = sm::read_hf_config(fixture("Qwen3.5-4B.json"));
    CHECK(spec.hidden_size == 2560);
    CHECK(spec.vocab_size == 248320);
    CHECK(spec.tie_word_embeddings);
    CHECK(spec.dtype == sm::DType::kBFloat16);
    const auto& g = std::get<sm::GatedDeltaNetMixer>(spec.layers[0].mixer);
    CHECK(g.ssm_state_dtype == sm::DType::kFloat32);
    CHECK(g.num_v_heads == 32);
    CHECK(std::get<sm::AttentionMixer>(spec.layers[31].mixer).output_gate);
    CHECK(spec.extra_params > 300'000'000);
    CHECK(spec.extra_params < 400'000'000);
    CHECK_FALSE(spec.supports_mamba_prefix_caching_all);
}

TEST_CASE("A flat qwen3_5_text export reads like the nested text_config", "[models]") {
    // Later text-only exports put the text config's keys at top level; only the vision tower is then absent.
    const auto nested_file = servesim::load_yaml_file(fixture("Qwen3.5-4B.json"));
    const auto flat = sm::model_from_hf_config(nested_file["text_config"], "Qwen3.5-4B", "flat.json");
    auto nested = sm::read_hf_config(fixture("Qwen3.5-4B.json"));
    nested.extra_params = 0;
    nested.vision.reset();
    CHECK(flat == nested);
}

TEST_CASE("Nemotron-H's pattern makes each character a whole block", "[models]") {
    const auto spec = sm::read_hf_config(fixture("Nemotron-H-8B.json"));
    REQUIRE(spec.layers.size() == 52);
    // "M-M-M-M*-...": block 0 Mamba2 without MLP, block 1 relu2 MLP without mixer, block 7 attention.
    CHECK(std::holds_alternative<sm::Mamba2Mixer>(spec.layers[0].mixer));
    CHECK(std::holds_alternative<sm::NoMlp>(spec.layers[0].mlp));
    CHECK(std::holds_alternative<sm::NoMixer>(spec.layers[1].mixer));
    CHECK_FALSE(std::get<sm::DenseMlp>(spec.layers[1].mlp).gated);
    CHECK(std::holds_alternative<sm::AttentionMixer>(spec.layers[7].mixer));
    // attention_head_dim, and vLLM's fp32 ssm default.
    CHECK(std::get<sm::AttentionMixer>(spec.layers[7].mixer).head_dim == 128);
    CHECK(std::get<sm::Mamba2Mixer>(spec.layers[0].mixer).ssm_state_dtype == sm::DType::kFloat32);
    CHECK(spec.supports_mamba_prefix_caching_all);
}

TEST_CASE("decoder_sparse_step and mlp_only_layers choose dense layers in a MoE", "[models]") {
    const auto config = YAML::Load(R"({
        "model_type": "qwen3_moe", "hidden_size": 1024, "intermediate_size": 4096, "moe_intermediate_size": 512,
        "num_experts": 16, "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [3],
        "num_hidden_layers": 6, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
        "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"})");
    const auto spec = sm::model_from_hf_config(config, "toy", "toy.json");
    // MoE iff (i+1) % 2 == 0 and i not in [3]: layers 1 and 5; dense 0, 2, 3, 4.
    for (int i : {1, 5}) {
        CHECK(std::holds_alternative<sm::MoeMlp>(spec.layers[i].mlp));
    }
    for (int i : {0, 2, 3, 4}) {
        CHECK(std::get<sm::DenseMlp>(spec.layers[i].mlp).intermediate_size == 4096);
    }
}

TEST_CASE("layer_types sliding_attention reads the window size", "[models]") {
    const auto config = YAML::Load(R"({
        "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4096,
        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 1000, "max_position_embeddings": 4096})");
    const auto spec = sm::model_from_hf_config(config, "toy", "toy.json");
    CHECK(std::get<sm::AttentionMixer>(spec.layers[0].mixer).sliding_window_tokens == 4096);
    CHECK(std::get<sm::AttentionMixer>(spec.layers[1].mixer).sliding_window_tokens == 0);
    // No dtype key: bfloat16; no head_dim: 1024 / 16 = 64.
    CHECK(spec.dtype == sm::DType::kBFloat16);
    CHECK(std::get<sm::AttentionMixer>(spec.layers[0].mixer).head_dim == 64);
}

TEST_CASE("A real config.json named config.json takes its folder's name", "[models]") {
    CHECK(sm::model_name_from_path("/models/Qwen3-4B/config.json") == "Qwen3-4B");
    CHECK(sm::model_name_from_path("fixtures/hf/Qwen3.5-4B.json") == "Qwen3.5-4B");
}

TEST_CASE("Malformed JSON is an error naming the file and line", "[models]") {
    const auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("malformed.json")); });
    // The missing comma after line 4 is reported where the next key starts (line 5).
    CHECK(contains(msg, "malformed.json:"));
    CHECK(contains(msg, "malformed"));
    CHECK(contains(msg, ":5:"));
}

TEST_CASE("A missing file is an error naming it", "[models]") {
    const auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("no_such_config.json")); });
    CHECK(contains(msg, "no_such_config.json"));
    CHECK(contains(msg, "cannot open"));
}

TEST_CASE("A missing required key is an error naming the file and the key", "[models]") {
    const auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("missing_hidden_size.json")); });
    CHECK(contains(msg, "missing_hidden_size.json"));
    CHECK(contains(msg, "'hidden_size'"));
    CHECK(contains(msg, "missing"));
}

TEST_CASE("A key of the wrong type is an error naming the key and the value", "[models]") {
    const auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("wrong_type_layers.json")); });
    CHECK(contains(msg, "wrong_type_layers.json:5"));
    CHECK(contains(msg, "'num_hidden_layers'"));
    CHECK(contains(msg, "thirty-two"));
}

TEST_CASE("A negative max_window_layers, integer or float, is an error naming the key", "[models][regression]") {
    // A float like -1e5 once passed the non-negative check through the float fallback of the integer reader and
    // wrote outside the layer table; -1e30 is also outside int's range.
    for (const char* value : {"-1e5", "-3", "-1e30"}) {
        INFO(value);
        auto config = YAML::Load(std::string(R"({"model_type": "qwen3", "vocab_size": 1000, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 4096, "use_sliding_window": true, "sliding_window": 128,
            "max_window_layers": )") + value + "}");
        const auto msg = config_error_of([&] { (void)sm::model_from_hf_config(config, "toy", "toy.json"); });
        CHECK(contains(msg, "toy.json"));
        CHECK(contains(msg, "'max_window_layers'"));
    }
}

TEST_CASE("A missing key inside text_config is named with its path", "[models]") {
    auto config = YAML::Load(R"({"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text",
        "vocab_size": 1000, "max_position_embeddings": 4096, "num_hidden_layers": 4}})");
    const auto msg = config_error_of([&] { (void)sm::model_from_hf_config(config, "toy", "toy.json"); });
    CHECK(contains(msg, "toy.json"));
    CHECK(contains(msg, "'text_config.hidden_size'"));
}

TEST_CASE("An unknown model_type is an error listing the supported ones", "[models]") {
    const auto msg = config_error_of([] { (void)sm::read_hf_config(fixture("unknown_model_type.json")); });
    CHECK(contains(msg, "gpt_imaginary"));
    CHECK(contains(msg, "'model_type'"));
    for (const auto& t : sm::supported_model_types()) {
        CHECK(contains(msg, t));
    }
}

TEST_CASE("A bad dtype or layer type is an error listing what is allowed", "[models]") {
    auto config = YAML::Load(R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
        "num_hidden_layers": 1, "num_attention_heads": 16, "vocab_size": 1000, "max_position_embeddings": 4096,
        "torch_dtype": "int3"})");
    auto msg = config_error_of([&] { (void)sm::model_from_hf_config(config, "toy", "toy.json"); });
    CHECK(contains(msg, "'torch_dtype'"));
    CHECK(contains(msg, "bfloat16"));
    config["torch_dtype"] = "bfloat16";
    config["layer_types"] = YAML::Load("[cross_attention]");
    msg = config_error_of([&] { (void)sm::model_from_hf_config(config, "toy", "toy.json"); });
    CHECK(contains(msg, "'layer_types'"));
    CHECK(contains(msg, "cross_attention"));
    CHECK(contains(msg, "linear_attention"));
}

TEST_CASE("A hybrid_override_pattern character outside M * - E is an error", "[models]") {
    auto config = YAML::Load(R"({"model_type": "nemotron_h", "hidden_size": 1024, "intermediate_size": 4096,
        "hybrid_override_pattern": "M-X", "vocab_size": 1000, "max_position_embeddings": 4096})");
    const auto msg = config_error_of([&] { (void)sm::model_from_hf_config(config, "toy", "toy.json"); });
    CHECK(contains(msg, "'hybrid_override_pattern'"));
    CHECK(contains(msg, "'X'"));
}
