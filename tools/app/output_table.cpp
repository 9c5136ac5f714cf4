// The table for people (`--format table`): figures as rows and experiments as columns for a run; for a sweep a
// headline (what was simulated, then per model the highest swept load that ran `ok` and where it broke) over one row
// per point with the figures a capacity planner reads (TTFT/TPOT p50/p99, throughput, hit rate, KV usage, status);
// `--all-columns` prints every figure, points as columns. See output.h; docs/OUTPUTS.md "The table".
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "tools/app/output.h"
#include "tools/app/output_fields.h"

namespace servesim::app {

namespace {

// Widths in code points ("—" and "–" are one column wide, three bytes).
std::size_t width_of(const std::string& s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
}

// Figures as rows, one column per result (headed by its name): every field.
std::string side_by_side(const std::vector<ExperimentResult>& results, const std::vector<std::vector<Field>>& rows) {
    std::string out;
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

// Columns `cols` of `rows`, taken in the order `order`, left-aligned two spaces apart under a header line.
std::string point_rows(const std::vector<std::vector<Field>>& rows, const std::vector<std::string>& cols,
                       const std::vector<std::size_t>& order) {
    std::vector<std::vector<std::string>> text;
    for (std::size_t i : order) {
        std::vector<std::string> line;
        for (const auto& c : cols) {
            line.push_back(table_cell(rows[i], c));
        }
        text.push_back(line);
    }
    std::vector<std::size_t> width(cols.size());
    for (std::size_t i = 0; i < cols.size(); ++i) {
        width[i] = width_of(cols[i]);
        for (const auto& line : text) {
            width[i] = std::max(width[i], width_of(line[i]));
        }
    }
    auto pad = [&](const std::string& s, std::size_t w) { return s + std::string(w - width_of(s), ' ') + "  "; };
    std::string out;
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

std::string join(const std::vector<std::string>& parts, const std::string& last_sep) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        out += (i == 0 ? "" : i + 1 == parts.size() ? last_sep : ", ") + parts[i];
    }
    return out;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) {
        v.push_back(s);
    }
}

// A latency for the headline: seconds from 1 s, whole ms from 100 ms, else one decimal.
std::string short_ms(double ms) {
    if (ms >= 1000) {
        return fmt::format("{:.2f} s", ms / 1000);
    }
    return ms >= 100 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} ms", ms);
}

// The swept column that carries the load: the last swept key whose values are all numbers (a rate, a tenant count,
// a concurrency). Empty when there is none (a sweep over GPUs or policies only).
std::string load_column(const std::vector<ExperimentResult>& results) {
    std::string load;
    for (const auto& [key, value] : results.front().config.columns) {
        if (key == "experiment") {
            continue;
        }
        const bool numeric = std::all_of(results.begin(), results.end(), [&key = key](const ExperimentResult& r) {
            for (const auto& [k, v] : r.config.columns) {
                if (k == key) {
                    const Cell c = typed_value(k, v);
                    return std::holds_alternative<std::int64_t>(c) || std::holds_alternative<double>(c);
                }
            }
            return false;
        });
        if (numeric) {
            load = key;
        }
    }
    return load;
}

std::string column_value(const ExperimentResult& r, const std::string& key) {
    for (const auto& [k, v] : r.config.columns) {
        if (k == key) {
            return v;
        }
    }
    return "";
}

double load_value(const ExperimentResult& r, const std::string& key) {
    const Cell c = typed_value(key, column_value(r, key));
    return std::holds_alternative<std::int64_t>(c) ? static_cast<double>(std::get<std::int64_t>(c))
                                                   : std::get<double>(c);
}

// A group of points that differ only in the load: the experiment (or the model) and the other swept values.
std::string group_label(const ExperimentResult& r, const std::string& load) {
    std::string label = column_value(r, "experiment");
    if (label.empty()) {
        label = r.model_name;
    }
    for (const auto& [k, v] : r.config.columns) {
        if (k != "experiment" && k != load) {
            label += " " + k + "=" + v;
        }
    }
    return label;
}

// The cause of a status, short: its reason up to the first colon ("the clients were held back").
std::string short_reason(const ExperimentResult& r) {
    const std::string& why = r.status_reason;
    const auto colon = why.find(':');
    return why.substr(0, colon == std::string::npos ? why.size() : colon);
}

