// The sweep fit policy (calibration/sweep_fit.h): points files are read strictly, and a refit of committed sweep
// points rebuilds the curves and recomputes the composed predictions of whole-step composition cases.
#include "calibration/sweep_fit.h"

#include <filesystem>
#include <fstream>
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
