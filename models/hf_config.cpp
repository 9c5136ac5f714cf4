// config.json → ModelSpec. Follows transformers' configuration classes for the layer pattern (layer_types,
// full_attention_interval, hybrid_override_pattern, decoder_sparse_step / mlp_only_layers) and vLLM for what the
// config leaves implicit: Nemotron-H's ssm state is fp32 (NemotronHForCausalLMConfig), Qwen3.5's comes from
// `mamba_ssm_dtype`, any other recurrent state uses the model dtype (MambaStateDtypeCalculator, mamba_cache_dtype
// auto).
// Size (~1k lines): one config.json reader: the layer pattern of each family, one reader per mixer kind (attention,
// Gated DeltaNet, Mamba 1/2, MoE) and the vision tower's estimate all feed model_from_hf_config, with the key checks.
#include "models/hf_config.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <string_view>

#include "common/error.h"
#include "models/dtype.h"
#include "models/hf_defaults.h"
#include "models/quantization_config.h"

namespace servesim::models {

namespace {

// Model types and what their configs imply. `family` groups the _text / nested spellings.
constexpr auto kSupportedModelTypes = std::to_array<std::string_view>({
    "bamba",     "deepseek_v2", "deepseek_v3", "falcon_h1",        "gemma2",       "gemma3",      "gemma3_text",
    "glm4_moe",  "gpt_oss",     "granite",     "granitemoehybrid", "jamba",        "kimi_k2",     "llama",
    "llama4",    "llama4_text", "mamba2",      "minimax_m2",       "mistral",      "mistral3",    "mixtral",
    "nemotron_h",
    "phi3",      "qwen2",       "qwen2_moe",   "qwen3",            "qwen3_5",      "qwen3_5_moe", "qwen3_5_moe_text",
    "qwen3_5_text", "qwen3_moe", "qwen3_next", "zamba2",
});

// vLLM model classes implementing SupportsMambaPrefixCaching (docs/VLLM-RULES.md §2.1): prefix caching on a
// hybrid selects mamba_cache_mode "all" for these, "align" for the rest (Qwen3-Next, Qwen3.5).
constexpr std::array<std::string_view, 8> kMambaPrefixCachingAll{
    "mamba", "mamba2", "bamba", "falcon_h1", "granitemoehybrid", "jamba", "nemotron_h", "zamba2",
};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) {
        out += (out.empty() ? "" : ", ") + s;
    }
    return out;
}

// "qwen3_5_text" and "qwen3_5" read alike, as do the MoE variants.
std::string family_of(const std::string& model_type) {
    constexpr std::string_view kTextSuffix = "_text";
    if (model_type.size() > kTextSuffix.size() &&
        model_type.compare(model_type.size() - kTextSuffix.size(), kTextSuffix.size(), kTextSuffix) == 0) {
        return model_type.substr(0, model_type.size() - kTextSuffix.size());
    }
    return model_type;
}

bool is_gdn_family(const std::string& family) {
    return family == "qwen3_next" || family == "qwen3_5" || family == "qwen3_5_moe";
}

// vLLM runs these with DeepseekV2/V3ForCausalLM (kimi_k2 is DeepSeek-V3's architecture): multi-head latent
// attention (vllm/model_executor/models/deepseek_v2.py).
bool is_mla_family(const std::string& family) {
    return family == "deepseek_v2" || family == "deepseek_v3" || family == "kimi_k2";
}

// DeepSeek-style MoE keys: n_routed_experts, n_shared_experts × moe_intermediate_size ungated shared experts, the
// first first_k_dense_replace layers dense, then MoE every moe_layer_freq layers (transformers DeepseekV3Config,
// Glm4MoeConfig; vLLM deepseek_v2.py DeepseekV2DecoderLayer, glm4_moe.py).
bool is_deepseek_moe_family(const std::string& family) {
    return is_mla_family(family) || family == "glm4_moe";
}

// Upper bounds of config.json dimensions (docs/INPUT-RANGES.md): far above any published model (hidden sizes reach
// 18,432, vocabularies 262,144, depths 160), and low enough that the products the readers and model_derived form
// in int64 cannot wrap once check_model_size has bounded the total.
constexpr int kMaxDimension = 1 << 20;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxLayers = 10'000;
constexpr int kMaxTokens = 1 << 30;  // positions, windows: max_model_len's bound
// 1e15 parameters: no deployment servesim models can hold them (1,024 tensor-parallel ranks of a 288 GB GPU hold
// 2.9e14 bytes), and the int64 byte counts derived from them stay below 2^63.
constexpr double kMaxParams = 1e15;

int positive_int(const YamlMap& c, std::string_view key, int max = kMaxDimension) {
    const int v = c.get<int>(key);
    if (v <= 0 || v > max) {
        c.fail(key, fmt::format("must be a positive integer up to {}, got {}", max, v));
    }
    return v;
}

std::int64_t i64_product(int a, int b) {
    return std::int64_t{a} * b;
}

std::optional<int> optional_positive_int(const YamlMap& c, std::string_view key, int max = kMaxDimension) {
    auto v = c.get_optional<int>(key);
    if (v && (*v <= 0 || *v > max)) {
        c.fail(key, fmt::format("must be a positive integer up to {}, got {}", max, *v));
    }
    return v;
}

// The parameter count in double (no wrap) over the layers as model_derived counts them, generously rounded up:
// refused beyond kMaxParams naming the key whose term dominates, before any int64 size is derived from it.
void check_model_size(const ModelSpec& spec, const YamlMap& c) {
    const double h = spec.hidden_size;
    double layers = 0;
    double experts = 0;
    for (const Layer& layer : spec.layers) {
        if (const auto* a = std::get_if<AttentionMixer>(&layer.mixer)) {
            layers += 3.0 * h * (2.0 * a->num_q_heads + 2.0 * a->num_kv_heads) * a->head_dim;
        } else if (const auto* g = std::get_if<GatedDeltaNetMixer>(&layer.mixer)) {
            layers += 3.0 * (h + g->conv_kernel) *
                      (2.0 * g->num_k_heads * g->k_head_dim + 3.0 * g->num_v_heads * g->v_head_dim + g->num_v_heads);
        } else if (const auto* m = std::get_if<Mamba2Mixer>(&layer.mixer)) {
            layers += 3.0 * (h + m->conv_kernel) *
                      (3.0 * m->num_heads * m->head_dim + 2.0 * m->n_groups * m->state_size + m->num_heads);
        }
        if (const auto* d = std::get_if<DenseMlp>(&layer.mlp)) {
            layers += 3.0 * h * d->intermediate_size;
        } else if (const auto* e = std::get_if<MoeMlp>(&layer.mlp)) {
            experts += 3.0 * h * e->moe_intermediate_size * e->num_experts + h * e->num_experts;
            layers += 3.0 * h * e->shared_expert_intermediate_size + h;
        }
    }
    const double embedding = 2.0 * h * spec.vocab_size;
    const double total = layers + experts + embedding + static_cast<double>(spec.extra_params);
    if (spec.layers.size() > static_cast<std::size_t>(kMaxLayers)) {
        c.fail("num_hidden_layers", fmt::format("{} layers; allowed: 1 to {}", spec.layers.size(), kMaxLayers));
    }
    if (total > kMaxParams) {
        const char* key = experts >= layers && experts >= embedding ? "num_experts"
                          : layers >= embedding                      ? "num_hidden_layers"
                                                                     : "vocab_size";
        c.fail(key, fmt::format("the model would hold about {:.3g} parameters ({:.3g} in its layers, {:.3g} in MoE "
                                "experts, {:.3g} in embeddings; hidden_size {}); allowed: at most {:.0e}, more than "
                                "any GPU deployment can hold",
                                total, layers, experts, embedding, spec.hidden_size, kMaxParams));
    }
}

