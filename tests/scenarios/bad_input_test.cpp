// Bad scenarios stop with one clear ConfigError naming the file, the line and the key, before anything is simulated
// (docs/ARCHITECTURE.md, "Invariants" and "Formats"): malformed YAML, unknown keys (listing the allowed ones), wrong
// types, negative rates, block sizes vLLM rejects, a utilisation above 1, unknown models and GPUs (listing the known
// ones), and a max_model_len whose single request does not fit in the KV cache.
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/scenarios/scenario_error_util.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

const char* kWorkload = "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n";

// The ConfigError `text` gives as the file "bad.yaml" (tests/scenarios/scenario_error_util.h).
std::string error_of(const std::string& text) { return testing::scenario_error(text, "bad.yaml"); }

void check_names(const std::string& message, const std::string& location, const std::string& key) {
    INFO(message);
    CHECK(message.find(location) != std::string::npos);
    CHECK(message.find(key) != std::string::npos);
}

TEST_CASE("Bad input: malformed YAML names the file and line", "[scenarios][errors]") {
    const std::string m = error_of("name: x\nmodel: Qwen3-4B\nworkload: {type: synthetic, rate: 1\n  prompt: [10\n");
    check_names(m, "bad.yaml:", "malformed");
}

TEST_CASE("Bad input: an unknown key lists the allowed keys", "[scenarios][errors]") {
    const std::string m = error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  blok_size: 16\n") + kWorkload);
    check_names(m, "bad.yaml:4", "'engine.blok_size'");
    CHECK(m.find("block_size") != std::string::npos);
    CHECK(m.find("max_num_seqs") != std::string::npos);
    const std::string top = error_of(std::string("name: x\nmodel: Qwen3-4B\nreplica: 2\n") + kWorkload);
    check_names(top, "bad.yaml:3", "'replica'");
    CHECK(top.find("cluster") != std::string::npos);
}

TEST_CASE("Bad input: wrong types", "[scenarios][errors]") {
    check_names(error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  max_num_seqs: many\n") + kWorkload),
                "bad.yaml:4", "'engine.max_num_seqs'");
    check_names(
        error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  enable_prefix_caching: perhaps\n") + kWorkload),
        "bad.yaml:4", "'engine.enable_prefix_caching'");
    check_names(error_of("name: x\nmodel: Qwen3-4B\nworkload: [1, 2]\n"), "bad.yaml:3", "workload");
}

TEST_CASE("Bad input: negative rates", "[scenarios][errors]") {
    check_names(error_of("name: x\nmodel: Qwen3-4B\nworkload:\n  type: synthetic\n  rate: -2\n  prompt_tokens: 10\n"
                         "  output_tokens: 1\n  num_requests: 1\n"),
                "bad.yaml:5", "'workload.rate'");
}

TEST_CASE("Bad input: block sizes vLLM rejects (not a positive multiple of 16)", "[scenarios][errors]") {
    for (const char* b : {"24", "0", "-16", "8"}) {
        INFO("block_size " << b);
        check_names(error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  block_size: ") + b + "\n" + kWorkload),
                    "bad.yaml:4", "'engine.block_size'");
    }
}

TEST_CASE("Bad input: a KV-cache dtype vLLM has but servesim does not model lists the modelled ones",
          "[scenarios][errors]") {
    const std::string m =
        error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  kv_cache_dtype: nvfp4\n") + kWorkload);
    CHECK(m == "bad.yaml:4: 'engine.kv_cache_dtype': 'nvfp4' is a vLLM KV-cache dtype that servesim does not model; "
               "allowed: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2");
}

