// Parsing and checking SLOs; see slo.h.
#include "planner/slo.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include "common/error.h"

namespace servesim::planner {

namespace {

constexpr std::array<std::pair<std::string_view, SloMetric>, 5> kMetrics{{{"ttft", SloMetric::kTtft},
                                                                           {"tpot", SloMetric::kTpot},
                                                                           {"itl", SloMetric::kItl},
                                                                           {"e2el", SloMetric::kE2el},
                                                                           {"queue", SloMetric::kQueue}}};

constexpr std::array<std::pair<std::string_view, SloStatistic>, 5> kStatistics{{{"mean", SloStatistic::kMean},
                                                                                 {"p50", SloStatistic::kP50},
                                                                                 {"p90", SloStatistic::kP90},
                                                                                 {"p99", SloStatistic::kP99},
                                                                                 {"max", SloStatistic::kMax}}};

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// "500ms", "0.5s", "500" (ms) → milliseconds; nullopt when malformed.
std::optional<double> parse_bound_ms(std::string_view text) {
    double scale = 1.0;
    if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
        text.remove_suffix(2);
    } else if (text.size() > 1 && text.back() == 's') {
        text.remove_suffix(1);
        scale = 1000.0;
    }
    text = trim(text);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
        return std::nullopt;
    }
    return v * scale;
}

const metrics::Distribution& distribution(const metrics::Summary& s, SloMetric m) {
    switch (m) {
        case SloMetric::kTtft:
            return s.ttft_ms;
        case SloMetric::kTpot:
            return s.tpot_ms;
        case SloMetric::kItl:
            return s.itl_ms;
        case SloMetric::kE2el:
            return s.e2e_ms;
        case SloMetric::kQueue:
            return s.queue_ms;
    }
    return s.ttft_ms;
}

}  // namespace

std::string slo_names_help() {
    std::string metrics_list;
    for (const auto& [name, m] : kMetrics) {
        metrics_list += (metrics_list.empty() ? "" : ", ") + std::string(name);
    }
    std::string stats_list;
    for (const auto& [name, st] : kStatistics) {
        stats_list += (stats_list.empty() ? "" : ", ") + std::string(name);
    }
    return fmt::format("<metric>_<statistic>=<bound> with metric one of {} and statistic one of {}; bound in ms or "
                       "s (e.g. ttft_p99=500ms,itl_p99=50ms)",
                       metrics_list, stats_list);
}

std::string SloSpec::describe() const {
    std::string out;
    for (const auto& b : bounds) {
        out += fmt::format("{}{} ≤ {} ms", out.empty() ? "" : ", ", b.name, b.bound_ms);
    }
    return out;
}

SloSpec parse_slo(std::string_view text, std::string_view where) {
    SloSpec spec;
    auto fail = [&](const std::string& what) {
        throw ConfigError(fmt::format("{}: {}; allowed: {}", where, what, slo_names_help()));
    };
    std::string_view rest = text;
    while (true) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        if (!item.empty()) {
            const std::size_t eq = item.find('=');
            if (eq == std::string_view::npos) {
                fail(fmt::format("'{}' has no '=' bound", item));
            }
            const std::string_view name = trim(item.substr(0, eq));
            const std::string_view value = trim(item.substr(eq + 1));
            const std::size_t us = name.rfind('_');
            if (us == std::string_view::npos) {
                fail(fmt::format("'{}' is not <metric>_<statistic>", name));
            }
            SloBound b;
            b.name = std::string(name);
            bool metric_found = false;
            for (const auto& [mname, m] : kMetrics) {
                if (name.substr(0, us) == mname) {
                    b.metric = m;
                    metric_found = true;
                }
            }
            if (!metric_found) {
                fail(fmt::format("unknown metric '{}' in '{}'", name.substr(0, us), name));
            }
            bool stat_found = false;
            for (const auto& [sname, st] : kStatistics) {
                if (name.substr(us + 1) == sname) {
                    b.statistic = st;
                    stat_found = true;
                }
            }
            if (!stat_found) {
                fail(fmt::format("unknown statistic '{}' in '{}'", name.substr(us + 1), name));
            }
            const auto bound = parse_bound_ms(value);
            if (!bound) {
                fail(fmt::format("'{}' is not a duration for {}", value, name));
            }
            if (!(*bound > 0)) {
                fail(fmt::format("{}: the bound must be positive, got '{}'", name, value));
            }
            b.bound_ms = *bound;
            for (const auto& other : spec.bounds) {
                if (other.name == b.name) {
                    fail(fmt::format("'{}' is given twice", b.name));
                }
            }
            spec.bounds.push_back(b);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(comma + 1);
    }
    if (spec.bounds.empty()) {
        fail("no bound given");
    }
    return spec;
}

std::optional<double> slo_value(const metrics::Summary& s, SloMetric metric, SloStatistic statistic) {
    const metrics::Distribution& d = distribution(s, metric);
    if (d.count == 0) {
        return std::nullopt;
    }
    switch (statistic) {
        case SloStatistic::kMean:
            return d.mean;
        case SloStatistic::kP50:
            return d.p50;
        case SloStatistic::kP90:
            return d.p90;
        case SloStatistic::kP99:
            return d.p99;
        case SloStatistic::kMax:
            return d.max;
    }
    return std::nullopt;
}

SloVerdict check_slo(const SloSpec& slo, const metrics::Summary& s) {
    SloVerdict v;
    for (const auto& b : slo.bounds) {
        const auto value = slo_value(s, b.metric, b.statistic);
        if (!value) {
            v.met = false;
            v.violations.push_back(b.name + " not measured");
        } else if (*value > b.bound_ms) {
            v.met = false;
            v.violations.push_back(fmt::format("{} {:.1f} ms > {} ms", b.name, *value, b.bound_ms));
        }
    }
    return v;
}

}  // namespace servesim::planner
