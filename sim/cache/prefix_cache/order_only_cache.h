// Order-only prefix caching for capacity studies: a trace's requests are looked up and inserted one after another in
// arrival order — no clock, no batching, nothing concurrent — in a pool of a given capacity in tokens. Owns the trace
// as chains of dense block ids (OrderOnlyTrace), the pool with vLLM's LRU (OrderOnlyCache) and the hit counters; does
// not read trace files (workloads/trace_reader.h) nor time anything (sim/engine). Follows vLLM v1: chained hashes of
// full blocks (hash_block_tokens, via BlockHasher), FullAttentionManager.find_longest_cache_hit (stop at the first
// miss, at most num_tokens − 1 tokens), PrefixCacheStats (queries and hits in tokens), BlockPool.get_new_blocks (pop
// the LRU head, evict lazily) and SingleTypeKVCacheManager.free (a request's blocks go to the tail last block first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// A fixed-size array of trivially copyable T for the pool's per-block and per-id tables (up to ~100 MB each, one set
// per capacity): allocated 2 MiB-aligned and, on Linux, advised onto transparent huge pages, so a sweep does not
// spend its time in 4 KiB page faults (a quarter of the run time with std::vector). Contents as std::vector(n, value).
template <typename T>
class HugePageArray {
  public:
    HugePageArray(std::size_t size, const T& value);  // defined (and only used) in order_only_cache.cpp

    ~HugePageArray() { std::free(data_); }

    HugePageArray(const HugePageArray&) = delete;
    HugePageArray& operator=(const HugePageArray&) = delete;

    [[nodiscard]] T& operator[](std::size_t i) { return data_[i]; }

    [[nodiscard]] const T& operator[](std::size_t i) const { return data_[i]; }

    [[nodiscard]] std::size_t size() const { return size_; }

    [[nodiscard]] const T* begin() const { return data_; }

    [[nodiscard]] const T* end() const { return data_ + size_; }

  private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

// A distinct block hash, numbered 0, 1, 2, … in first-seen order over the trace, so that the pool indexes vectors
// instead of hashing (a 12k-request trace at block size 16 has ~9 M hashed blocks per pass).
enum class DenseBlockId : std::uint32_t {};

// The trace as it matters to prefix caching: per request its prompt length and the dense ids of its full blocks.
// Immutable; built by OrderOnlyTraceBuilder, then shared (read-only) by any number of capacities and threads.
class OrderOnlyTrace {
  public:
    [[nodiscard]] int block_size_tokens() const { return block_size_tokens_; }

    [[nodiscard]] std::int64_t num_requests() const { return static_cast<std::int64_t>(num_prompt_tokens_.size()); }

    [[nodiscard]] std::int64_t num_prompt_tokens(std::int64_t request) const {
        return num_prompt_tokens_[static_cast<std::size_t>(request)];
    }

    // Dense ids of the request's full blocks, block 0 first (floor(P / B) of them; a partial last block has none).
    [[nodiscard]] std::span<const DenseBlockId> block_ids(std::int64_t request) const;

    [[nodiscard]] std::int64_t num_distinct_blocks() const { return num_distinct_blocks_; }

    // Σ over requests of floor(P / B).
    [[nodiscard]] std::int64_t num_full_blocks() const { return static_cast<std::int64_t>(block_ids_.size()); }

    // Blocks allocated over the whole trace when nothing is ever evicted: a pool this large behaves as an unlimited
    // one, so no run needs a larger pool, whatever capacity it is given.
    [[nodiscard]] std::int64_t num_blocks_unlimited() const { return num_blocks_unlimited_; }

    [[nodiscard]] std::int64_t num_prompt_tokens_total() const { return num_prompt_tokens_total_; }

  private:
    friend class OrderOnlyTraceBuilder;
    int block_size_tokens_ = 16;
    std::vector<std::int64_t> num_prompt_tokens_;  // per request
    std::vector<std::uint64_t> first_block_;       // per request, + 1 sentinel: offsets into block_ids_
    std::vector<DenseBlockId> block_ids_;
    std::int64_t num_distinct_blocks_ = 0;
    std::int64_t num_blocks_unlimited_ = 0;
    std::int64_t num_prompt_tokens_total_ = 0;
};

// Hashes each request's prompt runs with BlockHasher (the engine's hash function) and numbers distinct hashes with
// a flat open-addressing table (linear probing; the hashes are already mixed, so their low bits index it directly).
// The table lives only while building.
class OrderOnlyTraceBuilder {
  public:
    explicit OrderOnlyTraceBuilder(int block_size_tokens);

    // Appends the next request in arrival order. Only the prompt is hashed: outputs are not cached (input-only, as in
    // the Mooncake traces, whose hash ids cover inputs only).
    void add_request(const core::TokenContent& prompt);

    [[nodiscard]] std::int64_t num_requests() const { return trace_.num_requests(); }

    // The finished trace; the builder is empty afterwards.
    [[nodiscard]] OrderOnlyTrace build() &&;

  private:
    [[nodiscard]] DenseBlockId dense_id(core::BlockHash hash);
    void grow_table();

    OrderOnlyTrace trace_;
    std::vector<core::BlockHash> hashes_;  // scratch: the current request's block hashes

    struct Slot {
        std::uint64_t hash = 0;
        std::uint32_t dense_id = 0xffffffffu;  // 0xffffffff: free slot
    };

