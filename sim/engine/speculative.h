// Speculative decoding as vLLM's v1 engine runs it (--speculative-config; vllm/config/speculative.py
// SpeculativeConfig, vllm/v1/spec_decode/*, vllm/v1/sample/rejection_sampler.py). This file owns the settings
// (method, num_speculative_tokens, the drafter's shape), the acceptance model (how many of a step's draft tokens the
// target accepts), the drafter's cost per step and the counters vLLM's SpecDecodingStats keeps. The scheduler's side
// (1 + k tokens per decoding request, lookahead slots, rejected tokens rolled back) is in scheduler.cpp and
// replica.cpp; docs/SPECULATIVE-DECODING.md says how each piece follows vLLM and where the defaults come from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "sim/memory/memory_plan.h"
#include "sim/core/rng.h"
#include "sim/engine/cost_model.h"

namespace servesim::engine {

// vLLM SpeculativeConfig.method values servesim models. `deepseek_mtp` and the other *_mtp names vLLM folds into
// `mtp` are read as kMtp.
enum class SpeculativeMethod { kNgram, kEagle, kEagle3, kMtp, kDraftModel };

// The ngram lookup's host time per context token: bench/ngram_lookup_bench.cpp (a C++ rendering of NgramProposer's
// KMP scan, g++ -O2) measured 1.76 / 6.66 / 26.4 µs at 512 / 2,048 / 8,192 tokens on this project's build host
// (Intel Xeon, 2 cores), 3.25 ns per token at 2,048 (docs/SPECULATIVE-DECODING.md).
inline constexpr double kNgramLookupNsPerContextToken = 3.25;

[[nodiscard]] std::string_view speculative_method_name(SpeculativeMethod m);

struct SpeculativeConfig {
    SpeculativeMethod method = SpeculativeMethod::kEagle3;
    int num_speculative_tokens = 0;  // k: drafts proposed per request per step
    std::string draft_model;         // `model` (EAGLE head, MTP module or draft checkpoint); draft_model resolves it
    // vLLM draft_tensor_parallel_size (SpeculativeConfig._verify_and_get_draft_tp): unset (0) = the target's TP;
    // vLLM also allows 1, which servesim does not model (the caller refuses any value but the target's).
    int draft_tensor_parallel_size = 0;
    int prompt_lookup_min = 0;       // ngram only (vLLM defaults: min 5 → set from max when one is given)
    int prompt_lookup_max = 0;
    // vLLM's per-position acceptance rate (vllm/v1/spec_decode/metrics.py): entry i is the share of drafts whose
    // first i + 1 tokens were all accepted, so it never grows with i. Size k.
    std::vector<double> acceptance_per_position;
    // Where acceptance_per_position came from (the engine key, or the method's documented default and its source).
    std::string acceptance_source;
    // The drafter's cost. EAGLE/EAGLE-3/MTP: draft_layers decoder layers of the target's shape per draft forward
    // (vLLM EagleProposer.propose: one forward over the step's tokens, then k − 1 forwards of one token per request).
    // ngram: host time per context token of each speculating request (NgramProposer.propose scans the context once
    // per step, on the host after the forward).
    int draft_layers = 1;
    double ngram_ns_per_context_token = 0;

    // vLLM Scheduler.__init__: lookahead slots are allocated for EAGLE/MTP (use_eagle) and draft models
    // (uses_draft_model); ngram allocates none.
    [[nodiscard]] int num_lookahead_tokens() const {
        return method == SpeculativeMethod::kNgram ? 0 : num_speculative_tokens;
    }

    // Expected accepted drafts per verified step with k drafts: Σ acceptance_per_position (the mean acceptance
    // length vLLM logs is 1 + this).
    [[nodiscard]] double mean_accepted_tokens() const;

    // EAGLE/EAGLE-3/MTP: a head of draft_layers decoder layers of the target's shape (not a separate checkpoint).
    [[nodiscard]] bool uses_head() const {
        return method == SpeculativeMethod::kEagle || method == SpeculativeMethod::kEagle3 ||
               method == SpeculativeMethod::kMtp;
    }
};

// The drafter's memory on each tensor-parallel rank (vLLM loads it beside the target in GPUModelRunner.load_model,
// and its attention layers join the KV cache spec: get_kv_cache_spec walks every Attention layer of the forward
// context, the drafter's included; SpeculativeConfig.uses_draft_kv_cache). docs/SPECULATIVE-DECODING.md, "The
// drafter's memory".
// - EAGLE/EAGLE-3/MTP: draft_layers copies of the target's last full-attention decoder layer (its attention and MLP,
//   at the target's quantization) plus the head's input projection from multiple × hidden to hidden (EAGLE and MTP
//   concatenate the token embedding with the hidden state: 2; EAGLE-3 concatenates three hidden states: 3), at the
//   model dtype. The embedding and lm_head are the target's (EagleProposer.load_model shares them).
// - draft_model: the draft checkpoint's weights over TP, and all its attention layers.
// - ngram: nothing (unset).
[[nodiscard]] std::optional<cache::DrafterMemoryRequest> drafter_memory(const SpeculativeConfig& config,
                                                                        const models::ModelSpec& target,
                                                                        const models::ModelSpec* draft,
                                                                        int tensor_parallel_size);

// The defaults per method (docs/SPECULATIVE-DECODING.md names each source): per-position rates for k positions,
// extended past the published positions by the ratio of the last two.
[[nodiscard]] std::vector<double> default_acceptance(SpeculativeMethod method, int k, std::string* source);

// Per-position rates whose sum is mean_accepted_length − 1 with a constant ratio between positions (r_i = p^(i+1)),
// for a mean acceptance length given alone. Requires 1 ≤ mean_accepted_length ≤ 1 + k.
[[nodiscard]] std::vector<double> acceptance_from_mean_length(double mean_accepted_length, int k);

// Reads vLLM's --speculative-config JSON. Throws ConfigError naming the JSON key and what is allowed. The
// acceptance is left empty (the engine keys or the defaults fill it: resolve_acceptance).
[[nodiscard]] SpeculativeConfig parse_speculative_config(const std::string& json_text);

// Fills config.acceptance_per_position: the per-position list given (size must be k, each in [0, 1], not growing),
// else a mean acceptance length given, else the method's default. Throws ConfigError naming `key_prefix`'s keys.
void resolve_acceptance(SpeculativeConfig& config,
                        const std::vector<double>& per_position,
                        double mean_accepted_length,
                        std::string_view key_prefix);

// Draws how many of a step's drafts are accepted: one uniform u per verified request, accepted = the number of
// positions i < num_drafts with u < acceptance_per_position[i] (the rates do not grow, so that is a prefix). Its own
// RNG stream ("speculative.acceptance", replica index): the draws depend only on the seed and the replica's steps.
class AcceptanceSampler {
  public:
    AcceptanceSampler(std::vector<double> acceptance_per_position, std::uint64_t seed, std::uint64_t replica_index)
        : rates_(std::move(acceptance_per_position)), rng_(seed, "speculative.acceptance", replica_index) {}

