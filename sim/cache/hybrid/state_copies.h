// StateCopies: what keeping recurrent states costs the GPU in one step, counted the same way for every hybrid
// state-cache scheme (vLLM's align / all modes and the state-pool policies of hybrid_cache_policy.h): the state
// copies made (each a read and a write of one state into another slot) and the kernel chunks a copy taken inside a
// prefill chunk adds to the chunked scan. A chunked scan (fla's chunk_gated_delta_rule, chunk 64, as vLLM and
// SGLang run it; Mamba2's SSD scan, its chunk_size) splits each scheduled segment into chunks of C tokens from the
// segment's start and holds the state only at those chunk ends; a state wanted at a position off that grid needs
// the segment cut there, and the two partial chunks each run as a full C-row tile. The step cost model prices both
// (engine::StateSnapshotCost); docs/HYBRID-POLICIES.md "Who pays for a state".
#pragma once

#include <cstdint>
#include <span>

namespace servesim::cache {

struct StateCopies {
    std::int64_t copies = 0;               // states copied into a slot of their own this step
    std::int64_t extra_kernel_chunks = 0;  // chunks the scan gains from cuts at those copies' positions

    StateCopies& operator+=(const StateCopies& o) {
        copies += o.copies;
        extra_kernel_chunks += o.extra_kernel_chunks;
        return *this;
    }
};

// Chunks a scan of the segment (from, to] gains when it is cut at `cuts` (ascending; positions outside the open
// interval (from, to) are ignored: a state at the segment's end is the scan's output): Σ over the pieces of
// ⌈piece / C⌉ − ⌈(to − from) / C⌉. 0 for a cut on the segment's C-grid (from + k·C), 1 or 0 otherwise.
[[nodiscard]] inline std::int64_t extra_kernel_chunks(std::int64_t from_tokens, std::int64_t to_tokens,
                                                      std::span<const std::int64_t> cuts, int chunk_tokens) {
    const auto chunks = [chunk_tokens](std::int64_t n) { return (n + chunk_tokens - 1) / chunk_tokens; };
    std::int64_t total = 0;
    std::int64_t start = from_tokens;
    for (const std::int64_t p : cuts) {
        if (p > start && p < to_tokens) {
            total += chunks(p - start);
            start = p;
        }
    }
    return total + chunks(to_tokens - start) - chunks(to_tokens - from_tokens);
}

}  // namespace servesim::cache
