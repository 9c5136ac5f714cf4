// Simulated time: SimTime (a point) and Duration (a span), strong types over int64 nanoseconds (ns-3's Time without
// a global resolution). Made only through named constructors, read through .ms()/.s(). Cost-model seconds become
// nanoseconds in exactly one place (Duration::from_s), with a 1 ns floor for step times (see engine/cost_model.h).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

#include "common/clock_range.h"
#include "common/error.h"

namespace servesim::core {

namespace detail {

// Seconds → int64 nanoseconds. Input is range-checked where it is read (common/clock_range.h); a NaN or a value
// whose nanoseconds do not fit int64 reaching here is a bug, reported instead of wrapping (llround's result is
// unspecified there).
inline std::int64_t checked_ns(double s, double scale) {
    const double ns = s * scale;
    SERVESIM_CHECK(std::fabs(ns) < 9.2e18, "time {} (x {} ns) is NaN or beyond int64 nanoseconds", s, scale);
    return static_cast<std::int64_t>(std::llround(ns));
}

}  // namespace detail

class Duration {
public:
    constexpr Duration() = default;

    static constexpr Duration from_ns(std::int64_t ns) { return Duration(ns); }

    static Duration from_s(double s) { return Duration(detail::checked_ns(s, 1e9)); }

    static Duration from_ms(double ms) { return Duration(detail::checked_ns(ms, 1e6)); }

    static Duration from_us(double us) { return Duration(detail::checked_ns(us, 1e3)); }

    // A random gap (an arrival draw, a sleep): one beyond kMaxDurationS is kMaxDurationS, i.e. past any run's end
    // (max_time is at most kMaxDurationS too), so "never within this run" instead of a wrapped clock.
    static Duration from_s_capped(double s) {
        return Duration(detail::checked_ns(std::isnan(s) || s < kMaxDurationS ? s : kMaxDurationS, 1e9));
    }

    constexpr std::int64_t ns() const { return ns_; }

    constexpr double s() const { return static_cast<double>(ns_) * 1e-9; }

    constexpr double ms() const { return static_cast<double>(ns_) * 1e-6; }

    constexpr auto operator<=>(const Duration&) const = default;

    constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }

    constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }

    constexpr Duration& operator+=(Duration o) {
        ns_ += o.ns_;
        return *this;
    }

private:
    constexpr explicit Duration(std::int64_t ns) : ns_(ns) {}

    std::int64_t ns_ = 0;
};

class SimTime {
public:
    constexpr SimTime() = default;

    static constexpr SimTime zero() { return SimTime(); }

    static constexpr SimTime from_ns(std::int64_t ns) { return SimTime(ns); }

    static SimTime from_s(double s) { return SimTime(detail::checked_ns(s, 1e9)); }

    constexpr std::int64_t ns() const { return ns_; }

    constexpr double s() const { return static_cast<double>(ns_) * 1e-9; }

    constexpr double ms() const { return static_cast<double>(ns_) * 1e-6; }

    constexpr auto operator<=>(const SimTime&) const = default;

    constexpr SimTime operator+(Duration d) const { return SimTime(ns_ + d.ns()); }

    constexpr Duration operator-(SimTime o) const { return Duration::from_ns(ns_ - o.ns_); }

private:
    constexpr explicit SimTime(std::int64_t ns) : ns_(ns) {}

    std::int64_t ns_ = 0;
};

}  // namespace servesim::core
