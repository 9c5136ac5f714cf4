// Roofline step costs; see roofline_cost_model.h.
#include "sim/engine/roofline_cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "models/model_derived.h"
#include "sim/engine/grouped_gemm_efficiency.h"
#include "sim/engine/host_work.h"
#include "sim/memory/expert_placement.h"

namespace servesim::engine {

std::optional<LocalAttentionSpan> local_attention_span(const models::AttentionMixer& attn) {
    if (attn.sliding_window_tokens > 0) {
        return LocalAttentionSpan{LocalAttentionSpan::Kind::kSlidingWindow, attn.sliding_window_tokens};
    }
    if (attn.attention_chunk_tokens > 0) {
        return LocalAttentionSpan{LocalAttentionSpan::Kind::kChunkedLocal, attn.attention_chunk_tokens};
    }
    return std::nullopt;
}

namespace {

// GEMM FLOPs counted at the bf16 peak: each kernel's FLOPs × peak / its rate (a GPU without the rate runs the
// weight-only fallback at bf16 math, so its FLOPs count as they are).
double bf16_equivalent_flops(const models::KernelFlops& k, const RooflineParams& p) {
    const double peak = p.peak_flops_per_s;
    const auto at = [peak](double f, double rate) { return rate > 0 ? f * peak / rate : f; };
    return k.activation_dtype + at(k.fp8, p.fp8_flops_per_s) + at(k.int8, p.int8_flops_per_s) +
           at(k.fp4, p.fp4_flops_per_s);
}

// A roofline's time in ms: the slower of its FLOPs at f_rate and its bytes at b_rate.
double roof_ms(double f, double f_rate, double bytes, double b_rate) {
    return 1e3 * std::max(f / f_rate, bytes / b_rate);
}

// What a Mamba layer's kernels between its in_proj and out_proj GEMMs (which linear_flops_per_token already
// counts) cost per token, as vLLM runs them (vllm/model_executor/layers/mamba/mamba_mixer2.py, mamba_mixer.py).
struct MambaScanWork {
    double prefill_flops_per_token = 0;
    double prefill_bytes_per_token = 0;
    double decode_flops_per_seq = 0;  // the state read and write are the roofline's state term
};

// Mamba2 with H heads of P channels, state N, G groups, chunk Q, conv kernel Kc over D = H·P + 2·G·N channels.
// Prefill: causal_conv1d_fn (2·Kc·D FLOPs; reads and writes D) then mamba_chunk_scan_combined_varlen
// (ops/ssd_combined.py), per chunk of Q tokens: _chunk_state Bᵀx (2·H·P·N per token), _state_passing over the
// chunk states (2·H·P·N / Q), _bmm_chunk C·Bᵀ (2·G·Q·N), _chunk_scan C·state + (CBᵀ∘L)·x (2·H·P·N + 2·H·Q·P);
// bytes: x, B, C and dt read, y written (D + H + H·P elements), the chunk states written in fp32 and read, written
// again at the state dtype and read (H·P·N·(8 + 2·s) / Q), CB written and read in fp32 (8·G·Q).
// Decode: causal_conv1d_update (2·Kc·D) and selective_state_update, ≈ 5 FLOPs per state element (dA, dB·x, the
// update, C·state).
MambaScanWork mamba2_scan_work(const models::Mamba2Mixer& m, double b) {
    const double h = m.num_heads;
    const double p = m.head_dim;
    const double n = m.state_size;
    const double g = m.n_groups;
    const double q = m.chunk_size > 0 ? m.chunk_size : 256;  // HF Mamba2Config default chunk_size
    const double d = h * p + 2.0 * g * n;
    const double kc = m.conv_kernel;
    const double s = models::dtype_bytes(m.ssm_state_dtype);
    MambaScanWork w;
    w.prefill_flops_per_token =
        2.0 * kc * d + 4.0 * h * p * n + 2.0 * h * p * n / q + 2.0 * g * q * n + 2.0 * h * q * p;
    w.prefill_bytes_per_token = (3.0 * d + h + h * p) * b + h * p * n * (8.0 + 2.0 * s) / q + 8.0 * g * q;
    w.decode_flops_per_seq = 2.0 * kc * d + 5.0 * h * p * n;
    return w;
}

// Mamba-1 (Jamba) with I inner channels and state N: causal_conv1d (2·Kc·I) and selective_scan_fn, ≈ 7 FLOPs per
// state element and token (exp(δA), δB·x, the update, C·h); bytes: conv in and out, x, δ, z read, y written
// (6·I) plus B and C (2·N). Decode: causal_conv1d_update and selective_state_update (5 per state element).
MambaScanWork mamba1_scan_work(const models::Mamba1Mixer& m, double b) {
    const double i = m.intermediate_size;
    const double n = m.state_size;
    const double kc = m.conv_kernel;
    MambaScanWork w;
    w.prefill_flops_per_token = 2.0 * kc * i + 7.0 * i * n;
    w.prefill_bytes_per_token = (6.0 * i + 2.0 * n) * b;
    w.decode_flops_per_seq = 2.0 * kc * i + 5.0 * i * n;
    return w;
}

}  // namespace

AttentionLayerGroups attention_layer_groups(const models::ModelSpec& model) {
    AttentionLayerGroups g;
    for (const auto& layer : model.layers) {
        const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer);
        if (a == nullptr) {
            continue;
        }
        const std::optional<LocalAttentionSpan> span = local_attention_span(*a);
        if (!span) {
            ++g.full_layers;
            continue;
        }
        int i = 0;
        while (i < g.local.count && !(g.local.spans[i] == *span)) {
            ++i;
        }
        if (i == g.local.count) {
            if (g.local.count == kMaxLocalAttentionSpans) {
                throw ConfigError(fmt::format("model {}: more than {} distinct sliding-window / chunk sizes among its "
                                              "attention layers; the step cost models at most {}",
                                              model.name, kMaxLocalAttentionSpans, kMaxLocalAttentionSpans));
            }
            g.local.spans[g.local.count++] = *span;
        }
        ++g.local_layers[i];
    }
    return g;
}

