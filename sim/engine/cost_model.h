// CostModel: the duration of one engine step (one model forward over the scheduled batch) as a sum of terms, each
// a function of the batch's natural sizes (DESIGN §4). A pure function of the batch shape and the hardware data:
// no clock, no RNG (Vidur's ExecutionTime). Implementations: RooflineCostModel (datasheet figures, any GPU) and
// ProfileCostModel (curves fitted by calibration on a real GPU).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/clock_range.h"

#include "sim/core/time.h"

namespace servesim::engine {

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
    std::int64_t num_sampled_seqs = 0;       // sequences whose chunk reaches the end: logits computed
    std::int64_t num_snapshots = 0;          // align-mode state snapshot writes
    std::int64_t num_seqs = 0;
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
        return *this;
    }

    [[nodiscard]] double total_ms() const {
        return gemm_ms + lm_head_ms + attn_prefill_ms + attn_decode_ms + gdn_ms + snapshot_ms + overhead_ms + comm_ms;
    }

    // The first term that is NaN, infinite, negative beyond rounding, or whose step passes the simulated clock's
    // range (kMaxDurationS, common/clock_range.h), as "name = value"; empty when the step is usable. A profile
    // coefficient like 1e300 or a NaN gives such a term: it is reported, never floored to 1 ns.
    [[nodiscard]] std::string out_of_range_term() const {
        const std::pair<const char*, double> terms[] = {
            {"gemm", gemm_ms},         {"lm_head", lm_head_ms}, {"attn_prefill", attn_prefill_ms},
            {"attn_decode", attn_decode_ms}, {"gdn", gdn_ms},   {"snapshot", snapshot_ms},
            {"overhead", overhead_ms}, {"comm", comm_ms}};
        for (const auto& [name, ms] : terms) {
            if (!std::isfinite(ms) || ms > kMaxDurationS * 1e3 || ms < -kMaxDurationS * 1e3) {
                return fmt::format("{} = {:g} ms", name, ms);
            }
        }
        const double total = total_ms();
        if (!(total <= kMaxDurationS * 1e3)) {
            return fmt::format("total = {:g} ms", total);
        }
        return {};
    }

    // The one place cost-model milliseconds become simulated time: at least 1 ns so every step advances the clock.
    [[nodiscard]] core::Duration duration() const {
        const core::Duration d = core::Duration::from_ms(total_ms());
        return d.ns() < 1 ? core::Duration::from_ns(1) : d;
    }
};

class CostModel {
public:
    virtual ~CostModel() = default;

    // Precondition: shape.num_tokens > 0. Every term finite and ≥ 0.
    [[nodiscard]] virtual StepCost step_cost(const BatchShape& shape) const = 0;

    [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace servesim::engine
