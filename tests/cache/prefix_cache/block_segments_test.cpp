// Tests of sim/cache/prefix_cache/block_segments.*: vLLM's per-block reference counts and free-queue order
// (KVCacheBlock.ref_cnt, FreeKVCacheBlockQueue), kept per segment of blocks. The counts and the order must be the
// per-block ones after any sequence of operations: the hand-worked cases pin the segment moves, and a random test
// drives the segments and a per-block model (vLLM's rules on the linked-list queue) side by side.
#include "sim/cache/prefix_cache/block_segments.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "sim/cache/prefix_cache/free_block_queue.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::block_ids;
using testing::block_numbers;

std::vector<std::uint32_t> order(const BlockSegments& s) { return block_numbers(s.get_all_free_blocks()); }

TEST_CASE("BlockSegments starts with blocks 1.. queued in id order; block 0 is the null block", "[cache]") {
    BlockSegments s(6);
    CHECK(order(s) == std::vector<std::uint32_t>{1, 2, 3, 4, 5});
    CHECK(s.num_free_blocks() == 5);
    CHECK_FALSE(s.is_queued(core::BlockId{0}));
    CHECK(s.ref_cnt(core::BlockId{0}) == 0);
    CHECK(block_numbers(s.head_blocks(2)) ==
          std::vector<std::uint32_t>{2, 1});  // the next two pops (1, then 2), in list order
    s.check_invariants(std::vector<std::int32_t>(6, 0));
}

TEST_CASE("BlockSegments: a request's blocks, freed tail first and hit again from the first", "[cache]") {
    // 10 blocks. A request takes 4 blocks (1 2 3 4), then 2 more in a decode step (5 6): one segment 1..6, count 1.
    // Freed tail first: queue 7 8 9 6 5 4 3 2 1. The next turn hits 1 2 3 4 (not 5 6: the hit ends inside the
    // segment, which splits): queue 7 8 9 6 5, blocks 1..4 count 1. Popping 3 blocks takes 7 8 9; then 6.
    BlockSegments s(10);
    std::vector<core::BlockId> req;
    s.pop_into(4, req);
    s.pop_into(2, req);
    CHECK(block_numbers(req) == std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6});
    CHECK(order(s) == std::vector<std::uint32_t>{7, 8, 9});
    s.free_tail_first(req);
    CHECK(order(s) == std::vector<std::uint32_t>{7, 8, 9, 6, 5, 4, 3, 2, 1});
    const auto hit = block_ids({1, 2, 3, 4});
    CHECK(s.num_queued_among(hit) == 4);
    s.touch(hit);
    CHECK(order(s) == std::vector<std::uint32_t>{7, 8, 9, 6, 5});
    CHECK(s.num_free_blocks() == 5);
    CHECK(s.ref_cnt(core::BlockId{3}) == 1);
    CHECK(s.ref_cnt(core::BlockId{5}) == 0);
    std::vector<std::int32_t> holders(10, 0);
    for (const std::uint32_t b : {1u, 2u, 3u, 4u}) {
        holders[b] = 1;
    }
    s.check_invariants(holders);
    std::vector<core::BlockId> next = hit;
    s.pop_into(3, next);  // the holder's last block (4) ends its segment and nobody else holds it: 7 8 9 join it
    CHECK(block_numbers(next) == std::vector<std::uint32_t>{1, 2, 3, 4, 7, 8, 9});
    CHECK(order(s) == std::vector<std::uint32_t>{6, 5});
    // The head segment is what the split left queued, 5 6 (list order): the next pop returns 6, then 5.
    CHECK(block_numbers(s.head_blocks(8)) ==
          std::vector<std::uint32_t>{5, 6});
    // A second holder of the first two blocks, then the first holder frees: 1 2 stay held, the rest go tail first.
    s.touch(block_ids({1, 2}));
    s.free_tail_first(next);
    CHECK(order(s) == std::vector<std::uint32_t>{6, 5, 9, 8, 7, 4, 3});
    CHECK(s.ref_cnt(core::BlockId{1}) == 1);
    holders.assign(10, 0);
    holders[1] = holders[2] = 1;
    s.check_invariants(holders);
    s.free_tail_first(block_ids({1, 2}));
    CHECK(order(s) == std::vector<std::uint32_t>{6, 5, 9, 8, 7, 4, 3, 2, 1});
    s.check_invariants(std::vector<std::int32_t>(10, 0));
}

