// Every duration, rate and size a scenario gives is checked against its documented range (docs/INPUT-RANGES.md)
// when the scenario is read: a value that would overflow the simulated clock (int64 ns, ±9.22e9 s) or ask for more
// memory than the hardware can hold (a KV pool beyond 16 × the GPU's memory) is refused naming file, line and key.
// It used to run with rc 0 and print zeros (max_time=1e10), behave as another value (rate=1e-300 as inf,
// think_time=9.3e9 as 0) or abort (bad_alloc).
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/scenarios/scenario_error_util.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

const std::string kHead = "model: Qwen3-4B\n";
const std::string kSynthetic =
    "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n";

// The ConfigError `text` gives as the file "r.yaml" (tests/scenarios/scenario_error_util.h).
std::string error_of(const std::string& text) { return testing::scenario_error(text, "r.yaml"); }

bool has(const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; }

TEST_CASE("Durations beyond 1e9 s are refused naming the key", "[scenarios][ranges]") {
    // 1e10 s = 1e19 ns, beyond int64 (9.22e18): it used to wrap and simulate nothing with rc 0.
    const std::string max_time = error_of(kHead + kSynthetic + "max_time: 1e10\n");
    INFO(max_time);
    CHECK(has(max_time, "r.yaml:3: 'max_time': duration '1e10' is beyond the simulated clock's range; allowed: 0 "
                        "to 1e+09 s"));
    const std::string warmup = error_of(kHead + kSynthetic + "warmup: 1e10\n");
    CHECK(has(warmup, "r.yaml:3: 'warmup': duration '1e10'"));
    const std::string duration = error_of(
        kHead + "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, duration: 1e300h}\n");
    CHECK(has(duration, "'workload.duration': duration '1e300h' is beyond"));
    // think_time 9.3e9 s used to behave as 0.
    const std::string think = error_of(
        kHead + "workload: {type: tenants, tenants: 1, system_prompt_tokens: 10, turns_per_dialogue: 1,\n"
                "  user_tokens: {dist: fixed, value: 10}, answer_tokens: {dist: fixed, value: 1},\n"
                "  think_time: 9.3e9, arrival: closed_loop, num_requests: 1}\n");
    CHECK(has(think, "'workload.think_time': duration '9.3e9' is beyond"));
    // 1e9 s itself (16,666,666.7 min) is inside.
    CHECK(load_scenario_text(kHead + kSynthetic + "max_time: 16666666min\n", "r.yaml", {}, {}).experiments.size() ==
          1);
}

TEST_CASE("Rates outside [1e-6, 1e9] per second are refused naming the key", "[scenarios][ranges]") {
    // rate 1e-300: the exponential gap 1/rate = 1e300 s used to wrap to a negative clock and send everything at
    // once (as rate inf).
    const std::string slow = error_of(
        kHead + "workload: {type: synthetic, rate: 1e-300, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n");
    INFO(slow);
    CHECK(has(slow, "'workload.rate': 1e-300 requests per second is outside the simulated clock's range; allowed: "
                    "1e-06"));
    const std::string fast = error_of(
        kHead + "workload: {type: synthetic, rate: 1e10, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n");
    CHECK(has(fast, "'workload.rate': 1e+10 requests per second"));
    // bench_serve: 400 prompts at 1e-6/s span 4e8 s (inside); 4000 span 4e9 s (beyond the clock's 1e9).
    const std::string bench = "workload: {type: bench_serve, request_rate: 1e-6, num_prompts: ";
    CHECK(load_scenario_text(kHead + bench + "400}\n", "r.yaml", {}, {}).experiments.size() == 1);
    const std::string span = error_of(kHead + bench + "4000}\n");
    CHECK(has(span, "'workload.request_rate': 4000 prompts at 1e-06 requests per second span 4e+09 s"));
}

TEST_CASE("A negative integer reaches its key's own message", "[scenarios][ranges]") {
    // YamlMap::convert<int64> used to call -5 out of range for every signed key, so this message never fired.
    const std::string m = error_of(
        kHead + "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: -5}\n");
    INFO(m);
    CHECK(has(m, "'workload.num_requests': must be at least 1, got -5"));
    // An unsigned key still refuses it.
    CHECK(has(error_of(kHead + kSynthetic + "seed: -1\n"), "'seed': integer out of range: -1"));
}

