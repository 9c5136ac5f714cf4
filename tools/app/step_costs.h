// `servesim inspect --model M --gpu G --step-costs prefill=2048 decode=64x2048`: the cost of one given batch term by
// term (GEMMs by projection, attention, MoE, elementwise, sampling, all-reduces, host overhead) under the chosen cost
// model, so a user sees where a step's time goes. The batch is built as Replica::batch_shape builds a step's
// (sim/engine/replica.cpp): chunk sums, attention work Σ chunk·(cached + chunk/2), decode keys, local spans.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine/cost_model.h"

namespace servesim::app {

// One part of the batch: `count` sequences each scheduling `chunk` new tokens after `cached` computed ones; a decode
// is chunk 1 after a context of cached tokens (its key count cached + 1).
struct BatchPart {
    bool decode = false;
    std::int64_t count = 1;
    std::int64_t chunk = 0;
    std::int64_t cached = 0;
};

// "prefill=2048", "prefill=512@4096" (a 512-token chunk after 4,096 cached), "prefill=4x1024" (four prompts),
// "decode=64x2048" (64 decodes with 2,048 tokens of context each, the new one included), "decode=8" (8 decodes at
// context 1). ConfigError naming --step-costs and the forms allowed.
[[nodiscard]] BatchPart parse_batch_part(const std::string& spec);

[[nodiscard]] engine::BatchShape batch_shape_of(const std::vector<BatchPart>& parts,
                                                const engine::LocalAttentionSpans& spans);

// One line per part ("prefill 2048 tokens after 0 cached", ...).
[[nodiscard]] std::string describe_batch(const std::vector<BatchPart>& parts);

[[nodiscard]] std::string step_costs_table(const engine::CostModel& cost, const std::vector<BatchPart>& parts);
[[nodiscard]] nlohmann::ordered_json step_costs_json(const engine::CostModel& cost,
                                                     const std::vector<BatchPart>& parts);

}  // namespace servesim::app
