// cluster.topology and cluster.kv_connector through a whole scenario: a shared pool turns a replica's misses into
// external hits, and bad input (a tier larger than its host's memory, a connector without a topology, a hybrid
// model, an unknown type) is refused with the file and key before anything is simulated.
#include <string>

#include "common/error.h"
#include "tests/catch.h"
#include "tests/scenarios/scenario_error_util.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

// 40 tenants with 2,000-token system prompts over 4 replicas, round robin: each replica sees every tenant, and a
// small GPU pool (1.5 GiB of Qwen3-4B, ≈ 10,900 tokens) keeps few of them; the pool over the hosts keeps all.
const char* kScenario = R"(name: pool-test
model: Qwen3-4B
gpu: H100-SXM
engine: {max_model_len: 8192, kv_cache_memory_bytes: 1.5GiB}
cluster: {replicas: 4, router: round_robin, topology: {preset: dgx-h100, nodes: 1}}
workload: {type: tenants, tenants: 40, system_prompt_tokens: 2000, user_tokens: 50, answer_tokens: 20,
           turns_per_dialogue: 3, arrival: poisson, rate: 4, num_requests: 300}
check_invariants: true
experiments:
  - name: local
  - name: mooncake
    cluster: {kv_connector: {type: mooncake, host_size_gib: 64}}
  - name: lmcache
    cluster: {kv_connector: {type: lmcache, host_size_gib: 64, remote_size_gib: 256}}
)";

TEST_CASE("Cluster scenario: a shared pool turns the replicas' misses into external hits", "[scenarios][cluster]") {
    const Scenario sc = load_scenario_text(kScenario, "pool.yaml", {}, {});
    const auto results = run_experiments(sc.experiments, 1, {});
    REQUIRE(results.size() == 3);
    const auto& local = results[0].sim.summary;
    const auto& mooncake = results[1].sim.summary;
    const auto& lmcache = results[2].sim.summary;
    CHECK(local.external_hit_rate == 0.0);
    CHECK(mooncake.external_hit_rate > 0.0);
    CHECK(mooncake.total_hit_rate > local.total_hit_rate);
    CHECK(lmcache.total_hit_rate > local.total_hit_rate);
    CHECK(mooncake.num_requests_finished == mooncake.num_requests_sent);
    // Saved prefill shows in the first token: fewer tokens computed per request.
    CHECK(mooncake.ttft_ms.mean < local.ttft_ms.mean);
}

std::string error_of(const std::string& cluster_yaml, const std::string& model = "Qwen3-4B") {
    const std::string text = "model: " + model + "\ngpu: H100-SXM\ncluster: " + cluster_yaml +
                             "\nworkload: {type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, "
                             "num_requests: 1}\n";
    return testing::prepare_error(text, "bad.yaml");
}

TEST_CASE("Cluster scenario: a connector tier larger than its host memory is refused with the file and key",
          "[scenarios][cluster][errors]") {
    // dgx-h100's host has 2,048 GiB of DRAM.
    const std::string m = error_of("{replicas: 2, topology: dgx-h100, kv_connector: {type: mooncake, "
                                   "host_size_gib: 3000}}");
    INFO(m);
    CHECK(m.find("bad.yaml") != std::string::npos);
    CHECK(m.find("cluster.kv_connector.host_size_gib") != std::string::npos);
    CHECK(m.find("larger than host 'host0''s memory (2048.0 GiB)") != std::string::npos);
    CHECK(error_of("{replicas: 2, topology: dgx-h100, kv_connector: {type: mooncake, host_size_gib: 2000}}").empty());
}

TEST_CASE("Cluster scenario: connector and topology mistakes are refused before simulating",
          "[scenarios][cluster][errors]") {
    CHECK(error_of("{replicas: 2, kv_connector: {type: mooncake, host_size_gib: 8}}")
              .find("give cluster.topology") != std::string::npos);
    CHECK(error_of("{replicas: 9, topology: dgx-h100, kv_connector: {type: mooncake, host_size_gib: 8}}")
              .find("9 replicas of 1 GPUs need 9 GPUs; cluster.topology has 8") != std::string::npos);
    CHECK(error_of("{topology: dgx-h100, kv_connector: {type: nixl, host_size_gib: 8}}")
              .find("cluster.kv_connector.type") != std::string::npos);
    CHECK(error_of("{topology: dgx-h100, kv_connector: {type: mooncake, host_size_gib: 8}}", "Qwen3.5-4B")
              .find("full-attention models only") != std::string::npos);
    CHECK(error_of("{topology: dgx-a100}").find("cluster.topology") != std::string::npos);
    CHECK(error_of("{topology: {file: no-such-topology.yaml}}").find("cannot open") != std::string::npos);
}

}  // namespace
}  // namespace servesim::app
