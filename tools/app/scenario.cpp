// Scenario reading: layers (file, experiment entry, sweep point, --set) merged key by key, then parsed strictly.
#include "tools/app/scenario.h"

#include <fmt/format.h>

#include <cmath>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>

#include "common/error.h"
#include "calibration/gpu_spec.h"
#include "common/yaml_reader.h"
#include "models/model_registry.h"
#include "workloads/open_loop_workload.h"
#include "tools/app/experiment.h"
#include "workloads/workload.h"

namespace servesim::app {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string_view> kEngineKeys = {
    "block_size",         "max_num_batched_tokens", "max_num_seqs",          "max_model_len",
    "gpu_memory_utilization", "kv_cache_dtype",     "enable_prefix_caching", "mamba_cache_mode",
    "kv_cache_memory_bytes", "enable_chunked_prefill", "long_prefill_token_threshold",
    "scheduler_reserve_full_isl", "vllm_version", "kv_offloading_size", "kv_offloading_load_us_per_token",
    "async_scheduling", "tensor_parallel_size",
    "prefix_cache_retention_interval"};

const std::vector<std::string_view> kClusterKeys = {"replicas", "router"};

// Merges mapping layers key by key (later layers win); maps present in several layers merge recursively. Every
// value is assigned once into a fresh node, so the source nodes (and their line marks) are never modified.
YAML::Node merge_layers(const std::vector<YAML::Node>& layers) {
    std::vector<std::string> keys;
    for (const auto& layer : layers) {
        for (const auto& kv : layer) {
            const auto k = kv.first.as<std::string>();
            if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
                keys.push_back(k);
            }
        }
    }
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& k : keys) {
        std::vector<YAML::Node> values;
        for (const auto& layer : layers) {
            if (layer[k]) {
                values.push_back(layer[k]);
            }
        }
        // Only trailing map values merge; a scalar in a later layer replaces everything before it.
        std::size_t first_map = values.size();
        while (first_map > 0 && values[first_map - 1].IsMap()) {
            --first_map;
        }
        if (values.back().IsMap() && values.size() - first_map > 1) {
            out[k] = merge_layers(std::vector<YAML::Node>(values.begin() + static_cast<long>(first_map), values.end()));
        } else {
            out[k] = values.back();
        }
    }
    return out;
}

// {"a.b.c": v} → {a: {b: {c: v}}}
YAML::Node layer_from_path(const std::string& path, const YAML::Node& value) {
    YAML::Node root(YAML::NodeType::Map);
    YAML::Node cur = root;
    std::size_t start = 0;
    while (true) {
        const auto dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (part.empty()) {
            throw ConfigError(fmt::format("'{}': empty key component", path));
        }
        if (dot == std::string::npos) {
            cur[part] = value;
            break;
        }
        YAML::Node child(YAML::NodeType::Map);
        cur[part] = child;
        cur.reset(child);  // rebind (operator= would overwrite the node cur refers to)
        start = dot + 1;
    }
    return root;
}

