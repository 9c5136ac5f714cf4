// CostModel: the duration of one engine step (one model forward over the scheduled batch) as a sum of terms, each
// a function of the batch's natural sizes (docs/ARCHITECTURE.md, "Step costs"). A pure function of the batch shape and
// the hardware data: no clock, no RNG (Vidur's ExecutionTime). Implementations: RooflineCostModel (datasheet figures,
// any GPU) and ProfileCostModel (curves fitted by calibration on a real GPU).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock_range.h"

#include "sim/core/time.h"

namespace servesim::engine {

// The keys a local-attention layer sees, as vLLM's FlashAttention backend computes them (docs/MODELS.md, "What the
// step cost counts per layer kind"):
// - kSlidingWindow (gemma-2/3, gpt-oss, Mistral): FlashAttentionImpl passes window_size = (sliding_window − 1, 0)
//   (vllm/v1/attention/backends/flash_attn.py), so the query at position i attends to keys max(0, i − W + 1) … i:
//   at most W keys, whatever the context.
// - kChunkedLocal (Llama 4): make_local_attention_virtual_batches (vllm/v1/attention/backends/utils.py) cuts each
//   sequence's queries into virtual sequences, one per attention_chunk_size-aligned chunk, each attending causally
//   to its own chunk's keys only: the query at position i attends to keys ⌊i/C⌋·C … i.
// Work is the continuous form batch_shape uses for full attention (∫ keys(x) dx over the chunk's positions, which is
// n · (computed + n/2) while nothing is capped), so a span longer than every context costs exactly what full
// attention costs.
struct LocalAttentionSpan {
    enum class Kind { kSlidingWindow, kChunkedLocal };
    Kind kind = Kind::kSlidingWindow;
    std::int64_t tokens = 0;  // sliding_window or attention_chunk_size

    bool operator==(const LocalAttentionSpan&) const = default;

    // Σ keys over a prefill chunk of n queries after `computed` tokens: G(computed + n) − G(computed).
    [[nodiscard]] double prefill_work(std::int64_t computed, std::int64_t n) const {
        return integral(static_cast<double>(computed + n)) - integral(static_cast<double>(computed));
    }

    // Keys the chunk's longest attention sequence spans (the span curve's variable): sliding min(end, W + n − 1);
    // chunked, the longest virtual sequence: min(end − ⌊computed/C⌋·C, C).
    [[nodiscard]] std::int64_t prefill_span_tokens(std::int64_t computed, std::int64_t n) const {
        const std::int64_t end = computed + n;
        if (kind == Kind::kSlidingWindow) {
            return std::min(end, tokens + n - 1);
        }
        return std::min(end - computed / tokens * tokens, tokens);
    }

