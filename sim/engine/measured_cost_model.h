// MeasuredCostModel (`cost_model: measured`): a step's time composed from measured kernel times
// (calibration/kernel_table.h) for the kernels vLLM runs in one forward of this model's shapes, per tensor-parallel
// rank: per layer the fused projections as vLLM builds them (QKVParallelLinear qkv_proj, o_proj,
// MergedColumnParallelLinear gate_up_proj, down_proj; MLA's q_a/q_b/kv_a/kv_b and o_proj; GDN / Mamba in and out
// projections) with column-parallel N and row-parallel K split by TP; attention prefill and decode from the attention
// tables at the layer's per-rank head geometry; routed experts from the MoE tables (FusedMoE: tokens × top_k over
// the experts) with the router's top-k and permute; fused add + RMSNorm, SiLU·mul and RoPE; the lm_head GEMM over
// the sampled rows (vLLM computes logits only at logits_indices) and sampling; the plain copy kernels (KV cache
// writes, MLA's concatenation and transpose, a shared expert's add) at the table's ceilings. Quantized GEMMs use the
// table's op of the kernel vLLM picks (fp8 W8A8 block / per-channel / per-tensor: CutlassBlockScaledGroupedGemm /
// cutlass scaled_mm; Marlin weight-only paths at bf16 math on their quantized bytes); Gated DeltaNet layers from the
// gdn_* and conv1d ops when the table has them. The terms not timed — Mamba scans (and GDN on a table without GDN ops),
// state snapshots, the tensor-parallel all-reduces and the host overhead — are RooflineCostModel's, unchanged.
// A GPU without a table is predicted from the nearest table by efficiency transfer (docs/COST-MODEL.md).
// CUDA-graph padding of the per-token terms as RooflineCostModel (VllmConfig._set_cudagraph_sizes).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "calibration/kernel_table.h"
#include "models/model_spec.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/roofline_cost_model.h"

namespace servesim::engine {

struct MeasuredParams {
    RooflineParams roofline;  // the predicted GPU's datasheet, TP / EP, overheads (and the untimed terms)
    const calibration::KernelTable* table = nullptr;  // measured on this GPU, or on table_gpu for a transfer
    calibration::KernelRoof table_roof;               // the table GPU's datasheet
    calibration::KernelRoof target;                   // the predicted GPU's datasheet
    std::string table_gpu;                            // the table GPU's catalog name
    // The table whose moe_vllm_fused pairs scale the routed experts when `table` has none: another GPU of the same
    // architecture (tools/app/experiment.h fused_pairs_lender); null = `table`'s own pairs, if any.
    const calibration::KernelTable* fused_table = nullptr;
    std::string fused_table_gpu;  // its catalog name
    // The per-token terms are tabled for 1..max(max_cudagraph_tokens, max_table_tokens) tokens (a pure function of
    // the count, computed once; at most kMaxTableTokens): engine.max_num_batched_tokens, the largest step.
    std::int64_t max_table_tokens = 0;
};

class MeasuredCostModel final : public CostModel {
  public:
    static constexpr std::int64_t kMaxTableTokens = 32768;

    MeasuredCostModel(const models::ModelSpec& model, models::DType kv_dtype, const MeasuredParams& params);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;
    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return groups_.local; }

    [[nodiscard]] std::vector<StepTerm> step_terms(const BatchShape& shape) const override;

    // The GEMM labels of step_terms, in order.
    enum Gemm { kQkv, kO, kMla, kMixerIn, kMixerOut, kGateUp, kDown, kRouter, kSharedExpert, kAdapter, kNumGemms };

    // The terms that depend only on the (padded) token count, in µs.
    struct TokenDetail {
        std::array<double, kNumGemms> gemm_us{};
        double moe_us = 0;
        double moe_routing_us = 0;
        double rmsnorm_us = 0;
        double silu_mul_us = 0;
        double rope_us = 0;
        double qk_norm_us = 0;
        double copies_us = 0;
        [[nodiscard]] double total_us() const;
    };

    [[nodiscard]] TokenDetail token_detail(std::int64_t tokens) const;
    // lm_head GEMM over the sampled rows and sampling, in µs.
    [[nodiscard]] std::pair<double, double> lm_head_sampling_us(std::int64_t num_sampled_seqs) const;
    // Σ 2·n·k over the GEMMs a token runs (this rank's shapes; the lm_head once, the routed experts' active ones):
    // at TP 1 it equals models::linear_flops_per_token, which a test checks for every preset.
    [[nodiscard]] double linear_flops_per_token() const;
    // Attention prefill and decode of a step, in µs.
    [[nodiscard]] std::pair<double, double> attention_us(const BatchShape& s) const;

  private:
    struct GemmOp {
        Gemm label = kQkv;
        calibration::GemmHandle handle;
        int count = 0;  // calls per step (layers)
    };

    struct AttnGroup {
        int count = 0;
        int span = -1;  // index into groups_.local, −1 for full attention
        calibration::AttentionGeometry geometry;
        calibration::UnitWork prefill_per_key;
        calibration::UnitWork decode_per_key;
        std::optional<calibration::ScaledEntry<calibration::AttnPrefillEntry>> prefill;
        std::optional<calibration::ScaledEntry<calibration::AttnPrefillCachedEntry>> prefill_cached;
        std::optional<calibration::ScaledEntry<calibration::AttnDecodeEntry>> decode;
        std::optional<calibration::ScaledEntry<calibration::MlaDecodeEntry>> mla_decode;
    };

