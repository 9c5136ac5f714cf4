// Experiment: turns a validated ExperimentConfig into a running Simulation — model spec, GPU, vLLM's memory plan,
// cost model, workload, replicas — and returns its figures. prepare_experiment does everything that can fail on
// bad input, so a scenario is fully checked before its first simulation starts. run_experiments runs a list on
// worker threads; results come back in list order, so output never depends on the thread count.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "models/model_spec.h"
#include "sim/cache/order_only_cache.h"
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
    // `mode: order_only` only (then model, gpu, plan and cost_model stay empty): the trace at the block size,
    // shared read-only by every point of a sweep that reads the same trace the same way.
    std::shared_ptr<const cache::OrderOnlyTrace> order_only_trace;
};

struct ExperimentResult {
    ExperimentConfig config;
    std::string model_name;
    std::string gpu_name;
    std::string cost_model;
    std::string workload;
    cache::MemoryPlan plan;
    cluster::SimulationResult sim;
    std::optional<cache::OrderOnlyResult> order_only;  // set instead of `sim` in `mode: order_only`
};

// vLLM's memory-plan request for a model on a GPU with the user's engine settings.
[[nodiscard]] cache::MemoryPlanRequest memory_plan_request(const EngineSettings& engine, const calibration::GpuSpec& gpu);

// The host KV tier of engine.kv_offloading_size (vLLM's native OffloadingConnector, CPUOffloadingSpec) for a
// resolved plan: its capacity in CPU blocks per tensor-parallel group, its load speed and the release's rules.
// Requires engine.kv_offloading_size.
[[nodiscard]] cache::CpuOffloadConfig offload_config(const EngineSettings& engine, const cache::MemoryPlan& plan,
                                                     const calibration::GpuSpec& gpu);

[[nodiscard]] PreparedExperiment prepare_experiment(const ExperimentConfig& config);

// `mode: order_only`: reads the workload's trace (honouring limit, num_requests, duration and time_scale) into block
// chains at engine.block_size (default 16). A malformed record throws ConfigError with file, line and field.
[[nodiscard]] std::shared_ptr<const cache::OrderOnlyTrace> load_order_only_trace(const ExperimentConfig& config);

[[nodiscard]] ExperimentResult run_experiment(const PreparedExperiment& prepared);

// Prepares every experiment first (any bad input throws before simulating), then runs them on `jobs` threads.
// `on_done(done, total)` is called after each finished experiment (progress), from the worker threads, serialised.
[[nodiscard]] std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                                            const std::function<void(int, int)>& on_done);

}  // namespace servesim::app
