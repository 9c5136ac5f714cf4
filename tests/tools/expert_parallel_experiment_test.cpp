// Expert parallelism through the experiment (--enable-expert-parallel with -dp replicas): the memory plan holds each
// GPU's whole experts, the roofline re-costs the experts' GEMMs on the busiest rank and both cost models add the
// all-to-all (sim/engine/expert_parallel.h, docs/PARALLELISM.md).
#include <string>

#include "common/error.h"
#include "models/model_registry.h"
#include "sim/cache/expert_placement.h"
#include "sim/engine/expert_parallel.h"
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

TEST_CASE("EP: at TP 8 on one replica, balanced EP costs TP's GEMMs plus the all-to-all", "[tools][ep]") {
    // 16 experts per rank either way and the same routed tokens per rank at imbalance 1: the GEMM term is TP's; the
    // step adds 94 layers of dispatch + combine: 2 · (64/8 tokens · 8 experts · 4096 · 2 B · 7/8 / 450 GB/s
    // + 0.01 ms) per layer.
    const PreparedExperiment tp = prepare_experiment(qwen235(8, 1, false));
    const PreparedExperiment ep = prepare_experiment(qwen235(8, 1, true));
    const engine::StepCost a = tp.cost_model->step_cost(decodes(64));
    const engine::StepCost b = ep.cost_model->step_cost(decodes(64));
    CHECK(std::abs(b.gemm_ms - a.gemm_ms) < 1e-9);
    const double per_layer_ms = 1e3 * (64.0 / 8 * 8 * 4096 * 2 * 7.0 / 8) / 450e9 + 0.01;
    CHECK(std::abs((b.comm_ms - a.comm_ms) - 94 * 2 * per_layer_ms) < 1e-9);
}

TEST_CASE("EP: an expert load imbalance slows the busiest rank's expert GEMMs", "[tools][ep]") {
    ExperimentConfig x = qwen235(8, 1, true);
    x.engine.expert_load_imbalance = 2.0;
    const PreparedExperiment skewed = prepare_experiment(x);
    const PreparedExperiment even = prepare_experiment(qwen235(8, 1, true));
    // A large prefill is compute-bound: the routed experts' FLOPs double on the busiest rank.
    engine::BatchShape s;
    s.num_tokens = s.num_prefill_tokens = 8192;
    s.num_prefill_seqs = s.num_seqs = s.num_sampled_seqs = 4;
    s.prefill_attention_work = 4 * 2048.0 * 1024.0;
    s.prefill_max_context_tokens = 2048;
    CHECK(skewed.cost_model->step_cost(s).gemm_ms > 1.5 * even.cost_model->step_cost(s).gemm_ms);
    CHECK(skewed.cost_model->step_cost(s).comm_ms > even.cost_model->step_cost(s).comm_ms);
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
