// exec_servesim_calibrate: see exec_calibrate.h.
#include "calibration/runner/exec_calibrate.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <ostream>
#include <system_error>

namespace servesim::calibration {

namespace {

constexpr const char* kProgram = "servesim-calibrate";

std::vector<char*> argv_of(std::string& program, std::vector<std::string>& args) {
    std::vector<char*> argv;
    argv.push_back(program.data());
    for (std::string& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    return argv;
}

}  // namespace

int exec_servesim_calibrate(const std::vector<std::string>& args_in, std::ostream& log) {
    std::vector<std::string> args = args_in;
    std::string program = kProgram;
    std::vector<char*> argv = argv_of(program, args);
    std::cout.flush();
    log.flush();
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::string beside;
    if (!ec) {
        beside = (self.parent_path() / kProgram).string();
        if (::access(beside.c_str(), X_OK) == 0) {
            ::execv(beside.c_str(), argv.data());
            log << "servesim calibrate: cannot run " << beside << ": " << std::strerror(errno) << "\n";
            return 2;
        }
    }
    ::execvp(kProgram, argv.data());  // returns only on failure
    log << "servesim calibrate: the GPU sweep is the separate program " << kProgram << " (built only with CUDA: "
        << "cmake -DSERVESIM_CUDA=ON), found neither " << (beside.empty() ? "next to servesim" : "at " + beside)
        << " nor on PATH; no GPU can be used. Use --from-measurements to fit timings measured elsewhere.\n";
    return 2;
}

}  // namespace servesim::calibration