std::vector<int> int_list(const YamlMap& c, std::string_view key) {
    std::vector<int> out;
    if (!c.has(key) || c.raw()[std::string(key)].IsNull()) {
        return out;
    }
    const YAML::Node n = c.node(key);
    if (!n.IsSequence()) {
        c.fail(key, "expected a list of integers");
    }
    for (const auto& item : n) {
        out.push_back(c.convert<int>(item, key));
    }
    return out;
}

std::vector<std::string> string_list(const YamlMap& c, std::string_view key) {
    const YAML::Node n = c.node(key);
    if (!n.IsSequence()) {
        c.fail(key, "expected a list of strings");
    }
    std::vector<std::string> out;
    for (const auto& item : n) {
        out.push_back(c.convert<std::string>(item, key));
    }
    return out;
}

DType dtype_at(const YamlMap& c, std::string_view key) {
    return parse_dtype(c.get<std::string>(key), c.file(), c.line(key), c.key_path(key));
}

// What one residual block holds before its shapes are read.
enum class MixerKind { kNone, kFullAttention, kSlidingAttention, kChunkedAttention, kLinearAttention, kMamba };
enum class MlpKind { kNone, kDefault, kDense, kMoe };

struct BlockKind {
    MixerKind mixer = MixerKind::kFullAttention;
    MlpKind mlp = MlpKind::kDefault;  // kDefault: dense or MoE by the MoE keys
    bool zamba2_shared = false;       // an invocation of Zamba2's shared transformer block
};

// transformers Zamba2Config: layers_block_type ("mamba" or "hybrid"; default the 54-layer pattern of Zamba2-2.7B),
// hybrid_layer_ids the indices of the "hybrid" entries (recomputed by the class; a stored list must agree).
std::vector<std::string> zamba2_block_types(const YamlMap& c, int num_layers) {
    std::vector<std::string> types;
    if (c.has("layers_block_type") && !c.raw()["layers_block_type"].IsNull()) {
        types = string_list(c, "layers_block_type");
    } else {
        if (num_layers != 54) {
            c.fail("layers_block_type", fmt::format("missing; Zamba2Config's default pattern has 54 layers, "
                                                    "num_hidden_layers is {}", num_layers));
        }
        types.assign(54, "mamba");
        for (const int i : {6, 12, 18, 24, 30, 36, 42, 47, 51}) {
            types[static_cast<std::size_t>(i)] = "hybrid";
        }
    }
    if (static_cast<int>(types.size()) != num_layers) {
        c.fail("layers_block_type",
               fmt::format("has {} entries but num_hidden_layers is {}", types.size(), num_layers));
    }
    std::vector<int> hybrid;
    for (std::size_t i = 0; i < types.size(); ++i) {
        if (types[i] == "hybrid") {
            hybrid.push_back(static_cast<int>(i));
        } else if (types[i] != "mamba") {
            c.fail("layers_block_type", fmt::format("entry {} is '{}'; allowed: mamba, hybrid", i, types[i]));
        }
    }
    if (c.has("hybrid_layer_ids") && int_list(c, "hybrid_layer_ids") != hybrid) {
        c.fail("hybrid_layer_ids", "does not list the 'hybrid' entries of layers_block_type");
    }
    return types;
}

std::vector<BlockKind> nemotron_blocks(const YamlMap& c) {
    const auto pattern = c.get<std::string>("hybrid_override_pattern");
    if (pattern.empty()) {
        c.fail("hybrid_override_pattern", "must not be empty");
    }
    std::vector<BlockKind> blocks;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        switch (pattern[i]) {
            case 'M':
                blocks.push_back({MixerKind::kMamba, MlpKind::kNone});
                break;
            case '*':
                blocks.push_back({MixerKind::kFullAttention, MlpKind::kNone});
                break;
            case '-':
                blocks.push_back({MixerKind::kNone, MlpKind::kDense});
                break;
            case 'E':
                blocks.push_back({MixerKind::kNone, MlpKind::kMoe});
                break;
            default:
                c.fail("hybrid_override_pattern",
                       fmt::format("character {} is '{}'; allowed: M (Mamba2), * (attention), - (MLP), E (MoE)", i,
                                   pattern[i]));
        }
    }
    if (auto n = c.get_optional<int>("num_hidden_layers"); n && *n != static_cast<int>(blocks.size())) {
        c.fail("num_hidden_layers", fmt::format("is {} but hybrid_override_pattern has {} blocks", *n, blocks.size()));
    }
    return blocks;
}

std::vector<BlockKind> layer_type_blocks(const YamlMap& c, int num_layers) {
    const auto types = string_list(c, "layer_types");
    if (static_cast<int>(types.size()) != num_layers) {
        c.fail("layer_types", fmt::format("has {} entries but num_hidden_layers is {}", types.size(), num_layers));
    }
    std::vector<BlockKind> blocks;
    for (std::size_t i = 0; i < types.size(); ++i) {
        const auto& t = types[i];
        if (t == "full_attention" || t == "attention") {
            blocks.push_back({MixerKind::kFullAttention, MlpKind::kDefault});
        } else if (t == "sliding_attention") {
            blocks.push_back({MixerKind::kSlidingAttention, MlpKind::kDefault});
        } else if (t == "linear_attention") {
            blocks.push_back({MixerKind::kLinearAttention, MlpKind::kDefault});
        } else if (t == "mamba") {
            blocks.push_back({MixerKind::kMamba, MlpKind::kDefault});
        } else {
            c.fail("layer_types", fmt::format("entry {} is '{}'; allowed: full_attention, sliding_attention, "
                                              "linear_attention, mamba, attention",
                                              i, t));
        }
    }
    return blocks;
}

