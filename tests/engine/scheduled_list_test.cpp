// ScheduledList (sim/engine/scheduler.h): a step's entries, with slots reserved ahead that the running-request pass
// writes through a pointer before taking them into the list.
#include "sim/engine/scheduler.h"
#include "tests/catch.h"

namespace servesim::engine {
namespace {

TEST_CASE("ScheduledList: push_back, reserved slots taken in, erase keeps order, copies are deep",
          "[engine][scheduler]") {
    Request* const none = nullptr;
    ScheduledList list;
    CHECK(list.empty());
    list.push_back({none, 5, 0, false});
    list.push_back({none, 7, 10, true});
    REQUIRE(list.size() == 2);
    CHECK(list[1].num_new_tokens == 7);
    // Room for 2 + 3 entries; the slots past size() are written and then taken in.
    list.reserve(list.size() + 3);
    REQUIRE(list.capacity() >= 5);
    ScheduledRequest* out = list.end();
    *out++ = ScheduledRequest{none, 1, 100, true};
    *out++ = ScheduledRequest{none, 2, 200, false};
    CHECK(list.size() == 2);  // not yet part of the list
    list.set_size_within_capacity(static_cast<std::size_t>(out - list.begin()));
    REQUIRE(list.size() == 4);
    // n = 5, 7, 1, 2 in order; erasing the second leaves 5, 1, 2.
    list.erase(list.begin() + 1);
    REQUIRE(list.size() == 3);
    CHECK(list[0].num_new_tokens == 5);
    CHECK(list[1].num_new_tokens == 1);
    CHECK(list[1].num_computed_before == 100);
    CHECK(list.back().num_new_tokens == 2);
    // reserve keeps the entries when it moves them; a copy owns its own slots.
    list.reserve(64);
    CHECK(list.size() == 3);
    CHECK(list[2].num_computed_before == 200);
    ScheduledList copy = list;
    copy[0].num_new_tokens = 99;
    CHECK(list[0].num_new_tokens == 5);
    std::int64_t total = 0;
    for (const ScheduledRequest& s : copy) {
        total += s.num_new_tokens;
    }
    CHECK(total == 99 + 1 + 2);
    ScheduledList moved = std::move(copy);
    CHECK(moved.size() == 3);
    CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    list.clear();
    CHECK(list.empty());
    CHECK(list.capacity() >= 64);  // the slots are kept for the next step
}

}  // namespace
}  // namespace servesim::engine
