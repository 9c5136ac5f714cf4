// Validation against real vLLM runs (`servesim validate`, docs/VALIDATION.md): a real run's measurements are read,
// its request stream is replayed through the simulator with the run's engine settings, and every metric the run
// measured is set beside the prediction, as the run's own client defined it. Three inputs:
//   - a run folder of the load-generator format of kubernetes-sigs/inference-perf as collected in the development set
//     (experiment.json: engine settings, stages, metrics per stage; requests.csv.gz: the request stream);
//   - the result JSON of `vllm bench serve --save-result --save-detailed` (per request: input and output lengths,
//     TTFT, ITLs, errors; send times when the file has them);
//   - a per-request CSV or JSONL: send_s, prompt_tokens, output_tokens, ttft_ms, e2e_ms[, failed][, prefix_id].
// The engine settings of the last two come from the command line (--model, --gpu, vLLM's flags) or a scenario.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/app/experiment.h"
#include "tools/app/server_metrics.h"

namespace servesim::app {

// One request of a measured run, as its client sent and timed it.
struct MeasuredRequest {
    double send_s = 0;  // from the run's first send
    std::int64_t prompt_tokens = 0;
    std::int64_t output_tokens = 0;
    std::optional<std::int64_t> prefix_id;  // equal ids: the same prompt text (a trace's prefix_id)
    std::optional<double> ttft_ms;          // per-request figures, where the input has them
    std::optional<double> e2e_ms;
    bool failed = false;  // an error or a time-out: left out of every latency figure, as its client leaves it out
};

// The statistics a client reports over a window of requests. Every field unset = not measured.
struct RunStats {
    std::optional<double> ttft_mean_ms, ttft_p50_ms, ttft_p90_ms, ttft_p99_ms;
    std::optional<double> e2e_mean_ms, e2e_p50_ms, e2e_p90_ms, e2e_p99_ms;
    std::optional<double> itl_mean_ms;  // the client's definition, see MeasuredWindow::itl_output_tokens
    std::optional<double> completed, failed;
    std::optional<double> throughput_rps, output_tokens_per_s;
};

// A window of a run: the requests sent in [send_from_s, send_to_s) (a stage of the load, or the whole run).
struct MeasuredWindow {
    std::string name;  // "all", "stage 1", ...
    double send_from_s = 0;
    double send_to_s = 0;  // +inf for the last
    RunStats measured;
    // The client's ITL mean is (E2E mean − TTFT mean) / (this − 1) when set: inference-perf divides by its own
    // re-tokenisation of the returned text (measured_extra.output_len_mean), and the prediction is put in the same
    // terms. Unset: the pooled mean of the gaps, Σ(E2E − TTFT) / Σ(output − 1), as vllm bench serve pools ITLs.
    std::optional<double> itl_output_tokens;
};

struct MeasuredRun {
    std::string name;
    std::string path;
    std::string format;  // "inference-perf", "vllm-bench", "requests-csv", "requests-jsonl"
    // The scenario the run is replayed with (model, gpu, engine keys; the workload is the request stream), as
    // YAML text; the command line's flags and --set are layered on top.
    std::string scenario_yaml;
    std::vector<MeasuredRequest> requests;  // in send order
    std::string trace_path;                 // a file already holding the stream in servesim's csv trace format
    std::vector<MeasuredWindow> windows;    // "all" first
    std::optional<std::int64_t> kv_blocks;  // "GPU KV cache size" / num_gpu_blocks from the run's start-up log
    std::optional<double> request_timeout_s;
    std::vector<std::string> notes;  // what the replay could not reproduce exactly
};

// Reads `path` (a run folder, an experiment.json, a vllm-bench JSON, a CSV or a JSONL); a ConfigError names the
// file, the key and what is allowed. `engine_from_command_line`: the caller has a model and GPU for inputs that do
// not carry them (the vllm-bench and per-request formats refuse to run without).
[[nodiscard]] MeasuredRun read_measured_run(const std::string& path, bool engine_from_command_line);

// One metric, measured and predicted; error = (predicted − measured) / measured in %.
struct MetricComparison {
    std::string metric;
    std::optional<double> measured;
    std::optional<double> predicted;
    [[nodiscard]] std::optional<double> error_pct() const;
};

struct WindowComparison {
    std::string window;
    std::vector<MetricComparison> metrics;
};

struct RunComparison {
    std::string run;
    std::string path;
    std::string format;
    std::string cost_model;    // what answered, with the request path
    std::string status;        // the simulated run's status
    bool overloaded = false;   // measured: the client timed requests out or reported errors
    std::vector<WindowComparison> windows;
    std::vector<std::string> notes;
};

// Per metric over runs: mean absolute and mean signed error of window "all", and how many runs had it.
struct OverallError {
    std::string metric;
    std::string runs;  // "not overloaded", "overloaded", "all"
    int num_runs = 0;
    double mean_abs_error_pct = 0;
    double mean_signed_error_pct = 0;
};

struct ValidationReport {
    std::vector<RunComparison> runs;
    std::vector<OverallError> overall;
};

// The statistics of `requests` (finished ones only for latencies) as a client computes them: means, numpy's linear
// percentiles, throughput over the window from the first send to the last finish.
[[nodiscard]] RunStats client_stats(const std::vector<MeasuredRequest>& requests,
                                    const std::optional<double>& itl_output_tokens);

// Predicted requests of a simulated run (its RequestRecords; failed ones as counted), for client_stats.
[[nodiscard]] std::vector<MeasuredRequest> predicted_requests(const ExperimentResult& result);

// The comparison of one run with its simulated replay.
[[nodiscard]] RunComparison compare_run(const MeasuredRun& run, const ExperimentResult& result);

// The hit-rate check against a live server (`validate --metrics-after`, docs/HIT-RATE-CHECK.md): appends to window
// "all" the server's prefix-cache hit rate (hit_rate_pct), the queried and hit tokens (cache_queries, cache_hits),
// preemptions and successful requests (server_success) beside the replay's, and the KV-usage gauge as measured only
// (a gauge is one instant; the replay's mean and max go into a note).
void add_server_metrics(RunComparison& c, const ServerMetricsDelta& server, const ExperimentResult& result);

// Overall errors per metric (window "all") over the runs, split by overloaded.
[[nodiscard]] std::vector<OverallError> overall_errors(const std::vector<RunComparison>& runs);

// Formats: table (one block per run, then the overall table), csv (one row per run, window and metric; then the
// overall rows with run "overall"), json.
[[nodiscard]] std::string format_validation(const ValidationReport& report, const std::string& format);

}  // namespace servesim::app
