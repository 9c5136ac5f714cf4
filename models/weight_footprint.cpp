// Quantized weight bytes and FLOPs by kernel; see weight_footprint.h. Byte counts per scheme (K inputs, N outputs):
// weights K·N·bits/8; per-tensor one scale; per-channel N scales; per-group N·⌈K/g⌉ scales (+ zero points of
// zero_point_bits each); per-block ⌈N/bn⌉·⌈K/bk⌉ scales; plus per-shard fp32 scalars and GPTQ act-order indices.
#include "models/weight_footprint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "common/error.h"
#include "models/model_derived.h"

namespace servesim::models {

namespace {

using i64 = std::int64_t;

// Ignore lists and targets of multimodal checkpoints name the text model model.language_model.* or
// language_model.model.*; the modules here are model.*.
std::string normalise_name(std::string name) {
    for (const std::string_view wrapper : {"model.language_model.", "language_model.model."}) {
        if (name.rfind(wrapper, 0) == 0) {
            name = "model." + name.substr(wrapper.size());
        }
    }
    return name;
}

// A compiled pattern list as vLLM's is_layer_skipped (quantization/utils/quant_utils.py) reads it: exact names, or
// substrings when asked (skip_with_substr); regexes ("re:", anchored at the start as Python's re.match) for
// compressed-tensors and ModelOpt wildcards. Routed experts are one module, model.layers.N.mlp.experts: with exact
// matching it is skipped when an entry naming experts contains that prefix ("...mlp.experts.0.gate_proj").
class ModuleMatcher {
public:
    ModuleMatcher(const std::vector<std::string>& patterns, bool by_substring) : by_substring_(by_substring) {
        for (const auto& p : patterns) {
            if (p.rfind("re:", 0) == 0) {
                regexes_.emplace_back(p.substr(3));
            } else {
                names_.push_back(normalise_name(p));
            }
        }
    }

    [[nodiscard]] bool matches(const std::string& name) const {
        const auto experts = name.find(".mlp.experts.");
        const std::string expert_prefix = experts == std::string::npos ? "" : name.substr(0, experts + 12);
        for (const auto& n : names_) {
            if (name == n || (by_substring_ && name.find(n) != std::string::npos) ||
                (!by_substring_ && !expert_prefix.empty() && n.find("experts") != std::string::npos &&
                 n.find(expert_prefix) != std::string::npos)) {
                return true;
            }
        }
        for (const auto& re : regexes_) {
            if (std::regex_search(name, re, std::regex_constants::match_continuous)) {
                return true;
            }
        }
        return false;
    }

private:
    bool by_substring_;
    std::vector<std::string> names_;
    std::vector<std::regex> regexes_;
};

struct Enumerator {
    const ModelSpec& spec;
    std::vector<LinearModule> out;

    void add(const std::string& name, LinearRole role, i64 in, i64 out_features, int count = 1) {
        out.push_back(LinearModule{name, role, in, out_features, count, nullptr});
    }

    [[noreturn]] void unknown(std::size_t layer, const char* what) const {
        throw ConfigError(fmt::format("{}: layer {}: quantized weights of this {} are not modelled",
                                      spec.quantization ? spec.quantization->source : spec.name, layer, what));
    }

