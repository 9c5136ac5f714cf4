// Sweep fit policy and points files (calibration/sweep_fit.h).
#include "calibration/sweep_fit.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibration/curve_fit.h"
#include "calibration/measurements.h"
#include "common/error.h"
#include "common/input_file.h"

namespace servesim::calibration {

namespace {

std::vector<std::string> split_csv(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) {
        out.push_back(cell);
    }
    return out;
}

}  // namespace

SweepPoints read_sweep_points(const std::string& path) {
    std::ifstream f = open_input_file(path, "sweep points file");
    SweepPoints p;
    std::string line;
    if (!std::getline(f, line)) {
        throw ConfigError(fmt::format("{}: empty sweep points file (want a header: variables…,ms)", path));
    }
    std::vector<std::string> header = split_csv(line);
    if (header.size() < 2 || header.back() != "ms") {
        throw ConfigError(fmt::format("{}:1: header '{}' must list the variables then 'ms'", path, line));
    }
    header.pop_back();
    p.variables = header;
    int line_no = 1;
    while (std::getline(f, line)) {
        ++line_no;
        if (line.empty()) {
            continue;
        }
        const std::vector<std::string> cells = split_csv(line);
        if (cells.size() != p.variables.size() + 1) {
            throw ConfigError(fmt::format("{}:{}: {} values, want {} ({} and ms)", path, line_no, cells.size(),
                                          p.variables.size() + 1, fmt::join(p.variables, ", ")));
        }
        std::vector<double> v;
        for (const auto& c : cells) {
            std::size_t used = 0;
            double d = 0;
            try {
                d = std::stod(c, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != c.size() || !std::isfinite(d)) {
                throw ConfigError(fmt::format("{}:{}: '{}' is not a finite number", path, line_no, c));
            }
            v.push_back(d);
        }
        if (!(v.back() > 0)) {
            throw ConfigError(fmt::format("{}:{}: ms must be > 0, got {}", path, line_no, v.back()));
        }
        p.ms.push_back(v.back());
        v.pop_back();
        p.rows.push_back(std::move(v));
    }
    if (p.ms.empty()) {
        throw ConfigError(fmt::format("{}: no points", path));
    }
    return p;
}

void write_sweep_points(const std::string& path, const SweepPoints& points) {
    std::ofstream f(path);
    f.precision(10);
    for (const auto& v : points.variables) {
        f << v << ",";
    }
    f << "ms\n";
    for (std::size_t i = 0; i < points.ms.size(); ++i) {
        for (double x : points.rows[i]) {
            f << x << ",";
        }
        f << points.ms[i] << "\n";
    }
}

Curve fit_sweep_curve(const std::string& name, const SweepPoints& points) {
    constexpr int kMinimaxIterations = 60;
    if (points.variables.size() == 1) {
        std::vector<double> x;
        for (const auto& r : points.rows) {
            x.push_back(r[0]);
        }
        // Minimax pieces and up to six of them: cuBLAS's tile and wave quantisation put several knees into the
        // GEMM curve, and the profile records (and the issue bounds) the worst relative residual, not the mean.
        PiecewiseOptions options;
        options.max_pieces = 6;
        options.target_max_rel_residual = 0.01;
        options.minimax_iterations = kMinimaxIterations;
        return fit_piecewise_quadratic(name, points.variables[0], x, points.ms, options);
    }
    // Several variables stay relative least squares: one plane cannot follow the latency floor of small decode
    // steps, and the minimax plane would trade the common mid-size batches for those corner points.
    return fit_linear(name, points.variables, points.rows, points.ms, true);
}

std::vector<Curve> fit_attn_prefill_curves(const SweepPoints& points, std::ostream& log) {
    const std::vector<std::string> want{"work", "max_context_tokens"};
    SERVESIM_CHECK(points.variables == want, "attn_prefill points must be [work, max_context_tokens], got [{}]",
                   fmt::join(points.variables, ", "));
    auto no_cache = [](const std::vector<double>& r) { return std::fabs(r[0] - r[1] * r[1] / 2.0) <= 1e-4 * r[0]; };
    SweepPoints fresh;
    fresh.variables = {"work"};
    for (std::size_t i = 0; i < points.ms.size(); ++i) {
        if (no_cache(points.rows[i])) {
            fresh.rows.push_back({points.rows[i][0]});
            fresh.ms.push_back(points.ms[i]);
        }
    }
    SERVESIM_CHECK(fresh.ms.size() >= 3, "attn_prefill: {} points without a cached prefix, need at least 3",
                   fresh.ms.size());
    const Curve work_curve = fit_sweep_curve("attn_prefill", fresh);
    std::vector<Curve> out = {work_curve};
    std::vector<double> span_x;
    std::vector<double> span_y;
    for (std::size_t i = 0; i < points.ms.size(); ++i) {
        if (!no_cache(points.rows[i]) && points.ms[i] > 1.05 * work_curve.evaluate(points.rows[i][0])) {
            span_x.push_back(points.rows[i][1]);
            span_y.push_back(points.ms[i]);
        }
    }
    if (span_x.size() >= 2) {
        // A line: one query tile streams cached + chunk keys, so the span grows linearly with them. It is a lower
        // bound of the time (Brent: T ≥ max(W/P, S)), so it must not rise above a fresh prompt's measured time
        // either: short fresh prompts are span-bound too (a 64-token prompt is one tile per head). Fresh points
        // the line over-predicts join its fit, twice over.
        std::vector<std::vector<double>> rows;
        for (double v : span_x) {
            rows.push_back({v});
        }
        std::vector<double> ys = span_y;
        Curve line = fit_linear("attn_prefill_span", {"max_context_tokens"}, rows, ys, true, 60);
        std::vector<bool> joined(points.ms.size(), false);
        for (int round = 0; round < 2; ++round) {
            bool added = false;
            for (std::size_t i = 0; i < points.ms.size(); ++i) {
                const auto& c = line.pieces[0].coefficients;  // fit_linear's [c0, c1]: evaluate by hand
                if (no_cache(points.rows[i]) && !joined[i] && c[0] + c[1] * points.rows[i][1] > points.ms[i] * 1.001) {
                    joined[i] = true;
                    rows.push_back({points.rows[i][1]});
                    ys.push_back(points.ms[i]);
                    added = true;
                }
            }
            if (!added) {
                break;
            }
            line = fit_linear("attn_prefill_span", {"max_context_tokens"}, rows, ys, true, 60);
        }
        Curve span;
        span.name = "attn_prefill_span";
        span.variables = {"max_context_tokens"};
        // x_min 0: the line holds down to short spans (a fresh 512-token prompt spans 512 keys), where clamping to
        // the smallest measured span would price it like a chunk on a 1k prefix.
        span.pieces.push_back({0.0, line.pieces[0].x_max,
                               {line.pieces[0].coefficients[0], line.pieces[0].coefficients[1], 0.0}});
        span.r2 = line.r2;
        span.max_rel_residual = line.max_rel_residual;
        span.num_points = line.num_points;
        out.push_back(std::move(span));
    }
    double worst = 0;
    for (std::size_t i = 0; i < points.ms.size(); ++i) {
        double f = work_curve.evaluate(points.rows[i][0]);
        if (out.size() > 1) {
            f = std::max(f, out[1].evaluate(points.rows[i][1]));
        }
        worst = std::max(worst, std::fabs(f - points.ms[i]) / points.ms[i]);
    }
    log << fmt::format("  attn_prefill work-span: {} points without cache, {} span-bound, max(work, span) within "
                       "{:.1f} % of all {} points\n",
                       fresh.ms.size(), span_x.size(), 100 * worst, points.ms.size());
    return out;
}

HardwareProfile refit_profile(const HardwareProfile& profile, const std::string& points_dir, std::ostream& log) {
    HardwareProfile p = profile;
    std::vector<Curve> prefill_pair;
    for (auto& [name, curve] : p.curves) {
        if (name == "attn_prefill_span") {
            continue;  // refitted with attn_prefill
        }
        const std::string path = (std::filesystem::path(points_dir) / (name + ".csv")).string();
        if (!std::filesystem::exists(path)) {
            log << fmt::format("  {:<14} kept (no {})\n", name, path);
            continue;
        }
        const SweepPoints pts = read_sweep_points(path);
        if (pts.variables != curve.variables) {
            // The points decide the curve's variables (a newer sweep may carry more); validate_profile below
            // rejects a set the curve kind does not allow.
            log << fmt::format("  {:<14} variables ({}) → ({})\n", name, fmt::join(curve.variables, ", "),
                               fmt::join(pts.variables, ", "));
        }
        if (name == "attn_prefill" && pts.variables.size() == 2) {
            prefill_pair = fit_attn_prefill_curves(pts, log);
            continue;
        }
        Curve refit = fit_sweep_curve(name, pts);
        log << fmt::format("  {:<14} {} pieces, R² {:.5f}, max residual {:.1f} % → {} pieces, R² {:.5f}, {:.1f} %\n",
                           name, curve.pieces.size(), curve.r2, 100 * curve.max_rel_residual, refit.pieces.size(),
                           refit.r2, 100 * refit.max_rel_residual);
        curve = std::move(refit);
    }
    if (!prefill_pair.empty()) {
        p.curves.erase("attn_prefill_span");
        for (auto& c : prefill_pair) {
            p.curves[c.name] = std::move(c);
        }
    }
    const std::regex prefill_case(R"(^[a-z]+_prefill_T([0-9]+)$)");
    const std::regex decode_case(R"(^[a-z]+_decode_B([0-9]+)_C([0-9]+)$)");
    for (auto& c : p.composition_check) {
        std::smatch m;
        if (std::regex_match(c.case_name, m, prefill_case)) {
            c.predicted_ms = predict_prefill_ms(p, std::stod(m[1].str()), 0);
        } else if (std::regex_match(c.case_name, m, decode_case)) {
            c.predicted_ms = predict_decode_ms(p, std::stod(m[1].str()), std::stod(m[2].str()));
        } else {
            log << fmt::format("  composition case {} kept as recorded (not a whole-step case)\n", c.case_name);
        }
    }
    validate_profile(p, points_dir);
    return p;
}

}  // namespace servesim::calibration
