// Scenario files (docs/ARCHITECTURE.md, "Formats"): one YAML file describes one experiment, or several side by side
// (`experiments:`), or a grid (`sweep:`). This reader turns a file plus command-line overrides into a list of fully
// resolved, validated ExperimentConfigs before anything is simulated; an unknown key, a wrong type or a bad value stops
// here with the file, line and key. Keys follow vLLM's flag names where one exists (block_size, max_num_batched_tokens,
// …).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/cluster/disaggregation.h"
#include "sim/cluster/kv_store.h"
#include "sim/cluster/router.h"
#include "sim/cluster/topology.h"
#include "sim/frontend/api_server.h"
#include "sim/memory/memory_plan.h"

namespace servesim::app {

// Engine settings as the user wrote them; unset values take vLLM's defaults for the model and GPU.
struct EngineSettings {
    std::optional<int> block_size;
    std::optional<std::int64_t> max_num_batched_tokens;
    std::optional<std::int64_t> max_num_seqs;
    std::optional<std::int64_t> max_model_len;
    std::optional<double> gpu_memory_utilization;
    bool kv_cache_dtype_fp8 = false;
    std::optional<bool> enable_prefix_caching;
    std::optional<cache::MambaCacheMode> mamba_cache_mode;
    // --prefix-cache-retention-interval: tokens, or cache::kRetentionDense for none; unset = the version's default.
    std::optional<std::int64_t> prefix_cache_retention_interval;
    std::optional<std::int64_t> prefix_match_unit;  // --prefix-match-unit; unset = vLLM's default (the block size)
    std::optional<std::int64_t> kv_cache_memory_bytes;
    bool enable_chunked_prefill = true;
    std::int64_t long_prefill_token_threshold = 0;
    bool scheduler_reserve_full_isl = true;
    bool async_scheduling = true;  // vLLM's default since PR #27614
    // CUDA graphs (sim/engine/cuda_graphs.h): --cudagraph-capture-sizes (or the older --cuda-graph-sizes),
    // --max-cudagraph-capture-size, --enforce-eager; unset = vLLM's default ladder.
    std::optional<std::vector<std::int64_t>> cudagraph_capture_sizes;
    std::optional<std::int64_t> max_cudagraph_capture_size;
    bool enforce_eager = false;
    // Host work per step (sim/engine/host_work.h), as `servesim calibrate --from-measurements` fits them; unset = the
    // priors of docs/HOST-WORK.md.
    bool host_work = true;  // false: the GPU cost model alone (synthetic servers)
    std::optional<double> host_step_us;
    std::optional<double> host_per_request_us;
    std::optional<double> host_exposed_us;
    // One Triton compile of vLLM's fused-MoE kernel a step waits for (sim/engine/fused_moe_jit.h): a freshly
    // started server; unset or 0 = none (steady state), the default except in `servesim validate` (docs/HOST-WORK.md).
    std::optional<double> triton_jit_compile_ms;
    int tensor_parallel_size = 1;  // GPUs per replica (--tensor-parallel-size)
    int pipeline_parallel_size = 1;  // pipeline stages per replica (--pipeline-parallel-size); GPUs = TP × PP
    // --enable-expert-parallel: routed experts spread over TP × DP ranks, DP = cluster.replicas (-dp).
    bool enable_expert_parallel = false;
    double expert_load_imbalance = 1.0;  // servesim: busiest EP rank's routed tokens / mean (≥ 1)
    // --all2all-backend (vLLM's ParallelConfig.all2all_backend), checked by engine_keys; used with expert parallelism.
    std::string all2all_backend = "allgather_reducescatter";
    bool disable_custom_all_reduce = false;  // --disable-custom-all-reduce: every all-reduce through NCCL
    std::string vllm_version = core::kNewestModelled.str();  // the newest release whose rules are modelled
    // --kv-offloading-size (GiB, native CPU offloading connector); unset = no host tier.
    std::optional<double> kv_offloading_size_gib;
    // Host → GPU load time per token; unset = KV bytes per token over the GPU's host link.
    std::optional<double> kv_offloading_load_us_per_token;
    // OffloadingConnector's kv_connector_extra_config `offload_prompt_only`; unset = the release's default (True
    // from PR #43797, VllmVersion::offload_prompt_only_by_default).
    std::optional<bool> offload_prompt_only;
    // --skip-mm-profiling: the profile run skips the multimodal encoder's dummy forward.
    bool skip_mm_profiling = false;
    // --quantization / --dtype (models::apply_engine_quantization); unset = the checkpoint's.
    std::optional<std::string> quantization;
    std::optional<std::string> dtype;
    // Hybrid state-cache policy (sim/cache/hybrid/hybrid_cache_policy.h); vllm keeps vLLM's shared pool.
    std::string hybrid_cache_policy = "vllm";
    double hybrid_state_memory_ratio = 0.9;
    std::optional<std::int64_t> hybrid_checkpoint_interval_tokens;
    // --speculative-config (vLLM's JSON, canonical text; sim/engine/speculative.h) and servesim's acceptance inputs:
    // vLLM's per-position acceptance rates, or a mean acceptance length; neither = the method's default. The ngram
    // lookup's host time per context token of a speculating request, unset = the measured default
    // (docs/SPECULATIVE-DECODING.md).
    std::optional<std::string> speculative_config;
    std::vector<double> speculative_acceptance;
    std::optional<double> speculative_mean_acceptance_length;
    std::optional<double> speculative_ngram_ns_per_context_token;
};

// Service-level objectives for goodput, in ms (vllm bench serve --goodput KEY:VALUE, keys ttft, tpot, e2el): a
// finished request is good when it meets every bound given.
struct GoodputConfig {
    std::optional<double> ttft_ms;
    std::optional<double> tpot_ms;
    std::optional<double> e2el_ms;
    [[nodiscard]] bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct ExperimentConfig {
    std::string file;                  // scenario file (for messages)
    std::string name;                  // label in tables
    std::vector<std::pair<std::string, std::string>> columns;  // identity columns: experiment, swept keys → value
    std::uint64_t seed = 1;
    std::string model;                 // preset name or config.json / preset path
    std::string gpu = "H200";
    std::string cost_model = "roofline";  // "roofline", "measured" (kernel tables) or a profile YAML path
    EngineSettings engine;
    int replicas = 1;
    std::string router = "round_robin";
    // cluster.topology and cluster.kv_connector (sim/cluster/topology.h, kv_store.h; docs/CLUSTER.md).
    std::shared_ptr<const cluster::Topology> topology;
    std::optional<cluster::KvConnectorSettings> kv_connector;
    cluster::RouterOptions router_options;  // cluster.router_config (llm_d, dynamo_kv)
    // cluster.disaggregation: prefill and decode pools (sim/cluster/disaggregation.h; docs/CLUSTER.md).
    std::optional<cluster::DisaggregationSettings> disaggregation;
    YAML::Node workload;               // validated by workloads::validate_workload
    double warmup_s = 0;
    double max_time_s = 24 * 3600.0;  // the default stop (docs/OUTPUTS.md); a run that reaches it is truncated
    bool max_time_given = false;      // `max_time` written in the scenario
    GoodputConfig goodput;            // scenario key `goodput: {ttft: 500, tpot: 50, e2el: 2000}` (ms)
    // Scenario key `request_path`: the API server between the client and the engine core (sim/frontend/api_server.h,
    // docs/REQUEST-PATH.md); `none` turns it off.
    frontend::RequestPathConfig request_path = frontend::default_request_path();
    int replicates = 1;               // `replicates: N`: seeds seed, seed+1, …, seed+N−1 of this experiment
    bool allow_profile_mismatch = false;  // accept a profile measured for another model, GPU or TP size
    bool check_invariants = false;
    // `metrics: {exact_percentiles: true}`: percentiles from every sample (the summary's memory grows with the run)
    // instead of the default fixed-memory sketches, within 0.1 % (sim/metrics/percentiles.h QuantileSketch).
    bool exact_percentiles = false;
    // Keep a record of every measured request (requests.csv, --format vllm-bench); set by the command line when an
    // output needs them, and implied by `goodput:`. Off, memory stays flat in the run length.
    bool keep_request_records = false;
    // Keep each record's inter-token gaps too (vllm bench serve --save-detailed's `itls`): set by --save-detailed,
    // with keep_request_records. Off, no request's gaps are stored.
    bool keep_request_itls = false;
    // Set by the planner only (not a scenario key): stop a run once more requests than this wait (hopeless).
    std::optional<std::int64_t> stop_when_waiting_exceeds;
    // `mode: order_only` (sim/cache/prefix_cache/order_only_cache.h): the trace's prompts are looked up and inserted in
    // arrival order in a pool of `capacity_tokens` (nullopt = unlimited) at engine.block_size (default 16); model, gpu,
    // cost_model, cluster and timing keys are not used.
    bool order_only = false;
    std::optional<std::int64_t> capacity_tokens;
};

struct Scenario {
    std::string file;
    std::string name;
    std::string description;
    bool is_sweep = false;
    std::vector<std::string> sweep_columns;  // column names of the swept keys, in order
    std::vector<ExperimentConfig> experiments;
};

// --experiment NAME...: keeps the experiments of `sc` named so (an `experiments:` entry's name; in a sweep, every
// point of that entry). A name that matches none is refused listing the names there are.
void keep_experiments(Scenario& sc, const std::vector<std::string>& names);

// A value given on the command line: it replaces whatever the scenario holds at `path` (a whole mapping when the value
// is one: `--set 'workload={type: synthetic, ...}'` switches the workload type), after every layer of the file
// (experiments, sweep points). An error about `path` or a key under it names `origin` instead of the file:
// "command line: --max-num-seqs: value 0 is out of range; allowed: 1 to 16777216".
struct Override {
    std::string path;    // dotted scenario key: "engine.max_num_seqs", "workload", "seed"
    YAML::Node value;
    std::string origin;  // what the user typed: "--max-num-seqs", "--set engine.block_size=32"
};

// "key=value" as --set takes it (value parsed as YAML); an unknown first key lists the scenario keys.
[[nodiscard]] Override parse_set_override(const std::string& text);

[[nodiscard]] Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides);

[[nodiscard]] Scenario load_scenario_text(const std::string& text, const std::string& name_for_errors,
                                          const std::vector<Override>& overrides);

// The same without vLLM's start-up memory check (cache::plan_memory) of each experiment, which load_scenario_text
// reports at its file and key: `plan` makes it itself, to report a configuration that does not fit as a
// `does_not_fit` row instead of an error (docs/PLANNER.md).
[[nodiscard]] Scenario load_scenario_text_without_memory_check(const std::string& text,
                                                               const std::string& name_for_errors,
                                                               const std::vector<Override>& overrides);

// `overrides` are "dotted.key=value" strings from --set (value parsed as YAML). A seed override replaces `seed`.
[[nodiscard]] Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                                     std::optional<std::uint64_t> seed_override);

[[nodiscard]] Scenario load_scenario_text(const std::string& text, const std::string& name_for_errors,
                                          const std::vector<std::string>& overrides,
                                          std::optional<std::uint64_t> seed_override);

// The top-level keys a scenario (or an `experiments:` entry) may hold.
[[nodiscard]] const std::vector<std::string_view>& scenario_keys();

}  // namespace servesim::app
