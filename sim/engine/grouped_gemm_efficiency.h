// GroupedGemmEfficiency: how far below a dense GEMM's compute efficiency the routed experts' grouped GEMMs run, by
// tokens per expert. vLLM runs a MoE layer's routed experts as one grouped GEMM pair (fused_moe's Triton kernel,
// vllm/model_executor/layers/fused_moe/fused_moe.py, or a CUTLASS grouped GEMM), each expert multiplying only the
// m_e = tokens · top_k / E rows routed to it. Below m_e ≈ 100 the experts stream their weights (the roofline's bytes
// term holds); from there to about 1,000 rows each expert's GEMM is too short to reach a dense GEMM's rate, and the
// roofline's max(FLOPs, bytes) with the dense efficiency is 1.2–1.6× optimistic (docs/COST-MODEL.md "MoE experts near
// the ridge"). The roofline prices the experts as their own roof, their FLOPs at gemm_efficiency × ratio(m_e).
//
// The ratio is measured, not assumed, in two steps. (1) The median compute efficiency the H100 kernel table's `moe`
// op (torch's grouped GEMM pair, calibration/kernels/H100-SXM.yaml, seven MoE shapes) reached at m_e = 128 … 1,024,
// over the table's own dense bf16 GEMM efficiency at M ≥ 4,096 (0.72). `servesim inspect --gpu H100 --check-kernels`
// derives the same figures from the table and prints them beside these (tools/app/kernel_checks.h,
// derived_efficiencies), and a test holds the two together. (2) vLLM runs its own fused_moe Triton kernel, not torch's
// grouped GEMM: timed on an H100 with the tiles vLLM ships for it (E=8,N=7168, E=8,N=14336, E=128,N=768 and
// E=128,N=384 … device_name=NVIDIA_H100_80GB_HBM3.json; calibration/kernels/moe_vllm_configs.py,
// logs/H100-SXM-moe-vllm-configs.json), it runs 6 % faster than the grouped GEMM at m_e = 128 and 9–18 % slower from
// 256 on; each point's table efficiency is scaled by that ratio (the mean over the four shapes; a test reads the
// log). Below m_e = 128 the table's experts are bandwidth-bound, so their compute efficiency there is not observed;
// the ratio holds its m_e = 128 value (the bytes term decides those steps). Above 1,024 it holds.
#pragma once

#include <array>
#include <cmath>

namespace servesim::engine {

struct GroupedGemmEfficiency {
    struct Point {
        double tokens_per_expert;
        double table_efficiency;    // median fraction of the bf16 peak the H100 table's `moe` op reached
        double fused_over_grouped;  // vLLM's fused_moe (shipped H100 tiles) over torch's grouped GEMM, by speed

        [[nodiscard]] constexpr double efficiency() const { return table_efficiency * fused_over_grouped; }
    };

    // The H100 table's medians (calibration/kernels/H100-SXM.yaml, 2026-12-06) and the fused/grouped speed ratios
    // (logs/H100-SXM-moe-vllm-configs.json, 2026-12-06: the mean over Mixtral-8x7B at TP 1 and 2 and Qwen3-30B-A3B at
    // TP 1 and 2).
    static constexpr std::array<Point, 4> kH100Points{
        {{128, 0.239, 1.0642}, {256, 0.411, 0.9070}, {512, 0.532, 0.8640}, {1024, 0.655, 0.8210}}};
    // The same table's dense bf16 GEMMs at M ≥ 4,096 (check-kernels' gemm_efficiency row).
    static constexpr double kH100DenseEfficiency = 0.72;

    // The fraction of a dense GEMM's efficiency vLLM's grouped expert GEMMs reach at m_e tokens per expert: linear in
    // log2(m_e) between the points, held beyond.
    [[nodiscard]] static double ratio(double tokens_per_expert) {
        const auto& p = kH100Points;
        double eff = p.front().efficiency();
        if (tokens_per_expert >= p.back().tokens_per_expert) {
            eff = p.back().efficiency();
        } else if (tokens_per_expert > p.front().tokens_per_expert) {
            std::size_t i = 1;
            while (p[i].tokens_per_expert < tokens_per_expert) {
                ++i;
            }
            const double x0 = std::log2(p[i - 1].tokens_per_expert);
            const double x1 = std::log2(p[i].tokens_per_expert);
            const double w = (std::log2(tokens_per_expert) - x0) / (x1 - x0);
            eff = p[i - 1].efficiency() + w * (p[i].efficiency() - p[i - 1].efficiency());
        }
        return eff / kH100DenseEfficiency;
    }
};

}  // namespace servesim::engine
