// Tests which files workloads/trace_reader.cpp accepts as a trace: a directory or a device (/dev/null, /dev/zero)
// is refused when opened, an empty or header-only file when read, and a line beyond 1 MiB where it starts — each
// used to be an empty trace with rc 0 (or, for /dev/zero, a read without end).
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "workloads/open_loop_workload.h"
#include "workloads/trace_reader.h"

namespace sw = servesim::workloads;

namespace {

std::string error_reading(const std::string& path, const std::string& format) {
    try {
        auto reader = sw::open_trace(path, format);
        while (reader->next()) {
        }
    } catch (const servesim::ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

std::string temp_file(const std::string& name, const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() / "servesim-trace-kinds";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

}  // namespace

TEST_CASE("A directory or a device is not a trace", "[workloads][trace]") {
    for (const std::string format : {"mooncake", "azure"}) {
        // Through common/input_file.h, as every input file.
        CHECK(error_reading(".", format) == ".: a directory; expected a trace file (a regular file)");
        CHECK(error_reading("/dev/null", format) ==
              "/dev/null: a device, not a file; expected a trace file (a regular file)");
        CHECK(error_reading("/dev/zero", format).starts_with("/dev/zero: a device"));
    }
}

TEST_CASE("A read error names the trace file and line", "[workloads][trace]") {
    // /proc/self/mem is a "regular file" whose read() at offset 0 fails with EIO: libstdc++'s file buffer threw its
    // own "basic_filebuf::underflow error reading the file" past the reader, and the run ended with rc 1 naming no
    // file (issue 41).
    if (!std::filesystem::exists("/proc/self/mem")) {
        WARN("no /proc/self/mem here");
        return;
    }
    CHECK(error_reading("/proc/self/mem", "azure") ==
          "/proc/self/mem:1: read error in the trace file (Input/output error)");
}

TEST_CASE("An empty trace is refused when read", "[workloads][trace]") {
    const std::string empty = temp_file("empty.jsonl", "");
    CHECK(error_reading(empty, "mooncake") == empty + ": the trace holds no records (an empty file)");
    const std::string blank = temp_file("blank.jsonl", "\n  \n\n");
    CHECK(error_reading(blank, "mooncake") == blank + ": the trace holds no records (an empty file)");
    // A header alone reads as no record; check_trace (the scenario's check) refuses it.
    sw::TraceConfig header_only;
    header_only.path = temp_file("header.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    header_only.format = "azure";
    try {
        (void)sw::check_trace(header_only);
        FAIL("no ConfigError");
    } catch (const servesim::ConfigError& e) {
        CHECK(std::string(e.what()) == header_only.path + ": the trace holds no records (only a header or blank lines)");
    }
}

TEST_CASE("A line beyond 1 MiB is refused at its line", "[workloads][trace]") {
    // One valid record, then 2 MiB of zero bytes without a newline: refused at line 2 after 1,048,576 bytes.
    const std::string path = temp_file(
        "long.jsonl", std::string(R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]})") +
                          "\n" + std::string(2 << 20, '\0'));
    CHECK(error_reading(path, "mooncake") ==
          path + ":2: line longer than 1048576 bytes; allowed: records up to 1048576 bytes per line");
}

TEST_CASE("Azure records further apart than the clock holds are refused at the line", "[workloads][trace]") {
    // Found by fuzzing (tests/fuzz/corpus/azure/crash-years-apart.csv): 1726 then 2023 is 297 years, 9.37e9 s,
    // beyond int64 nanoseconds (the subtraction overflowed); each year alone is inside 1678-2261.
    const std::string path = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/traces/azure_years_apart.csv";
    const std::string m = error_reading(path, "azure");
    INFO(m);
    CHECK(m.find("azure_years_apart.csv:3: 'TIMESTAMP': 9.37e+09 s after the first record; allowed: up to 1e+09 s") !=
          std::string::npos);
}
