// cluster.topology's GPU and host memory through whole scenarios: each replica's KV cache is sized from its GPU
// vertices (two replicas on 80 GB and 141 GB GPUs get their own block counts, worked by hand), a preset's GPUs must
// be the experiment's gpu:, the presets' memory is the catalog's reported memory, and host DRAM bounds every
// host's tiers (not only the first host's), all refused with the file and key before simulating.
#include <filesystem>
#include <fstream>
#include <string>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "sim/cluster/topology.h"
#include "tests/catch.h"
#include "tests/scenarios/scenario_error_util.h"
#include "tools/app/experiment.h"
#include "tools/app/output_inspect.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// Writes `text` to a fresh file under the temp folder and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() / "servesim_topology_memory_test";
    std::filesystem::create_directories(dir);
    const auto path = dir / name;
    std::ofstream(path) << text;
    return path.string();
}

// gpu80 and gpu141 on one host, each with its own NIC to a switch.
std::string two_gpu_file(const std::string& host_memory = "2.0e12") {
    return write_temp("two-gpus-" + host_memory + ".yaml", R"(nodes:
  - {name: gpu80, kind: gpu, memory_bytes: 80000000000}
  - {name: gpu141, kind: gpu, memory_bytes: 141000000000}
  - {name: host0, kind: host, memory_bytes: )" + host_memory + R"(}
links:
  - {a: gpu80, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: gpu141, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
)");
}

std::string scenario(const std::string& gpu, const std::string& cluster, const std::string& engine = "{}") {
    return "name: mem\nmodel: Qwen3-4B\ngpu: " + gpu + "\nengine: " + engine + "\ncluster: " + cluster +
           "\nworkload: {type: synthetic, rate: 1, prompt_tokens: 100, output_tokens: 4, num_requests: 4}\n";
}

TEST_CASE("Topology memory: replicas on 80 GB and 141 GB GPU vertices each size their own KV cache",
          "[scenarios][cluster][topology]") {
    const std::string file = two_gpu_file();
    const Scenario sc = load_scenario_text(
        scenario("H100-SXM", "{replicas: 2, topology: {file: " + file + "}}"), "mem.yaml", {}, {});
    const PreparedExperiment p = prepare_experiment(sc.experiments.front());
    REQUIRE(p.replica_gpu_memory_bytes == std::vector<std::int64_t>{80'000'000'000, 141'000'000'000});
    REQUIRE(p.replica_plans.size() == 2);
    const cache::MemoryPlan& a = p.replica_plans[0];
    const cache::MemoryPlan& b = p.replica_plans[1];
    // Worker.determine_available_memory: KV = ⌈gpu_memory_utilization (0.92 by default) × total⌉ − weights − activation peak − non-torch − CUDA graphs.
    // Both GPUs are ≥ 70 GiB (80e9 B = 74.5 GiB), so the batch defaults (8192 tokens, 1024 seqs) and with them
    // every subtracted term are the same; only the requested memory differs:
    //   ⌈0.92 × 80e9⌉ = 73,600,000,000 and ⌈0.92 × 141e9⌉ = 129,720,000,000 B.
    CHECK(a.gpu_memory_utilization == 0.92);
    CHECK(a.requested_memory_bytes == 73'600'000'000);
    CHECK(b.requested_memory_bytes == 129'720'000'000);
    const std::int64_t subtracted = a.weight_bytes + a.activation_peak_bytes + a.non_torch_bytes + a.cudagraph_bytes;
    CHECK(b.weight_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_bytes == subtracted);
    CHECK(a.kv_cache_memory_bytes == 73'600'000'000 - subtracted);
    CHECK(b.kv_cache_memory_bytes == 129'720'000'000 - subtracted);
    // Qwen3-4B: a block of 16 tokens holds 36 layers × 16 × 8 KV heads × 128 × (K + V) × 2 B = 2,359,296 B
    // (page 65,536 B per layer × group size 36), so blocks = KV bytes ÷ 2,359,296, rounded down.
    CHECK(a.page_size_bytes * a.group_size == 2'359'296);
    // The subtracted terms (weights 7.49 GiB, activation peak 1.97 GiB, non-torch and CUDA graphs 0.63 GiB, as
    // `servesim inspect --model Qwen3-4B --gpu H100-SXM` lists them) come to 10,839,261,184 B:
    //   80 GB:  (73,600,000,000 − 10,839,261,184) / 2,359,296 = 62,760,738,816 / 2,359,296 = 26,601.9 → 26,601
    //   141 GB: (129,720,000,000 − 10,839,261,184) / 2,359,296 = 118,880,738,816 / 2,359,296 = 50,388.0 → 50,388
    CHECK(subtracted == 10'839'261'184);
    CHECK(a.num_gpu_blocks == 26'601);
    CHECK(b.num_gpu_blocks == 50'388);
    // The difference is the 56.12e9 B of extra requested memory, 56.12e9 / 2,359,296 = 23,786.9 blocks: with each
    // count rounded down, 23,786 or 23,787 more blocks on the 141 GB GPU.
    CHECK(b.num_gpu_blocks - a.num_gpu_blocks >= 23'786);
    CHECK(b.num_gpu_blocks - a.num_gpu_blocks <= 23'787);
    CHECK(p.plan.num_gpu_blocks == a.num_gpu_blocks);  // the result's plan is replica 0's

    // `servesim inspect SCENARIO` shows each replica's GPU, memory and blocks, and that the catalog's is not used.
    const std::string shown = inspect_placement(p);
    INFO(shown);
    CHECK(shown.find("gpu141") != std::string::npos);
    CHECK(shown.find(std::to_string(b.num_gpu_blocks)) != std::string::npos);
    CHECK(shown.find("131.32") != std::string::npos);  // 141e9 B in GiB
    CHECK(shown.find("catalog H100-SXM: 79.10 GiB, not used") != std::string::npos);

    // The run gives each replica its own pool: both finish their requests.
    const auto results = run_experiments(sc.experiments, 1, {});
    CHECK(results.front().sim.summary.num_requests_finished == 4);
}

TEST_CASE("Topology memory: the presets' GPUs carry the catalog's reported memory and model",
          "[scenarios][cluster][topology]") {
    const cluster::Topology h100 = cluster::make_topology_preset("dgx-h100", 1);
    const cluster::Topology h200 = cluster::make_topology_preset("8xh200-nvlink-ib400", 1);
    const std::size_t g100 = h100.gpus().front();
    const std::size_t g200 = h200.gpus().front();
    CHECK(h100.node(g100).memory_bytes == calibration::find_gpu("H100-SXM").memory_bytes);
    CHECK(h200.node(g200).memory_bytes == calibration::find_gpu("H200").memory_bytes);
    CHECK(h100.gpu_model(g100) == "H100-SXM");
    CHECK(h200.gpu_model(g200) == "H200");
    // So a preset under its own GPU plans exactly as without a topology (the 10-node report's figures stay put).
    const Scenario with = load_scenario_text(scenario("H100", "{replicas: 2, topology: dgx-h100}"), "a.yaml", {}, {});
    const Scenario without = load_scenario_text(scenario("H100", "{replicas: 2}"), "b.yaml", {}, {});
    const PreparedExperiment pw = prepare_experiment(with.experiments.front());
    CHECK(pw.replica_plans.empty());
    CHECK(pw.plan.num_gpu_blocks == prepare_experiment(without.experiments.front()).plan.num_gpu_blocks);
}

TEST_CASE("Topology memory: a GPU the topology contradicts, and tiers beyond a host's DRAM, are refused",
          "[scenarios][cluster][topology][errors]") {
    auto refused = [](const std::string& m, const std::string& key, const std::string& what) {
        INFO(m);
        CHECK(m.find("bad.yaml") != std::string::npos);
        CHECK(m.find(key) != std::string::npos);
        CHECK(m.find(what) != std::string::npos);
    };
    // dgx-h100 holds H100-SXM GPUs: gpu: H200 would price H200 compute on H100 memory.
    refused(testing::prepare_error(scenario("H200", "{replicas: 1, topology: dgx-h100}"), "bad.yaml"), "gpu",
            "cluster.topology's GPU 'h100-0.0' is a H100-SXM");
    // A disaggregated pool's GPU as well, named with the pool's key.
    refused(testing::prepare_error(
                scenario("H200", "{topology: dgx-h100, disaggregation: {prefill: {replicas: 1, gpu: H100-SXM}, "
                                 "decode: {replicas: 1, gpu: H200}}}"),
                "bad.yaml"),
            "cluster.disaggregation.decode", "is a H100-SXM");
    // A user file's GPU may name its catalog GPU too.
    const std::string named = write_temp("named.yaml", R"(nodes:
  - {name: g0, kind: gpu, memory_bytes: 80000000000, gpu: H100}
  - {name: h0, kind: host, memory_bytes: 1.0e12}
links:
  - {a: g0, b: h0, bandwidth_GB_per_s: 64, latency_us: 2}
)");
    refused(testing::prepare_error(scenario("H200", "{topology: {file: " + named + "}}"), "bad.yaml"), "gpu",
            "GPU 'g0' is a H100-SXM");
    CHECK(testing::prepare_error(scenario("H100-SXM", "{topology: {file: " + named + "}}"), "bad.yaml").empty());
    // More replicas than GPUs, without any connector.
    refused(testing::prepare_error(scenario("H100-SXM", "{replicas: 3, topology: {file: " + two_gpu_file() + "}}"),
                                   "bad.yaml"),
            "cluster.topology", "3 replicas of 1 GPUs need 3 GPUs; cluster.topology has 2");

    // Two hosts: host0 of 1 TB (gpu0) and host1 of 100 GiB (gpu1). Every replica's host bounds its tier.
    const std::string hosts = write_temp("two-hosts.yaml", R"(nodes:
  - {name: gpu0, kind: gpu, memory_bytes: 80000000000}
  - {name: host0, kind: host, memory_bytes: 1000000000000}
  - {name: gpu1, kind: gpu, memory_bytes: 80000000000}
  - {name: host1, kind: host, memory_bytes: 107374182400}
  - {name: sw, kind: switch}
links:
  - {a: gpu0, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: gpu1, b: host1, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: host0, b: sw, bandwidth_GB_per_s: 50, latency_us: 3}
  - {a: host1, b: sw, bandwidth_GB_per_s: 50, latency_us: 3}
)");
    const std::string two = "{replicas: 2, topology: {file: " + hosts + "}, kv_connector: ";
    refused(testing::prepare_error(scenario("H100-SXM", two + "{type: mooncake, host_size_gib: 200}}"), "bad.yaml"),
            "cluster.kv_connector.host_size_gib", "larger than host 'host1''s memory (100.0 GiB)");
    CHECK(testing::prepare_error(scenario("H100-SXM", two + "{type: mooncake, host_size_gib: 100}}"), "bad.yaml")
              .empty());
    // LMCache's remote store on host0 shares its DRAM with host0's local tier: 850 + 90 GiB > 931.3 GiB (1e12 B),
    // though 850 GiB alone would fit.
    refused(testing::prepare_error(scenario("H100-SXM", two + "{type: lmcache, host_size_gib: 90, remote: host0, "
                                                              "remote_size_gib: 850}}"),
                                   "bad.yaml"),
            "cluster.kv_connector.remote_size_gib", "the local tier (90.0 GiB) on host 'host0'");
    // engine.kv_offloading_size: each replica's CPU tier lives in its host's DRAM. One replica per host: 60 GiB fits
    // both, 120 GiB fits host0 (931.3 GiB) but not host1 (100 GiB). Two replicas on one 100e9 B (93.1 GiB) host:
    // 2 × 60 = 120 GiB do not fit, though each alone would.
    CHECK(testing::prepare_error(scenario("H100-SXM", "{replicas: 2, topology: {file: " + hosts + "}}",
                                          "{kv_offloading_size: 60}"),
                                 "bad.yaml")
              .empty());
    refused(testing::prepare_error(scenario("H100-SXM", "{replicas: 2, topology: {file: " + hosts + "}}",
                                            "{kv_offloading_size: 120}"),
                                   "bad.yaml"),
            "engine.kv_offloading_size", "on host 'host1' hold 120.0 GiB of CPU tier each");
    refused(testing::prepare_error(scenario("H100-SXM", "{replicas: 2, topology: {file: " + two_gpu_file("1.0e11") +
                                                            "}}",
                                            "{kv_offloading_size: 60}"),
                                   "bad.yaml"),
            "engine.kv_offloading_size", "2 replicas on host 'host0' hold 60.0 GiB of CPU tier each (120.0 GiB)");
}

}  // namespace
}  // namespace servesim::app
