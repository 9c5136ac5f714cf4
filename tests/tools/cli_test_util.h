// Running the servesim binary from a test as a user's shell would (tests/tools/*cli*_test.cpp): its exit status
// and what it printed. SERVESIM_BINARY comes from tests/CMakeLists.txt.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "tests/catch.h"

namespace servesim::test {

struct Ran {
    int status = -1;
    std::string output;  // stdout, with stderr unless left out
};

// `env` is prepended to the command ("NAME=value "); `with_stderr` false sends stderr to /dev/null; `binary` is
// the released servesim unless a test names another (SERVESIM_FAULTS_BINARY, the build with the fault hook).
inline Ran run_servesim(const std::string& args, const std::string& env = "", bool with_stderr = true,
                        const std::string& binary = SERVESIM_BINARY) {
    Ran r;
    const std::string cmd = env + "'" + binary + "' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    std::size_t n = 0;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
        r.output.append(buf.data(), n);
    }
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace servesim::test
