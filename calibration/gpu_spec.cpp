// The GPU data-file reader and the built-in catalog behind calibration/gpu_spec.h. The figures live in
// calibration/gpus/*.yaml, each citing its datasheet; this file owns only the format (units in the key names, every
// key checked) and the lookup by the names people type.
#include "calibration/gpu_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "calibration/gpu_table.h"
#include "common/error.h"
#include "common/nearest_name.h"
#include "common/input_file.h"
#include "common/units.h"
#include "common/yaml_reader.h"

namespace servesim::calibration {

namespace {

constexpr double kGB = 1e9;
constexpr double kTFlops = 1e12;

struct TopologyName {
    const char* name;
    InterconnectTopology topology;
    const char* meaning;
};

constexpr TopologyName kTopologies[] = {
    {"pcie", InterconnectTopology::kPcie, "no GPU fabric: peers talk over PCIe"},
    {"nvlink_bridge", InterconnectTopology::kNvlinkBridge, "NVLink bridges join groups of domain_gpus; PCIe beyond"},
    {"nvlink_switch", InterconnectTopology::kNvlinkSwitch, "NVSwitch: all domain_gpus at full NVLink bandwidth"},
    {"xgmi_mesh", InterconnectTopology::kXgmiMesh, "AMD Infinity Fabric, a link to every peer of domain_gpus"},
};

// Lower-case, without spaces, '-', '_' and the vendor/brand prefixes, so "NVIDIA GeForce RTX 3090" → "3090".
std::string normalise(std::string_view text) {
    std::string out;
    for (char ch : text) {
        if (ch == ' ' || ch == '-' || ch == '_') {
            continue;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    for (std::string_view prefix : {"nvidia", "geforce", "rtx"}) {
        if (out.rfind(prefix, 0) == 0) {
            out.erase(0, prefix.size());
        }
    }
    return out;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::vector<GpuSpec> make_catalog() {
    std::vector<GpuSpec> out;
    std::map<std::string, std::string> seen;  // normalised name or alias → file that claims it
    for (const auto& e : detail::embedded_gpus()) {
        GpuSpec g = parse_gpu_spec(std::string(e.yaml), std::string(e.file));
        std::vector<std::string> names = g.aliases;
        names.push_back(g.name);
        const std::string driver = normalise(g.device_name);
        if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return normalise(n) == driver; })) {
            names.push_back(g.device_name);  // the driver's name resolves too, so it must be unique as well
        }
        for (const auto& n : names) {
            const auto [it, fresh] = seen.emplace(normalise(n), g.file);
            if (!fresh) {
                throw ConfigError(g.file, 0, "aliases",
                                  fmt::format("'{}' is already a name of {}: every name must be unique", n, it->second));
            }
        }
        out.push_back(std::move(g));
    }
    return out;
}

}  // namespace

const char* interconnect_topology_name(InterconnectTopology t) {
    for (const auto& n : kTopologies) {
        if (n.topology == t) {
            return n.name;
        }
    }
    return "pcie";
}

bool GpuSpec::answers_to(std::string_view text) const {
    const std::string wanted = normalise(text);
    if (wanted.empty()) {
        return false;
    }
    if (normalise(name) == wanted || normalise(device_name) == wanted) {
        return true;
    }
    return std::any_of(aliases.begin(), aliases.end(), [&](const std::string& a) { return normalise(a) == wanted; });
}

bool is_price_date(std::string_view d) {
    const auto digits = [&](std::size_t from, std::size_t n) {
        for (std::size_t i = from; i < from + n; ++i) {
            if (i >= d.size() || d[i] < '0' || d[i] > '9') {
                return false;
            }
        }
        return true;
    };
    if (!(d.size() == 7 || d.size() == 10) || !digits(0, 4) || d[4] != '-' || !digits(5, 2)) {
        return false;
    }
    const int month = (d[5] - '0') * 10 + (d[6] - '0');
    if (month < 1 || month > 12) {
        return false;
    }
    if (d.size() == 10) {
        const int day = (d[8] - '0') * 10 + (d[9] - '0');
        return d[7] == '-' && digits(8, 2) && day >= 1 && day <= 31;
    }
    return true;
}

GpuSpec parse_gpu_spec(const std::string& text, const std::string& file) {
    const YamlMap m(load_yaml_string(text, file), file);
    m.allow_only({"name", "aliases", "vendor", "device_name", "compute_capability", "memory_marketed_gb",
                  "memory_reported_bytes", "memory_bandwidth_gb_per_s", "bf16_dense_tflops", "fp8_dense_tflops",
                  "fp4_dense_tflops", "host_link", "interconnect", "roofline", "price_usd_per_gpu_hour",
                  "price_source", "price_date"});
    GpuSpec g;
    g.file = file;
    g.name = m.get<std::string>("name");
    if (normalise(g.name).empty()) {
        m.fail("name", "must hold at least one letter or digit");
    }
    if (m.has("aliases")) {
        const YAML::Node a = m.node("aliases");
        if (!a.IsSequence()) {
            m.fail("aliases", "expected a list of names");
        }
        for (const auto& item : a) {
            if (!item.IsScalar() || normalise(item.Scalar()).empty()) {
                m.fail("aliases", "every alias must be a non-empty name");
            }
            g.aliases.push_back(item.Scalar());
        }
    }
    g.vendor = m.get<std::string>("vendor");
    if (g.vendor != "nvidia" && g.vendor != "amd") {
        m.fail("vendor", "'" + g.vendor + "' is not a vendor; allowed: nvidia, amd");
    }
    g.device_name = m.get<std::string>("device_name");
    g.is_a100 = lower(g.device_name).find("a100") != std::string::npos;
    g.compute_capability = m.get_in_range<int>("compute_capability", 30, 200);
    g.memory_marketed_gb = m.get_in_range<double>("memory_marketed_gb", 1, 4096);
    g.memory_bytes = m.get_in_range<std::int64_t>("memory_reported_bytes", 1LL << 30, 4LL << 40);
    // What the runtime reports sits a little below the marketed size; the datasheet's "GB" of HBM is often GiB, so
    // allow up to marketed GiB, and refuse less than 80 % of marketed GB (a unit slip: MiB or GiB written as bytes).
    const double marketed_bytes = g.memory_marketed_gb * kGB;
    if (static_cast<double>(g.memory_bytes) > g.memory_marketed_gb * kGiB ||
        static_cast<double>(g.memory_bytes) < 0.8 * marketed_bytes) {
        m.fail("memory_reported_bytes",
               fmt::format("{} bytes ({:.2f} GiB) does not fit memory_marketed_gb {}: expected between 80 % of {} GB "
                           "and {} GiB (the total cudaMemGetInfo reports, in bytes)",
                           g.memory_bytes, static_cast<double>(g.memory_bytes) / kGiB, g.memory_marketed_gb,
                           g.memory_marketed_gb, g.memory_marketed_gb));
    }
    g.memory_bandwidth_bytes_per_s = m.get_in_range<double>("memory_bandwidth_gb_per_s", 10, 100000) * kGB;
    g.bf16_dense_flops_per_s = m.get_in_range<double>("bf16_dense_tflops", 0.1, 100000) * kTFlops;
    g.fp8_dense_flops_per_s = m.get_in_range<double>("fp8_dense_tflops", 0, 100000) * kTFlops;
    g.fp4_dense_flops_per_s = m.get_in_range<double>("fp4_dense_tflops", 0, 100000) * kTFlops;

    const YamlMap host = m.map("host_link");
    host.allow_only({"kind", "pcie_gen", "bandwidth_gb_per_s"});
    g.host_link_kind = host.get<std::string>("kind");
    if (g.host_link_kind == "pcie") {
        g.host_link_pcie_gen = host.get_in_range<int>("pcie_gen", 3, 7);
    } else if (g.host_link_kind == "nvlink_c2c") {
        if (host.has("pcie_gen")) {
            host.fail("pcie_gen", "only for kind: pcie");
        }
    } else {
        host.fail("kind", "'" + g.host_link_kind + "' is not a host link; allowed: pcie, nvlink_c2c");
    }
    g.host_link_bytes_per_s = host.get_in_range<double>("bandwidth_gb_per_s", 1, 10000) * kGB;

    const YamlMap ic = m.map("interconnect");
    if (ic.has("allreduce_latency_ms")) {
        ic.fail("allreduce_latency_ms",
                "is no longer read: collectives are costed per link kind, message size and rank count "
                "(sim/engine/collectives.h, docs/PARALLELISM.md \"Collectives\"); remove the key");
    }
    ic.allow_only({"topology", "bandwidth_gb_per_s", "domain_gpus", "peer_to_peer", "network_gb_per_s"});
    const std::string topology = ic.get<std::string>("topology");
    const auto* t = std::find_if(std::begin(kTopologies), std::end(kTopologies),
                                 [&](const TopologyName& n) { return topology == n.name; });
    if (t == std::end(kTopologies)) {
        std::string allowed;
        for (const auto& n : kTopologies) {
            allowed += fmt::format("{}{} ({})", allowed.empty() ? "" : ", ", n.name, n.meaning);
        }
        ic.fail("topology", "'" + topology + "' is not a topology; allowed: " + allowed);
    }
    g.interconnect_topology = t->topology;
    g.interconnect_bytes_per_s = ic.get_in_range<double>("bandwidth_gb_per_s", 1, 10000) * kGB;
    if (g.interconnect_topology == InterconnectTopology::kPcie) {
        if (ic.has("domain_gpus")) {
            ic.fail("domain_gpus", "not used with topology: pcie (PCIe reaches any number of peers)");
        }
    } else {
        g.interconnect_domain_gpus = ic.get_in_range<int>("domain_gpus", 2, 100000);
    }
    // Peer-to-peer matters where GPUs meet over PCIe: PCIe-only cards, and bridged pairs beyond their pair.
    if (ic.has("peer_to_peer")) {
        if (g.interconnect_topology != InterconnectTopology::kPcie &&
            g.interconnect_topology != InterconnectTopology::kNvlinkBridge) {
            ic.fail("peer_to_peer", "only for topology: pcie or nvlink_bridge (GPUs that meet over PCIe)");
        }
        g.interconnect_peer_to_peer = ic.get<bool>("peer_to_peer");
    }
    // The network between nodes: only where the NVLink / xGMI domain is the node (larger groups cross nodes).
    if (ic.has("network_gb_per_s")) {
        if (g.interconnect_topology != InterconnectTopology::kNvlinkSwitch &&
            g.interconnect_topology != InterconnectTopology::kXgmiMesh) {
            ic.fail("network_gb_per_s",
                    "only for topology: nvlink_switch or xgmi_mesh (groups beyond the domain cross nodes)");
        }
        g.network_bytes_per_s = ic.get_in_range<double>("network_gb_per_s", 1, 10000) * kGB;
    }

    if (m.has("roofline")) {
        const YamlMap r = m.map("roofline");
        r.allow_only({"gemm_efficiency", "attention_efficiency", "gdn_efficiency", "bandwidth_efficiency",
                      "decode_attention_efficiency"});
        auto eff = [&](const char* key, double& field) {
            if (r.has(key)) {
                field = r.get<double>(key);
                if (!(field > 0 && field <= 1)) {
                    r.fail(key, fmt::format("value {} is out of range; allowed: a fraction above 0, at most 1", field));
                }
            }
        };
        eff("gemm_efficiency", g.gemm_efficiency);
        eff("attention_efficiency", g.attention_efficiency);
        eff("gdn_efficiency", g.gdn_efficiency);
        eff("bandwidth_efficiency", g.bandwidth_efficiency);
        eff("decode_attention_efficiency", g.decode_attention_efficiency);
    }
    if (m.has("price_usd_per_gpu_hour")) {
        const double p = m.get<double>("price_usd_per_gpu_hour");
        if (!(p > 0) || p > 1000) {
            m.fail("price_usd_per_gpu_hour",
                   fmt::format("value {} is out of range; allowed: a positive $ per GPU-hour up to 1000", p));
        }
        g.usd_per_gpu_hour = p;
        // A price is cited or absent (docs/GPUS.md "Prices"): where it was listed, and when.
        for (const char* key : {"price_source", "price_date"}) {
            if (!m.has(key)) {
                m.fail("price_usd_per_gpu_hour",
                       fmt::format("a price needs '{}' too (price_source: where it is listed, price_date: YYYY-MM or "
                                   "YYYY-MM-DD); without a citation leave the GPU unpriced",
                                   key));
            }
        }
        g.price_source = m.get<std::string>("price_source");
        if (g.price_source.find_first_not_of(" \t") == std::string::npos) {
            m.fail("price_source", "must name where the price is listed");
        }
        g.price_date = m.get<std::string>("price_date");
        if (!is_price_date(g.price_date)) {
            m.fail("price_date", "'" + g.price_date + "' is not a date; allowed: YYYY-MM or YYYY-MM-DD");
        }
    } else {
        for (const char* key : {"price_source", "price_date"}) {
            if (m.has(key)) {
                m.fail(key, "only with price_usd_per_gpu_hour");
            }
        }
    }
    return g;
}

GpuSpec read_gpu_file(const std::string& path) {
    return parse_gpu_spec(read_input_file(path, "GPU file"), path);
}

const std::vector<GpuSpec>& gpu_catalog() {
    static const std::vector<GpuSpec> catalog = make_catalog();
    return catalog;
}

std::string gpu_names() {
    std::string out;
    for (const auto& g : gpu_catalog()) {
        out += (out.empty() ? "" : ", ") + g.name;
    }
    return out;
}

bool is_gpu_file(std::string_view name) {
    auto ends_with = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && lower(std::string(name.substr(name.size() - suffix.size()))) == suffix;
    };
    return ends_with(".yaml") || ends_with(".yml");
}

