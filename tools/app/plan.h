// `servesim plan` (docs/PLANNER.md): answers "how much load does this deployment sustain under my SLOs, how many
// GPUs does a target load need, and which configuration is cheapest per token?" by running the scenario's
// experiments at probe loads chosen by planner::ThresholdSearch. Configurations are the scenario's experiments
// (its `experiments:` and `sweep:` points) times the `--grid` the user gives; every probe of a round — all
// configurations, all replicates — runs in one parallel batch, and the probe sequence never depends on the thread
// count, so a plan is byte-identical whatever `--jobs`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/cost.h"
#include "planner/slo.h"
#include "planner/threshold_search.h"
#include "sim/metrics/metrics.h"
#include "tools/app/scenario.h"

namespace servesim::app {

class Executor;        // tools/app/executor.h
class PartialResults;  // tools/app/partial_results.h

struct PlanRequest {
    std::string scenario_path;
    std::string scenario_text;           // read once by the caller
    std::vector<std::string> overrides;  // --set, applied under the planner's own settings
    // Flags applied before --set: vLLM's engine flags, and for a plan without a scenario file (--model) the model,
    // GPU, cost model and vllm bench serve flags (command_line.h scenario_less_run), each naming its flag.
    std::vector<Override> flag_overrides;
    std::optional<std::uint64_t> seed;   // replicate r runs seed + r (seed = the scenario's when unset)
    planner::SloSpec slo;
    int replicates = 1;
    int jobs = 1;
    // Where each round's probes run (nullptr: this process's threads; an MpiExecutor spreads them over MPI ranks, all
    // of which run the plan in lockstep on the shared results) and the partial-results file they go to (or none).
    Executor* executor = nullptr;
    PartialResults* partial = nullptr;

    // What "load" means: the dotted scenario key the search varies (workload.rate, workload.tenants, …).
    std::string load_key = "workload.rate";
    // false: load_key is the default, which run_plan replaces by workload.request_rate when the scenario's workload
    // is bench_serve (vllm bench serve's --request-rate).
    bool load_key_given = false;
    bool load_is_integer = false;
    double load_start = 1;
    double load_min = 0.01;
    double load_max = 10000;
    double rel_tolerance = 0.02;
    // A load passes only when at most max_shortfall of the requests are queued (beyond those in service) when the
    // last one is sent, and, for a rate, at least (1 − max_shortfall) of the offered rate was sent: a server that
    // falls behind, or clients it holds back, are not sustaining the load even if the requests served were fast.
    double max_shortfall = 0.05;

    // With a target load: the fewest replicas (cluster.replicas) meeting the SLOs at the target, per
    // configuration, in [1, max_replicas]; without one: the largest sustainable load per configuration.
    std::optional<double> target_load;
    int max_replicas = 64;
    bool search_replicas = true;  // false: evaluate each configuration at the target as it is

    // --grid key=v1,v2 …: the Cartesian product, first key slowest.
    std::vector<std::pair<std::string, std::vector<std::string>>> grid;
    planner::PriceTable prices;
    std::string rank_by = "usd_per_mtok";  // or usd_per_mtok_output
};

// One run of one configuration at one value (load or replicas), all replicates.
struct PlanProbe {
    std::size_t configuration = 0;
    double load = 0;
    int replicas = 1;
    std::vector<metrics::Summary> summaries;  // one per replicate
    int passed = 0;
    std::vector<std::string> violations;  // of the first failing replicate
    // `stopped` when a replicate was stopped early (its queue passed the early-stop bound: the load is hopeless and
    // its latencies are those of the requests that finished before the stop, so none is shown); otherwise the first
    // replicate's status that is not ok (docs/OUTPUTS.md "Status"), or ok.
    std::string status = "ok";
    bool stopped = false;
};

struct PlanConfiguration {
    std::string label;                                        // "gpu=H100 model=Qwen3-8B"
    std::vector<std::pair<std::string, std::string>> columns;  // identity columns
    std::vector<std::pair<std::string, std::string>> grid_values;  // this configuration's --grid values
    std::size_t experiment_index = 0;                         // within the scenario loaded with those overrides
    std::string gpu;                                          // resolved, for the price
    int tensor_parallel_size = 1;
    int pipeline_parallel_size = 1;  // GPUs per replica = tensor_parallel_size × pipeline_parallel_size
    double usd_per_gpu_hour = 0;
    // How this configuration's cost model did against real runs on its GPU (app::describe_validation), or that it is
    // not validated: the error band its answer carries.
    std::string validation;
    // vLLM's reason for refusing to start this configuration (the model does not fit: cache::DoesNotFitError); then
    // it is reported as `does_not_fit` and not probed. Empty when it fits.
    std::string does_not_fit;

    planner::ThresholdAnswer answer;
    // At the answer (the best probe): what it costs and how it performs (replicate means; latencies the worst
    // replicate's, which is what the SLO was checked against).
    std::optional<std::size_t> best_probe;
    int gpus = 0;
    double tokens_per_s = 0;  // input + output tokens per second at the answer, mean over its replicates
    std::optional<double> usd_per_mtok;
    std::optional<double> usd_per_mtok_output;
    bool on_frontier = false;
};

struct PlanResult {
    std::vector<PlanConfiguration> configurations;
    std::vector<PlanProbe> probes;  // in the order they ran
    std::vector<std::size_t> ranking;  // configurations with an answer, cheapest first
};

// Checks everything (SLO, grid keys, prices for every GPU in the grid, the load key) before the first simulation,
// then searches. `on_round(done, total)` reports progress after each batch.
[[nodiscard]] PlanResult run_plan(const PlanRequest& request, const std::function<void(int, int)>& on_round);

// The load key when the user gave none (load_key_given false): workload.request_rate for a bench_serve workload
// (vllm bench serve's --request-rate, the scenario-less plan's), else the default workload.rate. Reads the scenario
// (with every override) once; call before run_plan and the formatters.
void settle_load_key(PlanRequest& request);

[[nodiscard]] std::string format_plan_table(const PlanRequest& request, const PlanResult& result);
[[nodiscard]] std::string format_plan_csv(const PlanRequest& request, const PlanResult& result);
[[nodiscard]] std::string format_plan_json(const PlanRequest& request, const PlanResult& result);

// "key=v1,v2" → (key, [v1, v2]); ConfigError naming the flag for malformed text.
[[nodiscard]] std::pair<std::string, std::vector<std::string>> parse_grid_axis(const std::string& text);

}  // namespace servesim::app
