// vLLM #45238's published case through a whole scenario: Qwen3.x-27B (the Qwen3.5-27B architecture) with an fp8 KV
// cache and MTP k = 3 (block 1,600), one 20,000-token prompt sent three times, one at a time, one output token
// (order_only mode with a model). vLLM's rules, worked in docs/SPECULATIVE-DECODING.md: the first sighting keeps its
// Mamba state only at the retained boundary; the second misses (the EAGLE/MTP drop puts the hit candidate a block
// below any kept state) and keeps a state at the shared-prefix junction; the third hits 17,600 tokens.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// The same 20,000-token prompt three times, a minute apart (Mooncake records: ⌈20,000 / 512⌉ = 40 hash ids).
std::string write_trace() {
    const auto path = std::filesystem::temp_directory_path() /
                      ("servesim_45238_" + std::to_string(::getpid()) + ".jsonl");
    std::ofstream out(path);
    std::string ids;
    for (int i = 0; i < 40; ++i) {
        ids += (i ? ", " : "") + std::to_string(i);
    }
    for (int i = 0; i < 3; ++i) {
        out << "{\"timestamp\": " << i * 60000 << ", \"input_length\": 20000, \"output_length\": 1, \"hash_ids\": ["
            << ids << "]}\n";
    }
    return path.string();
}

TEST_CASE("#45238: with MTP k = 3 a repeated prompt misses on its second sighting and hits on its third",
          "[scenarios][speculative]") {
    const std::string trace = write_trace();
    const std::string text = "name: t45238\nmodel: Qwen3.5-27B\ngpu: H100\nmode: order_only\n"
                             "engine: {kv_cache_dtype: fp8, max_model_len: 32768, kv_cache_memory_bytes: 16GiB}\n"
                             "workload: {type: trace, format: mooncake, trace: " +
                             trace +
                             "}\n"
                             "check_invariants: true\n"
                             "experiments:\n"
                             "  - name: mtp\n"
                             "    engine: {speculative_config: {method: mtp, num_speculative_tokens: 3}}\n"
                             "  - name: ngram\n"
                             "    engine: {speculative_config: {method: ngram, num_speculative_tokens: 3}}\n";
    const Scenario sc = load_scenario_text(text, "t45238.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, {});
    std::filesystem::remove(trace);
    REQUIRE(results.size() == 2);
    // Queries: 3 × 20,000 = 60,000 tokens in both runs; both have the 1,600-token block (k = 3 conv columns).
    // vLLM 0.34's retention interval 0: a prompt keeps its Mamba state at the replay boundary
    // R = ⌊19,999 / 1,600⌋ · 1,600 = 19,200 and at a shared-prefix junction.
    // MTP (use_eagle): the align split stops one block early, at 19,200 − 1,600 = 17,600, so no state lands on R;
    // sighting 2's attention hit 19,200 drops its last block to 17,600, where no state is kept: a miss, and 17,600
    // becomes the junction whose state is kept; sighting 3 hits 17,600. Hits 0 + 0 + 17,600.
    const auto& mtp = results[0].sim.summary;
    CHECK(mtp.prefix_cache_queries == 60'000);
    CHECK(mtp.prefix_cache_hits == 17'600);
    // ngram (no drop, the split at 19,200): sightings 2 and 3 both hit R = 19,200. Hits 0 + 19,200 + 19,200.
    const auto& ngram = results[1].sim.summary;
    CHECK(ngram.prefix_cache_queries == 60'000);
    CHECK(ngram.prefix_cache_hits == 38'400);
}

}  // namespace
}  // namespace servesim::app
