// What a deployment costs per token (docs/PLANNER.md): GPU-hour prices kept as data, each with its source and date
// (each GPU file's price_usd_per_gpu_hour, price_source, price_date, calibration/gpus/*.yaml, embedded; a user price
// file replaces or extends them), the cost of serving a million tokens at a measured throughput, and the Pareto
// frontier of cost against a latency figure.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"

namespace servesim::planner {

// One GPU's price and its citation. A price without a source and a date (a bare number in a --prices file) is
// uncited and says so wherever it is printed (docs/GPUS.md "Prices").
struct GpuPrice {
    double usd_per_gpu_hour = 0;
    std::string source;  // where it is listed; empty = uncited
    std::string date;    // YYYY-MM or YYYY-MM-DD; empty = uncited
    [[nodiscard]] bool cited() const { return !source.empty() && !date.empty(); }
    // "$6.35/GPU-h (RunPod …, 2026-03)" or "$2.49/GPU-h (prices.yaml, uncited: no source or date given)".
    [[nodiscard]] std::string describe(const std::string& table_source) const;
};

// $ per GPU-hour by canonical GPU name (calibration::find_gpu's names).
struct PriceTable {
    std::map<std::string, GpuPrice> prices;
    std::string source;  // where the table came from (a file, or the built-in GPU files)

    // The price of `gpu`; ConfigError naming the GPU and the priced ones when missing.
    [[nodiscard]] double price(const std::string& gpu) const;

    // The table's price for the GPU's name; else, for a user GPU file that names none here, its own cited price;
    // else nullopt: the GPU is unpriced (the planner plans it and prints `unpriced` for its cost).
    [[nodiscard]] std::optional<GpuPrice> price_of(const calibration::GpuSpec& gpu) const;
};

// The built-in table: the cited price of every catalog GPU whose file gives one (calibration/gpus/*.yaml).
[[nodiscard]] PriceTable default_prices();

// Reads a price file: `gpus: {H100: 2.49, …}` (uncited) or `gpus: {H100: {usd_per_gpu_hour: 2.49, source: "…",
// date: "2026-11"}, …}` (names as `servesim list` prints them, any spelling find_gpu accepts); every price a positive
// finite number; a source needs a date and a date a source. `base` supplies GPUs the file does not name.
[[nodiscard]] PriceTable read_prices(const std::string& path, const PriceTable& base);
[[nodiscard]] PriceTable parse_prices(const std::string& text, const std::string& file_for_errors,
                                      const PriceTable& base);

// Dollars per million tokens when `gpus` GPUs at `usd_per_gpu_hour` each serve `tokens_per_s`: the hourly bill over
// the tokens served in an hour. nullopt when nothing was served (no cost per token exists).
[[nodiscard]] std::optional<double> usd_per_million_tokens(int gpus, double usd_per_gpu_hour, double tokens_per_s);

// Indices of the points on the Pareto frontier of (cost, latency), both to minimise: a point is on it when no other
// point is at most as costly and at most as slow and strictly better in one. Returned by ascending cost (ties by
// latency, then index), so the list reads as "pay more, wait less".
[[nodiscard]] std::vector<std::size_t> pareto_frontier(const std::vector<double>& cost,
                                                       const std::vector<double>& latency);

}  // namespace servesim::planner
