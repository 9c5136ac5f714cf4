// Topology: the cluster's hardware as a graph (Boost.Graph adjacency_list) — GPUs, hosts (their DRAM), NICs,
// switches and storage as vertices, links (NVLink/NVSwitch, PCIe, RDMA, Ethernet, SSD) with a bandwidth and a
// latency as edges — and the time of a KV transfer between two of them. A transfer follows the lowest-latency path
// (Dijkstra; ties to the lower vertex index, so the choice is deterministic), or, when that path crosses a NIC, is
// cut into slices over the NICs nearest each end (Mooncake Transfer Engine); its time is the summed latency plus
// its bytes over its share of the links it crosses (TransferTracker, transfer_tracker.h: max-min fair shares,
// recomputed as transfers start and end). Described in a scenario's
// `cluster.topology:` by a preset (`dgx-h100`, `8xh200-nvlink-ib400`) or a user file; bad input is a ConfigError
// naming the file and key.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/time.h"

namespace servesim::cluster {

enum class NodeKind { kGpu, kHost, kNic, kSwitch, kStorage };

[[nodiscard]] std::string_view to_string(NodeKind k);

struct TopologyNode {
    std::string name;
    NodeKind kind = NodeKind::kSwitch;
    std::int64_t memory_bytes = 0;  // GPU HBM, host DRAM or storage capacity; 0 for NICs and switches
};

struct TopologyLink {
    double bandwidth_bytes_per_s = 0;  // each direction
    double latency_s = 0;
    std::size_t index = 0;  // dense edge id (contention bookkeeping)
    std::size_t a = 0;      // its two vertices (as added)
    std::size_t b = 0;
};

using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, TopologyNode, TopologyLink>;

// A path between two vertices: its edges (dense ids), summed latency and bottleneck bandwidth.
struct TopologyPath {
    std::vector<std::size_t> edges;
    // Per edge, the way it is crossed: false from the link's a to its b, true from b to a. A link's bandwidth is
    // each way (full duplex), so only transfers crossing it the same way share it.
    std::vector<bool> reversed;
    double latency_s = 0;
    double bottleneck_bytes_per_s = 0;  // min over edges (infinite for an empty path: same vertex)
};

class Topology {
public:
    std::size_t add_node(TopologyNode node);
    // Throws std::invalid_argument on a non-positive bandwidth or a negative latency (the parser names the key).
    void add_link(std::size_t a, std::size_t b, double bandwidth_bytes_per_s, double latency_s);

    [[nodiscard]] std::size_t num_nodes() const { return boost::num_vertices(graph_); }
    [[nodiscard]] std::size_t num_links() const { return boost::num_edges(graph_); }
    [[nodiscard]] const TopologyNode& node(std::size_t v) const { return graph_[v]; }
    [[nodiscard]] const TopologyGraph& graph() const { return graph_; }
    [[nodiscard]] const TopologyLink& link(std::size_t edge) const { return links_[edge]; }
    // The vertex of a name, or npos.
    [[nodiscard]] std::size_t find(std::string_view name) const;
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

    // A GPU's catalog name (calibration/gpus/*.yaml), which the experiment's (or pool's) `gpu:` must name: always
    // set by a preset, optional in a user file (`gpu:`), where memory_bytes alone may describe the GPU
    // (docs/CLUSTER.md "Placement"). Empty when not given.
    void set_gpu_model(std::size_t v, std::string name);
    [[nodiscard]] const std::string& gpu_model(std::size_t v) const;

    // GPU vertices in insertion order (replica i's GPUs are gpus()[i·tp, (i+1)·tp)).
    [[nodiscard]] std::vector<std::size_t> gpus() const;
    // The host whose DRAM is nearest to vertex v (lowest path latency; ties to the lower index), or npos.
    [[nodiscard]] std::size_t nearest_host(std::size_t v) const;

