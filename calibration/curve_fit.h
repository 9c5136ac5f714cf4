// Least-squares fits of the profile's curve family (Eigen): c0 + c1·x + c2·x² in one variable, piecewise where one
// quadratic cannot hold a knee, and c0 + Σ c_i·x_i in several variables. Owns the fitting and the residual
// statistics (R², max relative residual); not the sweeps that produce the points (calibration/runner/).
// Fits minimise the squared *relative* residual Σ((fit − y)/y)², since step costs span several decades; with
// minimax_iterations > 0 that fit is refined by Lawson's reweighted least squares toward the smallest *maximum*
// relative residual, the figure a profile records per curve (max_rel_residual).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "calibration/hardware_profile.h"

namespace servesim::calibration {

struct PiecewiseOptions {
    int max_pieces = 3;
    double target_max_rel_residual = 0.03;  // stop adding pieces once every point is within this
    int min_points_per_piece = 3;           // a piece shares its first point with the previous piece's last
    int minimax_iterations = 0;             // > 0: each piece is the minimax fit (Lawson), not the least-squares one
};

// Coefficients [c0, c1, c2] of a weighted relative least-squares quadratic through (x, y). Fewer than three
// distinct x values degrade to a line (c2 = 0) or a constant (c1 = c2 = 0).
[[nodiscard]] std::vector<double> fit_quadratic_coefficients(std::span<const double> x,
                                                             std::span<const double> y,
                                                             int minimax_iterations = 0);

// One-piece quadratic curve over the points' range, with r2/max_rel_residual/num_points filled in.
[[nodiscard]] Curve fit_quadratic(const std::string& name,
                                  const std::string& variable,
                                  std::span<const double> x,
                                  std::span<const double> y_ms);

// Piecewise quadratic: one piece if it meets the target, else the best split into 2, 3, … max_pieces pieces that
// share their knee points, chosen by the smallest max relative residual (exhaustive over knee positions; a piece
// must cut the worst residual by 10 % to be kept).
[[nodiscard]] Curve fit_piecewise_quadratic(const std::string& name,
                                            const std::string& variable,
                                            std::span<const double> x,
                                            std::span<const double> y_ms,
                                            const PiecewiseOptions& options = {});

// c0 + Σ c_i·x_i over rows[point][variable]. With nonnegative_slopes, a negative c_i (i ≥ 1) is dropped to zero
// and the rest refitted (an active-set NNLS on the slopes; c0 stays free).
[[nodiscard]] Curve fit_linear(const std::string& name,
                               const std::vector<std::string>& variables,
                               const std::vector<std::vector<double>>& rows,
                               std::span<const double> y_ms,
                               bool nonnegative_slopes = true,
                               int minimax_iterations = 0);

struct FitStats {
    double r2 = 0;
    double max_rel_residual = 0;
};

// R² = 1 − Σ(y − f)² / Σ(y − ȳ)² (1 when all y are equal and the fit is exact) and max |f − y| / y.
[[nodiscard]] FitStats fit_stats(const Curve& curve,
                                 const std::vector<std::vector<double>>& rows,
                                 std::span<const double> y_ms);

}  // namespace servesim::calibration
