// Pipeline parallelism through the memory plan and the experiment: each stage's GPU sizes its own KV pool and the
// engine keeps the smallest num_blocks (vllm/v1/core/kv_cache_utils.py get_kv_cache_configs); the roofline step of
// a pipelined replica is one micro-batch through all layers plus the stage-to-stage sends.
#include <string>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

cache::MemoryPlan plan_for(const std::string& model, int tp, int pp, const std::string& gpu = "H100") {
    EngineSettings e;
    e.tensor_parallel_size = tp;
    e.pipeline_parallel_size = pp;
    return cache::plan_memory(models::resolve_model(model), memory_plan_request(e, calibration::find_gpu(gpu)));
}

TEST_CASE("PP: Llama-3.1-8B on 3 stages keeps the first stage's blocks, the fullest GPU", "[tools][pp]") {
    // Stages of 11, 11, 10 layers (get_pp_indices). Weights: stage 0 = 11 layers + embedding = 5,848,956,928 B,
    // stage 1 = 4,798,283,776 B, stage 2 = 10 layers + lm_head = 5,412,749,312 B (tests/memory/pipeline_stages_test).
    // Each stage: KV = requested − its weights − the activation, non-torch and CUDA-graph terms; blocks =
    // KV / 65,536 B page (16 tokens · 2 · 8 heads · 128 · 2 B) / its layers. Stage 0 has the most weights and the
    // most layers, so it has the fewest blocks and the engine keeps its count; stage 2 (10 layers) has the most.
    const cache::MemoryPlan p = plan_for("Llama-3.1-8B", 1, 3);
    REQUIRE(p.stages.size() == 3);
    CHECK(p.pipeline_parallel_size == 3);
    CHECK(p.stages[0].weight_bytes == 5'848'956'928);
    CHECK(p.stages[1].weight_bytes == 4'798'283'776);
    CHECK(p.stages[2].weight_bytes == 5'412'749'312);
    CHECK(p.weight_bytes == 5'848'956'928);  // the heaviest stage
    const std::int64_t others = p.activation_peak_bytes + p.non_torch_bytes + p.cudagraph_bytes;
    for (int i = 0; i < 3; ++i) {
        const auto& st = p.stages[static_cast<std::size_t>(i)];
        CHECK(st.kv_cache_memory_bytes == p.requested_memory_bytes - st.weight_bytes - others);
        CHECK(st.group_size == st.num_layers);
        CHECK(st.num_gpu_blocks == st.kv_cache_memory_bytes / 65'536 / st.num_layers);
    }
    CHECK(p.page_size_bytes == 65'536);
    CHECK(p.num_gpu_blocks == p.stages[0].num_gpu_blocks);
    CHECK(p.stages[0].num_gpu_blocks < p.stages[1].num_gpu_blocks);
    CHECK(p.stages[1].num_gpu_blocks < p.stages[2].num_gpu_blocks);
    // Per GPU, a stage caches only its layers: 11 · 2 · 8 · 128 · 2 = 45,056 B per token (the largest stage).
    CHECK(p.kv_bytes_per_token == 45'056);
    // Each stage holds about a third of the layers, so the pool holds about 3x the tokens of one GPU.
    const cache::MemoryPlan one = plan_for("Llama-3.1-8B", 1, 1);
    CHECK(p.num_gpu_blocks > 2 * one.num_gpu_blocks);
}

TEST_CASE("PP: Llama-3.1-70B fits two H200s as two pipeline stages as it does at TP 2", "[tools][pp]") {
    // 70.55 B params × 2 B = 131.4 GiB: no KV memory on one H200 (0.92 × 139.8 GiB = 128.6). Two stages of 40
    // layers, each with the embedding or the lm_head (1,050,673,152 B), load about 65.7 GiB each.
    CHECK_THROWS_AS(plan_for("Llama-3.1-70B", 1, 1, "H200"), ConfigError);
    const cache::MemoryPlan pp2 = plan_for("Llama-3.1-70B", 1, 2, "H200");
    const cache::MemoryPlan tp2 = plan_for("Llama-3.1-70B", 2, 1, "H200");
    REQUIRE(pp2.stages.size() == 2);
    CHECK(pp2.stages[0].num_layers == 40);
    CHECK(pp2.stages[0].weight_bytes == pp2.stages[1].weight_bytes);  // untied: embedding vs lm_head, same size
    CHECK(pp2.weight_bytes == tp2.weight_bytes);                      // each GPU holds half the model either way
    // The same pool: TP halves the KV heads (per-token bytes) on all 80 layers, PP keeps all heads on 40 layers.
    CHECK(pp2.kv_bytes_per_token == tp2.kv_bytes_per_token);
}

TEST_CASE("PP: the roofline step of a pipelined replica is one micro-batch plus the sends", "[tools][pp]") {
    // 64 decodes on 2 stages: one micro-batch of 32 through all layers (the unpipelined model's cost at 32 decodes)
    // plus one send of 32 tokens' hidden states and residual: 2 · 32 · 8192 · 2 B = 1,048,576 B, an NCCL send between
    // two H200s on NVSwitch (bus 329 GB/s): Simple 8.4 + 3.4 µs + 1,048,576 / 329e9 s = 14.9872 µs (LL: 16.76 µs).
    ExperimentConfig x;
    x.file = "pp.yaml";
    x.name = "pp";
    x.model = "Llama-3.1-70B";
    x.gpu = "H200";
    x.engine.pipeline_parallel_size = 2;
    x.workload = YAML::Load("{type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}");
    const PreparedExperiment pp = prepare_experiment(x);
    engine::BatchShape s;
    s.num_tokens = 64;
    s.num_decode_seqs = 64;
    s.num_seqs = 64;
    s.num_sampled_seqs = 64;
    s.decode_context_tokens = 64 * 2000;
    engine::BatchShape half = s;
    half.num_tokens = half.num_decode_seqs = half.num_seqs = half.num_sampled_seqs = 32;
    half.decode_context_tokens = 32 * 2000;
    engine::RooflineParams params;
    params.gpu_name = "H200";
    params.peak_flops_per_s = pp.gpu.bf16_dense_flops_per_s;
    params.memory_bandwidth_bytes_per_s = pp.gpu.memory_bandwidth_bytes_per_s;
    params.max_cudagraph_tokens = 512;
    const engine::RooflineCostModel flat(pp.model, pp.plan.kv_cache_dtype, params);
    const double send_ms = 0.0149871611;
    // The GPU's share; the engine's host work per step is added around it once (not per micro-batch): a decode of
    // 64 not overlapped (BatchShape::host_overlapped unset) = 300 + 5 × 64 = 620 µs of CPU, a FULL graph's 58 µs of
    // launches hidden by the GPU, and the 30 µs copy back: 0.650 ms (docs/HOST-WORK.md).
    const engine::StepCost c = pp.cost_model->step_cost(s);
    CHECK(std::abs(c.host_ms - 0.650) < 1e-9);
    CHECK(std::abs(c.total_ms() - c.host_ms - (flat.step_cost(half).total_ms() + send_ms)) < 1e-9);
    CHECK(pp.cost_model->describe().find(", PP 2") != std::string::npos);
}

TEST_CASE("PP: a replica larger than the NVLink domain behind NVLink-C2C is refused", "[tools][pp]") {
    // GH200: NVLink between the 2 superchips of an NVL2 node; 4 GPUs would meet over the network.
    ExperimentConfig x;
    x.file = "pp.yaml";
    x.name = "pp";
    x.model = "Llama-3.1-8B";
    x.gpu = "GH200";
    x.engine.pipeline_parallel_size = 4;
    x.workload = YAML::Load("{type: synthetic, rate: 1, prompt_tokens: 10, output_tokens: 1, num_requests: 1}");
    try {
        (void)prepare_experiment(x);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("4 GPUs per replica") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::app
