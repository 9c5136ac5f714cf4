// Tests of sim/cluster/topology.*: paths (bottleneck bandwidth, summed latency), fair-share contention on a shared
// edge worked by hand, the presets' shape, and bad input refused with the file and key.
#include "sim/cluster/topology.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::cluster {
namespace {

constexpr double kGB = 1e9;

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::abs(b); }

// gpu0 —(100 GB/s, 2 µs)— host0 —(10 GB/s, 5 µs)— sw —(10 GB/s, 5 µs)— host1 —(100 GB/s, 2 µs)— gpu1
Topology two_hosts() {
    Topology t;
    const auto g0 = t.add_node({"gpu0", NodeKind::kGpu, 80'000'000'000});
    const auto h0 = t.add_node({"host0", NodeKind::kHost, 1'000'000'000'000});
    const auto sw = t.add_node({"sw", NodeKind::kSwitch, 0});
    const auto h1 = t.add_node({"host1", NodeKind::kHost, 1'000'000'000'000});
    const auto g1 = t.add_node({"gpu1", NodeKind::kGpu, 80'000'000'000});
    t.add_link(g0, h0, 100 * kGB, 2e-6);
    t.add_link(h0, sw, 10 * kGB, 5e-6);
    t.add_link(sw, h1, 10 * kGB, 5e-6);
    t.add_link(h1, g1, 100 * kGB, 2e-6);
    return t;
}

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

TEST_CASE("topology: two transfers sharing a two-hop path's link split its bandwidth", "[topology]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // A: host0 → host1 (edges host0–sw, sw–host1), 1 GB at t = 0, alone: 10 µs + 1e9 / 10e9 s = 0.100010 s.
    const auto a = tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero());
    CHECK(a.ns() == 100'010'000);
    // B: gpu0 → host1 (edges gpu0–host0, host0–sw, sw–host1), 1 GB at t = 50 ms while A is still on host0–sw and
    // sw–host1: share there = 10 GB/s / 2 = 5 GB/s, gpu0–host0 alone 100 GB/s → bottleneck 5 GB/s;
    // 2 + 5 + 5 = 12 µs + 1e9 / 5e9 = 0.2 s → 0.200012 s.
    const auto b = tracker.start(t.path(t.find("gpu0"), t.find("host1")), 1e9, core::SimTime::from_s(0.05));
    CHECK(b.ns() == 200'012'000);
    CHECK(tracker.active_on(t.path(t.find("host0"), t.find("sw")).edges.front(), core::SimTime::from_s(0.05)) == 2);
    // C: the same as B at t = 0.5 s, after both ended (A at 0.10001 s, B at 0.250012 s): alone again, 0.100012 s
    // (2 µs + 10 µs, 1 GB at 10 GB/s).
    const auto c = tracker.start(t.path(t.find("gpu0"), t.find("host1")), 1e9, core::SimTime::from_s(0.5));
    CHECK(c.ns() == 100'012'000);
}

// hostA with two NICs, hostB with two NICs, one switch between them; gpuA behind nicA0 (its rail):
//   hostA —(100, 1 µs)— nicA0, nicA1 —(50 GB/s, 3 µs)— sw —(50, 3 µs)— nicB0, nicB1 —(100, 1 µs)— hostB
//   gpuA —(64, 1 µs)— nicA0, gpuA —(64, 2 µs)— hostA
Topology two_nic_hosts() {
    Topology t;
    const auto ha = t.add_node({"hostA", NodeKind::kHost, 1'000'000'000'000});
    const auto hb = t.add_node({"hostB", NodeKind::kHost, 1'000'000'000'000});
    const auto sw = t.add_node({"sw", NodeKind::kSwitch, 0});
    const auto g = t.add_node({"gpuA", NodeKind::kGpu, 80'000'000'000});
    for (const char* side : {"A", "B"}) {
        for (int i = 0; i < 2; ++i) {
            const auto nic = t.add_node({std::string("nic") + side + std::to_string(i), NodeKind::kNic, 0});
            t.add_link(side[0] == 'A' ? ha : hb, nic, 100 * kGB, 1e-6);
            t.add_link(nic, sw, 50 * kGB, 3e-6);
            if (side[0] == 'A' && i == 0) {
                t.add_link(g, nic, 64 * kGB, 1e-6);
            }
        }
    }
    t.add_link(g, ha, 64 * kGB, 2e-6);
    return t;
}

TEST_CASE("topology: a link's bandwidth is each way: transfers crossing it the opposite way do not share it",
          "[topology]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // host0 → host1 and host1 → host0, 1 GB each at 0: each crosses host0–sw and sw–host1 alone in its direction,
    // 10 µs + 1e9 / 10e9 = 100.01 ms both (they would take 200.01 ms for the second if the links were one-way).
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero()).ns() == 100'010'000);
    CHECK(tracker.start(t.path(t.find("host1"), t.find("host0")), 1e9, core::SimTime::zero()).ns() == 100'010'000);
    const std::size_t e = t.path(t.find("host0"), t.find("sw")).edges.front();
    CHECK(tracker.active_on(e, false, core::SimTime::zero()) == 1);
    CHECK(tracker.active_on(e, true, core::SimTime::zero()) == 1);
    // A third, host0 → host1 again, shares with the first only: 10 GB/s / 2 → 200.01 ms.
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero()).ns() == 200'010'000);
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

    TransferTracker tracker(t);
    // T1: 1 GB hostA → hostB at 0, alone: two slices of 0.5 GB at 50 GB/s each: 8 µs + 10 ms = 10.008 ms, where
    // the one lowest-latency path would take 8 µs + 1e9 / 50e9 = 20.008 ms.
    CHECK(TransferTracker(t).start(t.path(ha, hb), 1e9, core::SimTime::zero()).ns() == 20'008'000);
    CHECK(tracker.start_slices(slices, 0.5e9, core::SimTime::zero()).ns() == 10'008'000);
    // T2: the same at 0 beside T1: every NIC edge holds one slice of T1, so each slice gets 50 / 2 = 25 GB/s:
    // 8 µs + 0.5e9 / 25e9 = 20.008 ms.
    CHECK(tracker.start_slices(slices, 0.5e9, core::SimTime::zero()).ns() == 20'008'000);
    // T3: 1 GB gpuA → hostB at 0: its rail nicA0 on one side, nicB0 and nicB1 on the other, so two slices, both
    // over gpuA–nicA0 and nicA0–sw. On nicA0–sw: one slice each of T1 and T2 plus T3's two: 50 / 4 = 12.5 GB/s
    // (gpuA–nicA0 64 / 2, sw–nicBj 50 / 3, nicBj–hostB 100 / 3 are wider): 1 + 3 + 3 + 1 = 8 µs + 0.5e9 / 12.5e9 =
    // 40.008 ms.
    const auto rail = t.rail_paths(g, hb);
    REQUIRE(rail.size() == 2);
    CHECK(tracker.start_slices(rail, 0.5e9, core::SimTime::zero()).ns() == 40'008'000);
    // At 50 ms all have ended: T1 alone again.
    CHECK(tracker.start_slices(slices, 0.5e9, core::SimTime::from_s(0.05)).ns() == 10'008'000);
}

TEST_CASE("topology: eight GPUs loading from one remote host use its eight NICs, not the first", "[topology]") {
    const Topology t = make_topology_preset("dgx-h100", 2);
    const auto host1 = t.find("host1");
    // 1 GB into each GPU of node 0 at t = 0. One lowest-latency path each: they all leave host1 by the same NIC
    // (ties to the lower vertex), so GPU k shares nic1.0–ib with the k before it: 10 µs + 1e9 / (50e9 / (k + 1)),
    // the last 160.01 ms.
    TransferTracker single(t);
    core::Duration last_single;
    for (int k = 0; k < 8; ++k) {
        last_single = single.start(t.path(host1, t.find("h100-0." + std::to_string(k))), 1e9, core::SimTime::zero());
    }
    CHECK(last_single.ns() == 160'010'000);
    // Sliced: host1's DRAM has its 8 NICs equally near, each GPU its own rail, so 8 slices of 0.125 GB. GPU k's
    // slice over host1's NIC j meets one slice of each GPU before it there: 50 / (k + 1) ≥ 6.25 GB/s; on its own
    // rail ib–nic0.k its 8 slices share 50 GB/s: 6.25 GB/s. So every GPU takes 10 µs + 0.125e9 / 6.25e9 = 20.01 ms,
    // the 400 GB/s of host1's eight NICs for the node's 8 GB.
    TransferTracker sliced(t);
    for (int k = 0; k < 8; ++k) {
        const auto paths = t.rail_paths(host1, t.find("h100-0." + std::to_string(k)));
        REQUIRE(paths.size() == 8);
        CHECK(sliced.start_slices(paths, 1e9 / 8, core::SimTime::zero()).ns() == 20'010'000);
    }
    // GPU to GPU across nodes stays on each GPU's own rail: one slice, the lowest-latency path.
    const auto gg = t.rail_paths(t.find("h100-0.3"), t.find("h100-1.3"));
    REQUIRE(gg.size() == 1);
    CHECK(gg.front().edges == t.path(t.find("h100-0.3"), t.find("h100-1.3")).edges);
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
