// Tests of planner/threshold_search.*: bracketing then bisection on hand-worked monotone questions, integer
// searches, the range edges, and probes whose replicates disagree.
#include "planner/threshold_search.h"

#include <functional>
#include <vector>

#include "tests/catch.h"

namespace servesim::planner {
namespace {

// Drives a search to the end with `passes(value)` replicates passing out of `replicates`.
ThresholdAnswer drive(ThresholdSearch& s, const std::function<int(double)>& passes, int replicates = 1) {
    while (const auto v = s.next()) {
        s.record(*v, passes(*v), replicates);
    }
    return s.answer();
}

std::vector<double> values(const ThresholdSearch& s) {
    std::vector<double> out;
    for (const auto& p : s.probes()) {
        out.push_back(p.value);
    }
    return out;
}

TEST_CASE("Threshold search: the largest passing rate of a known threshold, by doubling then bisection",
          "[planner][search]") {
    // Passes iff rate ≤ 13. Start 2: 2, 4, 8, 16 (fails) bracket [8, 16]; bisect 12 ✓, 14 ✗, 13 ✓, 13.5 ✗,
    // 13.25 ✗, 13.125 ✗ → bracket [13, 13.125]: 0.125 ≤ 0.01 × 13 = 0.13, stop.
    ThresholdSearchOptions o;
    o.start = 2;
    o.min_value = 0.5;
    o.max_value = 1000;
    o.rel_tolerance = 0.01;
    ThresholdSearch s(o);
    const ThresholdAnswer a = drive(s, [](double r) { return r <= 13 ? 1 : 0; });
    CHECK(values(s) == std::vector<double>{2, 4, 8, 16, 12, 14, 13, 13.5, 13.25, 13.125});
    CHECK(a.kind == ThresholdAnswer::Kind::kFound);
    CHECK(*a.best == 13);
    CHECK(*a.first_failing == 13.125);
    CHECK_FALSE(a.seed_dependent());
}

TEST_CASE("Threshold search: the fewest replicas (passing above), integer", "[planner][search]") {
    // Passes iff replicas ≥ 5, range [1, 64], start 1: 1 ✗, 2 ✗, 4 ✗, 8 ✓ → bracket (4, 8]: 6 ✓, 5 ✓ → 4 and 5
    // are 1 apart, stop. Answer 5.
    ThresholdSearchOptions o;
    o.pass_side = PassSide::kAbove;
    o.start = 1;
    o.min_value = 1;
    o.max_value = 64;
    o.integer = true;
    ThresholdSearch s(o);
    const ThresholdAnswer a = drive(s, [](double r) { return r >= 5 ? 1 : 0; });
    CHECK(values(s) == std::vector<double>{1, 2, 4, 8, 6, 5});
    CHECK(*a.best == 5);
    CHECK(*a.first_failing == 4);
    CHECK(a.kind == ThresholdAnswer::Kind::kFound);
}

TEST_CASE("Threshold search: nothing feasible, or everything in range feasible, is said so", "[planner][search]") {
    ThresholdSearchOptions o;
    o.start = 4;
    o.min_value = 1;
    o.max_value = 16;
    ThresholdSearch none(o);
    const ThresholdAnswer n = drive(none, [](double) { return 0; });
    CHECK(values(none) == std::vector<double>{4, 2, 1});  // halves down to the floor of the range, then stops
    CHECK(n.kind == ThresholdAnswer::Kind::kNoneFeasible);
    CHECK_FALSE(n.best.has_value());
    ThresholdSearch all(o);
    const ThresholdAnswer e = drive(all, [](double) { return 1; });
    CHECK(values(all) == std::vector<double>{4, 8, 16});  // doubles up to the top of the range
    CHECK(e.kind == ThresholdAnswer::Kind::kRangeFeasible);
    CHECK(*e.best == 16);
}

TEST_CASE("Threshold search: a value where replicates disagree fails the search and is reported as seed-dependent",
          "[planner][search]") {
    // 3 replicates; all pass below 10, 2 of 3 pass in [10, 12), none from 12. Start 8: 8 ✓, 16 ✗ (0/3), 12 ✗
    // (0/3), 10 split (2/3 → fails), 9 ✓, 9.5 ✓ → [9.5, 10]: 0.5 ≤ 0.1 × 9.5, stop.
    ThresholdSearchOptions o;
    o.start = 8;
    o.min_value = 1;
    o.max_value = 100;
    o.rel_tolerance = 0.1;
    ThresholdSearch s(o);
    const ThresholdAnswer a = drive(
        s, [](double r) { return r < 10 ? 3 : (r < 12 ? 2 : 0); }, 3);
    CHECK(values(s) == std::vector<double>{8, 16, 12, 10, 9, 9.5});
    CHECK(*a.best == 9.5);
    CHECK(*a.first_failing == 10);
    REQUIRE(a.seed_dependent());
    CHECK(a.split_values == std::vector<double>{10});
}

TEST_CASE("Threshold search: the probe limit ends an unclosed bracket and says so", "[planner][search]") {
    ThresholdSearchOptions o;
    o.start = 1;
    o.min_value = 0.001;
    o.max_value = 1e6;
    o.rel_tolerance = 1e-9;
    o.max_probes = 5;
    ThresholdSearch s(o);
    const ThresholdAnswer a = drive(s, [](double r) { return r <= 3 ? 1 : 0; });
    CHECK(values(s) == std::vector<double>{1, 2, 4, 3, 3.5});
    CHECK(a.kind == ThresholdAnswer::Kind::kProbeLimit);
    CHECK(*a.best == 3);
}

}  // namespace
}  // namespace servesim::planner
