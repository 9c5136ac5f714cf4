// Checkpoints that cannot lie (tools/app/partial_results.cpp; issue 41): every one-byte corruption of a small
// partial-results file is refused by --resume with a message naming the file and what is wrong, a file cut short
// anywhere gives back exactly the whole records before the cut, and files of another scenario, format or codec
// version are refused by name. The --resume command printed after a failure drops --checkpoint/--resume and quotes
// what a shell would split.
#include "tools/app/partial_results.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/tools/fault_injection.h"
#include "tools/app/executor.h"
#include "tools/app/experiment.h"
#include "tools/app/interrupt.h"
#include "tools/app/result_codec.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// A small sweep: 12 requests of a Qwen3-4B on one H100, two points, no request records — so a record is a few
// hundred bytes and the test can corrupt every byte of the file.
const char* kScenario = R"(
name: tiny
seed: 5
model: Qwen3-4B
gpu: H100
engine: {max_model_len: 4096}
workload:
  type: synthetic
  arrival: poisson
  rate: 10
  prompt_tokens: {dist: uniform, min: 50, max: 300}
  output_tokens: {dist: uniform, min: 5, max: 20}
  num_requests: 12
experiments:
  - name: a
    engine: {max_num_seqs: 4}
  - name: b
    engine: {max_num_seqs: 64}
)";

std::vector<ExperimentConfig> configs(const std::string& text = kScenario) {
    return load_scenario_text(text, "tiny.yaml", std::vector<std::string>{}, std::nullopt).experiments;
}

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Names carry the test process's id, so concurrent runs of the suite (several checkouts on one machine) never share
// a file.
std::string temp_file(const std::string& name) {
    return (std::filesystem::temp_directory_path() /
            fmt::format("servesim-partial-test-{}-{}", ::getpid(), name)).string();
}

