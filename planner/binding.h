// What limits a capacity answer, and how precisely it can be stated (docs/PLANNER.md "What binds, and how sure").
// The binding constraint is read off the nearest failing probe beside the answer: the SLO it broke by the largest
// factor, or — when every SLO held there — the server's capacity (its queue grew, its clients were held back, the run
// was overloaded or stopped early). The headroom on each SLO is measured at the answer. Figures are rounded to the
// step the time model's validated error band supports (docs/VALIDATION.md), or to two significant digits with the
// band "not validated" when no real run backs the model on that GPU.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "planner/slo.h"

namespace servesim::planner {

struct Binding {
    enum class Kind {
        kSlo,       // an SLO failed first: slo_index names it
        kCapacity,  // every SLO held at the failing probe; the server did not keep up (reason says how)
        kNone,      // no probe failed in the searched range
    };
    Kind kind = Kind::kNone;
    std::size_t slo_index = 0;
    std::string reason;  // for kCapacity: the failing probe's first reason; for kNone: why there is none
    // (bound − value at the answer) / bound × 100 per SLO bound, in --slo order; nullopt where the answer measured
    // no value (a distribution without samples).
    std::vector<std::optional<double>> headroom_pct;

    // "tpot_p99", "capacity", "none".
    [[nodiscard]] std::string name(const SloSpec& slo) const;
};

// What the nearest failing probe beside an answer showed (absent when no probe failed).
struct FailingReading {
    bool stopped = false;  // stopped early: its latencies are not those of the load (none is read)
    // Worst replicate's value of each SLO statistic, in --slo order; nullopt where it measured none.
    std::vector<std::optional<double>> slo_values_ms;
    std::string other_reason;  // its first reason that is not an SLO bound ("sent 5.1 of 8 req/s: …"); may be empty
};

// `at_answer_ms`: each SLO statistic at the answer (worst replicate), in --slo order.
[[nodiscard]] Binding find_binding(const SloSpec& slo, const std::vector<std::optional<double>>& at_answer_ms,
                                   const std::optional<FailingReading>& failing);

// `value` rounded to a power-of-ten step no larger than half_width_pct % of |value| (the largest such step): 17.3
// with ±10.3 % → step 1 → 17; 0.01894 → step 0.001 → 0.019. Without a band (nullopt): two significant digits.
// 0 stays 0.
[[nodiscard]] double round_to_band(double value, std::optional<double> half_width_pct);

// The same, as text with exactly the digits the step keeps ("17", "1.7", "0.019", "1,200" is written "1200").
[[nodiscard]] std::string format_to_band(double value, std::optional<double> half_width_pct);

}  // namespace servesim::planner
