// Tests of sim/cache/prefix_cache/free_block_queue.*: LRU order, O(1) removal from the middle (vLLM
// FreeKVCacheBlockQueue).
#include "sim/cache/prefix_cache/free_block_queue.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

std::vector<std::uint32_t> order(const FreeBlockQueue& q) { return testing::block_numbers(q.get_all_free_blocks()); }

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
    CHECK(testing::block_numbers(q.get_all_free_blocks()) == std::vector<std::uint32_t>{3, 1, 2, 4, 0});
    for (std::uint32_t i = 0; i < 5; ++i) {
        CHECK(q.entry(i).payload == 100 + i);
    }
    CHECK(q.head_id() == 3);
    CHECK(q.num_blocks() == 5);
    CHECK(q.num_free_blocks() == 5);
}

}  // namespace
}  // namespace servesim::cache
