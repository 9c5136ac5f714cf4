// Speculative decoding's settings, acceptance model, counters and drafter cost; see speculative.h and
// docs/SPECULATIVE-DECODING.md.
#include "sim/engine/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <variant>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "models/model_derived.h"

namespace servesim::engine {
namespace {

constexpr int kMaxSpeculativeTokens = 64;

// Published per-position acceptance rates (vLLM's definition: drafts whose first i + 1 tokens were accepted, over
// drafts), one list per method; docs/SPECULATIVE-DECODING.md gives the setting of each measurement.
// MTP: vLLM PR #48892 (multi-layer MTP speculator, gsm8k, temperature 0, 8 positions).
constexpr std::array<double, 8> kMtpRates = {0.7617, 0.6158, 0.5125, 0.4243, 0.3640, 0.3094, 0.2722, 0.2365};
// EAGLE-3: llama.cpp PR #24536's EAGLE-3 run (3 positions), reported with vLLM's metric definitions.
constexpr std::array<double, 3> kEagle3Rates = {0.805, 0.632, 0.483};
// ngram: vLLM PR #24344, ngram with prompt_lookup 2..5, k = 5, on an editing data set (vdaita/edit_5k_char).
constexpr std::array<double, 5> kNgramRates = {0.81, 0.74, 0.70, 0.68, 0.66};
// EAGLE (EAGLE-1): vLLM PR #16035, Llama-3-8B-Instruct with an EAGLE head on MT-Bench, k = 2: mean acceptance
// length 1.89 (a mean only: spread over positions at a constant ratio).
constexpr double kEagleMeanLength = 1.89;
constexpr int kEagleMeasuredK = 2;

std::vector<double> extend(const double* rates, std::size_t n, int k) {
    std::vector<double> out;
    for (int i = 0; i < k; ++i) {
        if (static_cast<std::size_t>(i) < n) {
            out.push_back(rates[i]);
        } else {
            // Past the published positions: the ratio of the last two published rates, applied again.
            const double ratio = n >= 2 ? rates[n - 1] / rates[n - 2] : 1.0;
            out.push_back(out.back() * ratio);
        }
    }
    return out;
}

[[noreturn]] void fail(std::string_view key, const std::string& what) {
    throw ConfigError(fmt::format("key '{}': {}", key, what));
}

int int_key(const nlohmann::json& j, std::string_view key, int lo, int hi) {
    const auto& v = j.at(std::string(key));
    if (!v.is_number_integer()) {
        fail(key, fmt::format("expected a whole number from {} to {}, got {}", lo, hi, v.dump()));
    }
    const auto i = v.get<std::int64_t>();
    if (i < lo || i > hi) {
        fail(key, fmt::format("{} is out of range; allowed: {} to {}", i, lo, hi));
    }
    return static_cast<int>(i);
}

}  // namespace

std::string_view speculative_method_name(SpeculativeMethod m) {
    switch (m) {
        case SpeculativeMethod::kNgram:
            return "ngram";
        case SpeculativeMethod::kEagle:
            return "eagle";
        case SpeculativeMethod::kEagle3:
            return "eagle3";
        case SpeculativeMethod::kMtp:
            return "mtp";
        case SpeculativeMethod::kDraftModel:
            return "draft_model";
    }
    return "";
}

double SpeculativeConfig::mean_accepted_tokens() const {
    double sum = 0;
    for (const double r : acceptance_per_position) {
        sum += r;
    }
    return sum;
}

std::vector<double> acceptance_from_mean_length(double mean_accepted_length, int k) {
    SERVESIM_CHECK(k >= 1 && mean_accepted_length >= 1.0 && mean_accepted_length <= 1.0 + k,
                   "mean acceptance length {} outside [1, {}]", mean_accepted_length, 1 + k);
    const double target = mean_accepted_length - 1.0;
    // Σ_{i=1..k} p^i grows with p from 0 (p = 0) to k (p = 1): bisection to 1e-12.
    const auto sum = [k](double p) {
        double s = 0;
        double term = 1;
        for (int i = 0; i < k; ++i) {
            term *= p;
            s += term;
        }
        return s;
    };
    double lo = 0;
    double hi = 1;
    for (int it = 0; it < 200 && hi - lo > 1e-12; ++it) {
        const double mid = 0.5 * (lo + hi);
        (sum(mid) < target ? lo : hi) = mid;
    }
    const double p = 0.5 * (lo + hi);
    std::vector<double> rates;
    double term = 1;
    for (int i = 0; i < k; ++i) {
        term *= p;
        rates.push_back(term);
    }
    return rates;
}

std::vector<double> default_acceptance(SpeculativeMethod method, int k, std::string* source) {
    switch (method) {
        case SpeculativeMethod::kMtp:
            *source = "default for mtp: vLLM PR #48892 (MTP, gsm8k, temperature 0)";
            return extend(kMtpRates.data(), kMtpRates.size(), k);
        case SpeculativeMethod::kEagle3:
            *source = "default for eagle3: llama.cpp PR #24536 (EAGLE-3, vLLM's metric definitions)";
            return extend(kEagle3Rates.data(), kEagle3Rates.size(), k);
        case SpeculativeMethod::kNgram:
            *source = "default for ngram: vLLM PR #24344 (ngram 2..5 on an editing data set)";
            return extend(kNgramRates.data(), kNgramRates.size(), k);
        case SpeculativeMethod::kEagle: {
            *source =
                "default for eagle: vLLM PR #16035 (EAGLE Llama-3-8B, MT-Bench, mean acceptance length 1.89 at "
                "k = 2)";
            const std::vector<double> measured = acceptance_from_mean_length(kEagleMeanLength, kEagleMeasuredK);
            return extend(measured.data(), measured.size(), k);
        }
        case SpeculativeMethod::kDraftModel:
            break;
    }
    throw ConfigError(
        "method draft_model has no default acceptance; give "
        "engine.speculative_acceptance or engine.speculative_mean_acceptance_length");
}

SpeculativeConfig parse_speculative_config(const std::string& json_text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
        throw ConfigError(fmt::format("not JSON ({}): '{}'", e.what(), json_text));
    }
    if (!j.is_object()) {
        throw ConfigError(
            fmt::format("expected a JSON object such as "
                        "{{\"method\": \"eagle3\", \"model\": \"...\", \"num_speculative_tokens\": 3}}, "
                        "got '{}'",
                        json_text));
    }
    constexpr std::array<std::string_view, 6> kKeys = {"method",           "num_speculative_tokens",
                                                       "model",            "prompt_lookup_max",
                                                       "prompt_lookup_min", "draft_tensor_parallel_size"};
    for (const auto& [key, value] : j.items()) {
        if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
            fail(key,
                 "not modelled by servesim; allowed keys: method, num_speculative_tokens, model, "
                 "prompt_lookup_max, prompt_lookup_min, draft_tensor_parallel_size");
        }
    }
    SpeculativeConfig c;
    if (!j.contains("method") || !j["method"].is_string()) {
        fail("method",
             "required (servesim does not infer it from the draft model); allowed: ngram, eagle, eagle3, "
             "mtp (or deepseek_mtp and the other *_mtp names), draft_model");
    }
    const std::string method = j["method"].get<std::string>();
    if (method == "ngram") {
        c.method = SpeculativeMethod::kNgram;
    } else if (method == "eagle") {
        c.method = SpeculativeMethod::kEagle;
    } else if (method == "eagle3") {
        c.method = SpeculativeMethod::kEagle3;
    } else if (method == "mtp" || (method.size() > 4 && method.ends_with("_mtp"))) {
        c.method = SpeculativeMethod::kMtp;  // vLLM folds deepseek_mtp, qwen3_next_mtp, ... into mtp
    } else if (method == "draft_model") {
        c.method = SpeculativeMethod::kDraftModel;
    } else {
        fail("method", fmt::format("'{}' is not modelled; allowed: ngram, eagle, eagle3, mtp, draft_model (medusa, "
                                   "mlp_speculator, suffix and ngram_gpu are not)",
                                   method));
    }
    if (!j.contains("num_speculative_tokens")) {
        fail("num_speculative_tokens", fmt::format("required: drafts per step, 1 to {}", kMaxSpeculativeTokens));
    }
    c.num_speculative_tokens = int_key(j, "num_speculative_tokens", 1, kMaxSpeculativeTokens);
    if (j.contains("model")) {
        if (!j["model"].is_string()) {
            fail("model", "expected the draft model's name or path as a string");
        }
        c.draft_model = j["model"].get<std::string>();
    }
    if ((c.method == SpeculativeMethod::kEagle || c.method == SpeculativeMethod::kEagle3) && c.draft_model.empty()) {
        fail("model", fmt::format("required with method {} (the EAGLE head's checkpoint)", method));
    }
    if (c.method == SpeculativeMethod::kDraftModel && c.draft_model.empty()) {
        fail("model", "required with method draft_model: a catalogued model name (models/presets/) or a config.json "
                      "path, resolved as the target's `model` is");
    }
    if (j.contains("draft_tensor_parallel_size")) {
        if (c.method == SpeculativeMethod::kNgram) {
            fail("draft_tensor_parallel_size", "not with method ngram (no draft model)");
        }
        c.draft_tensor_parallel_size = int_key(j, "draft_tensor_parallel_size", 1, 1024);
    }
    const bool has_max = j.contains("prompt_lookup_max");
    const bool has_min = j.contains("prompt_lookup_min");
    if ((has_max || has_min) && c.method != SpeculativeMethod::kNgram) {
        fail(has_max ? "prompt_lookup_max" : "prompt_lookup_min", "only with method ngram");
    }
    if (c.method == SpeculativeMethod::kNgram) {
        // vLLM SpeculativeConfig.__post_init__ for ngram: a missing bound takes the other's value, 5 when both are.
        c.prompt_lookup_max = has_max ? int_key(j, "prompt_lookup_max", 1, 1 << 20) : 0;
        c.prompt_lookup_min = has_min ? int_key(j, "prompt_lookup_min", 1, 1 << 20) : 0;
        if (!has_max && !has_min) {
            c.prompt_lookup_max = c.prompt_lookup_min = 5;
        } else if (!has_max) {
            c.prompt_lookup_max = c.prompt_lookup_min;
        } else if (!has_min) {
            c.prompt_lookup_min = c.prompt_lookup_max;
        }
        if (c.prompt_lookup_min > c.prompt_lookup_max) {
            fail("prompt_lookup_min",
                 fmt::format("{} is above prompt_lookup_max {}", c.prompt_lookup_min, c.prompt_lookup_max));
        }
    }
    return c;
}

