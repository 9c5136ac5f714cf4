// Bracketing and bisection; see threshold_search.h.
#include "planner/threshold_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace servesim::planner {

ThresholdSearch::ThresholdSearch(const ThresholdSearchOptions& options) : options_(options) {
    if (!(options_.min_value <= options_.max_value) || !std::isfinite(options_.min_value) ||
        !std::isfinite(options_.max_value)) {
        throw ConfigError(fmt::format("search range [{}, {}] is empty", options_.min_value, options_.max_value));
    }
    if (!(options_.rel_tolerance > 0) || options_.max_probes < 1) {
        throw ConfigError("search tolerance must be positive and at least one probe allowed");
    }
    options_.start = clamp(options_.start);
}

double ThresholdSearch::clamp(double v) const {
    if (options_.integer) {
        v = std::round(v);
    }
    return std::clamp(v, options_.min_value, options_.max_value);
}

bool ThresholdSearch::converged() const {
    if (!pass_ || !fail_) {
        return false;
    }
    const double gap = std::fabs(*fail_ - *pass_);
    if (options_.integer) {
        return gap <= 1.0;
    }
    return gap <= options_.rel_tolerance * std::max(std::fabs(*pass_), 1e-12);
}

std::optional<double> ThresholdSearch::next() const {
    if (probes_.empty()) {
        return options_.start;
    }
    if (static_cast<int>(probes_.size()) >= options_.max_probes || converged()) {
        return std::nullopt;
    }
    const bool below = options_.pass_side == PassSide::kBelow;
    if (pass_ && fail_) {
        const double mid = options_.integer ? std::floor((*pass_ + *fail_) / 2.0) : (*pass_ + *fail_) / 2.0;
        return mid;
    }
    if (pass_) {
        // Everything probed passes: move towards the demanding end (double for kBelow, halve for kAbove).
        const double edge = below ? options_.max_value : options_.min_value;
        if (*pass_ == edge) {
            return std::nullopt;
        }
        return clamp(below ? *pass_ * 2.0 : *pass_ / 2.0);
    }
    // Everything probed fails: move towards the favourable end.
    const double edge = below ? options_.min_value : options_.max_value;
    if (*fail_ == edge) {
        return std::nullopt;
    }
    return clamp(below ? *fail_ / 2.0 : *fail_ * 2.0);
}

void ThresholdSearch::record(double value, int passed, int replicates) {
    probes_.push_back(Probe{value, passed, replicates});
    const bool below = options_.pass_side == PassSide::kBelow;
    // "More demanding" is larger for kBelow (rates), smaller for kAbove (replicas).
    auto more_demanding = [&](double a, double b) { return below ? a > b : a < b; };
    if (passed == replicates) {
        if (!pass_ || more_demanding(value, *pass_)) {
            pass_ = value;
        }
    } else {
        if (!fail_ || more_demanding(*fail_, value)) {
            fail_ = value;
        }
    }
}

ThresholdAnswer ThresholdSearch::answer() const {
    ThresholdAnswer a;
    a.best = pass_;
    a.first_failing = fail_;
    for (const auto& p : probes_) {
        if (p.split()) {
            a.split_values.push_back(p.value);
        }
    }
    const bool below = options_.pass_side == PassSide::kBelow;
    if (!pass_) {
        a.kind = ThresholdAnswer::Kind::kNoneFeasible;
    } else if (!fail_ && *pass_ == (below ? options_.max_value : options_.min_value)) {
        a.kind = ThresholdAnswer::Kind::kRangeFeasible;
    } else if (converged()) {
        a.kind = ThresholdAnswer::Kind::kFound;
    } else {
        a.kind = ThresholdAnswer::Kind::kProbeLimit;
    }
    return a;
}

}  // namespace servesim::planner
