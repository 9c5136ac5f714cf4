// Tests of sim/cluster/transfer_tracker.*: max-min fair shares of the links a transfer crosses, recomputed when a
// transfer starts or ends, each worked by hand; full-duplex links; the slices of one transfer; the owners' retimes.
#include "sim/cluster/transfer_tracker.h"

#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/cluster/topology_fixtures.h"

namespace servesim::cluster {
namespace {

core::SimTime ms(double v) { return core::SimTime::from_s(v / 1e3); }

TransferOwner owner(std::uint64_t request) { return TransferOwner{0, request, false}; }

TEST_CASE("transfer tracker: a transfer joining a shared link slows the one there; its end speeds the other up",
          "[transfers]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // A: host0 → host1 (host0–sw, sw–host1 at 10 GB/s), 1 GB at 0, alone: 10 µs + 1e9 / 10e9 s = 100.010 ms.
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero(), owner(1)).ns() ==
          100'010'000);
    auto r = tracker.take_retimed();
    REQUIRE(r.size() == 1);
    CHECK(r[0].end.ns() == 100'010'000);
    CHECK(!tracker.next_change());  // alone on its links: its end changes nobody
    // B: gpu0 → host1 at 50 ms (gpu0–host0 100 GB/s, then A's two links). A has moved 0.5 GB. Both now get
    // 10 / 2 = 5 GB/s: B's projection 12 µs + 1e9 / 5e9 = 200.012 ms; A's remaining 0.5 GB takes 100 ms more:
    // last byte at 150 ms, end 150.010 ms (it would have been 100.010 ms with its share fixed at its start).
    CHECK(tracker.start(t.path(t.find("gpu0"), t.find("host1")), 1e9, ms(50), owner(2)).ns() == 200'012'000);
    const std::size_t shared = t.path(t.find("host0"), t.find("sw")).edges.front();
    CHECK(tracker.active_on(shared, ms(50)) == 2);
    CHECK(tracker.rates_on(shared, false) == std::vector<double>{5 * kGB, 5 * kGB});
    r = tracker.take_retimed();
    REQUIRE(r.size() == 2);  // in start order
    CHECK((r[0].owner.request == 1 && r[0].end.ns() == 150'010'000 && !r[0].ended));
    CHECK((r[1].owner.request == 2 && r[1].end.ns() == 250'012'000));
    // A's last byte at 150 ms changes B's share: that is the next change. Then B has 0.5 GB left at 10 GB/s:
    // 50 ms more, end 200 ms + 12 µs = 200.012 ms (150.012 ms after its start instead of 200.012).
    REQUIRE(tracker.next_change());
    CHECK(tracker.next_change()->ns() == 150'000'000);
    tracker.advance(ms(150));
    r = tracker.take_retimed();
    REQUIRE(r.size() == 1);
    CHECK((r[0].owner.request == 2 && r[0].end.ns() == 200'012'000));
    CHECK(tracker.rates_on(shared, false) == std::vector<double>{10 * kGB});
    CHECK(!tracker.next_change());
    // C: the same as B at 500 ms, after both ended: alone, 2 + 10 µs + 1e9 / 10e9 = 100.012 ms.
    CHECK(tracker.start(t.path(t.find("gpu0"), t.find("host1")), 1e9, ms(500)).ns() == 100'012'000);
    CHECK(tracker.active_on(shared, ms(500)) == 1);
}

TEST_CASE("transfer tracker: shares are max-min fair, not an even split of every link", "[transfers]") {
    // a —(10 GB/s, 1 µs)— b —(2 GB/s, 1 µs)— c. A: a → b (the wide link), B: a → c (both links).
    Topology t;
    const auto a = t.add_node({"a", NodeKind::kHost, 1'000'000'000'000});
    const auto b = t.add_node({"b", NodeKind::kHost, 1'000'000'000'000});
    const auto c = t.add_node({"c", NodeKind::kHost, 1'000'000'000'000});
    t.add_link(a, b, 10 * kGB, 1e-6);
    t.add_link(b, c, 2 * kGB, 1e-6);
    TransferTracker tracker(t);
    (void)tracker.start(t.path(a, c), 1e9, core::SimTime::zero(), owner(2));
    // B is held to 2 GB/s by b–c; A gets the 8 GB/s B leaves on a–b (an even split would give it 5):
    // 1 µs + 1e9 / 8e9 = 125.001 ms; B 2 µs + 1e9 / 2e9 = 500.002 ms.
    CHECK(tracker.start(t.path(a, b), 1e9, core::SimTime::zero(), owner(1)).ns() == 125'001'000);
    CHECK(tracker.rates_on(t.path(a, b).edges.front(), false) == std::vector<double>{2 * kGB, 8 * kGB});
    // A's end frees a–b, but B stays bound by b–c: B's end does not move.
    CHECK(tracker.next_change()->ns() == 125'000'000);
    (void)tracker.take_retimed();
    tracker.advance(ms(125));
    CHECK(tracker.take_retimed().empty());
    CHECK(tracker.rates_on(t.path(a, b).edges.front(), false) == std::vector<double>{2 * kGB});
}

