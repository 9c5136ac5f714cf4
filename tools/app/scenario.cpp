// Scenario reading: layers (file, experiment entry, sweep point, --set) merged key by key, then parsed strictly.
// Size (~770 lines): the scenario keys in file order, one reader per key, so a key is found where the file
// puts it; the engine keys are engine_keys.cpp, the workload keys workloads/.
#include "tools/app/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>

#include "common/error.h"
#include "common/nearest_name.h"
#include "calibration/gpu_spec.h"
#include "common/input_file.h"
#include "common/yaml_reader.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "workloads/open_loop_workload.h"
#include "tools/app/engine_keys.h"
#include "tools/app/experiment.h"
#include "workloads/workload.h"

namespace servesim::app {
namespace {

frontend::RequestPathConfig parse_request_path(const YamlMap& m);  // below

namespace fs = std::filesystem;

const std::vector<std::string_view> kClusterKeys = {"replicas", "router", "router_config", "topology",
                                                    "kv_connector", "disaggregation"};

// yaml-cpp keeps the nodes of a document in one memory set, and assigning a node of one set into a node of another
// copies the whole source set into the target's (yaml-cpp node/detail/memory.h, memory::merge), then points the
// source's holder at the target's set. A sweep builds each point from fresh nodes that take values of the scenario
// document, so every point copied the document, and (the document now pointing at the newest point's set) every
// earlier point too: time and memory quadratic in the points (issue 41: 1,000 points took 26 s and 0.8 GB here).
// NodeArena creates fresh mapping nodes inside one set that already holds the document: an assignment then finds
// both sides in the same set and copies nothing, and the expansion is linear.
class NodeArena {
public:
    explicit NodeArena(const YAML::Node& document) : root_(YAML::NodeType::Map) { root_["document"] = document; }

    // An empty mapping in the arena's set.
    [[nodiscard]] YAML::Node map() {
        YAML::Node m(YAML::NodeType::Map);
        root_["fresh"] = m;  // the arena's set takes in m's (one node) and m's holder now points at it
        return m;
    }

private:
    YAML::Node root_;
};

YAML::Node fresh_map(NodeArena* arena) { return arena != nullptr ? arena->map() : YAML::Node(YAML::NodeType::Map); }

// Merges mapping layers key by key (later layers win); maps present in several layers merge recursively. Every
// value is assigned once into a fresh node, so the source nodes (and their line marks) are never modified.
YAML::Node merge_layers(const std::vector<YAML::Node>& layers, NodeArena* arena = nullptr) {
    std::vector<std::string> keys;
    for (const auto& layer : layers) {
        for (const auto& kv : layer) {
            const auto k = kv.first.as<std::string>();
            if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
                keys.push_back(k);
            }
        }
    }
    YAML::Node out = fresh_map(arena);
    for (const auto& k : keys) {
        std::vector<YAML::Node> values;
        for (const auto& layer : layers) {
            // Matched by the key's text, not layer[k]: an empty or null key (": 16384", found by fuzzing) is not
            // found by lookup, which left `values` empty; it now reaches allow_only, which names it.
            for (const auto& kv : layer) {
                if (kv.first.as<std::string>() == k) {
                    values.push_back(kv.second);
                }
            }
        }
        // Only trailing map values merge; a scalar in a later layer replaces everything before it.
        std::size_t first_map = values.size();
        while (first_map > 0 && values[first_map - 1].IsMap()) {
            --first_map;
        }
        if (values.back().IsMap() && values.size() - first_map > 1) {
            out[k] = merge_layers(std::vector<YAML::Node>(values.begin() + static_cast<long>(first_map), values.end()),
                                  arena);
        } else {
            out[k] = values.back();
        }
    }
    return out;
}

// {"a.b.c": v} → {a: {b: {c: v}}}
YAML::Node layer_from_path(const std::string& path, const YAML::Node& value, NodeArena* arena = nullptr) {
    YAML::Node root = fresh_map(arena);
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
        YAML::Node child = fresh_map(arena);
        cur[part] = child;
        cur.reset(child);  // rebind (operator= would overwrite the node cur refers to)
        start = dot + 1;
    }
    return root;
}

