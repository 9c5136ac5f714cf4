// The GPU catalog and pipeline parallelism as a user meets them on the command line: `servesim list` prints every
// GPU file, `--gpu path.yaml` reads a user's file from any working directory, a bad file is refused naming the file
// and the key, and `inspect -pp N` lists the stages (docs/GPUS.md, docs/PARALLELISM.md); `list` also names the
// hybrid cache policies (docs/HYBRID-POLICIES.md).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "calibration/gpu_spec.h"
#include "sim/cache/hybrid/hybrid_cache_policy.h"
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

TEST_CASE("CLI: a profile calibrated on an H100 (gpu: as the driver names it) runs with --gpu H100", "[tools][cli][gpus]") {
    // servesim-calibrate records torch's device name, "NVIDIA H100 80GB HBM3" on an H100 SXM (KINDS.md), which is
    // the H100-SXM file's device_name, not one of its names or aliases. The committed H200 profile of Qwen3-4B, its
    // header changed to that name, stands for such a profile.
    const auto path =
        std::filesystem::temp_directory_path() / ("servesim_h100_profile_" + std::to_string(::getpid()) + ".yaml");
    {
        std::ifstream in("calibration/profiles/h200/Qwen3-4B.yaml");
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto at = text.find("gpu: NVIDIA H200\n");
        REQUIRE(at != std::string::npos);
        text.replace(at, 17, "gpu: NVIDIA H100 80GB HBM3\n");
        std::ofstream(path) << text;
    }
    const std::string run = "run --model Qwen3-4B --num-prompts 3 --format csv --cost-model '" + path.string() + "'";
    const Ran ok = servesim::test::run_servesim(run + " --gpu H100");
    // On another GPU the same profile is refused, naming the GPU it was measured on.
    const Ran other = servesim::test::run_servesim(run + " --gpu H200");
    std::filesystem::remove(path);
    INFO(ok.output);
    CHECK(ok.status == 0);
    INFO(other.output);
    CHECK(other.status != 0);
    CHECK(contains(other.output, "gpu: the profile was measured on 'NVIDIA H100 80GB HBM3', the experiment runs on 'H200'"));
}

TEST_CASE("CLI: an unknown GPU name is refused listing the known ones", "[tools][cli][gpus]") {
    const Ran r = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu 'NVIDIA H300'");
    INFO(r.output);
    CHECK(r.status != 0);
    // One edit from the H200's driver name, which is suggested (common/nearest_name.h).
    CHECK(contains(r.output, "unknown GPU 'NVIDIA H300'; did you mean 'NVIDIA H200'?; known GPUs: A100-40GB, "
                             "A100-80GB, A10G, B200"));
}

TEST_CASE("CLI: inspect -pp 2 lists the two stages of Qwen3-4B", "[tools][cli][pp]") {
    // 36 layers → 18 + 18; each stage 4,411,228,160 B = 4.11 GiB of weights (tests/memory/pipeline_stages_test).
    const Ran r = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu H100 -pp 2");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "stage 0 layers 0-17"));
    CHECK(contains(r.output, "stage 1 layers 18-35"));
    CHECK(contains(r.output, "weights 4.11 GiB"));
}

}  // namespace

TEST_CASE("CLI: servesim list shows the other names --gpu takes (the driver's and aliases)", "[tools][cli][gpu]") {
    const auto r = servesim::test::run_servesim("list", "", false);
    REQUIRE(r.status == 0);
    // The H100 SXM's row is followed by its driver name, as nvidia-smi prints it, which --gpu accepts.
    const auto row = r.output.find("  H100-SXM ");
    REQUIRE(row != std::string::npos);
    const auto next = r.output.find('\n', row);
    const std::string also = r.output.substr(next + 1, r.output.find('\n', next + 1) - next - 1);
    CHECK(also.find("also: \"NVIDIA H100 80GB HBM3\"") != std::string::npos);
    const auto run = servesim::test::run_servesim("inspect --model Qwen3-4B --gpu \"NVIDIA H100 80GB HBM3\"", "",
                                                  false);
    CHECK(run.status == 0);
    CHECK(run.output.find("H100-SXM") != std::string::npos);
}
