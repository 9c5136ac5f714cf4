// FreeBlockQueue: intrusive LRU list of free blocks (vLLM FreeKVCacheBlockQueue); see free_block_queue.h.
#include "sim/cache/free_block_queue.h"

#include "common/error.h"

namespace servesim::cache {

FreeBlockQueue::FreeBlockQueue(std::int64_t num_blocks)
    : num_blocks_(num_blocks), links_(static_cast<std::size_t>(num_blocks + 2)) {
    SERVESIM_CHECK(num_blocks >= 0 && num_blocks < kNotQueued - 2, "bad number of blocks {}", num_blocks);
    links_[head()].next = tail();
    links_[tail()].prev = head();
    for (std::int64_t i = 0; i < num_blocks; ++i) {
        append(core::BlockId{static_cast<std::uint32_t>(i)});
    }
}

void FreeBlockQueue::prepend(core::BlockId id) {
    const auto i = core::to_int(id);
    SERVESIM_CHECK(i < num_blocks_, "block {} outside a pool of {}", i, num_blocks_);
    SERVESIM_CHECK(!contains(id), "block {} is already in the free queue", i);
    const std::uint32_t first = links_[head()].next;
    links_[i] = Links{head(), first};
    links_[first].prev = i;
    links_[head()].next = i;
    ++num_free_blocks_;
}

std::vector<core::BlockId> FreeBlockQueue::get_all_free_blocks() const {
    std::vector<core::BlockId> out;
    out.reserve(static_cast<std::size_t>(num_free_blocks_));
    for (std::uint32_t i = links_[head()].next; i != tail(); i = links_[i].next) {
        out.push_back(core::BlockId{i});
    }
    return out;
}

void FreeBlockQueue::check_invariants() const {
    std::int64_t forward = 0;
    std::uint32_t prev = head();
    for (std::uint32_t i = links_[head()].next; i != tail(); i = links_[i].next) {
        SERVESIM_CHECK(i < num_blocks_, "free queue links to {} outside the pool", i);
        SERVESIM_CHECK(links_[i].prev == prev, "block {} has prev {} but follows {}", i, links_[i].prev, prev);
        prev = i;
        ++forward;
        SERVESIM_CHECK(forward <= num_blocks_, "free queue has a cycle");
    }
    SERVESIM_CHECK(links_[tail()].prev == prev, "tail sentinel points to {} not {}", links_[tail()].prev, prev);
    SERVESIM_CHECK(forward == num_free_blocks_, "free queue holds {} blocks but counts {}", forward,
                   num_free_blocks_);
    std::int64_t marked = 0;
    for (std::int64_t i = 0; i < num_blocks_; ++i) {
        marked += links_[i].prev != kNotQueued ? 1 : 0;
    }
    SERVESIM_CHECK(marked == forward, "{} blocks marked queued but {} reachable", marked, forward);
}

}  // namespace servesim::cache