CudaGraphSizes RooflineCostModel::capture_sizes(const RooflineParams& params) {
    if (params.enforce_eager) {
        return {};
    }
    if (!params.cudagraph_capture_sizes.empty()) {
        return CudaGraphSizes::from_list(params.cudagraph_capture_sizes);
    }
    return CudaGraphSizes(params.max_cudagraph_tokens);
}

RooflineCostModel::RooflineCostModel(const models::ModelSpec& model, models::DType kv_dtype,
                                     const RooflineParams& params)
    : params_(params), graphs_(capture_sizes(params)), model_name_(model.name), groups_(attention_layer_groups(model)), model_(model) {
    const double b = models::dtype_bytes(model.dtype);
    const double hv = static_cast<double>(model.hidden_size) * model.vocab_size;
    lm_head_flops_per_seq_ = 2.0 * hv;
    lm_head_bytes_ = hv * b;
    linear_flops_per_token_ = models::linear_flops_per_token(model) - lm_head_flops_per_seq_;
    const int tp = std::max(1, params_.tensor_parallel_size);
    double local_kv_bytes = 0;  // of one rank, taken out of the full layers' KV bytes below
    for (const auto& layer : model.layers) {
        if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
            const std::optional<LocalAttentionSpan> span = local_attention_span(*a);
            if (!span) {
                attn_flops_per_work_ += models::attention_flops_per_key(*a);
                attn_decode_flops_per_token_ += models::decode_attention_flops_per_key(*a);
                continue;
            }
            const int i = static_cast<int>(
                std::find(groups_.local.spans.begin(), groups_.local.spans.begin() + groups_.local.count, *span) -
                groups_.local.spans.begin());
            local_flops_per_work_[i] += models::attention_flops_per_key(*a);
            local_decode_flops_per_token_[i] += models::decode_attention_flops_per_key(*a);
            const double kv = static_cast<double>(models::kv_bytes_per_token_layer(*a, kv_dtype, tp));
            local_kv_bytes_per_token_[i] += kv;
            local_kv_bytes += kv;
        } else if (const auto* g = std::get_if<models::GatedDeltaNetMixer>(&layer.mixer)) {
            // Chunked WY scan per token and value head (C = 64): state pass, output and update ≈ 6·dk·dv, plus the
            // in-chunk products ≈ 4·C·(dk + dv) (docs/SOURCES.md, "Gated DeltaNet": ~183 kFLOP at dk = dv = 128).
            const double dk = g->k_head_dim;
            const double dv = g->v_head_dim;
            gdn_flops_per_token_ += g->num_v_heads * (6.0 * dk * dv + 4.0 * 64.0 * (dk + dv));
        } else if (const auto* m2 = std::get_if<models::Mamba2Mixer>(&layer.mixer)) {
            const MambaScanWork w = mamba2_scan_work(*m2, b);
            mamba_prefill_flops_per_token_ += w.prefill_flops_per_token;
            mamba_prefill_bytes_per_token_ += w.prefill_bytes_per_token;
            mamba_decode_flops_per_seq_ += w.decode_flops_per_seq;
        } else if (const auto* m1 = std::get_if<models::Mamba1Mixer>(&layer.mixer)) {
            const MambaScanWork w = mamba1_scan_work(*m1, b);
            mamba_prefill_flops_per_token_ += w.prefill_flops_per_token;
            mamba_prefill_bytes_per_token_ += w.prefill_bytes_per_token;
            mamba_decode_flops_per_seq_ += w.decode_flops_per_seq;
        }
    }
    if (model.quantization) {
        // Each linear layer at the rate of the kernel vLLM picks for it. W8A8 fp8 without fp8 tensor cores (Ampere)
        // runs MarlinFP8ScaledMMLinearKernel (kernels/linear/scaled_mm/marlin.py, capability < 89): fp8 weights,
        // bf16 math; NVFP4 without fp4 runs the NVFP4 Marlin path likewise; weight-only schemes dequantize into a
        // GEMM at the activation dtype.
        footprint_ = models::weight_footprint(model);
        const models::KernelFlops& k = footprint_->layer_flops_per_token;
        linear_flops_per_token_ = bf16_equivalent_flops(k, params_);
        lm_head_bytes_ = footprint_->lm_head_bytes;
        const auto kernel = [&](double f, double rate, const char* name, const char* fallback) {
            if (f <= 0) {
                return std::string();
            }
            return rate > 0 ? fmt::format(", {} GEMMs at {:.0f} TFLOP/s", name, rate / 1e12)
                            : fmt::format(", {} weights via {} (bf16 math)", name, fallback);
        };
        kernels_ = model.quantization->method + kernel(k.fp8, params_.fp8_flops_per_s, "fp8", "fp8 Marlin") +
                   kernel(k.int8, params_.int8_flops_per_s, "int8", "a weight-only path") +
                   kernel(k.fp4, params_.fp4_flops_per_s, "fp4", "NVFP4 Marlin");
        if (k.fp8 + k.int8 + k.fp4 <= 0) {
            kernels_ += ", weight-only (bf16 math)";
        }
    }
    // The routed experts, grouped by consecutive MoE layers of equal shape (usually one group), and the weights every
    // step reads besides them. A quantized model's experts take the bytes and the kernel rate of their scheme.
    double expert_flops_raw = 0;
    std::size_t moe_index = 0;
    for (const auto& layer : model.layers) {
        const auto* m = std::get_if<models::MoeMlp>(&layer.mlp);
        if (m == nullptr) {
            continue;
        }
        const double per_expert = cache::params_per_expert(*m, model.hidden_size);
        const double bytes = footprint_ ? footprint_->moe.at(moe_index).per_expert_bytes : per_expert * b;
        ++moe_index;
        const double flops = 2.0 * m->num_experts_per_tok * per_expert;
        expert_flops_raw += flops;
        if (expert_groups_.empty() || expert_groups_.back().num_experts != m->num_experts ||
            expert_groups_.back().top_k != m->num_experts_per_tok || expert_groups_.back().bytes_per_expert != bytes) {
            expert_groups_.push_back(
                ExpertGroup{m->num_experts, static_cast<double>(m->num_experts_per_tok), bytes, 0, 0});
        }
        expert_groups_.back().layers += 1;
        expert_groups_.back().flops_per_token += flops;
    }
    if (footprint_) {
        // The experts' FLOPs at their kernels' rates (as linear_flops_per_token_ above), spread over the groups in
        // proportion to their unquantized FLOPs.
        const double rated = bf16_equivalent_flops(footprint_->expert_flops_per_token, params_);
        for (auto& g : expert_groups_) {
            g.flops_per_token *= expert_flops_raw > 0 ? rated / expert_flops_raw : 0.0;
        }
        dense_weight_bytes_ =
            static_cast<double>(std::llround(footprint_->dense_read_bytes + footprint_->lm_head_bytes));
    } else {
        double routed_at_one_token = 0;
        for (const auto& g : expert_groups_) {
            routed_at_one_token += g.layers * g.top_k * g.bytes_per_expert;
        }
        dense_weight_bytes_ = static_cast<double>(models::weight_bytes_read_per_step(model, 1)) - routed_at_one_token;
    }
    for (const auto& g : expert_groups_) {
        expert_flops_per_token_ += g.flops_per_token / tp;
    }
    kv_bytes_per_token_ = static_cast<double>(models::kv_bytes_per_token(model, kv_dtype));
    state_bytes_per_seq_ = static_cast<double>(models::state_bytes_per_sequence(model));
    if (tp > 1) {
        // One rank's share: heads and matrices split by TP (KV heads per rank max(1, total/TP): replicated below).
        const double inv = 1.0 / tp;
        linear_flops_per_token_ *= inv;
        lm_head_flops_per_seq_ *= inv;
        lm_head_bytes_ *= inv;
        attn_flops_per_work_ *= inv;
        attn_decode_flops_per_token_ *= inv;
        gdn_flops_per_token_ *= inv;
        mamba_prefill_flops_per_token_ *= inv;  // heads, groups and conv channels split by TP (mamba_utils.py)
        mamba_prefill_bytes_per_token_ *= inv;
        mamba_decode_flops_per_seq_ *= inv;
        state_bytes_per_seq_ *= inv;
        kv_bytes_per_token_ = static_cast<double>(models::kv_bytes_per_token(model, kv_dtype, tp));
        for (int i = 0; i < groups_.local.count; ++i) {
            local_flops_per_work_[i] *= inv;
            local_decode_flops_per_token_[i] *= inv;
        }
    }
    kv_bytes_per_token_ -= local_kv_bytes;
    comm_ = make_tensor_parallel_comm(model, tp, params_.tp_link, params_.custom_all_reduce);
    kernel_gaps_ms_ = 1e-3 * params_.kernel_gap_us * compute_kernels_per_forward(model);
    // Last, once every figure token_terms reads is set.
    if (graphs_.enabled()) {
        const auto size = static_cast<std::size_t>(graphs_.max_size()) + 1;
        token_terms_by_capture_size_.resize(size);
        lm_head_ms_by_seqs_.resize(size);
        for (const std::int64_t n : graphs_.sizes()) {
            token_terms_by_capture_size_[static_cast<std::size_t>(n)] = KnownTokenTerms{token_terms(n), true};
        }
        for (std::int64_t n = 1; n <= graphs_.max_size(); ++n) {
            lm_head_ms_by_seqs_[static_cast<std::size_t>(n)] = lm_head_ms(n);
        }
    }
}

