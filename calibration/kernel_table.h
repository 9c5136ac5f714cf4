// KernelTable: one GPU's measured kernel times (calibration/kernels/<gpu>.yaml, the format of
// docs/COST-MODEL.md "The kernel table"), read and checked, and the lookups the measured cost model composes a step
// from. A table holds, per operation class (GEMMs by dtype, attention prefill / decode, MLA decode, MoE, norms,
// sampling), entries keyed by the operation's fixed shape (a GEMM's N and K, an attention layer's head geometry, ...)
// with microsecond times over a grid of the sizes that vary per step (tokens M, batch, context).
//
// Lookups (KernelCostLookup): a shape the table holds is interpolated piecewise-linearly between its measured points
// (beyond the last point extended along the last segment, never below the last point's time per unit; below the
// first point the first point's time: a kernel is not taken to run faster than its smallest measured call). A shape
// the table does not hold takes the measured *efficiency* (datasheet roofline time ÷ measured time) of the nearest
// measured shape at the same varying size and applies it to its own roofline time; the same rule predicts a GPU that
// has no table from another GPU's (efficiency of the measured GPU at the same shape × this GPU's roofline), except
// that a call's fixed time — the least time beyond the table GPU's roofline over an entry's points: launch, pipeline
// fill, tail — is kept as measured and only the rest moves with the roofline (decode attention, GEMMs, MoE; the
// elementwise ops keep their one-token time, KernelCurve::at_scaled). The
// kernels vLLM runs for each term are those timed (cuBLASLt GEMMs through torch, FlashAttention-class attention,
// fused MoE): see docs/COST-MODEL.md.
#pragma once

#include <array>
#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::calibration {

struct GpuSpec;

// Piecewise-linear curve over strictly increasing x (time in µs).
struct KernelCurve {
    std::vector<double> x;
    std::vector<double> us;

    // Interpolated inside; above the last point extended along the last segment but never below us.back()·v/x.back();
    // below the first point us.front(). A one-point curve: us·v/x above, us below.
    [[nodiscard]] double at(double v) const;
    // at(v) for a call of another shape whose data-proportional part is `scale` times this one's: the time at the
    // first point (one token: the launch and the kernel's fixed latency, which do not grow with the shape) is kept,
    // only the rest is scaled. Exactly at(v) for scale 1.
    [[nodiscard]] double at_scaled(double v, double scale) const;
};

// A 2-D grid: us[i·y.size() + j] at x[i], y[j]. Interpolated along y in the two rows around v_x, then along x, with
// KernelCurve's rules on each axis.
struct KernelGrid {
    std::vector<double> x;
    std::vector<double> y;
    std::vector<double> us;  // row-major, x.size() × y.size()

    [[nodiscard]] double at(double vx, double vy) const;
};

enum class GemmKind { kBf16, kFp8Tensor, kFp8Rowwise, kFp8Block };
inline constexpr int kNumGemmKinds = 4;
[[nodiscard]] const char* gemm_kind_key(GemmKind k);  // gemm_bf16, gemm_fp8_tensor, ...

struct GemmEntry {
    std::int64_t n = 0;
    std::int64_t k = 0;
    KernelCurve m;  // tokens M
    std::optional<bool> fast_accum;  // fp8 only: timed with fast accumulation (absent: not recorded)
};

struct AttentionGeometry {
    int head_dim = 0;
    int q_heads = 0;
    int kv_heads = 0;
};

struct AttnPrefillEntry {
    std::string backend;
    AttentionGeometry geometry;
    KernelCurve tokens;
};

struct AttnPrefillCachedEntry {
    std::string backend;
    AttentionGeometry geometry;
    KernelGrid chunk_context;  // x: chunk, y: context
};

struct AttnDecodeEntry {
    std::string backend;
    AttentionGeometry geometry;
    KernelGrid batch_context;  // x: batch, y: context
};

struct MlaDecodeEntry {
    int q_heads = 0;
    int kv_lora_rank = 0;
    int rope_dim = 0;
    KernelGrid batch_context;
};

struct MoeEntry {
    int experts = 0;
    int top_k = 0;
    int hidden = 0;
    int intermediate = 0;  // 0 in moe_routing entries
    KernelCurve tokens;
    // moe_vllm_fused only: the paired torch grouped-GEMM times at the same token counts (`grouped_us`), timed beside
    // the fused kernel in one lease, so that their ratio is free of lease-to-lease drift.
    KernelCurve grouped;
};

