// JSON and CSV (the summary, timeseries.csv and requests.csv) and the --out folder check; see output.h. The columns
// come from output_fields.h; the table is output_table.cpp, vllm-bench output_vllm_bench.cpp, inspect
// output_inspect.cpp.
#include "tools/app/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tools/app/output_fields.h"

namespace servesim::app {

std::vector<std::pair<std::string, Cell>> flatten(const ExperimentResult& r) {
    std::vector<std::pair<std::string, Cell>> out;
    for (auto& f : fields(r)) {
        out.emplace_back(std::move(f.name), std::move(f.value));
    }
    return out;
}

nlohmann::ordered_json to_json(const ExperimentResult& r) {
    nlohmann::ordered_json j;
    for (const auto& f : fields(r)) {
        j[f.name] = cell_json(f.value);
    }
    return j;
}

std::string format_json(const std::vector<ExperimentResult>& results) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results) {
        arr.push_back(to_json(r));
    }
    return arr.dump(2) + "\n";
}

std::string format_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    std::vector<std::vector<Field>> rows;
    for (const auto& r : results) {
        rows.push_back(fields(r));
    }
    const auto header = header_of(rows);
    for (std::size_t i = 0; i < header.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        out += csv_escape(header[i]);
    }
    out += "\n";
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < header.size(); ++i) {
            const Cell* c = find_field(row, header[i]);
            if (i > 0) {
                out += ',';
            }
            out += csv_escape(c ? cell_text(*c, -1, "") : "");
        }
        out += "\n";
    }
    return out;
}

namespace {

// The identity cells of one run's rows in timeseries.csv and requests.csv: name, the sweep columns' values and,
// with `with_seed`, the run's seed.
std::string run_id_csv(const ExperimentResult& r, bool with_seed) {
    std::string id = csv_escape(r.config.name);
    for (const auto& [k, v] : r.config.columns) {
        id += ',';
        id += csv_escape(v);
    }
    if (with_seed) {
        id += fmt::format(",{}", r.config.seed);
    }
    return id;
}

}  // namespace

std::string format_timeseries_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    out += "name";
    for (const auto& [k, v] : results.front().config.columns) {
        out += ',';
        out += csv_escape(k);
    }
    // A seed column only with replicates (one series per seed); without, the columns before t_s are the identity.
    const bool replicated = std::any_of(results.begin(), results.end(),
                                        [](const auto& r) { return r.replicate_runs.size() > 1; });
    out += replicated ? ",seed" : "";
    out += ",t_s,waiting,running,kv_usage,prefix_cache_hit_rate_cumulative\n";
    for (const auto& point : results) {
        for (const ExperimentResult* r : runs_of(point)) {
            const std::string id = run_id_csv(*r, replicated);
            for (const auto& t : r->sim.timeseries) {
                const std::string hit =
                    t.prefix_cache_queries > 0 ? number_text(static_cast<double>(t.prefix_cache_hits) /
                                                                 static_cast<double>(t.prefix_cache_queries),
                                                             -1)
                                               : "";
                out += fmt::format("{},{},{},{},{},{}\n", id, number_text(t.t_s, -1), t.num_waiting, t.num_running,
                                   number_text(t.kv_usage, -1), hit);
            }
        }
    }
    return out;
}

std::string format_requests_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    out += "name";
    for (const auto& [k, v] : results.front().config.columns) {
        out += ',' + csv_escape(k);
    }
    out += ",seed,arrival_s,queue_ms,ttft_ms,itl_mean_ms,itl_max_ms,e2e_ms,prompt_tokens,cached_prompt_tokens,"
           "output_tokens,replica,preemptions\n";
    for (const auto& point : results) {
        for (const ExperimentResult* r : runs_of(point)) {
            if (r->order_only) {
                continue;
            }
            const std::string id = run_id_csv(*r, true);
            std::vector<metrics::RequestRecord> recs = r->sim.summary.requests;
            std::stable_sort(recs.begin(), recs.end(),
                             [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
            for (const auto& q : recs) {
                // With one output token there is no inter-token gap: ITL mean and max are empty.
                const bool gaps = q.has_tpot();
                out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", id, number_text(q.arrival_s, -1),
                                   number_text(q.queue_ms, -1), number_text(q.ttft_ms, -1),
                                   gaps ? number_text(q.tpot_ms(), -1) : "", gaps ? number_text(q.itl_max_ms, -1) : "",
                                   number_text(q.e2e_ms, -1), q.prompt_tokens, q.cached_prompt_tokens,
                                   q.output_tokens, q.replica, q.num_preemptions);
            }
        }
    }
    return out;
}

void check_out_dir(const std::string& out_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir)) {
        throw ConfigError("--out " + out_dir + ": cannot create the folder" + (ec ? " (" + ec.message() + ")" : ""));
    }
    const fs::path probe = fs::path(out_dir) / ".servesim-write-check";
    {
        std::ofstream f(probe);
        f << "x";
        f.flush();
        if (!f) {
            throw ConfigError("--out " + out_dir + ": the folder is not writable");
        }
    }
    fs::remove(probe, ec);
}

}  // namespace servesim::app
