#include "calibration/runner/gpu_sweep.h"
namespace servesim::calibration {
bool cuda_device_present(int, std::string*) { return false; }
HardwareProfile sweep_model(const models::ModelSpec&, const std::string&, const SweepOptions&, std::ostream&) { return {}; }
}
