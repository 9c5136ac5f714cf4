// VllmVersion: the vLLM release whose engine rules a run follows (`engine.vllm_version`, `--vllm-version`).
// Every rule that changed between releases asks this type one named question — one method per behaviour change,
// named after the behaviour and citing the PR that changed it — so a reader finds each version switch by name and
// docs/VLLM-VERSIONS.md lists the same switches with the release each shipped in. Releases outside
// [kOldestModelled, kNewestModelled] are refused: servesim does not know their rules.
#pragma once

#include <compare>
#include <string>

namespace servesim::core {

struct VllmVersion {
    int major = 0;
    int minor = 0;
    int patch = 0;

    friend constexpr auto operator<=>(const VllmVersion&, const VllmVersion&) = default;

    [[nodiscard]] constexpr bool at_least(int maj, int min, int pat = 0) const {
        return *this >= VllmVersion{maj, min, pat};
    }

    // "0.26" for x.y.0, "0.25.1" otherwise.
    [[nodiscard]] std::string str() const;

    // --- start-up memory and defaults ---
    // PR #41069 (0.21): "GPU KV cache size" = max concurrency × max_model_len.
    [[nodiscard]] constexpr bool kv_size_from_concurrency() const { return at_least(0, 21); }
    // PR #51726 (upstream 4988df2eb, merged 2026-08-11: after #50991, which 0.28.0 has, before #52216, which it has
    // not; servesim takes 0.29, uncertain): EngineArgs.get_batch_defaults gives a GPU with >= 160 GiB of total memory
    // (B200, B300, MI300X…) max_num_batched_tokens 16384 for the API server (before: 8192, as for H100/H200).
    [[nodiscard]] constexpr bool batch_tokens_16k_on_160gib_gpus() const { return at_least(0, 29); }
    // PR #38284 (0.21): gpu_memory_utilization defaults to 0.92.
    [[nodiscard]] constexpr double default_gpu_memory_utilization() const { return at_least(0, 21) ? 0.92 : 0.90; }

    // --- hybrid prefix caching ---
    // Sliding-window admission cap: the full-ISL check charges an SWA group at most
    // cdiv(min(window − 1 + max_num_batched_tokens, max_model_len), B) + 1 blocks (get_num_blocks_to_allocate with
    // apply_admission_cap; the fix for issue #39734). Verified at upstream 9aaf83ef (2026-05-19, ≈ 0.22); the PR
    // that added it and earlier releases were not verified, so servesim applies it from 0.22.
    [[nodiscard]] constexpr bool swa_admission_cap() const { return at_least(0, 22); }
    // PR #37898 (Marconi-style admission; first seen in the 0.24.0 source, absent in 0.22.1): a waiting hybrid
    // request whose full-attention hit exceeds its state-constrained hit by >= one block has its first prefill
    // chunk cut at the shared-prefix junction, so a Mamba state is cached there (Scheduler._mamba_block_aligned_split).
    [[nodiscard]] constexpr bool marconi_shared_prefix_admission() const { return at_least(0, 24); }
    // PR #47782 (merged after 2026-07-09; servesim takes 0.27.0 as its first release): the junction becomes
    // request.shared_prefix_boundary, kept across steps, so any prefill chunk (waiting or running) that would cross
    // it stops there; before, only the first chunk of a waiting request was cut.
    [[nodiscard]] constexpr bool shared_prefix_boundary_on_request() const { return at_least(0, 27); }
    // PR #50991 (merged 2026-08-04, in 0.28.0): prefix caching on by default for hybrid models.
    [[nodiscard]] constexpr bool hybrid_prefix_caching_on_by_default() const { return at_least(0, 28); }
    // PR #50991 (0.28.0): with prefix caching on and no mode given, every hybrid defaults to mamba_cache_mode
    // align (before: all for classes that support it, else align).
    [[nodiscard]] constexpr bool mamba_align_default_for_all_hybrids() const { return at_least(0, 28); }
    // PR #52216 (merged 2026-08-17, not in 0.28.0, so 0.29.0): prefix_cache_retention_interval becomes an engine
    // argument defaulting to 0 (keep only the replay boundary and shared-prefix junctions); before it was the
    // VLLM_PREFIX_CACHE_RETENTION_INTERVAL env var (#43447 in 0.23.0, Mamba in #45845), unset = dense retention.
    [[nodiscard]] constexpr bool sparse_retention_by_default() const { return at_least(0, 29); }
    // PR #45845 (opened 2026-06-16, merged; release not confirmed, servesim takes 0.25.0): Mamba groups honour the
    // retention interval; before it applied to sliding-window groups only (#43447, 0.23.0), so a Mamba group kept
    // every boundary whatever the interval.
    [[nodiscard]] constexpr bool mamba_honours_retention_interval() const { return at_least(0, 25); }
    // PRs #45939 + #46384 (partial prefix-cache hits for hybrids, named in the 0.26.0 release notes): the
    // --prefix-match-unit engine argument exists (default: the gcd of the prefix-cacheable groups' block sizes).
    [[nodiscard]] constexpr bool has_prefix_match_unit() const { return at_least(0, 26); }
    // --- CPU offload and memory ---
    // PR #43797 (merged 2026-05-29, one day before 0.22.0; first modelled in 0.23): the OffloadingConnector stores
    // prompt blocks only (`offload_prompt_only`, default True; offloading/scheduler.py _build_store_jobs clamps
    // to num_prompt_tokens). Older releases also store the blocks a request generates.
    [[nodiscard]] constexpr bool offload_prompt_only_by_default() const { return at_least(0, 23); }
    // PRs #42554 + #44599 (both on main by 2026-06-14; first modelled in 0.24): an external (CPU) hit on a Mamba
    // `align` model no longer asserts in Scheduler._mamba_block_aligned_split, and the hit window is rounded down
    // to the Mamba block size (OffloadingConnectorScheduler._lookup, resolve_mamba_align_size). Older releases
    // crash on the first such hit, so servesim refuses the configuration at start-up.
    [[nodiscard]] constexpr bool offload_supports_mamba_align() const { return at_least(0, 24); }
    // VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 "since v0.21.0" (vllm/envs.py; the start-up log says
    // so): Worker.determine_available_memory subtracts GPUModelRunner.profile_cudagraph_memory from the KV budget.
    [[nodiscard]] constexpr bool kv_budget_subtracts_cudagraph_estimate() const { return at_least(0, 21); }
    // 0.31 to 0.34 add no switch: no change to a rule servesim models was found in them (docs/VLLM-VERSIONS.md,
    // "Releases 0.31 to 0.34", lists the pull requests checked and why each moves nothing servesim predicts).
};

// The range of releases whose rules servesim models, and the default (the newest).
inline constexpr VllmVersion kOldestModelled{0, 18, 0};
inline constexpr VllmVersion kNewestModelled{0, 34, 0};

// Parses "0.26", "0.26.0" or "0.25.1". Throws ConfigError (without a key prefix: callers add file and key) for
// malformed text or a release outside the modelled range, naming the range.
[[nodiscard]] VllmVersion parse_vllm_version(const std::string& text);

}  // namespace servesim::core
