// `servesim inspect`: vLLM's start-up sizing of the KV cache for a model on a GPU (what its log says), and a
// scenario's replicas as they start on the topology.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "models/model_spec.h"
#include "sim/memory/memory_plan.h"
#include "tools/app/experiment.h"

namespace servesim::app {

// `servesim inspect`: what vLLM's start-up log would say.
[[nodiscard]] nlohmann::ordered_json inspect_json(const models::ModelSpec& model, const std::string& gpu,
                                                  const cache::MemoryPlan& plan);

// `servesim inspect SCENARIO`: each experiment's replicas as they start — the topology GPUs under each, its device
// memory (cluster.topology's, beside the catalog GPU's when they differ) and the KV cache vLLM sizes from it.
[[nodiscard]] std::string inspect_placement(const PreparedExperiment& p);
[[nodiscard]] std::string inspect_table(const models::ModelSpec& model, const std::string& gpu,
                                        const cache::MemoryPlan& plan);

}  // namespace servesim::app
