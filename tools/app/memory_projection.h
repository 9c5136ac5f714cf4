// Memory projection (issue 41; docs/MEMORY-PROJECTION.md): before anything is simulated, the host memory a batch of
// prepared runs will reach at its peak, from the scenario alone — every replica's KV block metadata (the pool vLLM's
// BlockPool keeps per GPU block, sized by the memory plan, whatever the GPU bytes behind it), the requests that can
// be alive at once (waiting or running, with the block hashes vLLM's Request computes for the whole prompt at
// arrival: v1/request.py Request.__init__ block_hasher), the tenants' client state, traces held in memory
// (order-only), and the per-request records kept for outputs and exact percentiles. A run past a bound the user can
// raise (--max-memory) is refused with the projection, before the first run starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/app/experiment.h"

namespace servesim::app {

struct MemoryTerm {
    std::string what;       // "KV block metadata: 64 replicas x 169,491 blocks"
    std::int64_t bytes = 0;
};

// One run's projection: its terms, largest first.
struct RunMemoryProjection {
    std::string run;  // the experiment's name
    std::vector<MemoryTerm> terms;
    std::int64_t total_bytes = 0;
};

struct MemoryProjection {
    std::int64_t base_bytes = 0;         // the process before any run (code, model and GPU catalogs, scenario)
    std::int64_t shared_bytes = 0;       // held for the whole batch (order-only traces)
    std::vector<RunMemoryProjection> concurrent;  // the `jobs` largest runs, which may run at once
    std::int64_t total_bytes = 0;        // base + shared + the concurrent runs'
};

// The projection for a prepared batch run on `jobs` threads (MPI ranks: per process, each holds `jobs` runs).
[[nodiscard]] MemoryProjection project_memory(const std::vector<PreparedExperiment>& runs, int jobs);

// One run alone (what project_memory sums).
[[nodiscard]] RunMemoryProjection project_run_memory(const PreparedExperiment& run);

// The default bound: 80 % of the machine's physical memory (sysconf), leaving the rest to the system and the
// outputs written after the runs; 16 GiB when the machine's memory cannot be read.
[[nodiscard]] std::int64_t default_memory_bound_bytes();

// --max-memory SIZE: "24GiB", "500MB", "1.5TB", or a number of bytes; refused unless above 0.
[[nodiscard]] std::int64_t parse_memory_size(const std::string& text, const std::string& origin);

// "1.23 GB" (decimal units, as the projection and its refusal print them).
[[nodiscard]] std::string memory_text(std::int64_t bytes);

// One line for stderr: "projected peak memory 412 MB of 19.2 GB allowed (--max-memory)".
[[nodiscard]] std::string projection_line(const MemoryProjection& p, std::int64_t bound_bytes);

// Throws ConfigError naming the projection, its largest terms and --max-memory when p.total_bytes > bound_bytes.
void check_memory_projection(const MemoryProjection& p, std::int64_t bound_bytes);

}  // namespace servesim::app
