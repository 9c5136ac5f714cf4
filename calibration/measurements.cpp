// --from-measurements: reading end-to-end timings and fitting the curve family to them; composed predictions.
// The mapping from two end-to-end fits onto the per-term curves is documented in calibration/measurements.h.
#include "calibration/measurements.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "calibration/curve_fit.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/yaml_reader.h"

namespace servesim::calibration {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string trim(std::string s) {
    const auto a = s.find_first_not_of(" \t\r");
    const auto b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

double parse_csv_number(const std::string& text, const std::string& path, int line, const std::string& column) {
    try {
        std::size_t pos = 0;
        const double v = std::stod(text, &pos);
        if (pos == text.size() && std::isfinite(v) && v >= 0) {
            return v;
        }
    } catch (const std::logic_error&) {
    }
    throw ConfigError(path, line, column, "expected a non-negative number, got '" + text + "'");
}

Measurements read_csv(const std::string& path) {
    std::ifstream f = open_input_file(path, "measurements file");
    Measurements m;
    std::string line;
    int line_no = 0;
    bool header_seen = false;
    while (std::getline(f, line)) {
        ++line_no;
        line = trim(line);
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::vector<std::string> cols;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, ',')) {
            cols.push_back(trim(cell));
        }
        if (!header_seen) {
            if (cols != std::vector<std::string>{"kind", "size", "context_tokens", "ms"}) {
                throw ConfigError(path, line_no, "", "expected the header 'kind,size,context_tokens,ms'");
            }
            header_seen = true;
            continue;
        }
        if (cols.size() != 4) {
            throw ConfigError(path, line_no, "", fmt::format("expected 4 columns, got {}", cols.size()));
        }
        const double size = parse_csv_number(cols[1], path, line_no, "size");
        const double ctx = parse_csv_number(cols[2], path, line_no, "context_tokens");
        const double ms = parse_csv_number(cols[3], path, line_no, "ms");
        if (cols[0] == "prefill") {
            m.prefill.push_back({size, ctx, ms});
        } else if (cols[0] == "decode") {
            m.decode.push_back({size, ctx, ms});
        } else {
            throw ConfigError(path, line_no, "kind", "unknown kind '" + cols[0] + "'; allowed: prefill, decode");
        }
    }
    if (!header_seen) {
        throw ConfigError(path + ": empty measurements file");
    }
    return m;
}

Measurements read_yaml(const std::string& path) {
    const YamlMap top(load_yaml_file(path), path);
    top.allow_only({"servesim_measurements", "gpu", "model", "software", "date", "hybrid", "max_num_batched_tokens",
                    "async_scheduling", "assumed", "prefill", "decode"});
    if (top.get<int>("servesim_measurements") != 1) {
        top.fail("servesim_measurements", "unsupported version; allowed: 1");
    }
    Measurements m;
    m.gpu = top.get<std::string>("gpu");
    m.model = top.get<std::string>("model");
    m.software = top.get_or<std::string>("software", "");
    m.date = top.get_or<std::string>("date", "");
    m.hybrid = top.get_or<bool>("hybrid", false);
    m.max_num_batched_tokens = top.get_or<std::int64_t>("max_num_batched_tokens", 0);
    if (top.has("async_scheduling")) {
        m.async_scheduling = top.get<bool>("async_scheduling");
    }
    top.check_range<std::int64_t>("max_num_batched_tokens", m.max_num_batched_tokens, 0, 1LL << 30);
    auto list = [&](const char* key) {
        const YAML::Node n = top.node(key);
        if (!n.IsSequence()) {
            top.fail(key, "expected a list");
        }
        return n;
    };
    if (top.has("assumed")) {
        for (const auto& n : list("assumed")) {
            const std::string what = n.IsScalar() ? n.Scalar() : std::string();
            if (what != "prefill" && what != "decode") {
                top.fail("assumed", "unknown point list '" + what + "'; allowed: prefill, decode");
            }
            if (std::find(m.assumed.begin(), m.assumed.end(), what) == m.assumed.end()) {
                m.assumed.push_back(what);
            }
        }
    }
    int i = 0;
    for (const auto& n : list("prefill")) {
        const YamlMap e(n, path, fmt::format("prefill[{}]", i++));
        e.allow_only({"prompt_tokens", "cached_tokens", "ms"});
        m.prefill.push_back({e.get_in_range<double>("prompt_tokens", 1, 1e9), e.get_or<double>("cached_tokens", 0),
                             e.get_in_range<double>("ms", 0, 1e9)});
    }
    i = 0;
    for (const auto& n : list("decode")) {
        const YamlMap e(n, path, fmt::format("decode[{}]", i++));
        e.allow_only({"batch", "context_tokens", "ms"});
        m.decode.push_back({e.get_in_range<double>("batch", 1, 1e9), e.get_in_range<double>("context_tokens", 0, 1e9),
                            e.get_in_range<double>("ms", 0, 1e9)});
    }
    return m;
}