// The layer pattern when `layer_types` is absent.
std::vector<BlockKind> implicit_blocks(const YamlMap& c, const std::string& family, int num_layers) {
    std::vector<BlockKind> blocks(static_cast<std::size_t>(num_layers));
    if (is_gdn_family(family)) {
        // transformers Qwen3NextConfig: layer i is full attention iff (i+1) % full_attention_interval == 0.
        const int interval = positive_int(c, "full_attention_interval");
        for (int i = 0; i < num_layers; ++i) {
            blocks[i].mixer = (i + 1) % interval == 0 ? MixerKind::kFullAttention : MixerKind::kLinearAttention;
        }
    } else if (family == "qwen2" || family == "qwen3" || family == "qwen3_moe") {
        // Qwen2/3: with use_sliding_window, layers from max_window_layers on use the window.
        if (c.get_optional<bool>("use_sliding_window").value_or(false)) {
            const int first = c.get_optional<int>("max_window_layers").value_or(num_layers);
            if (first < 0) {
                c.fail("max_window_layers", fmt::format("must be between 0 and num_hidden_layers ({}), got {}",
                                                        num_layers, first));
            }
            for (int i = first; i < num_layers; ++i) {
                blocks[i].mixer = MixerKind::kSlidingAttention;
            }
        }
    } else if (family == "qwen2_moe") {
        // Qwen2MoeConfig's use_sliding_window pattern (odd layers below max_window_layers) is published by no
        // checkpoint servesim knows of; refused rather than guessed.
        if (c.get_optional<bool>("use_sliding_window").value_or(false)) {
            c.fail("use_sliding_window", "true is not modelled for qwen2_moe; allowed: false (every published "
                                         "Qwen1.5-MoE / Qwen2-MoE checkpoint)");
        }
    } else if (family == "bamba") {
        // transformers BambaConfig / vLLM bamba.py: attention at attn_layer_indices, Mamba2 elsewhere; a dense MLP
        // in every layer.
        for (auto& b : blocks) {
            b.mixer = MixerKind::kMamba;
        }
        for (const int i : int_list(c, "attn_layer_indices")) {
            if (i < 0 || i >= num_layers) {
                c.fail("attn_layer_indices",
                       fmt::format("entry {} is outside the {} layers (num_hidden_layers)", i, num_layers));
            }
            blocks[static_cast<std::size_t>(i)].mixer = MixerKind::kFullAttention;
        }
    } else if (family == "jamba") {
        // transformers JambaConfig / vLLM jamba.py: attention iff i % attn_layer_period == attn_layer_offset, Mamba
        // (version 1) elsewhere.
        const int period = positive_int(c, "attn_layer_period");
        const int offset = c.get<int>("attn_layer_offset");
        if (offset < 0 || offset >= period) {
            c.fail("attn_layer_offset", fmt::format("must be in [0, attn_layer_period = {}), got {}", period, offset));
        }
        for (int i = 0; i < num_layers; ++i) {
            blocks[i].mixer = i % period == offset ? MixerKind::kFullAttention : MixerKind::kMamba;
        }
    } else if (family == "falcon_h1") {
        // vLLM falcon_h1.py FalconH1ParallelHybrid: every layer runs attention and a Mamba2 mixer side by side on the
        // same input, then the MLP. servesim keeps each branch as a block: attention (its KV layer), then Mamba2 with
        // the MLP (its state layer); vLLM registers them as layers i and num_hidden_layers + i.
        blocks.clear();
        for (int i = 0; i < num_layers; ++i) {
            blocks.push_back({MixerKind::kFullAttention, MlpKind::kNone});
            blocks.push_back({MixerKind::kMamba, MlpKind::kDense});
        }
    } else if (family == "zamba2") {
        // vLLM zamba2.py Zamba2Model: a "mamba" layer is a Mamba2 block with no MLP; a "hybrid" layer runs the shared
        // transformer block (attention + MLP; num_mem_blocks blocks taken in turn), a linear, then its Mamba2 block.
        blocks.clear();
        for (const auto& t : zamba2_block_types(c, num_layers)) {
            if (t == "hybrid") {
                blocks.push_back({MixerKind::kFullAttention, MlpKind::kDense, true});
            }
            blocks.push_back({MixerKind::kMamba, MlpKind::kNone});
        }
    } else if (family == "mamba2") {
        // Mamba2ForCausalLM: every block is a Mamba2 mixer with no MLP.
        for (auto& b : blocks) {
            b = {MixerKind::kMamba, MlpKind::kNone};
        }
    } else if (family == "mistral" || family == "mixtral" || family == "phi3") {
        // Mistral and Phi-3 apply `sliding_window` (when set, not null) to every layer (vLLM uses the config's
        // sliding_window for all layers of these classes).
        if (c.get_optional<int>("sliding_window")) {
            for (auto& b : blocks) {
                b.mixer = MixerKind::kSlidingAttention;
            }
        }
    } else if (family == "gemma2") {
        // transformers Gemma2Config / vLLM gemma2.py: even layers slide (layer_types when the config lists them).
        for (int i = 0; i < num_layers; i += 2) {
            blocks[i].mixer = MixerKind::kSlidingAttention;
        }
    } else if (family == "gemma3") {
        // transformers Gemma3TextConfig: layer i is full attention iff (i + 1) % sliding_window_pattern == 0.
        const int pattern = optional_positive_int(c, "sliding_window_pattern").value_or(6);
        for (int i = 0; i < num_layers; ++i) {
            blocks[i].mixer = (i + 1) % pattern == 0 ? MixerKind::kFullAttention : MixerKind::kSlidingAttention;
        }
    } else if (family == "llama4") {
        // transformers Llama4TextConfig: no_rope_layers[i] == 1 marks a RoPE layer, which vLLM runs as chunked
        // local attention when attention_chunk_size is set (llama4.py Llama4Attention); 0 marks a global NoPE layer.
        // Default: every 4th layer is NoPE.
        std::vector<int> rope = int_list(c, "no_rope_layers");
        if (rope.empty()) {
            for (int i = 0; i < num_layers; ++i) {
                rope.push_back((i + 1) % 4 != 0 ? 1 : 0);
            }
        }
        if (static_cast<int>(rope.size()) != num_layers) {
            c.fail("no_rope_layers", fmt::format("has {} entries but num_hidden_layers is {}", rope.size(), num_layers));
        }
        const bool chunked = c.has("attention_chunk_size") && !c.raw()["attention_chunk_size"].IsNull();
        for (int i = 0; i < num_layers; ++i) {
            if (rope[i] != 0 && rope[i] != 1) {
                c.fail("no_rope_layers", fmt::format("entry {} is {}; allowed: 0 (NoPE, global) or 1 (RoPE)", i, rope[i]));
            }
            blocks[i].mixer = rope[i] == 1 && chunked ? MixerKind::kChunkedAttention : MixerKind::kFullAttention;
        }
    } else if (family == "minimax_m2") {
        // attn_type_list: 1 = softmax attention (all layers of M2); 0 = lightning attention (MiniMax-01), unsupported.
        const auto types = int_list(c, "attn_type_list");
        for (std::size_t i = 0; i < types.size(); ++i) {
            if (types[i] != 1) {
                c.fail("attn_type_list",
                       fmt::format("entry {} is {}; only softmax attention (1) is supported", i, types[i]));
            }
        }
    }
    return blocks;
}

