// Eigen least-squares fits for the profile curves (calibration/curve_fit.h). Columns are scaled to unit maximum
// before the QR solve so x² of attention work (~1e17) stays well conditioned.
#include "calibration/curve_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace servesim::calibration {

namespace {

// Solves min Σ w_i ((X c − y)_i / y_i)² over the columns in `active` (others fixed at zero); empty `w` = all ones.
std::vector<double> solve_relative(const Eigen::MatrixXd& x_full,
                                   std::span<const double> y,
                                   const std::vector<int>& active,
                                   std::span<const double> w = {}) {
    const int n = static_cast<int>(y.size());
    const int m = static_cast<int>(active.size());
    Eigen::MatrixXd a(n, m);
    Eigen::VectorXd b(n);
    std::vector<double> scale(m, 1.0);
    for (int j = 0; j < m; ++j) {
        double mx = 0;
        for (int i = 0; i < n; ++i) {
            mx = std::max(mx, std::fabs(x_full(i, active[j])));
        }
        scale[j] = mx > 0 ? mx : 1.0;
    }
    for (int i = 0; i < n; ++i) {
        const double wi = (w.empty() ? 1.0 : std::sqrt(w[i])) / std::max(std::fabs(y[i]), 1e-12);
        for (int j = 0; j < m; ++j) {
            a(i, j) = x_full(i, active[j]) / scale[j] * wi;
        }
        b(i) = y[i] * wi;
    }
    const Eigen::VectorXd sol = a.colPivHouseholderQr().solve(b);
    std::vector<double> c(x_full.cols(), 0.0);
    for (int j = 0; j < m; ++j) {
        c[active[j]] = sol(j) / scale[j];
    }
    return c;
}

double max_rel_residual_of(const Eigen::MatrixXd& x_full, std::span<const double> y, const std::vector<double>& c,
                           std::vector<double>* residuals = nullptr) {
    double worst = 0;
    for (int i = 0; i < static_cast<int>(y.size()); ++i) {
        double f = 0;
        for (int j = 0; j < static_cast<int>(c.size()); ++j) {
            f += x_full(i, j) * c[j];
        }
        const double r = std::fabs(f - y[i]) / std::max(std::fabs(y[i]), 1e-12);
        if (residuals != nullptr) {
            (*residuals)[i] = r;
        }
        worst = std::max(worst, r);
    }
    return worst;
}

// Minimax refinement (Lawson's algorithm): reweighted relative least squares, w_i ← w_i·|r_i| / Σ, which converges
// to the fit with the smallest maximum relative residual. Starts from the plain relative least-squares fit and keeps
// the best iterate, so it never returns a larger max residual than that fit.
std::vector<double> solve_minimax(const Eigen::MatrixXd& x_full,
                                  std::span<const double> y,
                                  const std::vector<int>& active,
                                  int iterations) {
    std::vector<double> best = solve_relative(x_full, y, active);
    std::vector<double> r(y.size());
    double best_worst = max_rel_residual_of(x_full, y, best, &r);
    std::vector<double> w(y.size(), 1.0 / static_cast<double>(y.size()));
    for (int it = 0; it < iterations && best_worst > 1e-12; ++it) {
        double sum = 0;
        for (std::size_t i = 0; i < w.size(); ++i) {
            w[i] *= r[i];
            sum += w[i];
        }
        if (!(sum > 0)) {
            break;
        }
        for (double& wi : w) {
            wi = std::max(wi / sum, 1e-14);
        }
        const std::vector<double> c = solve_relative(x_full, y, active, w);
        const double worst = max_rel_residual_of(x_full, y, c, &r);
        if (worst < best_worst) {
            best_worst = worst;
            best = c;
        }
    }
    return best;
}

std::size_t count_distinct(std::span<const double> x) {
    std::vector<double> v(x.begin(), x.end());
    std::sort(v.begin(), v.end());
    return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

void check_points(const std::string& name, std::size_t nx, std::size_t ny) {
    SERVESIM_CHECK(nx == ny && nx > 0, "fit of {}: {} x values and {} y values", name, nx, ny);
}

double max_rel_of(const std::vector<double>& c, std::span<const double> x, std::span<const double> y) {
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double f = c[0] + c[1] * x[i] + c[2] * x[i] * x[i];
        worst = std::max(worst, std::fabs(f - y[i]) / std::max(std::fabs(y[i]), 1e-12));
    }
    return worst;
}

}  // namespace

