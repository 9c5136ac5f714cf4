// Quantized models through the engine: `servesim inspect` on the FP8 Llama-3.1-405B config at TP 8 on H100 (the
// memory plan with the scheme's weights), --quantization / --dtype as engine keys and flags, and the profile cost
// model refusing a quantized model (docs/QUANTIZATION.md).
#include <string>

#include <nlohmann/json.hpp>

#include "calibration/gpu_spec.h"
#include "common/yaml_reader.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"
#include "tools/app/engine_keys.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

using test::contains;
using test::run_servesim;

const std::string kFp8_405b = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/quant/Llama-3.1-405B-Instruct-FP8.json";

TEST_CASE("inspect: FP8 Llama-3.1-405B at TP 8 on H100 holds 381.96 GiB of weights and fits", "[tools][quant]") {
    // All ranks: 410,131,418,568 B (tests/models/quantization_test.cpp works it out); one rank 1/8 of it,
    // 51,266,427,321 B = 47.75 GiB. H100-SXM: 0.92 (vLLM 0.30's default utilisation) × 79.1 GiB = 72.77 GiB, so
    // 72.77 − 47.75 − activations − non-torch leaves about 22 GiB per GPU for KV: it fits. bf16 (756 GiB, 94.5 GiB
    // per rank) would not.
    const test::Ran r = run_servesim("inspect --model '" + kFp8_405b + "' --gpu H100 -tp 8 --format json");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["weight_bytes_all_ranks"].get<std::int64_t>() == 410'131'418'568);
    CHECK(j["weight_bytes"].get<std::int64_t>() == 410'131'418'568 / 8);
    CHECK(j["quantization"] == "fbgemm_fp8");
    CHECK(j["kv_cache_memory_bytes"].get<std::int64_t>() > 20LL * 1024 * 1024 * 1024);
    CHECK(j["num_gpu_blocks"].get<std::int64_t>() > 0);
    const test::Ran table = run_servesim("inspect --model '" + kFp8_405b + "' --gpu H100 -tp 8");
    CHECK(contains(table.output, "weights, all ranks                381.96 GiB (fbgemm_fp8"));
}

TEST_CASE("--quantization / --dtype are engine keys and flags; a mismatch names the flag", "[tools][quant]") {
    YAML::Node n = YAML::Load("{quantization: fp8, dtype: float16}");
    const EngineSettings e = parse_engine_settings(YamlMap(n, "s.yaml", "engine"));
    CHECK(e.quantization == std::optional<std::string>("fp8"));
    CHECK(e.dtype == std::optional<std::string>("float16"));
    // Online fp8 on the Llama-3.1-8B preset: 9,080,669,056 B (tests/models/quantization_test.cpp).
    CHECK(models::weight_bytes_total(resolve_engine_model("Llama-3.1-8B", e)) == 9'080'669'056);
    YAML::Node bad = YAML::Load("{quantization: gguf}");
    try {
        (void)parse_engine_settings(YamlMap(bad, "s.yaml", "engine"));
        FAIL("no ConfigError");
    } catch (const ConfigError& err) {
        CHECK(contains(err.what(), "engine.quantization"));
        CHECK(contains(err.what(), "'gguf' is not modelled"));
    }
    const test::Ran r = run_servesim("inspect --model '" + kFp8_405b + "' --gpu H100 -tp 8 --quantization awq");
    CHECK(r.status != 0);
    CHECK(contains(r.output, "--quantization: quantization method specified in the model config (fbgemm_fp8"));
}

TEST_CASE("A calibrated profile costs only the linear layers it measured: bf16 with bf16, fp8 W8A8 with fp8 "
          "(calibration run 13); every other pairing is refused by name",
          "[tools][quant]") {
    const auto prepare = [](const std::string& quantization, const std::string& profile) {
        ExperimentConfig x;
        x.file = "s.yaml";
        x.name = "q";
        x.model = "Llama-3.1-8B";
        x.gpu = "H200";
        if (!quantization.empty()) {
            x.engine.quantization = quantization;
        }
        x.cost_model = "calibration/profiles/h200/" + profile;
        x.workload = YAML::Load("{type: synthetic}");
        try {
            (void)prepare_experiment(x);
        } catch (const ConfigError& err) {
            return std::string(err.what());
        }
        return std::string("accepted");
    };
    // Online fp8 (per-tensor W8A8) on the fp8 profile, bf16 on the bf16 one: accepted.
    CHECK(prepare("fp8", "Llama-3.1-8B-fp8.yaml") == "accepted");
    CHECK(prepare("", "Llama-3.1-8B.yaml") == "accepted");
    // fp8 weights on bf16 curves, bf16 weights on fp8 curves: refused, naming both.
    const std::string a = prepare("fp8", "Llama-3.1-8B.yaml");
    CHECK(contains(a, "holds bf16 GEMM curves but the model's linear layers are fp8"));
    CHECK(contains(a, "cost_model: roofline"));
    CHECK(contains(prepare("", "Llama-3.1-8B-fp8.yaml"), "holds fp8 GEMM curves but the model's linear layers are bf16"));
    // Block-wise fp8 runs another kernel than the per-tensor one: refused on the per-tensor curves, accepted on the
    // block-scaled ones (calibration run 14), and the other way round.
    CHECK(contains(prepare("fp8_per_block", "Llama-3.1-8B-fp8.yaml"),
                   "holds fp8 GEMM curves but the model's linear layers are fp8-block"));
    CHECK(prepare("fp8_per_block", "Llama-3.1-8B-fp8-block.yaml") == "accepted");
    CHECK(contains(prepare("fp8", "Llama-3.1-8B-fp8-block.yaml"),
                   "holds fp8-block GEMM curves but the model's linear layers are fp8"));
}

TEST_CASE("The published Qwen3-8B-FP8 checkpoint (128x128 blocks, lm_head kept) runs on the block-scaled profile",
          "[tools][quant]") {
    ExperimentConfig x;
    x.file = "s.yaml";
    x.name = "qwen3-fp8";
    x.model = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/quant/Qwen3-8B-FP8.json";
    x.gpu = "H200";
    x.workload = YAML::Load("{type: synthetic}");
    x.cost_model = "calibration/profiles/h200/Qwen3-8B-fp8-block.yaml";
    const PreparedExperiment p = prepare_experiment(x);
    INFO(p.cost_model->describe());
    CHECK(contains(p.cost_model->describe(), "Qwen3-8B-fp8-block.yaml"));
    // One decoding sequence: the step's GEMMs are the block-scaled gemm curve at one token, its first piece
    // 3.808376678 + 0.004285918339·1 − 1.463633883e-05·1² = 3.81264796 ms (against 2.99 ms per-tensor, run 14's pair).
    engine::BatchShape one;
    one.num_tokens = 1;
    one.num_decode_seqs = 1;
    one.decode_context_tokens = 1000;
    one.num_sampled_seqs = 1;
    one.num_seqs = 1;
    CHECK_THAT(p.cost_model->step_cost(one).gemm_ms, Catch::Matchers::WithinRel(3.81264796, 1e-8));
    x.cost_model = "calibration/profiles/h200/Qwen3-8B-fp8.yaml";
    try {
        (void)prepare_experiment(x);
        FAIL("the per-tensor profile must refuse a block-wise checkpoint");
    } catch (const ConfigError& err) {
        CHECK(contains(err.what(), "holds fp8 GEMM curves but the model's linear layers are fp8"));
    }
}

}  // namespace
}  // namespace servesim::app

namespace servesim::app {
namespace {

TEST_CASE("NVFP4 W4A4 runs fp4 GEMMs on B200 (2 x its fp8 rate) and the Marlin fallback on H200", "[tools][quant]") {
    ExperimentConfig x;
    x.file = "s.yaml";
    x.name = "nvfp4";
    x.model = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/quant/Llama-3.1-8B-Instruct-FP4/config.json";
    x.workload = YAML::Load("{type: synthetic}");
    x.gpu = "B200";
    const PreparedExperiment b200 = prepare_experiment(x);
    INFO(b200.cost_model->describe());
    CHECK(contains(b200.cost_model->describe(), "modelopt_fp4, fp4 GEMMs at 9000 TFLOP/s"));
    x.gpu = "H200";
    const PreparedExperiment h200 = prepare_experiment(x);
    CHECK(contains(h200.cost_model->describe(), "fp4 weights via NVFP4 Marlin (bf16 math)"));
}

}  // namespace
}  // namespace servesim::app
