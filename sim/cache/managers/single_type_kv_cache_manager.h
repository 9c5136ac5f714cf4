// SingleTypeKvCacheManager: one KV cache group's per-request block lists (vLLM single_type_kv_cache_manager.py
// SingleTypeKVCacheManager). The base keeps all bookkeeping (req_to_blocks, num_cached_blocks) and the shared
// algorithms; subclasses (full attention, sliding window, Mamba) override find_longest_cache_hit,
// get_num_skipped_tokens and, for Mamba, the allocation hooks. It never checks capacity: the coordinator does.
// req_to_blocks is a vector of slots (reused with their block lists' capacity) plus a RequestId → slot map, because
// allocate_slots looks the same request up several times per step for every running request.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sim/cache/prefix_cache/block_pool.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

struct RequestIdHash {
    std::size_t operator()(core::RequestId id) const {
        return static_cast<std::size_t>(core::mix64(core::to_int(id)));
    }
};

// Python-style floor division (vLLM's `//` on possibly negative skipped-token counts).
[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

[[nodiscard]] constexpr std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Division of token counts by one block size, the same results as `/` and cdiv: a shift when the size is a power of
// two (attention block sizes are; Mamba-aligned ones may not be), a division otherwise. Running requests divide by
// the block size several times per step each, and a 64-bit division costs tens of cycles.
class BlockDivider {
public:
    explicit constexpr BlockDivider(std::int64_t block_size_tokens)
        : block_size_tokens_(block_size_tokens),
          shift_(block_size_tokens > 0 && std::has_single_bit(static_cast<std::uint64_t>(block_size_tokens))
                     ? std::countr_zero(static_cast<std::uint64_t>(block_size_tokens))
                     : -1) {}
    // a / block size (truncating, as `/`).
    [[nodiscard]] constexpr std::int64_t div(std::int64_t a) const {
        return a >= 0 && shift_ >= 0 ? a >> shift_ : a / block_size_tokens_;
    }
    // cdiv(a, block size).
    [[nodiscard]] constexpr std::int64_t cdiv(std::int64_t a) const { return div(a + block_size_tokens_ - 1); }

private:
    std::int64_t block_size_tokens_;
    int shift_;  // log2 of the block size, or −1 when it is not a power of two
};

// Token positions whose state sparse retention must keep (vLLM reachable_boundaries: the replay boundary
// num_prompt_tokens − 1 and request.shared_prefix_boundary); ignored by dense managers.
struct ReachableBoundaries {
    std::int64_t replay_tokens = -1;
    std::int64_t shared_prefix_tokens = 0;  // 0 = none
};

class SingleTypeKvCacheManager {
public:
    SingleTypeKvCacheManager(BlockPool& block_pool, int group_index, int block_size_tokens);
    virtual ~SingleTypeKvCacheManager() = default;
    SingleTypeKvCacheManager(const SingleTypeKvCacheManager&) = delete;
    SingleTypeKvCacheManager& operator=(const SingleTypeKvCacheManager&) = delete;

    // vLLM find_longest_cache_hit: the longest prefix of at most max_length tokens whose blocks are cached in every
    // group of `group_indices` (groups with this manager's spec). Writes each group's hit list (skipped positions as
    // kNullBlock) into hit_per_group[group]; returns the list length in blocks.
    [[nodiscard]] virtual std::int64_t find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                              std::int64_t max_length,
                                                              std::span<const int> group_indices,
                                                              std::vector<std::vector<core::BlockId>>& hit_per_group)
        const = 0;

    // Blocks to take from the free queue to give the request num_tokens slots: new blocks plus hit blocks that are
    // evictable (ref 0) now, as vLLM get_num_blocks_to_allocate. apply_admission_cap (the full-ISL admission check
    // only): the required blocks are clamped to max_admission_blocks_per_request() when the group has one.
    [[nodiscard]] virtual std::int64_t get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                                  std::span<const core::BlockId> new_computed_blocks,
                                                                  std::int64_t total_computed_tokens,
                                                                  std::int64_t num_tokens_main_model,
                                                                  bool apply_admission_cap = false) const;
    // The same count with every hit block not skipped taken as evictable: an upper bound of this class's
    // get_num_blocks_to_allocate (not of an override's), computed without reading the hit blocks' ref counts.
    [[nodiscard]] std::int64_t max_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                      std::span<const core::BlockId> new_computed_blocks,
                                                      std::int64_t total_computed_tokens,
                                                      bool apply_admission_cap = false) const;

    // vLLM _max_admission_blocks_per_request: the most blocks a request of this group holds at once (recycling
    // groups such as sliding window); 0 = no cap.
    [[nodiscard]] virtual std::int64_t max_admission_blocks_per_request() const { return 0; }

    // A new request takes references on its hit blocks (skipped positions become null blocks).
    void allocate_new_computed_blocks(core::RequestId id, std::span<const core::BlockId> new_computed_blocks,
                                      std::int64_t num_local_computed_tokens);

    // Gives the request at least num_tokens slots from the free-queue head.
    virtual void allocate_new_blocks(core::RequestId id, std::int64_t num_tokens, std::int64_t num_tokens_main_model);

    // Caches the request's full blocks up to num_tokens (schedule-time caching, vLLM cache_blocks).
    virtual void cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                              std::int64_t num_tokens, ReachableBoundaries boundaries = {});

    // Frees the request's blocks in reverse order, so its tail blocks are evicted first (block_segments.h).
    virtual void free(core::RequestId id);

    // Frees blocks no longer read (outside the sliding window, old Mamba states), replacing them by null blocks.
    virtual void remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens);

    // Called at the start of every scheduler step.
    virtual void new_step_starts() {}

    // Whether the request already holds slots for num_tokens and has cached its full blocks up to num_cached_tokens
    // (a multiple of the block size, 0 when nothing is to be cached): then, in a group that skips no tokens, a
    // running request's allocate_slots would neither allocate nor cache anything here. Most decode steps: a request
    // needs a new block only once every block_size tokens. `slot_hint` (optional, kept with the request) is where
    // its entry was last found: tried first, corrected when stale, so a running request is found without the map.
    [[nodiscard]] bool holds_slots_and_cached(core::RequestId id, std::uint32_t* slot_hint, std::int64_t num_tokens,
                                              std::int64_t num_cached_tokens) const {
        const RequestBlocks* req = slot_hint != nullptr ? find_hinted(id, *slot_hint) : find(id);
        return req != nullptr && static_cast<std::int64_t>(req->blocks.size()) >= blocks_of_.cdiv(num_tokens) &&
               req->num_cached_blocks >= blocks_of_.div(num_cached_tokens);
    }

    // The request's list length (null blocks included) and cached blocks; nullopt when it holds no list.
    [[nodiscard]] std::optional<std::pair<std::int64_t, std::int64_t>> blocks_held_and_cached(
        core::RequestId id, std::uint32_t* slot_hint) const {
        const RequestBlocks* req = slot_hint != nullptr ? find_hinted(id, *slot_hint) : find(id);
        if (req == nullptr) {
            return std::nullopt;
        }
        return std::pair<std::int64_t, std::int64_t>{static_cast<std::int64_t>(req->blocks.size()),
                                                     req->num_cached_blocks};
    }

    // allocate_slots for a running request (no new hits, no tokens skipped: a full-attention group) in a pool of
    // this one group, as one pass over its list instead of the coordinator's fan-out: vLLM
    // KVCacheManager.allocate_slots counts num_blocks_to_allocate = cdiv(num_tokens, B) − len(req_blocks), fails
    // when that exceeds the free blocks, else takes them from the free-queue head (allocate_new_blocks) and caches
    // the full blocks up to num_cached_tokens (cache_blocks; a multiple of B, 0 when nothing is cached). Effects
    // and order are those of get_num_blocks_to_allocate, allocate_new_blocks and cache_blocks called in turn.
    // kNotHeld: the request holds no list here, nothing changed (the general path creates it).
    struct RunningExtension {
        enum Outcome { kNotHeld, kDoesNotFit, kDone } outcome = kNotHeld;
        std::int64_t num_blocks = 0;         // the list's length afterwards (kDone)
        std::int64_t num_cached_blocks = 0;  // its cached blocks afterwards (kDone)
    };
    [[nodiscard]] RunningExtension extend_running(core::RequestId id, std::uint32_t* slot_hint,
                                                  std::int64_t num_tokens, std::int64_t num_cached_tokens,
                                                  std::span<const core::BlockHash> block_hashes) {
        RequestBlocks* req = slot_hint != nullptr ? const_cast<RequestBlocks*>(find_hinted(id, *slot_hint)) : find(id);
        RunningExtension out;
        if (req == nullptr) {
            return out;
        }
        const std::int64_t num_new_blocks = blocks_of_.cdiv(num_tokens) - static_cast<std::int64_t>(req->blocks.size());
        if (num_new_blocks > 0) {
            if (num_new_blocks > block_pool_.num_free_blocks()) {
                out.outcome = RunningExtension::kDoesNotFit;
                return out;
            }
            block_pool_.get_new_blocks(num_new_blocks, req->blocks);
        }
        const std::int64_t num_full_blocks = blocks_of_.div(num_cached_tokens);
        if (req->num_cached_blocks < num_full_blocks) {
            block_pool_.cache_full_blocks(req->blocks, block_hashes, req->num_cached_blocks, num_full_blocks,
                                          group_index_);
            req->num_cached_blocks = num_full_blocks;
        }
        out.outcome = RunningExtension::kDone;
        out.num_blocks = static_cast<std::int64_t>(req->blocks.size());
        out.num_cached_blocks = req->num_cached_blocks;
        return out;
    }
    [[nodiscard]] int group_index() const { return group_index_; }
    [[nodiscard]] int block_size_tokens() const { return block_size_tokens_; }
    // The request's block list (null blocks included); empty when it holds none.
    [[nodiscard]] std::span<const core::BlockId> blocks(core::RequestId id) const;
    [[nodiscard]] std::int64_t num_blocks_held(core::RequestId id) const;
    // Adds one per (request, non-null block) to num_holders[block], for BlockPool::check_invariants.
    void add_holders(std::vector<std::int32_t>& num_holders) const;
    // Bookkeeping checks of this manager (and of the subclass, through check_request).
    void check_invariants() const;

