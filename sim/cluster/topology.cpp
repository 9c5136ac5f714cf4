// The topology graph, its paths, contention and presets; see topology.h.
#include "sim/cluster/topology.h"

#include <boost/graph/connected_components.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "common/units.h"

namespace servesim::cluster {

std::string_view to_string(NodeKind k) {
    switch (k) {
        case NodeKind::kGpu: return "gpu";
        case NodeKind::kHost: return "host";
        case NodeKind::kNic: return "nic";
        case NodeKind::kSwitch: return "switch";
        case NodeKind::kStorage: return "storage";
    }
    return "?";
}

std::size_t Topology::add_node(TopologyNode node) { return boost::add_vertex(std::move(node), graph_); }

void Topology::add_link(std::size_t a, std::size_t b, double bandwidth_bytes_per_s, double latency_s) {
    if (!(bandwidth_bytes_per_s > 0) || !std::isfinite(bandwidth_bytes_per_s)) {
        throw std::invalid_argument("bandwidth must be positive");
    }
    if (!(latency_s >= 0) || !std::isfinite(latency_s)) {
        throw std::invalid_argument("latency must be non-negative");
    }
    const TopologyLink link{bandwidth_bytes_per_s, latency_s, links_.size(), a, b};
    (void)boost::add_edge(a, b, link, graph_);  // parallel links are allowed (vecS out-edge lists)
    links_.push_back(link);
}

std::size_t Topology::find(std::string_view name) const {
    for (std::size_t v = 0; v < num_nodes(); ++v) {
        if (graph_[v].name == name) {
            return v;
        }
    }
    return npos;
}

void Topology::set_gpu_model(std::size_t v, std::string name) {
    if (gpu_models_.size() <= v) {
        gpu_models_.resize(v + 1);
    }
    gpu_models_[v] = std::move(name);
}

const std::string& Topology::gpu_model(std::size_t v) const {
    static const std::string kNone;
    return v < gpu_models_.size() ? gpu_models_[v] : kNone;
}

std::vector<std::size_t> Topology::gpus() const {
    std::vector<std::size_t> out;
    for (std::size_t v = 0; v < num_nodes(); ++v) {
        if (graph_[v].kind == NodeKind::kGpu) {
            out.push_back(v);
        }
    }
    return out;
}

namespace {

// Dijkstra over latency from `from`: distances and predecessor edges (dense ids).
struct ShortestPaths {
    std::vector<double> dist;
    std::vector<std::size_t> pred_vertex;
};

ShortestPaths shortest_paths(const TopologyGraph& g, std::size_t from) {
    const std::size_t n = boost::num_vertices(g);
    ShortestPaths sp;
    sp.dist.assign(n, std::numeric_limits<double>::infinity());
    sp.pred_vertex.resize(n);
    boost::dijkstra_shortest_paths(
        g, from,
        boost::weight_map(boost::get(&TopologyLink::latency_s, g))
            .distance_map(boost::make_iterator_property_map(sp.dist.begin(), boost::get(boost::vertex_index, g)))
            .predecessor_map(
                boost::make_iterator_property_map(sp.pred_vertex.begin(), boost::get(boost::vertex_index, g))));
    return sp;
}

}  // namespace

std::size_t Topology::nearest_host(std::size_t v) const {
    const auto sp = shortest_paths(graph_, v);
    std::size_t best = npos;
    for (std::size_t u = 0; u < num_nodes(); ++u) {
        if (graph_[u].kind == NodeKind::kHost && std::isfinite(sp.dist[u]) &&
            (best == npos || sp.dist[u] < sp.dist[best])) {
            best = u;
        }
    }
    return best;
}

TopologyPath Topology::path(std::size_t from, std::size_t to) const {
    TopologyPath p;
    p.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
    if (from == to) {
        return p;
    }
    const auto sp = shortest_paths(graph_, from);
    if (!std::isfinite(sp.dist[to])) {
        throw std::logic_error(fmt::format("topology: no path from {} to {}", graph_[from].name, graph_[to].name));
    }
    for (std::size_t v = to; v != from; v = sp.pred_vertex[v]) {
        const std::size_t u = sp.pred_vertex[v];
        // The lowest-latency edge between u and v (parallel links: the first of equal latency).
        std::size_t best = npos;
        for (auto [it, end] = boost::out_edges(u, graph_); it != end; ++it) {
            if (boost::target(*it, graph_) == v) {
                const auto& l = graph_[*it];
                if (best == npos || l.latency_s < link(best).latency_s) {
                    best = l.index;
                }
            }
        }
        p.edges.push_back(best);
        p.reversed.push_back(link(best).a != u);  // crossed from u to v
        p.latency_s += link(best).latency_s;
        p.bottleneck_bytes_per_s = std::min(p.bottleneck_bytes_per_s, link(best).bandwidth_bytes_per_s);
    }
    std::reverse(p.edges.begin(), p.edges.end());
    std::reverse(p.reversed.begin(), p.reversed.end());
    return p;
}

std::vector<std::size_t> Topology::nearest_nics(std::size_t v) const {
    const auto sp = shortest_paths(graph_, v);
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t u = 0; u < num_nodes(); ++u) {
        if (graph_[u].kind == NodeKind::kNic) {
            best = std::min(best, sp.dist[u]);
        }
    }
    std::vector<std::size_t> out;
    for (std::size_t u = 0; u < num_nodes() && std::isfinite(best); ++u) {
        if (graph_[u].kind == NodeKind::kNic && sp.dist[u] <= best + 1e-12) {
            out.push_back(u);
        }
    }
    return out;
}