    [[nodiscard]] int sample(int num_drafts) {
        const double u = rng_.uniform01();
        int accepted = 0;
        while (accepted < num_drafts && u < rates_[static_cast<std::size_t>(accepted)]) {
            ++accepted;
        }
        return accepted;
    }

  private:
    std::vector<double> rates_;
    core::RngStream rng_;
};

// vLLM SpecDecodingStats (vllm/v1/spec_decode/metrics.py): drafts verified, draft tokens, accepted tokens, and
// accepted tokens per position.
struct SpeculativeStats {
    std::int64_t num_drafts = 0;
    std::int64_t num_draft_tokens = 0;
    std::int64_t num_accepted_tokens = 0;
    std::vector<std::int64_t> num_accepted_tokens_per_pos;

    void observe(int num_draft_tokens, int num_accepted) {
        ++num_drafts;
        this->num_draft_tokens += num_draft_tokens;
        num_accepted_tokens += num_accepted;
        if (num_accepted_tokens_per_pos.size() < static_cast<std::size_t>(num_draft_tokens)) {
            num_accepted_tokens_per_pos.resize(static_cast<std::size_t>(num_draft_tokens), 0);
        }
        for (int i = 0; i < num_accepted; ++i) {
            ++num_accepted_tokens_per_pos[static_cast<std::size_t>(i)];
        }
    }

    SpeculativeStats& operator+=(const SpeculativeStats& o);
    // accepted / draft tokens; mean acceptance length 1 + accepted / drafts (vLLM's log line); per position
    // accepted_i / drafts. Defined only when num_drafts > 0.
    [[nodiscard]] double acceptance_rate() const;
    [[nodiscard]] double mean_acceptance_length() const;
    [[nodiscard]] std::vector<double> acceptance_per_position() const;
};

// The drafter's time per step around the target's cost model (a decorator, as HostWorkCostModel): adds
// StepCost::spec_draft_ms for a step with verified drafts (BatchShape::num_spec_seqs > 0).
// - draft_model (vllm/v1/spec_decode/draft_model.py DraftModelProposer, the propose loop of SpecDecodeBaseProposer
//   in eagle.py): the draft checkpoint's own forwards, priced by `draft` (the same kind of cost model as the
//   target's, built for the draft's ModelSpec): a first forward over the step's tokens plus one appended token per
//   drafting request (the token the target just sampled), then k − 1 forwards of one token per speculating request;
//   each is the draft's whole forward (layers, all-reduces and lm_head), without its per-step launch overhead.
// - EAGLE/EAGLE-3/MTP (EagleProposer.propose): a first draft forward over the step's tokens (the head computes its
//   own KV for every scheduled token, prefill chunks included), then k − 1 forwards of one token per speculating
//   request; each forward runs draft_layers decoder layers (priced as draft_layers / num_layers of the target's
//   GEMM, attention and all-reduce time for that shape) and the lm_head for one row per speculating request.
// - ngram: ngram_ns_per_context_token of host time per context token of each speculating request.
class SpeculativeCostModel : public CostModel {
  public:
    // `draft`: the draft checkpoint's cost model, required for draft_model and unused otherwise.
    SpeculativeCostModel(std::unique_ptr<CostModel> inner, const SpeculativeConfig& config, int num_target_layers,
                         std::unique_ptr<CostModel> draft = nullptr);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;
    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return inner_->local_attention_spans(); }

    [[nodiscard]] std::vector<StepTerm> step_terms(const BatchShape& shape) const override;

    // The drafter's milliseconds for a step of this shape (0 without speculating requests).
    [[nodiscard]] double draft_ms(const BatchShape& shape) const;

  private:
    [[nodiscard]] double draft_model_ms(const BatchShape& shape) const;

    std::unique_ptr<CostModel> inner_;
    std::unique_ptr<CostModel> draft_;  // draft_model only
    SpeculativeConfig config_;
    int num_target_layers_ = 1;
};

}  // namespace servesim::engine