AttentionMixer read_attention(const YamlMap& c, const std::string& family, MixerKind kind) {
    AttentionMixer a;
    a.num_q_heads = positive_int(c, "num_attention_heads");
    a.num_kv_heads = optional_positive_int(c, "num_key_value_heads").value_or(a.num_q_heads);
    if (a.num_q_heads % a.num_kv_heads != 0) {
        c.fail("num_key_value_heads",
               fmt::format("{} does not divide num_attention_heads {}", a.num_kv_heads, a.num_q_heads));
    }
    if (family == "zamba2") {
        // Zamba2Config: attention_hidden_size = 2 · hidden_size, attention_head_dim = that / num_attention_heads;
        // vLLM's Zamba2Attention builds its Attention with num_kv_heads = num_heads (no GQA).
        const int hidden = positive_int(c, "hidden_size");
        if ((2 * hidden) % a.num_q_heads != 0) {
            c.fail("num_attention_heads", fmt::format("{} does not divide attention_hidden_size 2 · hidden_size = {}",
                                                      a.num_q_heads, 2 * hidden));
        }
        a.num_kv_heads = a.num_q_heads;
        a.head_dim = 2 * hidden / a.num_q_heads;
        a.input_size = 2 * hidden;
    } else if (is_mla_family(family)) {
        a.head_dim = 0;  // set from the MLA dimensions below
    } else if (auto hd = optional_positive_int(c, "head_dim")) {
        a.head_dim = *hd;
    } else if (auto nemotron_hd = optional_positive_int(c, "attention_head_dim")) {
        a.head_dim = *nemotron_hd;
    } else {
        const int hidden = positive_int(c, "hidden_size");
        if (hidden % a.num_q_heads != 0) {
            c.fail("head_dim", fmt::format("missing, and hidden_size {} is not a multiple of num_attention_heads {}",
                                           hidden, a.num_q_heads));
        }
        a.head_dim = hidden / a.num_q_heads;
    }
    // Qwen3-Next always gates its attention output; Qwen3.5 says so with attn_output_gate.
    a.output_gate = c.get_optional<bool>("attn_output_gate").value_or(is_gdn_family(family));
    if (is_mla_family(family)) {
        // DeepseekV2Attention / DeepseekV2MLAAttention: q_lora_rank null means a plain q_proj (V2-Lite).
        MlaShape m;
        m.q_lora_rank = c.has("q_lora_rank") && !c.raw()["q_lora_rank"].IsNull() ? positive_int(c, "q_lora_rank") : 0;
        m.kv_lora_rank = positive_int(c, "kv_lora_rank");
        m.qk_nope_head_dim = positive_int(c, "qk_nope_head_dim");
        m.qk_rope_head_dim = positive_int(c, "qk_rope_head_dim");
        m.v_head_dim = positive_int(c, "v_head_dim");
        a.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
        a.mla = m;
    }
    if (kind == MixerKind::kSlidingAttention) {
        a.sliding_window_tokens = positive_int(c, "sliding_window", kMaxTokens);
    } else if (kind == MixerKind::kChunkedAttention) {
        a.attention_chunk_tokens = positive_int(c, "attention_chunk_size", kMaxTokens);
    }
    a.sinks = family == "gpt_oss";  // GptOssAttention.sinks: one logit per head
    // Per-head RMSNorm of the queries and keys before RoPE: Qwen3Attention.q_norm / k_norm (vllm qwen3.py,
    // qwen3_moe.py), Qwen3NextAttention (qwen3_next.py, also Qwen3.5's attention layers), Gemma3Attention (gemma3.py).
    a.qk_norm = family == "qwen3" || family == "qwen3_moe" || is_gdn_family(family) || family == "gemma3";
    return a;
}

GatedDeltaNetMixer read_gated_delta_net(const YamlMap& c, const std::string& family, DType model_dtype) {
    GatedDeltaNetMixer g;
    g.interleaved_projections = family == "qwen3_next";  // vLLM qwen3_next.py vs qwen3_5.py (gqa_interleaved_layout)
    g.num_k_heads = positive_int(c, "linear_num_key_heads");
    g.num_v_heads = positive_int(c, "linear_num_value_heads");
    g.k_head_dim = positive_int(c, "linear_key_head_dim");
    g.v_head_dim = positive_int(c, "linear_value_head_dim");
    g.conv_kernel = positive_int(c, "linear_conv_kernel_dim");
    if (g.num_v_heads % g.num_k_heads != 0) {
        c.fail("linear_num_value_heads",
               fmt::format("{} is not a multiple of linear_num_key_heads {}", g.num_v_heads, g.num_k_heads));
    }
    g.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    return g;
}