    // KV tokens a decode at `context` tokens (its new token included) reads: min(context, W); chunked, the
    // virtual sequence of its own chunk, (context − 1) mod C + 1.
    [[nodiscard]] std::int64_t decode_keys(std::int64_t context) const {
        if (kind == Kind::kSlidingWindow) {
            return std::min(context, tokens);
        }
        return context <= 0 ? 0 : (context - 1) % tokens + 1;
    }

private:
    // G(x) = ∫₀ˣ keys(t) dt with keys(t) = min(t, W), or t mod C.
    [[nodiscard]] double integral(double x) const {
        const double w = static_cast<double>(tokens);
        if (kind == Kind::kSlidingWindow) {
            return x <= w ? x * x / 2.0 : w * w / 2.0 + w * (x - w);
        }
        const double whole = std::floor(x / w);
        const double rest = x - whole * w;
        return whole * w * w / 2.0 + rest * rest / 2.0;
    }
};

// The distinct local spans of a model's attention layers (gemma-2: one 4,096 window; Llama 4: one 8,192 chunk),
// in the order of their first layer. A cost model names them; the replica computes each one's work per step.
inline constexpr int kMaxLocalAttentionSpans = 4;
struct LocalAttentionSpans {
    std::array<LocalAttentionSpan, kMaxLocalAttentionSpans> spans{};
    int count = 0;
};

// One local span's share of a step: what the full-attention fields of BatchShape hold, with keys capped.
struct LocalAttentionWork {
    double prefill_attention_work = 0;            // Σ LocalAttentionSpan::prefill_work over prefill chunks
    std::int64_t prefill_max_context_tokens = 0;  // max LocalAttentionSpan::prefill_span_tokens
    std::int64_t decode_context_tokens = 0;       // Σ LocalAttentionSpan::decode_keys over decodes
};

// The model's attention layers split by the keys they see: full_layers at the whole context, local_layers[i] at
// local.spans[i]. The profile cost model weights its curves (measured per layer × number of attention layers) by
// these shares.
struct AttentionLayerGroups {
    int full_layers = 0;
    LocalAttentionSpans local;
    std::array<int, kMaxLocalAttentionSpans> local_layers{};
};

// The batch of one step, reduced to what costs depend on.
struct BatchShape {
    std::int64_t num_tokens = 0;             // all scheduled tokens (prefill chunks + decodes)
    std::int64_t num_prefill_tokens = 0;     // tokens of chunks that are not single-token decodes
    std::int64_t num_prefill_seqs = 0;
    double prefill_attention_work = 0;       // Σ chunk · (cached context + chunk / 2)
    std::int64_t prefill_max_context_tokens = 0;  // max over prefill chunks of cached context + chunk (span)
    std::int64_t num_gdn_chunks = 0;         // Σ over prefill chunks of cdiv(chunk, 64)
    std::int64_t num_decode_seqs = 0;
    std::int64_t decode_context_tokens = 0;  // Σ context of decoding sequences (attention reads)
    std::int64_t num_sampled_seqs = 0;       // logit rows: one per sequence whose chunk reaches the end, plus one
                                             // per draft token verified (speculative decoding)
    std::int64_t num_snapshots = 0;          // vLLM align / all mode state copies (priced by the replica:
    std::int64_t num_snapshot_extra_chunks = 0;  // StateSnapshotCost), and the scan chunks all mode's cuts add
    std::int64_t num_seqs = 0;
    // Speculative decoding (sim/engine/speculative.h): decoding sequences verifying drafts this step (each counted
    // in num_decode_seqs with 1 + drafts query tokens in num_tokens), their draft tokens, and Σ their context.
    std::int64_t num_spec_seqs = 0;
    std::int64_t num_draft_tokens = 0;
    std::int64_t spec_context_tokens = 0;
    // Host work (sim/engine/host_work.h): requests entering the persistent batch this step (admitted from the waiting
    // queue: new or resumed), requests the previous step finished (their freeing and removal run in this step's
    // cycle), and whether the step was scheduled while the previous one ran (async scheduling: its host work
    // overlaps the GPU).
    std::int64_t num_new_seqs = 0;
    std::int64_t num_finished_seqs = 0;
    bool host_overlapped = false;
    // Per local span the cost model names (CostModel::local_attention_spans, same order); unused entries stay 0.
    // num_local_spans: how many entries batch_shape filled. A shape that does not carry its model's spans (built
    // without them) has its local layers costed at the full context, the upper bound, instead of at zero keys.
    std::array<LocalAttentionWork, kMaxLocalAttentionSpans> local{};
    int num_local_spans = 0;
};

// Milliseconds per term, so a step's time can be attributed.
struct StepCost {
    double gemm_ms = 0;
    double lm_head_ms = 0;
    double attn_prefill_ms = 0;
    double attn_decode_ms = 0;
    double gdn_ms = 0;
    double snapshot_ms = 0;
    double overhead_ms = 0;
    double comm_ms = 0;  // tensor-parallel all-reduces
    double host_ms = 0;  // host work the GPU does not hide (HostWorkCostModel, sim/engine/host_work.h)
    double spec_draft_ms = 0;  // the speculative drafter (SpeculativeCostModel, sim/engine/speculative.h)
    double jit_ms = 0;         // Triton compiles the step waits for (FusedMoeJit, sim/engine/fused_moe_jit.h)

    // Accumulates a step's terms (the per-term totals a run reports).
    StepCost& operator+=(const StepCost& o) {
        gemm_ms += o.gemm_ms;
        lm_head_ms += o.lm_head_ms;
        attn_prefill_ms += o.attn_prefill_ms;
        attn_decode_ms += o.attn_decode_ms;
        gdn_ms += o.gdn_ms;
        snapshot_ms += o.snapshot_ms;
        overhead_ms += o.overhead_ms;
        comm_ms += o.comm_ms;
        host_ms += o.host_ms;
        spec_draft_ms += o.spec_draft_ms;
        jit_ms += o.jit_ms;
        return *this;
    }

