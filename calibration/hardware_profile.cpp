// HardwareProfile reader, validator and writer (format: calibration/README.md). Strict like every servesim reader:
// unknown keys, unknown curves and malformed curves are ConfigErrors naming the file and the curve.
#include "calibration/hardware_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>
#include <variant>

#include "common/error.h"
#include "common/yaml_reader.h"

namespace servesim::calibration {

namespace {

// A one-variable piece is c0 + c1·x + c2·x². Profiles always carry three coefficients (validate_curve), but
// fit_linear's one-variable lines carry two, and their residuals are evaluated through the same path: read only
// the coefficients that exist (a missing one is 0).
double coefficient(const std::vector<double>& c, std::size_t i) { return i < c.size() ? c[i] : 0.0; }

double eval_poly(const std::vector<double>& c, double x) {
    return coefficient(c, 0) + coefficient(c, 1) * x + coefficient(c, 2) * x * x;
}

double slope_poly(const std::vector<double>& c, double x) { return coefficient(c, 1) + 2.0 * coefficient(c, 2) * x; }

const CurveKind* find_kind(const std::string& name) {
    for (const auto& k : curve_kinds()) {
        if (name == k.name) {
            return &k;
        }
    }
    return nullptr;
}

std::string known_curve_list() {
    std::string out;
    for (const auto& k : curve_kinds()) {
        out += (out.empty() ? "" : ", ") + std::string(k.name);
    }
    return out;
}

std::string join(const std::vector<std::string>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        out += (i ? ", " : "") + v[i];
    }
    return out + "]";
}

void fail_curve(const std::string& file, const std::string& curve, const std::string& message) {
    throw ConfigError(file, 0, "curves." + curve, message);
}

void validate_curve(const Curve& c, const std::string& file) {
    const CurveKind* kind = find_kind(c.name);
    if (kind == nullptr) {
        fail_curve(file, c.name, "unknown curve; allowed: " + known_curve_list());
    }
    const std::size_t min_vars = kind->min_variables > 0 ? kind->min_variables : kind->variables.size();
    const bool prefix_ok = c.variables.size() >= min_vars && c.variables.size() <= kind->variables.size() &&
                           std::equal(c.variables.begin(), c.variables.end(), kind->variables.begin());
    if (!prefix_ok) {
        fail_curve(file, c.name,
                   "variables " + join(c.variables) + " do not match the expected " + join(kind->variables) +
                       (min_vars < kind->variables.size()
                            ? " or its first " + std::to_string(min_vars) + " (unknown or misordered variable name)"
                            : " (unknown or misordered variable name)"));
    }
    if (c.pieces.empty()) {
        fail_curve(file, c.name, "has no pieces");
    }
    const std::size_t want = c.variables.size() == 1 ? 3 : c.variables.size() + 1;
    if (c.variables.size() > 1 && c.pieces.size() != 1) {
        fail_curve(file, c.name, "a curve of several variables must have exactly one (linear) piece");
    }
    for (std::size_t i = 0; i < c.pieces.size(); ++i) {
        const auto& p = c.pieces[i];
        const std::string where = fmt::format("piece {}: ", i);
        if (p.coefficients.size() != want) {
            fail_curve(file, c.name,
                       fmt::format("{}expected {} coefficients, got {}", where, want, p.coefficients.size()));
        }
        for (double v : p.coefficients) {
            if (!std::isfinite(v)) {
                fail_curve(file, c.name, where + "non-finite coefficient");
            }
        }
        if (!std::isfinite(p.x_min) || !std::isfinite(p.x_max)) {
            fail_curve(file, c.name, where + "non-finite x_min/x_max");
        }
        if (p.x_min > p.x_max) {
            fail_curve(file, c.name, fmt::format("{}x_min {} > x_max {}", where, p.x_min, p.x_max));
        }
        if (i > 0 && p.x_min < c.pieces[i - 1].x_max) {
            fail_curve(file, c.name, where + "overlaps the previous piece (pieces must be sorted and contiguous)");
        }
        // A step term must stay inside the simulated clock (common/clock_range.h): a piece is checked at both ends
        // of its range (one variable), a linear piece's coefficients one by one (several variables). A coefficient
        // like 1e300 used to make every step 1e300 ms, floored to 1 ns by the cast.
        const double max_ms = kMaxDurationS * 1e3;
        if (c.variables.size() == 1 && p.coefficients.size() == 3) {
            for (const double x : {p.x_min, p.x_max}) {
                const double ms = p.coefficients[0] + p.coefficients[1] * x + p.coefficients[2] * x * x;
                if (!(std::fabs(ms) <= max_ms)) {
                    fail_curve(file, c.name,
                               fmt::format("{}evaluates to {:g} ms at x = {:g}; allowed: a step term of at most "
                                           "{:.0e} ms (the simulated clock's range)",
                                           where, ms, x, max_ms));
                }
            }
        } else {
            for (const double v : p.coefficients) {
                if (!(std::fabs(v) <= max_ms)) {
                    fail_curve(file, c.name,
                               fmt::format("{}coefficient {:g} is beyond {:.0e} ms per unit (the simulated clock's "
                                           "range)",
                                           where, v, max_ms));
                }
            }
        }
    }
    if (!std::isfinite(c.r2) || !std::isfinite(c.max_rel_residual) || c.num_points < 0) {
        fail_curve(file, c.name, "r2, max_rel_residual and num_points must be finite and non-negative");
    }
}

std::vector<std::string> read_string_list(const YamlMap& m, const std::string& key) {
    const YAML::Node n = m.node(key);
    if (!n.IsSequence()) {
        m.fail(key, "expected a list");
    }
    std::vector<std::string> out;
    for (const auto& e : n) {
        if (!e.IsScalar()) {
            m.fail(key, "expected a list of names");
        }
        out.push_back(e.Scalar());
    }
    return out;
}

std::vector<double> read_number_list(const YamlMap& m, const std::string& key) {
    const YAML::Node n = m.node(key);
    if (!n.IsSequence()) {
        m.fail(key, "expected a list of numbers");
    }
    std::vector<double> out;
    for (const auto& e : n) {
        out.push_back(m.convert<double>(e, key));
    }
    return out;
}

Curve read_curve(const YamlMap& curves, const std::string& name) {
    // A malformed piece is reported against the curve name, whatever the YAML-level cause.
    try {
        const YamlMap m = curves.map(name);
        m.allow_only({"variables", "pieces", "r2", "max_rel_residual", "num_points"});
        Curve c;
        c.name = name;
        c.variables = read_string_list(m, "variables");
        const YAML::Node pieces = m.node("pieces");
        if (!pieces.IsSequence()) {
            m.fail("pieces", "expected a list of {x_min, x_max, coefficients}");
        }
        int i = 0;
        for (const auto& pn : pieces) {
            const YamlMap pm(pn, curves.file(), m.key_path(fmt::format("pieces[{}]", i++)));
            pm.allow_only({"x_min", "x_max", "coefficients"});
            CurvePiece p;
            p.x_min = pm.get<double>("x_min");
            p.x_max = pm.get<double>("x_max");
            p.coefficients = read_number_list(pm, "coefficients");
            c.pieces.push_back(std::move(p));
        }
        c.r2 = m.get<double>("r2");
        c.max_rel_residual = m.get<double>("max_rel_residual");
        c.num_points = m.get<int>("num_points");
        return c;
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        if (what.find("curves." + name) != std::string::npos) {
            throw;
        }
        throw ConfigError(curves.file(), 0, "curves." + name, std::string("malformed curve: ") + what);
    }
}

HardwareProfile parse_profile(const YAML::Node& root, const std::string& file) {
    const YamlMap top(root, file);
    top.allow_only({"servesim_profile", "gpu", "date", "software", "model", "source", "hybrid",
                    "tensor_parallel_size", "weight_dtype", "notes", "curves", "composition_check"});
    const int version = top.get<int>("servesim_profile");
    if (version != 1) {
        top.fail("servesim_profile", fmt::format("unsupported profile version {}; allowed: 1", version));
    }
    HardwareProfile p;
    p.gpu = top.get<std::string>("gpu");
    p.date = top.get<std::string>("date");
    p.software = top.get<std::string>("software");
    p.model = top.get<std::string>("model");
    p.source = top.get<std::string>("source");
    // measurements+assumed: fitted from points of which some were derived from a stated assumption, not timed
    // (Measurements::assumed).
    if (p.source != "calibrated" && p.source != "measurements" && p.source != "measurements+assumed" &&
        p.source != "roofline") {
        top.fail("source", "unknown source '" + p.source +
                               "'; allowed: calibrated, measurements, measurements+assumed, roofline");
    }
    p.hybrid = top.get_or<bool>("hybrid", false);
    p.tensor_parallel_size = top.get_or<int>("tensor_parallel_size", 1);
    p.weight_dtype = top.get_or<std::string>("weight_dtype", "bf16");
    if (p.weight_dtype != "bf16" && p.weight_dtype != "fp8" && p.weight_dtype != "fp8-block") {
        top.fail("weight_dtype", "unknown weight dtype '" + p.weight_dtype + "'; allowed: bf16, fp8, fp8-block");
    }
    p.notes = top.get_or<std::string>("notes", "");
    const YamlMap curves = top.map("curves");
    for (const auto& name : curves.keys()) {
        if (find_kind(name) == nullptr) {
            throw ConfigError(file, curves.line(name), "curves." + name,
                              "unknown curve; allowed: " + known_curve_list());
        }
        p.curves.emplace(name, read_curve(curves, name));
    }
    if (top.has("composition_check")) {
        const YAML::Node list = top.node("composition_check");
        if (!list.IsSequence()) {
            top.fail("composition_check", "expected a list of {case, measured_ms, predicted_ms}");
        }
        int i = 0;
        for (const auto& n : list) {
            const YamlMap cm(n, file, fmt::format("composition_check[{}]", i++));
            cm.allow_only({"case", "measured_ms", "predicted_ms"});
            p.composition_check.push_back(
                {cm.get<std::string>("case"), cm.get<double>("measured_ms"), cm.get<double>("predicted_ms")});
        }
    }
    validate_profile(p, file);
    return p;
}

}  // namespace