    void layer(std::size_t i, const Layer& l) {
        const i64 h = spec.hidden_size;
        const std::string p = fmt::format("model.layers.{}.", i);
        if (l.shares_weights || l.adapter_params > 0) {
            unknown(i, "shared block (Zamba2)");
        }
        const auto* attn = std::get_if<AttentionMixer>(&l.mixer);
        if (std::holds_alternative<NoMixer>(l.mixer)) {
        } else if (attn != nullptr && attn->mla) {
            // DeepseekV2MLAAttention: q_a/q_b (or one q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj.
            const MlaShape& m = *attn->mla;
            const i64 heads = attn->num_q_heads;
            const i64 qk = i64{m.qk_nope_head_dim} + m.qk_rope_head_dim;
            if (m.q_lora_rank > 0) {
                add(p + "self_attn.q_a_proj", LinearRole::kAttention, h, m.q_lora_rank);
                add(p + "self_attn.q_b_proj", LinearRole::kAttention, m.q_lora_rank, heads * qk);
            } else {
                add(p + "self_attn.q_proj", LinearRole::kAttention, h, heads * qk);
            }
            add(p + "self_attn.kv_a_proj_with_mqa", LinearRole::kAttention, h, i64{m.kv_lora_rank} + m.qk_rope_head_dim);
            add(p + "self_attn.kv_b_proj", LinearRole::kAttention, m.kv_lora_rank,
                heads * (i64{m.qk_nope_head_dim} + m.v_head_dim));
            add(p + "self_attn.o_proj", LinearRole::kAttention, heads * m.v_head_dim, h);
        } else if (const auto* a = attn) {
            const i64 q_out = i64{a->num_q_heads} * a->head_dim;
            const i64 kv_out = i64{a->num_kv_heads} * a->head_dim;
            add(p + "self_attn.q_proj", LinearRole::kAttention, h, q_out * (a->output_gate ? 2 : 1));
            add(p + "self_attn.k_proj", LinearRole::kAttention, h, kv_out);
            add(p + "self_attn.v_proj", LinearRole::kAttention, h, kv_out);
            add(p + "self_attn.o_proj", LinearRole::kAttention, q_out, h);
        } else if (const auto* g = std::get_if<GatedDeltaNetMixer>(&l.mixer)) {
            const i64 conv_dim = 2 * i64{g->num_k_heads} * g->k_head_dim + i64{g->num_v_heads} * g->v_head_dim;
            const i64 v_out = i64{g->num_v_heads} * g->v_head_dim;
            add(p + "linear_attn.in_proj_qkvz", LinearRole::kMixer, h, conv_dim + v_out);
            add(p + "linear_attn.in_proj_ba", LinearRole::kMixer, h, 2 * i64{g->num_v_heads});
            add(p + "linear_attn.out_proj", LinearRole::kMixer, v_out, h);
        } else if (const auto* m = std::get_if<Mamba2Mixer>(&l.mixer)) {
            const i64 inner = i64{m->num_heads} * m->head_dim;
            add(p + "mixer.in_proj", LinearRole::kMixer, h, 2 * inner + 2 * i64{m->n_groups} * m->state_size + m->num_heads);
            add(p + "mixer.out_proj", LinearRole::kMixer, inner, h);
        } else {
            unknown(i, "token mixer");
        }
        if (std::holds_alternative<NoMlp>(l.mlp)) {
        } else if (const auto* d = std::get_if<DenseMlp>(&l.mlp)) {
            if (d->gated) {
                add(p + "mlp.gate_proj", LinearRole::kDenseMlp, h, d->intermediate_size);
            }
            add(p + "mlp.up_proj", LinearRole::kDenseMlp, h, d->intermediate_size);
            add(p + "mlp.down_proj", LinearRole::kDenseMlp, d->intermediate_size, h);
        } else if (const auto* e = std::get_if<MoeMlp>(&l.mlp)) {
            const i64 inter = e->moe_intermediate_size;
            add(p + "mlp.gate", LinearRole::kRouter, h, e->num_experts);
            add(p + "mlp.experts.gate_up_proj", LinearRole::kExpert, h, (e->gated ? 2 : 1) * inter, e->num_experts);
            add(p + "mlp.experts.down_proj", LinearRole::kExpert, inter, h, e->num_experts);
            if (const i64 s = e->shared_expert_intermediate_size; s > 0) {
                if (e->gated) {
                    add(p + "mlp.shared_expert.gate_proj", LinearRole::kSharedExpert, h, s);
                }
                add(p + "mlp.shared_expert.up_proj", LinearRole::kSharedExpert, h, s);
                add(p + "mlp.shared_expert.down_proj", LinearRole::kSharedExpert, s, h);
                if (e->shared_expert_gate) {
                    add(p + "mlp.shared_expert_gate", LinearRole::kRouter, h, 1);
                }
            }
        } else {
            unknown(i, "MLP");
        }
    }
};

// Parameters of a layer that are not linear weights (depthwise convs, A_log, dt_bias, D): never quantized.
i64 non_linear_params(const Layer& l) {
    if (const auto* a = std::get_if<AttentionMixer>(&l.mixer); a != nullptr && a->sinks) {
        return a->num_q_heads;  // gpt-oss: one sink logit per query head
    }
    if (const auto* g = std::get_if<GatedDeltaNetMixer>(&l.mixer)) {
        const i64 conv_dim = 2 * i64{g->num_k_heads} * g->k_head_dim + i64{g->num_v_heads} * g->v_head_dim;
        return i64{g->conv_kernel} * conv_dim + 2 * i64{g->num_v_heads};
    }
    if (const auto* m = std::get_if<Mamba2Mixer>(&l.mixer)) {
        const i64 conv_dim = i64{m->num_heads} * m->head_dim + 2 * i64{m->n_groups} * m->state_size;
        return (i64{m->conv_kernel} + 1) * conv_dim + 3 * i64{m->num_heads};
    }
    return 0;
}

i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

// The KernelFlops field a GEMM with activations quantized as `a` counts in.
double& rate_bucket(KernelFlops& k, ActivationQuant a) {
    switch (a) {
        case ActivationQuant::kFp8:
            return k.fp8;
        case ActivationQuant::kInt8:
            return k.int8;
        case ActivationQuant::kFp4:
            return k.fp4;
        case ActivationQuant::kNone:
            break;
    }
    return k.activation_dtype;
}

}  // namespace

std::vector<LinearModule> linear_modules(const ModelSpec& spec) {
    Enumerator e{spec, {}};
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        e.layer(i, spec.layers[i]);
    }
    if (!spec.tie_word_embeddings) {
        e.add("lm_head", LinearRole::kLmHead, spec.hidden_size, spec.vocab_size);
    }
    if (!spec.quantization) {
        return std::move(e.out);
    }
    const WeightQuantization& q = *spec.quantization;
    const ModuleMatcher ignore(q.ignore, q.ignore_by_substring);
    std::vector<ModuleMatcher> targets;
    for (const auto& r : q.rules) {
        targets.emplace_back(r.targets, false);
    }
    for (auto& m : e.out) {
        // vLLM gives a quant method to LinearBase layers and routed experts only; the router and shared-expert gate
        // are built unquantized, the lm_head is quantized only with lm_head: true, MXFP4 quantizes only experts.
        if (m.role == LinearRole::kRouter || (m.role == LinearRole::kLmHead && !q.lm_head_quantized) ||
            (q.experts_only && m.role != LinearRole::kExpert) || ignore.matches(m.name)) {
            continue;
        }
        for (std::size_t r = 0; r < q.rules.size(); ++r) {
            const auto& t = q.rules[r].targets;
            const bool all_linear = std::find(t.begin(), t.end(), "Linear") != t.end();
            if (all_linear || targets[r].matches(m.name)) {
                m.scheme = &q.rules[r].scheme;
                break;
            }
        }
    }
    return std::move(e.out);
}