    std::vector<Slot> table_;  // key and value side by side: one cache miss per probe
    std::uint64_t table_mask_ = 0;
};

// One request's outcome, in vLLM's units.
struct OrderOnlyLookup {
    std::int64_t num_hit_blocks = 0;  // leading cached blocks (find_longest_cache_hit)
    std::int64_t num_new_blocks = 0;  // blocks allocated (and hashed) for it
    bool truncated = false;           // more full blocks than the pool: only the first num_cache_blocks() kept
};

// A pool of num_cache_blocks blocks with vLLM's free queue, holding one request at a time. Between requests every
// block is free (ref count 0) and queued; a cached block keeps its dense id until allocation pops it from the head
// (lazy eviction). Several blocks may carry the same id, as in vLLM's BlockHashToBlockMap (no dedupe: a block after
// the hit is allocated afresh even if an older copy lingers); a lookup takes the oldest copy still cached.
// Unlike BlockPool there is no null block: every block holds tokens.
//
// The free queue keeps FreeBlockQueue's order exactly (initially block-id order; popleft takes the head; a touched
// block leaves wherever it is; freed blocks are appended to the tail) but is stored as an append-only ring of block
// ids with lazy deletion: a touched block's entry goes stale (the block records the position of its one live entry)
// and is skipped when it reaches the head; stale entries are squeezed out once they outnumber the pool. Pops and
// appends then walk memory in order instead of following list links — 3× faster on the 12k-request trace; the
// equivalence with FreeBlockQueue is checked in tests/cache/prefix_cache/order_only_cache_test.cpp.
class OrderOnlyCache {
  public:
    OrderOnlyCache(std::int64_t num_cache_blocks, std::int64_t num_distinct_blocks);

    // One request, num_prompt_tokens long, whose full blocks have `block_ids`:
    //   find_longest_cache_hit: walk the first min(floor((P − 1) / B), kept) ids, stop at the first miss;
    //   touch the hits (out of the free queue), allocate the remaining kept blocks from the head (evicting), hash them;
    //   free all kept blocks in reverse order to the tail (the request's last block is evicted first).
    // kept = min(#full blocks, num_cache_blocks): vLLM could never admit a request larger than the pool; here it keeps
    // the prefix that fits (`truncated`).
    OrderOnlyLookup process_request(std::span<const DenseBlockId> block_ids,
                                    std::int64_t num_prompt_tokens,
                                    int block_size_tokens);

    [[nodiscard]] std::int64_t num_cache_blocks() const { return num_cache_blocks_; }

    [[nodiscard]] std::int64_t num_evictions() const { return num_evictions_; }

    [[nodiscard]] bool is_cached(DenseBlockId id) const;
    // The free queue head (next evicted) to tail, as the dense id each block caches (nullopt for a block never used).
    [[nodiscard]] std::vector<std::optional<DenseBlockId>> lru_order() const;

    // Queue integrity, and each cached id's list of copies agrees with the blocks' ids; throws InvariantError.
    void check_invariants() const;

  private:
    static constexpr std::uint32_t kNone = 0xffffffffu;

    void index_append(std::uint32_t block, std::uint32_t id);
    void index_remove(std::uint32_t block);
    // The free queue (see the class comment): vLLM popleft / remove / append.
    [[nodiscard]] std::uint32_t popleft();
    void remove(std::uint32_t block);
    void append(std::uint32_t block);
    void squeeze_free_queue();

    // Per block (fields side by side: one cache miss per block touched).
    struct Block {
        std::uint32_t dense_id = kNone;   // the id it caches, or kNone
        std::uint32_t prev_copy = kNone;  // the next older / younger block caching the same id
        std::uint32_t next_copy = kNone;
        std::uint32_t queue_pos = kNone;  // index of its live entry in free_queue_, or kNone when not free
    };

    // Per dense id: its oldest cached block (kNone: not cached); younger copies follow through Block::next_copy
    // (rarely more than one: a list walk to append is cheaper than a second per-id field to clear every run).
    struct Copies {
        std::uint32_t oldest = kNone;
    };

    std::int64_t num_cache_blocks_;
    std::int64_t num_evictions_ = 0;
    HugePageArray<Block> blocks_;
    // The ring: block ids in [free_queue_head_, free_queue_size_); entries before the head are gone.
    HugePageArray<std::uint32_t> free_queue_;
    std::size_t free_queue_head_ = 0;
    std::size_t free_queue_size_ = 0;
    std::int64_t num_free_blocks_ = 0;
    HugePageArray<Copies> copies_;
    std::vector<std::uint32_t> held_;  // scratch: the current request's blocks
};

struct OrderOnlyResult {
    int block_size_tokens = 0;
    std::optional<std::int64_t> capacity_tokens;  // as asked; nullopt = unlimited
    std::int64_t num_cache_blocks = 0;            // the pool: min(floor(capacity / B), num_blocks_unlimited)
    std::int64_t num_requests = 0;
    std::int64_t prefix_cache_queries = 0;    // tokens: Σ P
    std::int64_t prefix_cache_hits = 0;       // tokens: Σ hit blocks · B
    std::int64_t num_evictions = 0;           // cached blocks popped for reuse
    std::int64_t num_truncated_requests = 0;  // requests with more full blocks than the pool
    std::int64_t num_distinct_blocks = 0;     // of the trace at this block size

    [[nodiscard]] double prefix_cache_hit_rate() const {
        return prefix_cache_queries > 0 ? static_cast<double>(prefix_cache_hits) / prefix_cache_queries : 0.0;
    }
};

// Replays the whole trace through a pool of capacity_tokens (nullopt: unlimited). The pool is sized
// min(floor(capacity_tokens / B), trace.num_blocks_unlimited()), so a capacity of 10⁹ tokens allocates no more than
// the trace can fill.
[[nodiscard]] OrderOnlyResult run_order_only(const OrderOnlyTrace& trace, std::optional<std::int64_t> capacity_tokens);

}  // namespace servesim::cache