protected:
    struct RequestBlocks {
        std::vector<core::BlockId> blocks;
        std::int64_t num_cached_blocks = 0;  // vLLM num_cached_block: blocks [0, n) are hashed or null
        core::RequestId id{};                // the holder while the slot is in use
        bool in_use = false;
    };

    // vLLM get_num_skipped_tokens: tokens whose KV the next computation no longer reads (0 for full attention).
    [[nodiscard]] virtual std::int64_t get_num_skipped_tokens(std::int64_t /*num_computed_tokens*/) const { return 0; }
    // Whether a freed block without a hash goes to the free-queue head (sparse retention, vLLM PR #43447).
    [[nodiscard]] virtual bool unhashed_blocks_to_front() const { return false; }
    virtual void check_request(const RequestBlocks& /*req*/) const {}

    [[nodiscard]] std::int64_t num_evictable_blocks(std::span<const core::BlockId> blocks) const;
    // get_num_blocks_to_allocate's count; count_evictable false: hits not skipped all count (max_blocks_to_allocate).
    [[nodiscard]] std::int64_t blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                  std::span<const core::BlockId> new_computed_blocks,
                                                  std::int64_t total_computed_tokens, bool apply_admission_cap,
                                                  bool count_evictable) const;
    // The request's entry, or nullptr. Pointers stay valid until the next find_or_add or free.
    [[nodiscard]] const RequestBlocks* find(core::RequestId id) const;
    [[nodiscard]] RequestBlocks* find(core::RequestId id) {
        return const_cast<RequestBlocks*>(std::as_const(*this).find(id));
    }
    // vLLM req_to_blocks[request_id] (a defaultdict): the entry, created empty if absent.
    RequestBlocks& find_or_add(core::RequestId id);
    // find(id), trying slot `hint` first; sets `hint` to the slot found.
    [[nodiscard]] const RequestBlocks* find_hinted(core::RequestId id, std::uint32_t& hint) const;
    void free_in_order(std::span<const core::BlockId> ordered_blocks) { block_pool_.free_blocks(ordered_blocks); }

    BlockPool& block_pool_;
    int group_index_;
    int block_size_tokens_;
    BlockDivider blocks_of_;  // divides by block_size_tokens_

