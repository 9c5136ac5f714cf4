// fit_measurements with chunked prefill: a P-token prompt measured on a stack with a token budget ran in
// k = ⌈P / budget⌉ steps, each paying the per-step constant (calibration/measurements.h).
#include <cmath>

#include "calibration/measurements.h"
#include "tests/catch.h"

using namespace servesim::calibration;

TEST_CASE("fit_measurements recovers the per-step constant of chunked prefills", "[calibration]") {
    // Truth: a step of n tokens over cached context c costs 15 + 0.1·n + 2e-6·n·(c + n/2) ms. Under a 2,048-token
    // budget a 16,384-token prompt is 8 steps: 8·15 + 0.1·16384 + 2e-6·16384²/2 = 120 + 1638.4 + 268.4 = 2026.8 ms
    // (Σ of the chunks' work is P²/2 whatever the chunking).
    Measurements m;
    m.gpu = "test";
    m.model = "test";
    m.max_num_batched_tokens = 2048;
    for (double p : {512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0}) {
        const double k = std::ceil(p / 2048.0);
        m.prefill.push_back({p, 0.0, 15.0 * k + 0.1 * p + 2e-6 * p * p / 2.0});
    }
    for (double b : {1.0, 8.0, 64.0}) {
        m.decode.push_back({b, 1000.0, 10.0 + 0.05 * b + 1e-5 * b * 1000.0});
    }
    const HardwareProfile profile = fit_measurements(m, "synthetic");
    const auto& gemm = profile.curves.at("gemm").pieces.back().coefficients;
    REQUIRE(std::abs(gemm[0] - 15.0) < 1e-6);  // per step, not per prompt
    REQUIRE(std::abs(gemm[1] - 0.1) < 1e-9);
    const auto& attn = profile.curves.at("attn_prefill").pieces.back().coefficients;
    REQUIRE(std::abs(attn[1] - 2e-6) < 1e-12);
}
