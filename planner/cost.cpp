// Prices, cost per token and the Pareto frontier; see cost.h.
#include "planner/cost.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/yaml_reader.h"

namespace servesim::planner {

std::string GpuPrice::describe(const std::string& table_source) const {
    if (cited()) {
        return fmt::format("${:.2f}/GPU-h ({}, {})", usd_per_gpu_hour, source, date);
    }
    return fmt::format("${:.2f}/GPU-h ({}, uncited: no source or date given)", usd_per_gpu_hour, table_source);
}

double PriceTable::price(const std::string& gpu) const {
    const auto it = prices.find(gpu);
    if (it == prices.end()) {
        std::string known;
        for (const auto& [name, p] : prices) {
            known += (known.empty() ? "" : ", ") + name;
        }
        throw ConfigError(fmt::format("no price for GPU '{}' ({}); priced GPUs: {}. Give one with --prices FILE "
                                      "(gpus: {{{}: <$ per GPU-hour>}})",
                                      gpu, source, known, gpu));
    }
    return it->second.usd_per_gpu_hour;
}

PriceTable parse_prices(const std::string& text, const std::string& file, const PriceTable& base) {
    const YAML::Node root = load_yaml_string(text, file);
    if (!root.IsMap()) {
        throw ConfigError(file, 0, "", "expected a mapping with the key 'gpus'");
    }
    for (const auto& kv : root) {
        if (kv.first.Scalar() != "gpus") {
            throw ConfigError(file, kv.first.Mark().line + 1, kv.first.Scalar(), "unknown key; allowed: gpus");
        }
    }
    const YAML::Node gpus = root["gpus"];
    if (!gpus || !gpus.IsMap() || gpus.size() == 0) {
        throw ConfigError(file, 0, "gpus", "expected a mapping of GPU name to $ per GPU-hour");
    }
    PriceTable t = base;
    t.source = file;
    for (const auto& kv : gpus) {
        const std::string key = "gpus." + kv.first.Scalar();
        const int line = kv.second.Mark().line + 1;
        std::string name;
        try {
            name = calibration::find_gpu(kv.first.Scalar()).name;
        } catch (const ConfigError& e) {
            throw ConfigError(file, line, key, e.what());
        }
        GpuPrice p;
        YAML::Node value = kv.second;
        if (value.IsMap()) {
            for (const auto& field : value) {
                const std::string f = field.first.Scalar();
                if (f != "usd_per_gpu_hour" && f != "source" && f != "date") {
                    throw ConfigError(file, field.first.Mark().line + 1, key + "." + f,
                                      "unknown key; allowed: usd_per_gpu_hour, source, date");
                }
            }
            if (!value["usd_per_gpu_hour"]) {
                throw ConfigError(file, line, key, "expected usd_per_gpu_hour (with source and date)");
            }
            if (static_cast<bool>(value["source"]) != static_cast<bool>(value["date"])) {
                throw ConfigError(file, line, key,
                                  "a source needs a date and a date a source (date: YYYY-MM or YYYY-MM-DD)");
            }
            if (value["source"]) {
                p.source = value["source"].Scalar();
                p.date = value["date"].Scalar();
                if (p.source.find_first_not_of(" \t") == std::string::npos) {
                    throw ConfigError(file, line, key + ".source", "must name where the price is listed");
                }
                if (!calibration::is_price_date(p.date)) {
                    throw ConfigError(file, line, key + ".date",
                                      "'" + p.date + "' is not a date; allowed: YYYY-MM or YYYY-MM-DD");
                }
            }
            value = value["usd_per_gpu_hour"];
        }
        double v = 0;
        try {
            v = value.as<double>();
        } catch (const YAML::Exception&) {
            throw ConfigError(file, line, key, "expected a number of $ per GPU-hour, got '" + value.Scalar() + "'");
        }
        if (!(v > 0) || !std::isfinite(v)) {
            throw ConfigError(file, line, key, fmt::format("a price must be a positive number, got {}", v));
        }
        p.usd_per_gpu_hour = v;
        t.prices[name] = p;
    }
    return t;
}

PriceTable default_prices() {
    // One source of truth: each GPU file's cited price (calibration/gpus/*.yaml); unpriced GPUs are absent.
    PriceTable t;
    for (const auto& g : calibration::gpu_catalog()) {
        if (g.usd_per_gpu_hour) {
            t.prices[g.name] = GpuPrice{*g.usd_per_gpu_hour, g.price_source, g.price_date};
        }
    }
    t.source = "built-in cited prices, calibration/gpus/*.yaml";
    return t;
}

std::optional<GpuPrice> PriceTable::price_of(const calibration::GpuSpec& gpu) const {
    if (const auto it = prices.find(gpu.name); it != prices.end()) {
        return it->second;
    }
    // A user GPU file (not a catalog entry, whose price is already in the built-in table or replaced by --prices)
    // that carries its own price (cited: the GPU file requires it).
    const bool user_file = gpu.file.rfind("calibration/gpus/", 0) != 0;
    if (user_file && gpu.usd_per_gpu_hour) {
        return GpuPrice{*gpu.usd_per_gpu_hour, gpu.price_source, gpu.price_date};
    }
    return std::nullopt;
}

PriceTable read_prices(const std::string& path, const PriceTable& base) {
    return parse_prices(read_input_file(path, "price file"), path, base);
}

std::optional<double> usd_per_million_tokens(int gpus, double usd_per_gpu_hour, double tokens_per_s) {
    if (!(tokens_per_s > 0) || gpus < 1) {
        return std::nullopt;
    }
    return static_cast<double>(gpus) * usd_per_gpu_hour / (tokens_per_s * 3600.0) * 1e6;
}

std::vector<std::size_t> pareto_frontier(const std::vector<double>& cost, const std::vector<double>& latency) {
    std::vector<std::size_t> order(cost.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (cost[a] != cost[b]) {
            return cost[a] < cost[b];
        }
        if (latency[a] != latency[b]) {
            return latency[a] < latency[b];
        }
        return a < b;
    });
    // Sweep by ascending cost: a point joins when it is strictly faster than every cheaper-or-equal point kept.
    std::vector<std::size_t> frontier;
    for (std::size_t i : order) {
        if (frontier.empty() || latency[i] < latency[frontier.back()]) {
            frontier.push_back(i);
        }
    }
    return frontier;
}

}  // namespace servesim::planner
