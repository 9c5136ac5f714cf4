// Host-memory KV tier; see cpu_offload.h.
#include "sim/cache/cpu_offload.h"

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
    const std::int64_t max_blocks = std::min<std::int64_t>(num_tokens / b, static_cast<std::int64_t>(block_hashes.size()));
    std::int64_t end = first;
    while (end < max_blocks && resident(attention_key(block_hashes[static_cast<std::size_t>(end)]))) {
        ++end;
    }
    if (config_.num_mamba_groups > 0) {
        // The state at the hit boundary must be resident too: scan down for the last block with a snapshot.
        while (end > first && !resident(snapshot_key(block_hashes[static_cast<std::size_t>(end - 1)]))) {
            --end;
        }
        if (end > first) {
            touch(snapshot_key(block_hashes[static_cast<std::size_t>(end - 1)]));
        }
    }
    for (std::int64_t i = first; i < end; ++i) {
        touch(attention_key(block_hashes[static_cast<std::size_t>(i)]));
    }
    return (end - first) * b;
}

void CpuOffloadManager::record(std::int64_t num_tokens, std::int64_t local_hit_tokens,
                               std::int64_t external_hit_tokens) {
    stats_.queries += num_tokens - local_hit_tokens;
    stats_.hits += external_hit_tokens;
}

void CpuOffloadManager::store(std::span<const core::BlockHash> block_hashes, std::int64_t first_block,
                              std::int64_t end_block, std::int64_t snapshot_block) {
    auto queue = [&](std::uint64_t key, int units) {
        if (!resident(key) && in_transit_.emplace(key, true).second) {
            queued_.push_back(Entry{key, units});
        }
    };
    for (std::int64_t i = first_block; i < end_block; ++i) {
        queue(attention_key(block_hashes[static_cast<std::size_t>(i)]), config_.num_attention_groups);
    }
    if (config_.num_mamba_groups > 0 && snapshot_block >= 0) {
        queue(snapshot_key(block_hashes[static_cast<std::size_t>(snapshot_block)]), config_.num_mamba_groups);
    }
}

void CpuOffloadManager::on_step_end() {
    for (const auto& e : copying_) {
        in_transit_.erase(e.key);
        insert(e.key, e.units);
    }
    copying_ = std::move(queued_);
    queued_.clear();
}

}  // namespace servesim::cache
