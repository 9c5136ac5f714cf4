// CpuOffloadManager: vLLM's native KV offloading to host memory (--kv-offloading-size; docs/VLLM-RULES.md §6.2:
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

#include "sim/cache/offload/kv_connector.h"
#include "sim/core/ids.h"

namespace servesim::cache {

struct CpuOffloadConfig {
    // CPU blocks = cpu_bytes // (bytes of one GPU block id across all KV tensors): one unit per (hash, group) key.
    std::int64_t num_cpu_blocks = 0;
    int block_size_tokens = 16;
    int num_attention_groups = 1;  // keys stored per block index
    int num_mamba_groups = 0;      // keys stored per state snapshot (hybrids); a hit needs the snapshot in all
    double load_s_per_token = 0;   // host → GPU transfer time per token of the external hit
    // OffloadingSpec.offload_prompt_only (PR #43797, VllmVersion::offload_prompt_only_by_default): only blocks
    // within the request's prompt are stored; blocks it generates are not.
    bool offload_prompt_only = false;
    // Mamba `align` (PR #44599, resolve_mamba_align_size): the hit window is round_down(num_tokens − 1, B), so a
    // prompt ending exactly on a block boundary does not load its last block. Off: the window is num_tokens in
    // whole blocks (the scheduler recomputes the last token).
    bool mamba_align_hit_cap = false;
    // Mamba `all` mode: every block boundary of a chunk has its own state block, and _build_store_jobs stores
    // every non-null Mamba block id in [next_stored, num_blocks) — one snapshot per block, not one per chunk end.
    bool state_at_every_block = false;
};

// vLLM's external connector counters (vllm:external_prefix_cache_queries / _hits), in tokens.
struct ExternalCacheStats {
    std::int64_t queries = 0;
    std::int64_t hits = 0;
};

class CpuOffloadManager final : public KvConnector {
public:
    explicit CpuOffloadManager(const CpuOffloadConfig& config);

    // OffloadingConnectorScheduler._lookup: contiguous host-resident blocks from the local hit onwards, capped at
    // num_tokens (Mamba align: round_down(num_tokens − 1, B)), in whole blocks; for hybrids the hit must end on a
    // block whose state snapshot is resident (the Mamba groups are looked up as a one-block window). Then
    // get_num_new_matched_tokens → _touch refreshes the request's whole chain (see touch_request). Returns
    // external tokens.
    [[nodiscard]] std::int64_t lookup(std::span<const core::BlockHash> block_hashes, std::int64_t local_hit_tokens,
                                      std::int64_t num_tokens) override;

    // OffloadingConnectorScheduler._touch → LRUCachePolicy.touch (cpu/policies/lru.py): every resident attention
    // key of the request's full blocks, in reverse block order, so block 0 ends most recent (the GPU-hit prefix
    // included); state snapshots from the hit block onwards (a one-block window: keys[num_hit_blocks − 1:]).
    void touch_request(std::span<const core::BlockHash> block_hashes, std::int64_t num_hit_blocks);

    // Records the counters after a successful allocation (non-preempted requests only).
    void record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens) override;

    // _build_store_jobs: queues attention blocks [first_block, end_block) and the state snapshots of blocks
    // [snapshot_first, snapshot_end) for every Mamba group. Keys already resident or queued are skipped. Queued
    // stores become loadable two step boundaries later (the copy runs in the next step, complete_store after it);
    // when they land, the request's chain is touched as prepare_store + _touch leave it (block 0 most recent).
    // `num_hit_blocks` is the request's hit at admission (it bounds the snapshot window that _touch refreshes).
    void store(std::span<const core::BlockHash> block_hashes, std::int64_t first_block, std::int64_t end_block,
               std::int64_t snapshot_first, std::int64_t snapshot_end, std::int64_t num_hit_blocks = 0) override;

    // Called at each step end: completes the copies started in this step and starts those queued.
    void on_step_end() override;

    [[nodiscard]] std::int64_t num_resident_blocks() const { return used_units_; }

    [[nodiscard]] const ExternalCacheStats& stats() const override { return stats_; }

    [[nodiscard]] double load_time_s(std::int64_t tokens) const {
        return config_.load_s_per_token * static_cast<double>(tokens);
    }

    // The host link's fixed time per token (no contention: one engine's own PCIe link).
    [[nodiscard]] core::Duration start_load(std::int64_t tokens, core::SimTime) override {
        return core::Duration::from_s(load_time_s(tokens));
    }

    [[nodiscard]] const CpuOffloadConfig& config() const override { return config_; }

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
    // One _build_store_jobs call: its new keys (in block order) and the chain _touch refreshes after them.
    struct StoreJob {
        std::vector<Entry> entries;
        std::vector<core::BlockHash> chain;  // the request's full-block hashes at store time
        std::int64_t num_hit_blocks = 0;
    };
    std::vector<StoreJob> queued_;    // stores scheduled this step
    std::vector<StoreJob> copying_;   // stores whose copy runs in the current step
    std::unordered_map<std::uint64_t, bool> in_transit_;
    std::int64_t used_units_ = 0;
    ExternalCacheStats stats_;
};

}  // namespace servesim::cache
