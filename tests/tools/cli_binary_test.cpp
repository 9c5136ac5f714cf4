// The servesim binary as a user meets it: --version, help, usage lines with one program name, the bench flags'
// place, and `plot` turning an --out folder into PNGs (tools/servesim.cpp, tools/plot/servesim_plot.py).
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran servesim(const std::string& args, const std::string& env = "") { return servesim::test::run_servesim(args, env); }

TEST_CASE("CLI: --version names the release, the commit and the default vLLM version", "[tools][cli]") {
    const Ran r = servesim("--version");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.starts_with("servesim 0.1.0 (git "));
    CHECK(contains(r.output, "vLLM rules: 0.34 by default; modelled releases 0.18 to 0.34"));
}

TEST_CASE("CLI: help COMMAND shows the command's options, engine flags as vLLM spells them", "[tools][cli]") {
    const Ran run = servesim("help run");
    INFO(run.output);
    CHECK(run.status == 0);
    CHECK(run.output.starts_with("usage: servesim run [SCENARIO] [options]"));
    for (const char* flag : {"--max-num-seqs N", "--max-num-batched-tokens N", "--[no-]enable-chunked-prefill",
                             "--kv-cache-dtype NAME", "--block-size N", "--gpu-memory-utilization X",
                             "-tp, --tensor-parallel-size N", "--[no-]enable-prefix-caching",
                             "--kv-offloading-size SIZE", "-dp, --data-parallel-size N", "--mamba-cache-mode NAME",
                             "--max-model-len N", "--kv-cache-memory-bytes SIZE", "--vllm-version X.Y",
                             "--request-rate", "--num-prompts", "--random-input-len"}) {
        CHECK(contains(run.output, flag));
    }
    CHECK(servesim("inspect --help").output.starts_with("usage: servesim inspect --model M"));
    CHECK(servesim("help sweep").output.starts_with("usage: servesim sweep SCENARIO"));
}

TEST_CASE("CLI: every usage line names the program `servesim`", "[tools][cli]") {
    const Ran cal = servesim("calibrate --help");
    CHECK(cal.status == 0);
    CHECK(cal.output.starts_with("usage: servesim calibrate --model M"));
    const Ran bad = servesim("calibrate --bogus");
    INFO(bad.output);
    CHECK(bad.status == 2);
    CHECK(contains(bad.output, "usage: servesim calibrate --model M"));
    CHECK(!contains(bad.output, "servesim-calibrate"));
    CHECK(servesim("help").output.starts_with("usage: servesim <command> [options]"));
}

TEST_CASE("CLI: bench flags with a scenario file point to --set", "[tools][cli]") {
    const Ran r = servesim("run scenarios/quickstart.yaml --request-rate 3");
    CHECK(r.status == 2);
    CHECK(contains(r.output, "servesim: error: command line: the vllm bench serve flags"));
    CHECK(contains(r.output, "--set workload.rate=10"));
    const Ran m = servesim("run --request-rate 3");
    CHECK(m.status == 2);
    CHECK(contains(m.output, "a run without a scenario file needs --model"));
}