std::vector<double> fit_quadratic_coefficients(std::span<const double> x,
                                               std::span<const double> y,
                                               int minimax_iterations) {
    check_points("quadratic", x.size(), y.size());
    const std::size_t distinct = count_distinct(x);
    Eigen::MatrixXd design(static_cast<int>(x.size()), 3);
    for (std::size_t i = 0; i < x.size(); ++i) {
        design(static_cast<int>(i), 0) = 1.0;
        design(static_cast<int>(i), 1) = x[i];
        design(static_cast<int>(i), 2) = x[i] * x[i];
    }
    std::vector<int> active = {0};
    if (distinct >= 2) {
        active.push_back(1);
    }
    if (distinct >= 3) {
        active.push_back(2);
    }
    return minimax_iterations > 0 ? solve_minimax(design, y, active, minimax_iterations)
                                  : solve_relative(design, y, active);
}

FitStats fit_stats(const Curve& curve, const std::vector<std::vector<double>>& rows, std::span<const double> y) {
    SERVESIM_CHECK(rows.size() == y.size() && !y.empty(), "fit_stats of {}: {} rows, {} values", curve.name,
                   rows.size(), y.size());
    const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
    double ss_res = 0;
    double ss_tot = 0;
    FitStats s;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double f = curve.evaluate(rows[i]);
        ss_res += (f - y[i]) * (f - y[i]);
        ss_tot += (y[i] - mean) * (y[i] - mean);
        s.max_rel_residual = std::max(s.max_rel_residual, std::fabs(f - y[i]) / std::max(std::fabs(y[i]), 1e-12));
    }
    s.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res < 1e-18 ? 1.0 : 0.0);
    return s;
}

namespace {

Curve finish(Curve c, std::span<const double> x, std::span<const double> y) {
    std::vector<std::vector<double>> rows;
    rows.reserve(x.size());
    for (double v : x) {
        rows.push_back({v});
    }
    const FitStats s = fit_stats(c, rows, y);
    c.r2 = s.r2;
    c.max_rel_residual = s.max_rel_residual;
    c.num_points = static_cast<int>(x.size());
    return c;
}

}  // namespace

Curve fit_quadratic(const std::string& name,
                    const std::string& variable,
                    std::span<const double> x,
                    std::span<const double> y) {
    check_points(name, x.size(), y.size());
    Curve c;
    c.name = name;
    c.variables = {variable};
    c.pieces.push_back({*std::min_element(x.begin(), x.end()), *std::max_element(x.begin(), x.end()),
                        fit_quadratic_coefficients(x, y)});
    return finish(std::move(c), x, y);
}

