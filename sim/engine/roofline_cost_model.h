// RooflineCostModel: step costs from datasheet figures, for any GPU that has not been calibrated. Each term is
// max(FLOPs / (peak · efficiency), bytes / (bandwidth · efficiency)) over the model's operations
// (docs/ARCHITECTURE.md "Step costs"): dense GEMMs read the weights once per step (weight-bound at small batch,
// compute-bound at large), a MoE's routed experts are a roof of their own whose FLOPs run at the grouped GEMM's
// measured share of the dense rate by tokens per expert (sim/engine/grouped_gemm_efficiency.h), prefill attention is
// compute-bound in Σ chunk·(context + chunk/2), decode attention reads every context token's KV, GDN reads and writes
// each sequence's recurrent state. Every batch up to the largest CUDA-graph capture size, decode-only (FULL graph) or
// mixed (PIECEWISE), runs its per-token terms padded to the next capture size, as vLLM's
// VllmConfig._set_cudagraph_sizes and CudagraphDispatcher.dispatch do (sim/engine/cuda_graphs.h). The default
// efficiencies and their sources are in docs/SOURCES.md ("The roofline's efficiencies"); a calibrated profile replaces
// them with measured curves. The model prices the GPU only: the host's work per step (scheduling, input preparation,
// launches, output processing) is HostWorkCostModel's (sim/engine/host_work.h), wrapped around it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "models/weight_footprint.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/cuda_graphs.h"
#include "sim/engine/expert_parallel.h"
#include "sim/engine/tensor_parallel_comm.h"

namespace servesim::engine {

struct RooflineParams {
    std::string gpu_name;
    double peak_flops_per_s = 0;            // dense bf16 (fp8 is not used for bf16 weights)
    double memory_bandwidth_bytes_per_s = 0;
    double gemm_efficiency = 0.72;          // cuBLAS bf16 at 8k tokens, sustained, on an H200 (docs/SOURCES.md)
    double attention_efficiency = 0.55;     // FlashAttention-2-class prefill kernels (docs/SOURCES.md)
    double gdn_efficiency = 0.25;           // chunked GDN kernels (fla), an assumption (docs/SOURCES.md)
    double bandwidth_efficiency = 0.85;     // H200 copy 0.88 of datasheet, kernels lower (docs/SOURCES.md)
    // Decode attention's KV reads. 0.85, as the weights: the H100 kernel table's decode attention (torch SDPA's flash
    // kernel over a contiguous cache, not vLLM's paged FA3) reached 0.79, but the development set's MHA model decodes
    // at the 0.85 rate while its GQA models decode slower than either (docs/SOURCES.md, docs/SATURATED-DECODE.md):
    // a GPU file can set it (`roofline.decode_attention_efficiency`) once vLLM's own kernel is timed.
    double decode_attention_efficiency = 0.85;
    // CUDA-graph capture sizes: vLLM's ladder up to max_cudagraph_tokens (min(2·max_num_seqs, 512,
    // max_num_batched_tokens) by default, --max-cudagraph-capture-size), or the explicit cudagraph_capture_sizes
    // (--cudagraph-capture-sizes) when not empty; enforce_eager (--enforce-eager): no graphs, no padding.
    // GPU time per kernel beyond its roofline, for every kernel of a forward (host_work.h
    // compute_kernels_per_forward): the gap between kernels replayed from a CUDA graph and the ramp and tail of a
    // kernel too short to reach the bandwidth its roofline assumes. 3.4 µs: derived from the project's torch-timed
    // whole decode forwards of Llama-3.1-8B on an H200 (calibration/profiles/h200/logs/run13_bf16_paired_sweep.log,
    // batch 1 to 128 at 2,049 tokens of context: measured − this roofline without it = 0.97 … 1.26 ms, mean 1.10 ms,
    // over 328 kernels); docs/COST-MODEL.md "Kernel boundaries". Not fitted to end-to-end runs.
    double kernel_gap_us = 3.4;
    int max_cudagraph_tokens = 512;
    std::vector<std::int64_t> cudagraph_capture_sizes;
    bool enforce_eager = false;
    // Tensor parallelism: each rank does 1/TP of the FLOPs and reads 1/TP of the weights and of the KV (heads are
    // split; KV heads per rank max(1, total/TP)); every layer adds two all-reduces of the step's hidden states
    // (after attention and after the MLP), each costed by the TP group's link (TensorParallelComm and
    // CollectiveCostModel, shared with ProfileCostModel).
    int tensor_parallel_size = 1;
    CollectiveLink tp_link;                 // the TP group's link (collective_link_for_group); 0 B/s = no comm term
    bool custom_all_reduce = true;          // vLLM's custom all-reduce not disabled
    // Expert parallelism (sim/engine/expert_parallel.h): the routed experts' GEMM FLOPs and weight reads of the
    // busiest EP rank replace their TP-sliced figures; the all-to-all is added by ExpertAllToAllCostModel.
    ExpertParallelism expert_parallel;
    // Quantized GEMMs (docs/QUANTIZATION.md): W8A8 fp8 runs at fp8_flops_per_s, W8A8 int8 at int8_flops_per_s,
    // NVFP4 W4A4 at fp4_flops_per_s; 0 = the GPU has no such tensor cores and vLLM runs its weight-only fallback
    // (fp8 / NVFP4 Marlin: quantized weights read, multiplied at the activation dtype, peak_flops_per_s).
    // Weight-only schemes (AWQ, GPTQ, bitsandbytes, MXFP4) always run at peak_flops_per_s on their quantized bytes.
    double fp8_flops_per_s = 0;
    double int8_flops_per_s = 0;
    double fp4_flops_per_s = 0;
};

// The local span of an attention layer (sliding_window_tokens or attention_chunk_tokens), none for full attention.
[[nodiscard]] std::optional<LocalAttentionSpan> local_attention_span(const models::AttentionMixer& attn);

// The model's attention layers grouped by span (first-layer order). ConfigError naming the model when it has more
// than kMaxLocalAttentionSpans distinct spans.
[[nodiscard]] AttentionLayerGroups attention_layer_groups(const models::ModelSpec& model);

class RooflineCostModel final : public CostModel {
public:
    RooflineCostModel(const models::ModelSpec& model, models::DType kv_dtype, const RooflineParams& params);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return groups_.local; }