std::int64_t RooflineCostModel::cudagraph_padded_tokens(std::int64_t n, int max_cudagraph_tokens) {
    if (n > max_cudagraph_tokens || n <= 0) {
        return n;
    }
    if (n <= 2) {
        return n;
    }
    if (n <= 4) {
        return 4;
    }
    if (n <= 256) {
        return (n + 7) / 8 * 8;
    }
    return std::min<std::int64_t>((n + 15) / 16 * 16, max_cudagraph_tokens);
}

RooflineCostModel::TokenTerms RooflineCostModel::token_terms(std::int64_t tokens) const {
    const double flops = params_.peak_flops_per_s;
    const double bw = params_.memory_bandwidth_bytes_per_s * params_.bandwidth_efficiency;
    const double b = models::dtype_bytes(model_.dtype);
    const int tp = std::max(1, params_.tensor_parallel_size);
    const double n = static_cast<double>(tokens);
    const double activation_bytes = 4.0 * n * model_.hidden_size * b * static_cast<double>(model_.layers.size());
    TokenTerms t;
    if (tokens > 0) {
        // The dense GEMMs: weights read once, FLOPs at gemm_efficiency.
        t.gemm_ms = roof_ms((linear_flops_per_token_ - expert_flops_per_token_) * n, flops * params_.gemm_efficiency,
                            dense_weight_bytes_ / tp - lm_head_bytes_ + activation_bytes, bw);
    }
    // The routed experts of each group, sliced by TP or spread by expert parallelism (routed_expert_work, per layer
    // for the bytes); their FLOPs run at the grouped GEMM's efficiency for m_e routed tokens per expert
    // (GroupedGemmEfficiency).
    const ExpertParallelism* ep = params_.expert_parallel.enabled() ? &params_.expert_parallel : nullptr;
    for (const auto& g : expert_groups_) {
        if (tokens <= 0) {
            break;
        }
        const RoutedExpertWork w =
            routed_expert_work(g.num_experts, g.top_k, g.flops_per_token, g.bytes_per_expert, n, tp, ep);
        t.gemm_ms +=
            roof_ms(w.flops, flops * params_.gemm_efficiency * GroupedGemmEfficiency::ratio(w.tokens_per_expert),
                    g.layers * w.weight_bytes, bw);
    }
    t.comm_ms = comm_.step_ms(tokens);
    return t;
}

