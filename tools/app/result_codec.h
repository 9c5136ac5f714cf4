// Result codec: one run's ExperimentResult as bytes and back, losslessly (every double bit for bit), so a result
// computed on another MPI rank (tools/mpi/) or read back from a partial-results file (--resume) prints exactly as one
// computed in this process (docs/MPI.md). What a run shares with its preparation — its ExperimentConfig and memory
// plan — is not encoded: the receiver takes both from its own PreparedExperiment of the same run. A config's
// fingerprint says which run a stored result belongs to. The bytes are this machine's layout (little-endian x86-64
// and aarch64 alike); a file from another byte order is refused, not misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tools/app/experiment.h"

namespace servesim::app {

// The fields of one run (not config, plan or replicate_runs: replicates are gathered after the runs).
[[nodiscard]] std::string encode_result(const ExperimentResult& r);

// Replaces the encoded fields of `r` (config and plan untouched); InvariantError if the bytes are not one whole
// result of this codec.
void decode_result(std::string_view bytes, ExperimentResult& r);

// The version of the bytes encode_result writes (a partial-results file records it, and refuses another's).
[[nodiscard]] std::uint32_t result_codec_version();

// FNV-1a over every field of the config (the workload as YAML text): equal configs, equal fingerprints.
[[nodiscard]] std::uint64_t config_fingerprint(const ExperimentConfig& config);

// How many fields of each struct the codec reads and writes. tests/tools/result_codec_test.cpp compares them with
// the structs' own counts, so a field added to one of them fails there until it is added to result_codec.cpp (a
// field the codec missed would be lost on its way between ranks, and MPI output would differ).
struct CodecFieldCounts {
    static constexpr std::size_t kExperimentResult = 18;  // 15 encoded + config, plan, replicate_runs
    static constexpr std::size_t kSimulationResult = 10;  // with speculative
    static constexpr std::size_t kHybridStateStats = 9;  // with num_state_copies
    static constexpr std::size_t kSummary = 37;  // with send_span_s, ttft_by_send_third, request_itls_ms
    static constexpr std::size_t kDistribution = 8;  // with p95
    static constexpr std::size_t kRequestRecord = 11;
    static constexpr std::size_t kTimeSample = 6;
    static constexpr std::size_t kStepCost = 11;  // with spec_draft_ms and jit_ms
    static constexpr std::size_t kRejectionStats = 4;
    static constexpr std::size_t kRunningMoments = 3;
    static constexpr std::size_t kOrderOnlyResult = 9;
    static constexpr std::size_t kExperimentConfig = 29;  // with request_path, keep_request_itls
    static constexpr std::size_t kRequestPathConfig = 6;
    static constexpr std::size_t kKvConnectorSettings = 9;
    static constexpr std::size_t kRouterOptions = 9;
    static constexpr std::size_t kEngineSettings = 43;  // with the four speculative_* keys and triton_jit_compile_ms
    static constexpr std::size_t kSpeculativeStats = 4;
    static constexpr std::size_t kGoodputConfig = 3;
    static constexpr std::size_t kDisaggregationStats = 17;
    static constexpr std::size_t kPoolSettings = 5;
    static constexpr std::size_t kDisaggregationSettings = 7;
};

}  // namespace servesim::app
