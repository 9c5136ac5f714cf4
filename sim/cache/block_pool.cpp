// BlockPool: ref counts, hashes, allocation, hits and freeing over one shared pool (vLLM BlockPool); see block_pool.h.
#include "sim/cache/block_pool.h"

#include "common/error.h"

namespace servesim::cache {

BlockPool::BlockPool(std::int64_t num_gpu_blocks, bool enable_caching)
    : enable_caching_(enable_caching),
      free_block_queue_(num_gpu_blocks > 0 ? num_gpu_blocks : 0) {
    SERVESIM_CHECK(num_gpu_blocks >= 2, "need at least 2 blocks (block 0 is the null block), got {}",
                   num_gpu_blocks);
    // As vLLM: block 0 is popped at start-up as the permanent null block.
    const core::BlockId null_block = free_block_queue_.popleft();
    SERVESIM_CHECK(null_block == kNullBlock, "first popped block is {}", core::to_int(null_block));
    if (enable_caching) {
        cached_block_hash_to_block_.reserve(num_gpu_blocks);
    }
}

bool BlockPool::get_cached_blocks(core::BlockHash hash, std::span<const int> groups,
                                  std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    std::size_t num_found = 0;
    for (; num_found < groups.size(); ++num_found) {
        const int g = groups[num_found];
        const auto block = get_cached_block(hash, g);
        if (!block.has_value()) {
            break;
        }
        hit_per_group[static_cast<std::size_t>(g)].push_back(*block);
    }
    if (num_found == groups.size()) {
        return true;
    }
    for (std::size_t i = 0; i < num_found; ++i) {
        hit_per_group[static_cast<std::size_t>(groups[i])].pop_back();
    }
    return false;
}

void BlockPool::get_new_blocks(std::int64_t n, std::vector<core::BlockId>& out) {
    SERVESIM_CHECK(n <= num_free_blocks(), "cannot get {} blocks, only {} free", n, num_free_blocks());
    // Dequeue all n first (eviction only touches the index, never the queue, so the order of effects is unchanged),
    // then prefetch: the queue head holds the coldest blocks, so their index slots are cache misses that overlap
    // when issued together rather than one block after another (the pops have read their entries already).
    const std::size_t first = out.size();
    for (std::int64_t i = 0; i < n; ++i) {
        out.push_back(free_block_queue_.popleft());
    }
    const std::span<const core::BlockId> popped(out.data() + first, static_cast<std::size_t>(n));
    for (const core::BlockId id : popped) {
        const Block& block = entry(id);
        if (block.has_hash()) {
            __builtin_prefetch(cached_block_hash_to_block_.probe_address(block.key()));
        }
    }
    for (const core::BlockId id : popped) {
        Block& block = entry(id);
        if (block.has_hash()) {
            cached_block_hash_to_block_.pop(block.key(), id, key_of());
            if (event_sink_ != nullptr) {
                event_sink_->block_removed(core::BlockHash{block.hash}, block.group);
            }
            block.hash = 0;
            block.group = Block::kNotHashed;
            ++num_evictions_;
        }
        SERVESIM_CHECK(block.ref_cnt == 0, "free block {} has ref_cnt {}", core::to_int(id), block.ref_cnt);
        block.ref_cnt = 1;
    }
    // The next pop starts at the new head, whose entry (links included) is the coldest memory in the pool (freed
    // longest ago), and each pop's successor is known only from the links it reads: a chain of misses, one per
    // block. The first entry of the next call's chain is known now; it is requested here, so the next call (often
    // a running request's one block a few steps later) starts from cache. A hint only (the id may be the tail
    // sentinel's, an entry too).
    __builtin_prefetch(&free_block_queue_.entries()[free_block_queue_.head_id()]);
}

void BlockPool::touch(std::span<const core::BlockId> blocks, bool holds_no_null) {
    if (holds_no_null) {
        touch_blocks<false>(blocks);
    } else {
        touch_blocks<true>(blocks);
    }
}

template <bool kSkipNull>
void BlockPool::touch_blocks(std::span<const core::BlockId> blocks) {
    Block* const entries = free_block_queue_.entries();
    BasicFreeBlockQueue<Block>::Unlinker queue(free_block_queue_);
    for (const core::BlockId id : blocks) {
        if (kSkipNull && id == kNullBlock) {
            continue;
        }
        Block& block = entries[core::to_int(id)];
        if (block.ref_cnt == 0) {
            queue.remove(id);  // ref count 0: queued (the invariant)
        }
        ++block.ref_cnt;
    }
    queue.finish();
}

template <bool kSkipNull, typename It>
void BlockPool::free_in_order(It first, It last, bool unhashed_to_front) {
    std::size_t num_to_front = 0;
    Block* const entries = free_block_queue_.entries();
    BasicFreeBlockQueue<Block>::TailAppender tail(free_block_queue_);
    for (It it = first; it != last; ++it) {
        const core::BlockId id = *it;
        if (kSkipNull && id == kNullBlock) {
            continue;
        }
        Block& block = entries[core::to_int(id)];
        // The count's check rides on the decrement's own test: only a count that reaches 0 or below is looked at.
        const std::int32_t ref_cnt = block.ref_cnt - 1;
        block.ref_cnt = ref_cnt;
        if (ref_cnt <= 0) {
            SERVESIM_CHECK(ref_cnt == 0, "freeing block {} with ref_cnt {}", core::to_int(id), ref_cnt + 1);
            if (unhashed_to_front && !block.has_hash()) {
                ++num_to_front;
            } else {
                tail.add(id);  // it was held (ref count > 0): not queued (the invariant)
            }
        }
    }
    tail.finish();
    if (num_to_front == 0) {
        return;
    }
    // Prepended last to first, so the first of them in the freeing order is the head.
    for (It it = last; it != first;) {
        --it;
        const core::BlockId id = *it;
        if (id == kNullBlock) {
            continue;
        }
        const Block& block = entry(id);
        if (block.ref_cnt == 0 && !block.has_hash() && !free_block_queue_.contains(id)) {
            free_block_queue_.prepend(id);
        }
    }
}

void BlockPool::free_blocks(std::span<const core::BlockId> ordered_blocks, bool unhashed_to_front) {
    free_in_order<true>(ordered_blocks.begin(), ordered_blocks.end(), unhashed_to_front);
}

void BlockPool::free_blocks_tail_first(std::span<const core::BlockId> blocks, bool unhashed_to_front,
                                       bool holds_no_null) {
    if (holds_no_null) {
        free_in_order<false>(blocks.rbegin(), blocks.rend(), unhashed_to_front);
    } else {
        free_in_order<true>(blocks.rbegin(), blocks.rend(), unhashed_to_front);
    }
}

void BlockPool::cache_full_blocks(std::span<const core::BlockId> blocks, std::span<const core::BlockHash> block_hashes,
                                  std::int64_t num_cached_blocks, std::int64_t num_full_blocks, int group) {
    if (num_cached_blocks >= num_full_blocks) {
        return;
    }
    SERVESIM_CHECK(num_full_blocks <= static_cast<std::int64_t>(blocks.size()) &&
                       num_full_blocks <= static_cast<std::int64_t>(block_hashes.size()),
                   "caching {} full blocks of a request holding {} blocks with {} hashes", num_full_blocks,
                   blocks.size(), block_hashes.size());
    // The new keys' index slots are random and usually cold: issue their loads together (a hint only).
    for (std::int64_t i = num_cached_blocks; i < num_full_blocks; ++i) {
        __builtin_prefetch(cached_block_hash_to_block_.probe_address(
            BlockHashWithGroupId{block_hashes[static_cast<std::size_t>(i)], group}));
    }
    SERVESIM_CHECK(group >= 0, "caching blocks in group {}", group);
    for (std::int64_t i = num_cached_blocks; i < num_full_blocks; ++i) {
        const core::BlockId id = blocks[static_cast<std::size_t>(i)];
        if (id == kNullBlock) {
            continue;
        }
        Block& block = entry(id);
        SERVESIM_CHECK(!block.has_hash(), "block {} (position {}) is already cached", core::to_int(id), i);
        const core::BlockHash hash = block_hashes[static_cast<std::size_t>(i)];
        block.hash = static_cast<std::uint64_t>(hash);
        block.group = group;
        cached_block_hash_to_block_.insert(BlockHashWithGroupId{hash, group}, id, key_of());
        if (event_sink_ != nullptr) {
            event_sink_->block_stored(core::BlockHash{block.hash}, group);
        }
    }
}

double BlockPool::usage() const {
    const auto usable = static_cast<double>(num_gpu_blocks() - 1);
    return 1.0 - static_cast<double>(num_free_blocks()) / usable;
}

void BlockPool::check_invariants(std::span<const std::int32_t> num_holders) const {
    SERVESIM_CHECK(static_cast<std::int64_t>(num_holders.size()) == num_gpu_blocks(), "holders for {} of {} blocks",
                   num_holders.size(), num_gpu_blocks());
    free_block_queue_.check_invariants();
    const Block& null_block = entry(0);
    SERVESIM_CHECK(!free_block_queue_.contains(kNullBlock) && !null_block.has_hash() && null_block.ref_cnt == 0,
                   "null block is queued, hashed or counted (ref_cnt {})", null_block.ref_cnt);
    std::int64_t num_in_use = 0;
    std::int64_t num_free_cached = 0;
    std::int64_t num_free_plain = 0;
    std::int64_t num_hashed = 0;
    for (std::uint32_t i = 1; i < num_gpu_blocks(); ++i) {
        const Block& block = entry(i);
        const core::BlockId id{i};
        SERVESIM_CHECK(block.ref_cnt == num_holders[i], "block {} has ref_cnt {} but {} holders", i, block.ref_cnt,
                       num_holders[i]);
        SERVESIM_CHECK(block.ref_cnt >= 0, "block {} has negative ref_cnt {}", i, block.ref_cnt);
        const bool queued = free_block_queue_.contains(id);
        SERVESIM_CHECK(queued == (block.ref_cnt == 0), "block {} with ref_cnt {} is {}queued", i, block.ref_cnt,
                       queued ? "" : "not ");
        if (block.has_hash()) {
            ++num_hashed;
            SERVESIM_CHECK(enable_caching_, "block {} hashed with prefix caching off", i);
            SERVESIM_CHECK(cached_block_hash_to_block_.contains(block.key(), id, key_of()), "hashed block {} not indexed", i);
        }
        if (block.ref_cnt > 0) {
            ++num_in_use;
        } else if (block.has_hash()) {
            ++num_free_cached;
        } else {
            ++num_free_plain;
        }
    }
    SERVESIM_CHECK(num_hashed == cached_block_hash_to_block_.num_entries(),
                   "{} hashed blocks but {} prefix index entries", num_hashed, cached_block_hash_to_block_.num_entries());
    SERVESIM_CHECK(num_free_cached + num_free_plain == num_free_blocks(), "{} + {} free blocks but queue holds {}",
                   num_free_cached, num_free_plain, num_free_blocks());
    SERVESIM_CHECK(num_in_use + num_free_cached + num_free_plain == num_gpu_blocks() - 1,
                   "states sum to {} + {} + {} != {} usable blocks", num_in_use, num_free_cached, num_free_plain,
                   num_gpu_blocks() - 1);
}

}  // namespace servesim::cache