private:
    static constexpr std::uint32_t kNoSlot = 0xffffffffu;

    // RequestId → slot for the requests holding blocks (a few dozen): open addressing, linear probing, load ≤ 1/2,
    // backward-shift erase. Replaces a node-based map whose prime-modulo bucket index cost a division per lookup.
    class SlotMap {
    public:
        SlotMap() : table_(16) {}
        [[nodiscard]] std::uint32_t find(core::RequestId id) const;  // kNoSlot if absent
        void insert(core::RequestId id, std::uint32_t slot);          // id must be absent
        void erase(core::RequestId id);                               // id must be present
        [[nodiscard]] std::size_t size() const { return size_; }

    private:
        struct Entry {
            core::RequestId id{};
            std::uint32_t slot = kNoSlot;  // kNoSlot: empty
        };
        [[nodiscard]] std::size_t home(core::RequestId id) const {
            return static_cast<std::size_t>(core::mix64(core::to_int(id))) & (table_.size() - 1);
        }
        std::vector<Entry> table_;  // size a power of two
        std::size_t size_ = 0;
    };

    std::vector<RequestBlocks> slots_;      // iterated in slot order (checks only), never for output
    std::vector<std::uint32_t> free_slots_;  // LIFO, so a reused slot's block list is still warm
    SlotMap slot_of_;
    // The last lookup: allocate_slots asks about one request 3–4 times in a row. A replica runs on one thread.
    mutable core::RequestId last_id_{};
    mutable std::uint32_t last_slot_ = kNoSlot;
    std::vector<core::BlockId> scratch_;  // blocks remove_skipped_blocks frees, reused to avoid allocations
};

}  // namespace servesim::cache
