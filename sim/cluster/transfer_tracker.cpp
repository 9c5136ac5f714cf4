// The fluid network of transfers in flight; see transfer_tracker.h and docs/CLUSTER.md "Contention".
#include "sim/cluster/transfer_tracker.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace servesim::cluster {

namespace {
constexpr std::uint32_t kNoGroup = 0xffffffffu;

std::uint64_t owner_key(const TransferOwner& o) {
    return (static_cast<std::uint64_t>(o.replica) << 40) ^ static_cast<std::uint64_t>(o.request);
}

// A free slot of `slab` (one released earlier, else a new one at the end).
template <typename T>
std::uint32_t take_slot(std::vector<T>& slab, std::vector<std::uint32_t>& released) {
    if (!released.empty()) {
        const std::uint32_t i = released.back();
        released.pop_back();
        return i;
    }
    slab.emplace_back();
    return static_cast<std::uint32_t>(slab.size() - 1);
}
}  // namespace

TransferTracker::TransferTracker(const Topology& topology)
    : capacity_(2 * topology.num_links()),
      both_ways_(topology.num_links()),
      on_way_(2 * topology.num_links()),
      mark_way_(2 * topology.num_links(), 0),
      way_left_(2 * topology.num_links()),
      way_count_(2 * topology.num_links()) {
    for (std::size_t e = 0; e < topology.num_links(); ++e) {
        const TopologyLink& l = topology.link(e);
        both_ways_[e] = topology.node(l.a).kind == NodeKind::kStorage || topology.node(l.b).kind == NodeKind::kStorage;
        capacity_[2 * e] = l.bandwidth_bytes_per_s;
        capacity_[2 * e + 1] = l.bandwidth_bytes_per_s;
    }
}

std::uint32_t TransferTracker::slot(std::size_t edge, bool reversed) const {
    return static_cast<std::uint32_t>(2 * edge + (reversed && !both_ways_[edge] ? 1 : 0));
}

std::uint32_t TransferTracker::group_of(TransferOwner owner, core::SimTime now) {
    if (owner.replica == TransferOwner::kNone) {
        return kNoGroup;
    }
    const std::uint64_t key = owner_key(owner);
    if (const auto it = owned_.find(key); it != owned_.end()) {
        return it->second;
    }
    const std::uint32_t g = take_slot(groups_, free_groups_);
    groups_[g] = Group{owner, next_seq_++, 0, now, now, false, false};
    owned_.emplace(key, g);
    return g;
}

void TransferTracker::mark(std::uint32_t g) {
    if (g != kNoGroup && !groups_[g].dirty) {
        groups_[g].dirty = true;
        dirty_groups_.push_back(g);
    }
}

core::Duration TransferTracker::start(const TopologyPath& path, double bytes, core::SimTime now, TransferOwner owner) {
    return start_slices(std::span<const TopologyPath>(&path, 1), bytes, now, owner);
}

core::Duration TransferTracker::start_slices(std::span<const TopologyPath> paths, double bytes_each,
                                             core::SimTime now, TransferOwner owner) {
    advance(now);
    const std::uint32_t g = group_of(owner, now);
    core::Duration longest = core::Duration::from_ns(0);
    started_.clear();
    for (const TopologyPath& p : paths) {
        if (p.edges.empty()) {  // the same vertex: its latency only, on no link
            const core::Duration d = core::Duration::from_s(p.latency_s);
            longest = std::max(longest, d);
            if (g != kNoGroup) {
                groups_[g].ended_max = std::max(groups_[g].ended_max, now + d);
                mark(g);
            }
            continue;
        }
        const std::uint32_t f = take_slot(flows_, free_flows_);
        mark_flow_.resize(flows_.size(), 0);
        Flow& flow = flows_[f];
        flow.ways.clear();
        for (std::size_t i = 0; i < p.edges.size(); ++i) {
            flow.ways.push_back(slot(p.edges[i], p.reversed[i]));
        }
        flow.remaining_bytes = bytes_each;
        flow.rate = 0;
        flow.latency_s = p.latency_s;
        flow.updated = now;
        flow.data_end = now;
        flow.end = now;
        flow.group = g;
        flow.seq = next_seq_++;
        flow.alive = true;
        for (const std::uint32_t w : flow.ways) {
            on_way_[w].push_back(f);
        }
        if (g != kNoGroup) {
            ++groups_[g].alive_flows;
        }
        started_.push_back(f);
    }
    if (!started_.empty()) {
        rerate(started_, now);
        for (const std::uint32_t f : started_) {
            longest = std::max(longest, flows_[f].end - now);
        }
    }
    return longest;
}

