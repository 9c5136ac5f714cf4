// Order-only prefix caching (capacity studies without time); see order_only_cache.h for the vLLM rules it follows.
#include "sim/cache/prefix_cache/order_only_cache.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "common/error.h"
#include "sim/cache/prefix_cache/block_hash.h"

namespace servesim::cache {

template <typename T>
HugePageArray<T>::HugePageArray(std::size_t size, const T& value) : size_(size) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 16);
    constexpr std::size_t kHugePageBytes = 2u << 20;
    const std::size_t bytes = std::max<std::size_t>(
        kHugePageBytes, (size * sizeof(T) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
    void* p = std::aligned_alloc(kHugePageBytes, bytes);
    SERVESIM_CHECK(p != nullptr, "cannot allocate {} bytes for the order-only pool", bytes);
#ifdef __linux__
    (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP this is an ordinary allocation
#endif
    data_ = static_cast<T*>(p);
    std::uninitialized_fill_n(data_, size, value);
}

namespace {

constexpr std::uint32_t kEmptySlot = 0xffffffffu;
constexpr std::uint64_t kInitialTableSlots = 1u << 16;

}  // namespace

std::span<const DenseBlockId> OrderOnlyTrace::block_ids(std::int64_t request) const {
    const auto r = static_cast<std::size_t>(request);
    return std::span<const DenseBlockId>(block_ids_.data() + first_block_[r], first_block_[r + 1] - first_block_[r]);
}

OrderOnlyTraceBuilder::OrderOnlyTraceBuilder(int block_size_tokens)
    : table_(kInitialTableSlots), table_mask_(kInitialTableSlots - 1) {
    SERVESIM_CHECK(block_size_tokens > 0, "block size must be positive, got {}", block_size_tokens);
    trace_.block_size_tokens_ = block_size_tokens;
    trace_.first_block_.push_back(0);
}

DenseBlockId OrderOnlyTraceBuilder::dense_id(core::BlockHash hash) {
    const std::uint64_t key = core::to_int(hash);
    std::uint64_t slot = key & table_mask_;
    while (table_[slot].dense_id != kEmptySlot) {
        if (table_[slot].hash == key) {
            return DenseBlockId{table_[slot].dense_id};
        }
        slot = (slot + 1) & table_mask_;
    }
    SERVESIM_CHECK(trace_.num_distinct_blocks_ < kEmptySlot - 1, "more than 2^32 − 2 distinct blocks");
    const auto id = static_cast<std::uint32_t>(trace_.num_distinct_blocks_++);
    table_[slot] = Slot{key, id};
    // Load factor at most 0.7: probe sequences stay short.
    if (static_cast<std::uint64_t>(trace_.num_distinct_blocks_) * 10 > (table_mask_ + 1) * 7) {
        grow_table();
    }
    return DenseBlockId{id};
}

void OrderOnlyTraceBuilder::grow_table() {
    std::vector<Slot> table(2 * table_.size());
    const std::uint64_t mask = table.size() - 1;
    for (const Slot& s : table_) {
        if (s.dense_id == kEmptySlot) {
            continue;
        }
        std::uint64_t slot = s.hash & mask;
        while (table[slot].dense_id != kEmptySlot) {
            slot = (slot + 1) & mask;
        }
        table[slot] = s;
    }
    table_ = std::move(table);
    table_mask_ = mask;
}

void OrderOnlyTraceBuilder::add_request(const core::TokenContent& prompt) {
    const std::int64_t num_prompt_tokens = core::total_tokens(prompt);
    const std::int64_t block_size = trace_.block_size_tokens_;
    hashes_.clear();
    BlockHasher hasher(trace_.block_size_tokens_);
    hasher.extend(hashes_, prompt, num_prompt_tokens);

    const auto num_ids_before = static_cast<std::uint32_t>(trace_.num_distinct_blocks_);
    const std::size_t first = trace_.block_ids_.size();
    // The table is far larger than the caches: fetch the slot of a block a few blocks ahead while probing this one.
    constexpr std::size_t kPrefetchAhead = 8;
    for (std::size_t i = 0; i < hashes_.size(); ++i) {
        if (i + kPrefetchAhead < hashes_.size()) {
            __builtin_prefetch(&table_[core::to_int(hashes_[i + kPrefetchAhead]) & table_mask_]);
        }
        trace_.block_ids_.push_back(dense_id(hashes_[i]));
    }
    // With nothing ever evicted, a block is cached iff an earlier request had it, i.e. its id predates this request;
    // the hit is the leading run of such ids within the lookup bound, and every other full block is allocated.
    const std::int64_t max_hit_blocks = num_prompt_tokens > 0 ? (num_prompt_tokens - 1) / block_size : 0;
    std::int64_t num_hit_blocks = 0;
    while (num_hit_blocks < max_hit_blocks &&
           core::to_int(trace_.block_ids_[first + static_cast<std::size_t>(num_hit_blocks)]) < num_ids_before) {
        ++num_hit_blocks;
    }
    trace_.num_blocks_unlimited_ += static_cast<std::int64_t>(hashes_.size()) - num_hit_blocks;
    trace_.num_prompt_tokens_.push_back(num_prompt_tokens);
    trace_.num_prompt_tokens_total_ += num_prompt_tokens;
    trace_.first_block_.push_back(trace_.block_ids_.size());
}

OrderOnlyTrace OrderOnlyTraceBuilder::build() && {
    OrderOnlyTrace out = std::move(trace_);
    out.block_ids_.shrink_to_fit();
    trace_ = OrderOnlyTrace{};
    table_.clear();
    table_.shrink_to_fit();
    return out;
}

OrderOnlyCache::OrderOnlyCache(std::int64_t num_cache_blocks, std::int64_t num_distinct_blocks)
    : num_cache_blocks_(num_cache_blocks),
      blocks_(static_cast<std::size_t>(std::max<std::int64_t>(num_cache_blocks, 0)), Block{}),
      free_queue_(static_cast<std::size_t>(2 * std::max<std::int64_t>(num_cache_blocks, 0) + 64), kNone),
      copies_(static_cast<std::size_t>(std::max<std::int64_t>(num_distinct_blocks, 0)), Copies{}) {
    SERVESIM_CHECK(num_cache_blocks >= 0 && num_cache_blocks < kNone / 2 && num_distinct_blocks >= 0,
                   "bad pool {} / ids {}", num_cache_blocks, num_distinct_blocks);
    for (std::uint32_t b = 0; b < static_cast<std::uint32_t>(num_cache_blocks); ++b) {
        append(b);
    }
}

std::uint32_t OrderOnlyCache::popleft() {
    SERVESIM_CHECK(num_free_blocks_ > 0, "popleft from an empty free queue");
    while (blocks_[free_queue_[free_queue_head_]].queue_pos != free_queue_head_) {
        ++free_queue_head_;  // a stale entry: its block was touched after being queued here
    }
    const std::uint32_t block = free_queue_[free_queue_head_++];
    blocks_[block].queue_pos = kNone;
    --num_free_blocks_;
    return block;
}

void OrderOnlyCache::remove(std::uint32_t block) {
    SERVESIM_CHECK(blocks_[block].queue_pos != kNone, "block {} is not free", block);
    blocks_[block].queue_pos = kNone;  // its entry goes stale
    --num_free_blocks_;
}

void OrderOnlyCache::append(std::uint32_t block) {
    SERVESIM_CHECK(blocks_[block].queue_pos == kNone, "block {} is already free", block);
    if (free_queue_size_ == free_queue_.size()) {
        squeeze_free_queue();
    }
    blocks_[block].queue_pos = static_cast<std::uint32_t>(free_queue_size_);
    free_queue_[free_queue_size_++] = block;
    ++num_free_blocks_;
}

void OrderOnlyCache::squeeze_free_queue() {
    // Keeps the live entries in order; at most num_cache_blocks remain, so this runs after ≥ num_cache_blocks + 64
    // appends: amortised O(1).
    std::size_t out = 0;
    for (std::size_t i = free_queue_head_; i < free_queue_size_; ++i) {
        const std::uint32_t block = free_queue_[i];
        if (blocks_[block].queue_pos == i) {
            blocks_[block].queue_pos = static_cast<std::uint32_t>(out);
            free_queue_[out++] = block;
        }
    }
    free_queue_size_ = out;
    free_queue_head_ = 0;
}

void OrderOnlyCache::index_append(std::uint32_t block, std::uint32_t id) {
    Copies& c = copies_[id];
    if (c.oldest == kNone) {
        c.oldest = block;
        blocks_[block] = Block{id, kNone, kNone, blocks_[block].queue_pos};
        return;
    }
    std::uint32_t youngest = c.oldest;
    while (blocks_[youngest].next_copy != kNone) {
        youngest = blocks_[youngest].next_copy;
    }
    blocks_[youngest].next_copy = block;
    blocks_[block] = Block{id, youngest, kNone, blocks_[block].queue_pos};
}

void OrderOnlyCache::index_remove(std::uint32_t block) {
    Block& b = blocks_[block];
    (b.prev_copy == kNone ? copies_[b.dense_id].oldest : blocks_[b.prev_copy].next_copy) = b.next_copy;
    if (b.next_copy != kNone) {
        blocks_[b.next_copy].prev_copy = b.prev_copy;
    }
    b.dense_id = kNone;
    b.prev_copy = kNone;
    b.next_copy = kNone;
}

bool OrderOnlyCache::is_cached(DenseBlockId id) const {
    const auto i = core::to_int(id);
    return i < copies_.size() && copies_[i].oldest != kNone;
}

OrderOnlyLookup OrderOnlyCache::process_request(std::span<const DenseBlockId> block_ids,
                                                std::int64_t num_prompt_tokens,
                                                int block_size_tokens) {
    const auto num_full_blocks = static_cast<std::int64_t>(block_ids.size());
    SERVESIM_CHECK(num_full_blocks == num_prompt_tokens / block_size_tokens,
                   "{} full blocks for a prompt of {} tokens at block size {}", num_full_blocks, num_prompt_tokens,
                   block_size_tokens);
    OrderOnlyLookup out;
    const std::int64_t num_kept_blocks = std::min(num_full_blocks, num_cache_blocks_);
    out.truncated = num_kept_blocks < num_full_blocks;
    // find_longest_cache_hit: max_cache_hit_length = num_tokens − 1.
    const std::int64_t max_hit_blocks = num_prompt_tokens > 0 ? (num_prompt_tokens - 1) / block_size_tokens : 0;
    const std::int64_t lookup_limit = std::min(max_hit_blocks, num_kept_blocks);
    held_.clear();
    // The per-id and per-block arrays are far larger than the caches and the accesses are scattered: fetch what a
    // later block will need while working on this one (no effect on results).
    constexpr std::size_t kAhead = 16;
    const std::size_t num_ids = block_ids.size();
    while (out.num_hit_blocks < lookup_limit) {
        const auto h = static_cast<std::size_t>(out.num_hit_blocks);
        if (h + kAhead < num_ids) {
            __builtin_prefetch(&copies_[core::to_int(block_ids[h + kAhead])]);
        }
        const std::uint32_t block = copies_[core::to_int(block_ids[h])].oldest;
        if (block == kNone) {
            break;
        }
        remove(block);  // touch: ref 0 → 1 leaves the queue
        held_.push_back(block);
        ++out.num_hit_blocks;
    }
    for (std::int64_t i = out.num_hit_blocks; i < num_kept_blocks; ++i) {
        if (free_queue_head_ + kAhead < free_queue_size_) {
            __builtin_prefetch(&blocks_[free_queue_[free_queue_head_ + kAhead]]);
            const std::uint32_t soon = blocks_[free_queue_[free_queue_head_ + kAhead / 2]].dense_id;
            if (soon != kNone) {
                __builtin_prefetch(&copies_[soon]);
            }
        }
        const std::uint32_t block = popleft();
        if (blocks_[block].dense_id != kNone) {
            index_remove(block);  // _maybe_evict_cached_block
            ++num_evictions_;
        }
        index_append(block, core::to_int(block_ids[static_cast<std::size_t>(i)]));  // cache_full_blocks
        held_.push_back(block);
    }
    out.num_new_blocks = num_kept_blocks - out.num_hit_blocks;
    // free: reverse order, so the request's last block reaches the tail first and is evicted first.
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
        append(*it);
    }
    return out;
}

std::vector<std::optional<DenseBlockId>> OrderOnlyCache::lru_order() const {
    std::vector<std::optional<DenseBlockId>> out;
    for (std::size_t i = free_queue_head_; i < free_queue_size_; ++i) {
        const Block& b = blocks_[free_queue_[i]];
        if (b.queue_pos == i) {
            out.push_back(b.dense_id == kNone ? std::nullopt : std::optional<DenseBlockId>(DenseBlockId{b.dense_id}));
        }
    }
    return out;
}

void OrderOnlyCache::check_invariants() const {
    std::int64_t num_live = 0;
    for (std::size_t i = free_queue_head_; i < free_queue_size_; ++i) {
        num_live += blocks_[free_queue_[i]].queue_pos == i ? 1 : 0;
    }
    std::int64_t num_marked = 0;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        const std::uint32_t pos = blocks_[b].queue_pos;
        if (pos != kNone) {
            SERVESIM_CHECK(pos >= free_queue_head_ && pos < free_queue_size_ && free_queue_[pos] == b,
                           "block {} says it is queued at {}, which holds another block or is gone", b, pos);
            ++num_marked;
        }
    }
    SERVESIM_CHECK(num_live == num_marked && num_live == num_free_blocks_,
                   "free queue: {} live entries, {} blocks marked free, count {}", num_live, num_marked,
                   num_free_blocks_);
    SERVESIM_CHECK(num_free_blocks_ == num_cache_blocks_, "between requests all {} blocks are free, but {} are queued",
                   num_cache_blocks_, num_free_blocks_);
    std::int64_t num_listed = 0;
    for (std::size_t id = 0; id < copies_.size(); ++id) {
        std::uint32_t prev = kNone;
        for (std::uint32_t b = copies_[id].oldest; b != kNone; b = blocks_[b].next_copy) {
            SERVESIM_CHECK(blocks_[b].dense_id == id, "block {} listed under id {} caches {}", b, id,
                           blocks_[b].dense_id);
            SERVESIM_CHECK(blocks_[b].prev_copy == prev, "block {} has prev copy {} but follows {}", b,
                           blocks_[b].prev_copy, prev);
            prev = b;
            ++num_listed;
            SERVESIM_CHECK(num_listed <= num_cache_blocks_, "copy list of id {} has a cycle", id);
        }
    }
    const auto num_cached = static_cast<std::int64_t>(
        std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.dense_id != kNone; }));
    SERVESIM_CHECK(num_cached == num_listed, "{} blocks carry an id but {} are listed", num_cached, num_listed);
}