const std::vector<CurveKind>& curve_kinds() {
    static const std::vector<CurveKind> kinds = {
        {"gemm",
         {"tokens"},
         true,
         false,
         "every dense projection and MLP GEMM of all layers plus the per-token elementwise ops (norms, RoPE, "
         "SiLU·mul) and the KV-cache write, for `tokens` tokens in the step"},
        {"lm_head", {"tokens"}, true, false, "final norm + lm_head GEMM for `tokens` sampled sequences"},
        {"attn_prefill",
         {"work"},
         true,
         false,
         "prefill attention of all attention layers; work = Σ chunk_tokens·(cached_context + chunk_tokens/2)"},
        {"attn_prefill_span",
         {"max_context_tokens"},
         false,
         false,
         "the span bound of prefill attention: the longest chunk's cached_context + chunk_tokens, streamed by one "
         "query tile; the term is max(attn_prefill(work), attn_prefill_span(max_context_tokens))"},
        {"attn_decode",
         {"context_tokens", "sequences", "sqrt_context_per_sequence"},
         true,
         false,
         "decode attention of all attention layers: Σ context of decoding sequences, their count and (optional) "
         "√(Σ context / count), the latency of split-K work that cannot fill the GPU",
         2},
        {"gdn_prefill",
         {"tokens", "chunks"},
         false,
         true,
         "Gated DeltaNet chunked prefill (conv1d + core) of all GDN layers; serial 64-token chunks summed over "
         "sequences"},
        {"gdn_decode",
         {"sequences"},
         false,
         true,
         "Gated DeltaNet recurrent decode (conv update + core), all GDN layers"},
        {"snapshot", {"snapshots"}, false, false, "align-mode state snapshot writes in the step (hybrids)"},
        {"overhead", {"sequences"}, true, false, "per-step constant + per-sequence work (sampling, gathers)"},
    };
    return kinds;
}

