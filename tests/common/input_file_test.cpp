// common/input_file.h: every input path goes through check_input_file / read_input_file, which refuse anything but
// a readable regular file within a size bound and name the path and the reason (issue 41: /dev/zero was read until
// bad_alloc, a FIFO blocked forever, a symlink loop printed a raw `filesystem error`).
#include "common/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temp folder, removed at the end of the test.
struct TempDir {
    fs::path path;
    TempDir() {
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        const std::string name = "servesim-input-file-" + std::to_string(::getpid()) + "-" + std::to_string(now);
        path = fs::temp_directory_path() / name;
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// The message a refused read gives ("" when it is accepted).
std::string read_error(const std::string& path, std::uintmax_t max_bytes = kMaxInputFileBytes) {
    try {
        (void)read_input_file(path, "scenario file", max_bytes);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

TEST_CASE("/dev/zero is refused as a device before a byte is read", "[common][input_file]") {
    // It used to be read until bad_alloc (an endless stream of zeros).
    CHECK(read_error("/dev/zero") ==
          "/dev/zero: a device, not a file; expected a scenario file (a regular file)");
}

TEST_CASE("A FIFO is refused without opening it (opening one with no writer blocks)", "[common][input_file]") {
    const TempDir dir;
    const std::string fifo = (dir.path / "scenario.yaml").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Returns at once: the check looks at the file's type and never opens it.
    CHECK(read_error(fifo) ==
          fifo + ": a FIFO (named pipe), which may never end or never open; expected a scenario file (a regular file)");
}

TEST_CASE("A directory, a missing file and a symlink loop are named in words", "[common][input_file]") {
    const TempDir dir;
    CHECK(read_error(dir.path.string()) ==
          dir.path.string() + ": a directory; expected a scenario file (a regular file)");
    const std::string missing = (dir.path / "none.yaml").string();
    CHECK(read_error(missing) == missing + ": cannot open the scenario file: no such file");
    // a -> b -> a: std::filesystem used to surface as "filesystem error: status: Too many levels of symbolic links".
    const fs::path a = dir.path / "a.yaml";
    const fs::path b = dir.path / "b.yaml";
    fs::create_symlink(b, a);
    fs::create_symlink(a, b);
    CHECK(read_error(a.string()) ==
          a.string() + ": a loop of symbolic links; expected a scenario file (a regular file)");
    CHECK(read_error("") == "an empty path was given for the scenario file");
}

TEST_CASE("A regular file is read whole up to the bound, and refused past it", "[common][input_file]") {
    const TempDir dir;
    const std::string file = (dir.path / "s.yaml").string();
    {
        std::ofstream out(file, std::ios::binary);
        out << "model: Qwen3-4B\n";  // 16 bytes
    }
    CHECK(read_input_file(file, "scenario file", 16) == "model: Qwen3-4B\n");
    CHECK(read_error(file, 15) == file + ": 16 bytes is larger than a scenario file can be (at most 15 bytes)");
    // A link to a regular file is followed.
    const fs::path link = dir.path / "link.yaml";
    fs::create_symlink(file, link);
    CHECK(read_input_file(link.string(), "scenario file") == "model: Qwen3-4B\n");
    // A file that cannot be read is named (skipped as root, who reads anything).
    if (::geteuid() != 0) {
        fs::permissions(file, fs::perms::none);
        CHECK(read_error(file) == file + ": cannot open the scenario file (not readable)");
    }
}

TEST_CASE("A streaming reader gets an open stream or the same refusals", "[common][input_file]") {
    std::string message;
    try {
        (void)open_input_file("/dev/zero", "trace file");
    } catch (const ConfigError& e) {
        message = e.what();
    }
    CHECK(message == "/dev/zero: a device, not a file; expected a trace file (a regular file)");
}

TEST_CASE("A control character the user wrote is escaped in an error", "[common][error]") {
    // A raw carriage return in a key used to be echoed as is, so the terminal overwrote the start of the message.
    CHECK(std::string(ConfigError("r.yaml", 2, "foo\r", "unknown key").what()) == "r.yaml:2: 'foo\\r': unknown key");
    CHECK(std::string(ConfigError("bell \a and escape \x1b[2J").what()) == "bell \\x07 and escape \\x1b[2J");
    // Newlines and tabs stay: multi-line messages are intended.
    CHECK(std::string(ConfigError("a\n\tb").what()) == "a\n\tb");
}

}  // namespace
}  // namespace servesim
