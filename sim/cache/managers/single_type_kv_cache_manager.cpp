// SingleTypeKvCacheManager: per-request block lists of one KV cache group (vLLM SingleTypeKVCacheManager).
#include "sim/cache/managers/single_type_kv_cache_manager.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace servesim::cache {

SingleTypeKvCacheManager::SingleTypeKvCacheManager(BlockPool& block_pool, int group_index, int block_size_tokens)
    : block_pool_(block_pool), group_index_(group_index), block_size_tokens_(block_size_tokens),
      blocks_of_(block_size_tokens) {
    SERVESIM_CHECK(block_size_tokens > 0, "group {} block size {}", group_index, block_size_tokens);
}

std::int64_t SingleTypeKvCacheManager::num_evictable_blocks(std::span<const core::BlockId> blocks) const {
    return block_pool_.num_free_among(blocks);
}

std::uint32_t SingleTypeKvCacheManager::SlotMap::find(core::RequestId id) const {
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = home(id);; i = (i + 1) & mask) {
        const Entry& e = table_[i];
        if (e.slot == kNoSlot || e.id == id) {
            return e.slot;
        }
    }
}

void SingleTypeKvCacheManager::SlotMap::insert(core::RequestId id, std::uint32_t slot) {
    if ((size_ + 1) * 2 > table_.size()) {
        std::vector<Entry> old = std::exchange(table_, std::vector<Entry>(table_.size() * 2));
        size_ = 0;
        for (const Entry& e : old) {
            if (e.slot != kNoSlot) {
                insert(e.id, e.slot);
            }
        }
    }
    const std::size_t mask = table_.size() - 1;
    std::size_t i = home(id);
    while (table_[i].slot != kNoSlot) {
        i = (i + 1) & mask;
    }
    table_[i] = Entry{id, slot};
    ++size_;
}

void SingleTypeKvCacheManager::SlotMap::erase(core::RequestId id) {
    const std::size_t mask = table_.size() - 1;
    std::size_t i = home(id);
    while (table_[i].id != id || table_[i].slot == kNoSlot) {
        SERVESIM_CHECK(table_[i].slot != kNoSlot, "request {} has no slot", core::to_int(id));
        i = (i + 1) & mask;
    }
    // Backward shift: a later entry of the run moves into the hole unless its home lies in (hole, entry].
    for (std::size_t j = (i + 1) & mask; table_[j].slot != kNoSlot; j = (j + 1) & mask) {
        if (((j - home(table_[j].id)) & mask) >= ((j - i) & mask)) {
            table_[i] = table_[j];
            i = j;
        }
    }
    table_[i] = Entry{};
    --size_;
}

const SingleTypeKvCacheManager::RequestBlocks* SingleTypeKvCacheManager::find(core::RequestId id) const {
    if (last_slot_ != kNoSlot && last_id_ == id) {
        return &slots_[last_slot_];
    }
    const std::uint32_t slot = slot_of_.find(id);
    if (slot == kNoSlot) {
        return nullptr;
    }
    last_id_ = id;
    last_slot_ = slot;
    return &slots_[slot];
}

const SingleTypeKvCacheManager::RequestBlocks* SingleTypeKvCacheManager::find_hinted(core::RequestId id,
                                                                                     std::uint32_t& hint) const {
    if (hint < slots_.size() && slots_[hint].in_use && slots_[hint].id == id) {
        return &slots_[hint];
    }
    const std::uint32_t slot = slot_of_.find(id);
    if (slot == kNoSlot) {
        return nullptr;
    }
    hint = slot;
    return &slots_[slot];
}

SingleTypeKvCacheManager::RequestBlocks& SingleTypeKvCacheManager::find_or_add(core::RequestId id) {
    if (RequestBlocks* req = find(id)) {
        return *req;
    }
    std::uint32_t slot = 0;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
    } else {
        slot = static_cast<std::uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    RequestBlocks& req = slots_[slot];
    req.blocks.clear();  // keeps the capacity of the slot's previous holder
    req.num_cached_blocks = 0;
    req.id = id;
    req.in_use = true;
    slot_of_.insert(id, slot);
    last_id_ = id;
    last_slot_ = slot;
    return req;
}

std::int64_t SingleTypeKvCacheManager::get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                                  std::span<const core::BlockId> new_computed_blocks,
                                                                  std::int64_t total_computed_tokens,
                                                                  std::int64_t /*num_tokens_main_model*/,
                                                                  bool apply_admission_cap) const {
    return blocks_to_allocate(id, num_tokens, new_computed_blocks, total_computed_tokens, apply_admission_cap,
                              /*count_evictable=*/true);
}