double evaluate_attn_prefill(const Curve& work_curve,
                             const Curve* span_curve,
                             double work,
                             double max_context_tokens) {
    const double by_work = work_curve.evaluate(work);
    return span_curve == nullptr ? by_work : std::max(by_work, span_curve->evaluate(max_context_tokens));
}

double evaluate_attn_prefill(const HardwareProfile& profile, double work, double max_context_tokens) {
    const auto span = profile.curves.find("attn_prefill_span");
    return evaluate_attn_prefill(profile.curves.at("attn_prefill"),
                                 span == profile.curves.end() ? nullptr : &span->second, work, max_context_tokens);
}

double evaluate_attn_decode(const Curve& curve, double context_tokens, double sequences) {
    if (curve.variables.size() == 3) {
        const double x[3] = {context_tokens, sequences, std::sqrt(context_tokens / std::max(sequences, 1.0))};
        return curve.evaluate(x);
    }
    const double x[2] = {context_tokens, sequences};
    return curve.evaluate(x);
}

double Curve::evaluate(std::span<const double> x) const {
    SERVESIM_CHECK(!pieces.empty(), "curve {} has no pieces", name);
    SERVESIM_CHECK(x.size() == variables.size(), "curve {} takes {} variables, got {}", name, variables.size(),
                   x.size());
    double v = 0;
    if (variables.size() == 1) {
        const double xv = x[0];
        const CurvePiece& first = pieces.front();
        const CurvePiece& last = pieces.back();
        if (xv <= first.x_min) {
            v = eval_poly(first.coefficients, first.x_min);
        } else if (xv > last.x_max) {
            const double slope = std::max(0.0, slope_poly(last.coefficients, last.x_max));
            v = eval_poly(last.coefficients, last.x_max) + slope * (xv - last.x_max);
        } else {
            const CurvePiece* chosen = &last;
            for (const auto& p : pieces) {
                if (xv <= p.x_max) {
                    chosen = &p;
                    break;
                }
            }
            v = eval_poly(chosen->coefficients, xv);
        }
    } else {
        const auto& c = pieces.front().coefficients;
        v = c[0];
        for (std::size_t i = 0; i < x.size(); ++i) {
            v += c[i + 1] * x[i];
        }
    }
    return std::max(0.0, v);
}