double RooflineCostModel::lm_head_ms(std::int64_t num_sampled_seqs) const {
    const double flops = params_.peak_flops_per_s;
    const double bw = params_.memory_bandwidth_bytes_per_s * params_.bandwidth_efficiency;
    return roof_ms(lm_head_flops_per_seq_ * static_cast<double>(num_sampled_seqs), flops * params_.gemm_efficiency,
                   lm_head_bytes_ + 4.0 * num_sampled_seqs * model_.vocab_size, bw);
}

StepCost RooflineCostModel::step_cost(const BatchShape& s) const {
    const double flops = params_.peak_flops_per_s;
    const double bw = params_.memory_bandwidth_bytes_per_s * params_.bandwidth_efficiency;
    StepCost c;
    // Every batch up to the largest capture size runs padded to the next capture size: decode-only batches replay
    // FULL graphs, mixed ones PIECEWISE graphs (CudagraphDispatcher.dispatch, v1/cudagraph_dispatcher.py; default
    // cudagraph_mode FULL_AND_PIECEWISE). Attention runs on the real tokens either way. Without graphs
    // (enforce_eager) nothing is padded.
    const std::int64_t tokens = graphs_.padded_tokens(s.num_tokens);
    const bool tabled = tokens > 0 && static_cast<std::uint64_t>(tokens) < token_terms_by_capture_size_.size() &&
                        token_terms_by_capture_size_[static_cast<std::size_t>(tokens)].known;
    const TokenTerms t =
        tabled ? token_terms_by_capture_size_[static_cast<std::size_t>(tokens)].terms : token_terms(tokens);
    c.gemm_ms = t.gemm_ms;
    if (s.num_sampled_seqs > 0) {
        c.lm_head_ms = static_cast<std::uint64_t>(s.num_sampled_seqs) < lm_head_ms_by_seqs_.size()
                           ? lm_head_ms_by_seqs_[static_cast<std::size_t>(s.num_sampled_seqs)]
                           : lm_head_ms(s.num_sampled_seqs);
    }
    // A shape without its local work (num_local_spans differs) costs the local layers at the full context.
    const bool capped = s.num_local_spans == groups_.local.count;
    if (s.prefill_attention_work > 0) {
        // Full layers on the whole context, each local-span layer on its capped keys (BatchShape::local).
        // (Summed in this order so a model without local layers keeps its figures to the bit.)
        double attn_mflops = 1e3 * attn_flops_per_work_ * s.prefill_attention_work;
        for (int i = 0; i < groups_.local.count; ++i) {
            attn_mflops += 1e3 * local_flops_per_work_[i] *
                           (capped ? s.local[i].prefill_attention_work : s.prefill_attention_work);
        }
        c.attn_prefill_ms = attn_mflops / (flops * params_.attention_efficiency);
    }
    if (s.num_decode_seqs > 0) {
        // Bandwidth-bound for GQA (a few FLOPs per KV byte); MLA's absorbed decode shares one latent among all
        // heads (≈ 240 FLOPs per byte for DeepSeek-V3), which the FLOP roof catches. A sliding-window or chunked
        // layer reads only the KV of the keys it attends to.
        const double ctx = static_cast<double>(s.decode_context_tokens);
        double kv_mbytes = 1e3 * kv_bytes_per_token_ * ctx;
        double attn_mflops = 1e3 * attn_decode_flops_per_token_ * ctx;
        for (int i = 0; i < groups_.local.count; ++i) {
            const double keys =
                static_cast<double>(capped ? s.local[i].decode_context_tokens : s.decode_context_tokens);
            kv_mbytes += 1e3 * local_kv_bytes_per_token_[i] * keys;
            attn_mflops += 1e3 * local_decode_flops_per_token_[i] * keys;
        }
        // The KV read at decode attention's own rate (RooflineParams::decode_attention_efficiency).
        const double kv_bw = params_.memory_bandwidth_bytes_per_s * params_.decode_attention_efficiency;
        c.attn_decode_ms = std::max(kv_mbytes / kv_bw, attn_mflops / (flops * params_.attention_efficiency));
    }
    if (gdn_flops_per_token_ > 0 || state_bytes_per_seq_ > 0) {
        // Prefill: the chunked scan; every sequence in the step reads and writes its state once per layer.
        const double prefill_ms = roof_ms(gdn_flops_per_token_ * static_cast<double>(s.num_prefill_tokens),
                                          flops * params_.gdn_efficiency, 0.0, bw);
        double state_ms = 1e3 * 2.0 * state_bytes_per_seq_ * static_cast<double>(s.num_seqs) / bw;
        c.gdn_ms = prefill_ms;
        if (mamba_prefill_flops_per_token_ > 0) {
            // Mamba layers: the conv + SSD scan of the prefill tokens at the chunked-scan efficiency, bound by its
            // activations and chunk states; decodes' state updates are bandwidth-bound (a few FLOPs per state
            // byte), so their FLOPs count only where they pass the state traffic.
            const double tokens_prefill = static_cast<double>(s.num_prefill_tokens);
            c.gdn_ms += roof_ms(mamba_prefill_flops_per_token_ * tokens_prefill, flops * params_.gdn_efficiency,
                                mamba_prefill_bytes_per_token_ * tokens_prefill, bw);
            state_ms = std::max(state_ms, 1e3 * mamba_decode_flops_per_seq_ * static_cast<double>(s.num_decode_seqs) /
                                              (flops * params_.gdn_efficiency));
        }
        c.gdn_ms += state_ms;
        // The state copies of prefix caching (BatchShape::num_snapshots) are priced by the replica, the same way for
        // every scheme (StateSnapshotCost).
    }
    c.comm_ms = t.comm_ms;
    c.overhead_ms = kernel_gaps_ms_;  // the kernels' boundaries (RooflineParams::kernel_gap_us)
    return c;
}