void resolve_acceptance(SpeculativeConfig& c,
                        const std::vector<double>& per_position,
                        double mean_accepted_length,
                        std::string_view key_prefix) {
    const int k = c.num_speculative_tokens;
    if (!per_position.empty() && mean_accepted_length > 0) {
        throw ConfigError(
            fmt::format("{}speculative_acceptance and {}speculative_mean_acceptance_length: give one, "
                        "not both",
                        key_prefix, key_prefix));
    }
    if (!per_position.empty()) {
        if (static_cast<int>(per_position.size()) != k) {
            throw ConfigError(
                fmt::format("{}speculative_acceptance: {} rates for num_speculative_tokens {}; allowed: "
                            "one rate per draft position",
                            key_prefix, per_position.size(), k));
        }
        for (std::size_t i = 0; i < per_position.size(); ++i) {
            if (!(per_position[i] >= 0.0 && per_position[i] <= 1.0)) {
                throw ConfigError(fmt::format("{}speculative_acceptance: position {} rate {} is outside [0, 1]",
                                              key_prefix, i, per_position[i]));
            }
            if (i > 0 && per_position[i] > per_position[i - 1]) {
                throw ConfigError(fmt::format(
                    "{}speculative_acceptance: position {} rate {} exceeds position {}'s {}; vLLM's per-position rate "
                    "counts drafts accepted up to that position, so it never grows",
                    key_prefix, i, per_position[i], i - 1, per_position[i - 1]));
            }
        }
        c.acceptance_per_position = per_position;
        c.acceptance_source = "speculative_acceptance";
        return;
    }
    if (mean_accepted_length > 0) {
        if (!(mean_accepted_length >= 1.0 && mean_accepted_length <= 1.0 + k)) {
            throw ConfigError(
                fmt::format("{}speculative_mean_acceptance_length: {} is out of range; allowed: 1 to "
                            "{} (1 + num_speculative_tokens)",
                            key_prefix, mean_accepted_length, 1 + k));
        }
        c.acceptance_per_position = acceptance_from_mean_length(mean_accepted_length, k);
        c.acceptance_source = "speculative_mean_acceptance_length";
        return;
    }
    c.acceptance_per_position = default_acceptance(c.method, k, &c.acceptance_source);
}

