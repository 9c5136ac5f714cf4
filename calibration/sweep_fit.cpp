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
    std::ifstream f(path);
    if (!f) {
        throw ConfigError(fmt::format("{}: cannot open the sweep points file", path));
    }
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

HardwareProfile refit_profile(const HardwareProfile& profile, const std::string& points_dir, std::ostream& log) {
    HardwareProfile p = profile;
    for (auto& [name, curve] : p.curves) {
        const std::string path = (std::filesystem::path(points_dir) / (name + ".csv")).string();
        if (!std::filesystem::exists(path)) {
            log << fmt::format("  {:<14} kept (no {})\n", name, path);
            continue;
        }
        const SweepPoints pts = read_sweep_points(path);
        if (pts.variables != curve.variables) {
            throw ConfigError(fmt::format("{}: variables ({}) differ from curve {}'s ({})", path,
                                          fmt::join(pts.variables, ", "), name, fmt::join(curve.variables, ", ")));
        }
        Curve refit = fit_sweep_curve(name, pts);
        log << fmt::format("  {:<14} {} pieces, R² {:.5f}, max residual {:.1f} % → {} pieces, R² {:.5f}, {:.1f} %\n",
                           name, curve.pieces.size(), curve.r2, 100 * curve.max_rel_residual, refit.pieces.size(),
                           refit.r2, 100 * refit.max_rel_residual);
        curve = std::move(refit);
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
