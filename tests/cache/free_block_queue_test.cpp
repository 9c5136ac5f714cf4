// Tests of sim/cache/free_block_queue.*: LRU order, O(1) removal from the middle (vLLM FreeKVCacheBlockQueue).
#include "sim/cache/free_block_queue.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

std::vector<std::uint32_t> order(const FreeBlockQueue& q) {
    std::vector<std::uint32_t> out;
    for (const auto b : q.get_all_free_blocks()) {
        out.push_back(core::to_int(b));
    }
    return out;
}

TEST_CASE("FreeBlockQueue starts in block-id order and pops from the head", "[cache]") {
    FreeBlockQueue q(5);
    q.check_invariants();
    CHECK(order(q) == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
    CHECK(core::to_int(q.popleft()) == 0);
    CHECK(core::to_int(q.popleft()) == 1);
    CHECK(q.num_free_blocks() == 3);
    q.check_invariants();
}

TEST_CASE("FreeBlockQueue removes from the middle and appends to the tail", "[cache]") {
    FreeBlockQueue q(6);
    q.remove(core::BlockId{3});  // a cache hit on a free block
    q.check_invariants();
    CHECK(order(q) == std::vector<std::uint32_t>{0, 1, 2, 4, 5});
    CHECK_FALSE(q.contains(core::BlockId{3}));
    q.append(core::BlockId{3});  // freed again: most recently used
    q.remove(core::BlockId{0});
    q.append(core::BlockId{0});
    q.check_invariants();
    CHECK(order(q) == std::vector<std::uint32_t>{1, 2, 4, 5, 3, 0});
    CHECK(q.num_free_blocks() == 6);
}

TEST_CASE("FreeBlockQueue's TailAppender builds the list append_unqueued would, block by block", "[cache]") {
    // Two queues of 8 blocks; 2, 5, 6 and 7 are taken out (held). Then 6, 2, 7 are freed (a request's list, tail
    // first), through the appender in one and one append_unqueued each in the other; a pop and a further free follow.
    // By hand: after the removals 0 1 3 4; after the frees 0 1 3 4 6 2 7; popleft gives 0; append 5: 1 3 4 6 2 7 5.
    FreeBlockQueue a(8);
    FreeBlockQueue b(8);
    for (const std::uint32_t i : {2u, 5u, 6u, 7u}) {
        a.remove(core::BlockId{i});
        b.remove(core::BlockId{i});
    }
    {
        FreeBlockQueue::TailAppender tail(a);
        for (const std::uint32_t i : {6u, 2u, 7u}) {
            tail.add(core::BlockId{i});
        }
        tail.finish();
    }
    for (const std::uint32_t i : {6u, 2u, 7u}) {
        b.append_unqueued(core::BlockId{i});
    }
    a.check_invariants();
    CHECK(order(a) == std::vector<std::uint32_t>{0, 1, 3, 4, 6, 2, 7});
    CHECK(order(a) == order(b));
    CHECK(a.num_free_blocks() == 7);
    CHECK(core::to_int(a.popleft()) == 0);
    a.append(core::BlockId{5});
    a.check_invariants();
    CHECK(order(a) == std::vector<std::uint32_t>{1, 3, 4, 6, 2, 7, 5});
    // An appender that adds nothing leaves the queue as it was; one on an empty queue links from the head sentinel.
    {
        FreeBlockQueue::TailAppender tail(a);
        tail.finish();
    }
    a.check_invariants();
    CHECK(order(a) == std::vector<std::uint32_t>{1, 3, 4, 6, 2, 7, 5});
    FreeBlockQueue c(3);
    for (int k = 0; k < 3; ++k) {
        (void)c.popleft();
    }
    {
        FreeBlockQueue::TailAppender tail(c);
        tail.add(core::BlockId{2});
        tail.add(core::BlockId{0});
        tail.finish();
    }
    c.check_invariants();
    CHECK(order(c) == std::vector<std::uint32_t>{2, 0});
}

TEST_CASE("FreeBlockQueue refuses a double append or removing an absent block", "[cache]") {
    FreeBlockQueue q(3);
    bool threw = false;
    try {
        q.append(core::BlockId{1});
    } catch (const InvariantError& e) {
        threw = std::string(e.what()).find("already in the free queue") != std::string::npos;
    }
    CHECK(threw);
    (void)q.popleft();
    threw = false;
    try {
        q.remove(core::BlockId{0});
    } catch (const InvariantError& e) {
        threw = std::string(e.what()).find("not in the free queue") != std::string::npos;
    }
    CHECK(threw);
}

// The block pool's entries carry its own fields beside the links (vLLM KVCacheBlock holds ref_cnt and the hash beside
// prev/next_free_block): the queue must order the entries by their links alone and never write the other fields.
TEST_CASE("BasicFreeBlockQueue keeps its owner's fields in each entry untouched", "[cache]") {
    struct Entry {
        std::uint64_t payload = 0;
        FreeQueueLinks links;
    };
    BasicFreeBlockQueue<Entry> q(5);
    for (std::uint32_t i = 0; i < 5; ++i) {
        q.entry(i).payload = 100 + i;
    }
    // By hand: 0 1 2 3 4; pop 0; remove 3; append 0; prepend 3: 3 1 2 4 0.
    CHECK(core::to_int(q.popleft()) == 0);
    q.remove(core::BlockId{3});
    q.append(core::BlockId{0});
    q.prepend(core::BlockId{3});
    q.check_invariants();
    std::vector<std::uint32_t> got;
    for (const auto b : q.get_all_free_blocks()) {
        got.push_back(core::to_int(b));
    }
    CHECK(got == std::vector<std::uint32_t>{3, 1, 2, 4, 0});
    for (std::uint32_t i = 0; i < 5; ++i) {
        CHECK(q.entry(i).payload == 100 + i);
    }
    CHECK(q.head_id() == 3);
    CHECK(q.num_blocks() == 5);
    CHECK(q.num_free_blocks() == 5);
}

}  // namespace
}  // namespace servesim::cache
