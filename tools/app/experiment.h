// Experiment: turns a validated ExperimentConfig into a running Simulation — model spec, GPU, vLLM's memory plan,
// cost model, workload, replicas — and returns its figures. prepare_experiment does everything that can fail on
// bad input, so a scenario is fully checked before its first simulation starts. run_experiments runs a list on
// worker threads; results come back in list order, so output never depends on the thread count.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "models/model_spec.h"
#include "sim/cache/memory_plan.h"
#include "sim/cluster/simulation.h"
#include "sim/engine/cost_model.h"
#include "tools/app/scenario.h"

namespace servesim::app {

struct PreparedExperiment {
    ExperimentConfig config;
    models::ModelSpec model;
    calibration::GpuSpec gpu;
    cache::MemoryPlan plan;
    std::unique_ptr<engine::CostModel> cost_model;
};

struct ExperimentResult {
    ExperimentConfig config;
    std::string model_name;
    std::string gpu_name;
    std::string cost_model;
    std::string workload;
    cache::MemoryPlan plan;
    cluster::SimulationResult sim;
};

// vLLM's memory-plan request for a model on a GPU with the user's engine settings.
[[nodiscard]] cache::MemoryPlanRequest memory_plan_request(const EngineSettings& engine, const calibration::GpuSpec& gpu);

[[nodiscard]] PreparedExperiment prepare_experiment(const ExperimentConfig& config);

[[nodiscard]] ExperimentResult run_experiment(const PreparedExperiment& prepared);

// Prepares every experiment first (any bad input throws before simulating), then runs them on `jobs` threads.
// `on_done(done, total)` is called after each finished experiment (progress), from the worker threads, serialised.
[[nodiscard]] std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                                            const std::function<void(int, int)>& on_done);

}  // namespace servesim::app
