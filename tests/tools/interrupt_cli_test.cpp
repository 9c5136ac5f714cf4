// Interrupted and failed sweeps as a user meets them through the servesim binary (tools/app/interrupt.h,
// partial_results.h; issues 39 and 41): SIGINT during a sweep stops it after the runs in flight, exits 130 and prints
// the partial-results file and the exact --resume command, which completes the sweep to the output of an
// uninterrupted one; a second signal ends the process at once and, with no run finished, leaves no file; a sweep
// that fails with no run finished leaves no servesim-partial-<pid>.bin, one that fails later names it.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;
namespace fs = std::filesystem;

// A sweep of 8 points of a Qwen3-4B on an H200 under 20 agentic tenants; `num_requests` sets how long each run
// takes (10,000: about 0.1 s here; 40,000: 0.3 s; 300,000: about 3 s).
std::string sweep_scenario(int num_requests) {
    return "name: slow\nseed: 1\ngpu: H200\nmodel: Qwen3-4B\nengine: {enable_prefix_caching: true}\n"
           "workload:\n  type: tenants\n  tenants: 20\n  system_prompt_tokens: 2000\n  turns_per_dialogue: 6\n"
           "  user_tokens: {dist: uniform, min: 100, max: 200}\n  answer_tokens: {dist: uniform, min: 50, max: 100}\n"
           "  think_time: 0s\n  arrival: poisson\n  rate: 6\n  num_requests: " +
           std::to_string(num_requests) + "\nwarmup: 0s\nsweep:\n  workload.rate: [5, 6, 7, 8, 9, 10, 11, 12]\n";
}

// An empty folder holding slow.yaml. Its name carries the test process's id: concurrent runs of the suite (several
// checkouts on one machine) otherwise removed each other's folder mid-test.
std::string folder_with_sweep(const std::string& name, int num_requests) {
    const fs::path dir =
        fs::temp_directory_path() / ("servesim-interrupt-cli-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "slow.yaml") << sweep_scenario(num_requests);
    return dir.string();
}

std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The servesim-partial-*.bin files in `dir`.
int partial_files(const std::string& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        n += e.path().filename().string().starts_with("servesim-partial-") ? 1 : 0;
    }
    return n;
}

// `cmd` run by the shell in `dir`: its status and stdout (stderr dropped).
Ran shell_in(const std::string& dir, const std::string& cmd) {
    Ran r;
    FILE* p = popen(("cd '" + dir + "' && " + cmd + " 2>/dev/null").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (std::size_t n = 0; (n = fread(buf, 1, sizeof buf, p)) > 0;) {
        r.output.append(buf, n);
    }
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

// "servesim sweep slow.yaml --jobs 1 --format csv" started in `dir` (stdout and stderr to files there).
pid_t start_sweep(const std::string& dir) {
    std::cout.flush();  // what the test printed so far is not the child's to print again
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (chdir(dir.c_str()) != 0 || freopen("out.csv", "w", stdout) == nullptr ||
            freopen("err.txt", "w", stderr) == nullptr) {
            _exit(99);
        }
        execl(SERVESIM_BINARY, SERVESIM_BINARY, "sweep", "slow.yaml", "--jobs", "1", "--format", "csv",
              static_cast<char*>(nullptr));
        _exit(98);
    }
    return pid;
}

}  // namespace

