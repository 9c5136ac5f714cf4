// BlockPool: ref counts, hashes, allocation, hits and freeing over one shared pool (vLLM BlockPool); see block_pool.h.
#include "sim/cache/prefix_cache/block_pool.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

namespace {
// Blocks at the queue's head whose keys get_new_blocks requests for the next pops.
constexpr std::uint32_t kPrefetchedHeadBlocks = 8;
}  // namespace

std::int64_t BlockPool::metadata_bytes(std::int64_t num_gpu_blocks, bool enable_caching) {
    const std::int64_t n = std::max<std::int64_t>(num_gpu_blocks, 2);
    return n * static_cast<std::int64_t>(sizeof(Block)) + BlockSegments::allocated_bytes(n) +
           (enable_caching ? PrefixIndex::reserved_bytes(n) : 0);
}

BlockPool::BlockPool(std::int64_t num_gpu_blocks, bool enable_caching)
    : enable_caching_(enable_caching),
      entries_(static_cast<std::size_t>(num_gpu_blocks > 0 ? num_gpu_blocks : 0)),
      segments_(num_gpu_blocks >= 2 ? num_gpu_blocks : 2) {
    SERVESIM_CHECK(num_gpu_blocks >= 2, "need at least 2 blocks (block 0 is the null block), got {}",
                   num_gpu_blocks);
    // As vLLM, block 0 is the permanent null block: BlockSegments never queues it.
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
    // Dequeue all n first (eviction only touches the index, never the queue, so the order of effects is unchanged),
    // then prefetch: the queue head holds the coldest blocks, so their index slots are cache misses that overlap
    // when issued together rather than one block after another.
    const std::size_t first = out.size();
    segments_.pop_into(n, out);
    const std::span<const core::BlockId> popped(out.data() + first, out.size() - first);
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
    }
    // The next pops' blocks are known now (the head segment's last ids): their keys, the coldest memory in the pool
    // (freed longest ago), are requested here so the next calls (a running request's one block a few steps later,
    // a prefill's few) start from cache. A hint only.
    for (const core::BlockId id : segments_.head_blocks(kPrefetchedHeadBlocks)) {
        __builtin_prefetch(&entry(id));
    }
}

void BlockPool::touch(std::span<const core::BlockId> blocks) { segments_.touch(blocks); }

template <typename It>
void BlockPool::free_one_by_one(It first, It last, bool unhashed_to_front) {
    bool any_to_front = false;
    for (It it = first; it != last; ++it) {
        const core::BlockId id = *it;
        if (id == kNullBlock) {
            continue;
        }
        const bool to_front = unhashed_to_front && !entry(id).has_hash();
        if (segments_.drop_ref(id, /*append=*/!to_front) && to_front) {
            any_to_front = true;  // reached 0 without a hash: prepended below
        }
    }
    if (!any_to_front) {
        return;
    }
    // Prepended last to first, so the first of them in the freeing order is the head.
    for (It it = last; it != first;) {
        --it;
        const core::BlockId id = *it;
        if (id == kNullBlock) {
            continue;
        }
        if (segments_.ref_cnt(id) == 0 && !entry(id).has_hash() && !segments_.is_queued(id)) {
            segments_.prepend(id);
        }
    }
}

void BlockPool::free_blocks(std::span<const core::BlockId> ordered_blocks, bool unhashed_to_front) {
    free_one_by_one(ordered_blocks.begin(), ordered_blocks.end(), unhashed_to_front);
}

void BlockPool::free_blocks_tail_first(std::span<const core::BlockId> blocks, bool unhashed_to_front) {
    if (unhashed_to_front) {
        free_one_by_one(blocks.rbegin(), blocks.rend(), true);
    } else {
        segments_.free_tail_first(blocks);
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
    segments_.check_invariants(num_holders);
    SERVESIM_CHECK(!segments_.is_queued(kNullBlock) && !entry(0).has_hash(), "null block is queued or hashed");
    std::int64_t num_in_use = 0;
    std::int64_t num_free_cached = 0;
    std::int64_t num_free_plain = 0;
    std::int64_t num_hashed = 0;
    for (std::uint32_t i = 1; i < num_gpu_blocks(); ++i) {
        const Block& block = entry(i);
        const core::BlockId id{i};
        const bool queued = segments_.is_queued(id);
        SERVESIM_CHECK(queued == (ref_cnt(id) == 0), "block {} with ref_cnt {} is {}queued", i, ref_cnt(id),
                       queued ? "" : "not ");
        if (block.has_hash()) {
            ++num_hashed;
            SERVESIM_CHECK(enable_caching_, "block {} hashed with prefix caching off", i);
            SERVESIM_CHECK(cached_block_hash_to_block_.contains(block.key(), id, key_of()), "hashed block {} not indexed", i);
        }
        if (!queued) {
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
