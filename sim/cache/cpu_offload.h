// CpuOffloadManager: vLLM's native KV offloading to host memory (--kv-offloading-size; vllm-v1-behaviour.md §6.2:
// vllm/v1/kv_offload/cpu/manager.py CPUOffloadingManager, spec.py CPUOffloadingSpec, and
// distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py OffloadingConnectorScheduler). It owns the host
// side only: which (block hash, group) keys are resident, LRU order and capacity, the external counters. The
// scheduler drives it (sim/engine/scheduler.cpp): it stores every newly full block eagerly (write-through,
// independent of GPU eviction), and after the local GPU lookup extends the hit with contiguous host-resident
// blocks, which then load while the request waits at least one step.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/ids.h"

namespace servesim::cache {

struct CpuOffloadConfig {
    // CPU blocks = cpu_bytes // (bytes of one GPU block id across all KV tensors): one unit per (hash, group) key.
    std::int64_t num_cpu_blocks = 0;
    int block_size_tokens = 16;
    int num_attention_groups = 1;  // keys stored per block index
    int num_mamba_groups = 0;      // keys stored per state snapshot (hybrids); a hit needs the snapshot in all
    double load_s_per_token = 0;   // host → GPU transfer time per token of the external hit
};

// vLLM's external connector counters (vllm:external_prefix_cache_queries / _hits), in tokens.
struct ExternalCacheStats {
    std::int64_t queries = 0;
    std::int64_t hits = 0;
};

class CpuOffloadManager {
public:
    explicit CpuOffloadManager(const CpuOffloadConfig& config);

    // OffloadingConnectorScheduler._lookup: contiguous host-resident blocks from the local hit onwards, capped at
    // num_tokens, in whole blocks; for hybrids the hit must end on a block whose state snapshot is resident (the
    // Mamba groups are looked up as a one-block window). Hit keys are touched (LRU). Returns external tokens.
    [[nodiscard]] std::int64_t lookup(std::span<const core::BlockHash> block_hashes, std::int64_t local_hit_tokens,
                                      std::int64_t num_tokens);

    // Records the counters after a successful allocation (non-preempted requests only).
    void record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens);

    // _build_store_jobs: queues attention blocks [first_block, end_block) and, if `snapshot_block` >= 0, the state
    // snapshot at that block for every Mamba group. Keys already resident or queued are skipped. Queued stores
    // become loadable two step boundaries later (the copy runs in the next step, complete_store after it).
    void store(std::span<const core::BlockHash> block_hashes, std::int64_t first_block, std::int64_t end_block,
               std::int64_t snapshot_block);

    // Called at each step end: completes the copies started in this step and starts those queued.
    void on_step_end();

    [[nodiscard]] std::int64_t num_resident_blocks() const { return used_units_; }

    [[nodiscard]] const ExternalCacheStats& stats() const { return stats_; }

    [[nodiscard]] double load_time_s(std::int64_t tokens) const {
        return config_.load_s_per_token * static_cast<double>(tokens);
    }

    [[nodiscard]] const CpuOffloadConfig& config() const { return config_; }

private:
    struct Entry {
        std::uint64_t key = 0;
        int units = 0;
    };

    [[nodiscard]] static std::uint64_t attention_key(core::BlockHash h);
    [[nodiscard]] static std::uint64_t snapshot_key(core::BlockHash h);
    [[nodiscard]] bool resident(std::uint64_t key) const { return index_.count(key) != 0; }
    void touch(std::uint64_t key);
    void insert(std::uint64_t key, int units);

    CpuOffloadConfig config_;
    std::list<Entry> lru_;  // front = least recently used
    std::unordered_map<std::uint64_t, std::list<Entry>::iterator> index_;
    std::vector<Entry> queued_;    // stores scheduled this step
    std::vector<Entry> copying_;   // stores whose copy runs in the current step
    std::unordered_map<std::uint64_t, bool> in_transit_;
    std::int64_t used_units_ = 0;
    ExternalCacheStats stats_;
};

}  // namespace servesim::cache