// The ConfigError's message of resuming `path`, or "" when it resumed.
std::string resume_error(const std::string& path, std::uint64_t fingerprint) {
    try {
        (void)PartialResults::resume(path, "--resume", fingerprint);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

struct Checkpoint {
    std::vector<ExperimentConfig> cs;
    std::vector<ExperimentResult> results;
    std::string path;
    std::string bytes;
};

// Both runs of the tiny sweep stored in a fresh file.
Checkpoint make_checkpoint(const std::string& name) {
    Checkpoint c;
    c.cs = configs();
    c.results = run_experiments(c.cs, 1, {});
    c.path = temp_file(name);
    {
        auto p = PartialResults::create(c.path, "--checkpoint", scenario_fingerprint(c.cs));
        for (const auto& r : c.results) {
            p.append(r.config, r);
        }
    }
    c.bytes = read(c.path);
    return c;
}

TEST_CASE("every one-byte corruption of a checkpoint is refused, naming the file and what is wrong", "[partial]") {
    const Checkpoint c = make_checkpoint("flip.bin");
    const std::uint64_t fp = scenario_fingerprint(c.cs);
    // Header 28 + 4 + 4 + 8 + 4 = 48 bytes; each record 16 + 4 + its bytes + 4.
    const std::size_t r0 = encode_result(c.results[0]).size();
    const std::size_t r1 = encode_result(c.results[1]).size();
    REQUIRE(c.bytes.size() == 48 + (24 + r0) + (24 + r1));
    INFO("checkpoint of " << c.bytes.size() << " bytes");
    REQUIRE(resume_error(c.path, fp).empty());  // the whole file resumes
    int refused = 0;
    for (std::size_t at = 0; at < c.bytes.size(); ++at) {
        // Two corruptions per byte: all bits (0xff) and the lowest bit (which turns the "2" of "v2" into "3").
        for (const unsigned char mask : {0xffU, 0x01U}) {
            std::string bad = c.bytes;
            bad[at] = static_cast<char>(static_cast<unsigned char>(bad[at]) ^ mask);
            write(c.path, bad);
            const std::string error = resume_error(c.path, fp);
            INFO("byte " << at << " ^ " << int(mask) << ": " << error);
            // Never resumed: a flip keeps the file's length, so no record can look cut short.
            REQUIRE_FALSE(error.empty());
            CHECK(error.starts_with("--resume: '" + c.path + "' "));
            const bool says_what =
                error.find(" is damaged: ") != std::string::npos ||
                error.find(
                    "is not a servesim partial-results file (written by --checkpoint, or kept by a sweep or "
                    "plan that failed), or its first line is damaged") != std::string::npos ||
                error.find("is a partial-results file of another servesim release (format v3; this build reads v2)") !=
                    std::string::npos;
            CHECK(says_what);
            CHECK(error.ends_with("run the command without --resume to start afresh"));
            refused += 1;
        }
    }
    CHECK(refused == static_cast<int>(2 * c.bytes.size()));
    // What a user reads for each part: the magic line, the header, a record's header, a record's bytes.
    std::string bad = c.bytes;
    bad[0] = 'S';
    write(c.path, bad);
    CHECK(resume_error(c.path, fp) ==
          "--resume: '" + c.path +
              "' is not a servesim partial-results file (written by --checkpoint, or kept by a sweep or plan that "
              "failed), or its first line is damaged; run the command without --resume to start afresh");
    bad = c.bytes;
    bad[40] ^= 1;  // in the scenario fingerprint
    write(c.path, bad);
    CHECK(resume_error(c.path, fp) == "--resume: '" + c.path +
                                          "' is damaged: its header fails its CRC-32 checksum; nothing was resumed; "
                                          "run the command without --resume to start afresh");
    bad = c.bytes;
    bad[48 + 24 + r0 + 9] ^= 1;  // the second record's byte count
    write(c.path, bad);
    CHECK(
        resume_error(c.path, fp) ==
        fmt::format("--resume: '{}' is damaged: record 2 (at byte {}) fails its header's CRC-32 checksum; nothing was "
                    "resumed; run the command without --resume to start afresh",
                    c.path, 48 + 24 + r0));
    bad = c.bytes;
    bad[48 + 20 + 7] ^= 1;  // a byte of the first record's result
    write(c.path, bad);
    CHECK(resume_error(c.path, fp) == "--resume: '" + c.path +
                                          "' is damaged: record 1 (at byte 48) fails its CRC-32 checksum; nothing was "
                                          "resumed; run the command without --resume to start afresh");
    std::filesystem::remove(c.path);
}

TEST_CASE("a checkpoint cut short anywhere gives back exactly its whole records", "[partial]") {
    const Checkpoint c = make_checkpoint("cut.bin");
    const std::uint64_t fp = scenario_fingerprint(c.cs);
    const std::size_t end0 = 48 + 24 + encode_result(c.results[0]).size();
    for (std::size_t size = 0; size < c.bytes.size(); ++size) {
        write(c.path, c.bytes.substr(0, size));
        INFO("cut at " << size << " of " << c.bytes.size());
        if (size < 48) {
            // Inside the header: refused (a crash this early kept no run anyway).
            const std::string error = resume_error(c.path, fp);
            CHECK((error.find("is damaged: its header ends after") != std::string::npos ||
                   error.find("or its first line is damaged") != std::string::npos));
            continue;
        }
        auto p = PartialResults::resume(c.path, "--resume", fp);
        // Before the end of the first record nothing is whole; after it, the first run comes back bit for bit.
        const std::size_t whole = size < end0 ? 0 : 1;
        REQUIRE(p.num_loaded() == whole);
        ExperimentResult got;
        CHECK(p.find(c.results[0].config, got) == (whole == 1));
        if (whole == 1) {
            CHECK(encode_result(got) == encode_result(c.results[0]));
        }
        CHECK_FALSE(p.find(c.results[1].config, got));
        // The torn tail is gone: the file now ends at the last whole record, ready for the next append.
        CHECK(std::filesystem::file_size(c.path) == (whole == 1 ? end0 : 48));
    }
    // The zeros a file system may leave after a crash, in place of a record, are a cut too.
    write(c.path, c.bytes.substr(0, end0) + std::string(40, '\0'));
    CHECK(PartialResults::resume(c.path, "--resume", fp).num_loaded() == 1);
    std::filesystem::remove(c.path);
}

TEST_CASE("a checkpoint of another scenario, format or codec version is refused by name", "[partial]") {
    const Checkpoint c = make_checkpoint("foreign.bin");
    // Another scenario: the same sweep with another seed (every run differs).
    std::string other = kScenario;
    other.replace(other.find("seed: 5"), 7, "seed: 6");
    CHECK(resume_error(c.path, scenario_fingerprint(configs(other))) ==
          "--resume: '" + c.path +
              "' holds the runs of another scenario (another scenario file, --set, --seed or --grid, or with --out or "
              "--format changing whether request records are kept): it does not continue this command; repeat the "
              "command that wrote it with --resume, or run this one without --resume to start afresh");
    // A v1 file (before checksums) names its format.
    write(c.path, std::string("servesim partial results v1\n") + std::string("\x04\x03\x02\x01", 4));
    CHECK(resume_error(c.path, scenario_fingerprint(c.cs)) ==
          "--resume: '" + c.path +
              "' is a partial-results file of another servesim release (format v1; this build reads v2): its runs "
              "cannot be read back; run the command without --resume to start afresh");
    // Another codec version with a valid header checksum: written by another build.
    std::string bytes = c.bytes;
    const std::uint32_t version = result_codec_version() + 1;
    std::memcpy(bytes.data() + 32, &version, 4);
    // The header's CRC-32 recomputed, as that build would have written it (Boost.CRC, as the file does).
    boost::crc_32_type crc;
    crc.process_bytes(bytes.data(), 44);
    const std::uint32_t sum = crc.checksum();
    std::memcpy(bytes.data() + 44, &sum, 4);
    write(c.path, bytes);
    CHECK(resume_error(c.path, scenario_fingerprint(c.cs)) ==
          fmt::format("--resume: '{}' was written by another servesim build (result codec version {}; this build "
                      "reads {}): its runs cannot be read back; run the command without --resume to start afresh",
                      c.path, version, result_codec_version()));
    std::filesystem::remove(c.path);
}

TEST_CASE("a sweep's scenario fingerprint follows its runs", "[partial]") {
    const auto cs = configs();
    CHECK(scenario_fingerprint(cs) == scenario_fingerprint(configs()));
    auto fewer = cs;
    fewer.pop_back();
    CHECK(scenario_fingerprint(fewer) != scenario_fingerprint(cs));
    auto records = cs;
    records[1].keep_request_records = true;  // --out: request records kept, other results
    CHECK(scenario_fingerprint(records) != scenario_fingerprint(cs));
}

TEST_CASE("the --resume command drops --checkpoint and --resume and quotes for the shell", "[partial]") {
    CHECK(resume_command("servesim", {"sweep", "s.yaml", "--checkpoint", "old.bin", "--jobs", "2"}, "new.bin") ==
          "servesim sweep s.yaml --jobs 2 --resume new.bin");
    CHECK(resume_command("./build/tools/servesim", {"plan", "--resume=a.bin", "p.yaml", "--slo", "ttft_p99=2s"},
                         "a.bin") == "./build/tools/servesim plan p.yaml --slo ttft_p99=2s --resume a.bin");
    CHECK(resume_command("servesim", {"sweep", "my scenario.yaml", "--set", "name=it's"}, "/tmp/x y.bin") ==
          "servesim sweep 'my scenario.yaml' --set 'name=it'\\''s' --resume '/tmp/x y.bin'");
}

// A folder of its own for a scope's default file (servesim-partial-<pid>.bin), empty.
std::string empty_dir(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("servesim-partial-test-{}-{}", ::getpid(), name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

bool is_empty(const std::string& dir) {
    return std::filesystem::is_empty(dir);
}

TEST_CASE("SIGINT after a run finished: the scope names the file and the --resume command", "[partial]") {
    const auto cs = configs();
    const std::string dir = empty_dir("interrupt-one");
    LocalExecutor local;
    PartialResultsScope scope(local, true, "", "", dir, scenario_fingerprint(cs), {"sweep", "tiny.yaml"});
    std::ostringstream log;
    // The signal arrives as the first of the two runs finishes (one thread): the second is never started.
    CHECK_THROWS_AS(scope.run(log,
                              [&](PartialResults* file) {
                                  return run_experiments(
                                      cs, 1,
                                      [](int done, int) {
                                          if (done == 1) {
                                              std::raise(SIGINT);
                                          }
                                      },
                                      RunOptions{&local, file, false, std::nullopt, nullptr});
                              }),
                    Interrupted);
    const std::string file = (std::filesystem::path(dir) / fmt::format("servesim-partial-{}.bin", getpid())).string();
    CHECK(log.str() ==
          fmt::format("servesim: stopped by SIGINT: the runs in flight finished, 1 run was not started\n"
                      "servesim: 1 finished run is kept in {0}; repeat the command with --resume {0} to run only the "
                      "rest:\n    {1} sweep tiny.yaml --resume {0}\n",
                      file, program_invocation_name));
    // The file resumes to the first run.
    const auto p = PartialResults::resume(file, "--resume", scenario_fingerprint(cs));
    CHECK(p.num_loaded() == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("SIGTERM before any run finished, or a failure of the first run, leaves no partial file", "[partial]") {
    const auto cs = configs();
    const std::string dir = empty_dir("interrupt-none");
    LocalExecutor local;
    local.fault_hook = test::fault_from_environment();  // the fault tests' hook (test builds only)
    {
        PartialResultsScope scope(local, true, "", "", dir, scenario_fingerprint(cs), {"sweep", "tiny.yaml"});
        std::ostringstream log;
        CHECK_THROWS_AS(
            scope.run(log,
                      [&](PartialResults* file) {
                          std::raise(SIGTERM);  // before the batch starts: no run starts
                          return run_experiments(cs, 1, {}, RunOptions{&local, file, false, std::nullopt, nullptr});
                      }),
            Interrupted);
        CHECK(log.str() ==
              "servesim: stopped by SIGTERM: the runs in flight finished, 2 runs were not started\n"
              "servesim: no run had finished: nothing is kept\n");
        CHECK(is_empty(dir));
    }
    {
        PartialResultsScope scope(local, true, "", "", dir, scenario_fingerprint(cs), {"sweep", "tiny.yaml"});
        std::ostringstream log;
        ::setenv("SERVESIM_FAIL_RUN", "a", 1);  // the first run fails (one thread: nothing else started)
        CHECK_THROWS_WITH(
            scope.run(log,
                      [&](PartialResults* file) {
                          return run_experiments(cs, 1, {}, RunOptions{&local, file, false, std::nullopt, nullptr});
                      }),
            "experiment 'a' failed: fault injected by SERVESIM_FAIL_RUN=a");
        ::unsetenv("SERVESIM_FAIL_RUN");
        CHECK(log.str().empty());  // the error itself is the caller's to print
        CHECK(is_empty(dir));
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace servesim::app