void validate_profile(const HardwareProfile& profile, const std::string& file) {
    if (profile.tensor_parallel_size < 1) {
        throw ConfigError(file, 0, "tensor_parallel_size",
                          fmt::format("must be at least 1, got {}", profile.tensor_parallel_size));
    }
    for (const auto& [name, curve] : profile.curves) {
        if (name != curve.name) {
            fail_curve(file, name, "stored under a different name than its own ('" + curve.name + "')");
        }
        validate_curve(curve, file);
    }
    for (const auto& k : curve_kinds()) {
        const bool needed = k.required || (k.required_hybrid && profile.hybrid);
        if (needed && profile.curves.count(k.name) == 0) {
            fail_curve(file, k.name,
                       std::string("missing required curve") + (k.required_hybrid ? " (the model is hybrid)" : ""));
        }
    }
    for (const auto& c : profile.composition_check) {
        if (!std::isfinite(c.measured_ms) || !std::isfinite(c.predicted_ms)) {
            throw ConfigError(file, 0, "composition_check", "non-finite time in case '" + c.case_name + "'");
        }
    }
}

void check_profile_covers_model(const HardwareProfile& profile,
                                const models::ModelSpec& spec,
                                const std::string& file) {
    bool gdn = false;
    for (const auto& layer : spec.layers) {
        if (std::holds_alternative<models::Mamba2Mixer>(layer.mixer)) {
            throw ConfigError(file, 0, "curves",
                              "model '" + spec.name + "' has Mamba2 layers, which hardware profiles do not cost yet");
        }
        if (std::holds_alternative<models::Mamba1Mixer>(layer.mixer)) {
            throw ConfigError(file, 0, "curves",
                              "model '" + spec.name + "' has Mamba layers, which hardware profiles do not cost yet");
        }
        gdn = gdn || std::holds_alternative<models::GatedDeltaNetMixer>(layer.mixer);
    }
    if (gdn) {
        for (const char* name : {"gdn_prefill", "gdn_decode"}) {
            if (profile.curves.count(name) == 0) {
                fail_curve(file, name,
                           "missing: model '" + spec.name + "' has Gated DeltaNet layers (profile made for '" +
                               profile.model + "')");
            }
        }
    }
}