// rmsnorm (width = hidden), silu_mul (intermediate), qk_norm (heads · head_dim), sampling (vocab; the curve's x is
// the batch).
struct WidthEntry {
    std::int64_t width = 0;
    std::string method;  // sampling: greedy | top_p | ... (empty for the others)
    int head_dim = 0;    // qk_norm: rows are heads of this size (width = heads x head_dim); 0 for the others
    KernelCurve tokens;
};

struct RopeEntry {
    AttentionGeometry geometry;
    int rotary_dim = 0;  // dimensions rotated per head (partial rotary, e.g. 64 of 256); = head_dim when absent
    KernelCurve tokens;
};

// Gated DeltaNet kernels of one layer at a per-rank head geometry (vLLM: chunk_gated_delta_rule for prefill chunks,
// fused_recurrent_gated_delta_rule for decodes, vllm/model_executor/layers/fla/ops): gdn_prefill over the tokens of
// `seqs` equal sequences in one call; gdn_decode over the batch (one token each, the state read and written).
struct GdnEntry {
    int key_heads = 0;
    int value_heads = 0;
    int head_dim = 0;
    int seqs = 0;  // gdn_prefill: sequences the tokens are split over; 0 for gdn_decode
    KernelCurve curve;  // x: tokens in all (prefill) or batch (decode)
};

// The causal conv1d (width 4) before a GDN or Mamba kernel, over `dim` channels: prefill over tokens
// (causal_conv1d_fn), decode over the batch (causal_conv1d_update).
struct Conv1dEntry {
    std::int64_t dim = 0;
    bool decode = false;
    KernelCurve curve;
};

// A whole torch-timed forward, for composition checks.
struct ForwardEntry {
    std::string model;
    std::string kind;  // prefill | decode
    std::int64_t tokens = 0;
    std::int64_t context = 0;
    std::int64_t batch = 1;
    double ms = 0;
    bool cuda_graph = false;
    // MoE forwards: how tokens were routed. "hidden": the random router over the hidden state, which with random
    // weights can crowd a prefill's tokens onto few experts; "balanced": random per-token logits, every expert reached
    // as a trained, load-balanced router reaches them (sweep_tables.py --fwd-routing).
    std::string routing = "hidden";
};

struct KernelTable {
    std::string file;  // where it was read from ("calibration/kernels/H100-SXM.yaml")
    std::string gpu;   // catalog name (or the device name, as written)
    std::string device_name;
    std::string date;
    std::string software;
    std::string method;
    // `ceilings:` as measured (informational; efficiencies are taken against the datasheet, docs/COST-MODEL.md).
    std::optional<double> bf16_gemm_tflops, fp8_gemm_tflops, copy_gb_per_s, launch_us, graph_launch_us;
    std::array<std::vector<GemmEntry>, kNumGemmKinds> gemm;  // by GemmKind; each sorted by n·k, then k
    std::vector<AttnPrefillEntry> attn_prefill;
    std::vector<AttnPrefillCachedEntry> attn_prefill_cached;
    std::vector<AttnDecodeEntry> attn_decode;
    std::vector<MlaDecodeEntry> attn_decode_mla;
    std::vector<MoeEntry> moe;
    // `moe_routing_fused` (vLLM's routing kernels: topk_softmax, moe_align_block_size, moe_sum) when the table has
    // it, else `moe_routing` (torch ops, an upper bound); routing_fused says which.
    std::vector<MoeEntry> moe_routing;
    bool routing_fused = false;
    // `moe_routing` as timed (torch ops), kept beside the fused one: the table's timed forwards route with torch
    // ops, so `inspect --check-kernels` composes them with this list (tools/app/kernel_checks.cpp).
    std::vector<MoeEntry> moe_routing_torch;
    // `moe_vllm_fused`: vLLM's fused_moe algorithm (Triton, vLLM's shipped tile configs for this GPU) beside torch's
    // grouped GEMM pair (the `moe` op), at a few MoE shapes; the cost model scales `moe` by their ratio
    // (KernelCostLookup::fused_over_grouped). The timed forwards run the grouped pair, so `--check-kernels` drops it.
    std::vector<MoeEntry> moe_vllm_fused;
    std::vector<WidthEntry> rmsnorm;
    std::vector<WidthEntry> silu_mul;
    std::vector<RopeEntry> rope;
    std::vector<WidthEntry> qk_norm;  // width = heads · head_dim of one call (rows = tokens × heads)
    std::vector<WidthEntry> sampling;
    std::vector<GdnEntry> gdn_prefill;  // sorted by (value_heads, key_heads, head_dim, seqs)
    std::vector<GdnEntry> gdn_decode;
    std::vector<Conv1dEntry> conv1d;
    std::vector<WidthEntry> gdn_aux;  // gating + gated RMSNorm around the GDN kernel; width = value_heads · head_dim
    std::vector<ForwardEntry> forwards;
};

