// Tests of sim/core/event_queue.h: events run in (time, priority, sequence) order and the clock never goes back
// (docs/ARCHITECTURE.md, "Invariants"; ns-3 EventKey, SST priorities).
#include "sim/core/event_queue.h"

#include <vector>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::core {
namespace {

SimTime at_ms(std::int64_t ms) { return SimTime::from_ns(ms * 1'000'000); }

TEST_CASE("EventQueue pops by time, then priority, then insertion order", "[core]") {
    EventQueue q;
    // Pushed out of order; `target` records the push index so the pop order can be read back.
    q.push(at_ms(5), EventPriority::kStepEnd, EventKind::kStepEnd, 0);  // (5, step end, seq 0)
    q.push(at_ms(5), EventPriority::kArrival, EventKind::kArrival, 1);  // (5, arrival, seq 1)
    q.push(at_ms(1), EventPriority::kObserve, EventKind::kSample, 2);   // (1, observe, seq 2)
    q.push(at_ms(5), EventPriority::kArrival, EventKind::kArrival, 3);  // (5, arrival, seq 3)
    q.push(at_ms(5), EventPriority::kStepEnd, EventKind::kStepEnd, 4);  // (5, step end, seq 4)
    q.push(at_ms(3), EventPriority::kStepEnd, EventKind::kStepEnd, 5);  // (3, step end, seq 5)
    // Expected: t=1 (2); t=3 (5); t=5 arrivals by seq (1, 3), then step ends by seq (0, 4).
    std::vector<std::uint32_t> order;
    std::vector<std::int64_t> clock;
    while (!q.empty()) {
        const Event e = q.pop();
        order.push_back(e.target);
        clock.push_back(q.now().ns());
    }
    CHECK(order == std::vector<std::uint32_t>{2, 5, 1, 3, 0, 4});
    CHECK(clock == std::vector<std::int64_t>{1'000'000, 3'000'000, 5'000'000, 5'000'000, 5'000'000, 5'000'000});
}

TEST_CASE("EventQueue: the clock never goes back; an event in the past is an InvariantError", "[core]") {
    EventQueue q;
    q.push(at_ms(10), EventPriority::kArrival, EventKind::kArrival);
    (void)q.pop();
    REQUIRE(q.now() == at_ms(10));
    CHECK_THROWS_AS(q.push(at_ms(9), EventPriority::kArrival, EventKind::kArrival), InvariantError);
    // Now is allowed (a same-time follow-up), and it runs after anything earlier-sequenced at that time.
    q.push(at_ms(10), EventPriority::kStepEnd, EventKind::kStepEnd, 7);
    CHECK(q.pop().target == 7);
    CHECK(q.now() == at_ms(10));
}

}  // namespace
}  // namespace servesim::core
