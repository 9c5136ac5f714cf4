// Least-squares fits (calibration/curve_fit.h) recover known coefficients from synthetic noisy data, split at a
// knee, and keep slopes non-negative. Noise: a fixed mt19937_64 stream mapped to ±amplitude (deterministic).
#include "calibration/curve_fit.h"

#include <cmath>
#include <fstream>
#include <string>
#include <random>
#include <vector>

#include "tests/catch.h"

using namespace servesim::calibration;

namespace {

// Multiplicative noise in [−a, +a], reproducible.
class Noise {
  public:
    explicit Noise(double amplitude) : a_(amplitude) {}

    double operator()() {
        const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
        return 1.0 + a_ * (2.0 * u - 1.0);
    }

  private:
    std::mt19937_64 rng_{42};
    double a_;
};

}  // namespace

TEST_CASE("fit_quadratic recovers c0 + c1·x + c2·x² from 1 % noise", "[calibration]") {
    // Truth: 0.5 + 0.01·x + 2e-6·x² ms over x = 64 … 32768.
    Noise noise(0.01);
    std::vector<double> x;
    std::vector<double> y;
    for (double v = 64; v <= 32768; v *= 1.5) {
        x.push_back(v);
        y.push_back((0.5 + 0.01 * v + 2e-6 * v * v) * noise());
    }
    const Curve c = fit_quadratic("gemm", "tokens", x, y);
    REQUIRE(c.pieces.size() == 1);
    const auto& k = c.pieces[0].coefficients;
    CHECK_THAT(k[0], Catch::Matchers::WithinRel(0.5, 0.1));
    CHECK_THAT(k[1], Catch::Matchers::WithinRel(0.01, 0.05));
    CHECK_THAT(k[2], Catch::Matchers::WithinRel(2e-6, 0.05));
    CHECK(c.r2 > 0.999);
    CHECK(c.max_rel_residual < 0.03);
    CHECK(c.num_points == static_cast<int>(x.size()));
}

TEST_CASE("fit_piecewise_quadratic splits a weight-bound floor from the compute-bound line", "[calibration]") {
    // Truth: max(2 ms, 0.001·x ms): flat up to the knee at 2000 tokens, linear above.
    Noise noise(0.005);
    std::vector<double> x;
    std::vector<double> y;
    for (double v = 1; v <= 65536; v *= 2) {
        x.push_back(v);
        y.push_back(std::max(2.0, 0.001 * v) * noise());
    }
    const Curve one = fit_quadratic("gemm", "tokens", x, y);
    const Curve pw = fit_piecewise_quadratic("gemm", "tokens", x, y);
    CHECK(pw.pieces.size() >= 2);
    CHECK(pw.max_rel_residual < 0.05);
    CHECK(pw.max_rel_residual < one.max_rel_residual);
    // Pieces are contiguous and share their knees.
    for (std::size_t i = 1; i < pw.pieces.size(); ++i) {
        CHECK(pw.pieces[i].x_min == pw.pieces[i - 1].x_max);
    }
    CHECK_THAT(pw.evaluate(8.0), Catch::Matchers::WithinRel(2.0, 0.05));
    CHECK_THAT(pw.evaluate(32768.0), Catch::Matchers::WithinRel(32.768, 0.05));
}

