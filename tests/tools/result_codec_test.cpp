// Moving results between processes and files (tools/app/result_codec, partial_results, executor; docs/MPI.md): a
// decoded result prints exactly as the original, the codec covers every field of the structs it encodes, a
// partial-results file gives back what was appended (and drops a torn last record), and a resumed batch runs only
// what the file lacks and prints the same as a fresh one.
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/config_error.h"
#include "tests/tools/fault_injection.h"
#include "tools/app/executor.h"
#include "tools/app/experiment.h"
#include "tools/app/output.h"
#include "tools/app/output_vllm_bench.h"
#include "tools/app/partial_results.h"
#include "tools/app/result_codec.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// The number of members of an aggregate: the most initialisers T{…} accepts, each convertible to anything.
// Never called: only named in the unevaluated brace-initialisation below. Defined all the same, since clang
// instantiates the constexpr constructors it reaches (std::optional's) and counts the conversion as used there.
struct AnyField {
    template <typename T>
    [[noreturn]] operator T() const {  // NOLINT: implicit on purpose
        std::terminate();
    }
};

template <typename T, typename... A>
constexpr std::size_t field_count() {
    if constexpr (requires { T{A{}...}; }) {
        return field_count<T, A..., AnyField>();
    } else {
        return sizeof...(A) - 1;
    }
}

// Two experiments side by side, each with 2 replicates (4 runs), request records kept (requests.csv): 200 requests
// at 20 req/s on one H100, with a goodput bound so the goodput fields are set too; the second with speculative
// decoding, so its settings, drafter term and counters go through the codec.
const char* kScenario = R"(
name: codec
seed: 11
model: Qwen3-4B
gpu: H100
engine: {max_model_len: 8192}
workload:
  type: synthetic
  arrival: poisson
  rate: 20
  prompt_tokens: {dist: uniform, min: 100, max: 900}
  output_tokens: {dist: uniform, min: 10, max: 60}
  num_requests: 200
goodput: {ttft: 200}
replicates: 2
experiments:
  - name: seqs-16
    engine: {max_num_seqs: 16}
  - name: seqs-256
    engine: {max_num_seqs: 256, speculative_config: {method: mtp, num_speculative_tokens: 2}}
)";

std::vector<ExperimentConfig> configs() {
    Scenario sc = load_scenario_text(kScenario, "codec_test.yaml", std::vector<std::string>{}, std::nullopt);
    for (auto& x : sc.experiments) {
        x.keep_request_records = true;
    }
    return sc.experiments;
}

std::string all_formats(const std::vector<ExperimentResult>& r) {
    return format_json(r) + format_csv(r) + format_table(r, true) + format_timeseries_csv(r) +
           format_requests_csv(r) + format_vllm_bench(r, BenchOptions{});
}

template <typename F>
std::string error_of(F&& f) {
    return servesim::testing::config_error_of(f);  // tests/config_error.h
}

std::filesystem::path temp_file(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("servesim-codec-test-" + name);
}