std::vector<TopologyPath> Topology::rail_paths(std::size_t from, std::size_t to) const {
    TopologyPath direct = path(from, to);
    bool crosses_nic = false;
    for (const std::size_t e : direct.edges) {
        crosses_nic = crosses_nic || graph_[link(e).a].kind == NodeKind::kNic || graph_[link(e).b].kind == NodeKind::kNic;
    }
    const std::vector<std::size_t> src = crosses_nic ? nearest_nics(from) : std::vector<std::size_t>{};
    const std::vector<std::size_t> dst = crosses_nic ? nearest_nics(to) : std::vector<std::size_t>{};
    if (src.empty() || dst.empty()) {
        return {std::move(direct)};
    }
    // Mooncake's RDMA transport picks, for each slice, a device near the local buffer and one near the remote
    // buffer (selectDevice over each side's preferred NICs); servesim deals the slices round-robin over both sides.
    const std::size_t k = std::max(src.size(), dst.size());
    std::vector<TopologyPath> out;
    out.reserve(k);
    for (std::size_t j = 0; j < k; ++j) {
        const std::size_t a = src[j % src.size()];
        const std::size_t b = dst[j % dst.size()];
        TopologyPath p;
        p.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
        for (const TopologyPath& leg : {path(from, a), path(a, b), path(b, to)}) {
            p.edges.insert(p.edges.end(), leg.edges.begin(), leg.edges.end());
            p.reversed.insert(p.reversed.end(), leg.reversed.begin(), leg.reversed.end());
            p.latency_s += leg.latency_s;
            p.bottleneck_bytes_per_s = std::min(p.bottleneck_bytes_per_s, leg.bottleneck_bytes_per_s);
        }
        out.push_back(std::move(p));
    }
    return out;
}

void Topology::validate(const std::string& file, const std::string& key) const {
    const auto gs = gpus();
    if (gs.empty()) {
        throw ConfigError(file, 0, key, "the topology has no GPU (a node of kind gpu)");
    }
    std::vector<int> component(num_nodes());
    boost::connected_components(graph_, component.data());
    for (std::size_t v = 0; v < num_nodes(); ++v) {
        const NodeKind k = graph_[v].kind;
        if ((k == NodeKind::kGpu || k == NodeKind::kHost || k == NodeKind::kStorage) &&
            component[v] != component[gs.front()]) {
            throw ConfigError(file, 0, key,
                              fmt::format("{} '{}' is unreachable from GPU '{}': no path of links joins them; every "
                                          "GPU, host and storage node must reach every other",
                                          to_string(k), graph_[v].name, graph_[gs.front()].name));
        }
    }
}