// `root` with `value` at the dotted `path`, replacing what was there (a whole mapping too). The maps along the path
// are copied, so nodes shared with the scenario's layers (merge_layers shares them) are never modified.
YAML::Node replace_at(const YAML::Node& root, std::string_view path, const YAML::Node& value,
                      NodeArena* arena = nullptr) {
    const auto dot = path.find('.');
    const std::string head(path.substr(0, dot));
    YAML::Node out = fresh_map(arena);
    YAML::Node child;
    if (root.IsMap()) {
        for (const auto& kv : root) {
            const auto k = kv.first.as<std::string>();
            if (k == head) {
                child = kv.second;
            } else {
                out[k] = kv.second;
            }
        }
    }
    if (dot == std::string_view::npos) {
        out[head] = value;
    } else {
        out[head] = replace_at(child && child.IsMap() ? child : fresh_map(arena), path.substr(dot + 1), value, arena);
    }
    return out;
}

// Whether `layer` sets the dotted `path` or a key under it, or holds a non-mapping where path's parent should be.
bool sets_path(const YAML::Node& layer, std::string_view path) {
    const auto dot = path.find('.');
    const std::string head(path.substr(0, dot));
    if (!layer.IsMap() || !layer[head]) {
        return false;
    }
    const YAML::Node child = layer[head];
    return dot == std::string_view::npos || !child.IsMap() || sets_path(child, path.substr(dot + 1));
}

// An error about a key the command line set ("<file>[:line]: 'engine.max_num_seqs': message") is re-thrown as
// "command line: --max-num-seqs: message"; any other error goes on unchanged.
[[noreturn]] void rethrow_naming_command_line(const ConfigError& e, const std::string& file,
                                              const std::vector<Override>& overrides) {
    const std::string msg = e.what();
    std::size_t p = 0;
    if (msg.starts_with(file)) {
        p = file.size();
        if (p < msg.size() && msg[p] == ':') {
            std::size_t q = p + 1;
            while (q < msg.size() && std::isdigit(static_cast<unsigned char>(msg[q]))) {
                ++q;
            }
            p = q > p + 1 ? q : p;
        }
    }
    if (p == 0 || msg.compare(p, 3, ": '") != 0) {
        throw e;
    }
    const std::size_t key_end = msg.find("': ", p + 3);
    if (key_end == std::string::npos) {
        throw e;
    }
    const std::string key = msg.substr(p + 3, key_end - p - 3);
    const std::string rest = msg.substr(key_end + 3);
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
        if (key == it->path || key.starts_with(it->path + ".")) {
            throw ConfigError("command line: " + it->origin + ": " + (key == it->path ? "" : "'" + key + "': ") + rest);
        }
    }
    throw e;
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

