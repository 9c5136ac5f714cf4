// The memory projection before work starts (tools/app/memory_projection.h, issue 41: 1,024 replicas with a 2,000 GB
// pool grew past 12 GB of host memory before anything said so): the KV block metadata worked by hand, a scenario
// over the bound refused with the projection and the flag named, one under it run.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "sim/cache/prefix_cache/block_pool.h"
#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"
#include "tools/app/experiment.h"
#include "tools/app/memory_projection.h"
#include "tools/app/scenario.h"

namespace {

using servesim::test::contains;
using servesim::test::run_servesim;
using namespace servesim;
using namespace servesim::app;

// Qwen3-4B on an H200 with a 400 GB pool per replica: KV per token 36 layers x 2 (K, V) x 8 KV heads x 128 x 2 B =
// 147,456 B; a 16-token block 2,359,296 B; 400e9 / 2,359,296 = 169,542 blocks.
const std::string kPool = R"(
name: pool
model: Qwen3-4B
gpu: H200
cluster: {replicas: 64}
engine: {kv_cache_memory_bytes: 400GB}
workload: {type: synthetic, prompt_tokens: 100, output_tokens: 10, rate: 10, num_requests: 10}
)";

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("Memory projection: a pool's metadata is a key, a place and an id per block, and the prefix index",
          "[tools][memory_projection]") {
    // 1,000 blocks: 16 B key + 8 B place + 4 B queued id = 28,000 B; the prefix index reserves bit_ceil(2,000) =
    // 2,048 slots of 8 B = 16,384 B when caching.
    CHECK(cache::BlockPool::metadata_bytes(1000, true) == 28'000 + 16'384);
    CHECK(cache::BlockPool::metadata_bytes(1000, false) == 28'000);
}

TEST_CASE("Memory projection: 64 replicas of a 400 GB pool project 572 MB of block metadata",
          "[tools][memory_projection]") {
    const Scenario sc = load_scenario_text(kPool, "pool.yaml", {}, {});
    std::vector<PreparedExperiment> prepared;
    prepared.push_back(prepare_experiment(sc.experiments.at(0)));
    REQUIRE(prepared[0].plan.num_gpu_blocks == 169'542);
    const MemoryProjection p = project_memory(prepared, 2);
    // Per replica 169,542 x 28 = 4,747,176 B + bit_ceil(339,084) = 524,288 slots x 8 = 4,194,304 B: 8,941,480 B;
    // x 64 = 572,254,720 B (peak RSS measured 572.5 MB, docs/MEMORY-PROJECTION.md).
    REQUIRE(p.concurrent.size() == 1);
    REQUIRE(!p.concurrent[0].terms.empty());
    CHECK(p.concurrent[0].terms[0].bytes == 572'254'720);
    CHECK(contains(p.concurrent[0].terms[0].what, "64 replicas x 169,542 blocks"));
    // Ten requests of 100 tokens (6 full blocks): 10 x (770 + 6 x 8) = 8,180 B alive at most.
    CHECK(p.concurrent[0].terms[1].bytes == 8'180);
    CHECK(p.total_bytes == 12'000'000 + 572'254'720 + 8'180);
}

TEST_CASE("Memory projection: a run over the bound is refused before it starts, naming the flag",
          "[tools][memory_projection]") {
    const Scenario sc = load_scenario_text(kPool, "pool.yaml", {}, {});
    RunOptions options;
    options.max_memory_bytes = 500'000'000;
    const std::string m = message_of([&] { (void)run_experiments(sc.experiments, 1, {}, options); });
    CHECK(contains(m, "projected peak memory 584 MB is above the bound of 500 MB (--max-memory"));
    CHECK(contains(m, "KV block metadata: 64 replicas x 169,542 blocks: 572 MB"));
    CHECK(contains(m, "--max-memory 731MB"));  // 584,262,900 x 1.25, rounded up
}

TEST_CASE("Memory projection: the command line prints the projection, refuses over --max-memory, runs under it",
          "[tools][memory_projection][cli]") {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("servesim-memory-" + std::to_string(::getpid()) + ".yaml")).string();
    {
        std::ofstream f(path);
        f << kPool;
    }
    const std::string set =
        "'" + path + "' --set cluster.replicas=4 --set engine.kv_cache_memory_bytes=100GB --jobs 1 ";
    // 4 x 42,385 blocks (100e9 / 2,359,296): 42,385 x 28 + 131,072 slots x 8 = 2,235,356 B each, 8.9 MB in all,
    // + 12 MB of process: 21 MB.
    const auto refused = run_servesim("run " + set + "--max-memory 15MB");
    CHECK(refused.status == 2);
    CHECK(contains(refused.output, "projected peak memory 21 MB is above the bound of 15 MB (--max-memory"));
    const auto ran = run_servesim("run " + set + "--max-memory 1GiB");
    CHECK(ran.status == 0);
    CHECK(contains(ran.output, "servesim: projected peak memory 21 MB of 1.07 GB allowed (--max-memory)"));
    const auto bad = run_servesim("run " + set + "--max-memory 0");
    CHECK(bad.status == 2);
    CHECK(contains(bad.output, "--max-memory: '0' is not a memory size"));
    std::filesystem::remove(path);
}
