// Pipeline stages of the memory plan; see pipeline_stages.h.
#include "sim/memory/pipeline_stages.h"

#include <fmt/format.h>

#include "common/error.h"
#include "models/model_derived.h"

namespace servesim::cache {

std::vector<PipelineStage> pipeline_stages(int num_layers, int pp) {
    if (pp < 1) {
        throw ConfigError(fmt::format("pipeline_parallel_size: must be at least 1, got {}", pp));
    }
    if (pp > num_layers) {
        throw ConfigError(fmt::format("pipeline_parallel_size: {} stages for {} layers would leave a stage without a "
                                      "layer; allowed: 1 to {}",
                                      pp, num_layers, num_layers));
    }
    std::vector<int> partitions(static_cast<std::size_t>(pp), num_layers / pp);
    const int remaining = num_layers % pp;
    for (int i = 2; i < remaining + 2; ++i) {
        ++partitions[static_cast<std::size_t>(pp - i)];  // partitions[-i] += 1
    }
    std::vector<PipelineStage> stages;
    int first = 0;
    for (int n : partitions) {
        stages.push_back({first, n});
        first += n;
    }
    return stages;
}

std::vector<PipelineStage> model_pipeline_stages(const models::ModelSpec& model, int pp) {
    if (pp > 1 && !model.supports_pipeline_parallel) {
        throw ConfigError(fmt::format("pipeline_parallel_size: {} stages asked, but vLLM's class for {} does not "
                                      "support pipeline parallelism (no SupportsPP; vLLM refuses it); allowed: 1",
                                      pp, model.name));
    }
    const int unit = model.blocks_per_decoder_layer;
    std::vector<PipelineStage> stages = pipeline_stages(static_cast<int>(model.layers.size()) / unit, pp);
    for (PipelineStage& s : stages) {
        s.first_layer *= unit;
        s.num_layers *= unit;
    }
    return stages;
}

models::ModelSpec stage_model(const models::ModelSpec& model, const PipelineStage& stage) {
    models::ModelSpec s = model;
    s.layers.assign(model.layers.begin() + stage.first_layer,
                    model.layers.begin() + stage.first_layer + stage.num_layers);
    return s;
}

std::int64_t stage_weight_bytes(const models::ModelSpec& model, const std::vector<PipelineStage>& stages, int index,
                                int tp) {
    // weight_bytes_total of a layer-less copy is the embedding, lm_head (untied) and vision tower; the difference to
    // the stage's copy is the stage's layers, whatever the layers' dtype rules are.
    models::ModelSpec no_layers = model;
    no_layers.layers.clear();
    const std::int64_t outside = models::weight_bytes_total(no_layers);
    const std::int64_t vocab_bytes =
        std::int64_t{model.vocab_size} * model.hidden_size * models::dtype_bytes(model.dtype);
    const std::int64_t lm_head = model.tie_word_embeddings ? 0 : vocab_bytes;
    const std::int64_t embedding_and_extra = outside - lm_head;
    std::int64_t bytes =
        models::weight_bytes_total(stage_model(model, stages[static_cast<std::size_t>(index)])) - outside;
    if (index == 0) {
        bytes += embedding_and_extra;
    }
    if (index + 1 == static_cast<int>(stages.size())) {
        bytes += vocab_bytes;
    }
    return bytes / tp;
}

}  // namespace servesim::cache
