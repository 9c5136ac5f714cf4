// `cost_model: measured` through the experiment (tools/app/experiment_parts.cpp measured_params): the GPU's own kernel
// table, else the nearest measured GPU's by efficiency transfer, and a clear refusal when no table is built in.
#include <string>

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

}  // namespace
}  // namespace servesim::app
