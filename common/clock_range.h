// The range every time-like input is checked against before it reaches the simulated clock. SimTime and Duration
// (sim/core/time.h) are int64 nanoseconds, which span ±9.22e9 s (292 years); a duration, a rate's mean gap or a
// step cost read from input is bounded at 1e9 s (31.7 years), so that the sums the simulation forms (warm-up +
// max_time, a send time + a think time + a step) stay far inside int64 and never wrap. docs/INPUT-RANGES.md.
#pragma once

namespace servesim {

inline constexpr double kMaxDurationS = 1e9;

// The smallest rate (requests per second) a reader accepts: a mean gap of 1e6 s (11.6 days), so that even an
// exponential draw 30 means long (probability e^-30) stays inside kMaxDurationS.
inline constexpr double kMinRatePerS = 1e-6;

// The largest rate: one request per nanosecond, the clock's resolution.
inline constexpr double kMaxRatePerS = 1e9;

}  // namespace servesim