ExperimentConfig parse_experiment(const YamlMap& m, const std::string& base_dir, NodeArena* arena = nullptr) {
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
    if (calibration::is_gpu_file(x.gpu)) {
        x.gpu = resolve_relative(x.gpu, base_dir);  // a user GPU file (docs/GPUS.md), beside the scenario
    }
    x.cost_model = m.get_or<std::string>("cost_model", "roofline");
    if (x.cost_model != "roofline" && x.cost_model != "measured") {
        x.cost_model = resolve_relative(x.cost_model, base_dir);
    }
    if (m.has("engine")) {
        x.engine = parse_engine_settings(m.map("engine"));
    }
    if (m.has("cluster")) {
        const YamlMap c = m.map("cluster");
        c.allow_only(kClusterKeys);
        x.replicas = c.get_or<int>("replicas", 1);
        // Each replica holds its own KV block table (3.5 MB for Qwen3-4B on an H200): 1024 replicas take 3.6 GB of
        // host memory, 100,000 would take 350 GB (docs/INPUT-RANGES.md).
        c.check_range<int>("replicas", x.replicas, 1, 1024);
        x.router = c.get_or<std::string>("router", "round_robin");
        if (c.has("topology")) {
            x.topology = std::make_shared<const cluster::Topology>(
                cluster::parse_topology(c.node("topology"), m.file(), c.key_path("topology"), base_dir));
        }
        if (c.has("router_config")) {
            x.router_options = cluster::parse_router_options(c.map("router_config"));
        }
        if (c.has("kv_connector")) {
            x.kv_connector = cluster::parse_kv_connector(c.map("kv_connector"));
        }
        if (c.has("disaggregation")) {
            // The pools give the replica counts; the reads need the topology; one connector per engine.
            if (c.has("replicas")) {
                c.fail("replicas", "not with cluster.disaggregation: give prefill.replicas and decode.replicas");
            }
            if (!x.topology) {
                c.fail("disaggregation", "needs cluster.topology: the KV of each prefill is read over its links");
            }
            if (x.kv_connector) {
                c.fail("kv_connector", "not with cluster.disaggregation: one KV connector per engine (the "
                                       "NixlConnector)");
            }
            x.disaggregation = cluster::parse_disaggregation(c.map("disaggregation"));
            x.replicas = x.disaggregation->prefill.replicas + x.disaggregation->decode.replicas;
        }
    }
    const YamlMap w = m.map("workload");
    YAML::Node workload = fresh_map(arena);  // this experiment's own copy (order-only replays modify it)
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
    if (m.has("metrics")) {
        const YamlMap metrics = m.map("metrics");
        metrics.allow_only({"exact_percentiles"});
        x.exact_percentiles = metrics.get_or<bool>("exact_percentiles", false);
    }
    if (m.has("request_path")) {
        x.request_path = parse_request_path(m);
    }
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
// `resolved` caches the models already read in this scenario (by the `model:` text): a sweep's points mostly share
// them, and reading a preset or config.json is most of a point's check.
void check_model_gpu_and_memory(const YamlMap& m, const ExperimentConfig& x,
                                std::map<std::string, models::ModelSpec>& resolved) {
    if (x.model.empty()) {
        return;
    }
    models::ModelSpec model;
    try {
        auto it = resolved.find(x.model);
        if (it == resolved.end()) {
            it = resolved.emplace(x.model, models::resolve_model(x.model)).first;
        }
        model = it->second;
    } catch (const ConfigError& e) {
        m.fail("model", e.what());
    }
    try {
        model = models::apply_engine_quantization(std::move(model), x.engine.quantization, x.engine.dtype);
    } catch (const ConfigError& e) {
        const std::string msg = e.what();
        const bool dtype = msg.rfind("--dtype", 0) == 0;
        // The message opens with the flag; in a scenario the key is engine.quantization / engine.dtype.
        if (m.has("engine") && m.map("engine").has(dtype ? "dtype" : "quantization")) {
            m.map("engine").fail(dtype ? "dtype" : "quantization", msg.substr(msg.find(": ") + 2));
        }
        m.fail("model", msg);
    }
    calibration::GpuSpec gpu;
    try {
        gpu = calibration::find_gpu(x.gpu);
    } catch (const ConfigError& e) {
        m.fail("gpu", e.what());
    }
    try {
        cache::MemoryPlanRequest request = memory_plan_request(x.engine, gpu, x.replicas);
        add_speculative_memory(request, x.engine, model);
        (void)cache::plan_memory(model, request);
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


// `request_path: none` (engine times only), or a mapping that replaces some of the defaults
// (frontend::default_request_path, docs/REQUEST-PATH.md). Each value a time in the key's unit, 0 to 60,000 ms.
frontend::RequestPathConfig parse_request_path(const YamlMap& m) {
    const YAML::Node n = m.raw()["request_path"];
    if (n.IsScalar()) {
        if (n.Scalar() == "none") {
            return frontend::RequestPathConfig{};
        }
        if (n.Scalar() == "default") {
            return frontend::default_request_path();
        }
        m.fail("request_path", fmt::format("expected none, default or a mapping of {}, got '{}'",
                                           "client_ms, handoff_ms, request_cpu_ms, tokenize_us_per_token, "
                                           "output_message_cpu_ms, chunk_cpu_us", n.Scalar()));
    }
    const YamlMap r = m.map("request_path");
    r.allow_only({"client_ms", "handoff_ms", "request_cpu_ms", "tokenize_us_per_token", "output_message_cpu_ms",
                  "chunk_cpu_us"});
    frontend::RequestPathConfig c = frontend::default_request_path();
    const auto take = [&r](std::string_view key, double& field, double max) {
        if (r.has(key)) {
            field = r.get_in_range<double>(key, 0.0, max);
        }
    };
    take("client_ms", c.client_ms, 60000.0);
    take("handoff_ms", c.handoff_ms, 60000.0);
    take("request_cpu_ms", c.request_cpu_ms, 60000.0);
    take("tokenize_us_per_token", c.tokenize_us_per_token, 1e6);
    take("output_message_cpu_ms", c.output_message_cpu_ms, 60000.0);
    take("chunk_cpu_us", c.chunk_cpu_us, 6e7);
    return c;
}

}  // namespace

const std::vector<std::string_view>& scenario_keys() {
    static const std::vector<std::string_view> keys = {"name",    "description", "seed",   "model",    "gpu",
                                                       "cost_model", "engine",   "cluster", "workload", "warmup",
                                                       "max_time", "check_invariants", "experiments", "sweep",
                                                       "mode",     "capacity_tokens", "metrics",
                                                       "request_path", "goodput", "replicates", "allow_profile_mismatch"};
    return keys;
}

Override parse_set_override(const std::string& o) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
        throw ConfigError(fmt::format("command line: --set '{}': expected key=value, e.g. engine.block_size=32", o));
    }
    const std::string key = o.substr(0, eq);
    const std::string first = key.substr(0, key.find('.'));
    if (std::find(scenario_keys().begin(), scenario_keys().end(), first) == scenario_keys().end() ||
        first == "experiments" || first == "sweep") {
        std::string list;
        std::vector<std::string_view> allowed;
        for (auto k : scenario_keys()) {
            if (k != "experiments" && k != "sweep") {
                list += (list.empty() ? "" : ", ") + std::string(k);
                allowed.push_back(k);
            }
        }
        throw ConfigError(fmt::format("command line: --set '{}': unknown key '{}'{}; allowed: {}", o, first,
                                      did_you_mean(first, allowed), list));
    }
    const std::string origin = "--set " + o;
    YAML::Node value;
    try {
        value = load_yaml_string(o.substr(eq + 1), "--set " + key);
    } catch (const ConfigError& e) {
        throw ConfigError("command line: " + origin + ": " + e.what());
    }
    (void)layer_from_path(key, value);  // rejects empty components ("engine..block_size")
    return {key, value, origin};
}

