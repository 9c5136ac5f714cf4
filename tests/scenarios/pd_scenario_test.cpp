// cluster.disaggregation through a whole scenario: pools of their own GPU and tensor-parallel size read the model's
// KV bytes over the preset topology, and every bad key (unknown, out of range, an unknown connector, TP sizes that
// do not divide, cluster.replicas or a shared store beside it, no topology, too few GPUs, an unknown pool GPU, a
// hybrid model, engine.tensor_parallel_size) is refused with the file and key before anything is simulated.
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/scenarios/scenario_error_util.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

TEST_CASE("PD scenario: a prefill pool at TP 2 on H100 feeds a decode pool at TP 1 on H200 with the model's KV bytes",
          "[scenarios][cluster][disaggregation]") {
    // Qwen3-4B: 36 layers × 8 KV heads × 128 × (K + V) × 2 B = 147,456 B of KV per token. Each prompt is 1,024
    // unique tokens = 64 blocks of 16; the decode side finds none of it locally, so each read is 64 × 16 × 147,456 =
    // 150,994,944 B (the decode rank reads half from each of the two prefill ranks). 20 requests → 3.0199 GB.
    // The pools' GPUs differ, so the topology is a user file naming each GPU's catalog model (a preset holds one
    // kind): gpu0, gpu1 H100-SXM and gpu2, gpu3 H200 on one NVSwitch.
    const auto dir = std::filesystem::temp_directory_path() / "servesim_pd_scenario_test";
    std::filesystem::create_directories(dir);
    const std::string topology = (dir / "h100-h200.yaml").string();
    std::ofstream(topology) << R"(nodes:
  - {name: gpu0, kind: gpu, gpu: H100-SXM, memory_bytes: 84932978278}
  - {name: gpu1, kind: gpu, gpu: H100-SXM, memory_bytes: 84932978278}
  - {name: gpu2, kind: gpu, gpu: H200, memory_bytes: 150109880320}
  - {name: gpu3, kind: gpu, gpu: H200, memory_bytes: 150109880320}
  - {name: nvswitch, kind: switch}
  - {name: host0, kind: host, memory_bytes: 2.0e12}
links:
  - {a: gpu0, b: nvswitch, bandwidth_GB_per_s: 450, latency_us: 1}
  - {a: gpu1, b: nvswitch, bandwidth_GB_per_s: 450, latency_us: 1}
  - {a: gpu2, b: nvswitch, bandwidth_GB_per_s: 450, latency_us: 1}
  - {a: gpu3, b: nvswitch, bandwidth_GB_per_s: 450, latency_us: 1}
  - {a: gpu0, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: gpu1, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: gpu2, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
  - {a: gpu3, b: host0, bandwidth_GB_per_s: 64, latency_us: 2}
)";
    const std::string text = R"(name: pd
model: Qwen3-4B
gpu: H200
engine: {max_model_len: 8192}
cluster:
  topology: {file: )" + topology + R"(}
  disaggregation:
    kv_connector: NixlConnector
    prefill: {replicas: 1, gpu: H100-SXM, tensor_parallel_size: 2}
    decode: {replicas: 2, tensor_parallel_size: 1}
workload: {type: synthetic, rate: 2, prompt_tokens: 1024, output_tokens: 16, num_requests: 20}
check_invariants: true
)";
    const Scenario sc = load_scenario_text(text, "pd.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, {});
    REQUIRE(results.size() == 1);
    const ExperimentResult& r = results[0];
    CHECK(r.gpu_name == "prefill 1×H100-SXM TP2, decode 2×H200 TP1");
    const auto& s = r.sim.summary;
    CHECK(s.num_requests_finished == 20);
    CHECK(s.mean_output_tokens == 16);
    REQUIRE(r.sim.disaggregation.has_value());
    const auto& d = *r.sim.disaggregation;
    CHECK(d.num_transfers == 20);
    CHECK(d.transfer_bytes == 20 * 150'994'944.0);
    CHECK(d.decode_local_hit_tokens == 0);
    // The client's first token comes after the prefill instance's (prefill, read, the decode side's recompute).
    CHECK(s.ttft_ms.mean > d.prefill_ttft_ms_mean + d.transfer_ms_mean);
    CHECK(d.prefill_prefix_queries == 20 * 1024);
}

std::string error_of(const std::string& cluster_yaml, const std::string& model = "Qwen3-4B",
                     const std::string& engine = "{}") {
    const std::string text = "model: " + model + "\ngpu: H100-SXM\nengine: " + engine + "\ncluster: " + cluster_yaml +
                             "\nworkload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, "
                             "num_requests: 1}\n";
    return testing::prepare_error(text, "bad.yaml");
}

