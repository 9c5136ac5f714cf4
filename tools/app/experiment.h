// Experiment: turns a validated ExperimentConfig into a running Simulation — model spec, GPU, vLLM's memory plan,
// cost model, workload, replicas — and returns its figures. prepare_experiment does everything that can fail on
// bad input, so a scenario is fully checked before its first simulation starts. run_experiments runs a list on
// worker threads; results come back in list order, so output never depends on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibration/gpu_spec.h"
#include "models/model_spec.h"
#include "sim/cache/prefix_cache/order_only_cache.h"
#include "sim/memory/memory_plan.h"
#include "sim/cluster/simulation.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/measured_cost_model.h"
#include "sim/engine/speculative.h"
#include "tools/app/run_status.h"
#include "tools/app/scenario.h"

namespace servesim::app {

struct PreparedExperiment {
    ExperimentConfig config;
    models::ModelSpec model;
    calibration::GpuSpec gpu;
    cache::MemoryPlan plan;
    std::unique_ptr<engine::CostModel> cost_model;
    // engine.speculative_config resolved (acceptance filled); unset = off (sim/engine/speculative.h).
    std::optional<engine::SpeculativeConfig> speculative;
    // `mode: order_only` only (then model, gpu, plan and cost_model stay empty): the trace at the block size,
    // shared read-only by every point of a sweep that reads the same trace the same way.
    std::shared_ptr<const cache::OrderOnlyTrace> order_only_trace;
    // `mode: order_only` with a `model`: the trace is replayed through that model's engine one request at a time
    // (order_only_engine_config); `config` is then the engine run's, and the result is reported as order-only.
    bool order_only_engine_replay = false;
    std::string profile_mismatch;  // what differs between the profile and the experiment (allow_profile_mismatch)
    // cluster.disaggregation: each pool prepared on its own GPU and tensor-parallel size (unset otherwise).
    std::shared_ptr<const PreparedExperiment> prefill_pool;
    std::shared_ptr<const PreparedExperiment> decode_pool;
    // cluster.topology: replica i's GPU vertices (TP × PP of them, consecutive in file order from the experiment's
    // first GPU) and its device memory, the smallest over them (vLLM's get_kv_cache_configs keeps the smallest
    // num_blocks over the workers). Empty without a topology. `plan` is replica 0's; when the replicas' memories
    // differ, replica_plans holds every replica's (empty otherwise).
    std::vector<std::vector<std::size_t>> replica_gpus;
    std::vector<std::int64_t> replica_gpu_memory_bytes;
    std::vector<cache::MemoryPlan> replica_plans;
};

// RunStatus and run_status_name: tools/app/run_status.h (docs/OUTPUTS.md "Status").

// The workload's clients time requests out (workload key `request_timeout`, any type): the run reports
// `requests_timed_out` (docs/OUTPUTS.md).
[[nodiscard]] bool workload_times_out(const ExperimentConfig& config);

struct ExperimentResult {
    ExperimentConfig config;
    std::string model_name;
    std::string gpu_name;
    std::string cost_model;
    std::string cost_model_source;  // "roofline" or the profile's path, as resolved
    std::string profile_mismatch;   // with allow_profile_mismatch: what differs (empty when nothing does)
    std::string workload;
    std::optional<double> offered_rps;  // the workload's `rate` (req/s) when it has a finite one
    bool offered_all_at_once = false;   // its rate is `inf` (every request sent at t = 0)
    cache::MemoryPlan plan;
    cluster::SimulationResult sim;
    std::optional<cache::OrderOnlyResult> order_only;  // set instead of `sim` in `mode: order_only`
    RunStatus status = RunStatus::kOk;
    std::string status_reason;          // one line on why the status is not ok (empty when ok)
    std::vector<std::string> warnings;  // why the status is not ok, and other things a reader must know
    // With a goodput config: measured finished requests meeting every bound, and them per second of the window.
    std::optional<std::int64_t> num_requests_good;
    std::optional<double> request_goodput_rps;
    // `replicates: N` > 1: the N runs (seeds seed … seed+N−1); this result then holds the first one's fields.
    std::vector<ExperimentResult> replicate_runs;
};

// The runs behind one result: its replicates (seed, seed+1, …) when it has several, else the result itself.
[[nodiscard]] std::vector<const ExperimentResult*> runs_of(const ExperimentResult& point);

// Requests among `requests` that meet every bound of `goodput` (vllm bench serve calculate_metrics: TTFT, TPOT —
// 0 for a one-token output — and E2E each ≤ its bound).
[[nodiscard]] std::int64_t count_good_requests(const std::vector<metrics::RequestRecord>& requests,
                                               const GoodputConfig& goodput);

// The status and warnings of a finished run (fills r.status, r.warnings, goodput).
void assess_result(ExperimentResult& r);

// vLLM's memory-plan request for a model on a GPU with the user's engine settings; `data_parallel_size` (the
// replicas) sizes the expert-parallel group TP × DP when engine.enable_expert_parallel is set.
// `gpu_memory_bytes` (> 0) is the device's total memory when the topology gives it (cluster.topology's GPU vertices,
// docs/CLUSTER.md "Placement"); 0 takes the GPU catalog's.
[[nodiscard]] cache::MemoryPlanRequest memory_plan_request(const EngineSettings& engine, const calibration::GpuSpec& gpu,
                                                           int data_parallel_size = 1,
                                                           std::int64_t gpu_memory_bytes = 0);
// Which calibrated linear layers a profile must hold to cost `model` (HardwareProfile::weight_dtype): "bf16" for an
// unquantized model, "fp8" when every linear layer is fp8 W8A8 with per-tensor or per-channel scales (the kernel
// calibration times), otherwise a description that matches no profile.
[[nodiscard]] std::string profile_weight_dtype_for(const models::ModelSpec& model);

// The model as the engine loads it: resolve_model, then --quantization / --dtype (models/quantization_config.h).
[[nodiscard]] models::ModelSpec resolve_engine_model(const std::string& model, const EngineSettings& engine);

// engine.speculative_config resolved against the target (sim/engine/speculative.h): the settings with acceptance
// filled, the draft checkpoint for draft_model (resolved as `model` is, at the target's --dtype, unquantized unless
// its config.json says otherwise: vLLM's speculative `quantization` defaults to none), and the drafter's memory
// per rank. Checks vLLM's rules: draft_tensor_parallel_size the target's (vLLM also allows 1: not modelled), the
// draft's vocabulary the target's (verify_equal_vocab_size_if_draft_model), max_model_len within the draft's.
// Throws ConfigError naming the key.
struct SpeculativeSetup {
    engine::SpeculativeConfig config;
    std::optional<models::ModelSpec> draft_model;
    std::optional<cache::DrafterMemoryRequest> memory;
};
[[nodiscard]] std::optional<SpeculativeSetup> resolve_speculative(const EngineSettings& engine,
                                                                  const models::ModelSpec& target);
// Speculative decoding's part of the memory plan of `target` with these engine settings: the drafter
// (MemoryPlanRequest::drafter) and num_speculative_tokens (the recurrent state's speculative columns and blocks).
// Nothing without engine.speculative_config.
void add_speculative_memory(cache::MemoryPlanRequest& request, const EngineSettings& engine,
                            const models::ModelSpec& target);


// The host KV tier of engine.kv_offloading_size (vLLM's native OffloadingConnector, CPUOffloadingSpec) for a
// resolved plan: its capacity in CPU blocks per tensor-parallel group, its load speed and the release's rules.
// Requires engine.kv_offloading_size.
[[nodiscard]] cache::CpuOffloadConfig offload_config(const EngineSettings& engine, const cache::MemoryPlan& plan,
                                                     const calibration::GpuSpec& gpu);

// cluster.kv_connector for a prepared experiment: refused with engine.kv_offloading_size or a hybrid model, blocks
// sized as offload_config sizes a CPU block, then checked against the topology (cluster::make_kv_store_config).
[[nodiscard]] cluster::KvStoreConfig kv_store_config(const PreparedExperiment& p);

// `cost_model: measured`: the GPU's own kernel table (calibration/kernels/), else the nearest measured GPU's for an
// efficiency transfer (same vendor, then nearest compute capability, then memory bandwidth). ConfigError when no
// table is built in.
[[nodiscard]] engine::MeasuredParams measured_params(const calibration::GpuSpec& gpu,
                                                     const engine::RooflineParams& roofline,
                                                     std::int64_t max_num_batched_tokens);

// The table among `tables` whose vLLM fused_moe pairs (`moe_vllm_fused`) complete `table`, measured on `table_gpu`,
// when it has none of its own: one measured on a GPU of the same vendor and compute capability, the nearest in
// memory bandwidth. Null when `table` has its own or none qualifies (MeasuredParams::fused_table).
[[nodiscard]] const calibration::KernelTable* fused_pairs_lender(const calibration::KernelTable& table,
                                                                 const calibration::GpuSpec& table_gpu,
                                                                 const std::vector<calibration::KernelTable>& tables);

[[nodiscard]] PreparedExperiment prepare_experiment(const ExperimentConfig& config);
// The same with the replicas placed from topology GPU `first_gpu` on (a disaggregated pool's first_gpu).
[[nodiscard]] PreparedExperiment prepare_experiment_at(const ExperimentConfig& config, int first_gpu);
// Replica i's memory plan (replica_plans[i] when the replicas differ, else plan).
[[nodiscard]] const cache::MemoryPlan& replica_plan(const PreparedExperiment& p, std::size_t i);

// `mode: order_only`: reads the workload's trace (honouring limit, num_requests, duration and time_scale) into block
// chains at engine.block_size (default 16). A malformed record throws ConfigError with file, line and field.
[[nodiscard]] std::shared_ptr<const cache::OrderOnlyTrace> load_order_only_trace(const ExperimentConfig& config);

// `mode: order_only` with a `model` (a hybrid's state-cache policies among others, docs/HYBRID-POLICIES.md): the
// engine run that replays the trace in arrival order with nothing concurrent — one replica, workload max_concurrency
// 1, one output token per request (input-only caching, as the pure replay), no warm-up. The states a hybrid keeps
// depend on where prefill chunks end (vLLM's align split, SGLang's chunk-end snapshots), which is the scheduler's
// choice, so these runs go through it; the clock is kept but not reported. ConfigError if the workload already sets
// max_concurrency or max_output_tokens, or capacity_tokens is given (the model's KV memory is the capacity).
[[nodiscard]] ExperimentConfig order_only_engine_config(const ExperimentConfig& config);

[[nodiscard]] ExperimentResult run_experiment(const PreparedExperiment& prepared);

// Prepares every experiment first (any bad input throws before simulating), then runs them on `jobs` threads.
// `on_done(done, total)` is called after each finished experiment (progress), from the worker threads, serialised.
[[nodiscard]] std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                                            const std::function<void(int, int)>& on_done);

class Executor;        // tools/app/executor.h
class PartialResults;  // tools/app/partial_results.h

// Where and how run_experiments runs a batch (docs/MPI.md): on `executor` (nullptr: this process's threads); with
// `partial`, runs already stored there are not run again (--resume) and each finished run is appended to it; with
// `results_on_every_rank`, every MPI rank gets the results (otherwise only the root, and other ranks get none).
struct RunOptions {
    Executor* executor = nullptr;
    PartialResults* partial = nullptr;
    bool results_on_every_rank = false;
    // The memory bound (--max-memory; tools/app/memory_projection.h): set, the batch's peak memory is projected after
    // every run is prepared and refused above it (ConfigError), before the first run starts; unset, not projected.
    std::optional<std::int64_t> max_memory_bytes;
    std::ostream* memory_log = nullptr;  // where the projection's line goes (the root only); nullptr: nowhere
};

// As above, on options.executor. `on_done` is called on the root only.
[[nodiscard]] std::vector<ExperimentResult> run_experiments(const std::vector<ExperimentConfig>& configs, int jobs,
                                                            const std::function<void(int, int)>& on_done,
                                                            const RunOptions& options);

}  // namespace servesim::app