// Headline of a timed sweep: what was simulated, then one line per group with the answer. `order` receives the
// points grouped (first appearance) and by load within a group, for the rows under it.
std::string sweep_headline(const std::vector<ExperimentResult>& results, std::vector<std::size_t>& order) {
    std::vector<std::string> models, gpus;
    for (const auto& r : results) {
        add_unique(models, r.model_name);
        add_unique(gpus, r.gpu_name);
    }
    const std::string load = load_column(results);
    std::vector<std::string> what;
    for (const auto& [key, value] : results.front().config.columns) {
        if (key == "experiment") {
            continue;
        }
        std::vector<std::string> values;
        for (const auto& r : results) {
            add_unique(values, column_value(r, key));
        }
        what.push_back(key + " = " + join(values, ", "));
    }
    std::string out = fmt::format("simulated: {} on {} ({}){}{} (first point: {})\n", join(models, " and "),
                                  join(gpus, " and "), results.front().config.cost_model,
                                  what.empty() ? "" : ", ", join(what, "; "), results.front().workload);
    if (load.empty()) {
        return out;
    }
    std::vector<std::string> labels;
    for (const auto& r : results) {
        add_unique(labels, group_label(r, load));
    }
    std::size_t label_width = 0;
    for (const auto& l : labels) {
        label_width = std::max(label_width, width_of(l));
    }
    order.clear();
    for (const auto& label : labels) {
        std::vector<std::size_t> points;
        for (std::size_t i = 0; i < results.size(); ++i) {
            if (group_label(results[i], load) == label) {
                points.push_back(i);
            }
        }
        std::stable_sort(points.begin(), points.end(), [&](std::size_t a, std::size_t b) {
            return load_value(results[a], load) < load_value(results[b], load);
        });
        order.insert(order.end(), points.begin(), points.end());
        // The answer: the highest load below the first point that is not ok, and that point.
        const auto broke = std::find_if(points.begin(), points.end(),
                                        [&](std::size_t i) { return results[i].status != RunStatus::kOk; });
        auto at = [&](std::size_t i) { return load + " = " + column_value(results[i], load); };
        auto figures = [&](std::size_t i) {
            const auto& s = results[i].sim.summary;
            std::string f = "TTFT p99 " + (s.ttft_ms.count > 0 ? short_ms(s.ttft_ms.p99) : std::string("—"));
            f += ", TPOT p99 " + (s.tpot_ms.count > 0 ? short_ms(s.tpot_ms.p99) : std::string("—"));
            return f + fmt::format(", {:.1f} req/s served", s.throughput_rps);
        };
        std::string answer;
        if (broke == points.end()) {
            answer = fmt::format("ok at every point, up to {} ({}): the knee is beyond the sweep", at(points.back()),
                                 figures(points.back()));
        } else {
            const RunStatus st = results[*broke].status;
            const std::string reason = short_reason(results[*broke]);
            const std::string where = fmt::format("{} from {}{}", run_status_name(st), at(*broke),
                                                  reason.empty() ? "" : " (" + reason + ")");
            if (broke == points.begin()) {
                answer = "not ok at the lowest point: " + where;
            } else {
                answer = fmt::format("ok up to {} ({}); {}", at(*(broke - 1)), figures(*(broke - 1)), where);
            }
            const auto again = std::find_if(broke, points.end(),
                                            [&](std::size_t i) { return results[i].status == RunStatus::kOk; });
            if (again != points.end()) {
                answer += "; ok again at " + at(*again);
            }
        }
        out += "  " + label + std::string(label_width - width_of(label), ' ') + "  " + answer + "\n";
    }
    out += "  (ok: no queue growth, clients not held back, no latency growth: docs/OUTPUTS.md \"Status and "
           "warnings\"; every figure: --all-columns)\n\n";
    return out;
}

}  // namespace

std::string format_table(const std::vector<ExperimentResult>& results, bool sweep, bool all_columns) {
    if (results.empty()) {
        return "";
    }
    std::vector<std::vector<Field>> rows;
    for (const auto& r : results) {
        rows.push_back(fields(r));
    }
    if (!sweep) {
        return side_by_side(results, rows);
    }
    std::vector<std::size_t> order(results.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    if (results.front().order_only) {
        // One row per point: identity columns, then every figure (an order-only run has few).
        std::vector<std::string> cols;
        for (const auto& [k, v] : results.front().config.columns) {
            cols.push_back(k);
        }
        for (const auto& name : header_of(rows)) {
            if (name != "name" && std::find(cols.begin(), cols.end(), name) == cols.end()) {
                cols.push_back(name);
            }
        }
        return point_rows(rows, cols, order);
    }
    std::string out = sweep_headline(results, order);
    if (all_columns) {
        std::vector<ExperimentResult> sorted;
        std::vector<std::vector<Field>> sorted_rows;
        for (std::size_t i : order) {
            sorted.push_back(results[i]);
            sorted_rows.push_back(rows[i]);
        }
        return out + side_by_side(sorted, sorted_rows);
    }
    // One row per point: the model, the swept keys, then the figures a planner reads.
    std::vector<std::string> cols;
    const bool experiment_is_model = std::all_of(results.begin(), results.end(), [](const ExperimentResult& r) {
        return column_value(r, "experiment").empty() || column_value(r, "experiment") == r.model_name;
    });
    for (const auto& [k, v] : results.front().config.columns) {
        if (!(k == "experiment" && experiment_is_model)) {
            cols.push_back(k);
        }
    }
    if (std::find(cols.begin(), cols.end(), "model") == cols.end()) {
        cols.insert(cols.begin(), "model");
    }
    std::vector<std::string> figures = {"status",         "ttft_ms_p50",           "ttft_ms_p99",
                                        "tpot_ms_p50",    "tpot_ms_p99",           "throughput_rps",
                                        "prefix_cache_hit_rate", "kv_usage_max"};
    if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.config.goodput.any(); })) {
        figures.push_back("request_goodput");
    }
    if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.sim.speculative.has_value(); })) {
        figures.push_back("spec_mean_acceptance_length");
    }
    if (results.front().replicate_runs.size() > 1) {
        figures.push_back("bistable");
    }
    cols.insert(cols.end(), figures.begin(), figures.end());
    return out + point_rows(rows, cols, order);
}

}  // namespace servesim::app