TEST_CASE("BlockSegments: per-block frees in list order, at the tail or left for the head", "[cache]") {
    // 6 blocks; a request holds 1..5 (one segment). A sliding window frees 1 then 2 in list order (queue 1 2), then
    // block 4 is freed and left out of the queue (an unhashed block under sparse retention) and prepended: 4 1 2.
    BlockSegments s(6);
    std::vector<core::BlockId> req;
    s.pop_into(5, req);
    CHECK(s.drop_ref(core::BlockId{1}, true));
    CHECK(s.drop_ref(core::BlockId{2}, true));
    CHECK(order(s) == std::vector<std::uint32_t>{1, 2});
    CHECK(s.drop_ref(core::BlockId{4}, false));
    CHECK(order(s) == std::vector<std::uint32_t>{1, 2});
    s.prepend(core::BlockId{4});
    CHECK(order(s) == std::vector<std::uint32_t>{4, 1, 2});
    std::vector<std::int32_t> holders(6, 0);
    holders[3] = holders[5] = 1;
    s.check_invariants(holders);
    // A block with a second holder does not reach 0.
    s.touch(block_ids({3}));
    CHECK_FALSE(s.drop_ref(core::BlockId{3}, true));
    CHECK(s.ref_cnt(core::BlockId{3}) == 1);
}

TEST_CASE("BlockSegments refuses a block freed once too often", "[cache]") {
    BlockSegments s(4);
    std::vector<core::BlockId> req;
    s.pop_into(2, req);
    s.free_tail_first(req);
    bool threw = false;
    try {
        s.free_tail_first(req);
    } catch (const InvariantError& e) {
        threw = std::string(e.what()).find("with ref_cnt 0") != std::string::npos;
    }
    CHECK(threw);
    CHECK_THROWS_AS(s.pop_into(4, req), InvariantError);  // only 3 free
}

// The per-block model: vLLM's rules block by block on the linked-list queue.
struct PerBlockModel {
    explicit PerBlockModel(std::uint32_t n) : queue(n), ref(n, 0) { (void)queue.popleft(); }  // block 0: null
    FreeBlockQueue queue;
    std::vector<std::int32_t> ref;
    void touch(const std::vector<core::BlockId>& blocks) {
        for (const auto b : blocks) {
            if (core::to_int(b) != 0 && ref[core::to_int(b)]++ == 0) {
                queue.remove(b);
            }
        }
    }
    void pop_into(std::int64_t n, std::vector<core::BlockId>& out) {
        for (std::int64_t k = 0; k < n; ++k) {
            const core::BlockId b = queue.popleft();
            ref[core::to_int(b)] = 1;
            out.push_back(b);
        }
    }
    void free_tail_first(const std::vector<core::BlockId>& blocks) {
        for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
            if (core::to_int(*it) != 0 && --ref[core::to_int(*it)] == 0) {
                queue.append(*it);
            }
        }
    }
};

