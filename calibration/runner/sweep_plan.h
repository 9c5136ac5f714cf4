// SweepGrids and estimate_sweep: the grids the GPU sweep (gpu_sweep.cpp) times each curve over, in one place, and
// from them how many timed measurements a model's sweep takes and about how long that is, so `servesim calibrate`
// can say so before it starts. CUDA-free (library servesim_calibrate_runner). The per-measurement cost is the sweep's
// own timing policy (gpu_sweep.cpp time_adaptive / time_forward: sustain_ms of continuous replays, then about 150 ms
// of timed replays); the layer-shape groups follow gpu_sweep.cpp plan_model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "calibration/runner/calibrate.h"
#include "models/model_spec.h"

namespace servesim::calibration {

struct SweepGrids {
    std::vector<int> gemm_tokens;                                // gemm curve: tokens
    std::vector<int> lm_head_sequences;                          // lm_head and overhead curves: sequences
    std::vector<std::pair<int, int>> prefill_cases;              // attention prefill: {chunk, cached tokens}
    std::vector<std::pair<int, int>> decode_cases;               // attention decode: {sequences, context per seq}
    std::vector<std::pair<int, int>> gdn_prefill_cases;          // GDN prefill: {sequences, tokens each}
    std::vector<int> gdn_decode_sequences;                       // GDN decode (snapshots up to 256 of them)
    std::vector<int> composition_prefill_tokens;                 // whole forwards: one prompt of T tokens
    std::vector<std::pair<int, int>> composition_decode_cases;   // whole forwards: {batch, cached context}
};

// The grids of a full sweep, or of --quick (coarser, about a third of the points).
[[nodiscard]] SweepGrids sweep_grids(bool quick);

// Largest snapshot batch the GDN sweep times (snapshot curve).
inline constexpr int kSnapshotMaxSequences = 256;

struct SweepEstimate {
    int timed_measurements = 0;    // each one: sustain_ms of load, then ~150 ms of timed replays
    double per_measurement_s = 0;  // sustain_ms + 150 ms
    double seconds = 0;            // timed_measurements × per_measurement_s
    std::string breakdown;         // "gemm 52, lm_head+overhead 22, ..." per curve
};

// How long the GPU sweep of `model` (a resolved spec) with `options` takes, from its measurement count. An estimate:
// it leaves out start-up, random-weight initialisation and the fits (seconds), and assumes every measurement spends
// its nominal 150 ms measuring (fast kernels stop at 25 replays, slow ones take at least 3).
[[nodiscard]] SweepEstimate estimate_sweep(const models::ModelSpec& model, const CalibrateOptions& options);

}  // namespace servesim::calibration