namespace {

constexpr double kGB = 1e9;

struct NodeShape {
    std::string_view gpu_prefix;
    std::string_view gpu_model;
    std::int64_t gpu_memory_bytes;
    std::int64_t host_memory_bytes;
};

// One 8-GPU node: NVSwitch, PCIe Gen5 ×16 per GPU to the host and to the GPU's own NIC, NVMe on the host. Link
// figures: NVLink 4 is 900 GB/s per GPU both directions (450 each way); PCIe Gen5 ×16 ≈ 64 GB/s each way; NDR
// InfiniBand 400 Gb/s = 50 GB/s; latencies are order-of-magnitude assumptions (1 µs NVLink, 2 µs PCIe, 3 µs IB hop).
void add_eight_gpu_node(Topology& t, int node, const NodeShape& shape, std::size_t spine) {
    const std::string n = std::to_string(node);
    const std::size_t host = t.add_node({"host" + n, NodeKind::kHost, shape.host_memory_bytes});
    const std::size_t nvswitch = t.add_node({"nvswitch" + n, NodeKind::kSwitch, 0});
    const std::size_t nvme = t.add_node({"nvme" + n, NodeKind::kStorage, 30'000 * std::int64_t{1'000'000'000}});
    t.add_link(host, nvme, 25 * kGB, 10e-6);
    for (int g = 0; g < 8; ++g) {
        const std::string id = n + "." + std::to_string(g);
        const std::size_t gpu =
            t.add_node({std::string(shape.gpu_prefix) + id, NodeKind::kGpu, shape.gpu_memory_bytes});
        t.set_gpu_model(gpu, std::string(shape.gpu_model));
        const std::size_t nic = t.add_node({"nic" + id, NodeKind::kNic, 0});
        t.add_link(gpu, nvswitch, 450 * kGB, 1e-6);
        t.add_link(gpu, host, 64 * kGB, 2e-6);
        t.add_link(gpu, nic, 64 * kGB, 2e-6);  // GPUDirect through the PCIe switch
        t.add_link(host, nic, 64 * kGB, 2e-6);
        t.add_link(nic, spine, 50 * kGB, 3e-6);
    }
}

}  // namespace

std::vector<std::string_view> topology_preset_names() { return {"dgx-h100", "8xh200-nvlink-ib400"}; }