TEST_CASE("transfer tracker: a link's bandwidth is each way: transfers crossing it the opposite way do not share it",
          "[transfers]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // host0 → host1 and host1 → host0, 1 GB each at 0: each crosses host0–sw and sw–host1 alone in its direction,
    // 10 µs + 1e9 / 10e9 = 100.01 ms both (they would take 200.01 ms if the links were one-way).
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero(), owner(1)).ns() ==
          100'010'000);
    CHECK(tracker.start(t.path(t.find("host1"), t.find("host0")), 1e9, core::SimTime::zero(), owner(2)).ns() ==
          100'010'000);
    const std::size_t e = t.path(t.find("host0"), t.find("sw")).edges.front();
    CHECK(tracker.active_on(e, false, core::SimTime::zero()) == 1);
    CHECK(tracker.active_on(e, true, core::SimTime::zero()) == 1);
    (void)tracker.take_retimed();
    // A third, host0 → host1 again, shares with the first only: 10 GB/s / 2 → 200.01 ms, and the first, which
    // has moved nothing yet, now ends at 200.01 ms too; the reverse one keeps 100.01 ms.
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero(), owner(3)).ns() ==
          200'010'000);
    const auto r = tracker.take_retimed();
    REQUIRE(r.size() == 2);
    CHECK((r[0].owner.request == 1 && r[0].end.ns() == 200'010'000));
    CHECK((r[1].owner.request == 3 && r[1].end.ns() == 200'010'000));
}

TEST_CASE("transfer tracker: slices over several NICs, and a GPU's rail slowing two host transfers", "[transfers]") {
    const Topology t = two_nic_hosts();
    const auto ha = t.find("hostA");
    const auto hb = t.find("hostB");
    const auto g = t.find("gpuA");
    const auto slices = t.rail_paths(ha, hb);
    TransferTracker tracker(t);
    // T1: 1 GB hostA → hostB at 0, alone: two slices of 0.5 GB at 50 GB/s each (the NIC–switch links):
    // 8 µs + 10 ms = 10.008 ms, where the one lowest-latency path would take 8 µs + 1e9 / 50e9 = 20.008 ms.
    CHECK(TransferTracker(t).start(t.path(ha, hb), 1e9, core::SimTime::zero()).ns() == 20'008'000);
    CHECK(tracker.start_slices(slices, 0.5e9, core::SimTime::zero(), owner(1)).ns() == 10'008'000);
    // T2: the same at 0: every NIC link holds one slice of each, 25 GB/s: 8 µs + 0.5e9 / 25e9 = 20.008 ms, and T1
    // is retimed to the same.
    CHECK(tracker.start_slices(slices, 0.5e9, core::SimTime::zero(), owner(2)).ns() == 20'008'000);
    // T3: 1 GB gpuA → hostB at 0: two slices, both over gpuA–nicA0 and nicA0–sw. Progressive filling: nicA0–sw
    // carries T1a, T2a, T3a, T3b: 50 / 4 = 12.5 GB/s is the lowest level (gpuA–nicA0 64 / 2, sw–nicBj 50 / 3,
    // nicA1–sw 50 / 2 are higher), so those four get 12.5; then sw–nicB1 has 50 − 12.5 (T3b) = 37.5 left for T1b and
    // T2b: 18.75 each. T3: 8 µs + 0.5e9 / 12.5e9 = 40.008 ms. T1 and T2 end with their a-slices, also 40.008 ms
    // (their b-slices' last bytes come at 0.5e9 / 18.75e9 = 26.667 ms), where shares fixed at admission would have
    // kept them at 10.008 and 20.008 ms.
    const auto rail = t.rail_paths(g, hb);
    CHECK(tracker.start_slices(rail, 0.5e9, core::SimTime::zero(), owner(3)).ns() == 40'008'000);
    CHECK(tracker.rates_on(rail[1].edges[2], rail[1].reversed[2]) == std::vector<double>{18.75 * kGB, 18.75 * kGB, 12.5 * kGB});
    const auto r = tracker.take_retimed();
    REQUIRE(r.size() == 3);
    for (const auto& x : r) {
        CHECK(x.end.ns() == 40'008'000);
    }
    // The b-slices' ends free sw–nicB1 for T3b, which nicA0–sw still holds at 12.5: no end moves.
    REQUIRE(tracker.next_change());
    CHECK(tracker.next_change()->ns() == 26'666'667);
    tracker.advance(ms(30));
    CHECK(tracker.take_retimed().empty());
    // At 50 ms all have ended: T1 alone again.
    CHECK(tracker.start_slices(slices, 0.5e9, ms(50)).ns() == 10'008'000);
}

