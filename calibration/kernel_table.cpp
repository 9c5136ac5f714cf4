// The kernel-table reader, the built-in tables and the lookups behind calibration/kernel_table.h. The figures live
// in calibration/kernels/*.yaml (timed on the device machine, each file naming its software and date); this file owns
// the format's checks and the interpolation / efficiency rules of docs/COST-MODEL.md.
// Size (~900 lines): the reader (parse_kernel_table, one check and error per key of the format, ~470 lines) and the
// lookups (KernelCostLookup's nearest-entry and scaling rules) meet only at KernelTable; the split, when one is
// wanted, is kernel_table_reader.cpp for the first half.
#include "calibration/kernel_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "calibration/gpu_spec.h"
#include "calibration/kernel_table_files.h"
#include "common/clock_range.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/yaml_reader.h"

namespace servesim::calibration {

namespace {

// Piecewise-linear evaluation over strictly increasing xs, reading only the (at most two) values it needs through
// value(i): inside, linear between the points around v; above the last, along the last segment but at least
// value(last)·v/x(last); below the first, value(0).
template <typename F>
double piecewise(const std::vector<double>& xs, F value, double v) {
    const std::size_t n = xs.size();
    if (v <= xs.front()) {
        return value(0);
    }
    if (n == 1) {
        return value(0) * v / xs.front();
    }
    if (v >= xs.back()) {
        const double y1 = value(n - 1);
        const double y0 = value(n - 2);
        const double slope = (y1 - y0) / (xs[n - 1] - xs[n - 2]);
        return std::max(y1 + slope * (v - xs[n - 1]), y1 * v / xs[n - 1]);
    }
    const std::size_t i = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), v) - xs.begin()) - 1;
    const double y0 = value(i);
    const double y1 = value(i + 1);
    return y0 + (y1 - y0) * (v - xs[i]) / (xs[i + 1] - xs[i]);
}

