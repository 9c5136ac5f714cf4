// ThresholdSearch: the boundary of a monotone pass/fail question, found by bracketing then bisection
// (docs/PLANNER.md). "The largest request rate at which the SLOs hold" passes below its answer; "the fewest
// replicas that hold the SLOs at the target rate" passes above its answer. The search is a state machine — it
// proposes the next value to probe and is told the outcome — so a caller can advance many searches in lockstep,
// run their probes in one parallel batch, and get the same answers whatever the thread count.
//
// A probe's outcome is how many of its replicates (seeds) passed. A value passes only when every replicate does;
// a value where some but not all passed is *split*: there the outcome depends on the seed (near a capacity cliff
// it flips), and the answer is reported with the range the split values span, never as one unqualified number.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesim::planner {

enum class PassSide { kBelow, kAbove };  // values below (above) the answer pass

struct ThresholdSearchOptions {
    PassSide pass_side = PassSide::kBelow;
    double start = 1;      // first probe
    double min_value = 0;  // the search never probes outside [min_value, max_value]
    double max_value = 0;
    double rel_tolerance = 0.02;  // stop when the bracket (hi − lo) ≤ rel_tolerance × lo (real values)
    bool integer = false;         // integer values (replicas, tenants): stop when the bracket is 1 apart
    int max_probes = 40;
};

struct Probe {
    double value = 0;
    int passed = 0;
    int replicates = 0;
    [[nodiscard]] bool all_passed() const { return passed == replicates; }
    [[nodiscard]] bool split() const { return passed > 0 && passed < replicates; }
};

struct ThresholdAnswer {
    enum class Kind {
        kFound,          // best is the boundary value within the tolerance
        kNoneFeasible,   // even the most favourable value in range fails (best unset)
        kRangeFeasible,  // the least favourable value in range still passes: the answer is beyond the range
        kProbeLimit,     // max_probes reached before the bracket closed
    };
    Kind kind = Kind::kFound;
    // The most demanding value at which every replicate passed: the largest for kBelow, the smallest for kAbove.
    std::optional<double> best;
    // The nearest value beyond `best` at which some replicate failed.
    std::optional<double> first_failing;
    // Values at which the replicates disagreed (the outcome depends on the seed there), in probe order.
    std::vector<double> split_values;
    [[nodiscard]] bool seed_dependent() const { return !split_values.empty(); }
};

class ThresholdSearch {
public:
    explicit ThresholdSearch(const ThresholdSearchOptions& options);  // ConfigError for an empty or inverted range

    // The next value to probe; nullopt once the search is over.
    [[nodiscard]] std::optional<double> next() const;

    // The outcome of probing `value` (normally the value next() proposed).
    void record(double value, int passed, int replicates);

    [[nodiscard]] ThresholdAnswer answer() const;

    [[nodiscard]] const std::vector<Probe>& probes() const { return probes_; }

private:
    [[nodiscard]] bool converged() const;
    [[nodiscard]] double clamp(double v) const;

    ThresholdSearchOptions options_;
    std::vector<Probe> probes_;
    std::optional<double> pass_;  // most demanding value seen to pass (all replicates)
    std::optional<double> fail_;  // least demanding value seen to fail (any replicate)
};

}  // namespace servesim::planner
