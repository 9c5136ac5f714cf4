// `servesim inspect --gpu G --check-kernels`: how well the measured cost model (sim/engine/measured_cost_model.h)
// reproduces what was timed. (1) Composition: each whole forward of G's kernel table (`forwards:`, torch-timed, one
// GPU) against the step the model composes from G's table for the same batch (kernel terms only: a torch forward has
// no scheduler overhead, no all-reduce and no sampler). (2) Transfer: every other table's prediction of G, per op class
// (each measured point of G's table predicted from the other GPU's by efficiency transfer) and per forward. The errors
// docs/COST-MODEL.md reports come from here.
#pragma once

#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "calibration/kernel_table.h"
#include "sim/engine/measured_cost_model.h"

namespace servesim::app {

// MeasuredParams for one GPU at TP 1 with `table` (measured on `table_gpu`): the roofline's figures from the GPU file,
// CUDA graphs up to 512 tokens, per-token terms tabled to 16,384 tokens.
[[nodiscard]] engine::MeasuredParams single_gpu_measured_params(const calibration::GpuSpec& gpu,
                                                                const calibration::KernelTable& table,
                                                                const calibration::GpuSpec& table_gpu);

// The table as its timed forwards ran: where it has vLLM's fused MoE routing (`moe_routing_fused`), a copy that reads
// the torch routing (`moe_routing`) instead, since the sweep's forwards route with torch ops.
[[nodiscard]] calibration::KernelTable as_timed_forwards(const calibration::KernelTable& table);

// Per op class, each measured point of `own` (timed on `gpu`) predicted from the same kernel at the same shape in
// `from` (timed on `from_gpu`) by efficiency transfer: the report's "transfer" rows. An op both tables hold with no
// entry timed alike (attention backends differ) says so instead of a figure.
[[nodiscard]] std::string op_transfer_report(const calibration::KernelTable& own,
                                             const calibration::GpuSpec& gpu,
                                             const calibration::KernelTable& from,
                                             const calibration::GpuSpec& from_gpu);

// One of the roofline's efficiency constants against the table: the median fraction of the GPU's datasheet peak (or
// bandwidth) the table's kernels of that op class reached, over `points` measured points.
struct DerivedEfficiency {
    std::string op;        // the op class and the points taken
    std::string constant;  // the GPU file's key it stands beside
    double assumed = 0;    // that key's value
    double measured_median = 0;
    int points = 0;
};

// Per op class, what the table measured beside the constant the roofline assumes (issue 38 item 3: how each
// efficiency could be derived from a table): bf16 GEMMs at M >= 4,096 (gemm_efficiency), weight-streaming GEMMs at
// M = 1 (bandwidth_efficiency), decode attention at batch >= 64 and >= 1,024 keys (decode_attention_efficiency),
// causal prefill attention at the longest prompt (attention_efficiency), the routed experts' grouped GEMMs at each
// GroupedGemmEfficiency point (its table efficiency), the device copy. Op classes the table lacks are left out.
[[nodiscard]] std::vector<DerivedEfficiency> derived_efficiencies(const calibration::KernelTable& table,
                                                                  const calibration::GpuSpec& gpu);

// The report (plain text). ConfigError when G has no table.
[[nodiscard]] std::string kernel_checks(const calibration::GpuSpec& gpu);

}  // namespace servesim::app
