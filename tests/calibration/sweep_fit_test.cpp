// The sweep fit policy (calibration/sweep_fit.h): points files are read strictly, and a refit of committed sweep
// points rebuilds the curves and recomputes the composed predictions of whole-step composition cases.
#include "calibration/sweep_fit.h"

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <sstream>

#include "calibration/measurements.h"
#include "common/error.h"
#include "tests/catch.h"

using namespace servesim;
using namespace servesim::calibration;

namespace {

std::string temp_file(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / ("servesim_sweep_fit_" + name);
    std::ofstream(path) << text;
    return path.string();
}

}  // namespace

TEST_CASE("sweep points: header of variables then ms, one row per point", "[calibration]") {
    const SweepPoints p = read_sweep_points(temp_file("ok.csv", "context_tokens,sequences,ms\n128,1,0.25\n512,4,0.5\n"));
    CHECK(p.variables == std::vector<std::string>{"context_tokens", "sequences"});
    REQUIRE(p.ms.size() == 2);
    CHECK(p.rows[1] == std::vector<double>{512, 4});
    CHECK(p.ms[1] == 0.5);
}

TEST_CASE("sweep points: a short row, a non-number or a zero time names the file and line", "[calibration]") {
    auto rejection = [](const std::string& name, const std::string& text) -> std::string {
        try {
            (void)read_sweep_points(temp_file(name, text));
        } catch (const ConfigError& e) {
            return e.what();
        }
        return "";
    };
    const std::string short_row = rejection("short.csv", "tokens,ms\n1,2\n3\n");
    CHECK(short_row.find("short.csv:3") != std::string::npos);
    CHECK(short_row.find("want 2") != std::string::npos);
    const std::string not_number = rejection("nan.csv", "tokens,ms\n1,x\n");
    CHECK(not_number.find("nan.csv:2") != std::string::npos);
    CHECK(not_number.find("'x'") != std::string::npos);
    CHECK(rejection("zero.csv", "tokens,ms\n1,0\n").find("ms must be > 0") != std::string::npos);
    CHECK(rejection("hdr.csv", "tokens,time\n1,2\n").find("'ms'") != std::string::npos);
}

TEST_CASE("refit of the committed Llama-3.1-8B H200 points: GEMM within 3 %, predictions recomputed",
          "[calibration]") {
    const HardwareProfile before = read_profile("calibration/profiles/h200/Llama-3.1-8B.yaml");
    std::ostringstream log;
    const HardwareProfile after = refit_profile(before, "calibration/profiles/h200/points/Llama-3.1-8B", log);
    CHECK(after.curves.at("gemm").max_rel_residual <= 0.03);
    CHECK(after.curves.at("gemm").num_points == before.curves.at("gemm").num_points);
    // Every whole-step case now carries the refitted curves' prediction; the measured times are untouched.
    REQUIRE(after.composition_check.size() == before.composition_check.size());
    for (std::size_t i = 0; i < after.composition_check.size(); ++i) {
        const auto& c = after.composition_check[i];
        CHECK(c.measured_ms == before.composition_check[i].measured_ms);
        if (c.case_name == "forward_prefill_T4096") {
            CHECK(c.predicted_ms == predict_prefill_ms(after, 4096, 0));
        }
        if (c.case_name == "forward_decode_B64_C2049") {
            CHECK(c.predicted_ms == predict_decode_ms(after, 64, 2049));
        }
    }
}

TEST_CASE("attn_prefill work-span: the work curve from fresh prompts, the span line from span-bound chunks",
          "[calibration]") {
    // Truth (Brent's bound): max(0.1 + 1e-6·work, 0.5 + 1e-3·(cached + chunk)). Fresh prompts of c tokens
    // (work c²/2) are span-bound up to ~1.2k tokens (c = 1024: 0.62 ms of work vs 1.52 of span) and work-bound
    // above (c = 8192: 33.65 vs 8.69). 256-token chunks on 1k/4k/16k cached are span-bound (16k: 4.3 ms of work vs
    // 17.14 ms of span); a 2048-token chunk on 1k cached is work-bound (4.29 ms vs 3.57).
    auto truth = [](double work, double span) { return std::max(0.1 + 1e-6 * work, 0.5 + 1e-3 * span); };
    SweepPoints pts;
    pts.variables = {"work", "max_context_tokens"};
    for (double c : {64.0, 256.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0}) {
        pts.rows.push_back({c * c / 2, c});
        pts.ms.push_back(truth(c * c / 2, c));
    }
    for (double cached : {1024.0, 4096.0, 16384.0}) {
        pts.rows.push_back({256 * (cached + 128), cached + 256});
        pts.ms.push_back(truth(256 * (cached + 128), cached + 256));
    }
    pts.rows.push_back({2048 * (1024 + 1024.0), 1024 + 2048.0});
    pts.ms.push_back(truth(2048 * (1024 + 1024.0), 1024 + 2048.0));
    std::ostringstream log;
    const std::vector<Curve> curves = fit_attn_prefill_curves(pts, log);
    REQUIRE(curves.size() == 2);
    CHECK(curves[0].name == "attn_prefill");
    CHECK(curves[1].name == "attn_prefill_span");
    CHECK(log.str().find("span-bound") != std::string::npos);
    HardwareProfile p;
    p.curves["attn_prefill"] = curves[0];
    p.curves["attn_prefill_span"] = curves[1];
    // Every point, fresh or cached, within 10 % of max(work curve, span line); the span-bound 256 on 16k within 2 %.
    for (std::size_t i = 0; i < pts.ms.size(); ++i) {
        CHECK_THAT(evaluate_attn_prefill(p, pts.rows[i][0], pts.rows[i][1]),
                   Catch::Matchers::WithinRel(pts.ms[i], 0.10));
    }
    CHECK_THAT(evaluate_attn_prefill(p, 256 * (16384 + 128.0), 16384 + 256.0), Catch::Matchers::WithinRel(17.14, 0.02));
    // The work-only curve would price that chunk like the work-bound 2048-token chunk of the same work: 4.3 ms.
    CHECK(curves[0].evaluate(256 * (16384 + 128.0)) < 6.0);
}