Mamba2Mixer read_mamba2(const YamlMap& c, const std::string& family, DType model_dtype) {
    Mamba2Mixer m;
    if (family == "falcon_h1") {
        // FalconH1Config / vLLM FalconH1SSMDecoderLayer: inner width mamba_d_ssm (mamba_expand · hidden when null),
        // mamba_d_head "auto" = inner / mamba_n_heads, and heads · head_dim must equal the inner width.
        m.num_heads = positive_int(c, "mamba_n_heads");
        const std::int64_t inner = c.has("mamba_d_ssm") && !c.raw()["mamba_d_ssm"].IsNull()
                                       ? positive_int(c, "mamba_d_ssm")
                                       : i64_product(positive_int(c, "mamba_expand"), positive_int(c, "hidden_size"));
        if (inner > kMaxDimension) {
            c.fail("mamba_expand", fmt::format("mamba_expand × hidden_size = {} exceeds {}", inner, kMaxDimension));
        }
        if (c.get_optional<std::string>("mamba_d_head") == std::optional<std::string>("auto")) {
            m.head_dim = static_cast<int>(inner / m.num_heads);
        } else {
            m.head_dim = positive_int(c, "mamba_d_head");
        }
        if (i64_product(m.num_heads, m.head_dim) != inner) {
            c.fail("mamba_d_head", fmt::format("mamba_n_heads {} × mamba_d_head {} must equal the Mamba inner width {} "
                                               "(mamba_d_ssm, or mamba_expand × hidden_size)",
                                               m.num_heads, m.head_dim, inner));
        }
        m.state_size = positive_int(c, "mamba_d_state");
        m.n_groups = positive_int(c, "mamba_n_groups");
        m.conv_kernel = positive_int(c, "mamba_d_conv");
        m.chunk_size = positive_int(c, "mamba_chunk_size");
        m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    } else if (family == "zamba2") {
        // Zamba2Config: inner = mamba_expand · hidden, mamba_headdim = inner / n_mamba_heads (vLLM's mixer takes
        // head_dim = inner // n_mamba_heads); the states in the model dtype.
        m.num_heads = positive_int(c, "n_mamba_heads");
        const std::int64_t inner = i64_product(positive_int(c, "mamba_expand"), positive_int(c, "hidden_size"));
        if (inner % m.num_heads != 0 || inner > kMaxDimension) {
            c.fail("n_mamba_heads", fmt::format("{} does not divide the Mamba inner width mamba_expand × hidden_size "
                                                "= {}", m.num_heads, inner));
        }
        m.head_dim = static_cast<int>(inner / m.num_heads);
        m.state_size = positive_int(c, "mamba_d_state");
        m.n_groups = positive_int(c, "mamba_ngroups");
        m.conv_kernel = positive_int(c, "mamba_d_conv");
        m.chunk_size = positive_int(c, "chunk_size");
        m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    } else if (family == "granitemoehybrid" || family == "bamba") {
        m.num_heads = positive_int(c, "mamba_n_heads");
        m.head_dim = positive_int(c, "mamba_d_head");
        m.state_size = positive_int(c, "mamba_d_state");
        m.n_groups = positive_int(c, "mamba_n_groups");
        m.conv_kernel = positive_int(c, "mamba_d_conv");
        m.chunk_size = positive_int(c, "mamba_chunk_size");
        m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    } else if (family == "mamba2") {
        // transformers Mamba2Config; the ssm state follows the model dtype (vLLM mamba_ssm_cache_dtype auto).
        m.num_heads = positive_int(c, "num_heads");
        m.head_dim = positive_int(c, "head_dim");
        m.state_size = positive_int(c, "state_size");
        m.n_groups = positive_int(c, "n_groups");
        m.conv_kernel = positive_int(c, "conv_kernel");
        m.chunk_size = positive_int(c, "chunk_size");
        m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    } else {
        m.num_heads = positive_int(c, "mamba_num_heads");
        m.head_dim = positive_int(c, "mamba_head_dim");
        m.state_size = positive_int(c, "ssm_state_size");
        m.n_groups = positive_int(c, "n_groups");
        m.conv_kernel = positive_int(c, "conv_kernel");
        m.chunk_size = positive_int(c, "chunk_size");
        // vLLM forces mamba_ssm_cache_dtype float32 for NemotronH unless the user sets it.
        m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : DType::kFloat32;
    }
    if (m.num_heads % m.n_groups != 0) {
        c.fail(family == "granitemoehybrid" || family == "bamba" || family == "falcon_h1" ? "mamba_n_groups"
               : family == "zamba2"                                                       ? "mamba_ngroups"
                                                                                          : "n_groups",
               fmt::format("{} does not divide the {} Mamba heads", m.n_groups, m.num_heads));
    }
    return m;
}

// Jamba's Mamba-1 layers (JambaMambaMixer): intermediate = mamba_expand · hidden, mamba_dt_rank ("auto":
// ceil(hidden / 16)); the states follow the model dtype (vLLM MambaStateDtypeCalculator.mamba1_state_dtype).
Mamba1Mixer read_mamba1(const YamlMap& c, DType model_dtype) {
    Mamba1Mixer m;
    const int hidden = positive_int(c, "hidden_size");
    m.intermediate_size = positive_int(c, "mamba_expand") * hidden;
    m.state_size = positive_int(c, "mamba_d_state");
    m.conv_kernel = positive_int(c, "mamba_d_conv");
    if (c.get_optional<std::string>("mamba_dt_rank") == std::optional<std::string>("auto")) {
        m.dt_rank = (hidden + 15) / 16;
    } else {
        m.dt_rank = positive_int(c, "mamba_dt_rank");
    }
    m.ssm_state_dtype = c.has("mamba_ssm_dtype") ? dtype_at(c, "mamba_ssm_dtype") : model_dtype;
    return m;
}

MoeMlp read_moe(const YamlMap& c, const std::string& family, int num_experts) {
    MoeMlp moe;
    moe.num_experts = num_experts;
    moe.num_experts_per_tok = positive_int(c, "num_experts_per_tok");
    if (moe.num_experts_per_tok > num_experts) {
        c.fail("num_experts_per_tok",
               fmt::format("{} exceeds the number of experts {}", moe.num_experts_per_tok, num_experts));
    }
    // Qwen MoE and Nemotron name the expert width moe_intermediate_size; Mixtral, MiniMax-M2 and Granite use
    // intermediate_size for it.
    moe.moe_intermediate_size = c.has("moe_intermediate_size") ? positive_int(c, "moe_intermediate_size")
                                                               : positive_int(c, "intermediate_size");
    for (std::string_view key :
         {"shared_expert_intermediate_size", "shared_intermediate_size", "moe_shared_expert_intermediate_size"}) {
        if (auto v = c.get_optional<int>(key)) {
            if (*v < 0) {
                c.fail(key, fmt::format("must not be negative, got {}", *v));
            }
            moe.shared_expert_intermediate_size = *v;
            break;
        }
    }
    if (family == "llama4") {
        // Llama4MoE: one shared expert of intermediate_size, added ungated.
        moe.shared_expert_intermediate_size = moe.moe_intermediate_size;
        moe.shared_expert_gate = false;
    }
    if (is_deepseek_moe_family(family)) {
        // n_shared_experts experts of moe_intermediate_size each, summed ungated (DeepseekV2MoE.shared_experts).
        const int n_shared = c.get_optional<int>("n_shared_experts").value_or(0);
        if (n_shared < 0) {
            c.fail("n_shared_experts", fmt::format("must not be negative, got {}", n_shared));
        }
        moe.shared_expert_intermediate_size = n_shared * moe.moe_intermediate_size;
        moe.shared_expert_gate = false;
    }
    moe.gated = family != "nemotron_h";
    return moe;
}