std::string normalise(std::string_view text) {
    std::string out;
    for (char ch : text) {
        if (ch == ' ' || ch == '-' || ch == '_') {
            continue;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return out;
}

constexpr const char* kGemmKeys[kNumGemmKinds] = {"gemm_bf16", "gemm_fp8_tensor", "gemm_fp8_rowwise", "gemm_fp8_block"};

// A list of numbers under `key`: a grid (positive, strictly increasing) or a row of times (finite, > 0, within the
// simulated clock's range).
std::vector<double> read_numbers(
    const YamlMap& m, const std::string& key, const YAML::Node& n, bool grid, std::size_t want = 0) {
    if (!n.IsSequence() || n.size() == 0) {
        m.fail(key, grid ? "expected a non-empty list of sizes" : "expected a non-empty list of times in µs");
    }
    std::vector<double> out;
    for (const auto& e : n) {
        out.push_back(m.convert<double>(e, key));
    }
    if (grid) {
        for (std::size_t i = 0; i < out.size(); ++i) {
            if (!(out[i] > 0)) {
                m.fail(key,
                       fmt::format("grid value {:g} is not positive; allowed: sizes > 0, strictly increasing", out[i]));
            }
            if (i > 0 && !(out[i] > out[i - 1])) {
                m.fail(key, fmt::format("grid values {:g} then {:g} are not strictly increasing; allowed: sizes > 0, "
                                        "strictly increasing",
                                        out[i - 1], out[i]));
            }
        }
        return out;
    }
    if (want > 0 && out.size() != want) {
        m.fail(key,
               fmt::format("{} times for a grid of {} points; allowed: one time per grid point", out.size(), want));
    }
    const double max_us = kMaxDurationS * 1e6;
    for (double v : out) {
        if (!(v > 0) || !(v <= max_us)) {
            m.fail(key, fmt::format("time {:g} µs; allowed: finite, > 0 and at most {:.0e} µs", v, max_us));
        }
    }
    return out;
}

KernelCurve read_curve(const YamlMap& m, const std::string& grid_key) {
    KernelCurve c;
    c.x = read_numbers(m, grid_key, m.node(grid_key), true);
    c.us = read_numbers(m, "us", m.node("us"), false, c.x.size());
    return c;
}

KernelGrid read_grid(const YamlMap& m, const std::string& x_key, const std::string& y_key) {
    KernelGrid g;
    g.x = read_numbers(m, x_key, m.node(x_key), true);
    g.y = read_numbers(m, y_key, m.node(y_key), true);
    const YAML::Node rows = m.node("us");
    if (!rows.IsSequence() || rows.size() != g.x.size()) {
        m.fail("us", fmt::format("expected {} rows (one per {} value) of {} times (one per {} value)", g.x.size(),
                                 x_key, g.y.size(), y_key));
    }
    for (const auto& row : rows) {
        if (!row.IsSequence()) {
            m.fail("us", fmt::format("expected {} rows (one per {} value) of {} times (one per {} value)", g.x.size(),
                                     x_key, g.y.size(), y_key));
        }
        const std::vector<double> r = read_numbers(m, "us", row, false, g.y.size());
        g.us.insert(g.us.end(), r.begin(), r.end());
    }
    return g;
}

template <typename T>
T positive(const YamlMap& m, const char* key) {
    return m.get_in_range<T>(key, T{1}, static_cast<T>(std::int64_t{1} << 30));
}

AttentionGeometry read_geometry(const YamlMap& m) {
    AttentionGeometry g;
    g.head_dim = positive<int>(m, "head_dim");
    g.q_heads = positive<int>(m, "q_heads");
    g.kv_heads = positive<int>(m, "kv_heads");
    if (g.q_heads % g.kv_heads != 0) {
        m.fail("kv_heads", fmt::format("q_heads {} is not a multiple of kv_heads {}; allowed: a divisor of q_heads",
                                       g.q_heads, g.kv_heads));
    }
    return g;
}

// The entries of one op: a list of mappings, each checked by `read`, no two with the same identifying key.
template <typename Entry, typename Read, typename Key>
std::vector<Entry> read_op(const YamlMap& ops, const std::string& op, Read read, Key key) {
    std::vector<Entry> out;
    if (!ops.has(op) || ops.node(op).IsNull()) {
        return out;
    }
    const YAML::Node list = ops.node(op);
    if (!list.IsSequence()) {
        ops.fail(op, "expected a list of entries");
    }
    std::set<decltype(key(std::declval<const Entry&>()))> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const YamlMap m(list[i], ops.file(), fmt::format("{}[{}]", ops.key_path(op), i));
        Entry e = read(m);
        if (!seen.insert(key(e)).second) {
            throw ConfigError(ops.file(), YamlMap::line_of(list[i]), m.path(),
                              "the same shape appears twice in this op; allowed: one entry per shape");
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<WidthEntry> read_width_op(const YamlMap& ops,
                                      const std::string& op,
                                      const char* width_key,
                                      const char* grid_key) {
    std::vector<WidthEntry> out = read_op<WidthEntry>(
        ops, op,
        [&](const YamlMap& m) {
            m.allow_only({width_key, grid_key, "us", "backend", "method"});
            WidthEntry e;
            e.width = positive<std::int64_t>(m, width_key);
            e.method = m.get_or<std::string>("method", "");
            e.tokens = read_curve(m, grid_key);
            return e;
        },
        [](const WidthEntry& e) { return std::pair(e.width, e.method); });
    // Several methods of one width (sampling: greedy, top_p): greedy, else the first listed, is the one used
    // (docs/COST-MODEL.md); the others stay for reference.
    std::stable_partition(out.begin(), out.end(),
                          [](const WidthEntry& e) { return e.method.empty() || e.method == "greedy"; });
    return out;
}

// routing: moe_routing(_fused), no intermediate; paired: moe_vllm_fused, with grouped_us beside us.
std::vector<MoeEntry> read_moe_op(const YamlMap& ops, const std::string& op, bool routing, bool paired = false) {
    return read_op<MoeEntry>(
        ops, op,
        [&](const YamlMap& m) {
            if (routing) {
                m.allow_only({"experts", "top_k", "hidden", "tokens", "us", "backend", "model"});
            } else if (paired) {
                m.allow_only(
                    {"experts", "top_k", "hidden", "intermediate", "tokens", "us", "grouped_us", "backend", "model"});
            } else {
                m.allow_only({"experts", "top_k", "hidden", "intermediate", "tokens", "us", "backend", "model"});
            }
            MoeEntry e;
            e.experts = positive<int>(m, "experts");
            e.top_k = m.get_in_range<int>("top_k", 1, e.experts);
            e.hidden = positive<int>(m, "hidden");
            e.intermediate = routing ? 0 : positive<int>(m, "intermediate");
            e.tokens = read_curve(m, "tokens");
            if (paired) {
                e.grouped = {e.tokens.x,
                             read_numbers(m, "grouped_us", m.node("grouped_us"), false, e.tokens.x.size())};
            }
            return e;
        },
        [](const MoeEntry& e) { return std::tuple(e.experts, e.top_k, e.hidden, e.intermediate); });
}

double optional_positive(const YamlMap& m, const char* key, std::optional<double>& out) {
    if (m.has(key)) {
        out = m.get<double>(key);
        if (!(*out > 0)) {
            m.fail(key, fmt::format("value {:g}; allowed: a measured figure > 0", *out));
        }
    }
    return out.value_or(0);
}

}  // namespace

double KernelCurve::at(double v) const {
    return piecewise(
        x, [this](std::size_t i) { return us[i]; }, v);
}

double KernelCurve::at_scaled(double v, double scale) const {
    const double t = at(v);
    if (scale == 1.0 || us.empty()) {
        return t;
    }
    const double fixed = us.front();
    return fixed + std::max(0.0, t - fixed) * scale;
}

double KernelGrid::at(double vx, double vy) const {
    const std::size_t ny = y.size();
    return piecewise(
        x,
        [&](std::size_t i) {
            const double* row = us.data() + i * ny;
            return piecewise(
                y, [row](std::size_t j) { return row[j]; }, vy);
        },
        vx);
}

const char* gemm_kind_key(GemmKind k) {
    return kGemmKeys[static_cast<int>(k)];
}

KernelTable parse_kernel_table(const std::string& text, const std::string& file) {
    const YamlMap m(load_yaml_string(text, file), file);
    m.allow_only(
        {"servesim_kernel_table", "gpu", "device_name", "date", "software", "method", "ceilings", "ops", "forwards"});
    KernelTable t;
    t.file = file;
    const int version = m.get<int>("servesim_kernel_table");
    if (version != 1) {
        m.fail("servesim_kernel_table", fmt::format("format version {}; allowed: 1", version));
    }
    t.gpu = m.get<std::string>("gpu");
    if (normalise(t.gpu).empty()) {
        m.fail("gpu", "must name the GPU (a catalog name, e.g. H100-SXM)");
    }
    t.device_name = m.get_or<std::string>("device_name", "");
    t.date = m.get<std::string>("date");
    t.software = m.get_or<std::string>("software", "");
    t.method = m.get_or<std::string>("method", "");
    // A section the sweep left empty (`forwards:` with nothing under it) is a null node: read as no entries.
    const auto present = [&m](const char* key) { return m.has(key) && !m.node(key).IsNull(); };
    if (present("ceilings")) {
        const YamlMap c = m.map("ceilings");
        c.allow_only({"bf16_gemm_tflops", "fp8_gemm_tflops", "copy_gb_per_s", "launch_us", "graph_launch_us"});
        optional_positive(c, "bf16_gemm_tflops", t.bf16_gemm_tflops);
        optional_positive(c, "fp8_gemm_tflops", t.fp8_gemm_tflops);
        optional_positive(c, "copy_gb_per_s", t.copy_gb_per_s);
        optional_positive(c, "launch_us", t.launch_us);
        optional_positive(c, "graph_launch_us", t.graph_launch_us);
    }
    if (present("ops")) {
        const YamlMap ops = m.map("ops");  // unknown ops are ignored (a newer sweep may time more)
        for (int kind = 0; kind < kNumGemmKinds; ++kind) {
            auto& entries = t.gemm[static_cast<std::size_t>(kind)];
            entries = read_op<GemmEntry>(
                ops, kGemmKeys[kind],
                [](const YamlMap& e) {
                    // fast_accum: whether an fp8 GEMM was timed with fast accumulation (vLLM's CUTLASS
                    // scaled_mm uses it); provenance only, checked for type.
                    e.allow_only({"n", "k", "m", "us", "fast_accum"});
                    GemmEntry g;
                    g.n = positive<std::int64_t>(e, "n");
                    g.k = positive<std::int64_t>(e, "k");
                    g.m = read_curve(e, "m");
                    if (e.has("fast_accum")) g.fast_accum = e.get<bool>("fast_accum");
                    return g;
                },
                [](const GemmEntry& g) { return std::pair(g.n, g.k); });
            std::sort(entries.begin(), entries.end(), [](const GemmEntry& a, const GemmEntry& b) {
                return std::pair(a.n * a.k, a.k) < std::pair(b.n * b.k, b.k);
            });
        }
        const auto geometry_key = [](const auto& e) {
            return std::tuple(e.backend, e.geometry.head_dim, e.geometry.q_heads, e.geometry.kv_heads);
        };
        t.attn_prefill = read_op<AttnPrefillEntry>(
            ops, "attn_prefill",
            [](const YamlMap& e) {
                e.allow_only({"backend", "head_dim", "q_heads", "kv_heads", "tokens", "us"});
                AttnPrefillEntry a;
                a.backend = e.get<std::string>("backend");
                a.geometry = read_geometry(e);
                a.tokens = read_curve(e, "tokens");
                return a;
            },
            geometry_key);
        t.attn_prefill_cached = read_op<AttnPrefillCachedEntry>(
            ops, "attn_prefill_cached",
            [](const YamlMap& e) {
                e.allow_only({"backend", "head_dim", "q_heads", "kv_heads", "chunk", "context", "us"});
                AttnPrefillCachedEntry a;
                a.backend = e.get<std::string>("backend");
                a.geometry = read_geometry(e);
                a.chunk_context = read_grid(e, "chunk", "context");
                return a;
            },
            geometry_key);
        t.attn_decode = read_op<AttnDecodeEntry>(
            ops, "attn_decode",
            [](const YamlMap& e) {
                e.allow_only({"backend", "head_dim", "q_heads", "kv_heads", "batch", "context", "us"});
                AttnDecodeEntry a;
                a.backend = e.get<std::string>("backend");
                a.geometry = read_geometry(e);
                a.batch_context = read_grid(e, "batch", "context");
                return a;
            },
            geometry_key);
        t.attn_decode_mla = read_op<MlaDecodeEntry>(
            ops, "attn_decode_mla",
            [](const YamlMap& e) {
                e.allow_only({"q_heads", "kv_lora_rank", "rope_dim", "batch", "context", "us", "backend"});
                MlaDecodeEntry a;
                a.q_heads = positive<int>(e, "q_heads");
                a.kv_lora_rank = positive<int>(e, "kv_lora_rank");
                a.rope_dim = positive<int>(e, "rope_dim");
                a.batch_context = read_grid(e, "batch", "context");
                return a;
            },
            [](const MlaDecodeEntry& a) { return std::tuple(a.q_heads, a.kv_lora_rank, a.rope_dim); });
        t.moe = read_moe_op(ops, "moe", false);
        t.moe_vllm_fused = read_moe_op(ops, "moe_vllm_fused", false, true);
        // vLLM routes with its own kernels (fused_moe topk_softmax + moe_align_block_size + moe_sum); the torch
        // rendering of the same steps (about ten kernels) is read only when the table lacks them.
        t.moe_routing_torch = read_moe_op(ops, "moe_routing", true);
        t.moe_routing = read_moe_op(ops, "moe_routing_fused", true);
        t.routing_fused = !t.moe_routing.empty();
        if (!t.routing_fused) {
            t.moe_routing = t.moe_routing_torch;
        }
        t.rmsnorm = read_width_op(ops, "rmsnorm", "hidden", "tokens");
        t.silu_mul = read_width_op(ops, "silu_mul", "intermediate", "tokens");
        t.sampling = read_width_op(ops, "sampling", "vocab", "batch");
        t.qk_norm = read_op<WidthEntry>(
            ops, "qk_norm",
            [](const YamlMap& e) {
                e.allow_only({"head_dim", "heads", "tokens", "us", "backend"});
                WidthEntry w;
                w.head_dim = positive<int>(e, "head_dim");
                w.width = std::int64_t{w.head_dim} * positive<int>(e, "heads");
                w.tokens = read_curve(e, "tokens");
                return w;
            },
            // Two head sizes may give one width (40 x 128 and 20 x 256): both are kept.
            [](const WidthEntry& w) { return std::pair(w.width, w.head_dim); });
        const auto read_gdn = [&ops](const std::string& op, bool prefill) {
            std::vector<GdnEntry> out = read_op<GdnEntry>(
                ops, op,
                [prefill](const YamlMap& e) {
                    if (prefill) {
                        e.allow_only({"key_heads", "value_heads", "head_dim", "seqs", "tokens", "us", "backend"});
                    } else {
                        e.allow_only({"key_heads", "value_heads", "head_dim", "batch", "us", "backend"});
                    }
                    GdnEntry g;
                    g.key_heads = positive<int>(e, "key_heads");
                    g.value_heads = positive<int>(e, "value_heads");
                    g.head_dim = positive<int>(e, "head_dim");
                    g.seqs = prefill ? positive<int>(e, "seqs") : 0;
                    g.curve = read_curve(e, prefill ? "tokens" : "batch");
                    return g;
                },
                [](const GdnEntry& g) { return std::tuple(g.value_heads, g.key_heads, g.head_dim, g.seqs); });
            std::sort(out.begin(), out.end(), [](const GdnEntry& a, const GdnEntry& b) {
                return std::tuple(a.value_heads, a.key_heads, a.head_dim, a.seqs) <
                       std::tuple(b.value_heads, b.key_heads, b.head_dim, b.seqs);
            });
            return out;
        };
        t.gdn_prefill = read_gdn("gdn_prefill", true);
        t.gdn_decode = read_gdn("gdn_decode", false);
        t.conv1d = read_op<Conv1dEntry>(
            ops, "conv1d",
            [](const YamlMap& e) {
                e.allow_only({"mode", "dim", "tokens", "batch", "us", "backend"});
                Conv1dEntry c;
                const std::string mode = e.get<std::string>("mode");
                if (mode != "prefill" && mode != "decode") {
                    e.fail("mode", fmt::format("'{}'; allowed: prefill, decode", mode));
                }
                c.decode = mode == "decode";
                c.dim = positive<std::int64_t>(e, "dim");
                c.curve = read_curve(e, c.decode ? "batch" : "tokens");
                return c;
            },
            [](const Conv1dEntry& c) { return std::pair(c.dim, c.decode); });
        t.gdn_aux = read_op<WidthEntry>(
            ops, "gdn_aux",
            [](const YamlMap& e) {
                e.allow_only({"value_heads", "head_dim", "tokens", "us", "backend"});
                WidthEntry w;
                w.head_dim = positive<int>(e, "head_dim");
                w.width = std::int64_t{w.head_dim} * positive<int>(e, "value_heads");
                w.tokens = read_curve(e, "tokens");
                return w;
            },
            [](const WidthEntry& w) { return std::pair(w.width, w.head_dim); });
        t.rope = read_op<RopeEntry>(
            ops, "rope",
            [](const YamlMap& e) {
                e.allow_only({"head_dim", "q_heads", "kv_heads", "rotary_dim", "tokens", "us", "backend"});
                RopeEntry r;
                r.geometry = read_geometry(e);
                r.rotary_dim = e.has("rotary_dim") ? e.get_in_range<int>("rotary_dim", 2, r.geometry.head_dim)
                                                   : r.geometry.head_dim;
                r.tokens = read_curve(e, "tokens");
                return r;
            },
            [](const RopeEntry& r) {
                return std::tuple(r.geometry.head_dim, r.geometry.q_heads, r.geometry.kv_heads, r.rotary_dim);
            });
    }
    if (present("forwards")) {
        const YAML::Node list = m.node("forwards");
        if (!list.IsSequence()) {
            m.fail("forwards", "expected a list of timed forwards");
        }
        for (std::size_t i = 0; i < list.size(); ++i) {
            const YamlMap e(list[i], file, fmt::format("forwards[{}]", i));
            e.allow_only({"model", "kind", "tokens", "context", "batch", "ms", "cuda_graph", "layers",
                          "distinct_weight_layers", "distinct_kv_layers", "routing"});
            ForwardEntry f;
            f.model = e.get<std::string>("model");
            f.kind = e.get<std::string>("kind");
            if (f.kind != "prefill" && f.kind != "decode") {
                e.fail("kind", "'" + f.kind + "' is not a forward kind; allowed: prefill, decode");
            }
            f.batch = e.get_or<std::int64_t>("batch", 1);
            e.check_range<std::int64_t>("batch", f.batch, 1, std::int64_t{1} << 30);
            f.context = e.get_or<std::int64_t>("context", 0);
            e.check_range<std::int64_t>("context", f.context, 0, std::int64_t{1} << 30);
            if (f.kind == "prefill") {
                f.tokens = positive<std::int64_t>(e, "tokens");
            } else {
                f.tokens = e.get_or<std::int64_t>("tokens", f.batch);
                if (f.context < 1) {
                    e.fail("context", "a decode forward needs its context (keys per sequence, ≥ 1)");
                }
            }
            f.ms = e.get<double>("ms");
            if (!(f.ms > 0)) {
                e.fail("ms", fmt::format("value {:g}; allowed: a measured time > 0", f.ms));
            }
            f.cuda_graph = e.get_or<bool>("cuda_graph", false);
            f.routing = e.get_or<std::string>("routing", "hidden");
            if (f.routing != "hidden" && f.routing != "balanced") {
                e.fail("routing", "'" + f.routing + "' is not a routing; allowed: hidden, balanced");
            }
            t.forwards.push_back(std::move(f));
        }
    }
    return t;
}

KernelTable read_kernel_table(const std::string& path) {
    return parse_kernel_table(read_input_file(path, "kernel table"), path);
}

const std::vector<KernelTable>& kernel_table_catalog() {
    static const std::vector<KernelTable> catalog = [] {
        std::vector<KernelTable> out;
        for (const auto& e : detail::embedded_kernel_tables()) {
            out.push_back(parse_kernel_table(std::string(e.yaml), std::string(e.file)));
        }
        return out;
    }();
    return catalog;
}

const KernelTable* find_kernel_table(const GpuSpec& gpu) {
    std::vector<std::string> names = gpu.aliases;
    names.push_back(gpu.name);
    for (const auto& t : kernel_table_catalog()) {
        const std::string want = normalise(t.gpu);
        const bool named =
            std::any_of(names.begin(), names.end(), [&](const std::string& n) { return normalise(n) == want; });
        if (named || want == normalise(gpu.device_name) ||
            (!t.device_name.empty() && normalise(t.device_name) == normalise(gpu.device_name))) {
            return &t;
        }
    }
    return nullptr;
}

KernelRoof KernelRoof::of(const GpuSpec& gpu) {
    return KernelRoof{gpu.bf16_dense_flops_per_s, gpu.fp8_dense_flops_per_s, gpu.memory_bandwidth_bytes_per_s};
}

UnitWork gemm_work(double m, double n, double k, const GemmRun& run) {
    return UnitWork{2.0 * m * n * k, m * k * run.activation_bytes + n * k * run.weight_bytes + 2.0 * m * n};
}

UnitWork moe_work(
    int experts, int top_k, int hidden, int intermediate, bool gated, double tokens, double weight_bytes) {
    const double e = experts;
    const double mats = gated ? 3.0 : 2.0;
    const double per_expert = mats * hidden * static_cast<double>(intermediate);
    const double touched = e * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / e, tokens));
    return UnitWork{2.0 * tokens * top_k * per_expert,
                    touched * per_expert * weight_bytes + 2.0 * 2.0 * tokens * top_k * hidden};
}

KernelCostLookup::KernelCostLookup(const KernelTable& table, const KernelRoof& table_roof, const KernelRoof& target)
    : table_(&table), table_roof_(table_roof), target_(target) {
    if (transfer()) {
        for (const auto& e : table.moe) {
            moe_fixed_.push_back(moe_fixed_us(e));
        }
    }
}

namespace {

// An entry's fixed time (ScaledEntry::fixed_us): the least, over its n measured points, of measured − the table GPU's
// roofline for that point's work (`excess(i)`), never negative.
template <typename Excess>
double least_excess_us(std::size_t n, Excess excess) {
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
        least = std::min(least, excess(i));
    }
    return n == 0 ? 0 : std::max(0.0, least);
}

double roof_us(const KernelRoof& r, double flops, double bytes, bool fp8_math) {
    const double peak = fp8_math && r.fp8_flops_per_s > 0 ? r.fp8_flops_per_s : r.bf16_flops_per_s;
    return 1e6 * std::max(flops / peak, bytes / r.bytes_per_s);
}

GemmRun run_of(GemmKind k) {
    return k == GemmKind::kBf16 ? GemmRun{false, 2, 2} : GemmRun{true, 1, 1};
}

bool same_run(const GemmRun& a, const GemmRun& b) {
    return a.fp8_math == b.fp8_math && a.activation_bytes == b.activation_bytes && a.weight_bytes == b.weight_bytes;
}

// log-distance of two positive sizes
double log_gap(double a, double b) {
    return std::fabs(std::log(a / b));
}

}  // namespace

