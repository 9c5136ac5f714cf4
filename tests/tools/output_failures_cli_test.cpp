// Failures that used to pass silently, as a user meets them through the servesim binary (tools/servesim.cpp): a
// stdout that cannot be written (a full disk: /dev/full) exits non-zero with a message; a directory or a device
// given as a scenario or a profile is refused naming it; `servesim calibrate` exits 2 on bad input as every other
// command does; an order-only replay of a trace with no record is refused instead of printing zero hit rates.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran run(const std::string& args) { return servesim::test::run_servesim(args); }

// The binary with its stdout on /dev/full (a full disk) and its stderr read back.
Ran run_to_full_stdout(const std::string& args) {
    Ran r;
    const std::string cmd = "'" + std::string(SERVESIM_BINARY) + "' " + args + " 2>&1 >/dev/full";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (std::size_t n = 0; (n = fread(buf, 1, sizeof buf, p)) > 0;) {
        r.output.append(buf, n);
    }
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::string temp_path(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / "servesim-output-failures";
    std::filesystem::create_directories(dir);
    return (dir / name).string();
}

}  // namespace

TEST_CASE("CLI: a stdout that cannot be written exits 1 with a message", "[tools][cli]") {
    const Ran r = run_to_full_stdout("list");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, "servesim: error: could not write the output to standard output"));
    const Ran run = run_to_full_stdout("run scenarios/quickstart.yaml --set workload.num_requests=4 --set warmup=0s "
                                       "--format json");
    CHECK(run.status == 1);
    CHECK(contains(run.output, "could not write the output to standard output"));
}

TEST_CASE("CLI: a directory or a device as a scenario or profile is refused naming it", "[tools][cli]") {
    const std::string dir = temp_path("a-folder.yaml");
    std::filesystem::create_directories(dir);
    const Ran scenario = run("run " + dir);
    CHECK(scenario.status == 2);
    CHECK(contains(scenario.output, dir + ": a directory; expected a scenario file (a regular file)"));
    const Ran zero = run("run /dev/zero");
    CHECK(zero.status == 2);
    CHECK(contains(zero.output, "/dev/zero: a device, not a file"));
    // yaml-cpp used to report only "basic_filebuf::underflow error reading the file: Is a directory" (rc 1).
    const Ran profile = run("run scenarios/quickstart.yaml --set workload.num_requests=4 --set cost_model=" + dir);
    CHECK(profile.status == 2);
    CHECK(contains(profile.output, dir + ": a directory; expected a YAML/JSON file (a regular file)"));
}

TEST_CASE("CLI: calibrate exits 2 on bad input", "[tools][cli]") {
    const Ran r = run("calibrate --refit-points somewhere");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "--refit-points needs --profile"));
}

TEST_CASE("CLI: an order-only replay of a header-only trace is refused", "[tools][cli]") {
    const std::string trace = temp_path("header.csv");
    std::ofstream(trace) << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    const std::string scenario = temp_path("order-only.yaml");
    std::ofstream(scenario) << "mode: order_only\nworkload: {type: trace, format: azure, trace: " << trace << "}\n";
    const Ran r = run("run " + scenario);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, trace + ": no record to replay"));
}