    [[nodiscard]] double total_ms() const {
        return gemm_ms + lm_head_ms + attn_prefill_ms + attn_decode_ms + gdn_ms + snapshot_ms + overhead_ms + comm_ms +
               host_ms + spec_draft_ms + jit_ms;
    }

    // Whether out_of_range_term() is empty, without building its table of names: every step asks, and only a
    // failing step needs the message.
    [[nodiscard]] bool all_in_range() const {
        for (const double ms : {gemm_ms, lm_head_ms, attn_prefill_ms, attn_decode_ms, gdn_ms, snapshot_ms,
                                overhead_ms, comm_ms, host_ms, spec_draft_ms, jit_ms}) {
            if (!term_in_range(ms)) {
                return false;
            }
        }
        return total_in_range(total_ms());
    }

    // The first term that is NaN, infinite, negative beyond rounding, or whose step passes the simulated clock's
    // range (kMaxDurationS, common/clock_range.h), as "name = value"; empty when the step is usable. A profile
    // coefficient like 1e300 or a NaN gives such a term: it is reported, never floored to 1 ns.
    [[nodiscard]] std::string out_of_range_term() const {
        const std::pair<const char*, double> terms[] = {
            {"gemm", gemm_ms},         {"lm_head", lm_head_ms}, {"attn_prefill", attn_prefill_ms},
            {"attn_decode", attn_decode_ms}, {"gdn", gdn_ms},   {"snapshot", snapshot_ms},
            {"overhead", overhead_ms}, {"comm", comm_ms},         {"host", host_ms},
            {"spec_draft", spec_draft_ms}, {"jit", jit_ms}};
        for (const auto& [name, ms] : terms) {
            if (!term_in_range(ms)) {
                return fmt::format("{} = {:g} ms", name, ms);
            }
        }
        const double total = total_ms();
        if (!total_in_range(total)) {
            return fmt::format("total = {:g} ms", total);
        }
        return {};
    }

    // The tests of all_in_range and out_of_range_term: a term is finite and within ±kMaxDurationS (a NaN fails both
    // bounds), the total at most kMaxDurationS.
    [[nodiscard]] static bool term_in_range(double ms) {
        return ms >= -kMaxDurationS * 1e3 && ms <= kMaxDurationS * 1e3;
    }
    [[nodiscard]] static bool total_in_range(double ms) { return ms <= kMaxDurationS * 1e3; }

    // The one place cost-model milliseconds become simulated time: at least 1 ns so every step advances the clock.
    [[nodiscard]] core::Duration duration() const {
        const core::Duration d = core::Duration::from_ms(total_ms());
        return d.ns() < 1 ? core::Duration::from_ns(1) : d;
    }
};

// One named term of a step, for `servesim inspect --step-costs` (where a step's time goes): its milliseconds and
// where the figure comes from ("table", "roofline", ...).
struct StepTerm {
    std::string name;
    double ms = 0;
    std::string source;
};

class CostModel {
public:
    virtual ~CostModel() = default;

    // Precondition: shape.num_tokens > 0. Every term finite and ≥ 0.
    [[nodiscard]] virtual StepCost step_cost(const BatchShape& shape) const = 0;

    [[nodiscard]] virtual std::string describe() const = 0;

    // The local attention spans whose capped work step_cost reads from BatchShape::local (none by default: every
    // attention layer at the full context).
    [[nodiscard]] virtual LocalAttentionSpans local_attention_spans() const { return {}; }

    // The step's cost term by term (not on the simulation's path). By default StepCost's terms; a cost model that
    // composes finer terms (MeasuredCostModel: GEMMs by projection, MoE, elementwise, sampling) lists those, summing
    // to step_cost(shape).total_ms().
    [[nodiscard]] virtual std::vector<StepTerm> step_terms(const BatchShape& shape) const {
        const StepCost c = step_cost(shape);
        return {{"gemm", c.gemm_ms, ""},           {"lm_head", c.lm_head_ms, ""},
                {"attn_prefill", c.attn_prefill_ms, ""}, {"attn_decode", c.attn_decode_ms, ""},
                {"gdn", c.gdn_ms, ""},             {"snapshot", c.snapshot_ms, ""},
                {"comm", c.comm_ms, ""},           {"overhead", c.overhead_ms, ""}};
    }
};

}  // namespace servesim::engine
