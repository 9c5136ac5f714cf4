// Expert parallelism through the experiment (--enable-expert-parallel with -dp replicas): the memory plan holds each
// GPU's whole experts, the roofline re-costs the experts' GEMMs on the busiest rank and both cost models add the
// all-to-all (sim/engine/expert_parallel.h, docs/PARALLELISM.md).
#include <cmath>
#include <string>

#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/collectives.h"
#include "sim/engine/expert_parallel.h"
#include "sim/engine/tensor_parallel_comm.h"
#include "sim/memory/expert_placement.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

ExperimentConfig qwen235(int tp, int replicas, bool ep) {
    ExperimentConfig x;
    x.file = "ep.yaml";
    x.name = "ep";
    x.model = "Qwen3-235B-A22B";
    x.gpu = "H200";
    x.replicas = replicas;
    x.engine.tensor_parallel_size = tp;
    x.engine.enable_expert_parallel = ep;
    x.workload = YAML::Load("{type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}");
    return x;
}

engine::BatchShape decodes(std::int64_t n) {
    engine::BatchShape s;
    s.num_tokens = s.num_decode_seqs = s.num_seqs = s.num_sampled_seqs = n;
    s.decode_context_tokens = 2000 * n;
    return s;
}

TEST_CASE("EP: two GPUs per replica and four replicas hold Qwen3-235B-A22B, which TP 2 alone cannot", "[tools][ep]") {
    // TP 2: 470 GB of weights / 2 > one H200. EP over 2 × 4 = 8 ranks: 16 whole experts per layer and the rest
    // (attention, embeddings, routers) halved by TP.
    CHECK_THROWS_AS(prepare_experiment(qwen235(2, 4, false)), ConfigError);
    const PreparedExperiment p = prepare_experiment(qwen235(2, 4, true));
    CHECK(p.plan.expert_parallel_size == 8);
    CHECK(p.plan.weight_bytes == cache::expert_parallel_weight_bytes(p.model, 2, 8));
    CHECK(p.cost_model->describe().find("EP 8 (DP 4 x TP 2, imbalance 1)") != std::string::npos);
}

TEST_CASE("EP: at TP 8 on one replica, balanced EP costs TP's GEMMs and no all2all", "[tools][ep]") {
    // 16 experts per rank either way and the same routed tokens per rank at imbalance 1: the GEMM term is TP's. With
    // DP 1 vLLM runs no all2all (use_all2all_kernels needs dp_size > 1): the MoE output is all-reduced over TP as
    // without EP, so the comm terms are equal too.
    const PreparedExperiment tp = prepare_experiment(qwen235(8, 1, false));
    const PreparedExperiment ep = prepare_experiment(qwen235(8, 1, true));
    const engine::StepCost a = tp.cost_model->step_cost(decodes(64));
    const engine::StepCost b = ep.cost_model->step_cost(decodes(64));
    CHECK(std::abs(b.gemm_ms - a.gemm_ms) < 1e-9);
    CHECK(b.comm_ms == a.comm_ms);
}

TEST_CASE("EP: TP 2 x DP 4 adds the default backend's all-gather and reduce-scatter per MoE layer", "[tools][ep]") {
    // Qwen3-235B-A22B (94 MoE layers, hidden 4096, 128 experts) on H200, EP 8 inside one NVSwitch node. 64 decodes per
    // replica, 256 over the DP group of 4 ranks (bus 355 GB/s; NCCL LL at a third of it, 8.4 µs of latency for 3
    // steps). allgather_reducescatter per layer:
    //   all-gather of 256 · (4096 + 128) · 2 = 2,162,688 B, 3/4 on the bus = 1,622,016 B: 8.4 + 13.7072 = 22.1072 µs
    //   reduce-scatter of 256 · 4096 · 2 = 2,097,152 B, 1,572,864 B on the bus: 8.4 + 13.2918 = 21.6918 µs
    //   94 · 43.7990 µs = 4.117105 ms on top of the TP-2 all-reduces.
    const PreparedExperiment ep = prepare_experiment(qwen235(2, 4, true));
    const engine::TensorParallelComm tp_comm = engine::make_tensor_parallel_comm(
        ep.model, 2, engine::collective_link_for_group(ep.gpu, 2));
    const double dispatch_combine_ms = ep.cost_model->step_cost(decodes(64)).comm_ms - tp_comm.step_ms(64);
    CHECK(std::abs(dispatch_combine_ms - 4.117105) < 1e-6);
    // deepep_low_latency moves only the top-8 copies, over all 8 EP ranks (bus 361 GB/s): 32 tokens · 8 · 4096 · 2 B
    // = 2,097,152 B per rank, 7/8 of it remote: Simple 8.4 + 3.4 µs + 1,835,008 / 361e9 s = 16.8831 µs each way,
    // 94 · 2 · 16.8831 = 3.174027 ms.
    ExperimentConfig x = qwen235(2, 4, true);
    x.engine.all2all_backend = "deepep_low_latency";
    const PreparedExperiment deepep = prepare_experiment(x);
    CHECK(std::abs(deepep.cost_model->step_cost(decodes(64)).comm_ms - tp_comm.step_ms(64) - 3.174027) < 1e-6);
    CHECK(deepep.cost_model->describe().find("all2all deepep_low_latency") != std::string::npos);
}

TEST_CASE("EP: an expert load imbalance slows the busiest rank's expert GEMMs", "[tools][ep]") {
    ExperimentConfig x = qwen235(2, 4, true);
    x.engine.expert_load_imbalance = 2.0;
    const PreparedExperiment skewed = prepare_experiment(x);
    const PreparedExperiment even = prepare_experiment(qwen235(2, 4, true));
    // A large prefill is compute-bound: the routed experts' FLOPs double on the busiest rank.
    engine::BatchShape s;
    s.num_tokens = s.num_prefill_tokens = 8192;
    s.num_prefill_seqs = s.num_seqs = s.num_sampled_seqs = 4;
    s.prefill_attention_work = 4 * 2048.0 * 1024.0;
    s.prefill_max_context_tokens = 2048;
    CHECK(skewed.cost_model->step_cost(s).gemm_ms > 1.5 * even.cost_model->step_cost(s).gemm_ms);
    // The default backend gathers every token whatever the routing: the same bytes. A token-routed backend's busiest
    // rank receives twice the mean.
    CHECK(skewed.cost_model->step_cost(s).comm_ms == even.cost_model->step_cost(s).comm_ms);
    x.engine.all2all_backend = "pplx";
    ExperimentConfig y = qwen235(2, 4, true);
    y.engine.all2all_backend = "pplx";
    CHECK(prepare_experiment(x).cost_model->step_cost(s).comm_ms >
          prepare_experiment(y).cost_model->step_cost(s).comm_ms);
}

TEST_CASE("EP: an all2all backend without expert parallelism is refused, not ignored", "[tools][ep]") {
    ExperimentConfig x = qwen235(8, 1, false);
    x.engine.all2all_backend = "deepep_high_throughput";
    try {
        (void)prepare_experiment(x);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("engine.all2all_backend is used only with engine.enable_expert_parallel") !=
              std::string::npos);
    }
}

TEST_CASE("EP: an expert load imbalance without expert parallelism is refused, not ignored", "[tools][ep]") {
    ExperimentConfig x = qwen235(8, 1, false);
    x.engine.expert_load_imbalance = 1.3;
    try {
        (void)prepare_experiment(x);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("expert_load_imbalance is used only with engine.enable_expert_parallel") !=
              std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::app
