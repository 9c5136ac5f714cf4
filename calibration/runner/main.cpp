// servesim-calibrate: command-line wrapper around run_calibrate (calibration/runner/calibrate.h) with the GPU sweep
// (gpu_sweep.h). Built only with CUDA; `servesim calibrate --model M` runs this program (exec_calibrate.h).
#include <iostream>
#include <string>
#include <vector>

#include "calibration/runner/calibrate.h"
#include "calibration/runner/gpu_sweep.h"

int main(int argc, char** argv) {
    servesim::calibration::CalibrateOptions options;
    std::string message;
    if (!servesim::calibration::parse_calibrate_args(std::vector<std::string>(argv + 1, argv + argc), options,
                                                     message)) {
        std::cerr << "servesim-calibrate: " << message << "\n";
        return 1;
    }
    return servesim::calibration::run_calibrate(options, std::cout, std::cerr, servesim::calibration::run_gpu_sweep);
}