TEST_CASE("kv_cache_memory_bytes beyond 16 x the GPU's memory is refused before allocating", "[scenarios][ranges]") {
    // 1e18 bytes used to allocate the block table of a 931-million-GiB pool (bad_alloc); the H200 holds
    // 150,109,880,320 bytes as cudaMemGetInfo reports them, so the what-if cap is 16 x that = 2,401,758,085,120.
    const std::string m = error_of(kHead + "engine: {kv_cache_memory_bytes: 1e18}\n" + kSynthetic);
    INFO(m);
    CHECK(has(m, "r.yaml:2: 'engine.kv_cache_memory_bytes': 1000000000000000000 bytes"));
    CHECK(has(m, "exceed 16 x the GPU's memory of 150109880320 bytes"));
    // 2.5e12 bytes is just over the cap (the seed study's 100 GiB what-if pool on a 24 GiB card is within it).
    CHECK(has(error_of(kHead + "engine: {kv_cache_memory_bytes: 2.5e12}\n" + kSynthetic), "exceed 16 x"));
}

TEST_CASE("A profile curve beyond the clock's range is refused naming the profile and curve", "[scenarios][ranges]") {
    // A gemm coefficient of 1e300 ms makes every step 1e300 ms; it used to be floored to 1 ns (TTFT 1e-6 ms). The
    // profile reader evaluates each piece at both ends of its range: piece 0 at x = 1 gives 1e300 + 0.0046 − 1.1e-5.
    const auto dir = std::filesystem::temp_directory_path() / "servesim-input-ranges";
    std::filesystem::create_directories(dir);
    const std::string profile = (dir / "gemm-1e300.yaml").string();
    {
        std::ifstream in(std::string(SERVESIM_TEST_DATA_DIR) + "/../calibration/profiles/h200/Qwen3-4B.yaml");
        REQUIRE(in);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::string first = "coefficients: [2.829143108,";
        const auto at = text.find(first);
        REQUIRE(at != std::string::npos);
        text.replace(at, first.size(), "coefficients: [1e300,");
        std::ofstream(profile) << text;
    }
    const std::string m = error_of(kHead + "gpu: H200\ncost_model: " + profile + "\n" + kSynthetic);
    INFO(m);
    CHECK(has(m, profile));
    CHECK(has(m, "'curves.gemm': piece 0: evaluates to 1e+300 ms at x = 1; allowed: a step term of at most 1e+12 ms"));
}

TEST_CASE("cluster.replicas beyond 1024 is refused before any replica is built", "[scenarios][ranges]") {
    // 100,000 replicas used to be accepted: 3.5 MB each, 350 GB before the first step.
    const std::string m = error_of(kHead + "cluster: {replicas: 100000}\n" + kSynthetic);
    INFO(m);
    CHECK(has(m, "r.yaml:2: 'cluster.replicas': value 100000 is out of range; allowed: 1 to 1024"));
}

TEST_CASE("A sweep beyond 10,000 points fails fast naming the sweep", "[scenarios][ranges]") {
    // 100 × 100 × 100 = 10^6 points: refused before the first point is expanded (it used to expand for minutes).
    std::string list = "[";
    for (int i = 1; i <= 100; ++i) {
        list += (i > 1 ? ", " : "") + std::to_string(i);
    }
    list += "]";
    const std::string text = kHead + kSynthetic + "sweep:\n  engine.max_num_seqs: " + list +
                             "\n  workload.num_requests: " + list + "\n  seed: " + list + "\n";
    const std::string m = error_of(text);
    INFO(m);
    CHECK(has(m, "r.yaml:4: 'sweep': 1000000 points (100 values of engine.max_num_seqs x 100 values of "
                 "workload.num_requests x 100 values of seed); allowed: at most 10000 per scenario"));
}

TEST_CASE("An order-only record beyond 2^24 tokens is refused before hashing", "[scenarios][ranges]") {
    // One Azure record of 10^9 prompt tokens: it used to be hashed into 62.5 million block ids (24 s, 3.9 GB).
    const auto dir = std::filesystem::temp_directory_path() / "servesim-input-ranges";
    std::filesystem::create_directories(dir);
    const std::string trace = (dir / "huge-record.csv").string();
    std::ofstream(trace) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1000000000,10\n";
    const std::string m = error_of("mode: order_only\nworkload: {type: trace, format: azure, trace: " + trace + "}\n");
    INFO(m);
    CHECK(has(m, trace + ":2: 'input tokens': 1000000000 tokens; allowed in order_only mode: up to 16777216"));
}