SpeculativeStats& SpeculativeStats::operator+=(const SpeculativeStats& o) {
    num_drafts += o.num_drafts;
    num_draft_tokens += o.num_draft_tokens;
    num_accepted_tokens += o.num_accepted_tokens;
    if (num_accepted_tokens_per_pos.size() < o.num_accepted_tokens_per_pos.size()) {
        num_accepted_tokens_per_pos.resize(o.num_accepted_tokens_per_pos.size(), 0);
    }
    for (std::size_t i = 0; i < o.num_accepted_tokens_per_pos.size(); ++i) {
        num_accepted_tokens_per_pos[i] += o.num_accepted_tokens_per_pos[i];
    }
    return *this;
}

double SpeculativeStats::acceptance_rate() const {
    SERVESIM_CHECK(num_draft_tokens > 0, "acceptance rate without draft tokens");
    return static_cast<double>(num_accepted_tokens) / static_cast<double>(num_draft_tokens);
}

double SpeculativeStats::mean_acceptance_length() const {
    SERVESIM_CHECK(num_drafts > 0, "mean acceptance length without drafts");
    return 1.0 + static_cast<double>(num_accepted_tokens) / static_cast<double>(num_drafts);
}

std::vector<double> SpeculativeStats::acceptance_per_position() const {
    SERVESIM_CHECK(num_drafts > 0, "per-position acceptance without drafts");
    std::vector<double> out;
    for (const std::int64_t a : num_accepted_tokens_per_pos) {
        out.push_back(static_cast<double>(a) / static_cast<double>(num_drafts));
    }
    return out;
}

