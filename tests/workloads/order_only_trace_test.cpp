// Tests of the order-only capacity mode on trace files (`mode: order_only`, tools/app/experiment.* over
// sim/cache/prefix_cache/order_only_cache.*): on the repository's Mooncake copies (traces/), the unlimited-capacity hit
// rate equals the reuse computed here directly from the hash lists; a malformed record stops the scenario with file,
// line and field before anything runs; the 20-capacity sweep of the conversation trace (its time is printed, not
// asserted).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/scenario.h"

using namespace servesim;

namespace {

const std::string kTraceDir = std::string(SERVESIM_SOURCE_DIR) + "/traces/";

struct Reuse {
    std::int64_t queries_tokens = 0;
    std::int64_t hits_tokens = 0;
};

// Reuse with an unlimited cache, input only, straight from the JSONL: a Mooncake hash id names a 512-token block
// *and everything before it*, so "block i of this request is cached" ⇔ its id was one of an earlier request's full
// blocks (ids of partial last blocks are never cached: vLLM hashes full blocks only). vLLM's lookup walks the first
// floor((P − 1)/512) blocks and stops at the first miss (at least one token is always computed), and counts tokens:
// queries += P, hits += 512 · (leading cached blocks). Hence a fully repeated prompt whose length is a multiple of 512
// hits P − 512 tokens, and any partial last block is never a hit.
Reuse reuse_from_hash_lists(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::unordered_set<std::int64_t> cached;
    Reuse r;
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        const auto ids = j.at("hash_ids").get<std::vector<std::int64_t>>();
        const std::int64_t p = j.at("input_length").get<std::int64_t>();
        const std::int64_t bound = (p - 1) / 512;
        std::int64_t hit = 0;
        while (hit < bound && cached.count(ids[static_cast<std::size_t>(hit)]) > 0) {
            ++hit;
        }
        r.queries_tokens += p;
        r.hits_tokens += 512 * hit;
        for (std::int64_t i = 0; i < p / 512; ++i) {
            cached.insert(ids[static_cast<std::size_t>(i)]);
        }
    }
    return r;
}

std::vector<app::ExperimentResult> run_text(const std::string& text) {
    const app::Scenario sc = app::load_scenario_text(text, kTraceDir + "test.yaml", {}, std::nullopt);
    return app::run_experiments(sc.experiments, 2, nullptr);
}

}  // namespace

TEST_CASE("Order-only unlimited hit rate on each Mooncake file equals the reuse of its hash lists",
          "[workloads][trace][order_only]") {
    // Measured: conversation 54,063,104 / 144,793,823 = 37.34 %; synthetic 39,802,880 / 61,194,628 = 65.04 %
    // (published "cache ratio": 40 % and 66 %; scenarios/traces/RESULTS.md discusses the gap).
    for (const std::string file :
         {"mooncake_fast25_conversation_trace.jsonl", "mooncake_fast25_synthetic_trace.jsonl"}) {
        const Reuse expected = reuse_from_hash_lists(kTraceDir + file);
        const auto results = run_text(
            "mode: order_only\ncapacity_tokens: unlimited\nengine: {block_size: 512}\n"
            "workload: {type: trace, format: mooncake, trace: " +
            file + "}\n");
        REQUIRE(results.size() == 1);
        REQUIRE(results[0].order_only);
        const auto& o = *results[0].order_only;
        INFO(file);
        CHECK(o.prefix_cache_queries == expected.queries_tokens);
        CHECK(o.prefix_cache_hits == expected.hits_tokens);
        CHECK(o.num_evictions == 0);
        CHECK(o.block_size_tokens == 512);
    }
}

