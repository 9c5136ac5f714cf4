// --from-measurements (calibration/measurements.h, calibration/runner/calibrate.h): reading the YAML and CSV
// formats, fitting the curve family to end-to-end timings, and the composed predictions reproducing them.
#include "calibration/measurements.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/hardware_profile.h"
#include "calibration/runner/calibrate.h"
#include "common/error.h"
#include "tests/catch.h"

using namespace servesim::calibration;

namespace {

// Truth used below: prefill of T new tokens after P cached = 20 + 0.08·T + 3e-6·T·(P + T/2) ms;
// decode of B sequences with C context each = 12 + 0.05·B + 2e-5·B·C ms.
double true_prefill(double t, double p) {
    return 20 + 0.08 * t + 3e-6 * t * (p + t / 2);
}

double true_decode(double b, double c) {
    return 12 + 0.05 * b + 2e-5 * b * c;
}

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("servesim-calibration-test-" + name)).string();
}

}  // namespace

TEST_CASE("fit_measurements reproduces end-to-end prefill and decode timings", "[calibration]") {
    Measurements m;
    m.gpu = "NVIDIA RTX 3090";
    m.model = "Qwen3-4B";
    for (double t : {512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
        m.prefill.push_back({t, 0.0, true_prefill(t, 0)});
    }
    m.prefill.push_back({1024.0, 4096.0, true_prefill(1024, 4096)});
    for (double b : {1.0, 8.0, 32.0, 64.0}) {
        for (double c : {1024.0, 4096.0}) {
            m.decode.push_back({b, c, true_decode(b, c)});
        }
    }
    const HardwareProfile p = fit_measurements(m, "synthetic");
    CHECK(p.source == "measurements");
    CHECK_THAT(predict_prefill_ms(p, 3000, 0), Catch::Matchers::WithinRel(true_prefill(3000, 0), 1e-6));
    CHECK_THAT(predict_prefill_ms(p, 512, 2048), Catch::Matchers::WithinRel(true_prefill(512, 2048), 1e-6));
    CHECK_THAT(predict_decode_ms(p, 16, 2000), Catch::Matchers::WithinRel(true_decode(16, 2000), 1e-6));
    // Recovered terms: attn_prefill slope 3e-6 per unit of work, attn_decode 2e-5 per context token.
    CHECK_THAT(p.curves.at("attn_prefill").pieces[0].coefficients[1], Catch::Matchers::WithinRel(3e-6, 1e-6));
    CHECK_THAT(p.curves.at("attn_decode").pieces[0].coefficients[1], Catch::Matchers::WithinRel(2e-5, 1e-6));
    CHECK(p.composition_check.size() == m.prefill.size() + m.decode.size());
    // The written profile passes the strict reader.
    std::ostringstream out;
    write_profile(p, out);
    CHECK_NOTHROW(load_profile_string(out.str(), "fitted.yaml"));
}

TEST_CASE("fit_measurements needs enough distinct points", "[calibration]") {
    Measurements m;
    m.gpu = "test-gpu";
    m.model = "test-model";
    m.prefill = {{512, 0, 30}, {1024, 0, 50}};
    m.decode = {{1, 1024, 12}, {8, 1024, 13}, {32, 1024, 15}};
    CHECK_THROWS_AS(fit_measurements(m, "few.yaml"), servesim::ConfigError);
}

TEST_CASE("read_measurements reads the YAML and CSV formats and rejects bad rows", "[calibration]") {
    const std::string yaml_path = temp_path("measurements.yaml");
    {
        std::ofstream f(yaml_path);
        f << "servesim_measurements: 1\ngpu: NVIDIA RTX 3090\nmodel: Qwen3-4B\nsoftware: vLLM\n"
             "prefill:\n  - {prompt_tokens: 512, ms: 40}\n  - {prompt_tokens: 2048, cached_tokens: 1024, ms: 90}\n"
             "decode:\n  - {batch: 4, context_tokens: 1024, ms: 12.5}\n";
    }
    const Measurements y = read_measurements(yaml_path);
    CHECK(y.gpu == "NVIDIA RTX 3090");
    REQUIRE(y.prefill.size() == 2);
    CHECK(y.prefill[1].cached_tokens == 1024);
    REQUIRE(y.decode.size() == 1);
    CHECK(y.decode[0].ms == 12.5);
    std::remove(yaml_path.c_str());

    const std::string csv_path = temp_path("measurements.csv");
    {
        std::ofstream f(csv_path);
        f << "# measured with vLLM\nkind,size,context_tokens,ms\nprefill,512,0,40\ndecode,8,2048,13.25\n";
    }
    const Measurements c = read_measurements(csv_path);
    REQUIRE(c.prefill.size() == 1);
    REQUIRE(c.decode.size() == 1);
    CHECK(c.decode[0].context_tokens == 2048);
    {
        std::ofstream f(csv_path);
        f << "kind,size,context_tokens,ms\nprefil,512,0,40\n";
    }
    try {
        (void)read_measurements(csv_path);
        FAIL("expected a ConfigError");
    } catch (const servesim::ConfigError& e) {
        CHECK(std::string(e.what()).find("prefil") != std::string::npos);
    }
    std::remove(csv_path.c_str());
}

TEST_CASE("assumed points make the profile's source say so", "[calibration]") {
    // The RTX 3090 seed-study files: decode points are bytes over an assumed bandwidth efficiency, not timings.
    const std::string path = temp_path("assumed.yaml");
    const std::string head = "servesim_measurements: 1\ngpu: NVIDIA RTX 3090\nmodel: Qwen3-4B\n";
    const std::string points =
        "prefill:\n  - {prompt_tokens: 512, ms: 40}\n  - {prompt_tokens: 1024, ms: 60}\n"
        "  - {prompt_tokens: 2048, ms: 100}\n"
        "decode:\n  - {batch: 1, context_tokens: 1024, ms: 12}\n  - {batch: 8, context_tokens: 1024, ms: 13}\n"
        "  - {batch: 32, context_tokens: 2048, ms: 16}\n";
    {
        std::ofstream f(path);
        f << head << "assumed: [decode, decode]\n" << points;
    }
    const Measurements m = read_measurements(path);
    CHECK(m.assumed == std::vector<std::string>{"decode"});  // listed once however often it is named
    const HardwareProfile p = fit_measurements(m, path);
    CHECK(p.source == "measurements+assumed");
    CHECK(p.notes.find("the decode points are assumed, not timed") != std::string::npos);
    std::ostringstream out;
    write_profile(p, out);
    CHECK(load_profile_string(out.str(), "assumed-profile.yaml").source == "measurements+assumed");
    {
        std::ofstream f(path);
        f << head << points;  // nothing assumed: the plain source
    }
    CHECK(fit_measurements(read_measurements(path), path).source == "measurements");
    {
        std::ofstream f(path);
        f << head << "assumed: [latency]\n" << points;
    }
    try {
        (void)read_measurements(path);
        FAIL("expected a ConfigError");
    } catch (const servesim::ConfigError& e) {
        CHECK(std::string(e.what()).find("assumed") != std::string::npos);
        CHECK(std::string(e.what()).find("unknown point list 'latency'; allowed: prefill, decode") !=
              std::string::npos);
    }
    std::remove(path.c_str());
}

TEST_CASE("run_calibrate --from-measurements writes a profile without any GPU", "[calibration]") {
    const std::string in = temp_path("e2e.csv");
    const std::string out = temp_path("e2e-profile.yaml");
    {
        std::ofstream f(in);
        f << "kind,size,context_tokens,ms\n";
        for (double t : {512.0, 1024.0, 4096.0, 8192.0}) {
            f << "prefill," << t << ",0," << true_prefill(t, 0) << "\n";
        }
        for (double b : {1.0, 16.0, 64.0}) {
            for (double ctx : {512.0, 2048.0}) {
                f << "decode," << b << "," << ctx << "," << true_decode(b, ctx) << "\n";
            }
        }
    }
    CalibrateOptions o;
    std::string message;
    REQUIRE(parse_calibrate_args({"--from-measurements", in, "--model", "Qwen3-4B", "--out", out}, o, message));
    std::ostringstream sink;
    std::ostringstream log;
    CHECK(run_calibrate(o, sink, log) == 0);
    const HardwareProfile p = read_profile(out);
    CHECK(p.model == "Qwen3-4B");
    CHECK_THAT(predict_decode_ms(p, 16, 1024), Catch::Matchers::WithinRel(true_decode(16, 1024), 1e-6));
    std::remove(in.c_str());
    std::remove(out.c_str());

    CalibrateOptions bad;
    CHECK_FALSE(parse_calibrate_args({"--frobnicate"}, bad, message));
    CHECK(message.find("frobnicate") != std::string::npos);
    // --weight-dtype: the three recipes the sweep times (kernels/gemm_fp8.cu); anything else names what is allowed.
    CalibrateOptions block;
    CHECK(parse_calibrate_args({"--model", "Qwen3-8B", "--weight-dtype", "fp8-block"}, block, message));
    CHECK(block.weight_dtype == "fp8-block");
    CalibrateOptions int4;
    CHECK_FALSE(parse_calibrate_args({"--model", "Qwen3-8B", "--weight-dtype", "int4"}, int4, message));
    CHECK(message == "--weight-dtype: 'int4' is not modelled; allowed: bf16, fp8, fp8-block");
    // Without a GPU sweep handed in (the library is CUDA-free) the sweep says so and exits with status 2; with one,
    // --model reaches it with the parsed options.
    CalibrateOptions sweep;
    sweep.model = "Qwen3-4B";
    std::ostringstream l2;
    CHECK(run_calibrate(sweep, sink, l2) == 2);
    CHECK(l2.str().find("GPU") != std::string::npos);
    std::string swept_model;
    CHECK(run_calibrate(sweep, sink, l2, [&](const CalibrateOptions& so, std::ostream&, std::ostream&) {
              swept_model = so.model;
              return 7;
          }) == 7);
    CHECK(swept_model == "Qwen3-4B");
}

TEST_CASE("run_calibrate --profile P --refit-points DIR refits without a GPU; bad options name themselves",
          "[calibration]") {
    // The committed Qwen3-4B H200 profile refitted from its own sweep points: the same curves come back (the fit
    // policy is deterministic; the committed points files hold 6 significant digits, the device fit used the full
    // values, so residuals agree to 1e-4) and every whole-step composition case keeps its measured time.
    const std::string out = temp_path("refit-profile.yaml");
    CalibrateOptions o;
    std::string message;
    REQUIRE(parse_calibrate_args({"--profile", "calibration/profiles/h200/Qwen3-4B.yaml", "--refit-points",
                                  "calibration/profiles/h200/points/Qwen3-4B", "--out", out},
                                 o, message));
    std::ostringstream sink;
    std::ostringstream log;
    CHECK(run_calibrate(o, sink, log) == 0);
    const HardwareProfile before = read_profile("calibration/profiles/h200/Qwen3-4B.yaml");
    const HardwareProfile after = read_profile(out);
    REQUIRE(after.curves.size() == before.curves.size());
    for (const auto& [name, curve] : before.curves) {
        CHECK(after.curves.at(name).pieces.size() == curve.pieces.size());
        CHECK_THAT(after.curves.at(name).max_rel_residual,
                   Catch::Matchers::WithinAbs(curve.max_rel_residual, 1e-4));
    }
    REQUIRE(after.composition_check.size() == before.composition_check.size());
    CHECK(after.composition_check[0].measured_ms == before.composition_check[0].measured_ms);
    std::remove(out.c_str());

    CalibrateOptions missing;
    REQUIRE(parse_calibrate_args({"--refit-points", "somewhere"}, missing, message));
    std::ostringstream l2;
    CHECK(run_calibrate(missing, sink, l2) == 2);  // bad input: 2, as every servesim command
    CHECK(l2.str().find("--refit-points needs --profile") != std::string::npos);
    CalibrateOptions negative;
    CHECK_FALSE(parse_calibrate_args({"--sustain-ms", "-5"}, negative, message));
    CHECK(message == "--sustain-ms expects milliseconds in [0, 60000], got '-5'");
    CalibrateOptions trailing;
    CHECK_FALSE(parse_calibrate_args({"--tensor-parallel-size", "2x"}, trailing, message));
    CHECK(message == "--tensor-parallel-size expects a positive integer, got '2x'");
    CalibrateOptions good;
    REQUIRE(parse_calibrate_args({"--sustain-ms", "150.5", "--tensor-parallel-size", "4"}, good, message));
    CHECK(good.sustain_ms == 150.5);
    CHECK(good.tensor_parallel_size == 4);
}

TEST_CASE("fit_host_work: step times give the host's fixed and per-request work, or with async its exposed part",
          "[calibration][host_work]") {
    // The model predicts 2.0 ms for every point (GPU and the other host terms); measured 2.0 + 0.300 + 0.005·B:
    // B = 1 → 2.305, 8 → 2.340, 32 → 2.460 ms. The residuals 0.305, 0.340, 0.460 lie on 0.300 + 0.005·B exactly:
    // step_us 300, per_request_us 5, RMS 0.
    Measurements m;
    m.async_scheduling = false;
    m.decode = {{1, 1000, 2.305}, {8, 1000, 2.340}, {32, 1000, 2.460}};
    const auto predicted = [](const DecodeMeasurement&) { return 2.0; };
    const HostWorkFit f = fit_host_work(m, predicted, "m.yaml");
    CHECK(std::abs(f.step_us - 300.0) < 1e-6);
    CHECK(std::abs(f.per_request_us - 5.0) < 1e-6);
    CHECK(f.num_points == 3);
    CHECK(f.rms_residual_ms < 1e-9);
    // A slope that comes out negative is held at 0 (the residuals' mean): 0.4, 0.3, 0.2 → 300 µs, 0 per request.
    m.decode = {{1, 1000, 2.4}, {8, 1000, 2.3}, {32, 1000, 2.2}};
    const HostWorkFit flat = fit_host_work(m, predicted, "m.yaml");
    CHECK(std::abs(flat.step_us - 300.0) < 1e-6);
    CHECK(flat.per_request_us == 0.0);
    // With async scheduling the GPU hides the rest: the residuals 0.4, 0.3, 0.2 are the exposed part, their mean
    // 300 µs; RMS √((0.1² + 0 + 0.1²)/3) = 0.0816 ms.
    m.async_scheduling = true;
    const HostWorkFit async = fit_host_work(m, predicted, "m.yaml");
    CHECK(async.async_scheduling);
    CHECK(std::abs(async.exposed_us - 300.0) < 1e-6);
    CHECK(std::abs(async.rms_residual_ms - std::sqrt(0.02 / 3)) < 1e-9);
    // Not stated: refused, naming the file and the key.
    m.async_scheduling.reset();
    try {
        (void)fit_host_work(m, predicted, "m.yaml");
        FAIL("fitted host work without knowing whether async scheduling ran");
    } catch (const servesim::ConfigError& e) {
        CHECK(std::string(e.what()).starts_with("m.yaml: the host work fit needs `async_scheduling: true` or"));
    }
    m.async_scheduling = false;
    m.decode = {{8, 1000, 2.3}, {8, 2000, 2.4}, {8, 3000, 2.5}};  // one batch size: no slope to fit
    CHECK_THROWS_AS(fit_host_work(m, predicted, "m.yaml"), servesim::ConfigError);
}