Scenario load_scenario_text(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides, std::optional<std::uint64_t> seed_override) {
    std::vector<Override> all;
    for (const auto& o : overrides) {
        all.push_back(parse_set_override(o));
    }
    if (seed_override) {
        all.push_back({"seed", YAML::Node(*seed_override), "--seed"});
    }
    return load_scenario_text(text, file, all);
}

namespace {
Scenario load_scenario_text_checked(const std::string& text, const std::string& file,
                                   const std::vector<Override>& overrides, bool check_memory);
}  // namespace

Scenario load_scenario_text(const std::string& text, const std::string& file, const std::vector<Override>& overrides) {
    return load_scenario_text_checked(text, file, overrides, true);
}

Scenario load_scenario_text_without_memory_check(const std::string& text, const std::string& file,
                                                 const std::vector<Override>& overrides) {
    return load_scenario_text_checked(text, file, overrides, false);
}

namespace {

Scenario load_scenario_text_checked(const std::string& text, const std::string& file,
                                   const std::vector<Override>& overrides, bool check_memory) {
    const YAML::Node root = load_yaml_string(text, file);
    const std::string base_dir = fs::path(file).has_parent_path() ? fs::path(file).parent_path().string() : ".";
    const YamlMap top(root, file);
    top.allow_only(scenario_keys());
    NodeArena arena(root);  // every node built below lives in the document's set (NodeArena)

    Scenario sc;
    sc.file = file;
    sc.name = top.get_or<std::string>("name", fs::path(file).stem().string());
    sc.description = top.get_or<std::string>("description", "");

    YAML::Node base = arena.map();
    for (const auto& kv : root) {
        const auto k = kv.first.as<std::string>();
        if (k != "experiments" && k != "sweep" && k != "name" && k != "description") {
            base[k] = kv.second;
        }
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
            YAML::Node layer = arena.map();
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
        variants.push_back({sc.name, arena.map()});
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

    // A command-line value would replace what a sweep axis or an experiment varies, while the table still labelled
    // the rows by the file's values: refused, naming both.
    for (const auto& o : overrides) {
        for (const auto& [key, values] : axes) {
            if (key == o.path || key.starts_with(o.path + ".") || o.path.starts_with(key + ".")) {
                throw ConfigError(fmt::format("command line: {}: the scenario sweeps {} (sweep: in {}); a "
                                              "command-line value would replace every point's; drop one of them",
                                              o.origin, key, file));
            }
        }
        for (std::size_t i = 0; i < variants.size() && variants.size() > 1; ++i) {
            if (sets_path(variants[i].layer, o.path)) {
                throw ConfigError(fmt::format("command line: {}: experiment '{}' in {} sets {} itself; a "
                                              "command-line value would replace every experiment's",
                                              o.origin, variants[i].name, file, o.path));
            }
        }
    }

    // The grid is counted before any point is expanded: every point is validated (memory plan included) before the
    // first simulation, so a grid of 10^6 points used to spend minutes expanding. docs/INPUT-RANGES.md.
    {
        constexpr double kMaxPoints = 10'000;
        double points = static_cast<double>(variants.size());
        std::string shape = variants.size() > 1 ? fmt::format("{} experiments", variants.size()) : "";
        for (const auto& [key, values] : axes) {
            points *= static_cast<double>(values.size());
            shape += fmt::format("{}{} values of {}", shape.empty() ? "" : " x ", values.size(), key);
        }
        if (points > kMaxPoints) {
            top.fail(top.has("sweep") ? "sweep" : "experiments",
                     fmt::format("{:.0f} points ({}); allowed: at most {:.0f} per scenario — split the sweep",
                                 points, shape, kMaxPoints));
        }
    }
    std::vector<std::size_t> idx(axes.size(), 0);
    const bool many_variants = variants.size() > 1;
    std::map<std::string, models::ModelSpec> resolved_models;
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
                layers.push_back(layer_from_path(axes[a].first, value, &arena));
                proto.columns.emplace_back(column_name(axes[a].first), column_value(axes[a].first, value));
                label += fmt::format(" {}={}", column_name(axes[a].first), column_value(axes[a].first, value));
            }
            YAML::Node merged = merge_layers(layers, &arena);
            for (const auto& o : overrides) {
                merged = replace_at(merged, o.path, o.value, &arena);
            }
            ExperimentConfig x;
            try {
                x = parse_experiment(YamlMap(merged, file), base_dir, &arena);
                if (check_memory) {
                    check_model_gpu_and_memory(YamlMap(merged, file), x, resolved_models);
                }
            } catch (const ConfigError& e) {
                rethrow_naming_command_line(e, file, overrides);
            }
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

}  // namespace

void keep_experiments(Scenario& sc, const std::vector<std::string>& names) {
    if (names.empty()) {
        return;
    }
    // An experiment's entry name: its "experiment" column when the scenario has several, else its own name (a sweep
    // point's name is the entry's name followed by the swept values).
    const auto entry_of = [](const ExperimentConfig& x) {
        for (const auto& [column, value] : x.columns) {
            if (column == "experiment") {
                return value;
            }
        }
        return x.name.substr(0, x.name.find(' '));
    };
    std::vector<std::string> known;
    for (const auto& x : sc.experiments) {
        if (std::find(known.begin(), known.end(), entry_of(x)) == known.end()) {
            known.push_back(entry_of(x));
        }
    }
    for (const auto& n : names) {
        if (std::find(known.begin(), known.end(), n) == known.end()) {
            throw ConfigError(fmt::format("command line: --experiment {}: {} has no experiment of that name; it has: {}",
                                          n, sc.file, fmt::join(known, ", ")));
        }
    }
    std::erase_if(sc.experiments, [&](const ExperimentConfig& x) {
        return std::find(names.begin(), names.end(), entry_of(x)) == names.end();
    });
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                       std::optional<std::uint64_t> seed_override) {
    std::vector<Override> all;
    for (const auto& o : overrides) {
        all.push_back(parse_set_override(o));
    }
    if (seed_override) {
        all.push_back({"seed", YAML::Node(*seed_override), "--seed"});
    }
    return load_scenario(path, all);
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
    return load_scenario_text(read_input_file(path, "scenario file"), path, overrides);
}

}  // namespace servesim::app