std::string column_name(const std::string& path) {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string scalar_text(const YAML::Node& n) {
    if (n.IsScalar()) {
        return n.Scalar();
    }
    YAML::Emitter e;
    e << YAML::Flow << n;
    return e.c_str();
}

// A relative path is taken relative to the scenario's folder when it exists there, else as given (working dir).
std::string resolve_relative(const std::string& value, const std::string& base_dir) {
    if (value.empty() || fs::path(value).is_absolute() || base_dir.empty()) {
        return value;
    }
    const fs::path candidate = fs::path(base_dir) / value;
    if (fs::exists(candidate)) {
        return candidate.lexically_normal().string();
    }
    return value;
}

bool looks_like_path(const std::string& s) {
    return s.find('/') != std::string::npos || s.ends_with(".json") || s.ends_with(".yaml") || s.ends_with(".yml");
}

std::int64_t parse_bytes(const YamlMap& m, std::string_view key) {
    const YAML::Node n = m.node(key);
    const std::string text = n.IsScalar() ? n.Scalar() : "";
    std::size_t pos = 0;
    double value = 0;
    try {
        value = std::stod(text, &pos);
    } catch (const std::logic_error&) {
        m.fail(key, "expected a size in bytes, or a number with GiB, MiB, GB or MB, got '" + text + "'");
    }
    std::string unit = text.substr(pos);
    unit.erase(0, unit.find_first_not_of(' '));
    double scale = 1;
    if (unit == "GiB") {
        scale = 1024.0 * 1024.0 * 1024.0;
    } else if (unit == "MiB") {
        scale = 1024.0 * 1024.0;
    } else if (unit == "GB") {
        scale = 1e9;
    } else if (unit == "MB") {
        scale = 1e6;
    } else if (!unit.empty() && unit != "B") {
        m.fail(key, "unknown size unit '" + unit + "'; allowed: B, MB, MiB, GB, GiB");
    }
    if (!(value > 0) || !std::isfinite(value)) {
        m.fail(key, "must be a positive size");
    }
    return static_cast<std::int64_t>(std::floor(value * scale));
}

// `capacity_tokens`: a whole number of tokens ≥ 1 (1e9 accepted), or `unlimited` (→ nullopt).
std::optional<std::int64_t> parse_capacity_tokens(const YamlMap& m, std::string_view key) {
    const YAML::Node n = m.node(key);
    const std::string text = n.IsScalar() ? n.Scalar() : "";
    if (text == "unlimited") {
        return std::nullopt;
    }
    std::size_t pos = 0;
    double value = 0;
    try {
        value = std::stod(text, &pos);
    } catch (const std::logic_error&) {
        pos = 0;
    }
    if (pos == 0 || pos != text.size() || !(value >= 1) || value > 1e15 || value != std::floor(value)) {
        m.fail(key, "expected a whole number of tokens ≥ 1 (e.g. 1000000 or 1e6), or unlimited; got '" + text + "'");
    }
    return static_cast<std::int64_t>(value);
}

// A sweep column's value as printed: the value as written, except a trace path, shown by its file name.
std::string column_value(const std::string& key, const YAML::Node& value) {
    if (column_name(key) == "trace" && value.IsScalar()) {
        return fs::path(value.Scalar()).filename().string();
    }
    return scalar_text(value);
}

double parse_duration(const YamlMap& m, std::string_view key) {
    const YAML::Node n = m.node(key);
    if (!n.IsScalar()) {
        m.fail(key, "expected a duration like 30s or 5min");
    }
    return parse_duration_s(n.Scalar(), m.file(), m.line(key), m.key_path(key));
}

EngineSettings parse_engine(const YamlMap& e) {
    e.allow_only(kEngineKeys);
    EngineSettings s;
    if (e.has("block_size")) {
        const int b = e.get<int>("block_size");
        if (b <= 0 || b % 16 != 0) {
            e.fail("block_size", fmt::format("{} is not supported by the attention backend; allowed: a positive "
                                             "multiple of 16 (16, 32, 64, … ; hybrids raise it further)",
                                             b));
        }
        s.block_size = b;
    }
    if (e.has("max_num_batched_tokens")) {
        s.max_num_batched_tokens = e.get_in_range<std::int64_t>("max_num_batched_tokens", 1, 1LL << 30);
    }
    if (e.has("max_num_seqs")) {
        s.max_num_seqs = e.get_in_range<std::int64_t>("max_num_seqs", 1, 1LL << 24);
    }
    if (e.has("max_model_len")) {
        s.max_model_len = e.get_in_range<std::int64_t>("max_model_len", 1, 1LL << 30);
    }
    if (e.has("gpu_memory_utilization")) {
        const double u = e.get<double>("gpu_memory_utilization");
        if (!(u > 0.0 && u <= 1.0)) {
            e.fail("gpu_memory_utilization", fmt::format("{} is outside (0, 1]", u));
        }
        s.gpu_memory_utilization = u;
    }
    if (e.has("kv_cache_dtype")) {
        const auto t = e.get<std::string>("kv_cache_dtype");
        if (t == "fp8" || t == "fp8_e4m3" || t == "fp8_e5m2") {
            s.kv_cache_dtype_fp8 = true;
        } else if (t != "auto" && t != "bfloat16" && t != "bf16") {
            e.fail("kv_cache_dtype", "'" + t + "' is not supported; allowed: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2");
        }
    }
    s.enable_prefix_caching = e.get_optional<bool>("enable_prefix_caching");
    if (e.has("mamba_cache_mode")) {
        const auto t = e.get<std::string>("mamba_cache_mode");
        try {
            s.mamba_cache_mode = cache::parse_mamba_cache_mode(t);
        } catch (const ConfigError&) {
            e.fail("mamba_cache_mode", "'" + t + "' is not a mode; allowed: none, align, all");
        }
    }
    if (e.has("kv_cache_memory_bytes")) {
        s.kv_cache_memory_bytes = parse_bytes(e, "kv_cache_memory_bytes");
    }
    s.enable_chunked_prefill = e.get_or<bool>("enable_chunked_prefill", true);
    if (e.has("long_prefill_token_threshold")) {
        s.long_prefill_token_threshold = e.get_in_range<std::int64_t>("long_prefill_token_threshold", 0, 1LL << 30);
    }
    s.scheduler_reserve_full_isl = e.get_or<bool>("scheduler_reserve_full_isl", true);
    s.async_scheduling = e.get_or<bool>("async_scheduling", true);
    if (e.has("tensor_parallel_size")) {
        s.tensor_parallel_size = e.get_in_range<int>("tensor_parallel_size", 1, 1024);
    }
    if (e.has("kv_offloading_size")) {
        s.kv_offloading_size_gib = e.get<double>("kv_offloading_size");
        if (!(*s.kv_offloading_size_gib > 0)) {
            e.fail("kv_offloading_size", "must be a positive size in GiB (vLLM --kv-offloading-size)");
        }
    }
    if (e.has("kv_offloading_load_us_per_token")) {
        s.kv_offloading_load_us_per_token = e.get<double>("kv_offloading_load_us_per_token");
        if (*s.kv_offloading_load_us_per_token < 0) {
            e.fail("kv_offloading_load_us_per_token", "must be non-negative");
        }
    }
    if (e.has("prefix_cache_retention_interval")) {
        // vLLM --prefix-cache-retention-interval: none (dense), 0, or tokens (a multiple of the block size,
        // checked with the memory plan).
        const auto t = e.get<std::string>("prefix_cache_retention_interval");
        if (t == "none" || t == "None") {
            s.prefix_cache_retention_interval = cache::kRetentionDense;
        } else {
            std::int64_t v = -1;
            const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
            if (ec != std::errc() || end != t.data() + t.size() || v < 0 || v > (1LL << 30)) {
                e.fail("prefix_cache_retention_interval",
                       "'" + t + "' is not allowed; allowed: none (dense), 0 (replay boundary and shared-prefix "
                       "junctions only) or a number of tokens that is a multiple of the block size");
            }
            s.prefix_cache_retention_interval = v;
        }
    }
    if (e.has("vllm_version")) {
        s.vllm_version = e.get<std::string>("vllm_version");
        try {
            (void)cache::parse_vllm_version(s.vllm_version);
        } catch (const ConfigError& err) {
            e.fail("vllm_version", err.what());
        }
    }
    return s;
}

ExperimentConfig parse_experiment(const YamlMap& m, const std::string& base_dir) {
    std::vector<std::string_view> allowed(scenario_keys().begin(), scenario_keys().end());
    m.allow_only(allowed);
    ExperimentConfig x;
    x.file = m.file();
    if (m.has("seed")) {
        x.seed = m.get<std::uint64_t>("seed");
    }
    if (m.has("mode")) {
        const auto mode = m.get<std::string>("mode");
        if (mode != "engine" && mode != "order_only") {
            m.fail("mode", "'" + mode + "' is not a mode; allowed: engine (timed simulation, the default), "
                                        "order_only (prefix-cache capacity study of a trace)");
        }
        x.order_only = mode == "order_only";
    }
    if (m.has("capacity_tokens")) {
        if (!x.order_only) {
            m.fail("capacity_tokens", "only used with `mode: order_only` (the engine sizes its KV cache from the GPU)");
        }
        x.capacity_tokens = parse_capacity_tokens(m, "capacity_tokens");
    }
    x.model = x.order_only ? m.get_or<std::string>("model", "") : m.get<std::string>("model");
    if (looks_like_path(x.model)) {
        x.model = resolve_relative(x.model, base_dir);
    }
    x.gpu = m.get_or<std::string>("gpu", "H200");
    x.cost_model = m.get_or<std::string>("cost_model", "roofline");
    if (x.cost_model != "roofline") {
        x.cost_model = resolve_relative(x.cost_model, base_dir);
    }
    if (m.has("engine")) {
        x.engine = parse_engine(m.map("engine"));
    }
    if (m.has("cluster")) {
        const YamlMap c = m.map("cluster");
        c.allow_only(kClusterKeys);
        x.replicas = c.get_or<int>("replicas", 1);
        c.check_range<int>("replicas", x.replicas, 1, 100000);
        x.router = c.get_or<std::string>("router", "round_robin");
    }
    const YamlMap w = m.map("workload");
    YAML::Node workload(YAML::NodeType::Map);
    for (const auto& kv : w.raw()) {
        const auto k = kv.first.as<std::string>();
        if (k == "trace" && kv.second.IsScalar()) {
            YAML::Node resolved(resolve_relative(kv.second.Scalar(), base_dir));
            workload[k] = resolved;
        } else {
            workload[k] = kv.second;
        }
    }
    x.workload = workload;
    const YamlMap workload_map(x.workload, m.file(), "workload");
    if (x.order_only) {
        // Keys and file checked here; the records are read (and checked) once per trace by load_order_only_trace,
        // which every point's preparation runs before any point runs — not once per sweep point.
        if (!workload_map.has("type") || workload_map.get<std::string>("type") != "trace") {
            m.fail("mode", "`mode: order_only` replays a trace: it needs `workload: {type: trace, ...}`");
        }
        (void)workloads::parse_trace_workload(workload_map);
    } else {
        workloads::validate_workload(workload_map);
    }
    if (m.has("warmup")) {
        x.warmup_s = parse_duration(m, "warmup");
    }
    if (m.has("max_time")) {
        x.max_time_s = parse_duration(m, "max_time");
        if (!(x.max_time_s > 0)) {
            m.fail("max_time", "must be positive");
        }
    }
    x.max_time_given = m.has("max_time");
    x.check_invariants = m.get_or<bool>("check_invariants", false);
    if (m.has("goodput")) {
        // vllm bench serve check_goodput_args: names ttft, tpot, e2el; values in ms, non-negative.
        const YamlMap g = m.map("goodput");
        g.allow_only({"ttft", "tpot", "e2el"});
        auto bound = [&](std::string_view key) -> std::optional<double> {
            if (!g.has(key)) {
                return std::nullopt;
            }
            const double v = g.get<double>(key);
            if (!(v >= 0) || !std::isfinite(v)) {
                g.fail(key, fmt::format("must be a non-negative number of milliseconds, got {}", v));
            }
            return v;
        };
        x.goodput.ttft_ms = bound("ttft");
        x.goodput.tpot_ms = bound("tpot");
        x.goodput.e2el_ms = bound("e2el");
        if (!x.goodput.any()) {
            m.fail("goodput", "give at least one bound: ttft, tpot or e2el (ms)");
        }
    }
    if (m.has("replicates")) {
        x.replicates = m.get<int>("replicates");
        m.check_range<int>("replicates", x.replicates, 1, 1000);
    }
    x.allow_profile_mismatch = m.get_or<bool>("allow_profile_mismatch", false);
    return x;
}

// Model, GPU and vLLM's memory plan, checked while the keys' lines are known, so that an unknown preset or GPU, or a
// max_model_len whose one request does not fit the KV cache (vLLM _check_enough_kv_cache_memory), is reported at its
// file, line and key before anything is simulated. prepare_experiment makes the same calls again.
void check_model_gpu_and_memory(const YamlMap& m, const ExperimentConfig& x) {
    if (x.model.empty()) {
        return;
    }
    models::ModelSpec model;
    try {
        model = models::resolve_model(x.model);
    } catch (const ConfigError& e) {
        m.fail("model", e.what());
    }
    calibration::GpuSpec gpu;
    try {
        gpu = calibration::find_gpu(x.gpu);
    } catch (const ConfigError& e) {
        m.fail("gpu", e.what());
    }
    try {
        (void)cache::plan_memory(model, memory_plan_request(x.engine, gpu));
    } catch (const ConfigError& e) {
        // plan_memory's messages open with the engine key they are about ("max_model_len: ..."); a value the user
        // did not write is a default derived from the model.
        const std::string msg = e.what();
        const auto colon = msg.find(": ");
        const std::string key = colon == std::string::npos ? std::string() : msg.substr(0, colon);
        if (!key.empty() && m.has("engine") && m.map("engine").has(key)) {
            m.map("engine").fail(key, msg.substr(colon + 2));
        }
        m.fail("model", msg);
    }
}

}  // namespace

