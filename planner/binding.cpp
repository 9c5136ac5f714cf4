// The binding constraint, headroom and band rounding; see binding.h.
#include "planner/binding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace servesim::planner {

std::string Binding::name(const SloSpec& slo) const {
    switch (kind) {
        case Kind::kSlo:
            return slo.bounds.at(slo_index).name;
        case Kind::kCapacity:
            return "capacity";
        case Kind::kNone:
            return "none";
    }
    return "none";
}

Binding find_binding(const SloSpec& slo, const std::vector<std::optional<double>>& at_answer_ms,
                     const std::optional<FailingReading>& failing) {
    Binding b;
    for (std::size_t i = 0; i < slo.bounds.size(); ++i) {
        const double bound = slo.bounds[i].bound_ms;
        const std::optional<double> v = i < at_answer_ms.size() ? at_answer_ms[i] : std::nullopt;
        b.headroom_pct.push_back(v ? std::optional<double>((bound - *v) / bound * 100.0) : std::nullopt);
    }
    if (!failing) {
        b.kind = Binding::Kind::kNone;
        b.reason = "no probe failed in the searched range";
        return b;
    }
    if (failing->stopped) {
        b.kind = Binding::Kind::kCapacity;
        b.reason = "stopped early: the queue only grew";
        return b;
    }
    // The SLO broken by the largest factor (value / bound); a statistic that was not measured cannot be said to bind.
    std::optional<std::size_t> worst;
    double worst_ratio = 1.0;
    for (std::size_t i = 0; i < slo.bounds.size() && i < failing->slo_values_ms.size(); ++i) {
        const auto& v = failing->slo_values_ms[i];
        if (v && *v / slo.bounds[i].bound_ms > worst_ratio) {
            worst_ratio = *v / slo.bounds[i].bound_ms;
            worst = i;
        }
    }
    if (worst) {
        b.kind = Binding::Kind::kSlo;
        b.slo_index = *worst;
        return b;
    }
    b.kind = Binding::Kind::kCapacity;
    b.reason = failing->other_reason.empty() ? "the server did not keep up" : failing->other_reason;
    return b;
}

namespace {

// The power-of-ten step a value is rounded to.
double band_step(double value, std::optional<double> half_width_pct) {
    const double a = std::abs(value);
    if (half_width_pct && *half_width_pct > 0) {
        return std::pow(10.0, std::floor(std::log10(a * *half_width_pct / 100.0)));
    }
    return std::pow(10.0, std::floor(std::log10(a)) - 1.0);  // two significant digits
}

}  // namespace

double round_to_band(double value, std::optional<double> half_width_pct) {
    if (value == 0 || !std::isfinite(value)) {
        return value;
    }
    const double step = band_step(value, half_width_pct);
    return std::round(value / step) * step;
}

std::string format_to_band(double value, std::optional<double> half_width_pct) {
    if (value == 0 || !std::isfinite(value)) {
        return fmt::format("{}", value);
    }
    const double step = band_step(value, half_width_pct);
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    return fmt::format("{:.{}f}", std::round(value / step) * step, decimals);
}

}  // namespace servesim::planner