TEST_CASE("the codec covers every field of the structs it encodes", "[result-codec]") {
    using C = CodecFieldCounts;
    CHECK(field_count<ExperimentResult>() == C::kExperimentResult);
    CHECK(field_count<cluster::SimulationResult>() == C::kSimulationResult);
    CHECK(field_count<cache::HybridStateStats>() == C::kHybridStateStats);
    CHECK(field_count<metrics::Summary>() == C::kSummary);
    CHECK(field_count<metrics::Distribution>() == C::kDistribution);
    CHECK(field_count<metrics::RequestRecord>() == C::kRequestRecord);
    CHECK(field_count<cluster::TimeSample>() == C::kTimeSample);
    CHECK(field_count<engine::StepCost>() == C::kStepCost);
    CHECK(field_count<engine::SpeculativeStats>() == C::kSpeculativeStats);
    CHECK(field_count<metrics::RejectionStats>() == C::kRejectionStats);
    CHECK(field_count<metrics::RunningMoments>() == C::kRunningMoments);
    CHECK(field_count<cache::OrderOnlyResult>() == C::kOrderOnlyResult);
    CHECK(field_count<ExperimentConfig>() == C::kExperimentConfig);
    CHECK(field_count<cluster::KvConnectorSettings>() == C::kKvConnectorSettings);
    CHECK(field_count<cluster::RouterOptions>() == C::kRouterOptions);
    CHECK(field_count<EngineSettings>() == C::kEngineSettings);
    CHECK(field_count<GoodputConfig>() == C::kGoodputConfig);
    CHECK(field_count<frontend::RequestPathConfig>() == C::kRequestPathConfig);
    CHECK(field_count<cluster::DisaggregationStats>() == C::kDisaggregationStats);
    CHECK(field_count<cluster::PoolSettings>() == C::kPoolSettings);
    CHECK(field_count<cluster::DisaggregationSettings>() == C::kDisaggregationSettings);
}

TEST_CASE("a decoded result prints byte for byte as the original, in every format", "[result-codec]") {
    const auto cs = configs();
    const auto original = run_experiments(cs, 1, {});
    REQUIRE(original.size() == 2);
    REQUIRE(original[0].replicate_runs.size() == 2);
    REQUIRE(original[0].num_requests_good.has_value());
    REQUIRE(!original[0].replicate_runs[0].sim.summary.requests.empty());
    std::vector<ExperimentResult> decoded = original;
    for (auto& point : decoded) {
        for (auto& run : point.replicate_runs) {
            ExperimentResult fresh;
            fresh.config = run.config;
            fresh.plan = run.plan;
            decode_result(encode_result(run), fresh);
            CHECK(encode_result(fresh) == encode_result(run));
            run = std::move(fresh);
        }
    }
    CHECK(all_formats(decoded) == all_formats(original));
}

TEST_CASE("truncated result bytes are refused, not misread", "[result-codec]") {
    const auto original = run_experiments(configs(), 1, {});
    const std::string bytes = encode_result(original[0].replicate_runs[0]);
    ExperimentResult r;
    CHECK_THROWS_AS(decode_result(std::string_view(bytes).substr(0, bytes.size() - 1), r), InvariantError);
    CHECK_THROWS_AS(decode_result(bytes + "x", r), InvariantError);
}

TEST_CASE("a config's fingerprint changes with any key and not with a copy", "[result-codec]") {
    const auto cs = configs();
    ExperimentConfig copy = cs[0];
    CHECK(config_fingerprint(copy) == config_fingerprint(cs[0]));
    CHECK(config_fingerprint(cs[0]) != config_fingerprint(cs[1]));  // max_num_seqs 16 vs 256
    copy.seed += 1;
    CHECK(config_fingerprint(copy) != config_fingerprint(cs[0]));
    copy = cs[0];
    copy.workload.reset(YAML::Clone(cs[0].workload));  // a YAML::Node copy (and its operator=) shares the node
    copy.workload["rate"] = 21;
    CHECK(config_fingerprint(copy) != config_fingerprint(cs[0]));
    copy = cs[0];
    copy.keep_request_records = false;  // a run without request records is another result
    CHECK(config_fingerprint(copy) != config_fingerprint(cs[0]));
}

