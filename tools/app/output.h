// Output formats (DESIGN §6): a side-by-side table for people, CSV (one flat row per experiment or sweep point,
// swept keys as the first columns) and JSON (one object per experiment, nested distributions) for tools. Results go
// to stdout or files; diagnostics and progress go to stderr. Numbers are printed with fixed rules so equal inputs
// give byte-identical outputs.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <variant>
#include <vector>

#include "models/model_spec.h"
#include "sim/cache/memory_plan.h"
#include "tools/app/experiment.h"

namespace servesim::app {

using Cell = std::variant<std::string, std::int64_t, double>;

// Flat columns of one result, in a fixed order: identity columns first, then the figures.
[[nodiscard]] std::vector<std::pair<std::string, Cell>> flatten(const ExperimentResult& r);

[[nodiscard]] nlohmann::ordered_json to_json(const ExperimentResult& r);

[[nodiscard]] std::string format_json(const std::vector<ExperimentResult>& results);

[[nodiscard]] std::string format_csv(const std::vector<ExperimentResult>& results);

// Queue length, running requests, KV usage and the cumulative hit rate over simulated time, one row per sample and
// experiment (identity columns first): queue growth and KV pressure as the run unfolds.
[[nodiscard]] std::string format_timeseries_csv(const std::vector<ExperimentResult>& results);

// run: figures as rows, experiments as columns; sweep: one row per point with the main figures.
[[nodiscard]] std::string format_table(const std::vector<ExperimentResult>& results, bool sweep);

// `servesim inspect`: what vLLM's start-up log would say.
[[nodiscard]] nlohmann::ordered_json inspect_json(const models::ModelSpec& model, const std::string& gpu,
                                                  const cache::MemoryPlan& plan);

[[nodiscard]] std::string inspect_table(const models::ModelSpec& model, const std::string& gpu,
                                        const cache::MemoryPlan& plan);

}  // namespace servesim::app
