// StateSnapshotCost: the GPU time a step spends keeping recurrent states for prefix caching, one model for every
// hybrid state-cache scheme (vLLM's align and all modes, priced from BatchShape::num_snapshots, and the state-pool
// policies, from HybridStateCache's copies): each state copied into a slot of its own is one read and one write of
// the state at the GPU's copy bandwidth (datasheet × bandwidth_efficiency), and each kernel chunk a copy off the
// chunked scan's grid adds costs what the roofline charges one chunk of the scan (RooflineCostModel::scan_chunk_ms).
// Sources and worked figures: docs/HYBRID-POLICIES.md "What a snapshot costs" (issue 44).
#pragma once

#include "sim/cache/hybrid/state_copies.h"

namespace servesim::engine {

struct StateSnapshotCost {
    double copy_ms = 0;          // one state read and written (2 · state bytes / copy bandwidth)
    double kernel_chunk_ms = 0;  // one more chunk of the chunked scan
    int kernel_chunk_tokens = 64;

    [[nodiscard]] double ms(const cache::StateCopies& c) const {
        return copy_ms * static_cast<double>(c.copies) + kernel_chunk_ms * static_cast<double>(c.extra_kernel_chunks);
    }
};

}  // namespace servesim::engine