int read_num_experts(const YamlMap& c, const std::string& family) {
    std::string_view key = family == "nemotron_h" || is_deepseek_moe_family(family) ? "n_routed_experts" : "num_experts";
    if (!c.get_optional<int>(key) && c.get_optional<int>("num_local_experts")) {
        key = "num_local_experts";
    }
    const int n = c.get_optional<int>(key).value_or(0);
    if (n < 0) {
        c.fail(key, fmt::format("must not be negative, got {}", n));
    }
    return n;
}

}  // namespace

std::vector<std::string> supported_model_types() {
    return {kSupportedModelTypes.begin(), kSupportedModelTypes.end()};
}

std::string model_name_from_path(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string stem = p.stem().string();
    if (stem == "config") {
        const std::string parent = p.parent_path().filename().string();
        if (!parent.empty() && parent != "." && parent != "..") {
            return parent;
        }
    }
    return stem;
}

std::int64_t estimate_vision_params(const YamlMap& v, int text_hidden_size) {
    using i64 = std::int64_t;
    const i64 depth = positive_int(v, "depth", kMaxLayers);
    const i64 hidden = positive_int(v, "hidden_size");
    const i64 inter = positive_int(v, "intermediate_size");
    const i64 patch = optional_positive_int(v, "patch_size", 1024).value_or(16);
    const i64 temporal = optional_positive_int(v, "temporal_patch_size", 64).value_or(2);
    const i64 channels = optional_positive_int(v, "in_channels", 64).value_or(3);
    const i64 merge = optional_positive_int(v, "spatial_merge_size", 64).value_or(2);
    const i64 out = optional_positive_int(v, "out_hidden_size").value_or(text_hidden_size);
    const i64 positions = optional_positive_int(v, "num_position_embeddings", kMaxTokens).value_or(0);
    const i64 deepstack = static_cast<i64>(int_list(v, "deepstack_visual_indexes").size());

    const i64 patch_embed = channels * temporal * patch * patch * hidden + hidden;
    const i64 pos_embed = positions * hidden;
    const i64 block = (hidden * 3 * hidden + 3 * hidden) + (hidden * hidden + hidden)  // qkv, proj
                      + (hidden * inter + inter) + (inter * hidden + hidden)           // fc1, fc2
                      + 2 * 2 * hidden;                                                // two LayerNorms
    const i64 merged = hidden * merge * merge;
    // The same sum in double first: the merger squares hidden·merge², which int64 cannot hold for every input.
    const double md = static_cast<double>(hidden) * static_cast<double>(merge) * static_cast<double>(merge);
    const double approx = static_cast<double>(patch_embed) + static_cast<double>(pos_embed) +
                          static_cast<double>(depth) * static_cast<double>(block) +
                          (1.0 + static_cast<double>(deepstack)) * (md * md + md * static_cast<double>(out));
    if (approx > kMaxParams) {
        v.fail("spatial_merge_size", fmt::format("the vision tower would hold about {:.3g} parameters; allowed: at "
                                                 "most {:.0e}", approx, kMaxParams));
    }
    const i64 merger = 2 * hidden + (merged * merged + merged) + (merged * out + out);
    return patch_embed + pos_embed + depth * block + (1 + deepstack) * merger;
}

std::int64_t estimate_vit_params(const YamlMap& v, int text_hidden_size) {
    using i64 = std::int64_t;
    const i64 layers = positive_int(v, "num_hidden_layers");
    const i64 hidden = positive_int(v, "hidden_size");
    const i64 inter = positive_int(v, "intermediate_size");
    const i64 patch = positive_int(v, "patch_size");
    const i64 image = positive_int(v, "image_size");
    const i64 channels = optional_positive_int(v, "num_channels").value_or(3);
    const i64 out = optional_positive_int(v, "vision_output_dim").value_or(hidden);
    const i64 positions = (image / patch) * (image / patch);
    // patch embedding, position table, per layer q/k/v/o and a 2-matrix MLP, the projector to the text width.
    return channels * patch * patch * hidden + positions * hidden + layers * (4 * hidden * hidden + 2 * hidden * inter) +
           out * text_hidden_size;
}

std::int64_t estimate_pixtral_params(const YamlMap& v, int text_hidden_size, int spatial_merge_size,
                                     bool projector_bias) {
    using i64 = std::int64_t;
    const i64 layers = positive_int(v, "num_hidden_layers", kMaxLayers);
    const i64 hidden = positive_int(v, "hidden_size");
    const i64 inter = positive_int(v, "intermediate_size");
    const i64 patch = positive_int(v, "patch_size", 1024);
    const i64 channels = positive_int(v, "num_channels", 64);
    const i64 text = text_hidden_size;
    const i64 merged = hidden * spatial_merge_size * spatial_merge_size;
    // Patch conv (no bias), per layer q/k/v/o (no bias) and a gated MLP (gate, up, down); no position table (2-D
    // RoPE). Projector: patch merger (h·m² → h), linear_1 (h → text), linear_2 (text → text), with biases when
    // multimodal_projector_bias.
    return channels * patch * patch * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter) + merged * hidden +
           hidden * text + text * text + (projector_bias ? 2 * text : 0);
}

