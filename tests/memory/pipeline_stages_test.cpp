// Tests sim/memory/pipeline_stages.*: vLLM's layer split over pipeline stages (get_pp_indices) and what each
// stage's GPU loads.
#include "sim/memory/pipeline_stages.h"

#include <string>
#include <variant>
#include <vector>

#include "common/error.h"
#include "models/hf_config.h"
#include "models/model_registry.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

std::vector<int> sizes(const std::vector<PipelineStage>& stages) {
    std::vector<int> out;
    for (const auto& s : stages) {
        out.push_back(s.num_layers);
    }
    return out;
}

TEST_CASE("PP: layers split as get_pp_indices, the remainder on the stages before the last", "[cache][pp]") {
    // 61 layers (DeepSeek-V3) on 4: 15 each, remainder 1 → partitions[-2] += 1 → 15, 15, 16, 15.
    const auto s61 = pipeline_stages(61, 4);
    CHECK(sizes(s61) == std::vector<int>{15, 15, 16, 15});
    CHECK(s61[2].first_layer == 30);
    CHECK(s61[3].first_layer == 46);
    // 80 on 3: 26 each, remainder 2 → partitions[-2] and [-3] → 27, 27, 26.
    CHECK(sizes(pipeline_stages(80, 3)) == std::vector<int>{27, 27, 26});
    // 32 on 3: 10 each, remainder 2 → 11, 11, 10; even splits stay even.
    CHECK(sizes(pipeline_stages(32, 3)) == std::vector<int>{11, 11, 10});
    CHECK(sizes(pipeline_stages(36, 2)) == std::vector<int>{18, 18});
    CHECK(sizes(pipeline_stages(5, 1)) == std::vector<int>{5});
}

TEST_CASE("PP: more stages than layers is refused", "[cache][pp]") {
    CHECK_THROWS_AS(pipeline_stages(4, 5), ConfigError);
    CHECK_THROWS_AS(pipeline_stages(4, 0), ConfigError);
}

TEST_CASE("PP: Falcon-H1's two branches of a layer stay on one stage; Zamba2 (no SupportsPP) is refused",
          "[cache][pp]") {
    // Falcon-H1-7B: 44 decoder layers = 88 blocks (attention, then Mamba2 + MLP). get_pp_indices(44, 3): 14 each,
    // remainder 2 on partitions[-2] and [-3] → 15, 15, 14 layers = 30, 30, 28 blocks starting at 0, 30, 60.
    const models::ModelSpec falcon =
        models::read_hf_config(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/Falcon-H1-7B-Instruct.json");
    REQUIRE(falcon.layers.size() == 88);
    const auto stages = model_pipeline_stages(falcon, 3);
    CHECK(sizes(stages) == std::vector<int>{30, 30, 28});
    CHECK(stages[1].first_layer == 30);
    CHECK(stages[2].first_layer == 60);
    // Each stage starts on an attention branch, never between a layer's two branches.
    for (const auto& s : stages) {
        CHECK(std::holds_alternative<models::AttentionMixer>(falcon.layers[s.first_layer].mixer));
    }
    // 45 stages for 44 layers: refused though 88 blocks would allow it.
    CHECK_THROWS_AS(model_pipeline_stages(falcon, 45), ConfigError);
    const models::ModelSpec zamba =
        models::read_hf_config(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/Zamba2-2.7B.json");
    CHECK(model_pipeline_stages(zamba, 1).size() == 1);
    try {
        (void)model_pipeline_stages(zamba, 2);
        FAIL("Zamba2 must refuse pipeline parallelism");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("pipeline_parallel_size") != std::string::npos);
        CHECK(std::string(e.what()).find("SupportsPP") != std::string::npos);
    }
}

TEST_CASE("PP: the first stage holds the embedding, the last a vocab x hidden lm_head, even when tied",
          "[cache][pp]") {
    // Qwen3-4B (tied embeddings): per layer q 2560·4096 + k, v 2560·1024 each + o 4096·2560 = 26,214,400 and a gated
    // MLP 3·2560·9728 = 74,711,040 → 100,925,440 params; 18 layers × 2 B = 3,633,315,840 B. Embedding 151,936·2,560
    // = 388,956,160 params = 777,912,320 B. Stage 0: layers + embedding; stage 1: layers + the tied embedding built
    // on the last rank as its lm_head: both 4,411,228,160 B.
    const auto qwen = models::resolve_model("Qwen3-4B");
    const auto stages = pipeline_stages(36, 2);
    CHECK(stage_weight_bytes(qwen, stages, 0, 1) == 4'411'228'160);
    CHECK(stage_weight_bytes(qwen, stages, 1, 1) == 4'411'228'160);
    // Llama-3.1-8B (untied) on 3 stages of 11, 11, 10 layers: a layer is 41,943,040 + 3·4096·14336 = 218,103,808
    // params = 436,207,616 B; embedding and lm_head 128,256·4,096·2 = 1,050,673,152 B each.
    const auto llama = models::resolve_model("Llama-3.1-8B");
    const auto three = pipeline_stages(32, 3);
    CHECK(stage_weight_bytes(llama, three, 0, 1) == 11LL * 436'207'616 + 1'050'673'152);  // 5,848,956,928
    CHECK(stage_weight_bytes(llama, three, 1, 1) == 11LL * 436'207'616);                  // 4,798,283,776
    CHECK(stage_weight_bytes(llama, three, 2, 1) == 10LL * 436'207'616 + 1'050'673'152);  // 5,412,749,312
    // With TP 2 every stage's share halves.
    CHECK(stage_weight_bytes(llama, three, 1, 2) == 11LL * 436'207'616 / 2);
}

}  // namespace
}  // namespace servesim::cache
