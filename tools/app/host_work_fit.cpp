// Host work fitted from measured step times; see host_work_fit.h.
#include "tools/app/host_work_fit.h"

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <ostream>

#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/host_work.h"

namespace servesim::app {

engine::RooflineParams roofline_params(const calibration::GpuSpec& gpu) {
    engine::RooflineParams params;
    params.gpu_name = gpu.name;
    params.peak_flops_per_s = gpu.bf16_dense_flops_per_s;
    // Quantized GEMMs (docs/QUANTIZATION.md): int8 tensor cores run at the fp8 rate on Ada/Hopper/Blackwell and at
    // twice bf16 on Ampere (A100 624 vs 312 TOPS), a stated approximation. fp4 tensor cores (Blackwell on) run at the
    // GPU file's dense fp4 rate (calibration/gpus/*.yaml); without them (0), NVFP4 W4A4 runs the weight-only Marlin
    // fallback.
    params.fp8_flops_per_s = gpu.fp8_dense_flops_per_s;
    params.int8_flops_per_s =
        gpu.fp8_dense_flops_per_s > 0 ? gpu.fp8_dense_flops_per_s : 2.0 * gpu.bf16_dense_flops_per_s;
    params.fp4_flops_per_s = gpu.fp4_dense_flops_per_s;
    params.memory_bandwidth_bytes_per_s = gpu.memory_bandwidth_bytes_per_s;
    params.gemm_efficiency = gpu.gemm_efficiency;
    params.attention_efficiency = gpu.attention_efficiency;
    params.gdn_efficiency = gpu.gdn_efficiency;
    params.bandwidth_efficiency = gpu.bandwidth_efficiency;
    params.decode_attention_efficiency = gpu.decode_attention_efficiency;
    return params;
}

calibration::HostWorkFit fit_host_work_on_roofline(const calibration::Measurements& m, const std::string& gpu,
                                                   const std::string& file) {
    const models::ModelSpec model = models::resolve_model(m.model);
    engine::RooflineParams params = roofline_params(calibration::find_gpu(gpu));
    params.max_cudagraph_tokens = 512;
    // Every prior but the fitted terms: without async scheduling step_us and per_request_us are fitted, with it
    // exposed_us (the rest is then hidden by the GPU unless the host outlasts it).
    const bool async = m.async_scheduling.value_or(false);
    engine::HostWorkParams host;
    if (async) {
        host.exposed_us = 0;
    } else {
        host.step_us = 0;
        host.per_request_us = 0;
    }
    const engine::HostWorkCostModel cost(std::make_unique<engine::RooflineCostModel>(model, model.dtype, params),
                                         engine::HostWorkModel(host, model, 1, engine::CudaGraphSizes(512)));
    return calibration::fit_host_work(
        m,
        [&](const calibration::DecodeMeasurement& d) {
            engine::BatchShape s;
            const auto batch = static_cast<std::int64_t>(d.batch);
            s.num_tokens = s.num_decode_seqs = s.num_seqs = s.num_sampled_seqs = batch;
            s.decode_context_tokens = static_cast<std::int64_t>(d.batch * d.context_tokens);
            s.host_overlapped = async;
            return cost.step_cost(s).total_ms();
        },
        file);
}

int run_host_work_fit(const calibration::CalibrateOptions& o, std::ostream& out, std::ostream& log) {
    try {
        if (o.from_measurements.empty()) {
            throw ConfigError("--host-work-gpu needs --from-measurements FILE (decode step times measured without "
                              "async scheduling)");
        }
        calibration::Measurements m = calibration::read_measurements(o.from_measurements);
        if (!o.model.empty()) {
            m.model = o.model;
        }
        const calibration::HostWorkFit f = fit_host_work_on_roofline(m, o.host_work_gpu, o.from_measurements);
        const std::string keys =
            f.async_scheduling
                ? fmt::format("  host_exposed_us: {:.1f}\n", f.exposed_us)
                : fmt::format("  host_step_us: {:.1f}\n  host_per_request_us: {:.2f}\n", f.step_us, f.per_request_us);
        const std::string text = fmt::format(
            "# host work fitted by servesim calibrate --from-measurements {} --host-work-gpu {} ({} on {}, async "
            "scheduling {}):\n# {} decode points, RMS residual {:.4f} ms; docs/HOST-WORK.md\nengine:\n{}",
            o.from_measurements, o.host_work_gpu, m.model, o.host_work_gpu, f.async_scheduling ? "on" : "off",
            f.num_points, f.rms_residual_ms, keys);
        if (o.out_path.empty()) {
            out << text;
        } else {
            std::ofstream(o.out_path) << text;
            log << "servesim calibrate: wrote " << o.out_path << "\n";
        }
        return 0;
    } catch (const ConfigError& e) {
        log << "servesim calibrate: error: " << e.what() << "\n";
        return 2;
    }
}

}  // namespace servesim::app