ModelSpec model_from_hf_config(const YamlMap& top, const std::string& name) {
    const auto model_type = top.get<std::string>("model_type");
    if (!contains(kSupportedModelTypes, model_type)) {
        top.fail("model_type",
                 "unsupported model_type '" + model_type + "'; supported: " + join(supported_model_types()));
    }
    // The language model's keys: under text_config for multimodal wrappers, else at top level.
    const bool nested = top.has("text_config");
    if (!nested && (model_type == "qwen3_5" || model_type == "qwen3_5_moe" || model_type == "mistral3")) {
        top.fail("text_config", "missing; model_type '" + model_type + "' keeps the language model under text_config");
    }
    const YamlMap raw_text = nested ? top.map("text_config") : top;
    // The text model's own type names its configuration class (and its defaults): text_config.model_type, or the
    // class the wrapper builds when it names none (Gemma3Config: gemma3_text, Mistral3Config: mistral).
    const std::string text_model_type = nested && raw_text.get_optional<std::string>("model_type")
                                            ? raw_text.get<std::string>("model_type")
                                            : default_text_model_type(model_type);
    // Mistral3ForConditionalGeneration (vLLM mistral3.py) runs its text_config through the registered decoder;
    // Mistral Small 3.1 / 3.2 name a MistralConfig ("mistral"). Other decoders under it are not modelled.
    if (model_type == "mistral3" && text_model_type != "mistral") {
        raw_text.fail("model_type", "'" + text_model_type + "' is not modelled under mistral3; allowed: mistral "
                                    "(Mistral Small 3.1 / 3.2)");
    }
    const std::string family = model_type == "mistral3" ? "mistral" : family_of(model_type);
    // Keys the file leaves out take the defaults of the text model's transformers configuration class
    // (models/hf_defaults.h); present keys keep their nodes and line numbers.
    const YamlMap c(with_transformers_defaults(raw_text.raw(), text_model_type), raw_text.file(), raw_text.path());

    ModelSpec spec;
    spec.name = name;
    spec.hidden_size = positive_int(c, "hidden_size");
    spec.vocab_size = positive_int(c, "vocab_size", kMaxVocab);
    // Mamba2Config has no max_position_embeddings: vLLM then assumes 2,048 tokens unless --max-model-len is given
    // (ModelConfig._get_and_verify_max_len); 0 here means "not stated".
    spec.max_position_embeddings = family == "mamba2" ? optional_positive_int(c, "max_position_embeddings").value_or(0)
                                                      : positive_int(c, "max_position_embeddings", kMaxTokens);
    // tie_word_embeddings: the text config's value wins (transformers ties by get_text_config()); default false,
    // except Gemma's configuration classes, which default to true.
    spec.tie_word_embeddings = family == "gemma2" || family == "gemma3";
    if (c.has("tie_word_embeddings")) {
        spec.tie_word_embeddings = c.get<bool>("tie_word_embeddings");
    } else if (top.has("tie_word_embeddings")) {
        spec.tie_word_embeddings = top.get<bool>("tie_word_embeddings");
    }
    // dtype (transformers v5) or torch_dtype, text config first; bfloat16 when the file names none.
    spec.dtype = DType::kBFloat16;
    bool dtype_found = false;
    for (const YamlMap* m : {&c, &top}) {
        for (std::string_view key : {"dtype", "torch_dtype"}) {
            if (!dtype_found && m->get_optional<std::string>(key)) {
                spec.dtype = dtype_at(*m, key);
                dtype_found = true;
            }
        }
    }

    std::vector<BlockKind> blocks;
    if (family == "nemotron_h") {
        blocks = nemotron_blocks(c);
    } else {
        const int num_layers = positive_int(c, "num_hidden_layers", kMaxLayers);
        // Falcon-H1 and Zamba2 build their blocks from their own keys (a layer is two blocks there).
        const bool own_pattern = family == "falcon_h1" || family == "zamba2";
        blocks = c.has("layer_types") && !own_pattern ? layer_type_blocks(c, num_layers)
                                                      : implicit_blocks(c, family, num_layers);
    }

    const int num_experts = read_num_experts(c, family);
    // Llama 4 names the MoE interleave interleave_moe_layer_step (MoE at (i + 1) % step == 0, as Qwen's rule).
    const int sparse_step = optional_positive_int(c, family == "llama4" ? "interleave_moe_layer_step"
                                                                        : "decoder_sparse_step")
                                .value_or(1);
    const std::vector<int> mlp_only = int_list(c, "mlp_only_layers");
    const int first_k_dense = c.get_optional<int>("first_k_dense_replace").value_or(0);
    if (first_k_dense < 0) {
        c.fail("first_k_dense_replace", fmt::format("must not be negative, got {}", first_k_dense));
    }
    const int moe_layer_freq = optional_positive_int(c, "moe_layer_freq").value_or(1);
    // Zamba2: hybrid layer k runs shared block k % num_mem_blocks; its own adapters are added below.
    const int zamba2_mem_blocks = family == "zamba2" ? optional_positive_int(c, "num_mem_blocks").value_or(1) : 0;
    int zamba2_invocation = 0;

    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const BlockKind& b = blocks[i];
        Layer layer;
        switch (b.mixer) {
            case MixerKind::kNone:
                break;
            case MixerKind::kFullAttention:
            case MixerKind::kSlidingAttention:
            case MixerKind::kChunkedAttention:
                layer.mixer = read_attention(c, family, b.mixer);
                break;
            case MixerKind::kLinearAttention:
                layer.mixer = read_gated_delta_net(c, family, spec.dtype);
                break;
            case MixerKind::kMamba:
                if (family == "jamba") {
                    layer.mixer = read_mamba1(c, spec.dtype);
                } else {
                    layer.mixer = read_mamba2(c, family, spec.dtype);
                }
                break;
        }
        MlpKind mlp = b.mlp;
        if (mlp == MlpKind::kDefault && family == "jamba") {
            // JambaConfig: MoE iff i % expert_layer_period == expert_layer_offset.
            const int period = positive_int(c, "expert_layer_period");
            const int offset = c.get<int>("expert_layer_offset");
            if (offset < 0 || offset >= period) {
                c.fail("expert_layer_offset",
                       fmt::format("must be in [0, expert_layer_period = {}), got {}", period, offset));
            }
            mlp = num_experts > 0 && static_cast<int>(i) % period == offset ? MlpKind::kMoe : MlpKind::kDense;
        } else if (mlp == MlpKind::kDefault && is_deepseek_moe_family(family)) {
            // DeepseekV2DecoderLayer: MoE iff n_routed_experts, i >= first_k_dense_replace, i % moe_layer_freq == 0.
            const int idx = static_cast<int>(i);
            const bool moe = num_experts > 0 && idx >= first_k_dense && idx % moe_layer_freq == 0;
            mlp = moe ? MlpKind::kMoe : MlpKind::kDense;
        } else if (mlp == MlpKind::kDefault) {
            // transformers Qwen3-MoE rule: MoE iff experts exist, i not in mlp_only_layers, (i+1) % step == 0.
            const int idx = static_cast<int>(i);
            const bool moe = num_experts > 0 && std::find(mlp_only.begin(), mlp_only.end(), idx) == mlp_only.end() &&
                             (idx + 1) % sparse_step == 0;
            mlp = moe ? MlpKind::kMoe : MlpKind::kDense;
        }
        if (mlp == MlpKind::kMoe) {
            if (num_experts <= 0) {
                c.fail(family == "nemotron_h" ? "n_routed_experts" : "num_experts",
                       "a MoE block needs a positive number of experts");
            }
            layer.mlp = read_moe(c, family, num_experts);
        } else if (mlp == MlpKind::kDense) {
            DenseMlp d;
            if (family == "granitemoehybrid") {
                // Granite-4.0-H without experts runs only its shared MLP.
                d.intermediate_size = positive_int(c, "shared_intermediate_size");
            } else if (family == "llama4") {
                // Llama 4's dense layers are intermediate_size_mlp wide; intermediate_size is the expert width.
                d.intermediate_size = positive_int(c, "intermediate_size_mlp");
            } else if (family == "zamba2" && (!c.has("intermediate_size") || c.raw()["intermediate_size"].IsNull())) {
                d.intermediate_size = 4 * spec.hidden_size;  // Zamba2Config's default
            } else {
                d.intermediate_size = positive_int(c, "intermediate_size");
            }
            d.gated = family != "nemotron_h";  // Nemotron-H: up/down with relu2, no gate
            layer.mlp = d;
        }
        if (b.zamba2_shared) {
            // vLLM zamba2.py: the first num_mem_blocks invocations hold the shared blocks' weights. Each invocation
            // has its own Zamba2LoRA adapters (A: in → adapter_rank, B: adapter_rank → out): on gate_up_proj always
            // (Zamba2MLP builds them unconditionally), on q, k and v when use_shared_attention_adapter; plus the
            // hybrid layer's hidden → hidden ReplicatedLinear.
            const std::int64_t h = spec.hidden_size;
            const std::int64_t rank = optional_positive_int(c, "adapter_rank").value_or(128);
            const std::int64_t inter = std::get<DenseMlp>(layer.mlp).intermediate_size;
            const std::int64_t attn = 2 * h;  // attention_hidden_size
            std::int64_t own = h * rank + rank * 2 * inter + h * h;
            if (c.get_optional<bool>("use_shared_attention_adapter").value_or(false)) {
                own += 3 * (attn * rank + rank * attn);
            }
            layer.shares_weights = zamba2_invocation >= zamba2_mem_blocks;
            layer.adapter_params = own;
            ++zamba2_invocation;
        }
        spec.layers.push_back(std::move(layer));
    }
    if (family == "zamba2") {
        if (zamba2_invocation < zamba2_mem_blocks) {
            c.fail("num_mem_blocks", fmt::format("{} shared blocks but only {} hybrid layers use them",
                                                 zamba2_mem_blocks, zamba2_invocation));
        }
        // Zamba2ForCausalLM ties lm_head to the input embedding whatever the config says.
        spec.tie_word_embeddings = true;
    }

    if (model_type == "mistral3" && top.has("vision_config") && !top.raw()["vision_config"].IsNull()) {
        // Pixtral tower and Mistral 3 projector (estimate_pixtral_params); like Gemma 3's SigLIP, vLLM's encoder
        // profile run for it is not modelled (docs/MODELS.md). Mistral3Config defaults: spatial_merge_size 2,
        // multimodal_projector_bias false.
        const YamlMap raw_v = top.map("vision_config");
        const YamlMap v(with_transformers_defaults(raw_v.raw(), "pixtral"), raw_v.file(), raw_v.path());
        const int merge = optional_positive_int(top, "spatial_merge_size", 64).value_or(2);
        const bool bias = top.get_optional<bool>("multimodal_projector_bias").value_or(false);
        spec.extra_params = estimate_pixtral_params(v, spec.hidden_size, merge, bias);
    } else if ((family == "gemma3" || family == "llama4") && top.has("vision_config") &&
        !top.raw()["vision_config"].IsNull()) {
        // SigLIP (Gemma 3) and Llama 4's ViT: parameters counted as a plain ViT (estimate_vit_params); vLLM's
        // encoder profile run for them is not modelled (docs/MODELS.md).
        spec.extra_params = estimate_vit_params(top.map("vision_config"), spec.hidden_size);
    } else if (top.has("vision_config") && !top.raw()["vision_config"].IsNull()) {
        const YamlMap v = top.map("vision_config");
        spec.extra_params = estimate_vision_params(v, spec.hidden_size);
        VisionTower t;
        t.depth = positive_int(v, "depth", kMaxLayers);
        t.hidden_size = positive_int(v, "hidden_size");
        t.intermediate_size = positive_int(v, "intermediate_size");
        t.patch_size = optional_positive_int(v, "patch_size", 1024).value_or(16);
        t.temporal_patch_size = optional_positive_int(v, "temporal_patch_size", 64).value_or(2);
        t.in_channels = optional_positive_int(v, "in_channels", 64).value_or(3);
        t.spatial_merge_size = optional_positive_int(v, "spatial_merge_size", 64).value_or(2);
        t.out_hidden_size = optional_positive_int(v, "out_hidden_size").value_or(spec.hidden_size);
        spec.vision = t;
    }
    spec.supports_mamba_prefix_caching_all = contains(kMambaPrefixCachingAll, family);
    spec.blocks_per_decoder_layer = family == "falcon_h1" ? 2 : 1;  // FalconH1ParallelHybrid: attention + Mamba2 blocks
    spec.supports_pipeline_parallel = family != "zamba2";          // Zamba2ForCausalLM does not implement SupportsPP
    // Weight quantization (models/quantization_config.h); a method servesim does not model is refused there.
    if (top.has("quantization_config") && !top.raw()["quantization_config"].IsNull()) {
        if (family == "zamba2") {
            top.fail("quantization_config", "is not modelled for zamba2 (shared transformer blocks with per-invocation "
                                            "adapters); use the unquantized checkpoint");
        }
        spec.quantization = parse_quantization_config(top.map("quantization_config"), spec.dtype);
    } else if (top.has("compression_config") && !top.raw()["compression_config"].IsNull()) {
        // vLLM falls back to compression_config (early compressed-tensors exports): not read, so refused.
        top.fail("compression_config", "is not modelled; rename it quantization_config if it holds a "
                                       "compressed-tensors quantization_config");
    }
    check_model_size(spec, c);
    return spec;
}

