// Host-memory KV tier; see cpu_offload.h.
#include "sim/cache/offload/cpu_offload.h"

#include <algorithm>

#include "common/error.h"
#include "sim/core/content.h"

namespace servesim::cache {

CpuOffloadManager::CpuOffloadManager(const CpuOffloadConfig& config) : config_(config) {
    SERVESIM_CHECK(config_.num_cpu_blocks >= 0 && config_.block_size_tokens > 0, "bad offload config: {} blocks of {}",
                   config_.num_cpu_blocks, config_.block_size_tokens);
}

std::uint64_t CpuOffloadManager::attention_key(core::BlockHash h) { return core::hash_combine(1, core::to_int(h)); }

std::uint64_t CpuOffloadManager::snapshot_key(core::BlockHash h) { return core::hash_combine(2, core::to_int(h)); }

void CpuOffloadManager::touch(std::uint64_t key) {
    const auto it = index_.find(key);
    if (it != index_.end()) {
        lru_.splice(lru_.end(), lru_, it->second);
    }
}

void CpuOffloadManager::insert(std::uint64_t key, int units) {
    if (resident(key) || units > config_.num_cpu_blocks) {
        return;
    }
    // LRU eviction, only while storing into a full cache (CPUOffloadingManager.prepare_store).
    while (used_units_ + units > config_.num_cpu_blocks && !lru_.empty()) {
        used_units_ -= lru_.front().units;
        index_.erase(lru_.front().key);
        lru_.pop_front();
    }
    lru_.push_back(Entry{key, units});
    index_[key] = std::prev(lru_.end());
    used_units_ += units;
}

std::int64_t CpuOffloadManager::lookup(std::span<const core::BlockHash> block_hashes, std::int64_t local_hit_tokens,
                                       std::int64_t num_tokens) {
    const std::int64_t b = config_.block_size_tokens;
    const std::int64_t first = local_hit_tokens / b;
    // _lookup: max_hit_size_tokens = num_tokens (− 1 with a sliding-window/Mamba group); #44599 rounds it down to
    // the Mamba align block. Without the cap the −1 has no effect in whole blocks here: a full-prompt hit has its
    // last token recomputed when the load lands (Scheduler.finish_loads), as vLLM's scheduler does.
    const std::int64_t max_hit_tokens = config_.mamba_align_hit_cap ? (num_tokens - 1) / b * b : num_tokens;
    const std::int64_t max_blocks =
        std::min<std::int64_t>(max_hit_tokens / b, static_cast<std::int64_t>(block_hashes.size()));
    std::int64_t end = first;
    while (end < max_blocks && resident(attention_key(block_hashes[static_cast<std::size_t>(end)]))) {
        ++end;
    }
    if (config_.num_mamba_groups > 0) {
        // The state at the hit boundary must be resident too: scan down for the last block with a snapshot.
        while (end > first && !resident(snapshot_key(block_hashes[static_cast<std::size_t>(end - 1)]))) {
            --end;
        }
    }
    // get_num_new_matched_tokens: update_num_hit_blocks(local + external), then _touch(req_status).
    touch_request(block_hashes, end > first ? end : first);
    return (end - first) * b;
}

void CpuOffloadManager::touch_request(std::span<const core::BlockHash> block_hashes, std::int64_t num_hit_blocks) {
    // Group order as servesim keys them: the attention key first, then the snapshot key (the Mamba groups).
    for (std::size_t i = block_hashes.size(); i-- > 0;) {
        touch(attention_key(block_hashes[i]));
    }
    if (config_.num_mamba_groups > 0) {
        const auto from = static_cast<std::size_t>(std::max<std::int64_t>(0, num_hit_blocks - 1));
        for (std::size_t i = block_hashes.size(); i-- > from;) {
            touch(snapshot_key(block_hashes[i]));
        }
    }
}

void CpuOffloadManager::record(std::int64_t num_tokens, std::int64_t local_hit_tokens,
                               std::int64_t external_hit_tokens) {
    stats_.queries += num_tokens - local_hit_tokens;
    stats_.hits += external_hit_tokens;
}

void CpuOffloadManager::store(std::span<const core::BlockHash> block_hashes, std::int64_t first_block,
                              std::int64_t end_block, std::int64_t snapshot_first, std::int64_t snapshot_end,
                              std::int64_t num_hit_blocks) {
    StoreJob job;
    auto queue = [&](std::uint64_t key, int units) {
        if (!resident(key) && in_transit_.emplace(key, true).second) {
            job.entries.push_back(Entry{key, units});
        }
    };
    for (std::int64_t i = first_block; i < end_block; ++i) {
        queue(attention_key(block_hashes[static_cast<std::size_t>(i)]), config_.num_attention_groups);
    }
    if (config_.num_mamba_groups > 0) {
        for (std::int64_t i = std::max<std::int64_t>(0, snapshot_first); i < snapshot_end; ++i) {
            queue(snapshot_key(block_hashes[static_cast<std::size_t>(i)]), config_.num_mamba_groups);
        }
    }
    if (job.entries.empty()) {
        return;  // nothing to store: vLLM skips prepare_store's _touch too (keys_to_store empty)
    }
    const auto full_blocks = static_cast<std::size_t>(std::max(end_block, snapshot_end));
    job.chain.assign(block_hashes.begin(),
                     block_hashes.begin() + static_cast<std::ptrdiff_t>(std::min(full_blocks, block_hashes.size())));
    job.num_hit_blocks = num_hit_blocks;
    queued_.push_back(std::move(job));
}

void CpuOffloadManager::on_step_end() {
    // prepare_store inserts the new keys in block order, then _touch(req_status) refreshes the request's chain
    // (reversed): here both happen when the copy completes, in store order.
    for (const auto& job : copying_) {
        for (const auto& e : job.entries) {
            in_transit_.erase(e.key);
            insert(e.key, e.units);
        }
        touch_request(job.chain, job.num_hit_blocks);
    }
    copying_ = std::move(queued_);
    queued_.clear();
}

}  // namespace servesim::cache
