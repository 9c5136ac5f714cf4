// The engine key table (tools/app/engine_keys.h): one parser per value kind, the same forms in a scenario file and on
// the command line, vLLM's number forms (vllm/utils/argparse_utils.py human_readable_int) and its flag spellings.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/command_line.h"
#include "tools/app/engine_keys.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

std::int64_t tokens(const std::string& text) {
    return std::get<std::int64_t>(parse_value(find_engine_key("max_model_len")->spec, text));
}

std::int64_t bytes(const std::string& text) {
    return std::get<std::int64_t>(parse_value(find_engine_key("kv_cache_memory_bytes")->spec, text));
}

TEST_CASE("Engine keys: every key with a vLLM flag is found by both names", "[tools][engine_keys]") {
    int with_flag = 0;
    for (const auto& k : engine_keys()) {
        CHECK(find_engine_key(k.key) == &k);
        if (!k.flag.empty()) {
            ++with_flag;
            CHECK(find_engine_flag(k.flag) == &k);
            // vLLM's flag is the key with dashes (EngineArgs derives one from the other).
            std::string derived = "--" + std::string(k.key);
            std::replace(derived.begin(), derived.end(), '_', '-');
            CHECK(k.flag == derived);
        }
    }
    // Without a vLLM flag: kv_offloading_load_us_per_token, expert_load_imbalance, the three hybrid_* policy keys
    // and the four host_* keys (servesim's), offload_prompt_only (vLLM's connector takes it in
    // --kv-transfer-config's kv_connector_extra_config, not as a flag of its own), and servesim's three
    // speculative_* inputs beside --speculative-config (acceptance rates or mean length, ngram host time), and
    // triton_jit_compile_ms (servesim's: the compile a fused-MoE step waits for).
    CHECK(with_flag == static_cast<int>(engine_keys().size()) - 14);
    CHECK(find_engine_key("speculative_acceptance")->flag.empty());
    CHECK(find_engine_key("speculative_config")->flag == "--speculative-config");
    CHECK(find_engine_key("expert_load_imbalance")->flag.empty());
    CHECK(find_engine_key("hybrid_cache_policy")->flag.empty());
    CHECK(find_engine_key("offload_prompt_only")->flag.empty());
    CHECK(find_engine_key("kv_offloading_load_us_per_token")->flag.empty());
}

TEST_CASE("Engine keys: token counts take vLLM's human-readable forms", "[tools][engine_keys]") {
    CHECK(tokens("16384") == 16384);
    CHECK(tokens("16k") == 16000);      // decimal k = 1,000
    CHECK(tokens("16K") == 16384);      // binary K = 1,024
    CHECK(tokens("25.6k") == 25600);
    CHECK(tokens("1m") == 1000000);
    CHECK(tokens("1e5") == 100000);
    const std::string dec = message_of([] { (void)tokens("1.5K"); });
    CHECK(dec.find("decimals are not allowed with binary suffixes like K") != std::string::npos);
    CHECK(dec.find("1.5k") != std::string::npos);
    // vLLM's --max-model-len also takes -1 / auto (fit the KV memory), which servesim does not model.
    CHECK(message_of([] { (void)tokens("auto"); }) ==
          "'auto' (vLLM: the longest length that fits the KV memory) is not modelled; give a number of tokens such "
          "as 32768 or 32k");
    CHECK(message_of([] { (void)tokens("-1"); }).starts_with("'-1' (vLLM: the longest length"));
    const ValueSpec& threshold = find_engine_key("long_prefill_token_threshold")->spec;
    CHECK(message_of([&] { (void)parse_value(threshold, "-1"); }) == "-1 is out of range; allowed: 0 to 1073741824");
    CHECK(message_of([] { (void)tokens("0"); }) == "0 is out of range; allowed: 1 to 1073741824");
}