TEST_CASE("fit_linear recovers several slopes and zeroes a negative one", "[calibration]") {
    // Truth: 0.1 + 1.5e-5·context + 0.002·sequences.
    Noise noise(0.01);
    std::vector<std::vector<double>> rows;
    std::vector<double> y;
    for (double s : {1.0, 4.0, 16.0, 64.0, 256.0}) {
        for (double c : {128.0, 1024.0, 8192.0}) {
            rows.push_back({s * c, s});
            y.push_back((0.1 + 1.5e-5 * s * c + 0.002 * s) * noise());
        }
    }
    const Curve c = fit_linear("attn_decode", {"context_tokens", "sequences"}, rows, y);
    const auto& k = c.pieces[0].coefficients;
    CHECK_THAT(k[0], Catch::Matchers::WithinRel(0.1, 0.1));
    CHECK_THAT(k[1], Catch::Matchers::WithinRel(1.5e-5, 0.03));
    CHECK_THAT(k[2], Catch::Matchers::WithinRel(0.002, 0.2));
    CHECK(c.r2 > 0.999);

    // y independent of the second variable but noisy: its slope may come out negative and must be dropped.
    std::vector<std::vector<double>> rows2;
    std::vector<double> y2;
    for (int i = 0; i < 12; ++i) {
        rows2.push_back({100.0 * (i + 1), static_cast<double>(12 - i)});
        y2.push_back(1.0 + 0.01 * 100.0 * (i + 1) - 0.05 * (12 - i));  // a true negative slope
    }
    const Curve nn = fit_linear("gdn_prefill", {"tokens", "chunks"}, rows2, y2);
    CHECK(nn.pieces[0].coefficients[2] == 0.0);
    CHECK(nn.pieces[0].coefficients[1] > 0.0);
}

TEST_CASE("minimax refinement moves a fit to the smallest maximum relative residual", "[calibration]") {
    // Two timings at one x (a constant fit): y = 1 and 2. Relative least squares minimises (c−1)² + ((c−2)/2)²
    // → c = 1.2, worst residual 0.4. The minimax constant balances (c−1)/1 = (2−c)/2 → c = 4/3, worst 1/3.
    const std::vector<double> x = {5, 5};
    const std::vector<double> y = {1, 2};
    CHECK_THAT(fit_quadratic_coefficients(x, y)[0], Catch::Matchers::WithinAbs(1.2, 1e-9));
    CHECK_THAT(fit_quadratic_coefficients(x, y, 60)[0], Catch::Matchers::WithinAbs(4.0 / 3.0, 1e-6));
}

TEST_CASE("minimax never does worse than least squares on the worst point", "[calibration]") {
    // A floor-then-line truth with 2 % noise, forced into one quadratic: the worst residual is what minimax trades.
    Noise noise(0.02);
    std::vector<double> x;
    std::vector<double> y;
    for (double v = 1; v <= 65536; v *= 2) {
        x.push_back(v);
        y.push_back(std::max(2.0, 0.001 * v) * noise());
    }
    const Curve ls = fit_quadratic("gemm", "tokens", x, y);
    PiecewiseOptions one_piece;
    one_piece.max_pieces = 1;
    one_piece.minimax_iterations = 60;
    const Curve mm = fit_piecewise_quadratic("gemm", "tokens", x, y, one_piece);
    CHECK(mm.max_rel_residual <= ls.max_rel_residual);
    CHECK(mm.max_rel_residual < 0.9 * ls.max_rel_residual);
}

namespace {

// tokens,ms rows of a sweep's points file.
void read_points(const std::string& path, std::vector<double>& x, std::vector<double>& y) {
    std::ifstream f(path);
    REQUIRE(f.good());
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
        const auto comma = line.find(',');
        x.push_back(std::stod(line.substr(0, comma)));
        y.push_back(std::stod(line.substr(comma + 1)));
    }
}

}  // namespace

TEST_CASE("the GEMM curves the H200 sweep fits hold its cuBLAS timings within 3 %", "[calibration]") {
    // The bound on GEMM fits, checked on the committed H200 sweep points with the sweep's fit options
    // (calibration/runner/gpu_sweep.cpp fit_single): minimax pieces, at most six.
    PiecewiseOptions options;
    options.max_pieces = 6;
    options.target_max_rel_residual = 0.01;
    options.minimax_iterations = 60;
    for (const char* model : {"Qwen3-4B", "Qwen3.5-4B", "Qwen3-8B", "Llama-3.1-8B"}) {
        std::vector<double> x;
        std::vector<double> y;
        read_points(std::string("calibration/profiles/h200/points/") + model + "/gemm.csv", x, y);
        REQUIRE(x.size() >= 20);
        const Curve c = fit_piecewise_quadratic("gemm", "tokens", x, y, options);
        INFO(model << ": " << c.pieces.size() << " pieces, max residual " << c.max_rel_residual);
        CHECK(c.max_rel_residual <= 0.03);
        CHECK(c.pieces.size() <= 6);
    }
}
