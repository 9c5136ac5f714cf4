// --metric-percentiles that the vllm-bench result cannot give for pooled ITLs (servesim keeps p50, p90, p95 and p99 of
// them) is refused before anything is simulated, not after the run (issue 39).
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

using servesim::test::contains;

TEST_CASE("CLI: an ITL percentile the result cannot give is refused before simulating", "[tools][cli][output]") {
    const auto r = servesim::test::run_servesim(
        "run --model Qwen3-4B --num-prompts 20 --metric-percentiles 97 --format vllm-bench");
    CHECK(r.status == 2);
    CHECK(contains(r.output, "servesim: error: --metric-percentiles: 97 for itl: servesim keeps pooled inter-token "
                             "latencies as p50, p90, p95 and p99 only"));
    CHECK(!contains(r.output, "wall time"));  // nothing was simulated
    // Without itl among the metrics, 97 is given.
    const auto ok = servesim::test::run_servesim("run --model Qwen3-4B --num-prompts 20 --metric-percentiles 97 "
                                                 "--percentile-metrics ttft,tpot --format vllm-bench",
                                                 "", false);
    CHECK(ok.status == 0);
    CHECK(contains(ok.output, "\"p97_ttft_ms\""));
}
