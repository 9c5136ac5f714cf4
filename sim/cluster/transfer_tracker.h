// TransferTracker: the KV transfers in flight over a topology and the bandwidth each one gets, as a fluid network.
// Every link's bandwidth (each way) is shared max-min fairly among the transfers crossing it, and the shares are
// recomputed whenever a transfer starts or ends (progressive filling, as flow-level network simulators such as
// SimGrid's and ns-3's flow models do): a transfer joining a link slows the ones already there, and one ending
// speeds up the rest. RDMA NICs converge to about this share under DCQCN; docs/CLUSTER.md "Contention".
//
// A transfer moves its bytes at its current rate and ends its path latency after its last byte. Slices of one
// transfer (Topology::rail_paths) start together. A transfer may have an owner (a replica's request waiting for its
// load): when the owner's projected end moves, the tracker reports it (take_retimed), so the request's wait follows
// the network rather than the share it saw when it started. Calls come in non-decreasing `now` (the event loop's
// clock); the loop calls advance() at next_change() so that ends which change other transfers happen on time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/cluster/topology.h"
#include "sim/core/time.h"

namespace servesim::cluster {

// Who waits for a transfer: request `request` on replica `replica`. `report_end`: the owner must also learn the
// moment its transfer ends (the NIXL read, whose end frees the prefill side's blocks), so the tracker's end is
// always an event; otherwise only the projected end is reported when it moves.
struct TransferOwner {
    static constexpr std::uint32_t kNone = 0xffffffffu;
    std::uint32_t replica = kNone;
    std::uint64_t request = 0;
    bool report_end = false;
};

// The owner's transfers (all its start calls together) now end at `end`; `ended`: they have ended (final).
struct TransferRetime {
    TransferOwner owner;
    core::SimTime end;
    bool ended = false;
};

class TransferTracker {
public:
    explicit TransferTracker(const Topology& topology);

    // Starts a transfer of `bytes` over `path` at `now` and returns its projected duration at the shares it gets
    // now; the transfers it slows are retimed.
    core::Duration start(const TopologyPath& path, double bytes, core::SimTime now, TransferOwner owner = {});

    // Starts the slices of one transfer together, `bytes_each` on each path, and returns the longest slice's
    // projected duration. Several calls with the same owner make one group, which ends with its last slice.
    core::Duration start_slices(std::span<const TopologyPath> paths, double bytes_each, core::SimTime now,
                                TransferOwner owner = {});

    // Processes the transfers that end by `now`, in time order, recomputing the shares each time.
    void advance(core::SimTime now);

    // The next time a transfer ends and that end matters: it shares a link with another transfer (whose share then
    // grows) or its owner wants its end. nullopt when none. A transfer alone on its links ends quietly (advance()
    // drops it later); nothing else changes then.
    [[nodiscard]] std::optional<core::SimTime> next_change();

    // The owners whose projected end moved since the last call (or whose transfers ended, for report_end owners),
    // in the order their groups started.
    [[nodiscard]] std::vector<TransferRetime> take_retimed();

    // Transfers on `edge` at `now` (not yet ended), both ways together; the same one way (`reversed` as in
    // TopologyPath).
    [[nodiscard]] std::size_t active_on(std::size_t edge, core::SimTime now) const;
    [[nodiscard]] std::size_t active_on(std::size_t edge, bool reversed, core::SimTime now) const;
    // The current rate of the transfers on one way of an edge (bytes/s), by start order: for tests.
    [[nodiscard]] std::vector<double> rates_on(std::size_t edge, bool reversed) const;

private:
    struct Flow {
        std::vector<std::uint32_t> ways;  // way slots crossed
        double remaining_bytes = 0;
        double rate = 0;                  // bytes/s
        double latency_s = 0;
        core::SimTime updated;            // remaining_bytes is as of this time
        core::SimTime data_end;           // last byte at the current rate
        core::SimTime end;                // data end + latency (the owner's view)
        std::uint32_t group = 0;
        std::uint64_t seq = 0;            // start order: deterministic ties
        bool alive = false;
    };
    struct Group {
        TransferOwner owner;
        std::uint64_t seq = 0;
        int alive_flows = 0;
        core::SimTime ended_max;          // the latest end among its ended flows
        core::SimTime reported;           // the end last reported
        bool has_report = false;
        bool dirty = false;
    };

    // The slot of a way across an edge: 2·edge + reversed, or 2·edge both ways for a link to a storage node (the
    // device's bandwidth is shared by its reads and writes).
    [[nodiscard]] std::uint32_t slot(std::size_t edge, bool reversed) const;
    std::uint32_t group_of(TransferOwner owner, core::SimTime now);
    // Recomputes the max-min fair rates of every flow connected (through shared ways) to `seeds`, as of `now`.
    void rerate(std::span<const std::uint32_t> seeds, core::SimTime now);
    void finish(std::uint32_t f);
    void mark(std::uint32_t g);
    [[nodiscard]] bool contended(const Flow& f) const;

    std::vector<double> capacity_;               // per way slot, bytes/s
    std::vector<bool> both_ways_;                // per edge: a link to a storage node
    std::vector<std::vector<std::uint32_t>> on_way_;  // per way slot: its alive flows
    std::vector<Flow> flows_;
    std::vector<std::uint32_t> free_flows_;
    std::vector<Group> groups_;
    std::vector<std::uint32_t> free_groups_;
    std::unordered_map<std::uint64_t, std::uint32_t> owned_;  // (replica, request) → group
    std::vector<std::uint32_t> dirty_groups_;
    std::uint64_t next_seq_ = 0;
    // Scratch, kept so that starting and ending transfers allocate nothing: start_slices' new flows, advance's
    // ending flows and their neighbours, rerate's component and marks.
    std::vector<std::uint32_t> started_;
    std::vector<std::uint32_t> ending_;
    std::vector<std::uint32_t> neighbours_;
    std::vector<std::uint32_t> comp_;
    std::vector<std::uint32_t> comp_ways_;
    std::vector<std::uint32_t> mark_flow_;
    std::vector<std::uint32_t> mark_way_;
    std::uint32_t epoch_ = 0;
    std::vector<double> way_left_;
    std::vector<std::uint32_t> way_count_;
};

}  // namespace servesim::cluster
