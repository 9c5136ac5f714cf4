// Tests models/quantization_config.* and models/weight_footprint.*: each scheme's config.json fixture
// (tests/fixtures/hf/quant/, written from the published configs) read into its scheme, its weight bytes worked out by
// hand below, the layers vLLM leaves unquantized, ignore lists, and errors naming the file and key.
#include <yaml-cpp/yaml.h>

#include <string>

#include "common/units.h"
#include "models/hf_config.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "models/weight_footprint.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using servesim::kGiB;
using sm::test::config_error_of;
using sm::test::contains;
using sm::test::fixture;
using sm::test::within_rel;

namespace {

sm::ModelSpec quant_fixture(const std::string& name) { return sm::read_hf_config(fixture("quant/" + name)); }

// The Llama-3.1-8B fixture with `quantization_config` set to `qc` (YAML/JSON text).
sm::ModelSpec llama8_with(const std::string& qc) {
    YAML::Node n = YAML::LoadFile(fixture("Llama-3.1-8B.json"));
    n["quantization_config"] = YAML::Load(qc);
    return sm::model_from_hf_config(n, "Llama-3.1-8B-q", "llama8-q.json");
}

}  // namespace

TEST_CASE("Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8) holds about 382 GiB: fp8 linear layers, bf16 embeddings", "[models][quant]") {
    // The preset Llama-3.1-405B-FP8 holds the same scheme.
    CHECK(sm::weight_bytes_total(sm::load_preset("Llama-3.1-405B-FP8")) == 410'131'418'568);
    // Per block: q 16384·16384 = 268,435,456; k, v 16384·1024 = 16,777,216 each; o 268,435,456; gate, up, down
    // 16384·53248 = 872,415,232 each → 3,187,671,040 fp8 bytes. Per-channel fp32 scales, one per output row:
    // 16384 + 1024 + 1024 + 16384 + 53248 + 53248 + 16384 = 157,696 rows · 4 B = 630,784 B, and one fp32
    // input_scale_ub per layer (7 · 4 = 28 B). 126 blocks: 126 · (3,187,671,040 + 630,784 + 28) = 401,726,033,352.
    // Embedding + lm_head in bf16: 2 · 128256 · 16384 · 2 = 8,405,385,216. Total 410,131,418,568 B = 381.96 GiB
    // (bf16: 811,698,487,296 B = 755.95 GiB).
    // The fixture keeps every decoder linear layer in fp8 (modules_to_not_convert null), the 380 GiB issue 14 states;
    // the published file's exact modules_to_not_convert list could not be checked offline (see the next test).
    const auto spec = quant_fixture("Llama-3.1-405B-Instruct-FP8.json");
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->method == "fbgemm_fp8");
    CHECK(sm::weight_bytes_total(spec) == 410'131'418'568);
    CHECK(within_rel(sm::weight_bytes_total(spec) / kGiB, 381.96, 1e-4));
    sm::ModelSpec bf16 = spec;
    bf16.quantization.reset();
    CHECK(sm::weight_bytes_total(bf16) == 811'698'487'296);  // 755.95 GiB
}

TEST_CASE("fbgemm_fp8 modules_to_not_convert keeps the listed layers in bf16 (Llama 3 paper's FP8 recipe)", "[models][quant]") {
    // Attention of all 126 blocks and the MLPs of blocks 0 and 125 stay bf16 (511 entries with lm_head).
    // bf16: attention 126 · 570,425,344 · 2 = 143,747,186,688; two MLPs 2 · 2,617,245,696 · 2 = 10,468,982,784.
    // fp8: 124 MLPs · (2,617,245,696 + (53248 + 53248 + 16384) · 4 + 3 · 4) = 124 · 2,617,737,228 = 324,599,416,272.
    // Embeddings 8,405,385,216. Total 487,220,970,960 B = 453.76 GiB.
    const auto spec = quant_fixture("Llama-3.1-405B-FP8-attention-bf16.json");
    CHECK(sm::weight_bytes_total(spec) == 487'220'970'960);
    const auto modules = sm::linear_modules(spec);
    int quantized = 0;
    for (const auto& m : modules) {
        quantized += m.scheme != nullptr ? 1 : 0;
    }
    CHECK(quantized == 124 * 3);
}

TEST_CASE("Block-wise fp8 (Qwen3-8B-FP8, 128x128) counts one fp32 scale per tile", "[models][quant]") {
    // q 4096→4096: 16,777,216 + (32·32)·4 = 16,781,312; k, v 4096→1024: 4,194,304 + (8·32)·4 = 4,195,328;
    // o = q; gate, up 4096→12288 and down 12288→4096: 50,331,648 + (96·32)·4 = 50,343,936.
    // Block: 2·16,781,312 + 2·4,195,328 + 3·50,343,936 = 192,985,088; 36 blocks 6,947,463,168.
    // Embedding + lm_head bf16: 2 · 151936 · 4096 · 2 = 2,489,319,424. Total 9,436,782,592.
    const auto spec = quant_fixture("Qwen3-8B-FP8.json");
    REQUIRE(spec.quantization);
    const auto& s = spec.quantization->rules.at(0).scheme;
    CHECK(s.granularity == sm::ScaleGranularity::kBlock);
    CHECK(s.activations == sm::ActivationQuant::kFp8);
    CHECK(sm::weight_bytes_total(spec) == 9'436'782'592);
}

TEST_CASE("AWQ 4-bit (Qwen2.5-7B-Instruct-AWQ) counts fp16 scales and int4 zero points per group of 128", "[models][quant]") {
    // K×N matrix: K·N/2 + N·(K/128)·(2 + 0.5). q 3584→3584: 6,422,528 + 3584·28·2.5 = 6,673,408; k, v 3584→512:
    // 917,504 + 512·28·2.5 = 953,344; o = q; gate, up 3584→18944: 33,947,648 + 18944·28·2.5 = 35,273,728; down
    // 18944→3584: 33,947,648 + 3584·148·2.5 = 35,273,728. Block 121,074,688; 28 blocks 3,390,091,264.
    // Embedding + lm_head fp16: 2 · 152064 · 3584 · 2 = 2,179,989,504. Total 5,570,080,768 (5.19 GiB).
    const auto spec = quant_fixture("Qwen2.5-7B-Instruct-AWQ.json");
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->method == "awq");
    CHECK(spec.quantization->rules.at(0).scheme.activations == sm::ActivationQuant::kNone);
    CHECK(sm::weight_bytes_total(spec) == 5'570'080'768);
}

TEST_CASE("GPTQ 4-bit act-order (Llama-3.1-8B-Instruct-GPTQ-INT4): fp16 scales per group, g_idx, no zeros (sym)", "[models][quant]") {
    // K×N: K·N/2 + N·(K/128)·2 + 8·K (g_idx + Marlin's sort indices, int32 each). q 4096→4096:
    // 8,388,608 + 262,144 + 32,768 = 8,683,520; k, v 4096→1024: 2,097,152 + 65,536 + 32,768 = 2,195,456; o = q;
    // gate, up 4096→14336: 29,360,128 + 917,504 + 32,768 = 30,310,400; down 14336→4096: 29,360,128 + 917,504 +
    // 114,688 = 30,392,320. Block 112,771,072; 32 blocks 3,608,674,304; embeddings 2·128256·4096·2 =
    // 2,101,346,304. Total 5,710,020,608.
    const auto spec = quant_fixture("Llama-3.1-8B-Instruct-GPTQ-INT4.json");
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->method == "gptq");
    CHECK(sm::weight_bytes_total(spec) == 5'710'020'608);
}

TEST_CASE("bitsandbytes nf4 with double quant (Llama-3.1-8B bnb-4bit): 0.5 + 1.015625/64 bytes per weight", "[models][quant]") {
    // Linear weights per block 218,103,808; 32 blocks 6,979,321,856. 4-bit: 3,489,660,928 B; absmax per 64
    // weights, 8-bit with one fp32 per 256 blocks: 6,979,321,856 / 64 · (1 + 4/256) = 110,755,840 B.
    // Embeddings 2,101,346,304. Total 5,701,763,072.
    const auto spec = quant_fixture("Llama-3.1-8B-Instruct-bnb-4bit.json");
    REQUIRE(spec.quantization);
    CHECK(sm::weight_bytes_total(spec) == 5'701'763'072);
}

TEST_CASE("compressed-tensors FP8-dynamic (W8A8, per-channel) ignores lm_head and counts fp32 row scales", "[models][quant]") {
    // 218,103,808 fp8 bytes per block + 4·(4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096) = 172,032 B of scales
    // → 218,275,840; 32 blocks 6,984,826,880; embeddings 2,101,346,304. Total 9,086,173,184.
    const auto spec = quant_fixture("Llama-3.1-8B-Instruct-FP8-dynamic.json");
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->rules.at(0).scheme.activations == sm::ActivationQuant::kFp8);
    CHECK(sm::weight_bytes_total(spec) == 9'086'173'184);
}

TEST_CASE("compressed-tensors W4A16 asymmetric: int4 zero points per group", "[models][quant]") {
    // group 128, bf16 scales, 4-bit zero points: K·N/2 + N·(K/128)·2.5, per block for Llama-3.1-8B:
    // 109,051,904 + 2.5 · (4096·32 + 1024·32·2 + 4096·32 + 14336·32·2 + 4096·112) = 109,051,904 + 2.5 · 1,703,936 =
    // 113,311,744; 32 blocks 3,625,975,808 + embeddings 2,101,346,304 = 5,727,322,112.
    const auto spec = llama8_with(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
        "ignore": ["lm_head"], "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": false}}}})");
    CHECK(sm::weight_bytes_total(spec) == 5'727'322'112);
}

TEST_CASE("NVFP4 (modelopt): e2m1 weights, an fp8 scale per 16 and two fp32 scalars per layer", "[models][quant]") {
    // 6,979,321,856 linear weights · (0.5 + 1/16) = 3,925,868,544 B + 8 B · 7 layers · 32 blocks = 1,792 B;
    // embeddings 2,101,346,304. Total 6,027,216,640.
    const auto spec =
        llama8_with(R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head"]})");
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->method == "modelopt_fp4");
    CHECK(spec.quantization->rules.at(0).scheme.activations == sm::ActivationQuant::kFp4);
    CHECK(sm::weight_bytes_total(spec) == 6'027'216'640);
}

TEST_CASE("MXFP4 quantizes only the routed experts (gpt-oss rule), 4.25 bits each", "[models][quant]") {
    // Qwen3-235B-A22B: 94 MoE blocks of 128 experts, h 4096, expert width 1536: 3 · 4096 · 1536 = 18,874,368
    // parameters per expert, 94 · 128 · 18,874,368 = 227,096,395,776 expert parameters. MXFP4: 0.5 B + one e8m0
    // byte per 32 = 0.53125 B each → 120,644,960,256 B instead of 454,192,791,552 B in bf16; everything else
    // unchanged.
    sm::ModelSpec spec = sm::load_preset("Qwen3-235B-A22B");
    const std::int64_t bf16 = sm::weight_bytes_total(spec);
    YAML::Node qc = YAML::Load(R"({"quant_method": "mxfp4"})");
    spec.quantization = sm::parse_quantization_config(servesim::YamlMap(qc, "t.json", "quantization_config"), spec.dtype);
    CHECK(bf16 - sm::weight_bytes_total(spec) == 454'192'791'552 - 120'644'960'256);
    for (const auto& m : sm::linear_modules(spec)) {
        CHECK((m.scheme != nullptr) == (m.role == sm::LinearRole::kExpert));
    }
}

TEST_CASE("The linear modules plus conv/SSM vectors are exactly count_params for every preset", "[models][quant]") {
    // Keeps weight_footprint in step with model_derived: an unquantized spec's footprint equals weight_bytes_total.
    for (const auto& name : sm::preset_names()) {
        INFO(name);
        sm::ModelSpec spec = sm::load_preset(name);
        spec.quantization.reset();  // the FP8 preset's own scheme aside
        const sm::ModelSpec unquantized = spec;
        const std::int64_t plain = sm::weight_bytes_total(spec);
        YAML::Node qc = YAML::Load(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
                                       "modules_to_not_convert": ["model."]})");  // every layer ignored
        spec.quantization = sm::parse_quantization_config(servesim::YamlMap(qc, "t.json", "q"), spec.dtype);
        CHECK(sm::weight_footprint(spec).quantized_params == 0);
        CHECK(sm::weight_bytes_total(spec) == plain);
        CHECK(sm::weight_bytes_read_per_step(spec, 1) == sm::weight_bytes_read_per_step(unquantized, 1));
    }
}

TEST_CASE("Per-step weight reads of a quantized MoE count the expected distinct experts", "[models][quant]") {
    // One token reads k = 8 experts per layer of 128: the fp8 read is the bf16 read's dense part halved (plus
    // scales), and a large batch reads every expert once (→ all layer weights + lm_head).
    sm::ModelSpec spec = sm::load_preset("Qwen3-235B-A22B");
    YAML::Node qc = YAML::Load(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})");
    spec.quantization = sm::parse_quantization_config(servesim::YamlMap(qc, "t.json", "q"), spec.dtype);
    const auto f = sm::weight_footprint(spec);
    const double all = static_cast<double>(sm::weight_bytes_total(spec)) -
                       151936.0 * 4096 * 2;  // every weight less the input embedding (a gather)
    CHECK(within_rel(sm::weight_bytes_read(f, 100'000), all, 1e-9));
    CHECK(sm::weight_bytes_read(f, 2) > sm::weight_bytes_read(f, 1));
    CHECK(f.moe.size() == 94);
}

TEST_CASE("An unmodelled or unknown quant_method is refused naming the file and key", "[models][quant]") {
    const auto msg = config_error_of([] { (void)llama8_with(R"({"quant_method": "gguf"})"); });
    CHECK(contains(msg, "llama8-q.json"));
    CHECK(contains(msg, "quantization_config.quant_method"));
    CHECK(contains(msg, "does not model"));
    CHECK(contains(config_error_of([] { (void)llama8_with(R"({"quant_method": "qqq"})"); }), "unknown quantization"));
    // vLLM requires activation_scheme for fp8 and modules_to_not_convert for fbgemm_fp8 (get_from_keys).
    CHECK(contains(config_error_of([] { (void)llama8_with(R"({"quant_method": "fp8"})"); }),
                   "quantization_config.activation_scheme"));
    CHECK(contains(config_error_of([] { (void)llama8_with(R"({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1})"); }),
                   "quantization_config.modules_to_not_convert"));
    CHECK(contains(config_error_of([] { (void)llama8_with(R"({"quant_method": "awq", "bits": 8, "group_size": 128, "zero_point": true})"); }),
                   "only 4-bit"));
    CHECK(contains(config_error_of([] {
                       (void)llama8_with(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets":
                           ["LlamaAttention"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}}})");
                   }),
                   "quantization_config.config_groups.g.targets"));
    // A regex that does not compile, and zero block dimensions, are refused at their key (no crash later).
    CHECK(contains(config_error_of([] {
                       (void)llama8_with(R"({"quant_method": "compressed-tensors", "ignore": ["re:(["], "config_groups":
                           {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy":
                           "channel"}}}})");
                   }),
                   "quantization_config.ignore"));
    CHECK(contains(config_error_of([] {
                       (void)llama8_with(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets":
                           ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                           "block_structure": [0, 128]}}}})");
                   }),
                   "block_structure"));
}

