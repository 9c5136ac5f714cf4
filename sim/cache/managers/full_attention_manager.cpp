// FullAttentionManager: left-to-right prefix hit over the hash chain (vLLM FullAttentionManager).
#include "sim/cache/managers/full_attention_manager.h"

#include <algorithm>
#include <cstddef>
#include <span>

#include "common/error.h"

namespace servesim::cache {

std::int64_t FullAttentionManager::find_longest_cache_hit(std::span<const core::BlockHash> block_hashes,
                                                          std::int64_t max_length, std::span<const int> group_indices,
                                                          std::vector<std::vector<core::BlockId>>& hit_per_group) const {
    const std::int64_t max_num_blocks =
        std::min<std::int64_t>(blocks_of_.div(max_length), static_cast<std::int64_t>(block_hashes.size()));
    for (const int g : group_indices) {
        hit_per_group[g].clear();
        hit_per_group[g].reserve(static_cast<std::size_t>(std::max<std::int64_t>(max_num_blocks, 0)));
    }
    // The keys are known up front: prefetch the table slots a few blocks ahead so the probes' cache misses overlap.
    constexpr std::int64_t kPrefetchDistance = 8;
    const auto hash_at = [&](std::int64_t i) { return block_hashes[static_cast<std::size_t>(i)]; };
    std::int64_t n = 0;
    if (group_indices.size() == 1) {
        // One group (every pure full-attention model): no all-groups bookkeeping.
        const int g = group_indices.front();
        std::vector<core::BlockId>& hits = hit_per_group[static_cast<std::size_t>(g)];
        // First the blocks earlier lookups found (hit_chain_memo.h), each re-checked against the pool: one read of
        // the block's entry, which the allocation reads next anyway, instead of a prefix-index probe.
        if (!block_pool_.index_has_duplicates()) {
            while (n < max_num_blocks) {
                const core::BlockHash key = hash_at(n);
                const auto segment = memo_.find(key);
                if (segment.empty()) {
                    break;
                }
                const auto limit = static_cast<std::size_t>(
                    std::min<std::int64_t>(static_cast<std::int64_t>(segment.size()), max_num_blocks - n));
                std::size_t m = 0;
                while (m < limit && block_pool_.is_cached_as(segment[m], hash_at(n + static_cast<std::int64_t>(m)), g)) {
                    ++m;
                }
                if (m == 0) {
                    memo_.forget(key);
                    break;
                }
                hits.insert(hits.end(), segment.begin(), segment.begin() + static_cast<std::ptrdiff_t>(m));
                n += static_cast<std::int64_t>(m);
            }
        }
        const std::int64_t probe_from = n;
        for (std::int64_t i = n; i < std::min(n + kPrefetchDistance, max_num_blocks); ++i) {
            __builtin_prefetch(block_pool_.cached_block_address(hash_at(i), g));
        }
        for (; n < max_num_blocks; ++n) {
            if (n + kPrefetchDistance < max_num_blocks) {
                __builtin_prefetch(block_pool_.cached_block_address(hash_at(n + kPrefetchDistance), g));
            }
            const auto block = block_pool_.get_cached_block(block_hashes[static_cast<std::size_t>(n)], g);
            if (!block.has_value()) {
                break;
            }
            // The allocation that follows reads every hit block's entry (ref count, hash): start that miss now.
            __builtin_prefetch(block_pool_.block_address(*block));
            hits.push_back(*block);
        }
        // What the probes found becomes a segment of its own, keyed where they started: a shared prefix and each branch
        // after it (a tenant's system prompt, then each dialogue's turns) end up as a chain of segments.
        if (n > probe_from) {
            memo_.record(hash_at(probe_from),
                         std::span<const core::BlockId>(hits).subspan(static_cast<std::size_t>(probe_from)));
        }
        return n;
    }
    for (; n < max_num_blocks; ++n) {
        if (!block_pool_.get_cached_blocks(block_hashes[static_cast<std::size_t>(n)], group_indices,
                                           hit_per_group)) {
            break;
        }
    }
    return n;
}

void FullAttentionManager::check_request(const RequestBlocks& req) const {
    SERVESIM_CHECK(std::find(req.blocks.begin(), req.blocks.end(), kNullBlock) == req.blocks.end(),
                   "group {} request {}: a null block in a full-attention list", group_index_,
                   core::to_int(req.id));
}

void FullAttentionManager::free(core::RequestId id) {
    const auto held = blocks_held_and_cached(id, nullptr);
    if (held.has_value() && held->second > 0) {
        // Walk the memo's segments along the request's own cached blocks (ids only; each key is the hash the pool
        // keeps with the block); record the blocks from where the walk leaves the memo, or extend the last segment
        // when it held to its end. Null blocks never occur in a full-attention list; a list with one is not recorded.
        const std::span<const core::BlockId> list = blocks(id).first(static_cast<std::size_t>(held->second));
        std::size_t p = 0;
        std::size_t record_from = 0;  // the start of the last segment that held to its end, or where the walk left
        bool extend = false;
        while (p < list.size()) {
            const auto key = block_pool_.block_hash(list[p]);
            if (!key.has_value() || key->group != group_index_) {
                return SingleTypeKvCacheManager::free(id);
            }
            const auto segment = memo_.find(key->hash);
            // The request's own hits, recorded by its lookup, match a whole segment; a segment of another dialogue
            // of the tenant matches its system prompt, then differs.
            const std::size_t m = leading_blocks_in_common(segment, list.subspan(p));
            if (m == 0) {
                record_from = extend ? record_from : p;
                break;
            }
            if (m == segment.size()) {
                record_from = p;
                extend = true;
                p += m;
                continue;
            }
            p += m;  // the request branches off this segment here
            record_from = p;
            break;
        }
        if (record_from < list.size() && p < list.size()) {
            const auto key = block_pool_.block_hash(list[record_from]);
            if (key.has_value() && key->group == group_index_) {
                memo_.record(key->hash, list.subspan(record_from));
            }
        }
    }
    SingleTypeKvCacheManager::free(id);
}

}  // namespace servesim::cache