Curve zero_curve(const std::string& name, std::vector<std::string> vars, double x_min, double x_max) {
    Curve c;
    c.name = name;
    c.variables = std::move(vars);
    c.pieces.push_back({x_min, x_max, std::vector<double>(c.variables.size() == 1 ? 3 : c.variables.size() + 1, 0.0)});
    c.r2 = 1.0;
    c.max_rel_residual = 0.0;
    c.num_points = 0;
    return c;
}

std::string number_tag(double v) {
    return fmt::format("{}", static_cast<long long>(std::llround(v)));
}

}  // namespace

Measurements read_measurements(const std::string& path) {
    return ends_with(path, ".csv") ? read_csv(path) : read_yaml(path);
}

double predict_prefill_ms(const HardwareProfile& p, double tokens, double cached) {
    const auto& c = p.curves;
    double ms = c.at("gemm").evaluate(tokens) +
                evaluate_attn_prefill(p, tokens * (cached + tokens / 2.0), cached + tokens) +
                c.at("lm_head").evaluate(1.0) + c.at("overhead").evaluate(1.0);
    if (const auto it = c.find("gdn_prefill"); it != c.end()) {
        const double x[2] = {tokens, std::ceil(tokens / 64.0)};
        ms += it->second.evaluate(x);
    }
    return ms;
}

double predict_decode_ms(const HardwareProfile& p, double batch, double context_tokens) {
    const auto& c = p.curves;
    double ms = c.at("gemm").evaluate(batch) + evaluate_attn_decode(c.at("attn_decode"), batch * context_tokens, batch) +
                c.at("lm_head").evaluate(batch) +
                c.at("overhead").evaluate(batch);
    if (const auto it = c.find("gdn_decode"); it != c.end()) {
        ms += it->second.evaluate(batch);
    }
    return ms;
}