    // vLLM's CUDA-graph capture sizes: 1, 2, 4, 8…248 step 8, 256…max step 16; a batch of n tokens runs the graph
    // of the next size ≥ n (n above max runs eagerly, unpadded). CudaGraphSizes(max) pads the same way.
    [[nodiscard]] static std::int64_t cudagraph_padded_tokens(std::int64_t n, int max_cudagraph_tokens);

    // The capture sizes the params give (cudagraph_capture_sizes, else the ladder to max_cudagraph_tokens; none with
    // enforce_eager): what step_cost pads to, and what a HostWorkModel of the same engine is built with.
    [[nodiscard]] static CudaGraphSizes capture_sizes(const RooflineParams& params);
    [[nodiscard]] const CudaGraphSizes& graphs() const { return graphs_; }

    // The terms of a step that depend only on its (padded) token count: the GEMMs with their weight and activation
    // traffic (the routed experts as a roof of their own, at GroupedGemmEfficiency's share of gemm_efficiency), and
    // the tensor-parallel all-reduces. Computed on each call; step_cost reads them from a table filled
    // with this function for the capture sizes, so a step's figures are the ones computed here, to the bit.
    struct TokenTerms {
        double gemm_ms = 0;
        double comm_ms = 0;
    };
    [[nodiscard]] TokenTerms token_terms(std::int64_t tokens) const;
    // The lm_head term of a step sampling num_sampled_seqs sequences (> 0): computed on each call, and read by
    // step_cost from a table filled with it for 1..max_cudagraph_tokens sequences, so the same figure to the bit.
    [[nodiscard]] double lm_head_ms(std::int64_t num_sampled_seqs) const;
    // One more chunk of the recurrent layers' chunked scan in a prefill, the price of a state copy taken off the
    // scan's chunk grid (StateSnapshotCost::kernel_chunk_ms): the scan's FLOPs and traffic of chunk_tokens tokens (a
    // partial chunk runs as a full chunk_tokens-row tile) at the GDN / Mamba rates of step_cost, plus the one more
    // write of the state the scan makes at each chunk end. 0 for a model without recurrent layers.
    [[nodiscard]] double scan_chunk_ms(int chunk_tokens) const;

private:
    RooflineParams params_;
    CudaGraphSizes graphs_;
    std::string model_name_;
    double linear_flops_per_token_ = 0;  // without the lm_head; the routed experts included
    double lm_head_flops_per_seq_ = 0;
    double lm_head_bytes_ = 0;            // lm_head (or tied embedding) weights read per step, this rank's share
    // Full-attention layers; the local-span layers (sliding window, chunked local) have their own sums below.
    double attn_flops_per_work_ = 0;      // 4 · Hq · hd summed over attention layers (MLA: unabsorbed prefill)
    double attn_decode_flops_per_token_ = 0;  // per context token read in decode (MLA: absorbed, over the latent)
    double kv_bytes_per_token_ = 0;
    // Per local span of groups_.local: the same three sums over its layers, applied to BatchShape::local[i].
    AttentionLayerGroups groups_;
    std::array<double, kMaxLocalAttentionSpans> local_flops_per_work_{};
    std::array<double, kMaxLocalAttentionSpans> local_decode_flops_per_token_{};
    std::array<double, kMaxLocalAttentionSpans> local_kv_bytes_per_token_{};
    double gdn_flops_per_token_ = 0;      // core chunked-scan FLOPs, all GDN layers
    // Mamba2 / Mamba-1 layers (mamba_scan_work in the .cpp): the conv and scan kernels between the projections.
    double mamba_prefill_flops_per_token_ = 0;
    double mamba_prefill_bytes_per_token_ = 0;
    double mamba_decode_flops_per_seq_ = 0;
    double state_bytes_per_seq_ = 0;
    // A copy, not a reference: the caller's ModelSpec may move (PreparedExperiment is moved into a vector after the
    // cost model is built), and a pointer to it dangled (use after free in step_cost).
    models::ModelSpec model_;
    TensorParallelComm comm_;
    double kernel_gaps_ms_ = 0;  // compute_kernels_per_forward(model) × kernel_gap_us, every step
    // The weights every step reads whatever its tokens (all ranks, the lm_head included, the routed experts not),
    // computed once because step_cost runs every step.
    double dense_weight_bytes_ = 0;

