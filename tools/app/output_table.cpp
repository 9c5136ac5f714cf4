// The table for people (`--format table`): figures as rows and experiments as columns for a run, one row per point
// with the headline figures for a sweep; see output.h.
#include <fmt/format.h>

#include <algorithm>

#include "tools/app/output.h"
#include "tools/app/output_fields.h"

namespace servesim::app {

std::string format_table(const std::vector<ExperimentResult>& results, bool sweep) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    std::vector<std::vector<Field>> rows;
    for (const auto& r : results) {
        rows.push_back(fields(r));
    }
    if (sweep) {
        // One row per point: identity columns, then what answered it and the headline figures.
        std::vector<std::string> cols;
        for (const auto& [k, v] : results.front().config.columns) {
            cols.push_back(k);
        }
        std::vector<std::string> figures;
        if (results.front().order_only) {
            for (const auto& name : header_of(rows)) {
                if (name != "name" && std::find(cols.begin(), cols.end(), name) == cols.end()) {
                    figures.push_back(name);
                }
            }
        } else {
            if (std::find(cols.begin(), cols.end(), "model") == cols.end()) {
                cols.insert(cols.begin(), "model");
            }
            figures = {"status", "prefix_cache_hit_rate", "ttft_ms_p50", "itl_ms_p50", "itl_ms_mean",
                       "itl_ms_p99", "offered_rps", "sent_rps", "throughput_rps"};
            const bool goodput = std::any_of(results.begin(), results.end(),
                                             [](const auto& r) { return r.config.goodput.any(); });
            if (goodput) {
                figures.push_back("request_goodput");
            }
            figures.insert(figures.end(), {"kv_cache_tokens", "effective_block_size", "preemptions"});
            if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.sim.speculative.has_value(); })) {
                figures.insert(figures.end(), {"tpot_ms_mean", "spec_mean_acceptance_length"});
            }
            if (results.front().replicate_runs.size() > 1) {
                figures.push_back("bistable");
            }
        }
        cols.insert(cols.end(), figures.begin(), figures.end());
        std::vector<std::vector<std::string>> text;
        for (const auto& row : rows) {
            std::vector<std::string> line;
            for (const auto& c : cols) {
                line.push_back(table_cell(row, c));
            }
            text.push_back(line);
        }
        // Widths in code points ("—" and "–" are one column wide, three bytes).
        auto width_of = [](const std::string& s) {
            return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char ch) {
                return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
            }));
        };
        std::vector<std::size_t> width(cols.size());
        for (std::size_t i = 0; i < cols.size(); ++i) {
            width[i] = width_of(cols[i]);
            for (const auto& line : text) {
                width[i] = std::max(width[i], width_of(line[i]));
            }
        }
        auto pad = [&](const std::string& s, std::size_t w) { return s + std::string(w - width_of(s), ' ') + "  "; };
        for (std::size_t i = 0; i < cols.size(); ++i) {
            out += pad(cols[i], width[i]);
        }
        out += "\n";
        for (const auto& line : text) {
            for (std::size_t i = 0; i < cols.size(); ++i) {
                out += pad(line[i], width[i]);
            }
            out += "\n";
        }
        return out;
    }
    // Side by side: figures as rows, one identity row (the experiments' names) as the header.
    auto width_of = [](const std::string& s) {
        return static_cast<std::size_t>(
            std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
    };
    std::vector<std::string> names = header_of(rows);
    const bool experiment_is_name = std::all_of(rows.begin(), rows.end(), [](const auto& row) {
        const Cell* e = find_field(row, "experiment");
        const Cell* n = find_field(row, "name");
        return !e || (n && cell_text(*e, -1, "") == cell_text(*n, -1, ""));
    });
    std::vector<std::string> labels;
    for (const auto& n : names) {
        if (n == "name" || (n == "experiment" && experiment_is_name)) {
            continue;
        }
        // A replicated figure is one row, "mean [min–max]"; its _std stays in CSV and JSON.
        auto strip = [&](const std::string& suffix) {
            return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0
                       ? n.substr(0, n.size() - suffix.size())
                       : std::string();
        };
        auto replicated = [&](const std::string& base) {
            return !base.empty() && find_field(rows.front(), base + "_mean") && find_field(rows.front(), base + "_min") &&
                   find_field(rows.front(), base + "_max") && find_field(rows.front(), base + "_std");
        };
        if (replicated(strip("_mean"))) {
            labels.push_back(strip("_mean"));
            continue;
        }
        if (replicated(strip("_min")) || replicated(strip("_max")) || replicated(strip("_std"))) {
            continue;
        }
        labels.push_back(n);
    }
    std::size_t label_width = 0;
    for (const auto& l : labels) {
        label_width = std::max(label_width, width_of(l));
    }
    std::vector<std::vector<std::string>> text(results.size());
    std::vector<std::size_t> width(results.size(), 0);
    for (std::size_t c = 0; c < results.size(); ++c) {
        width[c] = width_of(results[c].config.name);
        for (const auto& l : labels) {
            text[c].push_back(table_cell(rows[c], l));
            width[c] = std::max(width[c], width_of(text[c].back()));
        }
    }
    auto rpad = [&](const std::string& s, std::size_t w) { return std::string(w - width_of(s), ' ') + s + "  "; };
    out += std::string(label_width + 2, ' ');
    for (std::size_t c = 0; c < results.size(); ++c) {
        out += rpad(results[c].config.name, width[c]);
    }
    out += "\n";
    for (std::size_t row = 0; row < labels.size(); ++row) {
        out += labels[row] + std::string(label_width + 2 - width_of(labels[row]), ' ');
        for (std::size_t c = 0; c < results.size(); ++c) {
            out += rpad(text[c][row], width[c]);
        }
        out += "\n";
    }
    return out;
}

}  // namespace servesim::app