TEST_CASE("--quantization and --dtype follow vLLM's ModelConfig rules", "[models][quant]") {
    const auto awq = quant_fixture("Qwen2.5-7B-Instruct-AWQ.json");
    // The checkpoint's method and its Marlin overrides are accepted and keep its bytes.
    CHECK(sm::weight_bytes_total(sm::apply_engine_quantization(awq, std::string("awq_marlin"), std::nullopt)) ==
          sm::weight_bytes_total(awq));
    CHECK(contains(config_error_of([&] { (void)sm::apply_engine_quantization(awq, std::string("fp8"), std::nullopt); }),
                   "does not match"));
    // Online fp8 of a bf16 checkpoint: Llama-3.1-8B linear weights at 1 B + one fp32 scale per layer (7 · 32),
    // embeddings in bf16: 6,979,321,856 + 896 + 2,101,346,304 = 9,080,669,056.
    const auto fp8 = sm::apply_engine_quantization(sm::load_preset("Llama-3.1-8B"), std::string("fp8"), std::nullopt);
    CHECK(sm::weight_bytes_total(fp8) == 9'080'669'056);
    CHECK(contains(config_error_of([] {
                       (void)sm::apply_engine_quantization(sm::load_preset("Llama-3.1-8B"), std::string("awq"), std::nullopt);
                   }),
                   "needs a checkpoint quantized with it"));
    CHECK(contains(config_error_of([] {
                       (void)sm::apply_engine_quantization(sm::load_preset("Llama-3.1-8B"), std::string("gguf"), std::nullopt);
                   }),
                   "--quantization: 'gguf' is not modelled"));
    // --dtype float32 doubles the unquantized bytes: 8,030,261,248 params · 4.
    const auto f32 = sm::apply_engine_quantization(sm::load_preset("Llama-3.1-8B"), std::nullopt, std::string("float32"));
    CHECK(sm::weight_bytes_total(f32) == 2 * sm::weight_bytes_total(sm::load_preset("Llama-3.1-8B")));
    CHECK(contains(config_error_of([] {
                       (void)sm::apply_engine_quantization(sm::load_preset("Llama-3.1-8B"), std::nullopt, std::string("fp8"));
                   }),
                   "--dtype"));
}

TEST_CASE("Ignore lists: exact names, re: regexes, and routed experts named by any one expert", "[models][quant]") {
    // compressed-tensors ignore "re:.*self_attn.*" keeps attention bf16: Llama-3.1-8B fp8 per-channel, MLPs only:
    // 32 · (3 · 58,720,256 + 4 · (14336 + 14336 + 4096)) = 32 · 176,291,840 = 5,641,338,880 B fp8, attention
    // 32 · 41,943,040 · 2 = 2,684,354,560 B, embeddings 2,101,346,304. Total 10,427,039,744.
    const auto ct = llama8_with(R"({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*self_attn.*"],
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})");
    CHECK(sm::weight_bytes_total(ct) == 10'427'039'744);
    // fp8 (exact names): an entry for one expert of layer 0 skips that layer's fused experts (vLLM is_layer_skipped),
    // a parent name alone ("model.layers.1") skips nothing.
    sm::ModelSpec moe = sm::load_preset("Qwen3-235B-A22B");
    YAML::Node qc = YAML::Load(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
        "ignored_layers": ["model.layers.0.mlp.experts.7.down_proj", "model.layers.1"]})");
    moe.quantization = sm::parse_quantization_config(servesim::YamlMap(qc, "t.json", "q"), moe.dtype);
    int unquantized_experts = 0;
    for (const auto& m : sm::linear_modules(moe)) {
        if (m.role == sm::LinearRole::kExpert && m.scheme == nullptr) {
            ++unquantized_experts;
            CHECK(m.name.rfind("model.layers.0.mlp.experts.", 0) == 0);
        }
    }
    CHECK(unquantized_experts == 2);  // gate_up_proj and down_proj of layer 0
}