GpuSpec find_gpu(std::string_view name) {
    if (is_gpu_file(name)) {
        return read_gpu_file(std::string(name));
    }
    const std::string wanted = normalise(name);
    // The usual case first: the name is its file's (H200 → calibration/gpus/H200.yaml). Only that file is parsed
    // then, not the whole catalog (19 files: ~23 M instructions, over half of a small run's start-up). Names are
    // unique across the catalog (make_catalog checks it, and the tests build the catalog), so the file whose own
    // name matches is the GPU the catalog walk below would find.
    if (!wanted.empty()) {
        for (const auto& e : detail::embedded_gpus()) {
            std::string_view stem = e.file.substr(e.file.rfind('/') + 1);
            stem = stem.substr(0, stem.rfind('.'));
            if (normalise(stem) == wanted) {
                GpuSpec g = parse_gpu_spec(std::string(e.yaml), std::string(e.file));
                if (normalise(g.name) == wanted) {
                    return g;
                }
                break;
            }
        }
    }
    for (const auto& g : gpu_catalog()) {
        if (g.answers_to(name)) {
            return g;
        }
    }
    std::vector<std::string> names;
    for (const auto& g : gpu_catalog()) {
        names.push_back(g.name);
        names.insert(names.end(), g.aliases.begin(), g.aliases.end());
        if (!g.device_name.empty()) {
            names.push_back(g.device_name);
        }
    }
    throw ConfigError("unknown GPU '" + std::string(name) + "'" + did_you_mean(name, names) +
                      "; known GPUs: " + gpu_names() +
                      " (each also by its aliases and by the name its driver reports, see `servesim list`; or a "
                      "GPU file by path: --gpu my_gpu.yaml, docs/GPUS.md)");
}

}  // namespace servesim::calibration
