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

#include "planner/binding.h"
#include "planner/cost.h"
#include "planner/layouts.h"
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
    bool replicates_given = false;  // --replicates was given (a scenario's own replicates: key then only warns)
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

    // GPUs come in nodes of this many (--gpus-per-node): answers give nodes = ⌈GPUs / gpus_per_node⌉, and a layout
    // search's budget is whole nodes.
    int gpus_per_node = 8;
    // --gpus N: the layout search (planner/layouts.h). Each configuration of the grid is planned in every TP × PP × DP
    // (× EP for a MoE model) layout of N GPUs; with a target load each layout is evaluated at it as it is.
    std::optional<int> layout_gpus;
    std::optional<int> max_pipeline_parallel_size;  // --max-pp: caps the layouts' pipeline stages
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
    bool slo_met = true;     // every replicate met every SLO bound
    bool held_back = false;  // a replicate's clients sent less than the offered rate (beyond max_shortfall)
    // The lowest replicate's send rate as the held-back test reads it: (sent − 1) over the send window (warm-up end
    // to the last send); 0 for a load that is not a rate.
    double sent_rps = 0;
    // The first failing replicate's first reason that is not an SLO bound (backlog, held back, status, …); empty
    // when it failed on SLOs only, or passed.
    std::string other_reason;
    std::string vllm_serve;  // the `vllm serve` line of this probe's configuration (launch_command.h)
};

struct PlanConfiguration {
    std::string label;                                        // "gpu=H100 model=Qwen3-8B"
    std::vector<std::pair<std::string, std::string>> columns;  // identity columns
    std::vector<std::pair<std::string, std::string>> grid_values;  // this configuration's --grid values
    std::size_t experiment_index = 0;                         // within the scenario loaded with those overrides
    std::string gpu;                                          // resolved, for the price
    int tensor_parallel_size = 1;
    int pipeline_parallel_size = 1;  // GPUs per replica = tensor_parallel_size × pipeline_parallel_size
    bool enable_expert_parallel = false;
    std::optional<planner::Layout> layout;  // set by the layout search (--gpus)
    std::optional<planner::GpuPrice> price;  // nullopt: unpriced (no cost figures, not ranked)
    // How this configuration's cost model did against real runs on its GPU (app::describe_validation), or that it is
    // not validated: the error band its answer carries.
    std::string validation;
    // vLLM's reason for refusing to start this configuration (the model does not fit: cache::DoesNotFitError); then
    // it is reported as `does_not_fit` and not probed. Empty when it fits.
    std::string does_not_fit;
    // vLLM's reason for refusing this layout for the model (heads not divisible by TP, more stages than layers, …):
    // reported as `not_accepted` and not probed. Only the layout search produces it.
    std::string not_accepted;

    planner::ThresholdAnswer answer;
    // At the answer (the best probe): what it costs and how it performs (replicate means; latencies the worst
    // replicate's, which is what the SLO was checked against).
    std::optional<std::size_t> best_probe;
    int gpus = 0;
    int data_parallel_size = 1;  // replicas at the answer
    int nodes = 0;               // ⌈gpus / gpus_per_node⌉
    double tokens_per_s = 0;  // input + output tokens per second at the answer, mean over its replicates
    double output_tokens_per_s = 0;
    // Output tokens/s per GPU at the answer, and the tokens/s one user sees while decoding (1000 / mean TPOT): the
    // two axes buyers compare layouts on. nullopt where nothing was measured.
    std::optional<double> output_tokens_per_s_per_gpu;
    std::optional<double> tokens_per_s_per_user;
    std::optional<double> usd_per_mtok;
    std::optional<double> usd_per_mtok_output;
    bool on_frontier = false;
    // What limits the answer and the headroom on each SLO (planner/binding.h); the half-width of the error band its
    // figures are rounded to (nullopt: not validated, two significant digits) and which band it is.
    planner::Binding binding;
    std::optional<double> band_half_width_pct;
    std::string band_metric;  // "ITL", "TTFT", "E2E"
    // For an answer without a passing value: what the most favourable probe showed, in words (the --target-rate
    // verdict: "every SLO held, but the clients sent 5.1 of the 8 req/s offered (held back)").
    std::string verdict;
    std::string vllm_serve;  // at the answer
};

struct PlanResult {
    std::vector<PlanConfiguration> configurations;
    std::vector<PlanProbe> probes;  // in the order they ran
    std::vector<std::size_t> ranking;  // configurations with an answer, cheapest first
    // The SLO the Pareto frontier is drawn on: the one that binds the most answers (first in --slo order on a tie);
    // nullopt when no SLO binds any answer (no frontier is starred).
    std::optional<std::size_t> frontier_slo;
    std::vector<std::string> warnings;  // printed on stderr by the command
};

// Checks everything (SLO, grid keys, prices for every GPU in the grid, the load key) before the first simulation,
// then searches. `on_round(done, total)` reports progress after each batch.
[[nodiscard]] PlanResult run_plan(const PlanRequest& request, const std::function<void(int, int)>& on_round);

// The load key when the user gave none (load_key_given false): workload.request_rate for a bench_serve workload
// (vllm bench serve's --request-rate, the scenario-less plan's), else the default workload.rate. Reads the scenario
// (with every override) once; call before run_plan and the formatters.
void settle_load_key(PlanRequest& request);

// The answer the plan would launch for each configuration group: in the layout search, the best layout of each grid
// point and experiment (first in the cost ranking, or the most output tokens/s per GPU where unpriced); otherwise
// every configuration with an answer. In configuration order of the groups' first appearance.
[[nodiscard]] std::vector<std::size_t> chosen_answers(const PlanResult& result);

[[nodiscard]] std::string format_plan_table(const PlanRequest& request, const PlanResult& result);
[[nodiscard]] std::string format_plan_csv(const PlanRequest& request, const PlanResult& result);
[[nodiscard]] std::string format_plan_json(const PlanRequest& request, const PlanResult& result);

// "key=v1,v2" → (key, [v1, v2]); ConfigError naming the flag for malformed text.
[[nodiscard]] std::pair<std::string, std::vector<std::string>> parse_grid_axis(const std::string& text);

}  // namespace servesim::app
