// Internal to tools/app/experiment*.cpp: what experiment_parts.cpp (the pieces of an experiment),
// experiment_prepare.cpp (assembly) and experiment.cpp (execution) share beyond experiment.h.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "calibration/gpu_spec.h"
#include "calibration/hardware_profile.h"
#include "models/model_spec.h"
#include "sim/cache/prefix_cache/order_only_cache.h"
#include "sim/engine/cuda_graphs.h"
#include "sim/engine/host_work.h"
#include "sim/memory/memory_plan.h"
#include "tools/app/experiment.h"

namespace servesim::app {

// The engine's CUDA-graph capture sizes from its keys (VllmConfig._set_cudagraph_sizes): none with enforce_eager;
// the explicit list; vLLM's ladder up to max_cudagraph_capture_size; by default up to min(2·max_num_seqs, 512,
// max_num_batched_tokens).
[[nodiscard]] engine::CudaGraphSizes cuda_graph_sizes(const ExperimentConfig& config, const cache::MemoryPlan& plan);

// Host work constants: the priors of docs/HOST-WORK.md, or the values a calibration fitted (engine keys).
[[nodiscard]] engine::HostWorkParams host_work_params(const EngineSettings& e);

// What differs between a calibrated profile and the experiment it would cost (model, GPU, weight format): empty when
// nothing does; ConfigError when something does and the scenario does not say allow_profile_mismatch.
[[nodiscard]] std::string check_profile_matches(const calibration::HardwareProfile& profile,
                                                const ExperimentConfig& config, const models::ModelSpec& model,
                                                const calibration::GpuSpec& gpu);

// Order-only traces already read, by what decides them (workload and block size): a sweep over capacities reads and
// hashes each trace once.
using OrderOnlyTraces = std::map<std::string, std::shared_ptr<const cache::OrderOnlyTrace>>;

// `mode: order_only`: the pure replay of a trace (loaded once into `traces`), or with a `model` the engine replay of
// order_only_engine_config.
[[nodiscard]] PreparedExperiment prepare_order_only(const ExperimentConfig& config, OrderOnlyTraces& traces);

}  // namespace servesim::app