TEST_CASE("transfer tracker: eight GPUs loading from one remote host use its eight NICs, not the first",
          "[transfers]") {
    const Topology t = make_topology_preset("dgx-h100", 2);
    const auto host1 = t.find("host1");
    // 1 GB into each GPU of node 0 at t = 0. One lowest-latency path each: they all leave host1 by the same NIC
    // (ties to the lower vertex), so the eight share nic1.0–ib: 50 / 8 GB/s each, 10 µs + 1e9 / 6.25e9 = 160.01 ms,
    // the first as the last once all have started.
    TransferTracker single(t);
    core::Duration last_single;
    for (int k = 0; k < 8; ++k) {
        last_single = single.start(t.path(host1, t.find("h100-0." + std::to_string(k))), 1e9, core::SimTime::zero(),
                                   owner(static_cast<std::uint64_t>(k)));
    }
    CHECK(last_single.ns() == 160'010'000);
    for (const auto& x : single.take_retimed()) {
        CHECK(x.end.ns() == 160'010'000);
    }
    // Sliced: host1's DRAM has its 8 NICs equally near, each GPU its own rail, so 8 slices of 0.125 GB. Once all
    // have started, each of host1's NIC links carries one slice per GPU and each GPU's rail ib–nic0.k its own 8:
    // 6.25 GB/s everywhere, 10 µs + 0.125e9 / 6.25e9 = 20.01 ms, the 400 GB/s of host1's eight NICs for 8 GB.
    TransferTracker sliced(t);
    for (int k = 0; k < 8; ++k) {
        const auto paths = t.rail_paths(host1, t.find("h100-0." + std::to_string(k)));
        REQUIRE(paths.size() == 8);
        CHECK(sliced.start_slices(paths, 1e9 / 8, core::SimTime::zero()).ns() == 20'010'000);
    }
}

TEST_CASE("transfer tracker: an owner that wants its end gets it as an event, even alone", "[transfers]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // 1 GB gpu0 → gpu1: 2 + 5 + 5 + 2 = 14 µs + 1e9 / 10e9 = 100.014 ms; its last byte at 100 ms is the event.
    const TransferOwner read{3, 7, /*report_end=*/true};
    CHECK(tracker.start(t.path(t.find("gpu0"), t.find("gpu1")), 1e9, core::SimTime::zero(), read).ns() ==
          100'014'000);
    (void)tracker.take_retimed();
    REQUIRE(tracker.next_change());
    CHECK(tracker.next_change()->ns() == 100'000'000);
    tracker.advance(ms(100));
    const auto r = tracker.take_retimed();
    REQUIRE(r.size() == 1);
    CHECK((r[0].owner.replica == 3 && r[0].owner.request == 7 && r[0].ended && r[0].end.ns() == 100'014'000));
    CHECK(!tracker.next_change());
}

TEST_CASE("transfer tracker: several starts of one owner are one group, ending with its last transfer",
          "[transfers]") {
    const Topology t = two_hosts();
    TransferTracker tracker(t);
    // Two ranks' loads of one request over host0 → host1 (1 GB and 0.5 GB at 0): 5 GB/s each until the smaller
    // ends at 100 ms (data), then the larger alone at 10 GB/s: 0.5 GB left → 150 ms + 10 µs. The group's end is
    // 150.010 ms though the first start call returned 200.010 ms and the second 100.010 ms.
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 1e9, core::SimTime::zero(), owner(5)).ns() ==
          100'010'000);
    CHECK(tracker.start(t.path(t.find("host0"), t.find("host1")), 0.5e9, core::SimTime::zero(), owner(5)).ns() ==
          100'010'000);
    auto r = tracker.take_retimed();
    REQUIRE(r.size() == 1);
    CHECK(r[0].end.ns() == 200'010'000);
    tracker.advance(ms(100));
    r = tracker.take_retimed();
    REQUIRE(r.size() == 1);
    CHECK(r[0].end.ns() == 150'010'000);
}

}  // namespace
}  // namespace servesim::cluster