TEST_CASE("Engine keys: sizes take the same units everywhere", "[tools][engine_keys]") {
    CHECK(bytes("12GiB") == 12LL << 30);
    CHECK(bytes("12 GiB") == 12LL << 30);
    CHECK(bytes("12G") == 12LL << 30);          // vLLM: G is binary
    CHECK(bytes("12g") == 12'000'000'000LL);    // vLLM: g is decimal
    CHECK(bytes("12GB") == 12'000'000'000LL);
    CHECK(bytes("512MiB") == 512LL << 20);
    CHECK(bytes("1.5GiB") == 3LL << 29);
    CHECK(bytes("12884901888") == 12LL << 30);
    // A plain number is bytes (vLLM's --kv-cache-memory-bytes); below a MiB it is a forgotten unit, refused with
    // the likely meaning. With an explicit unit it is taken as written.
    CHECK(message_of([] { (void)bytes("12"); }) ==
          "'12' is 12 bytes (a plain number is bytes, as in vLLM), too small to hold one KV block; did you mean "
          "12GiB?");
    CHECK(bytes("1048576") == 1LL << 20);
    CHECK(bytes("100B") == 100);
    const std::string m = message_of([] { (void)bytes("12 gigs"); });
    CHECK(m.find("expected a size") != std::string::npos);
    // --kv-offloading-size is in GiB as vLLM means it: 60 is 60 GiB, and 64GB is 59.6 GiB.
    const ValueSpec& gib = find_engine_key("kv_offloading_size")->spec;
    CHECK(std::get<double>(parse_value(gib, "60")) == 60.0);
    CHECK(std::get<double>(parse_value(gib, "60GiB")) == 60.0);
    CHECK(std::abs(std::get<double>(parse_value(gib, "64GB")) - 64e9 / (1LL << 30)) < 1e-12);
    CHECK(message_of([&] { (void)parse_value(gib, "0"); }) == "0 is out of range; allowed: (0, 1000000000]");
}

TEST_CASE("Engine keys: KV-cache dtypes vLLM has but servesim does not model are refused by name",
          "[tools][engine_keys]") {
    const ValueSpec& dtype = find_engine_key("kv_cache_dtype")->spec;
    for (const char* ok : {"auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"}) {
        CHECK(std::get<std::string>(parse_value(dtype, ok)) == ok);
    }
    CHECK(message_of([&] { (void)parse_value(dtype, "nvfp4"); }) ==
          "'nvfp4' is a vLLM KV-cache dtype that servesim does not model; allowed: auto, bfloat16, float16, fp8, "
          "fp8_e4m3, fp8_e5m2");
    CHECK(message_of([&] { (void)parse_value(dtype, "int4"); }) ==
          "'int4' is not a KV-cache dtype; allowed: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2");
}

TEST_CASE("Engine keys: vLLM's all2all backends, the unmodelled ones refused by name", "[tools][engine_keys]") {
    const ValueSpec& b = find_engine_key("all2all_backend")->spec;
    CHECK(find_engine_flag("--all2all-backend") == find_engine_key("all2all_backend"));
    for (const char* ok : {"allgather_reducescatter", "naive", "pplx", "deepep_high_throughput", "deepep_low_latency",
                           "flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided"}) {
        CHECK(std::get<std::string>(parse_value(b, ok)) == ok);
    }
    CHECK(std::get<std::string>(parse_value(b, "flashinfer_all2allv")) == "flashinfer_nvlink_two_sided");
    const std::string allowed = "allowed: allgather_reducescatter, naive, pplx, deepep_high_throughput, "
                                "deepep_low_latency, flashinfer_nvlink_two_sided, flashinfer_nvlink_one_sided";
    CHECK(message_of([&] { (void)parse_value(b, "mori_low_latency"); }) ==
          "'mori_low_latency' is a vLLM all2all backend that servesim does not model; " + allowed);
    CHECK(message_of([&] { (void)parse_value(b, "nccl"); }) == "'nccl' is not an all2all backend; " + allowed);
    // The same code reads the scenario key and the flag.
    const EngineFlags f = take_engine_flags({"--all2all-backend", "pplx", "--disable-custom-all-reduce"});
    REQUIRE(f.overrides.size() == 2);
    CHECK(f.overrides[0].path == "engine.all2all_backend");
    CHECK(f.overrides[1].path == "engine.disable_custom_all_reduce");
    const EngineSettings s =
        parse_engine_settings(YamlMap(YAML::Load("{all2all_backend: deepep_low_latency}"), "x.yaml", "engine"));
    CHECK(s.all2all_backend == "deepep_low_latency");
    CHECK(message_of([] {
              (void)parse_engine_settings(YamlMap(YAML::Load("{all2all_backend: mori_high_throughput}"), "x.yaml",
                                                  "engine"));
          }).find("'mori_high_throughput' is a vLLM all2all backend that servesim does not model") != std::string::npos);
}

TEST_CASE("Engine keys: block size keeps the attention backend's multiple of 16", "[tools][engine_keys]") {
    const ValueSpec& b = find_engine_key("block_size")->spec;
    CHECK(std::get<std::int64_t>(parse_value(b, "32")) == 32);
    CHECK(message_of([&] { (void)parse_value(b, "24"); }) ==
          "24 is not supported by the attention backend; allowed: a positive multiple of 16 (16, 32, 64, …)");
    CHECK(message_of([&] { (void)parse_value(b, "0"); }).find("multiple of 16") != std::string::npos);
}

TEST_CASE("Engine flags: vLLM's spellings become engine overrides", "[tools][engine_keys]") {
    const EngineFlags f = take_engine_flags({"scen.yaml", "-tp", "2", "--no-enable-prefix-caching", "--max_num_seqs=64",
                                             "--kv-offloading-size", "60", "-dp", "4", "--enable-chunked-prefill",
                                             "--format", "json", "--max-model-len=16k", "--kv-cache-dtype", "fp8"});
    CHECK(f.rest == std::vector<std::string>{"scen.yaml", "--format", "json"});
    std::vector<std::string> got;
    for (const auto& o : f.overrides) {
        got.push_back(o.path + "=" + o.value.Scalar() + " (" + o.origin + ")");
    }
    CHECK(got == std::vector<std::string>{"engine.tensor_parallel_size=2 (--tensor-parallel-size)",
                                          "engine.enable_prefix_caching=false (--no-enable-prefix-caching)",
                                          "engine.max_num_seqs=64 (--max-num-seqs)",
                                          "engine.kv_offloading_size=60 (--kv-offloading-size)",
                                          "cluster.replicas=4 (--data-parallel-size)",
                                          "engine.enable_chunked_prefill=true (--enable-chunked-prefill)",
                                          "engine.max_model_len=16k (--max-model-len)",
                                          "engine.kv_cache_dtype=fp8 (--kv-cache-dtype)"});
}

TEST_CASE("Engine flags: a bad value names the flag as the user typed it", "[tools][engine_keys]") {
    CHECK(message_of([] { (void)take_engine_flags({"--max-num-seqs", "0"}); }) ==
          "command line: --max-num-seqs: 0 is out of range; allowed: 1 to 16777216");
    CHECK(message_of([] { (void)take_engine_flags({"--gpu-memory-utilization", "1.2"}); }) ==
          "command line: --gpu-memory-utilization: 1.2 is out of range; allowed: (0, 1]");
    CHECK(message_of([] { (void)take_engine_flags({"--enable-prefix-caching=false"}); }) ==
          "command line: --enable-prefix-caching: takes no value; use --enable-prefix-caching or "
          "--no-enable-prefix-caching");
    CHECK(message_of([] { (void)take_engine_flags({"--block-size"}); }) ==
          "command line: --block-size: expects a value: a whole number");
    CHECK(message_of([] { (void)take_engine_flags({"-dp", "0"}); }) ==
          "command line: --data-parallel-size: 0 is out of range; allowed: 1 to 1024");
    CHECK(message_of([] { (void)take_engine_flags({"--vllm-version", "0.9"}); }).starts_with(
        "command line: --vllm-version: vLLM 0.9 is outside the releases whose rules servesim models"));
}

TEST_CASE("Engine keys: a scenario reads the same forms as the flags", "[tools][engine_keys]") {
    const YAML::Node engine = YAML::Load("{kv_cache_memory_bytes: 12G, max_model_len: 16K, max_num_batched_tokens: 8k,"
                                         " kv_cache_dtype: fp8_e4m3, enable_prefix_caching: ~}");
    const EngineSettings s = parse_engine_settings(YamlMap(engine, "x.yaml", "engine"));
    CHECK(s.kv_cache_memory_bytes == 12LL << 30);
    CHECK(s.max_model_len == 16384);
    CHECK(s.max_num_batched_tokens == 8000);
    CHECK(s.kv_cache_dtype_fp8);
    CHECK(!s.enable_prefix_caching.has_value());  // ~ leaves vLLM's default
    const YAML::Node bad = YAML::Load("{max_num_seqs: 0}");
    CHECK(message_of([&] { (void)parse_engine_settings(YamlMap(bad, "x.yaml", "engine")); }) ==
          "x.yaml:1: 'engine.max_num_seqs': 0 is out of range; allowed: 1 to 16777216");
}

}  // namespace
}  // namespace servesim::app
