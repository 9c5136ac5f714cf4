// --experiment NAME (issue 39): run one experiment of a scenario, or, in a sweep, every point of one entry; a name
// the scenario lacks is refused listing the names it has.
#include <algorithm>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

using servesim::test::contains;

TEST_CASE("CLI: --experiment runs the named experiment only", "[tools][cli][experiment]") {
    // The quickstart has two experiments, Qwen3-4B and Qwen3.5-4B, each swept over 5 rates (issue 39): the name
    // keeps all 5 points of one.
    const auto r = servesim::test::run_servesim("run scenarios/quickstart.yaml --experiment Qwen3.5-4B --format csv",
                                                "", false);
    REQUIRE(r.status == 0);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 6);  // header and 5 rows
    for (const char* rate : {"10", "30", "50", "70", "90"}) {
        CHECK(contains(r.output, std::string("\nQwen3.5-4B rate=") + rate + ","));
    }
    CHECK(!contains(r.output, "\nQwen3-4B rate="));
    const auto bad = servesim::test::run_servesim("run scenarios/quickstart.yaml --experiment Qwen3");
    CHECK(bad.status == 2);
    CHECK(contains(bad.output, "servesim: error: command line: --experiment Qwen3: scenarios/quickstart.yaml has no "
                               "experiment of that name; it has: Qwen3-4B, Qwen3.5-4B"));
    CHECK(!contains(bad.output, "wall time"));
}
