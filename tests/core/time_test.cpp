// Tests sim/core/time.h at the clock's edges: seconds that do not fit int64 nanoseconds (≥ 9.22e9 s) or NaN are a
// reported bug (InvariantError), never a wrapped clock; a random gap beyond the input bound (common/clock_range.h)
// is capped to it.
#include "sim/core/time.h"

#include <cmath>
#include <limits>

#include "common/error.h"
#include "tests/catch.h"

namespace core = servesim::core;

TEST_CASE("Seconds beyond int64 nanoseconds or NaN are refused, not wrapped", "[core][time]") {
    CHECK_THROWS_AS(core::Duration::from_s(1e10), servesim::InvariantError);  // 1e19 ns > 2^63 ≈ 9.22e18
    CHECK_THROWS_AS(core::SimTime::from_s(-1e10), servesim::InvariantError);
    CHECK_THROWS_AS(core::Duration::from_ms(std::nan("")), servesim::InvariantError);
    CHECK_THROWS_AS(core::Duration::from_us(std::numeric_limits<double>::infinity()), servesim::InvariantError);
    // 9e9 s = 9e18 ns still fits (2^63 − 1 ≈ 9.223e18).
    CHECK(core::Duration::from_s(9e9).ns() == 9'000'000'000'000'000'000);
}

TEST_CASE("A random gap beyond the input bound is capped at 1e9 s", "[core][time]") {
    CHECK(core::Duration::from_s_capped(1e300).ns() == 1'000'000'000'000'000'000);
    CHECK(core::Duration::from_s_capped(2.5).ns() == 2'500'000'000);
    CHECK_THROWS_AS(core::Duration::from_s_capped(std::nan("")), servesim::InvariantError);
}