// Reads one table's text. Every key is checked: the top-level and `ceilings:` keys, and every entry of a known op
// (grids positive and strictly increasing, `us` of the grid's shape, all finite and > 0); unknown ops under `ops:`
// are ignored (forward-compatible). ConfigError names `file`, the key and what is allowed.
[[nodiscard]] KernelTable parse_kernel_table(const std::string& text, const std::string& file);

// A table by path (ConfigError naming the path when it cannot be read).
[[nodiscard]] KernelTable read_kernel_table(const std::string& path);

// Every built-in table (calibration/kernels/*.yaml), in file-name order; may be empty.
[[nodiscard]] const std::vector<KernelTable>& kernel_table_catalog();

// The built-in table measured on `gpu` (its `gpu:` names the catalog name, an alias or the device name), or none.
[[nodiscard]] const KernelTable* find_kernel_table(const GpuSpec& gpu);

// The datasheet roofline of one GPU, as the lookups use it: dense tensor-core rates and memory bandwidth.
struct KernelRoof {
    double bf16_flops_per_s = 0;
    double fp8_flops_per_s = 0;  // 0: no fp8 tensor cores
    double bytes_per_s = 0;

    [[nodiscard]] static KernelRoof of(const GpuSpec& gpu);
    bool operator==(const KernelRoof&) const = default;
};

// How a GEMM runs on the predicted GPU: the tensor-core rate (bf16 or fp8) and the bytes per element of its
// activations and weights (fp8 W8A8: 1 and 1; fp8 weights via Marlin on a GPU without fp8: bf16 math, 2 and 1).
struct GemmRun {
    bool fp8_math = false;
    double activation_bytes = 2;
    double weight_bytes = 2;
};

// A GEMM shape resolved against a table once (the cost model resolves its projections at construction and evaluates
// them each step): the entry itself when (n, k) is in the table, else the two entries around it in log(n·k) whose
// efficiencies are blended by its position between them.
struct GemmHandle {
    GemmKind source = GemmKind::kBf16;  // the table op timed
    std::int64_t n = 0;
    std::int64_t k = 0;
    GemmRun run;  // on the predicted GPU
    const GemmEntry* lo = nullptr;
    const GemmEntry* hi = nullptr;  // == lo for an exact shape or beyond the table's range
    double w = 0;                   // blend weight of hi
    bool exact = false;             // (n, k) measured and the predicted GPU is the table's
    double fixed_us = 0;            // on another GPU: lo's and hi's fixed times blended (ScaledEntry::fixed_us)
};

// A measured call moved to another GPU with its fixed time kept: fixed + (its time on the table's GPU − fixed) ×
// `ratio` (the GPUs' roofline ratio for its work). With fixed 0 it is the plain efficiency transfer.
[[nodiscard]] inline double moved_to_gpu_us(double on_table_gpu_us, double ratio, double fixed_us) {
    return fixed_us + std::max(0.0, on_table_gpu_us - fixed_us) * ratio;
}

// An attention geometry resolved: the nearest entry (same head dim first, then nearest GQA ratio, then nearest
// query heads, in log) and the factor target-roofline / source-roofline, constant in the varying sizes because both
// rooflines are linear in them.
template <typename Entry>
struct ScaledEntry {
    const Entry* entry = nullptr;
    double scale = 1;  // exactly 1 for a measured geometry on its own GPU
    bool exact = false;
    // On another GPU the entry's fixed time (fixed_us, KernelCostLookup: the launch, pipeline fill and tail that
    // neither bandwidth nor FLOPs shorten) is kept and only the rest is scaled by the GPUs' roofline ratio;
    // src_scale is the shape's factor alone (the table GPU's roofline of the wanted geometry over the entry's).
    // fixed_us is 0 on the table's own GPU, where of(t) is t · scale.
    double src_scale = 1;
    double fixed_us = 0;

    [[nodiscard]] double of(double measured_us) const {
        return moved_to_gpu_us(measured_us * src_scale, scale / src_scale, fixed_us);
    }
};

// Per-token (or per-sequence) work of one call, for the rooflines: FLOPs and bytes per unit of the varying size.
struct UnitWork {
    double flops = 0;
    double bytes = 0;
};