const std::vector<std::string_view>& scenario_keys() {
    static const std::vector<std::string_view> keys = {"name",    "description", "seed",   "model",    "gpu",
                                                       "cost_model", "engine",   "cluster", "workload", "warmup",
                                                       "max_time", "check_invariants", "experiments", "sweep",
                                                       "mode",     "capacity_tokens", "goodput", "replicates",
                                                       "allow_profile_mismatch"};
    return keys;
}

Scenario load_scenario_text(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides, std::optional<std::uint64_t> seed_override) {
    const YAML::Node root = load_yaml_string(text, file);
    const std::string base_dir = fs::path(file).has_parent_path() ? fs::path(file).parent_path().string() : ".";
    const YamlMap top(root, file);
    top.allow_only(scenario_keys());

    Scenario sc;
    sc.file = file;
    sc.name = top.get_or<std::string>("name", fs::path(file).stem().string());
    sc.description = top.get_or<std::string>("description", "");

    YAML::Node base(YAML::NodeType::Map);
    for (const auto& kv : root) {
        const auto k = kv.first.as<std::string>();
        if (k != "experiments" && k != "sweep" && k != "name" && k != "description") {
            base[k] = kv.second;
        }
    }

    // --set overrides and --seed: the last layer.
    std::vector<YAML::Node> override_layers;
    for (const auto& o : overrides) {
        const auto eq = o.find('=');
        if (eq == std::string::npos || eq == 0) {
            throw ConfigError(fmt::format("--set '{}': expected key=value, e.g. engine.block_size=32", o));
        }
        const std::string key = o.substr(0, eq);
        const std::string first = key.substr(0, key.find('.'));
        if (std::find(scenario_keys().begin(), scenario_keys().end(), first) == scenario_keys().end() ||
            first == "experiments" || first == "sweep") {
            std::string list;
            for (auto k : scenario_keys()) {
                list += (list.empty() ? "" : ", ") + std::string(k);
            }
            throw ConfigError(fmt::format("--set '{}': unknown key '{}'; allowed: {}", o, first, list));
        }
        override_layers.push_back(layer_from_path(key, load_yaml_string(o.substr(eq + 1), "--set " + key)));
    }
    if (seed_override) {
        YAML::Node s(YAML::NodeType::Map);
        s["seed"] = *seed_override;
        override_layers.push_back(s);
    }

    // experiments: side-by-side variants.
    struct Variant {
        std::string name;
        YAML::Node layer;
    };
    std::vector<Variant> variants;
    if (top.has("experiments")) {
        const YAML::Node list = top.node("experiments");
        if (!list.IsSequence() || list.size() == 0) {
            top.fail("experiments", "expected a non-empty list of experiment mappings");
        }
        for (std::size_t i = 0; i < list.size(); ++i) {
            const YamlMap entry(list[i], file, fmt::format("experiments[{}]", i));
            entry.allow_only(scenario_keys());
            YAML::Node layer(YAML::NodeType::Map);
            for (const auto& kv : list[i]) {
                const auto k = kv.first.as<std::string>();
                if (k == "experiments" || k == "sweep" || k == "description") {
                    entry.fail(k, "not allowed inside an experiment");
                }
                if (k != "name") {
                    layer[k] = kv.second;
                }
            }
            std::string name = entry.has("name") ? entry.get<std::string>("name")
                                                 : (entry.has("model") ? entry.get<std::string>("model")
                                                                        : fmt::format("experiment{}", i + 1));
            variants.push_back({name, layer});
        }
    } else {
        variants.push_back({sc.name, YAML::Node(YAML::NodeType::Map)});
    }

    // sweep: a grid over dotted keys; the first key varies slowest.
    std::vector<std::pair<std::string, std::vector<YAML::Node>>> axes;
    if (top.has("sweep")) {
        const YamlMap sw = top.map("sweep");
        for (const auto& key : sw.keys()) {
            const YAML::Node values = sw.node(key);
            if (!values.IsSequence() || values.size() == 0) {
                sw.fail(key, "expected a non-empty list of values to sweep");
            }
            const std::string first = key.substr(0, key.find('.'));
            if (std::find(scenario_keys().begin(), scenario_keys().end(), first) == scenario_keys().end() ||
                first == "experiments" || first == "sweep") {
                sw.fail(key, "unknown key '" + first + "'; sweep keys are scenario keys such as model, "
                                                        "engine.block_size, workload.tenants");
            }
            std::vector<YAML::Node> v;
            for (const auto& n : values) {
                v.push_back(n);
            }
            axes.emplace_back(key, std::move(v));
            sc.sweep_columns.push_back(column_name(key));
        }
        sc.is_sweep = true;
    }

    std::vector<std::size_t> idx(axes.size(), 0);
    const bool many_variants = variants.size() > 1;
    while (true) {
        for (const auto& variant : variants) {
            std::vector<YAML::Node> layers = {base, variant.layer};
            ExperimentConfig proto;
            if (many_variants) {
                proto.columns.emplace_back("experiment", variant.name);
            }
            std::string label = variant.name;
            for (std::size_t a = 0; a < axes.size(); ++a) {
                const YAML::Node& value = axes[a].second[idx[a]];
                layers.push_back(layer_from_path(axes[a].first, value));
                proto.columns.emplace_back(column_name(axes[a].first), column_value(axes[a].first, value));
                label += fmt::format(" {}={}", column_name(axes[a].first), column_value(axes[a].first, value));
            }
            layers.insert(layers.end(), override_layers.begin(), override_layers.end());
            const YAML::Node merged = merge_layers(layers);
            ExperimentConfig x = parse_experiment(YamlMap(merged, file), base_dir);
            check_model_gpu_and_memory(YamlMap(merged, file), x);
            x.name = label;
            x.columns = proto.columns;
            sc.experiments.push_back(std::move(x));
        }
        // next grid point
        std::size_t a = axes.size();
        while (a > 0) {
            --a;
            if (++idx[a] < axes[a].second.size()) {
                break;
            }
            idx[a] = 0;
            if (a == 0) {
                a = axes.size() + 1;  // wrapped the slowest axis: done
                break;
            }
        }
        if (axes.empty() || a == axes.size() + 1) {
            break;
        }
    }
    return sc;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                       std::optional<std::uint64_t> seed_override) {
    std::ifstream in(path);
    if (!in) {
        throw ConfigError(path + ": cannot open scenario file");
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    return load_scenario_text(buffer.str(), path, overrides, seed_override);
}

}  // namespace servesim::app