HardwareProfile read_profile(const std::string& path) {
    return parse_profile(load_yaml_file(path), path);
}

HardwareProfile load_profile_string(const std::string& text, const std::string& name_for_errors) {
    return parse_profile(load_yaml_string(text, name_for_errors), name_for_errors);
}

void write_profile(const HardwareProfile& p, std::ostream& out) {
    YAML::Emitter e;
    e.SetDoublePrecision(10);
    e << YAML::BeginMap;
    e << YAML::Key << "servesim_profile" << YAML::Value << 1;
    e << YAML::Key << "gpu" << YAML::Value << p.gpu;
    e << YAML::Key << "date" << YAML::Value << p.date;
    e << YAML::Key << "software" << YAML::Value << p.software;
    e << YAML::Key << "model" << YAML::Value << p.model;
    e << YAML::Key << "source" << YAML::Value << p.source;
    e << YAML::Key << "hybrid" << YAML::Value << p.hybrid;
    if (p.tensor_parallel_size != 1) {
        e << YAML::Key << "tensor_parallel_size" << YAML::Value << p.tensor_parallel_size;
    }
    if (p.weight_dtype != "bf16") {
        e << YAML::Key << "weight_dtype" << YAML::Value << p.weight_dtype;
    }
    if (!p.notes.empty()) {
        e << YAML::Key << "notes" << YAML::Value << p.notes;
    }
    e << YAML::Key << "curves" << YAML::Value << YAML::BeginMap;
    // Curves in the canonical order of curve_kinds(), then any others (validation rejects those anyway).
    for (const auto& k : curve_kinds()) {
        const auto it = p.curves.find(k.name);
        if (it == p.curves.end()) {
            continue;
        }
        const Curve& c = it->second;
        e << YAML::Key << c.name << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "variables" << YAML::Value << YAML::Flow << c.variables;
        e << YAML::Key << "pieces" << YAML::Value << YAML::BeginSeq;
        for (const auto& piece : c.pieces) {
            e << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "x_min" << YAML::Value << piece.x_min;
            e << YAML::Key << "x_max" << YAML::Value << piece.x_max;
            e << YAML::Key << "coefficients" << YAML::Value << YAML::Flow << piece.coefficients;
            e << YAML::EndMap;
        }
        e << YAML::EndSeq;
        e << YAML::Key << "r2" << YAML::Value << c.r2;
        e << YAML::Key << "max_rel_residual" << YAML::Value << c.max_rel_residual;
        e << YAML::Key << "num_points" << YAML::Value << c.num_points;
        e << YAML::EndMap;
    }
    e << YAML::EndMap;
    if (!p.composition_check.empty()) {
        e << YAML::Key << "composition_check" << YAML::Value << YAML::BeginSeq;
        for (const auto& c : p.composition_check) {
            e << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "case" << YAML::Value << c.case_name;
            e << YAML::Key << "measured_ms" << YAML::Value << c.measured_ms;
            e << YAML::Key << "predicted_ms" << YAML::Value << c.predicted_ms;
            e << YAML::EndMap;
        }
        e << YAML::EndSeq;
    }
    e << YAML::EndMap;
    out << e.c_str() << "\n";
}

void write_profile_file(const HardwareProfile& profile, const std::string& path) {
    std::ofstream f(path);
    if (!f) {
        throw ConfigError(path + ": cannot open for writing");
    }
    write_profile(profile, f);
    if (!f) {
        throw ConfigError(path + ": write failed");
    }
}

}  // namespace servesim::calibration