class KernelCostLookup {
  public:
    // `table_roof`: the datasheet of the GPU the table was measured on; `target`: of the GPU being predicted (equal
    // for the table's own GPU).
    KernelCostLookup(const KernelTable& table, const KernelRoof& table_roof, const KernelRoof& target);

    [[nodiscard]] const KernelTable& table() const { return *table_; }

    [[nodiscard]] bool transfer() const { return !(table_roof_ == target_); }

    // GEMMs. `want` is the op the kernel vLLM picks corresponds to; when the table lacks it, fp8_block falls back to
    // fp8_rowwise, then fp8_tensor, then bf16 (scaled to the fp8 roofline); an fp8 op when the target has no fp8 to
    // bf16. nullopt when the table has no GEMM entries at all.
    [[nodiscard]] std::optional<GemmHandle> resolve_gemm(GemmKind want,
                                                         std::int64_t n,
                                                         std::int64_t k,
                                                         const GemmRun& run) const;
    [[nodiscard]] double gemm_us(const GemmHandle& h, double m) const;
    // Convenience for tests and inspect: resolve then evaluate (bf16 run for kBf16, W8A8 for the fp8 kinds).
    [[nodiscard]] double gemm_us(GemmKind kind, double m, std::int64_t n, std::int64_t k) const;

    // Attention. `per_key`: this layer's FLOPs per (query, key) pair and KV bytes per key on the predicted GPU (MLA:
    // the unabsorbed prefill or the absorbed decode figures).
    [[nodiscard]] std::optional<ScaledEntry<AttnPrefillEntry>> resolve_attn_prefill(const AttentionGeometry& g,
                                                                                    const UnitWork& per_key) const;
    [[nodiscard]] std::optional<ScaledEntry<AttnPrefillCachedEntry>> resolve_attn_prefill_cached(
        const AttentionGeometry& g, const UnitWork& per_key) const;
    [[nodiscard]] std::optional<ScaledEntry<AttnDecodeEntry>> resolve_attn_decode(const AttentionGeometry& g,
                                                                                  const UnitWork& per_key) const;
    [[nodiscard]] std::optional<ScaledEntry<MlaDecodeEntry>> resolve_mla_decode(int q_heads,
                                                                                int kv_lora_rank,
                                                                                int rope_dim,
                                                                                const UnitWork& per_key) const;

    // µs of one causal prefill of `tokens` tokens with no cached prefix. Beyond the longest prompt measured the
    // time grows with the work, T²/2, not with T: never below t_last·(T/T_last)² (KernelCurve's linear extension
    // alone put a 32k prefill of Llama-3.1-8B on an H200 30 % under its timed forward, docs/COST-MODEL.md).
    [[nodiscard]] static double attn_prefill_us(const ScaledEntry<AttnPrefillEntry>& e, double tokens) {
        const KernelCurve& c = e.entry->tokens;
        double us = c.at(tokens);
        if (!c.x.empty() && tokens > c.x.back()) {
            const double r = tokens / c.x.back();
            us = std::max(us, c.us.back() * r * r);
        }
        return e.of(us);
    }

    [[nodiscard]] static double attn_prefill_cached_us(const ScaledEntry<AttnPrefillCachedEntry>& e,
                                                       double chunk,
                                                       double context) {
        return e.of(e.entry->chunk_context.at(chunk, context));
    }

    // µs of one decode step of `batch` sequences of `context` keys each.
    [[nodiscard]] static double attn_decode_us(const ScaledEntry<AttnDecodeEntry>& e, double batch, double context) {
        return e.of(e.entry->batch_context.at(batch, context));
    }

    [[nodiscard]] static double mla_decode_us(const ScaledEntry<MlaDecodeEntry>& e, double batch, double context) {
        return e.of(e.entry->batch_context.at(batch, context));
    }

    // MoE: the routed experts of one layer (experts, top_k, hidden, per-rank intermediate) at `tokens` tokens. A
    // shape not measured is read at the same mean tokens per expert (tokens·top_k/experts) from the nearest entry
    // (log(hidden·intermediate), then experts) and scaled by the rooflines' ratio at those token counts.
    struct MoeShape {
        int experts = 0;
        int top_k = 0;
        int hidden = 0;
        int intermediate = 0;
        bool gated = true;
        double weight_bytes = 2;  // per expert weight element (fp8 experts: 1)
        bool fp8_math = false;    // W8A8 fp8 experts on a GPU with fp8 tensor cores
    };