HardwareProfile fit_measurements(const Measurements& m, const std::string& file) {
    std::set<double> prefill_sizes;
    for (const auto& e : m.prefill) {
        prefill_sizes.insert(e.prompt_tokens);
    }
    if (prefill_sizes.size() < 3) {
        throw ConfigError(file, 0, "prefill", "need prefill timings at 3 or more distinct prompt lengths");
    }
    if (m.decode.size() < 3) {
        throw ConfigError(file, 0, "decode", "need 3 or more decode step timings (vary batch and context)");
    }
    // Prefill: ms = k·p0 + p1·tokens + p2·work over k chunked steps (k = 1 without a budget). Dividing the point by
    // k gives ms/k = p0 + p1·tokens/k + p2·work/k, an ordinary fit with intercept p0 whose relative residuals are
    // those of the original point (chunking leaves Σ tokens and Σ work of the chunks unchanged).
    std::vector<std::vector<double>> pre_rows;
    std::vector<double> pre_y;
    double l_max = 0;
    for (const auto& e : m.prefill) {
        const double k = m.max_num_batched_tokens > 0
                             ? std::ceil(e.prompt_tokens / static_cast<double>(m.max_num_batched_tokens))
                             : 1.0;
        pre_rows.push_back({e.prompt_tokens / k, e.prompt_tokens * (e.cached_tokens + e.prompt_tokens / 2.0) / k});
        pre_y.push_back(e.ms / k);
        l_max = std::max(l_max, e.prompt_tokens);
    }
    const Curve pre = fit_linear("prefill", {"tokens", "work"}, pre_rows, pre_y);
    // Decode: ms = d0 + d1·batch + d2·Σcontext.
    std::vector<std::vector<double>> dec_rows;
    std::vector<double> dec_y;
    double b_max = 0;
    for (const auto& e : m.decode) {
        dec_rows.push_back({e.batch, e.batch * e.context_tokens});
        dec_y.push_back(e.ms);
        b_max = std::max(b_max, e.batch);
    }
    const Curve dec = fit_linear("decode", {"batch", "context_tokens"}, dec_rows, dec_y);
    const auto& pc = pre.pieces[0].coefficients;
    const auto& dc = dec.pieces[0].coefficients;

    HardwareProfile p;
    p.gpu = m.gpu;
    p.model = m.model;
    p.software = m.software;
    p.date = m.date;
    // Provenance that says what it is: points derived from an assumption make the source say so.
    p.source = m.assumed.empty() ? "measurements" : "measurements+assumed";
    p.hybrid = m.hybrid;
    p.notes =
        "fitted from end-to-end timings: lm_head, overhead and GDN costs are inside the gemm, attn_prefill and "
        "attn_decode terms";
    for (const std::string& what : m.assumed) {
        p.notes += "; the " + what + " points are assumed, not timed";
    }
    Curve gemm;
    gemm.name = "gemm";
    gemm.variables = {"tokens"};
    gemm.pieces.push_back({1.0, b_max, {dc[0], dc[1], 0.0}});
    gemm.pieces.push_back({b_max, std::max(b_max, l_max), {pc[0], pc[1], 0.0}});
    gemm.r2 = std::min(pre.r2, dec.r2);
    gemm.max_rel_residual = std::max(pre.max_rel_residual, dec.max_rel_residual);
    gemm.num_points = pre.num_points + dec.num_points;
    p.curves["gemm"] = gemm;

    Curve ap;
    ap.name = "attn_prefill";
    ap.variables = {"work"};
    double w_min = 1e300;
    double w_max = 0;
    for (const auto& r : pre_rows) {
        w_min = std::min(w_min, r[1]);
        w_max = std::max(w_max, r[1]);
    }
    // Clamping below x_min would add p2·w_min to small prefills; start the piece at zero work instead.
    ap.pieces.push_back({0.0, w_max, {0.0, pc[2], 0.0}});
    ap.r2 = pre.r2;
    ap.max_rel_residual = pre.max_rel_residual;
    ap.num_points = pre.num_points;
    p.curves["attn_prefill"] = ap;

    Curve ad;
    ad.name = "attn_decode";
    ad.variables = {"context_tokens", "sequences"};
    double c_min = 1e300;
    double c_max = 0;
    for (const auto& r : dec_rows) {
        c_min = std::min(c_min, r[1]);
        c_max = std::max(c_max, r[1]);
    }
    ad.pieces.push_back({c_min, c_max, {0.0, dc[2], 0.0}});
    ad.r2 = dec.r2;
    ad.max_rel_residual = dec.max_rel_residual;
    ad.num_points = dec.num_points;
    p.curves["attn_decode"] = ad;

    p.curves["lm_head"] = zero_curve("lm_head", {"tokens"}, 1.0, b_max);
    p.curves["overhead"] = zero_curve("overhead", {"sequences"}, 1.0, b_max);
    if (m.hybrid) {
        p.curves["gdn_prefill"] = zero_curve("gdn_prefill", {"tokens", "chunks"}, 1.0, l_max);
        p.curves["gdn_decode"] = zero_curve("gdn_decode", {"sequences"}, 1.0, b_max);
    }
    for (const auto& e : m.prefill) {
        p.composition_check.push_back({"prefill_T" + number_tag(e.prompt_tokens) +
                                           (e.cached_tokens > 0 ? "_P" + number_tag(e.cached_tokens) : ""),
                                       e.ms, predict_prefill_ms(p, e.prompt_tokens, e.cached_tokens)});
    }
    for (const auto& e : m.decode) {
        p.composition_check.push_back({"decode_B" + number_tag(e.batch) + "_C" + number_tag(e.context_tokens), e.ms,
                                       predict_decode_ms(p, e.batch, e.context_tokens)});
    }
    validate_profile(p, file);
    return p;
}