    struct MoeGroup {
        calibration::KernelCostLookup::MoeShape shape;
        int count = 0;
        const calibration::MoeEntry* experts = nullptr;  // nullptr: roofline
        const calibration::MoeEntry* routing = nullptr;
        const calibration::MoeEntry* fused = nullptr;  // vLLM's fused_moe against `experts` (resolve_moe_fused)
    };

    // An elementwise op (fused add + RMSNorm, SiLU·mul, RoPE, sampling) resolved once: the table curve of the nearest
    // width and its scale, or none (then bytes per token at the GPU file's bandwidth efficiency).
    struct ElementwiseOp {
        std::int64_t width = 0;                   // hidden, intermediate or vocab (RoPE: see geometry)
        calibration::AttentionGeometry geometry;  // RoPE only
        int count = 0;                            // calls per step
        double bytes_per_unit = 0;                // roofline bytes per token (sampling: per row)
        const calibration::KernelCurve* curve = nullptr;
        double scale = 1;
    };

    // The Gated DeltaNet layers (one per-rank geometry per model): their kernels resolved from the table's gdn_prefill
    // (one- and eight-sequence curves), gdn_decode, conv1d and gdn_aux ops. measured(): every op present, so the
    // GDN term comes from the table; otherwise it stays the roofline's scan.
    struct GdnGroup {
        int count = 0;        // GDN layers
        int other_scans = 0;  // Mamba layers: the roofline's scan term holds both kinds, so it stays whole
        std::int64_t aux_width = 0;
        std::optional<calibration::KernelCostLookup::ScaledCurve> prefill_1, prefill_8, decode, conv_prefill,
            conv_decode;
        const calibration::WidthEntry* aux = nullptr;
        double aux_scale = 1;
        [[nodiscard]] bool measured() const {
            return count > 0 && other_scans == 0 && prefill_1 && decode && conv_prefill && conv_decode && aux != nullptr;
        }
    };
    // The GDN layers' kernel time of a step, in µs (GdnGroup::measured() only).
    [[nodiscard]] double gdn_us(const BatchShape& s) const;

    // The plain copy kernels of a step, per token: the KV cache write of every attention layer, MLA's latent write,
    // query concatenation and output transpose, the shared expert's add, Qwen3-Next's q/k/v join; and those that run
    // only in a step of two tokens or more (a GDN layer's q, k, v and Qwen3.5's b, a made contiguous). Priced at the
    // table's ceilings.
    struct CopyOps {
        struct Group {
            int kernels = 0;
            double bytes_per_token = 0;  // read plus written, all kernels
            void add(int n, double bytes) {
                kernels += n;
                bytes_per_token += bytes;
            }
        };
        Group every_step;
        Group multi_token;     // only in a step of two tokens or more
        double launch_us = 0;  // a graph-replayed kernel's floor
        double bytes_per_s = 0;
        bool measured = false;  // both from the table's ceilings
        [[nodiscard]] double us(const Group& g, double tokens) const {
            return g.kernels == 0 ? 0.0 : g.kernels * launch_us + 1e6 * g.bytes_per_token * tokens / bytes_per_s;
        }
    };

    void add_copy(double bytes_per_token);
    [[nodiscard]] double copies_us(double tokens) const;
    static void add_op(std::vector<ElementwiseOp>& ops, const ElementwiseOp& op);
    [[nodiscard]] double elementwise_us(const ElementwiseOp& op, double units) const;

    void add_gemm(Gemm label, std::int64_t n, std::int64_t k, const models::QuantScheme* scheme);
    [[nodiscard]] double roofline_bytes_us(double bytes) const;
    [[nodiscard]] std::string source_of(bool measured, bool exact) const;

    MeasuredParams params_;
    calibration::KernelCostLookup lookup_;
    // lookup_ over params_.fused_table where set: its moe_vllm_fused pairs, priced with its own copy rate.
    calibration::KernelCostLookup fused_lookup_;
    std::string model_name_;
    AttentionLayerGroups groups_;
    std::vector<GemmOp> gemms_;
    std::optional<calibration::GemmHandle> lm_head_;
    std::vector<AttnGroup> attn_;
    std::vector<MoeGroup> moe_;
    std::vector<ElementwiseOp> rmsnorm_;
    std::vector<ElementwiseOp> silu_mul_;
    std::vector<ElementwiseOp> rope_;
    std::vector<ElementwiseOp> qk_norm_;
    ElementwiseOp sampling_;
    CopyOps copies_;
    GdnGroup gdn_;
    models::ModelSpec model_;
    RooflineCostModel roofline_;  // the untimed terms: GDN / Mamba, snapshots, comm, overhead
    std::string kernels_;         // what describe() says about quantized GEMMs
    // token_detail(n).total_us() / 1e3 at index n ≤ table size; lm_head + sampling ms by sampled sequences.
    std::vector<double> token_ms_;
    std::vector<double> lm_head_ms_;
};

}  // namespace servesim::engine