Curve fit_piecewise_quadratic(const std::string& name,
                              const std::string& variable,
                              std::span<const double> x_in,
                              std::span<const double> y_in,
                              const PiecewiseOptions& options) {
    check_points(name, x_in.size(), y_in.size());
    // Sort by x.
    std::vector<std::size_t> order(x_in.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x_in[a] < x_in[b]; });
    std::vector<double> x;
    std::vector<double> y;
    for (auto i : order) {
        x.push_back(x_in[i]);
        y.push_back(y_in[i]);
    }
    const int n = static_cast<int>(x.size());
    const int mp = std::max(2, options.min_points_per_piece);

    // Fit of points [a, b] inclusive and its max relative residual.
    auto piece_fit = [&](int a, int b, double* worst) {
        std::span<const double> xs(x.data() + a, b - a + 1);
        std::span<const double> ys(y.data() + a, b - a + 1);
        auto c = fit_quadratic_coefficients(xs, ys, options.minimax_iterations);
        *worst = max_rel_of(c, xs, ys);
        return c;
    };
    // The search below asks for the same [a, b] many times: remember each piece's worst residual.
    std::vector<double> worst_memo(static_cast<std::size_t>(n) * n, -1.0);
    auto piece_worst = [&](int a, int b) {
        double& m = worst_memo[static_cast<std::size_t>(a) * n + b];
        if (m < 0) {
            piece_fit(a, b, &m);
        }
        return m;
    };
    // Best split of [0, n-1] into `pieces` pieces sharing knees (exhaustive; n is tens of points).
    std::vector<int> best_knees;
    double best_worst = std::numeric_limits<double>::infinity();
    {
        double w = 0;
        piece_fit(0, n - 1, &w);
        best_worst = w;
    }
    for (int pieces = 2; pieces <= options.max_pieces && best_worst > options.target_max_rel_residual; ++pieces) {
        std::vector<int> knees;
        double round_best = std::numeric_limits<double>::infinity();
        std::vector<int> round_knees;
        // Recursive enumeration of knee indices.
        auto rec = [&](auto&& self, int start, int left) -> void {
            if (left == 0) {
                if (n - 1 - start + 1 < mp) {
                    return;
                }
                double worst = 0;
                int a = 0;
                for (int k : knees) {
                    worst = std::max(worst, piece_worst(a, k));
                    a = k;
                }
                worst = std::max(worst, piece_worst(a, n - 1));
                if (worst < round_best) {
                    round_best = worst;
                    round_knees = knees;
                }
                return;
            }
            for (int k = start + mp - 1; k <= n - mp; ++k) {
                knees.push_back(k);
                self(self, k, left - 1);
                knees.pop_back();
            }
        };
        rec(rec, 0, pieces - 1);
        if (round_best < best_worst * 0.9) {  // a piece must buy a real improvement
            best_worst = round_best;
            best_knees = round_knees;
        }
    }
    Curve c;
    c.name = name;
    c.variables = {variable};
    int a = 0;
    std::vector<int> ends = best_knees;
    ends.push_back(n - 1);
    for (int k : ends) {
        double w = 0;
        c.pieces.push_back({x[a], x[k], piece_fit(a, k, &w)});
        a = k;
    }
    // Pieces sharing a knee have x_max(i) == x_min(i+1); a degenerate repeated x would overlap, so merge guard.
    return finish(std::move(c), x, y);
}

Curve fit_linear(const std::string& name,
                 const std::vector<std::string>& variables,
                 const std::vector<std::vector<double>>& rows,
                 std::span<const double> y,
                 bool nonnegative_slopes,
                 int minimax_iterations) {
    check_points(name, rows.size(), y.size());
    const int nv = static_cast<int>(variables.size());
    Eigen::MatrixXd design(static_cast<int>(rows.size()), nv + 1);
    double first_min = std::numeric_limits<double>::infinity();
    double first_max = -first_min;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        SERVESIM_CHECK(static_cast<int>(rows[i].size()) == nv, "fit of {}: row {} has {} values, want {}", name, i,
                       rows[i].size(), nv);
        design(static_cast<int>(i), 0) = 1.0;
        for (int j = 0; j < nv; ++j) {
            design(static_cast<int>(i), j + 1) = rows[i][j];
        }
        first_min = std::min(first_min, rows[i][0]);
        first_max = std::max(first_max, rows[i][0]);
    }
    std::vector<int> active(nv + 1);
    std::iota(active.begin(), active.end(), 0);
    // A column that is identically zero carries no information: leave its coefficient at zero.
    active.erase(std::remove_if(active.begin() + 1, active.end(),
                                [&](int j) { return design.col(j).cwiseAbs().maxCoeff() == 0.0; }),
                 active.end());
    auto solve = [&] {
        return minimax_iterations > 0 ? solve_minimax(design, y, active, minimax_iterations)
                                      : solve_relative(design, y, active);
    };
    std::vector<double> c = solve();
    while (nonnegative_slopes) {
        int worst = -1;
        for (int j : active) {
            if (j > 0 && c[j] < 0 && (worst < 0 || c[j] < c[worst])) {
                worst = j;
            }
        }
        if (worst < 0) {
            break;
        }
        active.erase(std::find(active.begin(), active.end(), worst));
        c = solve();
    }
    Curve curve;
    curve.name = name;
    curve.variables = variables;
    curve.pieces.push_back({first_min, first_max, c});
    const FitStats s = fit_stats(curve, rows, y);
    curve.r2 = s.r2;
    curve.max_rel_residual = s.max_rel_residual;
    curve.num_points = static_cast<int>(rows.size());
    return curve;
}

}  // namespace servesim::calibration