double KernelCostLookup::table_roof_us(double flops, double bytes, bool fp8_math) const {
    return roof_us(table_roof_, flops, bytes, fp8_math);
}

double KernelCostLookup::target_roof_us(double flops, double bytes, bool fp8_math) const {
    return roof_us(target_, flops, bytes, fp8_math);
}

std::optional<GemmHandle> KernelCostLookup::resolve_gemm(GemmKind want,
                                                         std::int64_t n,
                                                         std::int64_t k,
                                                         const GemmRun& run) const {
    // The op the kernel corresponds to, then the fallbacks (docs/COST-MODEL.md, "GEMMs").
    std::vector<GemmKind> order;
    if (run.fp8_math && target_.fp8_flops_per_s > 0) {
        for (int i = static_cast<int>(want); i >= 1; --i) {
            order.push_back(static_cast<GemmKind>(i));
        }
        if (want == GemmKind::kBf16) {
            order.push_back(GemmKind::kFp8Tensor);
        }
    }
    order.push_back(GemmKind::kBf16);
    for (int i = 1; i < kNumGemmKinds; ++i) {
        order.push_back(static_cast<GemmKind>(i));  // only bf16-less tables reach these
    }
    for (const GemmKind source : order) {
        const auto& entries = table_->gemm[static_cast<std::size_t>(source)];
        if (entries.empty()) {
            continue;
        }
        GemmHandle h;
        h.source = source;
        h.n = n;
        h.k = k;
        h.run = run;
        const std::int64_t nk = n * k;
        const auto first_at = std::lower_bound(entries.begin(), entries.end(), nk,
                                               [](const GemmEntry& e, std::int64_t v) { return e.n * e.k < v; });
        // Among the entries of one n·k, the nearest k (in log).
        const auto nearest_k = [&](std::vector<GemmEntry>::const_iterator it) {
            const std::int64_t group = it->n * it->k;
            const GemmEntry* best = &*it;
            for (; it != entries.end() && it->n * it->k == group; ++it) {
                if (log_gap(static_cast<double>(it->k), static_cast<double>(k)) <
                    log_gap(static_cast<double>(best->k), static_cast<double>(k))) {
                    best = &*it;
                }
            }
            return best;
        };
        const auto group_start = [&](std::vector<GemmEntry>::const_iterator it) {
            const std::int64_t group = it->n * it->k;
            while (it != entries.begin() && std::prev(it)->n * std::prev(it)->k == group) {
                --it;
            }
            return it;
        };
        if (first_at != entries.end() && first_at->n * first_at->k == nk) {
            h.lo = h.hi = nearest_k(first_at);
        } else if (first_at == entries.begin()) {
            h.lo = h.hi = nearest_k(first_at);
        } else if (first_at == entries.end()) {
            h.lo = h.hi = nearest_k(group_start(std::prev(first_at)));
        } else {
            h.lo = nearest_k(group_start(std::prev(first_at)));
            h.hi = nearest_k(first_at);
            h.w = std::log(static_cast<double>(nk) / static_cast<double>(h.lo->n * h.lo->k)) /
                  std::log(static_cast<double>(h.hi->n * h.hi->k) / static_cast<double>(h.lo->n * h.lo->k));
        }
        h.exact = h.lo == h.hi && h.lo->n == n && h.lo->k == k && !transfer() && same_run(run, run_of(source));
        if (transfer()) {
            const double lo = gemm_fixed_us(*h.lo, source);
            h.fixed_us = lo + h.w * (gemm_fixed_us(*h.hi, source) - lo);
        }
        return h;
    }
    return std::nullopt;
}