// `{topology: dgx-h100, disaggregation: {...}}` with the given pools and extra keys.
std::string pools(const std::string& body) { return "{topology: dgx-h100, disaggregation: {" + body + "}}"; }

TEST_CASE("PD scenario: bad disaggregation keys are refused with the file and key before simulating",
          "[scenarios][cluster][disaggregation][errors]") {
    const std::string ok = "prefill: {replicas: 2}, decode: {replicas: 2}";
    CHECK(error_of(pools(ok)).empty());
    auto refused = [](const std::string& m, const std::string& key, const std::string& what) {
        INFO(m);
        CHECK(m.find("bad.yaml") != std::string::npos);
        CHECK(m.find(key) != std::string::npos);
        CHECK(m.find(what) != std::string::npos);
    };
    refused(error_of(pools("prefill: {replica: 2}, decode: {replicas: 2}")), "cluster.disaggregation.prefill.replica",
            "unknown key");
    refused(error_of(pools("prefill: {replicas: 0}, decode: {replicas: 2}")),
            "cluster.disaggregation.prefill.replicas", "out of range");
    refused(error_of(pools("prefill: {replicas: 1, tensor_parallel_size: 0}, decode: {replicas: 2}")),
            "cluster.disaggregation.prefill.tensor_parallel_size", "out of range");
    refused(error_of(pools("kv_connector: nixl, " + ok)), "cluster.disaggregation.kv_connector",
            "allowed: NixlConnector");
    refused(error_of(pools("prefill: {replicas: 1, tensor_parallel_size: 2}, decode: {replicas: 1, "
                           "tensor_parallel_size: 3}")),
            "cluster.disaggregation.decode", "must divide one another");
    refused(error_of(pools("decode: {replicas: 2}")), "cluster.disaggregation.prefill", "missing required key");
    refused(error_of("{replicas: 4, topology: dgx-h100, disaggregation: {" + ok + "}}"), "cluster.replicas",
            "give prefill.replicas and decode.replicas");
    refused(error_of("{disaggregation: {" + ok + "}}"), "cluster.disaggregation", "needs cluster.topology");
    refused(error_of("{topology: dgx-h100, kv_connector: {type: mooncake, host_size_gib: 8}, disaggregation: {" + ok +
                     "}}"),
            "cluster.kv_connector", "one KV connector per engine");
    // dgx-h100 has 8 GPUs: 3 × TP 2 + 3 × TP 1 = 9.
    refused(error_of(pools("prefill: {replicas: 3, tensor_parallel_size: 2}, decode: {replicas: 3}")),
            "cluster.disaggregation", "need 9 GPUs; cluster.topology has 8");
    refused(error_of(pools("prefill: {replicas: 2}, decode: {replicas: 2, first_gpu: 7}")), "cluster.disaggregation",
            "need 9 GPUs; cluster.topology has 8");
    refused(error_of(pools("prefill: {replicas: 2, first_gpu: 2}, decode: {replicas: 2, first_gpu: 3}")),
            "cluster.disaggregation.decode", "overlap the prefill pool's [2, 4)");
    CHECK(error_of(pools("prefill: {replicas: 2, first_gpu: 4}, decode: {replicas: 2, first_gpu: 0}")).empty());
    refused(error_of(pools("prefill: {replicas: 1, gpu: NoSuchGpu}, decode: {replicas: 1}")),
            "cluster.disaggregation.prefill", "NoSuchGpu");
    refused(error_of(pools(ok), "Qwen3.5-4B"), "cluster.disaggregation", "full-attention models only");
    refused(error_of(pools("proxy: nvswitch0, " + ok)), "cluster.disaggregation.proxy",
            "'nvswitch0' is a switch in cluster.topology; allowed: the name of a host node");
    refused(error_of(pools("proxy: nowhere, " + ok)), "cluster.disaggregation.proxy", "'nowhere' is no node");
    CHECK(error_of(pools("proxy: host0, " + ok)).empty());
    refused(error_of(pools(ok), "Qwen3-4B", "{tensor_parallel_size: 2}"), "engine.tensor_parallel_size",
            "give each pool's tensor_parallel_size");
    refused(error_of(pools(ok), "Qwen3-4B", "{kv_offloading_size: 8}"), "engine.kv_offloading_size",
            "one KV connector per engine");
}

}  // namespace
}  // namespace servesim::app