    // The lowest-latency path; `to` must be reachable (validate() guarantees it between GPUs, hosts and storage).
    [[nodiscard]] TopologyPath path(std::size_t from, std::size_t to) const;

    // The NICs nearest to vertex v: every NIC at the lowest path latency from v (within 1 ps), by vertex index. A
    // host's DRAM has all the NICs on its PCIe root equally near, a GPU its own rail's NIC (Mooncake Transfer
    // Engine's topology matrix: each memory location's preferred NICs).
    [[nodiscard]] std::vector<std::size_t> nearest_nics(std::size_t v) const;

    // The slices of a transfer from `from` to `to`, as Mooncake's Transfer Engine spreads a request over NICs
    // (docs/CLUSTER.md "Several NICs"): when the lowest-latency path crosses a NIC, k = max(|nearest_nics(from)|,
    // |nearest_nics(to)|) slices, slice j going from → its j-th nearest NIC (mod) → to's j-th nearest NIC (mod) → to,
    // each leg the lowest-latency path; otherwise the one lowest-latency path. Deterministic.
    [[nodiscard]] std::vector<TopologyPath> rail_paths(std::size_t from, std::size_t to) const;

    // Every GPU, host and storage vertex reaches every other; throws ConfigError(file, key) naming the first
    // vertex that does not reach the first GPU.
    void validate(const std::string& file, const std::string& key) const;

private:
    TopologyGraph graph_;
    // The links by dense id (a copy of each edge's property: an edge descriptor points into the graph it came from,
    // so it must not outlive a copy of the Topology).
    std::vector<TopologyLink> links_;
    std::vector<std::string> gpu_models_;  // by vertex (shorter when the last vertices name none)
};

// Topology::rail_paths of each (from, to) pair asked for, computed once: the shared store and the NIXL connector
// price many transfers between the same few vertices.
class RailPathCache {
public:
    [[nodiscard]] const std::vector<TopologyPath>& get(const Topology& topology, std::size_t from, std::size_t to) {
        auto it = paths_.find({from, to});
        if (it == paths_.end()) {
            it = paths_.emplace(std::make_pair(from, to), topology.rail_paths(from, to)).first;
        }
        return it->second;
    }

private:
    std::map<std::pair<std::size_t, std::size_t>, std::vector<TopologyPath>> paths_;
};

// Presets: one node of each, repeated `num_nodes` times, the nodes' NICs joined by one switch. A GPU vertex's
// memory is what torch.cuda.mem_get_info reports for its catalog GPU (calibration/gpus/H100-SXM.yaml, H200.yaml
// memory_reported_bytes; a test pins the two equal), as vLLM sizes its KV cache from that total.
//   dgx-h100:            8 × H100-SXM (80 GB) on NVSwitch (450 GB/s per direction per GPU), PCIe Gen5 ×16 (64 GB/s)
//                        to a 2 TB host and to one 400 Gb/s (50 GB/s) InfiniBand NIC per GPU, 30 TB NVMe at 25 GB/s.
//   8xh200-nvlink-ib400: the same with 8 × H200 (141 GB) and 2 TB host DRAM (HGX H200, 400 Gb/s NDR per GPU).
[[nodiscard]] Topology make_topology_preset(std::string_view name, int num_nodes);
[[nodiscard]] std::vector<std::string_view> topology_preset_names();

// `cluster.topology:` — a preset name, a map {preset: NAME, nodes: N}, or a map {file: PATH} whose file holds
// {nodes: [{name, kind, memory_bytes?, gpu?}], links: [{a, b, bandwidth_GB_per_s, latency_us}]}. `base_dir` resolves a
// relative file. Validated (reachability) before it is returned.
[[nodiscard]] Topology parse_topology(const YAML::Node& node, const std::string& file, const std::string& key,
                                      const std::string& base_dir);

// Reads the user file format (nodes, links) from a YamlMap.
[[nodiscard]] Topology parse_topology_file(const YamlMap& m);

}  // namespace servesim::cluster
