// The time series a run keeps is bounded (sim/cluster/simulation.cpp): past 2^20 + 1 samples every other one is
// dropped and the interval doubles. It used to grow by one sample per simulated second whatever the run's length
// (10^9 samples, 48 GB, for a run of max_time 1e9 s).
#include <string>

#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

TEST_CASE("A run of 2e6 simulated seconds keeps at most 2^20 + 1 samples, 2 s apart after thinning",
          "[scenarios][ranges]") {
    // Three requests 10^6 s apart (constant rate 1e-6/s): the run lasts ~2,000,000 s. Samples at 0..1,048,576 s
    // (2^20 + 1) are thinned to the even seconds 0, 2, ..., 1,048,576 (524,289 samples), then one every 2 s up to
    // the last request (~2,000,000 s): about 524,289 + 475,712 = 1,000,001 samples instead of 2,000,001.
    const Scenario sc = load_scenario_text(
        "model: Qwen3-4B\nworkload: {type: synthetic, arrival: constant, rate: 1e-6, prompt_tokens: 10, "
        "output_tokens: 1, num_requests: 3}\nmax_time: 1000h\n",
        "t.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, [](int, int) {});
    REQUIRE(results.size() == 1);
    const auto& ts = results[0].sim.timeseries;
    REQUIRE(ts.size() >= 3);
    CHECK(ts.size() <= (std::size_t{1} << 20) + 1);
    CHECK(ts.size() >= 999'990);
    CHECK(ts.size() <= 1'000'010);
    CHECK(ts[0].t_s == 0.0);
    CHECK(ts[1].t_s == 2.0);
    CHECK(ts[524'288].t_s == 1'048'576.0);
    CHECK(ts[524'289].t_s == 1'048'578.0);
    CHECK(ts.back().t_s - ts[ts.size() - 2].t_s == 2.0);
    CHECK(ts.back().t_s >= 1'999'998.0);
}

}  // namespace
}  // namespace servesim::app