bool TransferTracker::contended(const Flow& f) const {
    return std::any_of(f.ways.begin(), f.ways.end(), [&](std::uint32_t w) { return on_way_[w].size() > 1; });
}

void TransferTracker::rerate(std::span<const std::uint32_t> seeds, core::SimTime now) {
    // The flows connected to the seeds through shared ways: only their shares can change.
    if (++epoch_ == 0) {
        std::fill(mark_flow_.begin(), mark_flow_.end(), 0);
        std::fill(mark_way_.begin(), mark_way_.end(), 0);
        epoch_ = 1;
    }
    comp_.clear();
    comp_ways_.clear();
    for (const std::uint32_t s : seeds) {
        if (flows_[s].alive && mark_flow_[s] != epoch_) {
            mark_flow_[s] = epoch_;
            comp_.push_back(s);
        }
    }
    for (std::size_t i = 0; i < comp_.size(); ++i) {
        for (const std::uint32_t w : flows_[comp_[i]].ways) {
            if (mark_way_[w] == epoch_) {
                continue;
            }
            mark_way_[w] = epoch_;
            comp_ways_.push_back(w);
            for (const std::uint32_t f : on_way_[w]) {
                if (mark_flow_[f] != epoch_) {
                    mark_flow_[f] = epoch_;
                    comp_.push_back(f);
                }
            }
        }
    }
    // Bytes moved at the old rates up to now.
    for (const std::uint32_t f : comp_) {
        Flow& flow = flows_[f];
        flow.remaining_bytes = std::max(0.0, flow.remaining_bytes - flow.rate * (now - flow.updated).s());
        flow.updated = now;
        flow.rate = -1;  // not yet fixed
    }
    // Progressive filling: the way with the smallest fair level fixes its unfixed flows at that level, which then
    // use that much of every other way they cross; repeat until every flow has a rate. Ways in index order and
    // flows in start order break ties, so the result is deterministic.
    std::sort(comp_ways_.begin(), comp_ways_.end());
    for (const std::uint32_t w : comp_ways_) {
        way_left_[w] = capacity_[w];
        way_count_[w] = static_cast<std::uint32_t>(on_way_[w].size());
    }
    std::size_t unfixed = comp_.size();
    while (unfixed > 0) {
        std::uint32_t best = 0;
        double level = std::numeric_limits<double>::infinity();
        for (const std::uint32_t w : comp_ways_) {
            if (way_count_[w] > 0) {
                const double l = way_left_[w] / static_cast<double>(way_count_[w]);
                if (l < level) {
                    level = l;
                    best = w;
                }
            }
        }
        level = std::max(level, 0.0);
        for (const std::uint32_t f : on_way_[best]) {
            Flow& flow = flows_[f];
            if (flow.rate >= 0) {
                continue;
            }
            flow.rate = level;
            --unfixed;
            for (const std::uint32_t w : flow.ways) {
                way_left_[w] -= level;
                --way_count_[w];
            }
        }
    }
    for (const std::uint32_t f : comp_) {
        Flow& flow = flows_[f];
        const double left_s = flow.rate > 0 ? flow.remaining_bytes / flow.rate : 0.0;
        const core::SimTime data_end = now + core::Duration::from_s(left_s);
        const core::SimTime end = now + core::Duration::from_s(flow.latency_s + left_s);
        if (end != flow.end || data_end != flow.data_end) {
            flow.data_end = data_end;
            flow.end = end;
            mark(flow.group);
        }
    }
}

void TransferTracker::finish(std::uint32_t f) {
    Flow& flow = flows_[f];
    flow.alive = false;
    for (const std::uint32_t w : flow.ways) {
        auto& v = on_way_[w];
        v.erase(std::find(v.begin(), v.end(), f));
    }
    if (flow.group != kNoGroup) {
        Group& g = groups_[flow.group];
        --g.alive_flows;
        g.ended_max = std::max(g.ended_max, flow.end);
        mark(flow.group);
    }
    free_flows_.push_back(f);
}

