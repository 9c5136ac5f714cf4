// The GPU catalog and pipeline parallelism as a user meets them on the command line: `servesim list` prints every
// GPU file, `--gpu path.yaml` reads a user's file from any working directory, a bad file is refused naming the file
// and the key, and `inspect -pp N` lists the stages (docs/GPUS.md, docs/PARALLELISM.md); `list` also names the
// hybrid cache policies (docs/HYBRID-POLICIES.md).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "calibration/gpu_spec.h"
#include "sim/cache/hybrid_cache_policy.h"
#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

TEST_CASE("CLI: servesim list prints every GPU of the catalog", "[tools][cli][gpus]") {
    const Ran r = servesim::test::run_servesim("list");
    INFO(r.output);
    CHECK(r.status == 0);
    for (const auto& g : servesim::calibration::gpu_catalog()) {
        CHECK(contains(r.output, "\n  " + g.name + " "));
    }
    CHECK(contains(r.output, "<gpu.yaml>"));
}

TEST_CASE("CLI: servesim list prints every hybrid cache policy with its line", "[tools][cli][hybrid]") {
    const Ran r = servesim::test::run_servesim("list");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "hybrid cache policies (engine.hybrid_cache_policy):\n"));
    for (const auto& h : servesim::cache::hybrid_policies()) {
        CHECK(contains(r.output, fmt::format("\n  {:<20} {}\n", h.name, h.description)));
    }
}

TEST_CASE("CLI: --gpu takes a user GPU file by path from any working directory", "[tools][cli][gpus]") {
    const std::string file = (std::filesystem::current_path() / "scenarios/gpus/gpus/A40.yaml").string();
    const Ran r = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu '" + file + "'", "cd / && ");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "gpu                               A40\n"));
}

TEST_CASE("CLI: a GPU file with an unknown key is refused naming the file and the key", "[tools][cli][gpus]") {
    const auto path =
        std::filesystem::temp_directory_path() / ("servesim_gpu_cli_test_" + std::to_string(::getpid()) + ".yaml");
    {
        std::ifstream in("scenarios/gpus/gpus/A40.yaml");
        std::ofstream out(path);
        out << in.rdbuf() << "tensor_cores: 336\n";
    }
    const Ran r = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu '" + path.string() + "'");
    std::filesystem::remove(path);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(contains(r.output, path.string() + ":"));
    CHECK(contains(r.output, "'tensor_cores': unknown key; allowed: name, aliases"));
}

TEST_CASE("CLI: inspect -pp 2 lists the two stages of Qwen3-4B", "[tools][cli][pp]") {
    // 36 layers → 18 + 18; each stage 4,411,228,160 B = 4.11 GiB of weights (tests/cache/pipeline_stages_test).
    const Ran r = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu H100 -pp 2");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "stage 0 layers 0-17"));
    CHECK(contains(r.output, "stage 1 layers 18-35"));
    CHECK(contains(r.output, "weights 4.11 GiB"));
}

}  // namespace