double RooflineCostModel::scan_chunk_ms(int chunk_tokens) const {
    if (gdn_flops_per_token_ <= 0 && mamba_prefill_flops_per_token_ <= 0) {
        return 0.0;
    }
    const double flops = params_.peak_flops_per_s * params_.gdn_efficiency;
    const double bw = params_.memory_bandwidth_bytes_per_s * params_.bandwidth_efficiency;
    const double c = static_cast<double>(chunk_tokens);
    return roof_ms(gdn_flops_per_token_ * c, flops, 0.0, bw) +
           roof_ms(mamba_prefill_flops_per_token_ * c, flops, mamba_prefill_bytes_per_token_ * c, bw) +
           1e3 * state_bytes_per_seq_ / bw;
}

std::string RooflineCostModel::describe() const {
    const std::string tp = params_.tensor_parallel_size > 1 ? fmt::format(", TP {}", params_.tensor_parallel_size) : "";
    return fmt::format("roofline {} ({:.0f} TFLOP/s bf16, {:.0f} GB/s{}{})", params_.gpu_name,
                       params_.peak_flops_per_s / 1e12, params_.memory_bandwidth_bytes_per_s / 1e9, tp,
                       kernels_.empty() ? "" : "; " + kernels_);
}

}  // namespace servesim::engine