TEST_CASE("Bad input: sizes and token counts take the command line's forms and refuse others",
          "[scenarios][errors]") {
    const std::string unit =
        error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  kv_cache_memory_bytes: 12 gigs\n") + kWorkload);
    check_names(unit, "bad.yaml:4", "'engine.kv_cache_memory_bytes'");
    CHECK(unit.find("12GiB, 512MiB, 12GB, 512MB, or vLLM's 12G") != std::string::npos);
    // vLLM's human_readable_int refuses decimals with a binary suffix; so does the scenario reader.
    const std::string dec =
        error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  max_model_len: 1.5K\n") + kWorkload);
    CHECK(dec == "bad.yaml:4: 'engine.max_model_len': '1.5K': decimals are not allowed with binary suffixes like K "
                 "(as in vLLM); did you mean 1.5k?");
}

TEST_CASE("Bad input: gpu_memory_utilization outside (0, 1]", "[scenarios][errors]") {
    check_names(
        error_of(std::string("name: x\nmodel: Qwen3-4B\nengine:\n  gpu_memory_utilization: 1.5\n") + kWorkload),
        "bad.yaml:4", "'engine.gpu_memory_utilization'");
}

TEST_CASE("Bad input: an unknown model lists the known presets", "[scenarios][errors]") {
    const std::string m = error_of(std::string("name: x\nmodel: Qwen9-4B\n") + kWorkload);
    check_names(m, "bad.yaml:2", "'model'");
    CHECK(m.find("Qwen3-4B") != std::string::npos);
    CHECK(m.find("Qwen3.5-4B") != std::string::npos);
}

TEST_CASE("Bad input: an unknown GPU lists the known ones", "[scenarios][errors]") {
    const std::string m = error_of(std::string("name: x\nmodel: Qwen3-4B\ngpu: H900\n") + kWorkload);
    check_names(m, "bad.yaml:3", "'gpu'");
    CHECK(m.find("H200") != std::string::npos);
    CHECK(m.find("RTX 3090") != std::string::npos);
}

TEST_CASE("Bad input: a max_model_len whose one request does not fit the KV cache", "[scenarios][errors]") {
    // Qwen3-4B (144 KiB of KV per token) on an RTX 3090 at 45 % utilisation: ~2.2 GiB of KV cache, while one
    // 40,960-token request needs 5.6 GiB (vLLM _check_enough_kv_cache_memory).
    const std::string explicit_len = error_of(std::string("name: x\nmodel: Qwen3-4B\ngpu: RTX 3090\nengine:\n"
                                                          "  gpu_memory_utilization: 0.45\n  max_model_len: 40960\n") +
                                              kWorkload);
    check_names(explicit_len, "bad.yaml:6", "'engine.max_model_len'");
    CHECK(explicit_len.find("estimated maximum model length") != std::string::npos);
}

TEST_CASE("Bad input: chunked prefill off with a budget below max_model_len is refused at start-up as vLLM does",
          "[scenarios][errors]") {
    // vLLM SchedulerConfig.verify_max_model_len: without chunked prefill a 5,000-token prompt could never be
    // scheduled under a 2,048-token budget. The message names both keys and both values.
    const std::string m = error_of(std::string("name: x\nmodel: Qwen3-4B\ngpu: H100\nengine:\n"
                                               "  enable_chunked_prefill: false\n  max_num_batched_tokens: 2048\n"
                                               "  max_model_len: 8192\n") +
                                   kWorkload);
    check_names(m, "bad.yaml", "engine.max_num_batched_tokens (2048)");
    CHECK(m.find("engine.max_model_len (8192)") != std::string::npos);
    CHECK(m.find("enable_chunked_prefill") != std::string::npos);
}

TEST_CASE("Bad input: a bad sweep point stops the sweep before its first simulation", "[scenarios][errors]") {
    // Point 1 (block 16) is fine, point 2 (block 24) is not: run_experiments prepares every point first.
    const std::string m = error_of(std::string("name: x\nmodel: Qwen3-4B\n") + kWorkload +
                                   "sweep:\n  engine.block_size: [16, 24]\n");
    check_names(m, "bad.yaml", "block_size");
}

}  // namespace
}  // namespace servesim::app
