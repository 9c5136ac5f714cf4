// Simulated time: SimTime (a point) and Duration (a span), strong types over int64 nanoseconds (ns-3's Time without
// a global resolution). Made only through named constructors, read through .ms()/.s(). Cost-model seconds become
// nanoseconds in exactly one place (Duration::from_s), with a 1 ns floor for step times (see engine/cost_model.h).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

namespace servesim::core {

class Duration {
public:
    constexpr Duration() = default;

    static constexpr Duration from_ns(std::int64_t ns) { return Duration(ns); }

    static Duration from_s(double s) { return Duration(static_cast<std::int64_t>(std::llround(s * 1e9))); }

    static Duration from_ms(double ms) { return Duration(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

    static Duration from_us(double us) { return Duration(static_cast<std::int64_t>(std::llround(us * 1e3))); }

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

    static SimTime from_s(double s) { return SimTime(static_cast<std::int64_t>(std::llround(s * 1e9))); }

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
