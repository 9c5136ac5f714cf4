// The GPU sweep's grids and its duration estimate; see sweep_plan.h.
#include "calibration/runner/sweep_plan.h"

#include <fmt/format.h>

#include <set>
#include <tuple>
#include <variant>

namespace servesim::calibration {

namespace {

// time_adaptive sizes its replays to about 150 ms of measuring (gpu_sweep.cpp: reps = 150 ms / one replay, 3..25).
constexpr double kMeasuringS = 0.150;
// Attention decode points whose total context (sequences × context) exceeds this are skipped (KV memory).
constexpr double kMaxDecodeContextTokens = 4.2e6;

}  // namespace

SweepGrids sweep_grids(bool quick) {
    SweepGrids g;
    g.gemm_tokens = quick ? std::vector<int>{1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}
                          : std::vector<int>{1,    2,    4,    8,    16,   32,   48,    64,    96,
                                             128,  192,  256,  384,  512,  768,  1024,  1536,  2048,
                                             3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};
    g.lm_head_sequences = quick ? std::vector<int>{1, 4, 16, 64, 256, 1024}
                                : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    for (int c : quick ? std::vector<int>{128, 512, 2048, 8192, 32768}
                       : std::vector<int>{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}) {
        g.prefill_cases.push_back({c, 0});
    }
    for (int c : quick ? std::vector<int>{512} : std::vector<int>{256, 512, 2048}) {
        for (int cached : {1024, 4096, 16384}) {
            g.prefill_cases.push_back({c, cached});
        }
    }
    const std::vector<int> seqs =
        quick ? std::vector<int>{1, 16, 128, 512} : std::vector<int>{1, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    const std::vector<int> ctx =
        quick ? std::vector<int>{256, 2048, 16384} : std::vector<int>{128, 512, 1024, 2048, 4096, 8192, 32768};
    for (int s : seqs) {
        for (int c : ctx) {
            if (static_cast<double>(s) * c <= kMaxDecodeContextTokens) {
                g.decode_cases.push_back({s, c});
            }
        }
    }
    for (int len : quick ? std::vector<int>{256, 2048, 8192, 32768}
                         : std::vector<int>{64, 256, 1024, 2048, 4096, 8192, 16384, 32768}) {
        g.gdn_prefill_cases.push_back({1, len});
    }
    for (int s : {4, 16}) {
        for (int len : quick ? std::vector<int>{1024} : std::vector<int>{256, 1024, 2048}) {
            g.gdn_prefill_cases.push_back({s, len});
        }
    }
    g.gdn_decode_sequences = quick ? std::vector<int>{1, 8, 64, 256, 1024}
                                   : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    g.composition_prefill_tokens =
        quick ? std::vector<int>{512, 4096, 32768} : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384, 32768};
    g.composition_decode_cases = {{1, 2048}, {8, 2048}, {32, 2048}, {64, 2048}, {128, 2048}, {256, 1024}};
    return g;
}

SweepEstimate estimate_sweep(const models::ModelSpec& model, const CalibrateOptions& options) {
    const SweepGrids g = sweep_grids(options.quick);
    // The shape groups gpu_sweep.cpp plan_model times separately: projection groups per attention / GDN shape, MLP
    // groups per dense or MoE shape; attention kernels per (q heads, kv heads, head_dim), GDN per head counts.
    std::set<std::tuple<int, int, int, int, int>> gemm_groups;  // {kind, a, b, c, d}
    std::set<std::tuple<int, int, int>> attention;
    std::set<std::tuple<int, int>> gdn;
    for (const auto& layer : model.layers) {
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            gemm_groups.insert({0, a->num_q_heads, a->num_kv_heads, a->head_dim, a->output_gate ? 1 : 0});
            attention.insert({a->num_q_heads, a->num_kv_heads, a->head_dim});
        } else if (const auto* d = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            gemm_groups.insert({1, d->num_k_heads, d->num_v_heads, 0, 0});
            gdn.insert({d->num_k_heads, d->num_v_heads});
        }
        if (const auto* m = std::get_if<models::DenseMlp>(&layer.mlp)) {
            gemm_groups.insert({2, m->intermediate_size, m->gated ? 1 : 0, 0, 0});
        } else if (const auto* e = std::get_if<models::MoeMlp>(&layer.mlp)) {
            gemm_groups.insert({3, e->num_experts, e->num_experts_per_tok, e->moe_intermediate_size,
                                e->shared_expert_intermediate_size});
        }
    }
    const int n_gemm = static_cast<int>(g.gemm_tokens.size() * gemm_groups.size());
    const int n_lm = static_cast<int>(2 * g.lm_head_sequences.size());
    const int n_attn = static_cast<int>((g.prefill_cases.size() + g.decode_cases.size()) * attention.size());
    int snapshots = 0;
    for (int s : g.gdn_decode_sequences) {
        snapshots += s <= kSnapshotMaxSequences ? 1 : 0;
    }
    const int n_gdn = static_cast<int>((g.gdn_prefill_cases.size() + g.gdn_decode_sequences.size() + snapshots) *
                                       gdn.size());
    // Whole forwards check the composition of bf16 profiles (an fp8 sweep skips them; so does a model whose rank's
    // weights exceed 80 % of the GPU, which only the sweep can tell: counted here).
    const bool composition = options.weight_dtype == "bf16";
    const int n_comp = composition ? static_cast<int>(g.composition_prefill_tokens.size() +
                                                      g.composition_decode_cases.size())
                                   : 0;
    SweepEstimate e;
    e.timed_measurements = n_gemm + n_lm + n_attn + n_gdn + n_comp;
    e.per_measurement_s = options.sustain_ms / 1e3 + kMeasuringS;
    e.seconds = e.timed_measurements * e.per_measurement_s;
    e.breakdown = fmt::format("gemm {}, lm_head+overhead {}", n_gemm, n_lm);
    if (n_attn > 0) {
        e.breakdown += fmt::format(", attention {}", n_attn);
    }
    if (n_gdn > 0) {
        e.breakdown += fmt::format(", gdn {}", n_gdn);
    }
    if (n_comp > 0) {
        e.breakdown += fmt::format(", whole forwards {}", n_comp);
    }
    return e;
}

}  // namespace servesim::calibration
