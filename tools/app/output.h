// Output formats (docs/ARCHITECTURE.md, "Formats"): a side-by-side table for people (output_table.cpp), CSV (one flat
// row per experiment or sweep point, swept keys as the first columns) and JSON (one object per experiment, nested
// distributions) for tools (output.cpp), all from the same flat columns (output_fields.h). vllm bench serve's result
// JSON is output_vllm_bench.h, `servesim inspect`'s text output_inspect.h. Results go to stdout or files; diagnostics
// and progress go to stderr. Numbers are printed with fixed rules so equal inputs give byte-identical outputs.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tools/app/experiment.h"

namespace servesim::app {

// One value of a result; std::monostate = not measured (empty in CSV, null in JSON, "—" in tables; never 0).
using Cell = std::variant<std::monostate, std::string, std::int64_t, double, bool>;

// Flat columns of one result, in a fixed order: identity columns first, then the figures. The same names, in the
// same order, are the CSV header, the JSON object's keys and the table's rows (docs/OUTPUTS.md defines each).
[[nodiscard]] std::vector<std::pair<std::string, Cell>> flatten(const ExperimentResult& r);

[[nodiscard]] nlohmann::ordered_json to_json(const ExperimentResult& r);

[[nodiscard]] std::string format_json(const std::vector<ExperimentResult>& results);

[[nodiscard]] std::string format_csv(const std::vector<ExperimentResult>& results);

// Queue length, running requests, KV usage and the cumulative hit rate over simulated time, one row per sample and
// experiment (identity columns first): queue growth and KV pressure as the run unfolds.
[[nodiscard]] std::string format_timeseries_csv(const std::vector<ExperimentResult>& results);

// Per measured finished request (like vllm bench serve --save-detailed): arrival, queue, TTFT, ITL mean/max, E2E,
// prompt/cached/output tokens, preemptions; one row per request, by arrival, per experiment (and replicate run).
[[nodiscard]] std::string format_requests_csv(const std::vector<ExperimentResult>& results);

// Replicates split in two clusters (`bistable`): sorted, the largest gap between neighbours exceeds
// kBistableGapFraction of the range with at least two values on each side, and the range is at least
// kBistableMinRelativeRange of |mean| and at least `min_range` (so run-to-run noise around one value is not
// flagged). Returns the number of values below the gap, or nullopt. Tested on the headline figures
// (kBistableFigures); a fraction (hit rate) needs a range of 0.02 (two percentage points).
inline constexpr double kBistableGapFraction = 0.5;
inline constexpr double kBistableMinRelativeRange = 0.10;
inline constexpr std::array<const char*, 5> kBistableFigures = {"prefix_cache_hit_rate", "ttft_ms_p50", "itl_ms_p50",
                                                                "e2e_ms_p50", "throughput_rps"};
[[nodiscard]] std::optional<std::size_t> bimodal_split(std::vector<double> values, double min_range = 0);

// run: figures as rows, experiments as columns. sweep: a headline (what was simulated; per model the highest swept
// load that ran ok and where it broke) over one row per point with the figures a planner reads (status, TTFT and
// TPOT p50/p99, throughput, hit rate, peak KV usage); `all_columns` (--all-columns): the headline over every figure,
// points as columns. An order-only sweep prints one row per point with every figure.
[[nodiscard]] std::string format_table(const std::vector<ExperimentResult>& results, bool sweep,
                                       bool all_columns = false);

// Fixed-point text for a number, never an exponent. `decimals` < 0: up to 6 decimals, trailing zeros dropped (CSV).
[[nodiscard]] std::string number_text(double v, int decimals);

// A CSV field: quoted (with doubled quotes) when it holds a comma, a quote or a newline.
[[nodiscard]] std::string csv_escape(const std::string& s);

// `--out DIR`: creates the folder and writes a probe file in it, so that a run never ends on "cannot write"; throws
// ConfigError naming the folder when it cannot be created or written. Called before anything is simulated.
void check_out_dir(const std::string& out_dir);

}  // namespace servesim::app
