// The CLI's way to the GPU sweep: `servesim calibrate --model M` replaces itself with the separate program
// servesim-calibrate (built only with CUDA), so that `servesim` itself links no CUDA library and starts without
// loading cudart/cuBLAS. Looked for next to the running executable first (the build writes both into
// <build>/tools/), then on PATH. POSIX exec; no fork, the child's exit status is the command's.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::calibration {

// Execs servesim-calibrate with `args` (the arguments after `calibrate`). Returns only when it cannot be run: exit
// status 2, with a message on `log` saying where it was looked for and how to build it.
int exec_servesim_calibrate(const std::vector<std::string>& args, std::ostream& log);

}  // namespace servesim::calibration
