// Whole scenarios through the library API (app::load_scenario_text / load_scenario → run_experiments →
// format_json / format_csv), as `servesim run` and `servesim sweep` do: byte-identical output for equal seeds and
// for any number of worker threads (docs/ARCHITECTURE.md, "Invariants"), and a golden file of the quickstart summary,
// with the block accounting invariant checked after every step of the same runs (scenario key check_invariants).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// A small sweep: 2 × 2 points of a tenant workload on the roofline H200, invariants on.
const char* kSweep = R"(
name: determinism
model: Qwen3-4B
gpu: H200
check_invariants: true
engine:
  enable_prefix_caching: true
  kv_cache_memory_bytes: 512MiB
  max_model_len: 2048
workload:
  type: tenants
  tenants: 4
  system_prompt_tokens: 500
  turns_per_dialogue: 3
  user_tokens: {dist: uniform, min: 50, max: 150}
  answer_tokens: {dist: uniform, min: 10, max: 40}
  arrival: poisson
  rate: 20
  num_requests: 40
sweep:
  workload.tenants: [2, 6]
  engine.block_size: [16, 32]
)";

struct Outputs {
    std::string json;
    std::string csv;
};

Outputs run_text(const std::string& text, int jobs, std::uint64_t seed) {
    const Scenario sc = load_scenario_text(text, "determinism.yaml", {}, seed);
    const auto results = run_experiments(sc.experiments, jobs, {});
    return {format_json(results), format_csv(results)};
}

TEST_CASE("Same scenario and seed give byte-identical JSON and CSV", "[scenarios][determinism]") {
    const Outputs a = run_text(kSweep, 1, 7);
    const Outputs b = run_text(kSweep, 1, 7);
    CHECK(a.json == b.json);
    CHECK(a.csv == b.csv);
    // The comparison can fail: another seed draws other lengths and arrivals.
    const Outputs other = run_text(kSweep, 1, 8);
    CHECK(other.json != a.json);
    // 4 points plus the header.
    CHECK(std::count(a.csv.begin(), a.csv.end(), '\n') == 5);
}

TEST_CASE("A sweep gives byte-identical output with --jobs 1 and --jobs 2", "[scenarios][determinism]") {
    const Outputs one = run_text(kSweep, 1, 3);
    const Outputs two = run_text(kSweep, 2, 3);
    const Outputs four = run_text(kSweep, 4, 3);
    CHECK(one.json == two.json);
    CHECK(one.csv == two.csv);
    CHECK(one.json == four.json);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Golden: tests/golden/quickstart.json is the JSON of `servesim run` on scenarios/quickstart.yaml with
//   --set workload.num_requests=200 --set warmup=1s --set check_invariants=true --set metrics.exact_percentiles=true
// (its whole rate sweep, 2 models × 5 rates, with fewer requests to keep the test fast and a warm-up short enough
// that 90 req/s still measures most of them; the invariant is checked after every step of the same run; exact
// percentiles, the figures the file held before the streaming sketch became the default). It changes
// only on purpose: run the test with SERVESIM_UPDATE_GOLDEN=1 to rewrite the file, then review the diff
// (`git diff tests/golden`) and commit it with the change that explains it. Invariants run in update mode too.
TEST_CASE("Golden: the quickstart summary is unchanged", "[scenarios][golden]") {
    const Scenario sc = load_scenario("scenarios/quickstart.yaml",
                                      {"workload.num_requests=200", "warmup=1s", "check_invariants=true",
                                       "metrics.exact_percentiles=true"}, {});
    REQUIRE(sc.experiments.size() == 10);
    const auto results = run_experiments(sc.experiments, 2, {});
    for (const auto& r : results) {
        CHECK(r.sim.num_unfinished == 0);
        CHECK(r.sim.summary.num_requests_finished + r.sim.summary.num_requests_rejected ==
              r.sim.summary.num_requests_sent);
    }
    const std::string actual = format_json(results);
    const std::string path = std::string(SERVESIM_TEST_DATA_DIR) + "/golden/quickstart.json";
    const char* update = std::getenv("SERVESIM_UPDATE_GOLDEN");
    if (update != nullptr && std::string(update) == "1") {
        std::ofstream(path, std::ios::binary) << actual;
        WARN("rewrote " << path);
        return;
    }
    const std::string expected = read_file(path);
    REQUIRE_FALSE(expected.empty());
    CHECK(actual == expected);
}

}  // namespace
}  // namespace servesim::app
