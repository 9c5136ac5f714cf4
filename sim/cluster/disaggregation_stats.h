// DisaggregationStats: what a prefill–decode disaggregated run (sim/cluster/disaggregation.h) measures besides the
// client's Summary: the KV reads from the prefill to the decode instances, each pool's utilisation and the prefill
// pool's prefix-cache counters. Its own header so SimulationResult can carry it.
#pragma once

#include <cstdint>

namespace servesim::cluster {

// What a disaggregated run measured besides the client's Summary.
struct DisaggregationStats {
    int num_prefill_replicas = 0;
    int num_decode_replicas = 0;
    std::int64_t num_transfers = 0;       // decode-side reads of requests sent after the warm-up
    double transfer_bytes = 0;            // their bytes, all tensor-parallel ranks
    double transfer_ms_mean = 0;          // read time (lookup to last rank's read done), over those reads
    double transfer_ms_p50 = 0;
    double transfer_ms_p90 = 0;
    double transfer_ms_p99 = 0;
    double transfer_ms_max = 0;
    std::int64_t decode_local_hit_tokens = 0;  // of those reads' prompts: tokens the decode side held (not read)
    double prefill_busy_fraction = 0;     // Σ step time ÷ (replicas × run time), per pool
    double decode_busy_fraction = 0;
    std::int64_t prefill_prefix_queries = 0;  // vllm:prefix_cache_queries / hits of the prefill pool, measured window
    std::int64_t prefill_prefix_hits = 0;
    double prefill_ttft_ms_mean = 0;      // send → the prefill instance's token (what the proxy waits for)
    double prefill_ttft_ms_p99 = 0;
    std::int64_t peak_held_requests = 0;  // finished prefills whose blocks still wait for their read, at most
};

}  // namespace servesim::cluster
