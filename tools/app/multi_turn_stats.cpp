// The multi-turn benchmark's statistics summary; see multi_turn_stats.h and docs/OUTPUTS.md.
#include "tools/app/multi_turn_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/error.h"

namespace servesim::app {
namespace {

// pandas Series.quantile (interpolation "linear", numpy's default) over ascending, non-empty `sorted`; q in percent.
double linear_quantile(const std::vector<double>& sorted, double q_percent) {
    const double rank = q_percent / 100.0 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

MultiTurnStatsRow describe(const std::string& metric, std::vector<double> values,
                           const std::vector<double>& quantiles_percent) {
    MultiTurnStatsRow row;
    row.metric = metric;
    row.count = static_cast<std::int64_t>(values.size());
    double sum = 0;
    for (double v : values) {
        sum += v;
    }
    row.mean = sum / static_cast<double>(values.size());
    if (values.size() > 1) {
        double sq = 0;
        for (double v : values) {
            sq += (v - row.mean) * (v - row.mean);
        }
        row.std_dev = std::sqrt(sq / static_cast<double>(values.size() - 1));  // pandas std: ddof = 1
    }
    std::sort(values.begin(), values.end());
    row.min = values.front();
    row.max = values.back();
    for (double q : quantiles_percent) {
        row.quantiles.push_back(linear_quantile(values, q));
    }
    return row;
}

// Display width of UTF-8 text (code points; "—" is one).
std::size_t width_of(const std::string& s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad_left(const std::string& s, std::size_t width) {
    const std::size_t w = width_of(s);
    return w >= width ? s : std::string(width - w, ' ') + s;
}

std::string format_table(const MultiTurnStats& stats, double warmup_fraction, bool several);

// The summary of one run: the tool's parameter block, its statistics summary lines and the describe() table
// (pandas display.precision 2: every cell with two decimals, the count included, as describe() makes it a float;
// columns right-aligned, two spaces apart, as pandas prints a frame).
std::string format_one(const ExperimentResult& r, const std::vector<double>& warmup_fractions) {
    const std::string rule(100, '-');  // bench_utils.TEXT_SEPARATOR
    std::string out = rule + "\n";
    out += "Parameters:\n";
    out += fmt::format("name={}\n", r.config.name);
    out += fmt::format("model={}\n", r.model_name);
    out += fmt::format("seed={}\n", r.config.seed);
    out += fmt::format("status={}\n", run_status_name(r.status));
    out += fmt::format("vllm_version={}\n", r.config.engine.vllm_version);
    out += fmt::format("cost_model={}\n", r.cost_model);
    out += fmt::format("workload={}\n", r.workload);
    out += rule + "\n";
    if (r.sim.summary.requests.empty()) {
        out += "No samples to process (no measured request finished)\n";
        out += rule + "\n";
        return out;
    }
    for (double fraction : warmup_fractions) {
        const auto stats = multi_turn_stats(r.sim.summary.requests, fraction);
        if (!stats) {
            break;  // no sample left after this warm-up (nor after a larger one)
        }
        out += format_table(*stats, fraction, warmup_fractions.size() > 1);
    }
    return out;
}

// One statistics summary: its heading, runtime_sec and requests_per_sec, and the describe() table.
std::string format_table(const MultiTurnStats& stats, double warmup_fraction, bool several) {
    const std::string rule(100, '-');
    std::string out;
    // Python's {:.0%}: the fraction as a whole percentage.
    out += warmup_fraction > 0 || several
               ? fmt::format("Statistics summary (assuming {:.0f}% warmup samples):\n", warmup_fraction * 100)
               : std::string("Statistics summary:\n");
    out += fmt::format("runtime_sec = {:.3f}\n", stats.runtime_sec);
    out += stats.requests_per_sec ? fmt::format("requests_per_sec = {:.3f}\n", *stats.requests_per_sec)
                                   : std::string("requests_per_sec = —\n");
    out += rule + "\n";
    std::vector<std::string> header = {"count", "mean", "std", "min"};
    for (double q : stats.quantiles_percent) {
        header.push_back(fmt::format("{}%", q));
    }
    header.push_back("max");
    std::vector<std::vector<std::string>> cells;
    std::size_t label_width = 0;
    for (const auto& row : stats.rows) {
        std::vector<std::string> c = {fmt::format("{:.2f}", static_cast<double>(row.count)),
                                      fmt::format("{:.2f}", row.mean),
                                      row.std_dev ? fmt::format("{:.2f}", *row.std_dev) : "—",
                                      fmt::format("{:.2f}", row.min)};
        for (double v : row.quantiles) {
            c.push_back(fmt::format("{:.2f}", v));
        }
        c.push_back(fmt::format("{:.2f}", row.max));
        cells.push_back(std::move(c));
        label_width = std::max(label_width, row.metric.size());
    }
    // pandas then drops the trailing zeros that every number of a column shares, keeping one decimal (its float
    // formatter's _trim_zeros_float): a count of 163 prints as 163.0, a column of 6.00, 20.00, 4.50 as 6.0, 20.0, 4.5.
    for (std::size_t j = 0; j < header.size(); ++j) {
        auto trimmable = [&] {
            bool any = false;
            for (const auto& c : cells) {
                const std::string& t = c[j];
                if (t == "—") {
                    continue;  // NaN is left out of pandas' test
                }
                any = true;
                if (t.back() != '0' || t.size() < 3 || t[t.size() - 2] == '.') {
                    return false;
                }
            }
            return any;
        };
        while (trimmable()) {
            for (auto& c : cells) {
                if (c[j] != "—") {
                    c[j].pop_back();
                }
            }
        }
    }
    std::vector<std::size_t> width(header.size());
    for (std::size_t j = 0; j < header.size(); ++j) {
        width[j] = width_of(header[j]);
        for (const auto& c : cells) {
            width[j] = std::max(width[j], width_of(c[j]));
        }
    }
    out += std::string(label_width, ' ');
    for (std::size_t j = 0; j < header.size(); ++j) {
        out += "  " + pad_left(header[j], width[j]);
    }
    out += "\n";
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::string& label = stats.rows[i].metric;
        out += label + std::string(label_width - label.size(), ' ');
        for (std::size_t j = 0; j < header.size(); ++j) {
            out += "  " + pad_left(cells[i][j], width[j]);
        }
        out += "\n";
    }
    out += rule + "\n";
    return out;
}

}  // namespace

std::optional<MultiTurnStats> multi_turn_stats(const std::vector<metrics::RequestRecord>& requests,
                                               double warmup_fraction) {
    if (requests.empty()) {
        return std::nullopt;
    }
    // process_statistics sorts the samples by start time. The records are in finish order, so a stable sort puts,
    // among requests sent at the same instant, the one that finished last at the end (pandas' default sort is not
    // stable; servesim fixes the tie so the output is deterministic).
    std::vector<metrics::RequestRecord> recs = requests;
    std::stable_sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
    MultiTurnStats s;
    // More quantiles once there are enough samples, counted before the warm-up is cut (process_statistics).
    s.quantiles_percent = {25, 50, 75, 90};
    if (recs.size() >= 100) {
        s.quantiles_percent.push_back(99);
    }
    if (recs.size() >= 1000) {
        s.quantiles_percent.push_back(99.9);
    }
    if (recs.size() >= 10000) {
        s.quantiles_percent.push_back(99.99);
    }
    // The warm-up samples are the first int(fraction · n) rows; the tail is kept.
    const auto warmup_count =
        static_cast<std::size_t>(std::floor(warmup_fraction * static_cast<double>(recs.size())));
    recs.erase(recs.begin(), recs.begin() + static_cast<std::ptrdiff_t>(std::min(warmup_count, recs.size())));
    if (recs.empty()) {
        return std::nullopt;
    }
    // Runtime: the end of the last row (the last-started request, not necessarily the last to finish) − the start of
    // the first row, as process_statistics takes it.
    const double first_start_ms = recs.front().arrival_s * 1000.0;
    const double last_end_ms = recs.back().arrival_s * 1000.0 + recs.back().e2e_ms;
    s.runtime_sec = (last_end_ms - first_start_ms) / 1000.0;
    if (s.runtime_sec > 0) {
        s.requests_per_sec = static_cast<double>(recs.size()) / s.runtime_sec;
    }
    std::vector<double> ttft, tpot, latency, turns, input_tokens, output_tokens, chunks;
    for (const auto& q : recs) {
        // One token per streamed chunk (stream_interval 1), so send_turn's first-chunk correction of TTFT is nil and
        // its TPOT is (latency − TTFT)/(output tokens − 1), 0 for a one-token answer (the tool keeps that 0).
        ttft.push_back(q.ttft_ms);
        tpot.push_back(q.tpot_ms());
        latency.push_back(q.e2e_ms);
        // len(messages): the history's user and assistant messages plus this user message.
        turns.push_back(q.turn > 0 ? 2.0 * q.turn - 1.0 : 1.0);
        input_tokens.push_back(static_cast<double>(q.prompt_tokens));
        output_tokens.push_back(static_cast<double>(q.output_tokens));
        // The tool counts the content chunks after the first one.
        chunks.push_back(static_cast<double>(q.output_tokens - 1));
    }
    s.rows.push_back(describe("ttft_ms", std::move(ttft), s.quantiles_percent));
    s.rows.push_back(describe("tpot_ms", std::move(tpot), s.quantiles_percent));
    s.rows.push_back(describe("latency_ms", std::move(latency), s.quantiles_percent));
    s.rows.push_back(describe("input_num_turns", std::move(turns), s.quantiles_percent));
    s.rows.push_back(describe("input_num_tokens", std::move(input_tokens), s.quantiles_percent));
    s.rows.push_back(describe("output_num_tokens", std::move(output_tokens), s.quantiles_percent));
    s.rows.push_back(describe("output_num_chunks", std::move(chunks), s.quantiles_percent));
    return s;
}

std::vector<double> parse_warmup_percentages(const std::string& text) {
    std::vector<double> out;
    std::string cur;
    auto take = [&] {
        std::string t;
        for (char ch : cur) {
            if (ch != ' ' && ch != '%') {
                t += ch;
            }
        }
        double v = 0;
        const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size() || !(v >= 0 && v < 100)) {
            throw ConfigError("--warmup-percentages: '" + cur + "' is not a percentage; give percentages in [0, 100), "
                              "e.g. 0%,50%");
        }
        out.push_back(v / 100.0);
        cur.clear();
    };
    for (char ch : text) {
        if (ch == ',') {
            take();
        } else {
            cur += ch;
        }
    }
    take();
    std::sort(out.begin(), out.end());
    return out;
}

std::string format_multi_turn_bench(const std::vector<ExperimentResult>& results,
                                    const std::vector<double>& warmup_fractions) {
    std::string out;
    for (const auto& point : results) {
        if (point.order_only) {
            throw ConfigError("--format multi-turn-bench: `mode: order_only` has no timings (no TTFT, TPOT or "
                              "latency per request); use table, csv or json");
        }
    }
    for (const auto& point : results) {
        for (const ExperimentResult* run : runs_of(point)) {
            out += format_one(*run, warmup_fractions);
        }
    }
    return out;
}

}  // namespace servesim::app
