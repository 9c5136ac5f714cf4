// Tests calibration/runner/sweep_plan.*: the GPU sweep's measurement count per curve and the duration `servesim
// calibrate --model M` announces before it starts. Counts worked by hand from the grids (sweep_grids) and the shape
// groups gpu_sweep.cpp plan_model times one by one.
#include "calibration/runner/sweep_plan.h"

#include <cmath>

#include "models/model_registry.h"
#include "tests/catch.h"

namespace sc = servesim::calibration;

TEST_CASE("Sweep estimate: Qwen3-4B, full and quick", "[calibration][sweep]") {
    sc::CalibrateOptions o;
    o.model = "Qwen3-4B";
    const auto spec = servesim::models::resolve_model("Qwen3-4B");
    // Full: 26 GEMM token counts × 2 shape groups (attention projections, MLP) = 52; lm_head and overhead 2 × 11 = 22;
    // attention prefill 10 + 3 · 3 = 19 cases; decode 10 sequence counts × 7 contexts = 70 less the 4 whose total
    // context exceeds 4.2M tokens (256 × 32768, 512 × 32768, 1024 × 8192, 1024 × 32768) = 66; whole forwards 7 + 6 = 13.
    // 52 + 22 + 19 + 66 + 13 = 172 measurements × (0.2 s sustained + 0.15 s timed) = 60.2 s — the "about a minute
    // per model" the calibration stage took on an H100 (issue 38).
    const sc::SweepEstimate full = sc::estimate_sweep(spec, o);
    CHECK(full.timed_measurements == 172);
    CHECK(std::abs(full.per_measurement_s - 0.35) < 1e-12);
    CHECK(std::abs(full.seconds - 60.2) < 1e-9);
    CHECK(full.breakdown == "gemm 52, lm_head+overhead 22, attention 85, whole forwards 13");
    // Quick: 13 × 2 = 26; 2 × 6 = 12; prefill 5 + 3 = 8, decode 4 × 3 = 12 less 512 × 16384 = 11; forwards 3 + 6 = 9.
    // 26 + 12 + 19 + 9 = 66 → 23.1 s. Without the sustained load (--sustain-ms 0): 66 × 0.15 = 9.9 s.
    o.quick = true;
    CHECK(sc::estimate_sweep(spec, o).timed_measurements == 66);
    CHECK(std::abs(sc::estimate_sweep(spec, o).seconds - 23.1) < 1e-9);
    o.sustain_ms = 0;
    CHECK(std::abs(sc::estimate_sweep(spec, o).seconds - 9.9) < 1e-9);
    // An fp8 sweep skips the whole forwards: 66 − 9 = 57.
    o.weight_dtype = "fp8";
    CHECK(sc::estimate_sweep(spec, o).timed_measurements == 57);
}

TEST_CASE("Sweep estimate: a hybrid MoE model adds GDN curves and an MoE group", "[calibration][sweep]") {
    // Qwen3-Next-80B-A3B: gated attention, GDN and one MoE shape → 3 GEMM groups × 26 = 78; lm_head+overhead 22;
    // attention (one shape) 19 + 66 = 85; GDN (one shape): prefill 8 + 2 · 3 = 14, decode 11, snapshots at ≤ 256
    // sequences 9 → 34; whole forwards 13. 78 + 22 + 85 + 34 + 13 = 232 × 0.35 s = 81.2 s.
    sc::CalibrateOptions o;
    const sc::SweepEstimate e = sc::estimate_sweep(servesim::models::resolve_model("Qwen3-Next-80B-A3B"), o);
    CHECK(e.timed_measurements == 232);
    CHECK(std::abs(e.seconds - 81.2) < 1e-9);
    CHECK(e.breakdown == "gemm 78, lm_head+overhead 22, attention 85, gdn 34, whole forwards 13");
}