double KernelCostLookup::gemm_eff(const GemmEntry& e, GemmKind source, double m) const {
    const GemmRun r = run_of(source);
    const UnitWork w = gemm_work(m, static_cast<double>(e.n), static_cast<double>(e.k), r);
    return table_roof_us(w.flops, w.bytes, r.fp8_math) / e.m.at(m);
}

double KernelCostLookup::gemm_fixed_us(const GemmEntry& e, GemmKind source) const {
    if (!transfer()) {
        return 0;
    }
    const GemmRun r = run_of(source);
    return least_excess_us(e.m.x.size(), [&](std::size_t i) {
        const UnitWork w = gemm_work(e.m.x[i], static_cast<double>(e.n), static_cast<double>(e.k), r);
        return e.m.us[i] - table_roof_us(w.flops, w.bytes, r.fp8_math);
    });
}

double KernelCostLookup::gemm_us(const GemmHandle& h, double m) const {
    if (h.exact) {
        return h.lo->m.at(m);
    }
    double eff = gemm_eff(*h.lo, h.source, m);
    if (h.hi != h.lo) {
        eff += h.w * (gemm_eff(*h.hi, h.source, m) - eff);
    }
    const UnitWork w = gemm_work(m, static_cast<double>(h.n), static_cast<double>(h.k), h.run);
    const double on_target = target_roof_us(w.flops, w.bytes, h.run.fp8_math) / eff;
    if (!transfer()) {
        return on_target;
    }
    // The shape on the table's GPU, then moved with its fixed time kept (ScaledEntry::of).
    const double on_table_gpu = table_roof_us(w.flops, w.bytes, h.run.fp8_math) / eff;
    return moved_to_gpu_us(on_table_gpu, on_target / on_table_gpu, h.fixed_us);
}