void add_composition_from_file(HardwareProfile& profile, const std::string& path, const std::string& label) {
    const Measurements m = read_measurements(path);
    const std::string prefix = label.empty() ? "" : label + "_";
    for (const auto& e : m.prefill) {
        profile.composition_check.push_back({prefix + "prefill_T" + number_tag(e.prompt_tokens) +
                                                 (e.cached_tokens > 0 ? "_P" + number_tag(e.cached_tokens) : ""),
                                             e.ms, predict_prefill_ms(profile, e.prompt_tokens, e.cached_tokens)});
    }
    for (const auto& e : m.decode) {
        profile.composition_check.push_back(
            {prefix + "decode_B" + number_tag(e.batch) + "_C" + number_tag(e.context_tokens), e.ms,
             predict_decode_ms(profile, e.batch, e.context_tokens)});
    }
}

}  // namespace servesim::calibration

namespace servesim::calibration {

HostWorkFit fit_host_work(const Measurements& m, const std::function<double(const DecodeMeasurement&)>& predicted_ms,
                          const std::string& file) {
    if (!m.async_scheduling) {
        throw ConfigError(fmt::format("{}: the host work fit needs `async_scheduling: true` or `false` (whether the "
                                      "measured vLLM ran async scheduling): it decides what the step times show",
                                      file));
    }
    if (*m.async_scheduling) {
        // The GPU hides the host's work; what shows is the part that never overlaps.
        const std::size_t n = m.decode.size();
        if (n < 3) {
            throw ConfigError(fmt::format("{}: the host work fit needs at least 3 decode points; got {}", file, n));
        }
        std::vector<double> r(n);
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
            r[i] = m.decode[i].ms - predicted_ms(m.decode[i]);
            sum += r[i];
        }
        HostWorkFit f;
        f.async_scheduling = true;
        f.exposed_us = std::max(0.0, 1e3 * sum / static_cast<double>(n));
        double ss = 0;
        for (const double x : r) {
            ss += (x - 1e-3 * f.exposed_us) * (x - 1e-3 * f.exposed_us);
        }
        f.num_points = static_cast<int>(n);
        f.rms_residual_ms = std::sqrt(ss / static_cast<double>(n));
        return f;
    }
    const std::size_t n = m.decode.size();
    double b_min = 0;
    double b_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
        b_min = i == 0 ? m.decode[i].batch : std::min(b_min, m.decode[i].batch);
        b_max = i == 0 ? m.decode[i].batch : std::max(b_max, m.decode[i].batch);
    }
    if (n < 3 || !(b_max > b_min)) {
        throw ConfigError(fmt::format("{}: the host work fit needs at least 3 decode points at 2 or more batch sizes; "
                                      "got {} point(s)",
                                      file, n));
    }
    // Least squares of r = a + b·batch, then the constraints: b < 0 → the mean with b = 0; a < 0 → through 0.
    std::vector<double> x(n);
    std::vector<double> r(n);
    double sx = 0;
    double sr = 0;
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = m.decode[i].batch;
        r[i] = m.decode[i].ms - predicted_ms(m.decode[i]);
        sx += x[i];
        sr += r[i];
    }
    const double mx = sx / static_cast<double>(n);
    const double mr = sr / static_cast<double>(n);
    double sxx = 0;
    double sxr = 0;
    for (std::size_t i = 0; i < n; ++i) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxr += (x[i] - mx) * (r[i] - mr);
    }
    double b = sxr / sxx;
    double a = mr - b * mx;
    if (b < 0) {
        b = 0;
        a = mr;
    }
    if (a < 0) {
        a = 0;
        double xx = 0;
        double xr = 0;
        for (std::size_t i = 0; i < n; ++i) {
            xx += x[i] * x[i];
            xr += x[i] * r[i];
        }
        b = std::max(0.0, xr / xx);
    }
    double ss = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double e = r[i] - (a + b * x[i]);
        ss += e * e;
    }
    HostWorkFit f;
    f.step_us = 1e3 * a;
    f.per_request_us = 1e3 * b;
    f.num_points = static_cast<int>(n);
    f.rms_residual_ms = std::sqrt(ss / static_cast<double>(n));
    return f;
}

}  // namespace servesim::calibration
