// The flat columns every output format prints (docs/OUTPUTS.md): one run's fields in a fixed order (identity, what
// answered it, the figures), a replicated point's mean/min/max/std per measured figure, and the cell rules the
// formats share (how a missing value, a number and a swept value print). Used by output.cpp (JSON, CSV),
// output_table.cpp and output_vllm_bench.cpp; callers outside tools/app use output.h.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/app/output.h"

namespace servesim::app {

struct Field {
    std::string name;
    Cell value;
    bool measured = false;  // depends on the seed: aggregated over replicates (mean, min, max, std)
};

// One result's fields: a single run's, or a replicated point's (replicate_runs.size() > 1).
[[nodiscard]] std::vector<Field> fields(const ExperimentResult& r);

// Column names over all results, in order of first appearance (rows may differ: goodput set on some only).
[[nodiscard]] std::vector<std::string> header_of(const std::vector<std::vector<Field>>& rows);

// The cell of the field named `name`, or nullptr.
[[nodiscard]] const Cell* find_field(const std::vector<Field>& row, const std::string& name);

// Table text of a column: a replicated figure prints "mean [min–max]" under its plain name.
[[nodiscard]] std::string table_cell(const std::vector<Field>& row, const std::string& name);

[[nodiscard]] bool is_missing(const Cell& c);

// Decimals a table prints for a column, from what its name says it holds (docs/OUTPUTS.md "formatting").
[[nodiscard]] int table_decimals(const std::string& name);

// A cell's text: `missing` when not measured, numbers by number_text(v, decimals).
[[nodiscard]] std::string cell_text(const Cell& c, int decimals, const char* missing);

// A cell as JSON: null when missing.
[[nodiscard]] nlohmann::ordered_json cell_json(const Cell& c);

// A scenario value as written (a string from the sweep grid), typed: integer, number, true/false, else text.
[[nodiscard]] Cell typed_value(const std::string& key, const std::string& text);

}  // namespace servesim::app
