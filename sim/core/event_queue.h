// EventQueue: the simulator's one queue of future events, ordered by (time, priority, sequence number) so events
// at equal times run in a fixed, documented order (ns-3 EventKey + SST priorities; docs/ARCHITECTURE.md, "Invariants").
// A binary heap over a std::vector of small plain structs; the queue is owned by one Simulation object (no singleton)
// and asserts that the clock never goes backwards.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "common/error.h"
#include "sim/core/time.h"

namespace servesim::core {

// Order of events that share a timestamp. Lower runs first.
enum class EventPriority : std::uint8_t {
    kArrival = 0,   // a request sent at t joins the waiting queue before a step scheduled at t looks at it
    kStepEnd = 1,   // a step's outputs are emitted, then the next step is scheduled
    // A client gives up on a request (workloads `request_timeout`): after a step ending at the same instant, so a
    // request whose last token arrives exactly at its deadline counts as finished.
    kTimeout = 2,
    kObserve = 3,   // samplers read state after every change at that time
};

// kWake: an idle replica looks for work again (a host-tier KV load finished).
// kTransfer: a transfer in the cluster's network ends and the others' shares change (cluster::TransferTracker).
// kEngineArrival: a request that passed the request path (sim/frontend/api_server.h) reaches replica `target`'s
// engine core.
// kTimeout: a client's request time-out (cluster::RequestTimeouts); never pushed: the simulation merges its
// deadlines with the queue (EventQueue::advance_to), so a request that finishes first leaves no event behind.
enum class EventKind : std::uint8_t { kArrival, kStepEnd, kWake, kSample, kTransfer, kEngineArrival, kTimeout };

struct Event {
    SimTime time;
    EventPriority priority = EventPriority::kArrival;
    std::uint64_t seq = 0;  // insertion counter: ties broken by scheduling order
    EventKind kind = EventKind::kArrival;
    std::uint32_t target = 0;  // replica index for kStepEnd
};

class EventQueue {
public:
    void push(SimTime time, EventPriority priority, EventKind kind, std::uint32_t target = 0) {
        SERVESIM_CHECK(time >= now_, "event scheduled in the past: {} ns < now {} ns", time.ns(), now_.ns());
        heap_.push(Event{time, priority, next_seq_++, kind, target});
    }

    [[nodiscard]] bool empty() const { return heap_.empty(); }

    [[nodiscard]] std::size_t size() const { return heap_.size(); }

    [[nodiscard]] const Event& peek() const { return heap_.top(); }

    // Removes the next event and advances the clock to its time.
    Event pop() {
        Event e = heap_.top();
        heap_.pop();
        SERVESIM_CHECK(e.time >= now_, "clock would go back: {} ns < {} ns", e.time.ns(), now_.ns());
        now_ = e.time;
        return e;
    }

    [[nodiscard]] SimTime now() const { return now_; }

    // Moves the clock to `time` for an event kept outside the queue (a request time-out), which must come no later
    // than the queue's next event.
    void advance_to(SimTime time) {
        SERVESIM_CHECK(time >= now_, "clock would go back: {} ns < {} ns", time.ns(), now_.ns());
        SERVESIM_CHECK(heap_.empty() || time <= heap_.top().time, "advance_to {} ns past the next event at {} ns",
                       time.ns(), heap_.top().time.ns());
        now_ = time;
    }

private:
    struct Later {
        bool operator()(const Event& a, const Event& b) const {
            if (a.time != b.time) {
                return a.time > b.time;
            }
            if (a.priority != b.priority) {
                return a.priority > b.priority;
            }
            return a.seq > b.seq;
        }
    };

    std::priority_queue<Event, std::vector<Event>, Later> heap_;
    SimTime now_;
    std::uint64_t next_seq_ = 0;
};

}  // namespace servesim::core