TEST_CASE("CLI: SIGINT stops a sweep after the runs in flight, naming the file and the --resume command",
          "[tools][cli][interrupt]") {
    // 40,000 requests a run (about 0.3 s each here): after the first run the other seven leave the test over 2 s to
    // send its signal. At 10,000 a test process held off the CPU for the 0.7 s of the rest (seen once under a
    // parallel build) signalled a sweep that had already restored the default handler on its way out.
    const std::string dir = folder_with_sweep("int", 40000);
    const Ran fresh = shell_in(dir, "'" + std::string(SERVESIM_BINARY) + "' sweep slow.yaml --jobs 1 --format csv");
    REQUIRE(fresh.status == 0);
    REQUIRE(partial_files(dir) == 0);  // removed after success

    const pid_t pid = start_sweep(dir);
    // The default file appears when the first run finishes: interrupt then.
    const fs::path file = fs::path(dir) / ("servesim-partial-" + std::to_string(pid) + ".bin");
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fs::exists(file) && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE(fs::exists(file));
    kill(pid, SIGINT);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    const std::string err = read(fs::path(dir) / "err.txt");
    INFO(err);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 130);  // 128 + SIGINT, as a shell reports it
    CHECK(contains(err, "servesim: stopping after the runs in flight (a second Ctrl-C or SIGTERM ends at once)\n"));
    CHECK(contains(err, "servesim: stopped by SIGINT: the runs in flight finished, "));
    const std::string name = "./servesim-partial-" + std::to_string(pid) + ".bin";
    const std::string command =
        std::string(SERVESIM_BINARY) + " sweep slow.yaml --jobs 1 --format csv --resume " + name;
    CHECK(contains(err, " kept in " + name + "; repeat the command with --resume " + name +
                            " to run only the rest:\n    " + command + "\n"));
    CHECK(read(fs::path(dir) / "out.csv").empty());  // no half table
    // The printed command completes the sweep to the uninterrupted output.
    const Ran resumed = shell_in(dir, command);
    CHECK(resumed.status == 0);
    CHECK(resumed.output == fresh.output);
    fs::remove_all(dir);
}

TEST_CASE("CLI: a second signal ends a sweep at once; with no run finished no file is left",
          "[tools][cli][interrupt]") {
    const std::string dir = folder_with_sweep("twice", 300000);  // each run takes seconds
    const pid_t pid = start_sweep(dir);
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the scenario is read (~0.05 s), the first run runs
    kill(pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(pid, SIGINT);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    const std::string err = read(fs::path(dir) / "err.txt");
    INFO(err);
    CHECK(contains(err, "servesim: stopping after the runs in flight (a second Ctrl-C or SIGTERM ends at once)\n"));
    CHECK(WIFSIGNALED(st));
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGINT));
    CHECK(partial_files(dir) == 0);
    fs::remove_all(dir);
}

TEST_CASE("CLI: a failed sweep leaves no partial file with no run finished, and names it after one",
          "[tools][cli][interrupt]") {
    const std::string dir = folder_with_sweep("fail", 10000);
    const std::string exe = "'" + std::string(SERVESIM_BINARY) + "'";
    // The released binary has no fault hook: SERVESIM_FAIL_RUN changes nothing (tests/tools/fault_injection.h).
    const Ran released = servesim::test::run_servesim("sweep slow.yaml --jobs 1 --format csv",
                                                      "cd '" + dir + "' && SERVESIM_FAIL_RUN='slow rate=5' ", false);
    CHECK(released.status == 0);
    // The test build servesim-faults: one thread, the points run in order; the first fails.
    Ran first = servesim::test::run_servesim("sweep slow.yaml --jobs 1 --format csv",
                                             "cd '" + dir + "' && SERVESIM_FAIL_RUN='slow rate=5' ", true,
                                             SERVESIM_FAULTS_BINARY);
    INFO(first.output);
    CHECK(first.status == 1);
    CHECK(contains(
        first.output,
        "servesim: error: experiment 'slow rate=5' failed: fault injected by SERVESIM_FAIL_RUN=slow rate=5\n"));
    CHECK_FALSE(contains(first.output, "kept in"));
    CHECK(partial_files(dir) == 0);
    // The third fails: the two before are kept, and the command to resume is printed.
    Ran third = servesim::test::run_servesim("sweep slow.yaml --jobs 1 --format csv",
                                             "cd '" + dir + "' && SERVESIM_FAIL_RUN='slow rate=7' ", true,
                                             SERVESIM_FAULTS_BINARY);
    INFO(third.output);
    CHECK(third.status == 1);
    CHECK(partial_files(dir) == 1);
    const std::string marker = "to run only the rest:\n    ";
    const auto at = third.output.find(marker);
    REQUIRE(at != std::string::npos);
    CHECK(contains(third.output, "servesim: 2 finished runs are kept in ./servesim-partial-"));
    const std::string command =
        third.output.substr(at + marker.size(), third.output.find('\n', at + marker.size()) - at - marker.size());
    const Ran resumed = shell_in(dir, command);
    const Ran fresh = shell_in(dir, exe + " sweep slow.yaml --jobs 1 --format csv");
    CHECK(resumed.status == 0);
    CHECK(resumed.output == fresh.output);
    CHECK(released.output == fresh.output);  // all runs ran, as if the variable were unset
    fs::remove_all(dir);
}