TEST_CASE("a partial-results file gives back its runs and drops a record cut short", "[result-codec]") {
    const auto cs = configs();
    const auto results = run_experiments(cs, 1, {});
    const auto& a = results[0].replicate_runs[0];
    const auto& b = results[1].replicate_runs[1];
    const std::string path = temp_file("partial.bin").string();
    {
        auto p = PartialResults::create(path, "--checkpoint", scenario_fingerprint(cs));
        p.append(a.config, a);
        p.append(b.config, b);
        CHECK(p.num_appended() == 2);
    }
    {
        const auto p = PartialResults::resume(path, "--resume", scenario_fingerprint(cs));
        CHECK(p.num_loaded() == 2);
        ExperimentResult got;
        REQUIRE(p.find(b.config, got));
        CHECK(encode_result(got) == encode_result(b));
        CHECK_FALSE(p.find(results[0].replicate_runs[1].config, got));  // seed 12 of seqs-16 was not stored
    }
    // A crash while writing the second record: the file ends 5 bytes into its result bytes (which end with their
    // 4-byte CRC).
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size - 4 - encode_result(b).size() + 5);
    const auto p = PartialResults::resume(path, "--resume", scenario_fingerprint(cs));
    CHECK(p.num_loaded() == 1);
    ExperimentResult got;
    CHECK(p.find(a.config, got));
    CHECK_FALSE(p.find(b.config, got));
    std::filesystem::remove(path);
}

TEST_CASE("a file that is not a partial-results file is refused naming the flag", "[result-codec]") {
    const auto cs = configs();
    const std::string path = temp_file("not-partial.bin").string();
    std::ofstream(path) << "name: x\n";
    CHECK(error_of([&] { (void)PartialResults::resume(path, "--resume", scenario_fingerprint(cs)); }) ==
          "--resume: '" + path +
              "' is not a servesim partial-results file (written by --checkpoint, or kept by a sweep or plan that "
              "failed), or its first line is damaged; run the command without --resume to start afresh");
    std::filesystem::remove(path);
    // Opened through common/input_file.h, as every input file.
    CHECK(error_of([&] { (void)PartialResults::resume(path, "--resume", scenario_fingerprint(cs)); }) ==
          "--resume: " + path + ": cannot open the partial-results file: no such file");
}

TEST_CASE("a resumed batch runs only the missing runs and prints as an uninterrupted one", "[result-codec]") {
    const auto cs = configs();
    const auto fresh = run_experiments(cs, 1, {});
    const std::string path = temp_file("resume.bin").string();
    {
        // The first run of each experiment finished before an interruption (2 of the 4 runs).
        auto p = PartialResults::create(path, "--checkpoint", scenario_fingerprint(cs));
        p.append(fresh[0].replicate_runs[0].config, fresh[0].replicate_runs[0]);
        p.append(fresh[1].replicate_runs[0].config, fresh[1].replicate_runs[0]);
    }
    auto p = PartialResults::resume(path, "--resume", scenario_fingerprint(cs));
    std::vector<int> progress;
    const auto resumed = run_experiments(
        cs, 2, [&](int done, int) { progress.push_back(done); }, RunOptions{nullptr, &p, false, std::nullopt, nullptr});
    // 2 runs taken from the file, 2 run: progress counts on from 2 to 4.
    CHECK(progress == std::vector<int>{3, 4});
    CHECK(p.num_appended() == 2);
    CHECK(all_formats(resumed) == all_formats(fresh));
    std::filesystem::remove(path);
}

TEST_CASE("a failed run is named, and the runs finished before it are kept", "[result-codec]") {
    const auto cs = configs();
    const std::string path = temp_file("failed.bin").string();
    auto p = PartialResults::create(path, "--checkpoint", scenario_fingerprint(cs));
    ::setenv("SERVESIM_FAIL_RUN", "seqs-256@12", 1);
    // One thread: the runs go in list order (seqs-16 seeds 11, 12, seqs-256 seed 11), then seqs-256 seed 12 fails.
    LocalExecutor local;
    local.fault_hook = test::fault_from_environment();  // the fault tests' hook (test builds only)
    CHECK_THROWS_WITH(run_experiments(cs, 1, {}, RunOptions{&local, &p, false, std::nullopt, nullptr}),
                      "experiment 'seqs-256' (seed 12) failed: fault injected by SERVESIM_FAIL_RUN=seqs-256@12");
    ::unsetenv("SERVESIM_FAIL_RUN");
    CHECK(p.num_appended() == 3);
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace servesim::app