ModelSpec model_from_hf_config(const YAML::Node& config, const std::string& name, const std::string& file_for_errors) {
    return model_from_hf_config(YamlMap(config, file_for_errors), name);
}

ModelSpec read_hf_config(const std::string& path, const std::string& name) {
    YAML::Node config = load_yaml_file(path);
    // ModelOpt checkpoints may keep their scheme in hf_quant_config.json beside config.json; vLLM reads it when
    // config.json has no quantization_config (ModelOptQuantConfigBase, get_config_filenames).
    const std::filesystem::path modelopt = std::filesystem::path(path).parent_path() / "hf_quant_config.json";
    if (config.IsMap() && !config["quantization_config"] && std::filesystem::exists(modelopt)) {
        const YAML::Node q = load_yaml_file(modelopt.string());
        if (!q.IsMap() || !q["quantization"]) {
            throw ConfigError(modelopt.string(), 0, "quantization", "missing; expected ModelOpt's {quantization: "
                                                                    "{quant_algo: ...}}");
        }
        YAML::Node qc(YAML::NodeType::Map);
        qc["quant_method"] = "modelopt";
        qc["quantization"] = q["quantization"];
        config["quantization_config"] = qc;
    }
    return model_from_hf_config(config, name, path);
}

ModelSpec read_hf_config(const std::string& path) {
    return read_hf_config(path, model_name_from_path(path));
}

}  // namespace servesim::models