TEST_CASE("An empty key in a map merged across experiments is named, not dereferenced", "[scenarios][errors]") {
    // Found by fuzzing (tests/fuzz/corpus/scenario/crash-empty-key.yaml): merge_layers looked each key up with
    // layer[k], which does not find an empty key, and read the back of an empty list.
    const std::string m = error_of(kHead + "engine:\n  : 16384\nexperiments:\n  - {name: a, engine: {block_size: 16}}\n" +
                                   kSynthetic);
    INFO(m);
    // The key reads as "null" (yaml-cpp's text of a null key); no line, as a lookup by it finds nothing.
    CHECK(has(m, "r.yaml: 'engine.null': unknown key; allowed: max_num_seqs"));
}

TEST_CASE("A list used as a mapping key is refused naming file and line", "[scenarios][errors]") {
    // Found by fuzzing a profile (tests/fuzz/corpus/profile/crash-list-key.yaml): yaml-cpp's BadConversion escaped
    // every reader; load_yaml_string/load_yaml_file now check every key once.
    const std::string m = error_of(kHead + "engine: {[1, 2]: 16}\n" + kSynthetic);
    INFO(m);
    CHECK(has(m, "r.yaml:2: a mapping key must be a plain name, not a list or a mapping"));
}

TEST_CASE("Token counts past 1e9 are refused before prompt + output could overflow (replica admission)",
          "[scenarios][ranges][tokens]") {
    // sim/engine/replica.cpp adds prompt and output tokens to compare with max_model_len: prompt_tokens 9e18 +
    // output_tokens 9e18 overflowed int64 (UBSan), and the run ended with status ok and 0 of 40 requests finished.
    // 3,000,000,000 is past int32 too, and past the bound of 1e9 (common/token_range.h).
    const std::string prompt = error_of(kHead +
                                        "workload: {type: synthetic, rate: 1, prompt_tokens: 3000000000, "
                                        "output_tokens: 10, num_requests: 40}\n");
    INFO(prompt);
    CHECK(has(prompt, "r.yaml:2: 'workload.prompt_tokens': length 3000000000 tokens is out of range; allowed: 0 to "
                      "1000000000 tokens (docs/INPUT-RANGES.md)"));
    const std::string output = error_of(kHead +
                                        "workload: {type: synthetic, rate: 1, prompt_tokens: 10, num_requests: 40,\n"
                                        "  output_tokens: {dist: uniform, min: 1, max: 9000000000000000000}}\n");
    INFO(output);
    CHECK(has(output, "r.yaml:3: 'workload.output_tokens.max': 9000000000000000000 tokens is out of range; allowed: "
                      "1 to 1000000000 tokens"));
    const std::string mean = error_of(kHead +
                                      "workload: {type: synthetic, rate: 1, output_tokens: 10, num_requests: 40,\n"
                                      "  prompt_tokens: {dist: normal, mean: 1e19, std: 1, min: 1}}\n");
    CHECK(has(mean, "r.yaml:3: 'workload.prompt_tokens.mean': 1e+19 is out of range; allowed: 0 to 1000000000 tokens"));
    const std::string shared = error_of(kHead +
                                        "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 10,\n"
                                        "  shared_prefix_tokens: 5000000000, num_requests: 40}\n");
    CHECK(has(shared, "'workload.shared_prefix_tokens': 5000000000 tokens is out of range; allowed: 0 to 1000000000"));
}

TEST_CASE("Token counts past 1e9 are refused before a tenant's prompt sum could overflow (content runs)",
          "[scenarios][ranges][tokens]") {
    // sim/core/content.h sums a prompt's runs: a tenant's prompt holds shared + system + every earlier user message
    // and answer, so system_prompt_tokens 2^62 plus one answer overflowed int64 (UBSan). Within the bounds the sum
    // is at most 1e9 + 1e9 + 1e6 turns × (1e9 + 1e9) = 2.000002e15 tokens.
    const std::string tenants = "workload: {type: tenants, tenants: 1, turns_per_dialogue: 2, arrival: closed_loop,\n"
                                "  num_requests: 2, user_tokens: 10, answer_tokens: 10, ";
    const std::string system = error_of(kHead + tenants + "system_prompt_tokens: 4611686018427387904}\n");
    INFO(system);
    CHECK(has(system, "r.yaml:3: 'workload.system_prompt_tokens': length 4611686018427387904 tokens is out of range; "
                      "allowed: 0 to 1000000000 tokens"));
    const std::string user = error_of(kHead + "workload: {type: tenants, tenants: 1, turns_per_dialogue: 2,\n"
                                              "  arrival: closed_loop, num_requests: 2, system_prompt_tokens: 10,\n"
                                              "  answer_tokens: 10, user_tokens: {dist: fixed, value: 2000000000}}\n");
    CHECK(has(user, "r.yaml:4: 'workload.user_tokens.value': length 2000000000 tokens is out of range; allowed: 0 to "
                    "1000000000"));
    // A lognormal's mean exp(mu + sigma²/2) = exp(50.5) = 8.55e21 tokens.
    const std::string lognormal = error_of(kHead + tenants.substr(0, tenants.find("user_tokens")) +
                                           "user_tokens: 10, system_prompt_tokens: 10,\n"
                                           "  answer_tokens: {dist: lognormal, mu: 50, sigma: 1}}\n");
    INFO(lognormal);
    CHECK(has(lognormal, "'workload.answer_tokens.mu': mu 50 and sigma 1 give a mean of 8.54813e+21 tokens; "
                         "allowed: up to 1000000000 tokens"));
    const std::string shared = error_of(kHead + tenants + "system_prompt_tokens: 10, shared_prefix_tokens: -1}\n");
    CHECK(has(shared, "'workload.shared_prefix_tokens': -1 tokens is out of range; allowed: 0 to 1000000000"));
}