TEST_CASE("A ModelOpt checkpoint's hf_quant_config.json beside config.json is read (NVFP4)", "[models][quant]") {
    // vLLM reads hf_quant_config.json when config.json has no quantization_config. Same bytes as the NVFP4 case
    // above: 6,027,216,640.
    const auto spec = sm::read_hf_config(fixture("quant/Llama-3.1-8B-Instruct-FP4/config.json"));
    REQUIRE(spec.quantization);
    CHECK(spec.quantization->method == "modelopt_fp4");
    CHECK(sm::weight_bytes_total(spec) == 6'027'216'640);
    CHECK(spec.name == "Llama-3.1-8B-Instruct-FP4");
}

TEST_CASE("compression_config and sparse compressed-tensors checkpoints are refused, not read as bf16", "[models][quant]") {
    YAML::Node n = YAML::LoadFile(fixture("Llama-3.1-8B.json"));
    n["compression_config"] = YAML::Load("{quant_method: compressed-tensors}");
    CHECK(contains(config_error_of([&] { (void)sm::model_from_hf_config(n, "x", "c.json"); }), "compression_config"));
    CHECK(contains(config_error_of([] {
                       (void)llama8_with(R"({"quant_method": "compressed-tensors", "sparsity_config": {"format":
                           "sparse-24-bitmask"}, "config_groups": {"g": {"targets": ["Linear"], "weights":
                           {"num_bits": 8, "type": "float", "strategy": "channel"}}}})");
                   }),
                   "quantization_config.sparsity_config"));
}