OrderOnlyResult run_order_only(const OrderOnlyTrace& trace, std::optional<std::int64_t> capacity_tokens) {
    OrderOnlyResult r;
    r.block_size_tokens = trace.block_size_tokens();
    r.capacity_tokens = capacity_tokens;
    r.num_distinct_blocks = trace.num_distinct_blocks();
    r.num_cache_blocks = trace.num_blocks_unlimited();
    if (capacity_tokens) {
        SERVESIM_CHECK(*capacity_tokens >= 0, "negative capacity {}", *capacity_tokens);
        r.num_cache_blocks = std::min(r.num_cache_blocks, *capacity_tokens / trace.block_size_tokens());
    }
    OrderOnlyCache cache(r.num_cache_blocks, trace.num_distinct_blocks());
    const std::int64_t block_size = trace.block_size_tokens();
    for (std::int64_t i = 0; i < trace.num_requests(); ++i) {
        const std::int64_t num_prompt_tokens = trace.num_prompt_tokens(i);
        const OrderOnlyLookup lookup =
            cache.process_request(trace.block_ids(i), num_prompt_tokens, trace.block_size_tokens());
        r.prefix_cache_queries += num_prompt_tokens;
        r.prefix_cache_hits += lookup.num_hit_blocks * block_size;
        r.num_truncated_requests += lookup.truncated ? 1 : 0;
    }
    r.num_requests = trace.num_requests();
    r.num_evictions = cache.num_evictions();
    return r;
}

}  // namespace servesim::cache
