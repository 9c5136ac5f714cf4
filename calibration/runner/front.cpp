// `servesim` of the calibration-only build (cmake -DSERVESIM_CALIBRATION_ONLY=ON, what a GPU machine builds): that
// build has no simulator, so its `servesim` is this front end, which runs `servesim calibrate ...` exactly as the full
// CLI does (same arguments, same run_calibrate) and refuses every other command by name. With CUDA it links the GPU
// sweep (gpu_sweep.h run_gpu_sweep) directly, so `servesim calibrate --model M` from the README works on the GPU
// machine without the separate servesim-calibrate (which this build still makes too); without CUDA it says that no
// sweep can run here, as servesim-calibrate's fallback does. Not a vLLM mechanism.
#include <iostream>
#include <string>
#include <vector>

#include "calibration/runner/calibrate.h"
#ifdef SERVESIM_FRONT_WITH_GPU_SWEEP
#include "calibration/runner/gpu_sweep.h"
#endif

namespace {

constexpr const char* kUsage =
    "usage: servesim calibrate ...   (this is the calibration-only build: `calibrate` is its one command)\n"
    "run `servesim calibrate --help` for its options; the simulator's commands (run, sweep, plan, ...) need the full\n"
    "build: cmake without -DSERVESIM_CALIBRATION_ONLY (docs/BUILD.md)\n";

}  // namespace

int main(int argc, char** argv) {
    namespace cal = servesim::calibration;
    const std::vector<std::string> all(argv + 1, argv + argc);
    if (all.empty() || all[0] == "--help" || all[0] == "-h" || all[0] == "help") {
        std::cout << kUsage;
        return all.empty() ? 2 : 0;
    }
    if (all[0] != "calibrate") {
        std::cerr << "servesim: error: '" << all[0]
                  << "' is not available in the calibration-only build (SERVESIM_CALIBRATION_ONLY); allowed: "
                     "calibrate. Build without -DSERVESIM_CALIBRATION_ONLY for the simulator's commands.\n";
        return 2;
    }
    const std::vector<std::string> args(all.begin() + 1, all.end());
    for (const auto& a : args) {
        if (a == "--help" || a == "-h") {
            std::cout << cal::kCalibrateUsage;
            return 0;
        }
    }
    cal::CalibrateOptions options;
    std::string message;
    if (!cal::parse_calibrate_args(args, options, message)) {
        for (auto p = message.find("servesim-calibrate"); p != std::string::npos; p = message.find("servesim-calibrate")) {
            message.replace(p, 18, "servesim calibrate");
        }
        std::cerr << "servesim: error: calibrate: " << message << "\n";
        return 2;
    }
#ifdef SERVESIM_FRONT_WITH_GPU_SWEEP
    return cal::run_calibrate(options, std::cout, std::cerr, cal::run_gpu_sweep);
#else
    return cal::run_calibrate(options, std::cout, std::cerr);
#endif
}