TEST_CASE("CLI: a scenario-less run prints its figures; --plot draws PNGs of the --out folder", "[tools][cli]") {
    const auto dir = std::filesystem::temp_directory_path() / "servesim_cli_plot_test";
    std::filesystem::remove_all(dir);
    const Ran r = servesim("run --model Qwen/Qwen3-4B --gpu H100 --request-rate 20 --num-prompts 60 "
                           "--random-input-len 512 --random-output-len 32 --max-num-seqs 8 --out '" +
                           dir.string() + "' --plot");
    INFO(r.output);
    REQUIRE(r.status == 0);
    // The table's requests_sent row (label, padding, value): 60 sent.
    const auto row = r.output.find("\nrequests_sent ");
    REQUIRE(row != std::string::npos);
    const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
    CHECK(line.substr(line.find_last_not_of(' ') - 1, 2) == "60");
    for (const char* png : {"latency.png", "timeseries.png"}) {
        std::ifstream f(dir / png, std::ios::binary);
        std::string magic(8, '\0');
        f.read(magic.data(), 8);
        CHECK(magic == "\x89PNG\r\n\x1a\n");
    }
    // The plot runs isolated from the user's Python: a broken matplotlib on PYTHONPATH changes nothing.
    const auto fake = dir / "fake-site" / "matplotlib";
    std::filesystem::create_directories(fake);
    std::ofstream(fake / "__init__.py") << "raise ImportError('a user matplotlib that must not be used')\n";
    std::filesystem::remove(dir / "latency.png");
    const std::string env = "PYTHONPATH='" + (dir / "fake-site").string() + "' ";
    const Ran isolated = servesim("plot '" + dir.string() + "'", env);
    INFO(isolated.output);
    CHECK(isolated.status == 0);
    CHECK(std::filesystem::exists(dir / "latency.png"));
    const Ran none = servesim("plot '" + (dir / "nothing").string() + "'");
    CHECK(none.status == 2);
    CHECK(contains(none.output, "holds no summary.csv; give the folder of a run's --out"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("CLI: an order_only sweep's --plot draws its hit rate against the swept key", "[tools][cli]") {
    // order_only runs have no timings: plot draws hit_rate.png (vLLM's hit rate and, for hybrids, the attention
    // layers') instead of the latency and time-series figures.
    const auto dir = std::filesystem::temp_directory_path() / "servesim_cli_plot_order_only_test";
    std::filesystem::remove_all(dir);
    const Ran r = servesim("sweep scenarios/hybrid-policies/mooncake-order-only.yaml --set workload.limit=40 --out '" +
                           dir.string() + "' --plot");
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::ifstream f(dir / "hit_rate.png", std::ios::binary);
    std::string magic(8, '\0');
    f.read(magic.data(), 8);
    CHECK(magic == "\x89PNG\r\n\x1a\n");
    CHECK_FALSE(std::filesystem::exists(dir / "latency.png"));
    CHECK(contains(r.output, "hit_rate.png"));
    std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

TEST_CASE("CLI: plan --out --plot writes the plan and draws its two PNGs; --plot without --out is refused",
          "[tools][cli][planner]") {
    // The planner's hand-worked synthetic server (tests/planner/plan_test.cpp): the largest rate under
    // ttft_max ≤ 25 ms is 100.39 req/s at a 0.5 % tolerance.
    const auto dir = std::filesystem::temp_directory_path() / "servesim_cli_plan_test";
    std::filesystem::remove_all(dir);
    const std::string scenario = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/planner/one-at-a-time.yaml";
    const Ran r = servesim("plan '" + scenario + "' --slo ttft_max=25ms --start-load 25 --tolerance 0.005 "
                           "--prices /dev/null --out '" + dir.string() + "' --plot");
    INFO(r.output);
    // /dev/null is not a price file: refused before anything runs, naming it.
    CHECK(r.status == 2);
    CHECK(contains(r.output, "/dev/null"));
    const Ran ok = servesim("plan '" + scenario + "' --slo ttft_max=25ms --start-load 25 --tolerance 0.005 --out '" +
                            dir.string() + "' --plot");
    INFO(ok.output);
    REQUIRE(ok.status == 0);
    CHECK(contains(ok.output, "100.390625"));
    for (const char* png : {"plan-latency.png", "plan-cost.png"}) {
        std::ifstream f(dir / png, std::ios::binary);
        std::string magic(8, '\0');
        f.read(magic.data(), 8);
        CHECK(magic == "\x89PNG\r\n\x1a\n");
    }
    const Ran no_out = servesim("plan '" + scenario + "' --slo ttft_max=25ms --plot");
    CHECK(no_out.status == 2);
    CHECK(contains(no_out.output, "--plot draws into the --out folder"));
    std::filesystem::remove_all(dir);
}

}  // namespace