double KernelCostLookup::gemm_us(GemmKind kind, double m, std::int64_t n, std::int64_t k) const {
    const std::optional<GemmHandle> h = resolve_gemm(kind, n, k, run_of(kind));
    if (!h) {
        throw ConfigError(fmt::format("{}: no GEMM entries (ops.gemm_*): a GEMM cannot be looked up", table_->file));
    }
    return gemm_us(*h, m);
}

namespace {

// The entry of the nearest geometry: same head dim first, then GQA ratio, then query heads (log distances).
template <typename Entry>
const Entry* nearest_geometry(const std::vector<Entry>& entries, const AttentionGeometry& g) {
    const Entry* best = nullptr;
    std::tuple<int, double, double, int, std::size_t> best_score{};
    for (const auto& e : entries) {
        const AttentionGeometry& h = e.geometry;
        // FlashAttention-class backends first among entries of one geometry (vLLM's default backend on Hopper).
        const bool flash = e.backend.find("flash") != std::string::npos;
        // Then the plainest name ("sdpa-flash" before "sdpa-flash-kv-expanded" or "...-lower-right-bias").
        const std::tuple<int, double, double, int, std::size_t> score{
            h.head_dim == g.head_dim ? 0 : 1,
            log_gap(static_cast<double>(h.q_heads) / h.kv_heads, static_cast<double>(g.q_heads) / g.kv_heads) +
                log_gap(h.head_dim, g.head_dim),
            log_gap(h.q_heads, g.q_heads), flash ? 0 : 1, e.backend.size()};
        if (best == nullptr || score < best_score) {
            best = &e;
            best_score = score;
        }
    }
    return best;
}

// An entry's own work per (query, key) pair: 4·Hq·hd FLOPs (QKᵀ and PV), 2·Hkv·hd bf16 KV bytes per key.
UnitWork geometry_per_key(const AttentionGeometry& g) {
    return UnitWork{4.0 * g.q_heads * g.head_dim, 2.0 * g.kv_heads * g.head_dim * 2.0};
}

bool same_geometry(const AttentionGeometry& a, const AttentionGeometry& b) {
    return a.head_dim == b.head_dim && a.q_heads == b.q_heads && a.kv_heads == b.kv_heads;
}

}  // namespace

