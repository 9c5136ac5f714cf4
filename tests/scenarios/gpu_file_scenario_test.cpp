// scenarios/gpus/compare.yaml: one model on two catalog GPUs and one user GPU file named by a path relative to the
// scenario (docs/GPUS.md); and a scenario whose GPU file is bad stops before simulating, naming that file and key.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

TEST_CASE("A scenario names a user GPU file relative to its own folder", "[scenarios][gpus]") {
    const Scenario sc = load_scenario("scenarios/gpus/compare.yaml", {"workload.num_requests=40", "warmup=0s"}, {});
    REQUIRE(sc.experiments.size() == 3);
    CHECK(sc.experiments[2].gpu == "scenarios/gpus/gpus/A40.yaml");
    const auto results = run_experiments(sc.experiments, 1, {});
    CHECK(results[0].gpu_name == "L40S");
    CHECK(results[1].gpu_name == "H100-SXM");
    CHECK(results[2].gpu_name == "A40");
    // The A40 file: 149.7 TFLOP/s bf16, 696 GB/s (the roofline describes itself with them).
    CHECK(results[2].cost_model == "roofline A40 (150 TFLOP/s bf16, 696 GB/s)");
    // Same 44.4 GiB reported total as the L40S's file, so the same KV pool.
    CHECK(results[2].plan.num_gpu_blocks == results[0].plan.num_gpu_blocks);
    for (const auto& r : results) {
        CHECK(r.sim.summary.num_requests_finished == 40);
    }
}

TEST_CASE("A scenario with a bad GPU file stops naming the GPU file and its key", "[scenarios][gpus][errors]") {
    const auto dir =
        std::filesystem::temp_directory_path() / ("servesim_gpu_file_scenario_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ifstream in("scenarios/gpus/gpus/A40.yaml");
        std::ofstream out(dir / "bad_gpu.yaml");
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("memory_bandwidth_gb_per_s", 0) != 0) {  // drop one required key
                out << line << "\n";
            }
        }
    }
    {
        std::ofstream out(dir / "scenario.yaml");
        out << "model: Qwen3-4B\ngpu: bad_gpu.yaml\n"
            << "workload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}\n";
    }
    std::string msg;
    try {
        const Scenario sc = load_scenario((dir / "scenario.yaml").string(), std::vector<std::string>{}, std::nullopt);
        (void)run_experiments(sc.experiments, 1, {});
    } catch (const ConfigError& e) {
        msg = e.what();
    }
    std::filesystem::remove_all(dir);
    INFO(msg);
    CHECK(msg.find("bad_gpu.yaml:") != std::string::npos);
    CHECK(msg.find("'memory_bandwidth_gb_per_s': missing required key") != std::string::npos);
    CHECK(msg.find("'gpu'") != std::string::npos);  // reported at the scenario's gpu key
}

}  // namespace
}  // namespace servesim::app