Topology make_topology_preset(std::string_view name, int num_nodes) {
    NodeShape shape{};
    if (name == "dgx-h100") {
        shape = {"h100-", "H100-SXM", 84'932'978'278, 2048 * kGiBBytes};  // 79.1 GiB reported of the 80 GB
    } else if (name == "8xh200-nvlink-ib400") {
        shape = {"h200-", "H200", 150'109'880'320, 2048 * kGiBBytes};  // 139.8 GiB reported of the 141 GB
    } else {
        throw std::invalid_argument("unknown topology preset");
    }
    Topology t;
    const std::size_t spine = t.add_node({"ib-switch", NodeKind::kSwitch, 0});
    for (int i = 0; i < num_nodes; ++i) {
        add_eight_gpu_node(t, i, shape, spine);
    }
    return t;
}

namespace {

NodeKind parse_kind(const YamlMap& m, std::string_view key) {
    const auto s = m.get<std::string>(key);
    for (NodeKind k : {NodeKind::kGpu, NodeKind::kHost, NodeKind::kNic, NodeKind::kSwitch, NodeKind::kStorage}) {
        if (s == to_string(k)) {
            return k;
        }
    }
    m.fail(key, "unknown node kind '" + s + "'; allowed: gpu, host, nic, switch, storage");
}

}  // namespace

Topology parse_topology_file(const YamlMap& m) {
    m.allow_only({"nodes", "links"});
    Topology t;
    const YAML::Node nodes = m.node("nodes");
    if (!nodes.IsSequence() || nodes.size() == 0) {
        m.fail("nodes", "expected a non-empty list of {name, kind, memory_bytes}");
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const YamlMap n(nodes[i], m.file(), m.key_path("nodes") + "[" + std::to_string(i) + "]");
        n.allow_only({"name", "kind", "memory_bytes", "gpu"});
        TopologyNode node;
        std::string gpu_model;
        node.name = n.get<std::string>("name");
        if (t.find(node.name) != Topology::npos) {
            n.fail("name", "duplicate node name '" + node.name + "'");
        }
        node.kind = parse_kind(n, "kind");
        if (n.has("gpu")) {  // the catalog GPU it is (checked against the experiment's gpu: when placed)
            if (node.kind != NodeKind::kGpu) {
                n.fail("gpu", "only a node of kind gpu names its catalog GPU");
            }
            gpu_model = n.get<std::string>("gpu");
        }
        node.memory_bytes = n.get_or<std::int64_t>("memory_bytes", 0);
        n.check_range<std::int64_t>("memory_bytes", node.memory_bytes, 0, std::numeric_limits<std::int64_t>::max());
        if ((node.kind == NodeKind::kGpu || node.kind == NodeKind::kHost) && node.memory_bytes <= 0) {
            n.fail("memory_bytes", "a " + std::string(to_string(node.kind)) + " needs its memory in bytes (> 0)");
        }
        const std::size_t v = t.add_node(std::move(node));
        if (!gpu_model.empty()) {
            t.set_gpu_model(v, std::move(gpu_model));
        }
    }
    const YAML::Node links = m.node("links");
    if (!links.IsSequence()) {
        m.fail("links", "expected a list of {a, b, bandwidth_GB_per_s, latency_us}");
    }
    for (std::size_t i = 0; i < links.size(); ++i) {
        const YamlMap l(links[i], m.file(), m.key_path("links") + "[" + std::to_string(i) + "]");
        l.allow_only({"a", "b", "bandwidth_GB_per_s", "latency_us"});
        std::size_t ends[2];
        for (int j = 0; j < 2; ++j) {
            const char* key = j == 0 ? "a" : "b";
            const auto name = l.get<std::string>(key);
            ends[j] = t.find(name);
            if (ends[j] == Topology::npos) {
                l.fail(key, "no node named '" + name + "' in nodes");
            }
        }
        if (ends[0] == ends[1]) {
            l.fail("b", "a link joins two different nodes");
        }
        const double bw = l.get<double>("bandwidth_GB_per_s");
        if (!(bw > 0)) {
            l.fail("bandwidth_GB_per_s", fmt::format("must be positive (GB/s, 1e9 bytes per second), got {}", bw));
        }
        const double lat = l.get_or<double>("latency_us", 0.0);
        if (!(lat >= 0)) {
            l.fail("latency_us", fmt::format("must be non-negative (microseconds), got {}", lat));
        }
        t.add_link(ends[0], ends[1], bw * kGB, lat * 1e-6);
    }
    t.validate(m.file(), m.key_path("links"));
    return t;
}

Topology parse_topology(const YAML::Node& node, const std::string& file, const std::string& key,
                        const std::string& base_dir) {
    auto preset = [&](const std::string& name, int num_nodes, const std::string& at) {
        const auto names = topology_preset_names();
        if (std::find(names.begin(), names.end(), name) == names.end()) {
            throw ConfigError(file, node.Mark().line + 1, at,
                              "unknown topology preset '" + name + "'; presets: dgx-h100, 8xh200-nvlink-ib400 (or "
                              "give {file: PATH})");
        }
        Topology t = make_topology_preset(name, num_nodes);
        t.validate(file, at);
        return t;
    };
    if (node.IsScalar()) {
        return preset(node.Scalar(), 1, key);
    }
    const YamlMap m(node, file, key);
    m.allow_only({"preset", "nodes", "file"});
    if (m.has("file") == m.has("preset")) {
        m.fail(m.has("file") ? "file" : "preset", "give exactly one of preset (with nodes) or file");
    }
    if (m.has("preset")) {
        const int n = m.get_or<int>("nodes", 1);
        m.check_range<int>("nodes", n, 1, 4096);
        return preset(m.get<std::string>("preset"), n, m.key_path("preset"));
    }
    if (m.has("nodes")) {
        m.fail("nodes", "nodes (a preset's node count) is not used with file");
    }
    std::filesystem::path p(m.get<std::string>("file"));
    if (p.is_relative()) {
        p = std::filesystem::path(base_dir) / p;
    }
    const std::string path = p.lexically_normal().string();
    return parse_topology_file(YamlMap(load_yaml_file(path), path));
}

}  // namespace servesim::cluster
