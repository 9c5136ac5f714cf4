// A running vLLM server's Prometheus /metrics text (`curl http://HOST:PORT/metrics > after.prom`), read for the
// hit-rate check of `servesim validate --metrics-after` (docs/HIT-RATE-CHECK.md).
// vLLM's PrometheusStatLogger (vllm/v1/metrics/loggers.py) exports, per engine (labels model_name, engine):
//   - counters vllm:prefix_cache_queries and vllm:prefix_cache_hits, in tokens, added at every prefix-cache lookup
//     of a request that was not preempted (KVCacheManager.get_computed_blocks, PrefixCacheStats.record);
//     prometheus_client writes a counter X as the sample X_total (and X_created, which is not read here);
//   - the gauge vllm:kv_cache_usage_perc, 1 − free / (num_gpu_blocks − 1) at the last step (a fraction, 1 = full);
//   - counters vllm:num_preemptions and vllm:request_success (one series per finished_reason).
// The same names from 0.10 (when vllm:gpu_prefix_cache_* became deprecated aliases) through 0.34 (docs/VLLM-
// VERSIONS.md). Counters are cumulative since the server started, so a run's own figures are the increase between
// a dump taken before the load and one taken after it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace servesim::app {

// What one /metrics dump holds of the samples above: counters summed over every series (engines, finished reasons),
// the usage gauge averaged over engines. Unset: the dump has no such sample.
struct ServerMetrics {
    std::string path;
    std::optional<double> prefix_cache_queries;
    std::optional<double> prefix_cache_hits;
    std::optional<double> kv_cache_usage;  // fraction, mean over the engine series
    int kv_cache_usage_series = 0;
    std::optional<double> preemptions;
    std::optional<double> request_success;
};

// Parses Prometheus text exposition (comments, `name{label="v",…} value [timestamp]`). A ConfigError names the file
// and line for a malformed sample, and the file when the prefix-cache counters are missing (not a vLLM dump).
// `path` is only used in messages.
[[nodiscard]] ServerMetrics parse_server_metrics(std::string_view text, const std::string& path);
// Reads the file (common/input_file.h bounds) and parses it.
[[nodiscard]] ServerMetrics read_server_metrics(const std::string& path);

// A run's share of the counters: after − before (before unset: the server served nothing else since it started).
struct ServerMetricsDelta {
    double prefix_cache_queries = 0;  // tokens
    double prefix_cache_hits = 0;     // tokens
    std::optional<double> kv_cache_usage;  // the after dump's gauge (fraction)
    std::optional<double> preemptions;
    std::optional<double> request_success;
    // hits / queries; unset when no token was queried (prefix caching off, or no request between the dumps).
    [[nodiscard]] std::optional<double> hit_rate() const {
        if (prefix_cache_queries <= 0) {
            return std::nullopt;
        }
        return prefix_cache_hits / prefix_cache_queries;
    }
};

// A ConfigError when a counter went down between the dumps (the server restarted: the difference means nothing).
[[nodiscard]] ServerMetricsDelta server_metrics_delta(const std::optional<ServerMetrics>& before,
                                                      const ServerMetrics& after);

}  // namespace servesim::app
