// HardwareProfile format (calibration/hardware_profile.h): evaluate() rules, writer/reader round trip, strict
// rejection of malformed curves with the curve named, and the committed H200 profiles reading back.
#include "calibration/hardware_profile.h"

#include <cmath>
#include <sstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"

using namespace servesim::calibration;

namespace {

Curve single(const std::string& name, const std::string& var, std::vector<CurvePiece> pieces) {
    Curve c;
    c.name = name;
    c.variables = {var};
    c.pieces = std::move(pieces);
    c.r2 = 0.999;
    c.max_rel_residual = 0.01;
    c.num_points = 10;
    return c;
}

Curve multi(const std::string& name, std::vector<std::string> vars, std::vector<double> coef) {
    Curve c;
    c.name = name;
    c.variables = std::move(vars);
    c.pieces = {{1, 100, std::move(coef)}};
    c.r2 = 0.99;
    c.max_rel_residual = 0.05;
    c.num_points = 12;
    return c;
}

HardwareProfile sample_profile(bool hybrid) {
    HardwareProfile p;
    p.gpu = "NVIDIA H200";
    p.date = "2026-11-29";
    p.software = "CUDA 13.0";
    p.model = "Qwen3-4B";
    p.source = "calibrated";
    p.hybrid = hybrid;
    p.curves["gemm"] = single("gemm", "tokens", {{1, 256, {2.0, 0.001, 0.0}}, {256, 32768, {1.5, 0.003, 1e-8}}});
    p.curves["lm_head"] = single("lm_head", "tokens", {{1, 1024, {0.3, 0.001, 0.0}}});
    p.curves["attn_prefill"] = single("attn_prefill", "work", {{2048, 5e8, {0.1, 2.6e-6, 0.0}}});
    p.curves["attn_decode"] = multi("attn_decode", {"context_tokens", "sequences"}, {0.1, 1.4e-5, 0.002});
    p.curves["overhead"] = single("overhead", "sequences", {{1, 1024, {0.02, 0.0001, 0.0}}});
    if (hybrid) {
        p.curves["gdn_prefill"] = multi("gdn_prefill", {"tokens", "chunks"}, {1.0, 0.007, 0.01});
        p.curves["gdn_decode"] = single("gdn_decode", "sequences", {{1, 1024, {0.2, 0.02, 0.0}}});
    }
    p.composition_check.push_back({"forward_prefill_T512", 8.0, 7.5});
    return p;
}

std::string to_yaml(const HardwareProfile& p) {
    std::ostringstream s;
    write_profile(p, s);
    return s.str();
}

// Replaces the first occurrence of `from` in `text`.
std::string edit(std::string text, const std::string& from, const std::string& to) {
    const auto pos = text.find(from);
    REQUIRE(pos != std::string::npos);
    return text.replace(pos, from.size(), to);
}

std::string rejection(const std::string& text) {
    try {
        (void)load_profile_string(text, "bad.yaml");
    } catch (const servesim::ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("Curve::evaluate picks the piece, clamps below and extrapolates linearly above", "[calibration]") {
    const Curve c = single("gemm", "tokens", {{10, 100, {1.0, 0.1, 0.001}}, {100, 1000, {5.0, 0.05, 0.0}}});
    // Inside piece 1 at x = 50: 1 + 5 + 2.5 = 8.5.
    CHECK_THAT(c.evaluate(50.0), Catch::Matchers::WithinRel(8.5, 1e-5));
    // The shared knee belongs to the first piece: 1 + 10 + 10 = 21.
    CHECK_THAT(c.evaluate(100.0), Catch::Matchers::WithinRel(21.0, 1e-5));
    // Piece 2 at 500: 5 + 25 = 30.
    CHECK_THAT(c.evaluate(500.0), Catch::Matchers::WithinRel(30.0, 1e-5));
    // Below the range: clamped to x_min = 10 → 1 + 1 + 0.1 = 2.1.
    CHECK_THAT(c.evaluate(1.0), Catch::Matchers::WithinRel(2.1, 1e-5));
    // Above: value at 1000 (55) plus slope 0.05 per token.
    CHECK_THAT(c.evaluate(2000.0), Catch::Matchers::WithinRel(55.0 + 0.05 * 1000, 1e-5));
    // A falling tangent is floored at zero slope.
    const Curve falling = single("lm_head", "tokens", {{1, 10, {10.0, 0.0, -0.01}}});
    CHECK_THAT(falling.evaluate(100.0), Catch::Matchers::WithinRel(10.0 - 1.0, 1e-5));
    // Several variables: c0 + Σ c_i x_i.
    const Curve d = multi("attn_decode", {"context_tokens", "sequences"}, {0.5, 0.001, 0.1});
    const double x[2] = {1000.0, 4.0};
    CHECK_THAT(d.evaluate(x), Catch::Matchers::WithinRel(0.5 + 1.0 + 0.4, 1e-5));
}

TEST_CASE("Curve::evaluate reads only the coefficients a one-variable piece has (fit_linear's lines carry two)",
          "[calibration][regression]") {
    // 1 + 2x on [0, 10]: at 3 → 7; above, the tangent (slope 2) from x_max: at 12 → 21 + 2·2 = 25. Reading a third
    // coefficient here overflowed the heap (servesim calibrate --refit-points on a span curve).
    Curve line;
    line.name = "attn_prefill_span";
    line.variables = {"max_context_tokens"};
    line.pieces.push_back({0.0, 10.0, {1.0, 2.0}});
    CHECK(line.evaluate(3.0) == 7.0);
    CHECK(line.evaluate(12.0) == 25.0);
}

TEST_CASE("write_profile and load_profile_string round-trip every field", "[calibration]") {
    for (bool hybrid : {false, true}) {
        const HardwareProfile p = sample_profile(hybrid);
        const HardwareProfile q = load_profile_string(to_yaml(p), "roundtrip.yaml");
        CHECK(q.gpu == p.gpu);
        CHECK(q.date == p.date);
        CHECK(q.software == p.software);
        CHECK(q.model == p.model);
        CHECK(q.source == p.source);
        CHECK(q.hybrid == p.hybrid);
        REQUIRE(q.curves.size() == p.curves.size());
        for (const auto& [name, c] : p.curves) {
            const Curve& r = q.curves.at(name);
            CHECK(r.variables == c.variables);
            REQUIRE(r.pieces.size() == c.pieces.size());
            for (std::size_t i = 0; i < c.pieces.size(); ++i) {
                CHECK(r.pieces[i].x_min == c.pieces[i].x_min);
                CHECK(r.pieces[i].x_max == c.pieces[i].x_max);
                for (std::size_t j = 0; j < c.pieces[i].coefficients.size(); ++j) {
                    CHECK_THAT(r.pieces[i].coefficients[j],
                               Catch::Matchers::WithinRel(c.pieces[i].coefficients[j], 1e-9));
                }
            }
            CHECK_THAT(r.r2, Catch::Matchers::WithinRel(c.r2, 1e-5));
            CHECK(r.num_points == c.num_points);
        }
        REQUIRE(q.composition_check.size() == 1);
        CHECK(q.composition_check[0].case_name == "forward_prefill_T512");
        CHECK_THAT(q.composition_check[0].measured_ms, Catch::Matchers::WithinRel(8.0, 1e-5));
    }
}

TEST_CASE("A profile with a missing or malformed curve is rejected naming the curve", "[calibration]") {
    const std::string good = to_yaml(sample_profile(false));
    REQUIRE(rejection(good).empty());

    // Missing required curve.
    HardwareProfile p = sample_profile(false);
    p.curves.erase("attn_decode");
    std::ostringstream out;
    // write_profile does not validate; the reader does.
    write_profile(p, out);
    std::string msg = rejection(out.str());
    CHECK(msg.find("attn_decode") != std::string::npos);
    CHECK(msg.find("missing") != std::string::npos);

    // Wrong coefficient count.
    msg = rejection(edit(good, "coefficients: [0.3, 0.001, 0]", "coefficients: [0.3, 0.001]"));
    CHECK(msg.find("lm_head") != std::string::npos);
    CHECK(msg.find("coefficients") != std::string::npos);

    // Non-finite number.
    msg = rejection(edit(good, "coefficients: [0.3, 0.001, 0]", "coefficients: [.nan, 0.001, 0]"));
    CHECK(msg.find("lm_head") != std::string::npos);

    // x_min > x_max.
    msg = rejection(
        edit(good, "{x_min: 1, x_max: 1024, coefficients: [0.3", "{x_min: 2000, x_max: 1024, coefficients: [0.3"));
    CHECK(msg.find("lm_head") != std::string::npos);
    CHECK(msg.find("x_min") != std::string::npos);

    // Unknown variable name.
    msg = rejection(edit(good, "variables: [context_tokens, sequences]", "variables: [context, sequences]"));
    CHECK(msg.find("attn_decode") != std::string::npos);
    CHECK(msg.find("variables") != std::string::npos);

    // Empty piece list.
    HardwareProfile e = sample_profile(false);
    e.curves["overhead"].pieces.clear();
    std::ostringstream eo;
    write_profile(e, eo);
    msg = rejection(eo.str());
    CHECK(msg.find("overhead") != std::string::npos);

    // Unknown curve.
    msg = rejection(edit(good, "  lm_head:", "  lm_hed:"));
    CHECK(msg.find("lm_hed") != std::string::npos);

    // A hybrid profile needs the GDN curves.
    msg = rejection(edit(good, "hybrid: false", "hybrid: true"));
    CHECK(msg.find("gdn_prefill") != std::string::npos);
}

TEST_CASE("check_profile_covers_model wants GDN curves for a model with GDN layers", "[calibration]") {
    servesim::models::ModelSpec spec;
    spec.name = "tiny-hybrid";
    spec.layers.push_back({servesim::models::AttentionMixer{16, 4, 256, true, 0}, servesim::models::DenseMlp{}});
    spec.layers.push_back({servesim::models::GatedDeltaNetMixer{16, 32, 128, 128, 4}, servesim::models::DenseMlp{}});
    CHECK_NOTHROW(check_profile_covers_model(sample_profile(true), spec, "p.yaml"));
    try {
        check_profile_covers_model(sample_profile(false), spec, "p.yaml");
        FAIL("expected a ConfigError");
    } catch (const servesim::ConfigError& e) {
        CHECK(std::string(e.what()).find("gdn_prefill") != std::string::npos);
    }
}

TEST_CASE("The committed H200 profiles read back and predict positive step costs", "[calibration]") {
    for (const char* model : {"Qwen3-4B", "Qwen3.5-4B", "Qwen3-8B", "Llama-3.1-8B"}) {
        const HardwareProfile p =
            read_profile(std::string(SERVESIM_SOURCE_DIR) + "/calibration/profiles/h200/" + model + ".yaml");
        CHECK(p.model == model);
        CHECK(p.source == "calibrated");
        CHECK(p.hybrid == (std::string(model) == "Qwen3.5-4B"));
        CHECK(p.curves.at("gemm").evaluate(4096.0) > p.curves.at("gemm").evaluate(16.0));
        CHECK_FALSE(p.composition_check.empty());
    }
    // Qwen3-Next-80B-A3B: one rank of tensor parallelism 2 (80 B bf16 parameters do not fit one H200).
    const HardwareProfile next = read_profile(std::string(SERVESIM_SOURCE_DIR) +
                                              "/calibration/profiles/h200/Qwen3-Next-80B-A3B-tp2.yaml");
    CHECK(next.model == "Qwen3-Next-80B-A3B");
    CHECK(next.tensor_parallel_size == 2);
    CHECK(next.hybrid);
    CHECK(next.curves.count("attn_prefill_span") == 1);
    CHECK(next.composition_check.size() == 13);
}

TEST_CASE("tensor_parallel_size: default 1, written only above 1, round-trips, below 1 rejected", "[calibration]") {
    HardwareProfile p = sample_profile(true);
    CHECK(p.tensor_parallel_size == 1);
    CHECK(to_yaml(p).find("tensor_parallel_size") == std::string::npos);  // TP-1 files stay as they were
    CHECK(load_profile_string(to_yaml(p), "tp1.yaml").tensor_parallel_size == 1);
    p.tensor_parallel_size = 2;
    const std::string yaml = to_yaml(p);
    CHECK(yaml.find("tensor_parallel_size: 2") != std::string::npos);
    CHECK(load_profile_string(yaml, "tp2.yaml").tensor_parallel_size == 2);
    p.tensor_parallel_size = 0;
    const std::string msg = rejection(to_yaml(p));
    CHECK(msg.find("tensor_parallel_size") != std::string::npos);
}

TEST_CASE("weight_dtype: default bf16, written only for fp8, round-trips, other values rejected by name",
          "[calibration]") {
    HardwareProfile p = sample_profile(false);
    CHECK(p.weight_dtype == "bf16");
    CHECK(to_yaml(p).find("weight_dtype") == std::string::npos);  // bf16 profiles stay as they were
    p.weight_dtype = "fp8";
    const std::string yaml = to_yaml(p);
    CHECK(yaml.find("weight_dtype: fp8") != std::string::npos);
    CHECK(load_profile_string(yaml, "fp8.yaml").weight_dtype == "fp8");
    p.weight_dtype = "fp8-block";
    CHECK(load_profile_string(to_yaml(p), "fp8-block.yaml").weight_dtype == "fp8-block");
    p.weight_dtype = "int4";
    const std::string msg = rejection(to_yaml(p));
    CHECK(msg.find("weight_dtype") != std::string::npos);
    CHECK(msg.find("allowed: bf16, fp8, fp8-block") != std::string::npos);
    // The committed H200 fp8 profile (calibration run 13) says so.
    const HardwareProfile llama = read_profile(std::string(SERVESIM_SOURCE_DIR) +
                                               "/calibration/profiles/h200/Llama-3.1-8B-fp8.yaml");
    CHECK(llama.weight_dtype == "fp8");
    CHECK(llama.model == "Llama-3.1-8B");
}

TEST_CASE("attn_decode takes an optional third variable, sqrt(context per sequence)", "[calibration]") {
    // Two variables: 0.1 + 1e-5·8192 + 1e-3·2 = 0.18392 ms.
    const Curve two = multi("attn_decode", {"context_tokens", "sequences"}, {0.1, 1e-5, 1e-3});
    CHECK_THAT(evaluate_attn_decode(two, 8192, 2), Catch::Matchers::WithinRel(0.18392, 1e-12));
    // Three: the same plus 2e-3·√(8192 / 2) = 2e-3·64 = 0.128 → 0.31192 ms.
    const Curve three =
        multi("attn_decode", {"context_tokens", "sequences", "sqrt_context_per_sequence"}, {0.1, 1e-5, 1e-3, 2e-3});
    CHECK_THAT(evaluate_attn_decode(three, 8192, 2), Catch::Matchers::WithinRel(0.31192, 1e-12));

    HardwareProfile p = sample_profile(false);
    p.curves["attn_decode"] = three;
    const HardwareProfile back = load_profile_string(to_yaml(p), "three.yaml");
    CHECK(back.curves.at("attn_decode").variables.size() == 3);
    // Only a prefix of the kind's variables of at least two is allowed.
    p.curves["attn_decode"] = multi("attn_decode", {"context_tokens"}, {0.1, 1e-5});
    const std::string one_var = rejection(to_yaml(p));
    CHECK(one_var.find("attn_decode") != std::string::npos);
    CHECK(one_var.find("or its first 2") != std::string::npos);
    p.curves["attn_decode"] = multi("attn_decode", {"context_tokens", "sequences", "mean_context"}, {0.1, 1e-5, 0, 0});
    CHECK(rejection(to_yaml(p)).find("attn_decode") != std::string::npos);
}