std::optional<cache::DrafterMemoryRequest> drafter_memory(const SpeculativeConfig& config,
                                                          const models::ModelSpec& target,
                                                          const models::ModelSpec* draft,
                                                          int tensor_parallel_size) {
    const int tp = std::max(1, tensor_parallel_size);
    if (config.method == SpeculativeMethod::kNgram) {
        return std::nullopt;
    }
    cache::DrafterMemoryRequest d;
    if (config.method == SpeculativeMethod::kDraftModel) {
        SERVESIM_CHECK(draft != nullptr, "draft_model without its ModelSpec");
        d.name = draft->name;
        d.weight_bytes = models::weight_bytes_total(*draft) / tp;  // sharded as the target's (draft TP = target TP)
        for (const auto& layer : draft->layers) {
            if (const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer)) {
                d.attention_layers.push_back(*a);
            } else if (!std::holds_alternative<models::NoMixer>(layer.mixer)) {
                throw ConfigError(fmt::format("speculative_config: key 'model': draft model '{}' has recurrent (Mamba/GDN) layers; a "
                                              "hybrid draft model is not modelled",
                                              draft->name));
            }
        }
        return d;
    }
    // EAGLE/EAGLE-3/MTP head: draft_layers copies of the target's last full-attention decoder layer.
    const models::Layer* last = nullptr;
    for (const auto& layer : target.layers) {
        const auto* a = std::get_if<models::AttentionMixer>(&layer.mixer);
        if (a != nullptr && a->sliding_window_tokens == 0 && a->attention_chunk_tokens == 0) {
            last = &layer;
        }
    }
    if (last == nullptr) {
        throw ConfigError(fmt::format("speculative_config: key 'method': {} needs a full-attention layer in model '{}' to shape its head",
                                      speculative_method_name(config.method), target.name));
    }
    d.name = fmt::format("{} head of {}", speculative_method_name(config.method), target.name);
    models::ModelSpec head = target;
    head.layers.clear();
    const std::int64_t without_layers = models::weight_bytes_total(head);
    head.layers.assign(static_cast<std::size_t>(std::max(1, config.draft_layers)), *last);
    const std::int64_t layer_bytes = models::weight_bytes_total(head) - without_layers;
    // The head's input projection: EAGLE's fc and MTP's eh_proj take [embedding; hidden] (2h), EAGLE-3's fc three
    // hidden states (3h), to h.
    const std::int64_t in_multiple = config.method == SpeculativeMethod::kEagle3 ? 3 : 2;
    const std::int64_t h = target.hidden_size;
    const std::int64_t fc_bytes = in_multiple * h * h * models::dtype_bytes(target.dtype);
    d.weight_bytes = (layer_bytes + fc_bytes) / tp;
    const auto& attn = std::get<models::AttentionMixer>(last->mixer);
    d.attention_layers.assign(static_cast<std::size_t>(std::max(1, config.draft_layers)), attn);
    return d;
}

SpeculativeCostModel::SpeculativeCostModel(std::unique_ptr<CostModel> inner,
                                           const SpeculativeConfig& config,
                                           int num_target_layers,
                                           std::unique_ptr<CostModel> draft)
    : inner_(std::move(inner)),
      draft_(std::move(draft)),
      config_(config),
      num_target_layers_(std::max(1, num_target_layers)) {
    SERVESIM_CHECK((config_.method == SpeculativeMethod::kDraftModel) == (draft_ != nullptr),
                   "a draft cost model is needed with draft_model and only there");
}