double KernelCostLookup::grid_fixed_us(const KernelGrid& g, const UnitWork& per_unit) const {
    if (!transfer()) {
        return 0;
    }
    // Decode: the work of a point is per_unit × batch × context (one query per sequence); us is row-major.
    const std::size_t ny = g.y.size();
    return least_excess_us(g.x.size() * ny, [&](std::size_t k) {
        const double units = g.x[k / ny] * g.y[k % ny];
        return g.us[k] - table_roof_us(per_unit.flops * units, per_unit.bytes * units, false);
    });
}

std::optional<ScaledEntry<AttnPrefillEntry>> KernelCostLookup::resolve_attn_prefill(const AttentionGeometry& g,
                                                                                    const UnitWork& per_key) const {
    const AttnPrefillEntry* e = nearest_geometry(table_->attn_prefill, g);
    if (e == nullptr) {
        return std::nullopt;
    }
    // Prefill is compute-bound: both rooflines are FLOPs per key × the same Σ keys (Q, K, V and O bytes < 2 %).
    const UnitWork own = geometry_per_key(e->geometry);
    ScaledEntry<AttnPrefillEntry> s{e, 1.0, false};
    s.exact = same_geometry(e->geometry, g) && own.flops == per_key.flops && !transfer();
    if (!s.exact) {
        s.scale = target_roof_us(per_key.flops, 0, false) / table_roof_us(own.flops, 0, false);
    }
    return s;
}

std::optional<ScaledEntry<AttnPrefillCachedEntry>> KernelCostLookup::resolve_attn_prefill_cached(
    const AttentionGeometry& g, const UnitWork& per_key) const {
    const AttnPrefillCachedEntry* e = nearest_geometry(table_->attn_prefill_cached, g);
    if (e == nullptr) {
        return std::nullopt;
    }
    const UnitWork own = geometry_per_key(e->geometry);
    ScaledEntry<AttnPrefillCachedEntry> s{e, 1.0, false};
    s.exact = same_geometry(e->geometry, g) && own.flops == per_key.flops && !transfer();
    if (!s.exact) {
        s.scale = target_roof_us(per_key.flops, 0, false) / table_roof_us(own.flops, 0, false);
    }
    return s;
}

std::optional<ScaledEntry<AttnDecodeEntry>> KernelCostLookup::resolve_attn_decode(const AttentionGeometry& g,
                                                                                  const UnitWork& per_key) const {
    const AttnDecodeEntry* e = nearest_geometry(table_->attn_decode, g);
    if (e == nullptr) {
        return std::nullopt;
    }
    // Decode reads every key's K and V: both rooflines are max(FLOPs, bytes) per key × the same batch · context.
    const UnitWork own = geometry_per_key(e->geometry);
    ScaledEntry<AttnDecodeEntry> s{e, 1.0, false};
    s.exact = same_geometry(e->geometry, g) && own.flops == per_key.flops && own.bytes == per_key.bytes && !transfer();
    if (!s.exact) {
        s.scale = target_roof_us(per_key.flops, per_key.bytes, false) / table_roof_us(own.flops, own.bytes, false);
        s.src_scale = table_roof_us(per_key.flops, per_key.bytes, false) / table_roof_us(own.flops, own.bytes, false);
        s.fixed_us = grid_fixed_us(e->batch_context, own);
    }
    return s;
}

