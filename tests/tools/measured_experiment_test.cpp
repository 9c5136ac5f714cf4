// `cost_model: measured` through the experiment (tools/app/experiment_parts.cpp measured_params): the GPU's own kernel
// table, else the nearest measured GPU's by efficiency transfer, and a clear refusal when no table is built in.
#include <string>
#include <vector>

#include "calibration/kernel_table.h"
#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

ExperimentConfig qwen(const std::string& gpu) {
    ExperimentConfig x;
    x.file = "m.yaml";
    x.name = "m";
    x.model = "Qwen3-4B";
    x.gpu = gpu;
    x.cost_model = "measured";
    x.workload = YAML::Load("{type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}");
    return x;
}

TEST_CASE("cost_model measured takes the GPU's table, transfers another's, or says none is built in", "[tools]") {
    const auto& tables = calibration::kernel_table_catalog();
    if (tables.empty()) {
        try {
            (void)prepare_experiment(qwen("H100"));
            FAIL("no ConfigError");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()).find("m.yaml: experiment 'm': cost_model measured: no kernel table is built "
                                             "in") != std::string::npos);
        }
        return;
    }
    for (const auto& t : tables) {
        INFO(t.file);
        const PreparedExperiment p = prepare_experiment(qwen(t.gpu));
        CHECK(p.cost_model->describe().rfind("measured " + p.gpu.name + " (kernel table " + t.file, 0) == 0);
    }
    // A100 (sm_80, no table): transferred from a Hopper table, said in the description.
    const PreparedExperiment a100 = prepare_experiment(qwen("A100-80GB"));
    CHECK(a100.cost_model->describe().rfind("measured-transfer from ", 0) == 0);
    CHECK(a100.cost_model->describe().find(" to A100-80GB (") != std::string::npos);
}

TEST_CASE("a cost_model that is neither a model name nor an existing file is refused with the allowed values",
          "[tools]") {
    // Every other value is read as a profile's path; a misspelt name must not read as a missing profile.
    ExperimentConfig x = qwen("H100");
    x.cost_model = "measrued";
    try {
        (void)prepare_experiment(x);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()) ==
              "m.yaml: experiment 'm': cost_model: 'measrued' is neither a cost model nor a profile file that "
              "exists; allowed: roofline (the default), measured, or the path of a calibrated profile YAML "
              "(calibration/profiles/, docs/COST-MODEL.md)");
    }
}

TEST_CASE("a kernel table without vLLM's fused_moe pairs takes them from a table of the same architecture",
          "[tools]") {
    // fused_pairs_lender over copies of the committed tables: the H200's with its pairs removed (as it was before its
    // second lease) takes the H100's (sm_90, same vendor); a table that has its own takes none; a table measured on
    // an sm_80 GPU finds no Ampere table with pairs and takes none; without any pairs in the list, none.
    const calibration::GpuSpec h100 = calibration::find_gpu("H100-SXM");
    const calibration::GpuSpec h200 = calibration::find_gpu("H200");
    const calibration::KernelTable* h100_table = calibration::find_kernel_table(h100);
    const calibration::KernelTable* h200_table = calibration::find_kernel_table(h200);
    if (calibration::kernel_table_catalog().empty()) {
        return;  // a build without tables: the test above checks the refusal
    }
    REQUIRE(h100_table != nullptr);
    REQUIRE(h200_table != nullptr);
    REQUIRE_FALSE(h100_table->moe_vllm_fused.empty());
    calibration::KernelTable h200_bare = *h200_table;
    h200_bare.moe_vllm_fused.clear();
    const std::vector<calibration::KernelTable> tables = {h200_bare, *h100_table};
    CHECK(fused_pairs_lender(tables[0], h200, tables) == &tables[1]);
    CHECK(fused_pairs_lender(tables[1], h100, tables) == nullptr);
    CHECK(fused_pairs_lender(tables[0], calibration::find_gpu("A100-80GB"), tables) == nullptr);
    const std::vector<calibration::KernelTable> bare_only = {h200_bare};
    CHECK(fused_pairs_lender(bare_only[0], h200, bare_only) == nullptr);
    // Through measured_params with the committed tables, which both hold pairs: each GPU uses its table's own, and a
    // transfer (A100 from the H100's, MI300X from the H200's) carries them.
    for (const std::string gpu : {"H100-SXM", "H200", "A100-80GB", "MI300X"}) {
        INFO(gpu);
        const engine::MeasuredParams p =
            measured_params(calibration::find_gpu(gpu), engine::RooflineParams{}, 8192);
        CHECK_FALSE(p.table->moe_vllm_fused.empty());
        CHECK(p.fused_table == nullptr);
    }
}

}  // namespace
}  // namespace servesim::app