double SpeculativeCostModel::draft_ms(const BatchShape& shape) const {
    if (shape.num_spec_seqs == 0) {
        return 0;
    }
    if (config_.method == SpeculativeMethod::kNgram) {
        return 1e-6 * config_.ngram_ns_per_context_token * static_cast<double>(shape.spec_context_tokens);
    }
    if (draft_) {
        return draft_model_ms(shape);
    }
    const double fraction = static_cast<double>(config_.draft_layers) / static_cast<double>(num_target_layers_);
    const auto layers_ms = [&](const StepCost& c) {
        return fraction * (c.gemm_ms + c.attn_prefill_ms + c.attn_decode_ms + c.gdn_ms + c.comm_ms);
    };
    // A decode-only shape of `seqs` sequences, one token each, reading `context` keys in all.
    const auto decode_shape = [&](std::int64_t seqs, std::int64_t context) {
        BatchShape d;
        d.num_tokens = seqs;
        d.num_seqs = seqs;
        d.num_decode_seqs = seqs;
        d.decode_context_tokens = context;
        d.num_sampled_seqs = seqs;
        d.num_local_spans = 0;  // local layers at the full context: an upper bound for a one-layer head
        return d;
    };
    // Drafting requests: every sequence that samples this step (its drafts come from this forward).
    const std::int64_t rows = shape.num_sampled_seqs - shape.num_draft_tokens;
    // First draft forward: the step's own tokens through the head's layers, the lm_head for one row per request.
    double ms = layers_ms(inner_->step_cost(shape)) +
                inner_->step_cost(decode_shape(rows, shape.spec_context_tokens)).lm_head_ms;
    // Draft forwards 2..k: one token per speculating request, each a position further.
    const std::int64_t b = shape.num_spec_seqs;
    for (int j = 1; j < config_.num_speculative_tokens; ++j) {
        const StepCost c = inner_->step_cost(decode_shape(b, shape.spec_context_tokens + b * j));
        ms += layers_ms(c) + c.lm_head_ms;
    }
    return ms;
}

double SpeculativeCostModel::draft_model_ms(const BatchShape& shape) const {
    // The draft checkpoint's forward time: every GPU term but the per-step launch overhead (its forwards run in the
    // step's CUDA graphs) and the target-only snapshot copies.
    const auto forward_ms = [](const StepCost& c) {
        return c.gemm_ms + c.lm_head_ms + c.attn_prefill_ms + c.attn_decode_ms + c.gdn_ms + c.comm_ms;
    };
    // Drafting requests: every sequence that samples this step.
    const std::int64_t rows = shape.num_sampled_seqs - shape.num_draft_tokens;
    // First forward (DraftModelProposer.update_propose_kwargs): the step's tokens, each drafting request's with the
    // token just sampled appended; logits for one row per request.
    BatchShape first = shape;
    first.num_tokens += rows;
    first.decode_context_tokens += shape.num_spec_seqs;  // a speculating decode's appended token reads one more key
    first.num_sampled_seqs = rows;
    first.num_spec_seqs = 0;
    first.num_draft_tokens = 0;
    first.spec_context_tokens = 0;
    first.num_snapshots = 0;
    first.num_snapshot_extra_chunks = 0;
    double ms = forward_ms(draft_->step_cost(first));
    // Forwards 2..k: one token per speculating request, each a position further.
    const std::int64_t b = shape.num_spec_seqs;
    for (int j = 1; j < config_.num_speculative_tokens; ++j) {
        BatchShape d;
        d.num_tokens = b;
        d.num_seqs = b;
        d.num_decode_seqs = b;
        d.decode_context_tokens = shape.spec_context_tokens + b * j;
        d.num_sampled_seqs = b;
        ms += forward_ms(draft_->step_cost(d));
    }
    return ms;
}

StepCost SpeculativeCostModel::step_cost(const BatchShape& shape) const {
    StepCost c = inner_->step_cost(shape);
    c.spec_draft_ms = draft_ms(shape);
    return c;
}

std::string SpeculativeCostModel::describe() const {
    if (draft_) {
        return fmt::format("{} + draft_model drafter {} [{}] (k = {})", inner_->describe(), config_.draft_model,
                           draft_->describe(), config_.num_speculative_tokens);
    }
    return fmt::format("{} + {} drafter (k = {})", inner_->describe(), speculative_method_name(config_.method),
                       config_.num_speculative_tokens);
}

std::vector<StepTerm> SpeculativeCostModel::step_terms(const BatchShape& shape) const {
    std::vector<StepTerm> terms = inner_->step_terms(shape);
    terms.push_back({"spec_draft", draft_ms(shape),
                     config_.method == SpeculativeMethod::kNgram ? "ngram lookup on the host (docs/SPECULATIVE-DECODING.md)"
                     : draft_ ? "draft model: its own forwards, k passes (docs/SPECULATIVE-DECODING.md)"
                              : "draft head: its layers' share of the forward, k passes (docs/SPECULATIVE-DECODING.md)"});
    return terms;
}

}  // namespace servesim::engine