std::optional<ScaledEntry<MlaDecodeEntry>> KernelCostLookup::resolve_mla_decode(int q_heads,
                                                                                int kv_lora_rank,
                                                                                int rope_dim,
                                                                                const UnitWork& per_key) const {
    const MlaDecodeEntry* best = nullptr;
    std::pair<double, double> best_score{};
    for (const auto& e : table_->attn_decode_mla) {
        const std::pair<double, double> score{log_gap(e.kv_lora_rank + e.rope_dim, kv_lora_rank + rope_dim),
                                              log_gap(e.q_heads, q_heads)};
        if (best == nullptr || score < best_score) {
            best = &e;
            best_score = score;
        }
    }
    if (best == nullptr) {
        return std::nullopt;
    }
    // Absorbed MLA: 2·H·(L + R) FLOPs for the scores and 2·H·L for the values per key; (L + R) bf16 latent bytes.
    const double h = best->q_heads;
    const UnitWork own{2.0 * h * (best->kv_lora_rank + best->rope_dim) + 2.0 * h * best->kv_lora_rank,
                       2.0 * (best->kv_lora_rank + best->rope_dim)};
    ScaledEntry<MlaDecodeEntry> s{best, 1.0, false};
    s.exact = best->q_heads == q_heads && best->kv_lora_rank == kv_lora_rank && best->rope_dim == rope_dim &&
              own.flops == per_key.flops && own.bytes == per_key.bytes && !transfer();
    if (!s.exact) {
        s.scale = target_roof_us(per_key.flops, per_key.bytes, false) / table_roof_us(own.flops, own.bytes, false);
        s.src_scale = table_roof_us(per_key.flops, per_key.bytes, false) / table_roof_us(own.flops, own.bytes, false);
        s.fixed_us = grid_fixed_us(best->batch_context, own);
    }
    return s;
}

namespace {

const MoeEntry* nearest_moe(const std::vector<MoeEntry>& entries, const KernelCostLookup::MoeShape& s) {
    const MoeEntry* best = nullptr;
    std::tuple<double, double, double> best_score{};
    for (const auto& e : entries) {
        const double width = e.intermediate > 0 ? static_cast<double>(e.hidden) * e.intermediate : e.hidden;
        const double want = e.intermediate > 0 ? static_cast<double>(s.hidden) * s.intermediate : s.hidden;
        const std::tuple<double, double, double> score{log_gap(width, want), log_gap(e.experts, s.experts),
                                                       log_gap(e.top_k, s.top_k)};
        if (best == nullptr || score < best_score) {
            best = &e;
            best_score = score;
        }
    }
    return best;
}

// The routing kernels' bytes per token: the fp32 router logits read for softmax/top-k, each token's hidden state
// written to and read from its top_k expert slots (permute), and the top_k outputs read back and summed (unpermute).
double routing_bytes(int experts, int top_k, int hidden) {
    return 4.0 * experts + 4.0 * 2.0 * top_k * hidden;
}

}  // namespace

const MoeEntry* KernelCostLookup::resolve_moe(const MoeShape& s) const {
    return nearest_moe(table_->moe, s);
}

double KernelCostLookup::moe_us(const MoeEntry& e, const MoeShape& s, double tokens) const {
    if (!transfer() && e.experts == s.experts && e.top_k == s.top_k && e.hidden == s.hidden &&
        e.intermediate == s.intermediate && s.gated && s.weight_bytes == 2 && !s.fp8_math) {
        return e.tokens.at(tokens);
    }
    // The same mean tokens per expert, where grouped GEMMs of a few rows each run at the same efficiency.
    const double own_tokens =
        tokens * (static_cast<double>(s.top_k) / s.experts) / (static_cast<double>(e.top_k) / e.experts);
    const UnitWork own = moe_work(e.experts, e.top_k, e.hidden, e.intermediate, true, own_tokens, 2);
    const UnitWork want = moe_work(s.experts, s.top_k, s.hidden, s.intermediate, s.gated, tokens, s.weight_bytes);
    const double measured = e.tokens.at(own_tokens);
    const double own_roof = table_roof_us(own.flops, own.bytes, false);
    const double on_target = measured * target_roof_us(want.flops, want.bytes, s.fp8_math) / own_roof;
    if (!transfer()) {
        return on_target;
    }
    // The shape on the table's GPU, then moved with the entry's fixed time kept (ScaledEntry::of).
    const double on_table_gpu = measured * table_roof_us(want.flops, want.bytes, s.fp8_math) / own_roof;
    // The entry's fixed time, computed once per entry of this table (the constructor), else here.
    double fixed = -1;
    for (std::size_t i = 0; i < moe_fixed_.size(); ++i) {
        if (&table_->moe[i] == &e) {
            fixed = moe_fixed_[i];
            break;
        }
    }
    return moved_to_gpu_us(on_table_gpu, on_target / on_table_gpu, fixed >= 0 ? fixed : moe_fixed_us(e));
}

double KernelCostLookup::moe_fixed_us(const MoeEntry& e) const {
    return least_excess_us(e.tokens.x.size(), [&](std::size_t i) {
        const UnitWork w = moe_work(e.experts, e.top_k, e.hidden, e.intermediate, true, e.tokens.x[i], 2);
        return e.tokens.us[i] - table_roof_us(w.flops, w.bytes, false);
    });
}

const MoeEntry* KernelCostLookup::resolve_moe_fused(const MoeShape& s) const {
    if (s.weight_bytes != 2 || s.fp8_math) {
        return nullptr;
    }
    return nearest_moe(table_->moe_vllm_fused, s);
}