    // The routed experts, priced as their own roof in token_terms (GroupedGemmEfficiency): one entry per run of MoE
    // layers with the same experts, top-k and expert size. FLOPs are all ranks' and bf16-equivalent (a quantized
    // kernel's FLOPs · peak / its rate); bytes are one expert's weights (and scales) of one layer.
    struct ExpertGroup {
        int num_experts = 0;
        double top_k = 0;
        double bytes_per_expert = 0;
        double layers = 0;
        double flops_per_token = 0;  // all layers of the group
    };

    std::vector<ExpertGroup> expert_groups_;
    double expert_flops_per_token_ = 0;  // Σ over expert_groups_, this rank's share: taken out of the dense roof
    // Quantized models: the scheme's bytes per step (models/weight_footprint.h), computed once; linear FLOPs are then
    // counted at the bf16-equivalent cost of their kernel (fp8 FLOPs · peak / fp8 rate, ...).
    std::optional<models::WeightFootprint> footprint_;
    std::string kernels_;  // what describe() says about the quantized GEMMs
    // token_terms(n) at index n for each CUDA-graph capture size n (known), which is what every batch of up to the
    // largest size is padded to: a pure function of n, computed once instead of per step.
    struct KnownTokenTerms {
        TokenTerms terms;
        bool known = false;
    };
    std::vector<KnownTokenTerms> token_terms_by_capture_size_;
    // lm_head_ms(n) at index n for 1 ≤ n ≤ the largest capture size (index 0 unused): a pure function of n.
    std::vector<double> lm_head_ms_by_seqs_;
};

}  // namespace servesim::engine