    [[nodiscard]] const MoeEntry* resolve_moe(const MoeShape& s) const;
    [[nodiscard]] double moe_us(const MoeEntry& e, const MoeShape& s, double tokens) const;
    // vLLM's fused_moe over the table's grouped GEMM pair, at the same mean tokens per expert on the nearest
    // moe_vllm_fused shape (held at the ends of its measured range), for bf16 experts; none (nullptr) when the table
    // has no such entry or the experts are quantized (vLLM's fp8 and weight-only MoE paths were not timed).
    [[nodiscard]] const MoeEntry* resolve_moe_fused(const MoeShape& s) const;
    [[nodiscard]] double fused_over_grouped(const MoeEntry& fused, const MoeShape& s, double tokens) const;
    [[nodiscard]] const MoeEntry* resolve_moe_routing(const MoeShape& s) const;
    [[nodiscard]] double moe_routing_us(const MoeEntry& e, const MoeShape& s, double tokens) const;

    // Elementwise ops: the entry of the nearest width (log), its data-proportional part scaled by the bandwidth
    // roofline (bytes ∝ width; KernelCurve::at_scaled).
    // `width` is hidden (rmsnorm), intermediate (silu_mul) or vocab (sampling: the varying size is the batch).
    [[nodiscard]] static const WidthEntry* nearest_width(const std::vector<WidthEntry>& entries, std::int64_t width);
    [[nodiscard]] double width_scale(const WidthEntry& e, std::int64_t width) const;
    [[nodiscard]] const RopeEntry* resolve_rope(const AttentionGeometry& g) const;
    [[nodiscard]] double rope_scale(const RopeEntry& e, const AttentionGeometry& g) const;

    // Gated DeltaNet: the entry of the same (key heads, value heads, head dim) — for gdn_prefill the one of `seqs`
    // sequences — else the nearest value-head count of the same head dim (log), scaled by the bandwidth roofline of
    // the state it streams (value_heads · head_dim²). nullopt when the table has no such op.
    struct GdnShape {
        int key_heads = 0;
        int value_heads = 0;
        int head_dim = 0;
    };
    struct ScaledCurve {
        const KernelCurve* curve = nullptr;
        double scale = 1;
        [[nodiscard]] double at(double v) const { return curve->at(v) * scale; }
    };
    [[nodiscard]] std::optional<ScaledCurve> resolve_gdn(const std::vector<GdnEntry>& op,
                                                         const GdnShape& g,
                                                         int seqs) const;
    // conv1d of the nearest channel count in the same mode, scaled by the bandwidth roofline (bytes ∝ dim).
    [[nodiscard]] std::optional<ScaledCurve> resolve_conv1d(std::int64_t dim, bool decode) const;

    // The roofline time in µs of a call of `flops` and `bytes` on the table's GPU or the target.
    [[nodiscard]] double table_roof_us(double flops, double bytes, bool fp8_math = false) const;
    [[nodiscard]] double target_roof_us(double flops, double bytes, bool fp8_math = false) const;

  private:
    [[nodiscard]] double gemm_eff(const GemmEntry& e, GemmKind source, double m) const;
    // An entry's fixed time on the table's GPU (0 on its own GPU): min over its points of measured − roofline.
    [[nodiscard]] double gemm_fixed_us(const GemmEntry& e, GemmKind source) const;
    [[nodiscard]] double grid_fixed_us(const KernelGrid& g, const UnitWork& per_unit) const;
    [[nodiscard]] double moe_fixed_us(const MoeEntry& e) const;

    const KernelTable* table_;
    KernelRoof table_roof_;
    KernelRoof target_;
    std::vector<double> moe_fixed_;  // moe_fixed_us of each table_->moe entry, on another GPU (asked every call)
};

// The roofline of a GEMM Y[m,n] = X[m,k]·W[n,k]ᵀ: 2mnk FLOPs; X and W read, Y written in bf16.
[[nodiscard]] UnitWork gemm_work(double m, double n, double k, const GemmRun& run);

// The roofline of one routed-expert layer at `tokens` tokens: 2·tokens·top_k·(2 or 3)·hidden·intermediate FLOPs;
// weights of the distinct experts touched, E·(1 − (1 − k/E)^tokens), read once, activations in and out.
[[nodiscard]] UnitWork moe_work(
    int experts, int top_k, int hidden, int intermediate, bool gated, double tokens, double weight_bytes);

}  // namespace servesim::calibration
