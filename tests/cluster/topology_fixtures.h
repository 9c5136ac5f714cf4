// Small topologies worked by hand in the cluster tests (topology, transfer tracker).
#pragma once

#include <string>

#include "sim/cluster/topology.h"

namespace servesim::cluster {

inline constexpr double kGB = 1e9;

// gpu0 —(100 GB/s, 2 µs)— host0 —(10 GB/s, 5 µs)— sw —(10 GB/s, 5 µs)— host1 —(100 GB/s, 2 µs)— gpu1
inline Topology two_hosts() {
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

// hostA with two NICs, hostB with two NICs, one switch between them; gpuA behind nicA0 (its rail):
//   hostA —(100, 1 µs)— nicA0, nicA1 —(50 GB/s, 3 µs)— sw —(50, 3 µs)— nicB0, nicB1 —(100, 1 µs)— hostB
//   gpuA —(64, 1 µs)— nicA0, gpuA —(64, 2 µs)— hostA
inline Topology two_nic_hosts() {
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

}  // namespace servesim::cluster
