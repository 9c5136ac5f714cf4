// Every file a user names on the command line goes through common/input_file.h: a FIFO, a device or a directory
// is refused with exit status 2, the path and the file's role, before anything is simulated (issue 41: `--gpu`,
// `plan --prices` and `--resume` read /dev/zero until bad_alloc and blocked forever on a FIFO). Also `--seed ''`.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using servesim::test::contains;
using servesim::test::Ran;
using servesim::test::run_servesim;

struct TempDir {
    fs::path path;
    TempDir() {
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        const std::string name = "servesim-input-cli-" + std::to_string(::getpid()) + "-" + std::to_string(now);
        path = fs::temp_directory_path() / name;
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string make_fifo(const TempDir& dir, const std::string& name) {
    const std::string p = (dir.path / name).string();
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    return p;
}

TEST_CASE("CLI: a FIFO as the scenario file is refused, not waited on", "[tools][cli][input_files]") {
    const TempDir dir;
    const std::string fifo = make_fifo(dir, "s.yaml");
    const Ran r = run_servesim("run '" + fifo + "'");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "servesim: error: " + fifo +
                                 ": a FIFO (named pipe), which may never end or never open; expected a scenario file "
                                 "(a regular file)\n"));
}

TEST_CASE("CLI: --gpu FILE.yaml that is a FIFO or a link to /dev/zero is refused", "[tools][cli][input_files]") {
    const TempDir dir;
    const std::string fifo = make_fifo(dir, "gpu.yaml");
    const Ran r = run_servesim("run scenarios/quickstart.yaml --gpu '" + fifo + "'");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, fifo + ": a FIFO (named pipe), which may never end or never open; expected a GPU file"));
    const fs::path zero = dir.path / "zero.yaml";
    fs::create_symlink("/dev/zero", zero);
    const Ran z = run_servesim("run scenarios/quickstart.yaml --gpu '" + zero.string() + "'");
    INFO(z.output);
    CHECK(z.status == 2);
    CHECK(contains(z.output, zero.string() + ": a device, not a file; expected a GPU file"));
}

TEST_CASE("CLI: plan --prices /dev/zero is refused", "[tools][cli][input_files]") {
    const Ran r = run_servesim("plan scenarios/plan/agentic-8b.yaml --slo ttft_p99=500ms --prices /dev/zero");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "/dev/zero: a device, not a file; expected a price file (a regular "
                             "file)"));
}

TEST_CASE("CLI: --resume of a FIFO or /dev/zero is refused", "[tools][cli][input_files]") {
    const Ran r = run_servesim("run scenarios/quickstart.yaml --resume /dev/zero");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "--resume: /dev/zero: a device, not a file; expected a "
                             "partial-results file (a regular file)"));
    const TempDir dir;
    const std::string fifo = make_fifo(dir, "partial.bin");
    const Ran f = run_servesim("run scenarios/quickstart.yaml --resume '" + fifo + "'");
    INFO(f.output);
    CHECK(f.status == 2);
    CHECK(contains(f.output, "--resume: " + fifo + ": a FIFO (named pipe)"));
}

TEST_CASE("CLI: a trace that is a FIFO is refused naming the scenario key", "[tools][cli][input_files]") {
    const TempDir dir;
    const std::string fifo = make_fifo(dir, "t.csv");
    const std::string scenario = (dir.path / "s.yaml").string();
    std::ofstream(scenario) << "model: Qwen3-4B\nworkload: {type: trace, format: azure, trace: t.csv}\n";
    const Ran r = run_servesim("run '" + scenario + "'");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, scenario + ": 'workload.trace': " + fifo +
                                 ": a FIFO (named pipe), which may never end or never open; expected a trace file"));
}

TEST_CASE("CLI: --seed '' is refused, not ignored", "[tools][cli][input_files]") {
    const Ran r = run_servesim("run scenarios/quickstart.yaml --seed ''");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "--seed"));
    CHECK(contains(r.output, "got ''"));
}

}  // namespace
