// Pipeline parallelism in the memory plan: how vLLM splits a model's decoder layers over pipeline stages
// (vllm/distributed/utils.py get_pp_indices), what each stage's GPU holds (its layers, the input embedding on the
// first stage, the lm_head on the last: vllm/model_executor/models/llama.py builds embed_tokens on the first rank, or
// on the last when the embeddings are tied, and ParallelLMHead on the last; PPMissingLayer elsewhere), and how many
// tensors of each global KV cache group a stage holds (vllm/v1/core/kv_cache_utils.py get_kv_cache_configs and
// _project_kv_cache_groups_to_worker). Owns the arithmetic only; plan_memory takes the smallest num_blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_spec.h"

namespace servesim::cache {

struct PipelineStage {
    int first_layer = 0;  // index into ModelSpec::layers
    int num_layers = 0;
};

// get_pp_indices without VLLM_PP_LAYER_PARTITION: num_layers / pp each, and the remainder r spread one each over
// the stages before the last, from the second-to-last backwards (partitions[-2] … partitions[-(r+1)]): 61 layers on
// 4 stages → 15, 15, 16, 15. ConfigError when pp < 1 or pp > num_layers (a stage would hold no layer).
[[nodiscard]] std::vector<PipelineStage> pipeline_stages(int num_layers, int pipeline_parallel_size);

// The stages of a model: get_pp_indices over vLLM's decoder layers, each `blocks_per_decoder_layer` consecutive
// blocks here (Falcon-H1's two branches of one layer stay on one stage), as block ranges. ConfigError naming
// `pipeline_parallel_size` when the model's vLLM class does not support pipeline parallelism (Zamba2).
[[nodiscard]] std::vector<PipelineStage> model_pipeline_stages(const models::ModelSpec& model, int pipeline_parallel_size);

// The model restricted to one stage's layers (embedding, lm_head and vision tower fields unchanged).
[[nodiscard]] models::ModelSpec stage_model(const models::ModelSpec& model, const PipelineStage& stage);

// Weight bytes one GPU of stage `index` (of `num_stages`) loads at tensor parallelism `tp`: its layers, plus the
// input embedding and any vision tower on the first stage, plus a vocab × hidden lm_head on the last (its own
// ParallelLMHead, or the tied embedding built there), all divided by tp as plan_memory divides the whole model.
[[nodiscard]] std::int64_t stage_weight_bytes(const models::ModelSpec& model, const std::vector<PipelineStage>& stages,
                                              int index, int tp);

}  // namespace servesim::cache