double linear_module_bytes(const LinearModule& m, DType unquantized_dtype) {
    const double k = static_cast<double>(m.in_features);
    const double n = static_cast<double>(m.out_features);
    if (m.scheme == nullptr) {
        return m.count * k * n * dtype_bytes(unquantized_dtype);
    }
    const QuantScheme& s = *m.scheme;
    double scales = 0;  // scale entries (each with a zero point when asymmetric)
    switch (s.granularity) {
        case ScaleGranularity::kTensor:
            scales = 1;
            break;
        case ScaleGranularity::kChannel:
            scales = n;
            break;
        case ScaleGranularity::kGroup:
            scales = n * static_cast<double>(ceil_div(m.in_features, s.group_size));
            break;
        case ScaleGranularity::kBlock:
            scales = static_cast<double>(ceil_div(m.out_features, s.block_n) * ceil_div(m.in_features, s.block_k));
            break;
    }
    const double per_copy = k * n * s.weight_bits / 8.0 + scales * (s.scale_bytes + s.zero_point_bits / 8.0) +
                            s.tensor_scalar_bytes + k * s.index_bytes_per_input;
    return m.count * per_copy;
}

WeightFootprint weight_footprint(const ModelSpec& spec) {
    WeightFootprint f;
    const std::vector<LinearModule> modules = linear_modules(spec);
    const double emb = static_cast<double>(spec.vocab_size) * spec.hidden_size * dtype_bytes(spec.dtype);
    double loaded = emb + static_cast<double>(spec.extra_params) * dtype_bytes(spec.dtype);
    f.lm_head_bytes = emb;  // tied: the embedding matrix is the output projection
    MoeLayerBytes* moe = nullptr;
    std::string moe_prefix;
    for (const auto& m : modules) {
        const double bytes = linear_module_bytes(m, spec.dtype);
        loaded += bytes;
        if (m.scheme != nullptr) {
            f.quantized_params += m.count * m.in_features * m.out_features;
        }
        if (m.role == LinearRole::kLmHead) {
            f.lm_head_bytes = bytes;
            continue;
        }
        const double flops = 2.0 * static_cast<double>(m.in_features) * static_cast<double>(m.out_features);
        double active = m.count;
        if (m.role == LinearRole::kExpert) {
            const std::string prefix = m.name.substr(0, m.name.find(".mlp.experts."));
            if (moe == nullptr || prefix != moe_prefix) {
                const std::size_t layer = std::stoul(prefix.substr(prefix.rfind('.') + 1));
                const auto& e = std::get<MoeMlp>(spec.layers[layer].mlp);
                f.moe.push_back(MoeLayerBytes{0, e.num_experts, e.num_experts_per_tok});
                moe = &f.moe.back();
                moe_prefix = prefix;
            }
            moe->per_expert_bytes += bytes / m.count;
            active = moe->experts_per_token;
        } else {
            f.dense_read_bytes += bytes;
        }
        const ActivationQuant a = m.scheme == nullptr ? ActivationQuant::kNone : m.scheme->activations;
        rate_bucket(f.layer_flops_per_token, a) += flops * active;
        if (m.role == LinearRole::kExpert) {
            rate_bucket(f.expert_flops_per_token, a) += flops * active;
        }
    }
    for (const auto& l : spec.layers) {
        const double p = static_cast<double>(non_linear_params(l));
        loaded += p * dtype_bytes(spec.dtype);
        f.dense_read_bytes += p * dtype_bytes(spec.dtype);
        f.layer_flops_per_token.activation_dtype += 2.0 * p;  // as linear_flops_per_token counts them
    }
    // Guard: the layout above must hold every parameter count_params counts, or a layer kind this file does not
    // know (a new attention variant, extra per-head vectors) would be costed wrongly without a word.
    i64 laid_out = i64{spec.vocab_size} * spec.hidden_size + spec.extra_params;
    for (const auto& m : modules) {
        laid_out += m.count * m.in_features * m.out_features;
    }
    for (const auto& l : spec.layers) {
        laid_out += non_linear_params(l);
    }
    if (const i64 counted = count_params(spec).total(); laid_out != counted) {
        throw ConfigError(fmt::format("{}: quantized weights of this model's layers are not modelled: its linear "
                                      "layers as laid out hold {} parameters, the model {} (docs/QUANTIZATION.md)",
                                      spec.quantization ? spec.quantization->source : spec.name, laid_out, counted));
    }
    f.loaded_bytes = static_cast<i64>(std::llround(loaded));
    return f;
}

double weight_bytes_read(const WeightFootprint& f, std::int64_t num_tokens) {
    if (num_tokens <= 0) {
        return 0;
    }
    double bytes = f.dense_read_bytes + f.lm_head_bytes;
    for (const auto& m : f.moe) {
        const double e = m.num_experts;
        const double k = m.experts_per_token;
        bytes += m.per_expert_bytes * e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(num_tokens)));
    }
    return bytes;
}

}  // namespace servesim::models