TEST_CASE("Order-only sweep prints trace, capacity_tokens, block_size and prefix_cache_hit_rate per point",
          "[workloads][trace][order_only]") {
    const auto results = run_text(
        "mode: order_only\ncapacity_tokens: 1000\n"
        "workload: {type: trace, format: mooncake, trace: ../tests/fixtures/traces/mooncake_small.jsonl}\n"
        "sweep:\n  engine.block_size: [16, 512]\n  capacity_tokens: [1024, unlimited]\n");
    const std::string csv = app::format_csv(results);
    const std::string header = csv.substr(0, csv.find('\n'));
    CHECK(header.rfind("block_size,capacity_tokens,trace,prefix_cache_hit_rate,", 0) == 0);
    // mooncake_small.jsonl (P 1200 ids [0,1,2]; 1024 [0,1]; 600 [0,3]); B = 512, unlimited:
    //   r2 bound floor(1023/512) = 1 → 512; r3 bound 1 → 512. Rate 1024 / 2824.
    CHECK(csv.find("512,unlimited,mooncake_small.jsonl,0.362606,") != std::string::npos);
}

TEST_CASE("Order-only mode: a malformed trace record stops the scenario with file, line and field",
          "[workloads][trace][order_only]") {
    // mooncake_bad_hash_count.jsonl line 1: 1025 tokens need ceil(1025/512) = 3 hash ids, it has 2.
    std::string message;
    try {
        (void)run_text(
            "mode: order_only\ncapacity_tokens: 100000\nworkload: {type: trace, format: mooncake, "
            "trace: ../tests/fixtures/traces/mooncake_bad_hash_count.jsonl}\n");
    } catch (const ConfigError& e) {
        message = e.what();
    }
    INFO(message);
    CHECK(message.find("mooncake_bad_hash_count.jsonl:1: 'hash_ids': expected ceil(input_length 1025 / 512) = 3") !=
          std::string::npos);
}

