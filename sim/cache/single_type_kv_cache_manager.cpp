// SingleTypeKvCacheManager: per-request block lists of one KV cache group (vLLM SingleTypeKVCacheManager).
#include "sim/cache/single_type_kv_cache_manager.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

SingleTypeKvCacheManager::SingleTypeKvCacheManager(BlockPool& block_pool, int group_index, int block_size_tokens)
    : block_pool_(block_pool), group_index_(group_index), block_size_tokens_(block_size_tokens) {
    SERVESIM_CHECK(block_size_tokens > 0, "group {} block size {}", group_index, block_size_tokens);
}

std::int64_t SingleTypeKvCacheManager::num_evictable_blocks(std::span<const core::BlockId> blocks) const {
    std::int64_t n = 0;
    for (const core::BlockId id : blocks) {
        n += (id != kNullBlock && block_pool_.ref_cnt(id) == 0) ? 1 : 0;
    }
    return n;
}

const SingleTypeKvCacheManager::RequestBlocks* SingleTypeKvCacheManager::find(core::RequestId id) const {
    const auto it = req_to_blocks_.find(id);
    return it == req_to_blocks_.end() ? nullptr : &it->second;
}

std::int64_t SingleTypeKvCacheManager::get_num_blocks_to_allocate(core::RequestId id, std::int64_t num_tokens,
                                                                  std::span<const core::BlockId> new_computed_blocks,
                                                                  std::int64_t total_computed_tokens,
                                                                  std::int64_t /*num_tokens_main_model*/) const {
    const std::int64_t num_required_blocks = cdiv(num_tokens, block_size_tokens_);
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
    // An evictable hit leaves the free queue when touched, so it costs capacity like a new block.
    return num_new_blocks + num_evictable_blocks(new_computed_blocks.subspan(num_skipped_hits));
}

void SingleTypeKvCacheManager::allocate_new_computed_blocks(core::RequestId id,
                                                            std::span<const core::BlockId> new_computed_blocks,
                                                            std::int64_t num_local_computed_tokens) {
    if (find(id) != nullptr) {
        SERVESIM_CHECK(new_computed_blocks.empty(), "running request {} got {} hit blocks", core::to_int(id),
                       new_computed_blocks.size());
        return;
    }
    RequestBlocks& req = req_to_blocks_[id];
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
    RequestBlocks& req = req_to_blocks_[id];
    const std::int64_t num_new_blocks =
        cdiv(num_tokens, block_size_tokens_) - static_cast<std::int64_t>(req.blocks.size());
    if (num_new_blocks > 0) {
        block_pool_.get_new_blocks(num_new_blocks, req.blocks);
    }
}

void SingleTypeKvCacheManager::cache_blocks(core::RequestId id, std::span<const core::BlockHash> block_hashes,
                                            std::int64_t num_tokens) {
    const auto it = req_to_blocks_.find(id);
    if (it == req_to_blocks_.end()) {
        return;
    }
    RequestBlocks& req = it->second;
    const std::int64_t num_full_blocks = num_tokens / block_size_tokens_;
    if (req.num_cached_blocks >= num_full_blocks) {
        return;
    }
    block_pool_.cache_full_blocks(req.blocks, block_hashes, req.num_cached_blocks, num_full_blocks, group_index_);
    req.num_cached_blocks = num_full_blocks;
}

void SingleTypeKvCacheManager::free(core::RequestId id) {
    const auto it = req_to_blocks_.find(id);
    if (it == req_to_blocks_.end()) {
        return;
    }
    // Reverse order: the request's tail blocks reach the free-queue tail first and are evicted first.
    scratch_.assign(it->second.blocks.rbegin(), it->second.blocks.rend());
    req_to_blocks_.erase(it);
    block_pool_.free_blocks(scratch_);
}

void SingleTypeKvCacheManager::remove_skipped_blocks(core::RequestId id, std::int64_t total_computed_tokens) {
    const std::int64_t num_skipped_tokens = get_num_skipped_tokens(total_computed_tokens);
    if (num_skipped_tokens <= 0) {
        return;
    }
    const auto it = req_to_blocks_.find(id);
    if (it == req_to_blocks_.end()) {
        return;
    }
    std::vector<core::BlockId>& blocks = it->second.blocks;
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
    block_pool_.free_blocks(scratch_);
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
    for (const auto& [id, req] : req_to_blocks_) {
        for (const core::BlockId block : req.blocks) {
            if (block != kNullBlock) {
                ++num_holders[core::to_int(block)];
            }
        }
    }
}

void SingleTypeKvCacheManager::check_invariants() const {
    for (const auto& [id, req] : req_to_blocks_) {
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
