// RequestTimeouts: the deadlines of the requests whose client gives up on them (workload `request_timeout`,
// workloads::RequestSpec::timeout) — the client's aiohttp ClientTimeout(total=...) in vllm bench serve and vLLM's
// multi-turn benchmark, inference-perf's 300 s. Owns only the deadlines; whether a request is still live is asked of
// its replica (engine::Replica::is_live), so a request that finishes first costs nothing here until its entry
// reaches the top, where it is dropped unseen. The simulation merges the earliest live deadline with its event queue
// (core::EventQueue::advance_to) rather than pushing one event per request, so a finished request leaves no event
// behind to extend the run. Memory: one entry per request sent within the last time-out, whatever the run length.
// docs/CLIENT-TIMEOUTS.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace servesim::cluster {

class RequestTimeouts {
public:
    struct Entry {
        std::int64_t deadline_ns = 0;
        std::uint64_t id = 0;       // the request
        std::uint32_t replica = 0;  // where it was routed
    };

    void add(core::SimTime deadline, core::RequestId id, std::uint32_t replica) {
        heap_.push(Entry{deadline.ns(), core::to_int(id), replica});
    }

    // The earliest deadline of a live request, dropping the entries of requests that are not (`is_live(entry)`).
    template <typename IsLive>
    [[nodiscard]] std::optional<core::SimTime> next(const IsLive& is_live) {
        while (!heap_.empty()) {
            if (is_live(heap_.top())) {
                return core::SimTime::from_ns(heap_.top().deadline_ns);
            }
            heap_.pop();
        }
        return std::nullopt;
    }

    // Removes and returns the earliest entry (live or not). Precondition: not empty.
    Entry pop() {
        const Entry e = heap_.top();
        heap_.pop();
        return e;
    }

    [[nodiscard]] bool empty() const { return heap_.empty(); }
    [[nodiscard]] std::size_t size() const { return heap_.size(); }

private:
    struct Later {  // a min-heap on (deadline, id): equal deadlines go in send order
        bool operator()(const Entry& a, const Entry& b) const {
            return a.deadline_ns != b.deadline_ns ? a.deadline_ns > b.deadline_ns : a.id > b.id;
        }
    };
    std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
};

}  // namespace servesim::cluster