TEST_CASE("Token counts at the bound run and are rejected as too long, with the right sums",
          "[scenarios][ranges][tokens]") {
    // 1e9 + 1e9 = 2e9 > max_model_len 40,960 (Qwen3-4B's default): both requests are refused by the frontend,
    // and the warning adds them without overflow.
    const Scenario sc = load_scenario_text(
        kHead + "workload: {type: synthetic, rate: 1, prompt_tokens: 1000000000, output_tokens: 1000000000, "
                "num_requests: 2}\n",
        "r.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, {});
    REQUIRE(results.size() == 1);
    std::string warnings;
    for (const auto& w : results[0].warnings) {
        warnings += w + "\n";
    }
    INFO(warnings);
    CHECK(has(warnings, "2 of 2 requests rejected: 2 longer than max_model_len: prompt + output up to 1,000,000,000 + "
                        "1,000,000,000 = 2,000,000,000 > max_model_len 40,960"));
}

TEST_CASE("A workload that can draw an empty prompt is refused before the run", "[scenarios][ranges][tokens]") {
    // vLLM refuses an empty prompt; such requests were counted as "longer than max_model_len" with the impossible
    // sum "0 + 10 = 10 > max_model_len 40,960".
    const std::string synthetic = error_of(
        kHead + "workload: {type: synthetic, rate: 1, prompt_tokens: {dist: uniform, min: 0, max: 5},\n"
                "  output_tokens: 10, num_requests: 40}\n");
    INFO(synthetic);
    CHECK(has(synthetic, "r.yaml:2: 'workload.prompt_tokens': a prompt could be empty (shortest: shared_prefix_tokens "
                         "0 + prompt_tokens 0 = 0 tokens) and vLLM refuses an empty prompt; give one of them a "
                         "minimum of at least 1 token"));
    const std::string tenants = error_of(
        kHead + "workload: {type: tenants, tenants: 2, turns_per_dialogue: 2, arrival: closed_loop,\n"
                "  num_requests: 4, system_prompt_tokens: 0, user_tokens: {dist: exponential, mean: 20},\n"
                "  answer_tokens: 10}\n");
    INFO(tenants);
    CHECK(has(tenants, "'workload.user_tokens': a prompt could be empty (shortest: shared_prefix_tokens 0 + "
                       "system_prompt_tokens 0 + user_tokens 0 = 0 tokens)"));
    // One shared token is enough.
    CHECK(load_scenario_text(kHead + "workload: {type: synthetic, rate: 1, prompt_tokens: {dist: uniform, min: 0, "
                                     "max: 5}, shared_prefix_tokens: 1, output_tokens: 10, num_requests: 4}\n",
                             "r.yaml", {}, {})
              .experiments.size() == 1);
}

TEST_CASE("A repeated key and a second document in a scenario are refused by name", "[scenarios][errors]") {
    const std::string repeated = error_of(kHead + kSynthetic + "model: Qwen3-8B\n");
    INFO(repeated);
    CHECK(has(repeated, "r.yaml:3: the key 'model' is repeated in one mapping; give it once"));
    const std::string second = error_of(kHead + kSynthetic + "---\nmodel: Qwen3-8B\n");
    CHECK(has(second, "r.yaml:3: a second YAML document (after '---'); a file holds one document"));
}

}  // namespace
}  // namespace servesim::app