void TransferTracker::advance(core::SimTime now) {
    while (true) {
        // The earliest data end among the flows (ties: all of them at once).
        core::SimTime t = core::SimTime::from_ns(std::numeric_limits<std::int64_t>::max());
        ending_.clear();
        for (std::uint32_t f = 0; f < flows_.size(); ++f) {
            const Flow& flow = flows_[f];
            if (!flow.alive || flow.data_end > now) {
                continue;
            }
            if (flow.data_end < t) {
                t = flow.data_end;
                ending_.clear();
            }
            if (flow.data_end == t) {
                ending_.push_back(f);
            }
        }
        if (ending_.empty()) {
            return;
        }
        neighbours_.clear();
        for (const std::uint32_t f : ending_) {
            for (const std::uint32_t w : flows_[f].ways) {
                for (const std::uint32_t o : on_way_[w]) {
                    neighbours_.push_back(o);
                }
            }
        }
        for (const std::uint32_t f : ending_) {
            finish(f);
        }
        rerate(neighbours_, t);  // the ended flows are no longer alive: only their neighbours are rerated
    }
}

std::optional<core::SimTime> TransferTracker::next_change() {
    std::optional<core::SimTime> t;
    for (const Flow& flow : flows_) {
        if (!flow.alive || (t && flow.data_end >= *t)) {
            continue;
        }
        const bool reports = flow.group != kNoGroup && groups_[flow.group].owner.report_end;
        if (reports || contended(flow)) {
            t = flow.data_end;
        }
    }
    return t;
}

std::vector<TransferRetime> TransferTracker::take_retimed() {
    std::vector<TransferRetime> out;
    if (dirty_groups_.empty()) {
        return out;
    }
    // A group's projected end: the latest of its ended flows' ends and its alive flows' ends.
    for (const std::uint32_t g : dirty_groups_) {
        groups_[g].dirty = false;
    }
    std::vector<core::SimTime> ends(groups_.size());
    for (const std::uint32_t g : dirty_groups_) {
        ends[g] = groups_[g].ended_max;
    }
    for (const Flow& flow : flows_) {
        if (flow.alive && flow.group != kNoGroup) {
            ends[flow.group] = std::max(ends[flow.group], flow.end);
        }
    }
    std::sort(dirty_groups_.begin(), dirty_groups_.end(),
              [&](std::uint32_t a, std::uint32_t b) { return groups_[a].seq < groups_[b].seq; });
    for (const std::uint32_t g : dirty_groups_) {
        Group& group = groups_[g];
        const bool ended = group.alive_flows == 0;
        if (!group.has_report || group.reported != ends[g] || (ended && group.owner.report_end)) {
            out.push_back(TransferRetime{group.owner, ends[g], ended});
            group.has_report = true;
            group.reported = ends[g];
        }
        if (ended) {
            owned_.erase(owner_key(group.owner));
            free_groups_.push_back(g);
        }
    }
    dirty_groups_.clear();
    return out;
}

std::size_t TransferTracker::active_on(std::size_t edge, bool reversed, core::SimTime now) const {
    const auto& v = on_way_[slot(edge, reversed)];
    return static_cast<std::size_t>(
        std::count_if(v.begin(), v.end(), [&](std::uint32_t f) { return flows_[f].data_end > now; }));
}

std::size_t TransferTracker::active_on(std::size_t edge, core::SimTime now) const {
    return both_ways_[edge] ? active_on(edge, false, now) : active_on(edge, false, now) + active_on(edge, true, now);
}

std::vector<double> TransferTracker::rates_on(std::size_t edge, bool reversed) const {
    std::vector<std::uint32_t> v = on_way_[slot(edge, reversed)];
    std::sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) { return flows_[a].seq < flows_[b].seq; });
    std::vector<double> rates;
    for (const std::uint32_t f : v) {
        rates.push_back(flows_[f].rate);
    }
    return rates;
}

}  // namespace servesim::cluster
