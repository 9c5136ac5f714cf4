// Tests of sim/cluster/topology.*: paths (bottleneck bandwidth, summed latency), NIC slices, the presets' shape, and
// bad input refused with the file and key. Contention: tests/cluster/transfer_tracker_test.cpp.
#include "sim/cluster/topology.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/cluster/topology_fixtures.h"

namespace servesim::cluster {
namespace {

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::abs(b); }

TEST_CASE("topology: a path's latency is summed and its bandwidth is the bottleneck", "[topology]") {
    const Topology t = two_hosts();
    const auto p = t.path(t.find("host0"), t.find("gpu1"));
    // host0 → sw → host1 → gpu1: 5 + 5 + 2 = 12 µs; min(10, 10, 100) = 10 GB/s.
    CHECK(p.edges.size() == 3);
    CHECK(near(p.latency_s, 12e-6));
    CHECK(near(p.bottleneck_bytes_per_s, 10 * kGB));
    CHECK(t.nearest_host(t.find("gpu1")) == t.find("host1"));
    CHECK(t.gpus().size() == 2);
}

TEST_CASE("topology: a copied topology keeps its links' bandwidths", "[topology][regression]") {
    // Links were once kept as edge descriptors, which point into the graph they came from: after a copy (the
    // scenario's shared_ptr holds one) the bandwidths read freed memory and loads took days.
    const Topology original = two_hosts();
    auto copy = std::make_unique<Topology>(original);
    const Topology moved = std::move(*copy);
    copy.reset();
    const auto p = moved.path(moved.find("host0"), moved.find("gpu1"));
    CHECK(near(p.bottleneck_bytes_per_s, 10 * kGB));
    CHECK(near(moved.link(p.edges.back()).bandwidth_bytes_per_s, 100 * kGB));
}

TEST_CASE("topology: a host's transfer is split over its NICs, as Mooncake's Transfer Engine slices it",
          "[topology]") {
    const Topology t = two_nic_hosts();
    const auto ha = t.find("hostA");
    const auto hb = t.find("hostB");
    const auto g = t.find("gpuA");
    // DRAM has both NICs equally near (1 µs); the GPU its own rail (nicA0 at 1 µs; nicA1 is 3 µs away via hostA).
    CHECK(t.nearest_nics(ha) == std::vector<std::size_t>{t.find("nicA0"), t.find("nicA1")});
    CHECK(t.nearest_nics(g) == std::vector<std::size_t>{t.find("nicA0")});
    const auto slices = t.rail_paths(ha, hb);
    REQUIRE(slices.size() == 2);  // max(2 NICs, 2 NICs)
    // Slice j: hostA → nicAj → sw → nicBj → hostB: 1 + 3 + 3 + 1 = 8 µs, bottleneck 50 GB/s, no edge shared.
    CHECK(near(slices[0].latency_s, 8e-6));
    CHECK(near(slices[1].bottleneck_bytes_per_s, 50 * kGB));
    // A path that crosses no NIC stays one: gpuA → hostA over PCIe.
    CHECK(t.rail_paths(g, ha).size() == 1);
    // GPU to host across the switch: its one rail NIC, both of hostB's: two slices through nicA0.
    const auto rail = t.rail_paths(g, hb);
    REQUIRE(rail.size() == 2);
    CHECK(rail[0].edges.front() == rail[1].edges.front());
    // (Their times under contention: tests/cluster/transfer_tracker_test.cpp.)
}

TEST_CASE("topology: GPU to GPU across nodes stays on each GPU's own rail", "[topology]") {
    const Topology t = make_topology_preset("dgx-h100", 2);
    const auto gg = t.rail_paths(t.find("h100-0.3"), t.find("h100-1.3"));
    REQUIRE(gg.size() == 1);
    CHECK(gg.front().edges == t.path(t.find("h100-0.3"), t.find("h100-1.3")).edges);
    CHECK(t.rail_paths(t.find("host1"), t.find("h100-0.0")).size() == 8);  // host1's eight NICs
}

TEST_CASE("topology: the dgx-h100 preset, two nodes over InfiniBand", "[topology]") {
    const Topology t = make_topology_preset("dgx-h100", 2);
    t.validate("x", "cluster.topology");
    CHECK(t.gpus().size() == 16);
    CHECK(t.node(t.gpus().front()).memory_bytes == 84'932'978'278);  // H100-SXM's reported 79.1 GiB
    // NVSwitch inside a node: gpu → nvswitch → gpu, 1 + 1 µs at 450 GB/s.
    const auto nv = t.path(t.find("h100-0.0"), t.find("h100-0.7"));
    CHECK(near(nv.latency_s, 2e-6));
    CHECK(near(nv.bottleneck_bytes_per_s, 450 * kGB));
    // Across nodes: gpu → nic → ib-switch → nic → gpu: 2 + 3 + 3 + 2 = 10 µs at 50 GB/s (NDR 400 Gb/s).
    const auto ib = t.path(t.find("h100-0.3"), t.find("h100-1.3"));
    CHECK(near(ib.latency_s, 10e-6));
    CHECK(near(ib.bottleneck_bytes_per_s, 50 * kGB));
    // Remote host DRAM to a GPU: host1 → nic → switch → nic → gpu, also 10 µs at 50 GB/s.
    const auto host = t.path(t.find("host1"), t.find("h100-0.0"));
    CHECK(near(host.latency_s, 10e-6));
    CHECK(near(host.bottleneck_bytes_per_s, 50 * kGB));
    CHECK(make_topology_preset("8xh200-nvlink-ib400", 1).node(1).memory_bytes == 2048LL << 30);
}

std::string error_of(const std::string& yaml) {
    try {
        (void)parse_topology_file(YamlMap(YAML::Load(yaml), "topo.yaml"));
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

TEST_CASE("topology: a GPU with no path to the others is refused with the file and key", "[topology]") {
    const std::string msg = error_of(R"(
nodes:
  - {name: g0, kind: gpu, memory_bytes: 1000}
  - {name: h0, kind: host, memory_bytes: 1000}
  - {name: g1, kind: gpu, memory_bytes: 1000}
links:
  - {a: g0, b: h0, bandwidth_GB_per_s: 64, latency_us: 2}
)");
    CHECK(msg.find("topo.yaml") != std::string::npos);
    CHECK(msg.find("links") != std::string::npos);
    CHECK(msg.find("gpu 'g1' is unreachable") != std::string::npos);
}

TEST_CASE("topology: a link of zero bandwidth is refused with the file and key", "[topology]") {
    const std::string msg = error_of(R"(
nodes:
  - {name: g0, kind: gpu, memory_bytes: 1000}
  - {name: h0, kind: host, memory_bytes: 1000}
links:
  - {a: g0, b: h0, bandwidth_GB_per_s: 0, latency_us: 2}
)");
    CHECK(msg.find("topo.yaml") != std::string::npos);
    CHECK(msg.find("links[0].bandwidth_GB_per_s") != std::string::npos);
    CHECK(msg.find("must be positive") != std::string::npos);
    CHECK(error_of("nodes: [{name: g0, kind: gpu, memory_bytes: 1}]\nlinks: [{a: g0, b: zz, bandwidth_GB_per_s: 1}]")
              .find("links[0].b") != std::string::npos);
}

TEST_CASE("topology: cluster.topology as a preset name, a map and an unknown preset", "[topology]") {
    CHECK(parse_topology(YAML::Load("dgx-h100"), "s.yaml", "cluster.topology", ".").gpus().size() == 8);
    CHECK(parse_topology(YAML::Load("{preset: 8xh200-nvlink-ib400, nodes: 3}"), "s.yaml", "cluster.topology", ".")
              .gpus()
              .size() == 24);
    try {
        (void)parse_topology(YAML::Load("dgx-a100"), "s.yaml", "cluster.topology", ".");
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("s.yaml") != std::string::npos);
        CHECK(std::string(e.what()).find("cluster.topology") != std::string::npos);
        CHECK(std::string(e.what()).find("unknown topology preset 'dgx-a100'") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::cluster