std::int64_t SingleTypeKvCacheManager::max_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                              std::span<const core::BlockId> new_computed_blocks,
                                                              std::int64_t total_computed_tokens,
                                                              bool apply_admission_cap) const {
    return blocks_to_allocate(id, num_tokens, new_computed_blocks, total_computed_tokens, apply_admission_cap,
                              /*count_evictable=*/false);
}

std::int64_t SingleTypeKvCacheManager::blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                          std::span<const core::BlockId> new_computed_blocks,
                                                          std::int64_t total_computed_tokens,
                                                          bool apply_admission_cap, bool count_evictable) const {
    std::int64_t num_required_blocks = blocks_of_.cdiv(num_tokens);
    if (apply_admission_cap && max_admission_blocks_per_request() > 0) {
        // Recycling groups hold at most the cap at once (remove_skipped_blocks runs before every chunk), so the
        // full-ISL check charges no more (vLLM get_num_blocks_to_allocate, issue #39734).
        num_required_blocks = std::min(num_required_blocks, max_admission_blocks_per_request());
    }
    if (const RequestBlocks* req = find(id)) {
        // A running request has no new prefix-cache hits.
        SERVESIM_CHECK(new_computed_blocks.empty(), "running request {} got {} hit blocks", core::to_int(id),
                       new_computed_blocks.size());
        return std::max<std::int64_t>(num_required_blocks - static_cast<std::int64_t>(req->blocks.size()), 0);
    }
    // A new request: hit blocks before the attention window need no slot.
    const std::int64_t num_skipped_blocks = floor_div(get_num_skipped_tokens(total_computed_tokens), block_size_tokens_);
    const auto num_local_computed_blocks = static_cast<std::int64_t>(new_computed_blocks.size());
    const std::int64_t num_new_blocks =
        std::max<std::int64_t>(num_required_blocks - std::max(num_skipped_blocks, num_local_computed_blocks), 0);
    const auto num_skipped_hits = static_cast<std::size_t>(
        std::clamp<std::int64_t>(num_skipped_blocks, 0, num_local_computed_blocks));
    // An evictable hit leaves the free queue when touched, so it costs capacity like a new block. (Without
    // counting, every kept hit is taken as evictable: an upper bound.)
    const auto kept = new_computed_blocks.subspan(num_skipped_hits);
    return num_new_blocks + (count_evictable ? num_evictable_blocks(kept) : static_cast<std::int64_t>(kept.size()));
}

void SingleTypeKvCacheManager::allocate_new_computed_blocks(core::RequestId id,
                                                            std::span<const core::BlockId> new_computed_blocks,
                                                            std::int64_t num_local_computed_tokens) {
    if (find(id) != nullptr) {
        SERVESIM_CHECK(new_computed_blocks.empty(), "running request {} got {} hit blocks", core::to_int(id),
                       new_computed_blocks.size());
        return;
    }
    RequestBlocks& req = find_or_add(id);
    const std::int64_t num_skipped_blocks =
        std::max<std::int64_t>(floor_div(get_num_skipped_tokens(num_local_computed_tokens), block_size_tokens_), 0);
    const auto num_skipped_hits = static_cast<std::size_t>(
        std::min<std::int64_t>(num_skipped_blocks, static_cast<std::int64_t>(new_computed_blocks.size())));
    const auto kept = new_computed_blocks.subspan(num_skipped_hits);
    block_pool_.touch(kept);
    req.blocks.assign(static_cast<std::size_t>(num_skipped_blocks), kNullBlock);
    req.blocks.insert(req.blocks.end(), kept.begin(), kept.end());
    // Hit blocks (and skipped nulls) are already cached.
    req.num_cached_blocks = static_cast<std::int64_t>(req.blocks.size());
}

void SingleTypeKvCacheManager::allocate_new_blocks(core::RequestId id, std::int64_t num_tokens,
                                                   std::int64_t /*num_tokens_main_model*/) {
    RequestBlocks& req = find_or_add(id);
    const std::int64_t num_new_blocks =
        blocks_of_.cdiv(num_tokens) - static_cast<std::int64_t>(req.blocks.size());
    if (num_new_blocks > 0) {
        block_pool_.get_new_blocks(num_new_blocks, req.blocks);
    }
}