TEST_CASE("Order-only mode: scenario keys are checked", "[workloads][trace][order_only]") {
    auto error_of = [](const std::string& text) {
        try {
            (void)app::load_scenario_text(text, kTraceDir + "test.yaml", {}, std::nullopt);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const std::string trace =
        "workload: {type: trace, format: mooncake, trace: mooncake_fast25_synthetic_trace.jsonl}\n";
    CHECK(error_of("mode: replay\n" + trace).find("allowed: engine") != std::string::npos);
    CHECK(error_of("model: Qwen3-8B\ncapacity_tokens: 1000\n" + trace).find("only used with `mode: order_only`") !=
          std::string::npos);
    CHECK(error_of("mode: order_only\ncapacity_tokens: 1.5\n" + trace).find("whole number of tokens") !=
          std::string::npos);
    CHECK(error_of("mode: order_only\ncapacity_tokens: 1e6\n" + trace).empty());
    CHECK(error_of("mode: order_only\ncapacity_tokens: 1000\nworkload: {type: synthetic, rate: 1, prompt_tokens: 10, "
                   "output_tokens: 1, num_requests: 1}\n")
              .find("needs `workload: {type: trace") != std::string::npos);
}

TEST_CASE("Order-only with a model: each hybrid policy replays the trace through the engine, one request at a time",
          "[workloads][trace][order_only][hybrid]") {
    // Three prompts of 1,024 tokens sharing their first 512-token trace block (id 0) and nothing else: A [0,1],
    // B [0,2], C [0,3]. Queries 3 × 1,024 = 3,072 tokens. Qwen3.5-4B, 8 GiB of KV memory, one output token each.
    //   full attention (Qwen3-4B, block 16): B and C hit id 0's 512 tokens → 1,024.
    //   vllm (align, block 528): a 528-token block takes 16 tokens past id 0, which differ → 0.
    //   sglang-no-buffer: one chunk per prompt (1,024 < 8,192), so only end states (1,024), never 512 → 0.
    //   marconi / checkpoint: B's lookup finds attention to 512 and no state, so B checkpoints the branch point 512;
    //   C resumes there → 512.
    const std::string trace =
        (std::filesystem::temp_directory_path() / "servesim_order_only_hybrid_test.jsonl").string();
    {
        std::ofstream out(trace);
        for (int id : {1, 2, 3}) {
            out << fmt::format("{{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 5, "
                               "\"hash_ids\": [0, {}]}}\n",
                               id);
        }
    }
    const auto results = run_text(
        "mode: order_only\ngpu: H200\nengine: {enable_prefix_caching: true, vllm_version: \"0.26\", max_model_len: "
        "4096, kv_cache_memory_bytes: 8GiB}\nworkload: {type: trace, format: mooncake, trace: " +
        trace +
        "}\nexperiments:\n  - {name: full, model: Qwen3-4B}\n  - {name: vllm, model: Qwen3.5-4B}\n"
        "  - {name: nb, model: Qwen3.5-4B, engine: {hybrid_cache_policy: sglang-no-buffer}}\n"
        "  - {name: marconi, model: Qwen3.5-4B, engine: {hybrid_cache_policy: marconi}}\n"
        "  - {name: ckpt, model: Qwen3.5-4B, engine: {hybrid_cache_policy: checkpoint}}\n");
    REQUIRE(results.size() == 5);
    const std::vector<std::int64_t> expected = {1024, 0, 0, 512, 512};
    for (std::size_t i = 0; i < results.size(); ++i) {
        INFO(results[i].config.name);
        REQUIRE(results[i].order_only);
        CHECK(results[i].order_only->num_requests == 3);
        CHECK(results[i].order_only->prefix_cache_queries == 3072);
        CHECK(results[i].order_only->prefix_cache_hits == expected[i]);
    }
    CHECK(results[1].order_only->block_size_tokens == 528);
    CHECK(results[3].sim.hybrid_state->attention_hit_tokens == 1024);
    const std::string csv = app::format_csv(results);
    CHECK(csv.find("marconi,order-only replay") == std::string::npos);  // no timing columns: order-only fields
    CHECK(csv.find("attention_hit_rate") != std::string::npos);
}

TEST_CASE("Order-only with a model: capacity_tokens and a concurrency of its own are refused",
          "[workloads][trace][order_only][hybrid]") {
    auto error_of = [](const std::string& text) {
        try {
            (void)run_text(text);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    const std::string head = "mode: order_only\nmodel: Qwen3.5-4B\n";
    const std::string trace = "trace: ../tests/fixtures/traces/mooncake_small.jsonl";
    CHECK(error_of(head + "capacity_tokens: 1000\nworkload: {type: trace, format: mooncake, " + trace + "}\n")
              .find("capacity_tokens: not used with `model`") != std::string::npos);
    CHECK(error_of(head + "workload: {type: trace, format: mooncake, max_concurrency: 4, " + trace + "}\n")
              .find("workload.max_concurrency: not allowed") != std::string::npos);
}

TEST_CASE("Order-only: the conversation trace over 20 capacities (block size 16), timed",
          "[workloads][trace][order_only]") {
    // 20 log-spaced capacities 10⁴ … 10⁹ tokens, one thread; the time is printed for the note, not asserted.
    std::string caps;
    for (int i = 0; i < 20; ++i) {
        caps += fmt::format("{}{}", i ? ", " : "",
                            static_cast<std::int64_t>(std::llround(std::pow(10.0, 4 + 5.0 * i / 19))));
    }
    const auto start = std::chrono::steady_clock::now();
    const app::Scenario sc = app::load_scenario_text(
        "mode: order_only\ncapacity_tokens: 1\nworkload: {type: trace, format: mooncake, "
        "trace: mooncake_fast25_conversation_trace.jsonl}\nsweep:\n  capacity_tokens: [" +
            caps + "]\n",
        kTraceDir + "test.yaml", {}, std::nullopt);
    const auto results = app::run_experiments(sc.experiments, 1, nullptr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << fmt::format("order-only: conversation trace, 20 capacities, block size 16, one thread: {:.2f} s\n",
                             seconds);
    REQUIRE(results.size() == 20);
    // 10⁹ tokens hold the whole trace: the unlimited figure; 10⁴ tokens (625 blocks) hold almost nothing but the
    // shared first block.
    const auto unlimited = run_text(
        "mode: order_only\ncapacity_tokens: unlimited\nworkload: {type: trace, "
        "format: mooncake, trace: mooncake_fast25_conversation_trace.jsonl}\n");
    CHECK(results.back().order_only->prefix_cache_hits == unlimited[0].order_only->prefix_cache_hits);
    CHECK(results.back().order_only->num_evictions == 0);
    CHECK(results.front().order_only->prefix_cache_hit_rate() < 0.1);
    CHECK(results.front().order_only->prefix_cache_hit_rate() > 0.0);
}