double KernelCostLookup::fused_over_grouped(const MoeEntry& fused, const MoeShape& s, double tokens) const {
    // The same mean tokens per expert as moe_us reads its nearest shape at; the tile configs vLLM ships are chosen
    // by token count, so outside the timed counts the ratio at the nearest end is held, not extrapolated.
    const double own_tokens = std::clamp(
        tokens * (static_cast<double>(s.top_k) / s.experts) / (static_cast<double>(fused.top_k) / fused.experts),
        fused.tokens.x.front(), fused.tokens.x.back());
    // The fused timing ends with the top-k sum (vLLM's moe_sum), which the routing term prices already: its bytes
    // (top_k outputs read, one written, bf16) at the table's measured copy rate are taken off.
    const double sum_us = table_->copy_gb_per_s
                              ? own_tokens * (fused.top_k + 1.0) * fused.hidden * 2.0 / (*table_->copy_gb_per_s * 1e3)
                              : 0.0;
    return (fused.tokens.at(own_tokens) - sum_us) / fused.grouped.at(own_tokens);
}

const MoeEntry* KernelCostLookup::resolve_moe_routing(const MoeShape& s) const {
    return nearest_moe(table_->moe_routing, s);
}

double KernelCostLookup::moe_routing_us(const MoeEntry& e, const MoeShape& s, double tokens) const {
    if (!transfer() && e.experts == s.experts && e.top_k == s.top_k && e.hidden == s.hidden) {
        return e.tokens.at(tokens);
    }
    // About ten small kernels: at a few tokens their launches and latencies are the time, and those do not shrink
    // with a narrower shape (KernelCurve::at_scaled).
    return e.tokens.at_scaled(tokens, target_roof_us(0, routing_bytes(s.experts, s.top_k, s.hidden), false) /
                                          table_roof_us(0, routing_bytes(e.experts, e.top_k, e.hidden), false));
}

const WidthEntry* KernelCostLookup::nearest_width(const std::vector<WidthEntry>& entries, std::int64_t width) {
    const WidthEntry* best = nullptr;
    // Entries are ordered greedy (or unnamed) first: when there are such, the other methods are not candidates.
    const bool preferred = !entries.empty() && (entries.front().method.empty() || entries.front().method == "greedy");
    for (const auto& e : entries) {
        if (preferred && !(e.method.empty() || e.method == "greedy")) {
            break;
        }
        if (best == nullptr || log_gap(static_cast<double>(e.width), static_cast<double>(width)) <
                                   log_gap(static_cast<double>(best->width), static_cast<double>(width))) {
            best = &e;
        }
    }
    return best;
}

double KernelCostLookup::width_scale(const WidthEntry& e, std::int64_t width) const {
    if (!transfer() && e.width == width) {
        return 1.0;
    }
    return target_roof_us(0, static_cast<double>(width), false) / table_roof_us(0, static_cast<double>(e.width), false);
}

std::optional<KernelCostLookup::ScaledCurve> KernelCostLookup::resolve_gdn(const std::vector<GdnEntry>& op,
                                                                            const GdnShape& g,
                                                                            int seqs) const {
    const GdnEntry* best = nullptr;
    const auto gap = [&](const GdnEntry& e) {
        // the same head dim first, then the nearest value-head count, then key heads, then sequences
        return std::tuple(e.head_dim != g.head_dim,
                          log_gap(static_cast<double>(e.value_heads), static_cast<double>(g.value_heads)),
                          log_gap(static_cast<double>(e.key_heads), static_cast<double>(g.key_heads)),
                          e.seqs != seqs);
    };
    for (const auto& e : op) {
        if (seqs > 0 && e.seqs != seqs) {
            continue;
        }
        if (best == nullptr || gap(e) < gap(*best)) {
            best = &e;
        }
    }
    if (best == nullptr) {
        return std::nullopt;
    }
    // The state streamed per sequence: value_heads · head_dim² (fp32 in the tables: the factor cancels).
    const auto state = [](int heads, int dim) { return static_cast<double>(heads) * dim * dim; };
    const bool same = best->key_heads == g.key_heads && best->value_heads == g.value_heads && best->head_dim == g.head_dim;
    const double scale = !transfer() && same ? 1.0
                                             : target_roof_us(0, state(g.value_heads, g.head_dim), false) /
                                                   table_roof_us(0, state(best->value_heads, best->head_dim), false);
    return ScaledCurve{&best->curve, scale};
}

std::optional<KernelCostLookup::ScaledCurve> KernelCostLookup::resolve_conv1d(std::int64_t dim, bool decode) const {
    const Conv1dEntry* best = nullptr;
    for (const auto& e : table_->conv1d) {
        if (e.decode == decode &&
            (best == nullptr || log_gap(static_cast<double>(e.dim), static_cast<double>(dim)) <
                                    log_gap(static_cast<double>(best->dim), static_cast<double>(dim)))) {
            best = &e;
        }
    }
    if (best == nullptr) {
        return std::nullopt;
    }
    const double scale = !transfer() && best->dim == dim ? 1.0
                                                          : target_roof_us(0, static_cast<double>(dim), false) /
                                                                table_roof_us(0, static_cast<double>(best->dim), false);
    return ScaledCurve{&best->curve, scale};
}

const RopeEntry* KernelCostLookup::resolve_rope(const AttentionGeometry& g) const {
    const RopeEntry* best = nullptr;
    for (const auto& e : table_->rope) {
        const double d = log_gap(static_cast<double>(e.geometry.q_heads + e.geometry.kv_heads) * e.geometry.head_dim,
                                 static_cast<double>(g.q_heads + g.kv_heads) * g.head_dim);
        if (best == nullptr ||
            d < log_gap(static_cast<double>(best->geometry.q_heads + best->geometry.kv_heads) * best->geometry.head_dim,
                        static_cast<double>(g.q_heads + g.kv_heads) * g.head_dim)) {
            best = &e;
        }
    }
    return best;
}

double KernelCostLookup::rope_scale(const RopeEntry& e, const AttentionGeometry& g) const {
    if (!transfer() && same_geometry(e.geometry, g)) {
        return 1.0;
    }
    // RoPE reads and writes each query and key head: bytes ∝ (Hq + Hkv)·hd.
    const double own = static_cast<double>(e.geometry.q_heads + e.geometry.kv_heads) * e.geometry.head_dim;
    const double want = static_cast<double>(g.q_heads + g.kv_heads) * g.head_dim;
    return target_roof_us(0, want, false) / table_roof_us(0, own, false);
}

}  // namespace servesim::calibration