void SingleTypeKvCacheManager::cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                                            std::int64_t num_tokens, ReachableBoundaries /*boundaries*/) {
    RequestBlocks* req_ptr = find(id);
    if (req_ptr == nullptr) {
        return;
    }
    RequestBlocks& req = *req_ptr;
    const std::int64_t num_full_blocks = blocks_of_.div(num_tokens);
    if (req.num_cached_blocks >= num_full_blocks) {
        return;
    }
    block_pool_.cache_full_blocks(req.blocks, block_hashes, req.num_cached_blocks, num_full_blocks, group_index_);
    req.num_cached_blocks = num_full_blocks;
}

void SingleTypeKvCacheManager::free(core::RequestId id) {
    const std::uint32_t slot = slot_of_.find(id);
    if (slot == kNoSlot) {
        return;
    }
    slot_of_.erase(id);
    if (last_slot_ == slot) {
        last_slot_ = kNoSlot;
    }
    RequestBlocks& req = slots_[slot];
    // Reverse order: the request's tail blocks reach the free-queue tail first and are evicted first.
    block_pool_.free_blocks_tail_first(req.blocks, unhashed_blocks_to_front());
    req.blocks.clear();
    req.in_use = false;
    free_slots_.push_back(slot);
}

void SingleTypeKvCacheManager::remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens) {
    const std::int64_t num_skipped_tokens = get_num_skipped_tokens(total_computed_tokens);
    if (num_skipped_tokens <= 0) {
        return;
    }
    RequestBlocks* req = find(id);
    if (req == nullptr) {
        return;
    }
    std::vector<core::BlockId>& blocks = req->blocks;
    const std::int64_t num_skipped_blocks =
        std::min<std::int64_t>(num_skipped_tokens / block_size_tokens_, static_cast<std::int64_t>(blocks.size()));
    scratch_.clear();
    // From the last skipped block backwards; a null block means everything before it was removed earlier.
    for (std::int64_t i = num_skipped_blocks - 1; i >= 0; --i) {
        core::BlockId& block = blocks[static_cast<std::size_t>(i)];
        if (block == kNullBlock) {
            break;
        }
        scratch_.push_back(block);
        block = kNullBlock;
    }
    block_pool_.free_blocks(scratch_, unhashed_blocks_to_front());
}

std::span<const core::BlockId> SingleTypeKvCacheManager::blocks(core::RequestId id) const {
    const RequestBlocks* req = find(id);
    return req == nullptr ? std::span<const core::BlockId>{} : std::span<const core::BlockId>{req->blocks};
}

std::int64_t SingleTypeKvCacheManager::num_blocks_held(core::RequestId id) const {
    const auto list = blocks(id);
    return static_cast<std::int64_t>(std::count_if(list.begin(), list.end(), [](core::BlockId b) {
        return b != kNullBlock;
    }));
}

void SingleTypeKvCacheManager::add_holders(std::vector<std::int32_t>& num_holders) const {
    for (const RequestBlocks& req : slots_) {
        for (const core::BlockId block : req.blocks) {  // empty unless in use
            if (block != kNullBlock) {
                ++num_holders[core::to_int(block)];
            }
        }
    }
}

void SingleTypeKvCacheManager::check_invariants() const {
    SERVESIM_CHECK(slot_of_.size() + free_slots_.size() == slots_.size(), "group {}: {} + {} request slots of {}",
                   group_index_, slot_of_.size(), free_slots_.size(), slots_.size());
    for (const RequestBlocks& req : slots_) {
        if (!req.in_use) {
            SERVESIM_CHECK(req.blocks.empty(), "group {}: a free slot holds {} blocks", group_index_,
                           req.blocks.size());
            continue;
        }
        const core::RequestId id = req.id;
        const std::uint32_t slot = slot_of_.find(id);
        SERVESIM_CHECK(slot != kNoSlot && &slots_[slot] == &req, "group {} request {}: slot not mapped", group_index_,
                       core::to_int(id));
        SERVESIM_CHECK(req.num_cached_blocks <= static_cast<std::int64_t>(req.blocks.size()),
                       "group {} request {}: {} cached blocks of {}", group_index_, core::to_int(id),
                       req.num_cached_blocks, req.blocks.size());
        for (const core::BlockId block : req.blocks) {
            if (block != kNullBlock) {
                SERVESIM_CHECK(!block_pool_.is_free(block), "group {} request {} holds free block {}", group_index_,
                               core::to_int(id), core::to_int(block));
            }
        }
        check_request(req);
    }
}

}  // namespace servesim::cache
