// run_calibrate and the servesim-calibrate argument parser (calibration/runner/calibrate.h). Dispatches to the
// measurement fit, the composition merge, the refit, or the GPU sweep its caller hands in. CUDA-free.
#include "calibration/runner/calibrate.h"

#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "calibration/hardware_profile.h"
#include "calibration/measurements.h"
#include "calibration/runner/sweep_plan.h"
#include "calibration/sweep_fit.h"
#include "common/error.h"
#include "models/model_registry.h"

namespace servesim::calibration {

bool needs_gpu_sweep(const CalibrateOptions& o) {
    return o.from_measurements.empty() && o.composition_path.empty() && o.refit_points.empty();
}

void emit_profile(const HardwareProfile& p, const CalibrateOptions& o, std::ostream& out, std::ostream& log) {
    if (o.out_path.empty()) {
        write_profile(p, out);
    } else {
        write_profile_file(p, o.out_path);
        log << "servesim-calibrate: wrote " << o.out_path << "\n";
    }
}

void announce_sweep(const CalibrateOptions& o, std::ostream& log) {
    const SweepEstimate e = estimate_sweep(models::resolve_model(o.model), o);
    log << fmt::format(
        "servesim-calibrate: {}{}: the GPU sweep takes about {:.0f} s ({:.1f} min): {} timed measurements ({}) of "
        "{:.2f} s each ({:.0f} ms of sustained load, --sustain-ms, then ~150 ms of timed replays: the sweep's timing "
        "policy); start-up and the fits add a few seconds\n",
        o.model, o.quick ? " (quick)" : "", e.seconds, e.seconds / 60.0, e.timed_measurements, e.breakdown,
        e.per_measurement_s, o.sustain_ms);
    log.flush();
}

int run_calibrate(const CalibrateOptions& o, std::ostream& out, std::ostream& log, const GpuSweep& gpu_sweep,
                  bool announce) {
    try {
        if (!o.host_work_gpu.empty()) {
            throw ConfigError("--host-work-gpu fits against servesim's cost models: run it as `servesim calibrate`");
        }
        if (!o.from_measurements.empty()) {
            Measurements m = read_measurements(o.from_measurements);
            if (!o.model.empty()) {
                m.model = o.model;
            }
            if (m.model.empty()) {
                throw ConfigError(o.from_measurements + ": no model named (give --model or a `model:` key)");
            }
            HardwareProfile p = fit_measurements(m, o.from_measurements);
            emit_profile(p, o, out, log);
            return 0;
        }
        if (!o.composition_path.empty()) {
            if (o.profile_in.empty()) {
                throw ConfigError("--add-composition needs --profile FILE (the profile to predict with)");
            }
            HardwareProfile p = read_profile(o.profile_in);
            add_composition_from_file(p, o.composition_path, o.composition_label);
            emit_profile(p, o, out, log);
            return 0;
        }
        if (!o.refit_points.empty()) {
            if (o.profile_in.empty()) {
                throw ConfigError("--refit-points needs --profile FILE (the profile whose curves are refitted)");
            }
            HardwareProfile p = refit_profile(read_profile(o.profile_in), o.refit_points, log);
            emit_profile(p, o, out, log);
            return 0;
        }
        if (o.model.empty()) {
            throw ConfigError("--model is required (a preset name or a config.json path)");
        }
        if (gpu_sweep) {
            if (announce) {
                announce_sweep(o, log);  // resolves the model too: an unknown one is refused before the GPU is touched
            }
            return gpu_sweep(o, out, log);
        }
        log << "servesim-calibrate: this program has no GPU sweep (a build without CUDA) and no GPU can be used; "
               "calibration needs one. Use --from-measurements to fit timings measured elsewhere.\n";
        return 2;
    } catch (const ConfigError& e) {
        log << "servesim-calibrate: error: " << e.what() << "\n";
        return 2;  // bad input, as every servesim command
    }
}

bool parse_calibrate_args(const std::vector<std::string>& args, CalibrateOptions& o, std::string& message) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](std::string& dst) {
            if (i + 1 >= args.size()) {
                message = a + " needs a value";
                return false;
            }
            dst = args[++i];
            return true;
        };
        // A number in [lo, hi], the whole argument parsed (no trailing characters), else a message naming it.
        auto number = [&](auto& dst, auto lo, auto hi, const char* expects) {
            std::string n;
            if (!value(n)) {
                return false;
            }
            std::remove_reference_t<decltype(dst)> v{};
            const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
            if (n.empty() || ec != std::errc() || end != n.data() + n.size() || !(v >= lo && v <= hi)) {
                message = a + " expects " + expects + ", got '" + n + "'";
                return false;
            }
            dst = v;
            return true;
        };
        if (a == "--model") {
            if (!value(o.model)) {
                return false;
            }
        } else if (a == "--out") {
            if (!value(o.out_path)) {
                return false;
            }
        } else if (a == "--quick") {
            o.quick = true;
        } else if (a == "--host-work-gpu") {
            if (!value(o.host_work_gpu)) {
                return false;
            }
        } else if (a == "--from-measurements") {
            if (!value(o.from_measurements)) {
                return false;
            }
        } else if (a == "--profile") {
            if (!value(o.profile_in)) {
                return false;
            }
        } else if (a == "--add-composition") {
            if (!value(o.composition_path)) {
                return false;
            }
        } else if (a == "--label") {
            if (!value(o.composition_label)) {
                return false;
            }
        } else if (a == "--refit-points") {
            if (!value(o.refit_points)) {
                return false;
            }
        } else if (a == "--sustain-ms") {
            if (!number(o.sustain_ms, 0.0, 60000.0, "milliseconds in [0, 60000]")) {
                return false;
            }
        } else if (a == "--log-dir") {
            if (!value(o.log_dir)) {
                return false;
            }
        } else if (a == "--tensor-parallel-size") {
            if (!number(o.tensor_parallel_size, 1, std::numeric_limits<int>::max(), "a positive integer")) {
                return false;
            }
        } else if (a == "--weight-dtype") {
            if (!value(o.weight_dtype)) {
                return false;
            }
            if (o.weight_dtype != "bf16" && o.weight_dtype != "fp8" && o.weight_dtype != "fp8-block") {
                message = "--weight-dtype: '" + o.weight_dtype + "' is not modelled; allowed: bf16, fp8, fp8-block";
                return false;
            }
        } else if (a == "--device") {
            std::string d;
            if (!value(d)) {
                return false;
            }
            try {
                o.device = std::stoi(d);
            } catch (const std::logic_error&) {
                message = "--device expects an integer, got '" + d + "'";
                return false;
            }
        } else {
            message = "unknown argument '" + a +
                      "'; usage: servesim-calibrate --model M [--out FILE] [--quick] [--log-dir DIR] "
                      "[--tensor-parallel-size N] [--sustain-ms MS] [--weight-dtype bf16|fp8|fp8-block] | "
                      "--from-measurements FILE [--model M] [--host-work-gpu GPU] [--out FILE] | --profile FILE "
                      "--add-composition FILE "
                      "[--label L] [--out FILE] | --profile FILE --refit-points DIR [--out FILE]";
            return false;
        }
    }
    return true;
}

}  // namespace servesim::calibration