// Shaped like serving: requests hit prefixes of freed requests' lists (whole or ending inside a segment), sometimes
// with a null block in front (a sliding window) or in another order; they take new blocks in prefill and decode
// steps; they free tail first, or one block at a time in list order with some blocks prepended (sparse retention).
TEST_CASE("BlockSegments keeps the per-block counts and queue order over random serving operations", "[cache]") {
    constexpr std::uint32_t kBlocks = 400;
    std::mt19937_64 rng(20261204);
    BlockSegments seg(kBlocks);
    PerBlockModel model(kBlocks);
    std::vector<std::vector<core::BlockId>> running;
    std::vector<std::vector<core::BlockId>> finished;  // recent lists, for hits
    const auto check_same = [&] {
        REQUIRE(seg.num_free_blocks() == model.queue.num_free_blocks());
        REQUIRE(order(seg) == block_numbers(model.queue.get_all_free_blocks()));
        for (std::uint32_t b = 0; b < kBlocks; ++b) {
            REQUIRE(seg.ref_cnt(core::BlockId{b}) == model.ref[b]);
        }
        seg.check_invariants(model.ref);
    };
    for (int step = 0; step < 30000; ++step) {
        const auto op = rng() % 12;
        if (op < 4 && running.size() < 30) {
            // Admission: a hit (a prefix of a finished list, or random free blocks), then new blocks.
            std::vector<core::BlockId> list;
            if (!finished.empty() && rng() % 5 != 0) {
                const auto& f = finished[rng() % finished.size()];
                list.assign(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(rng() % (f.size() + 1)));
                if (rng() % 8 == 0 && list.size() > 1) {
                    std::swap(list[0], list[1 + rng() % (list.size() - 1)]);
                }
            } else {
                for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
                    const core::BlockId b{static_cast<std::uint32_t>(1 + rng() % (kBlocks - 1))};
                    if (std::find(list.begin(), list.end(), b) == list.end()) {
                        list.push_back(b);
                    }
                }
            }
            // A list never holds a block twice; a hit only takes blocks whose content is still there (no block of
            // a running list is handed out again, so any block can be hit).
            if (rng() % 10 == 0) {
                list.insert(list.begin(), core::BlockId{0});
            }
            REQUIRE(seg.num_queued_among(list) ==
                    static_cast<std::int64_t>(std::count_if(list.begin(), list.end(), [&](core::BlockId b) {
                        return core::to_int(b) != 0 && model.ref[core::to_int(b)] == 0;
                    })));
            seg.touch(list);
            model.touch(list);
            const auto fresh = std::min<std::int64_t>(static_cast<std::int64_t>(rng() % 10), model.queue.num_free_blocks());
            seg.pop_into(fresh, list);
            std::vector<core::BlockId> copy(list.begin(), list.end() - fresh);
            model.pop_into(fresh, copy);
            REQUIRE(copy == list);
            running.push_back(list);
        } else if (op < 7 && !running.empty()) {
            // A decode step's new block for a running request.
            auto& list = running[rng() % running.size()];
            if (model.queue.num_free_blocks() > 0) {
                std::vector<core::BlockId> copy = list;
                seg.pop_into(1, list);
                model.pop_into(1, copy);
                REQUIRE(copy == list);
            }
        } else if (op < 11 && !running.empty()) {
            // A finish: tail first, the usual way.
            const std::size_t k = rng() % running.size();
            const std::vector<core::BlockId> list = running[k];
            running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
            seg.free_tail_first(list);
            model.free_tail_first(list);
            finished.push_back(list);
            if (finished.size() > 10) {
                finished.erase(finished.begin());
            }
        } else if (!running.empty()) {
            // A finish one block at a time in list order; some blocks reaching 0 go to the head afterwards.
            const std::size_t k = rng() % running.size();
            const std::vector<core::BlockId> list = running[k];
            running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
            std::vector<core::BlockId> to_front;
            for (const auto b : list) {
                if (core::to_int(b) == 0) {
                    continue;
                }
                const bool front = rng() % 3 == 0;
                const bool zero = seg.drop_ref(b, !front);
                REQUIRE(zero == (--model.ref[core::to_int(b)] == 0));
                if (zero && !front) {
                    model.queue.append(b);
                } else if (zero) {
                    to_front.push_back(b);
                }
            }
            for (auto it = to_front.rbegin(); it != to_front.rend(); ++it) {
                seg.prepend(*it);
                model.queue.prepend(*it);
            }
            finished.push_back(list);
        }
        if (step % 101 == 0) {
            check_same();
        }
    }
    check_same();
}

}  // namespace
}  // namespace servesim::cache
