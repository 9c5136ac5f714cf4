// Parallel layouts of a GPU budget (docs/PLANNER.md "Layout search"): the tensor × pipeline × data parallel (× expert
// parallel, for a MoE model) shapes a deployment of N GPUs can take, in nodes of K GPUs. It enumerates shapes only;
// whether the model fits a shape (vLLM's start-up memory check) or vLLM accepts it for the model (heads divisible by
// TP, no more stages than layers) is decided by the planner that loads each one.
//
// The shapes follow vLLM's parallel config (vllm/config/parallel.py ParallelConfig: world size = TP × PP per engine,
// `--data-parallel-size` engines; `--enable-expert-parallel` puts the experts on TP × DP ranks,
// vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make) and the placement vLLM's distributed
// serving guide advises: tensor parallelism inside a node, pipeline stages across nodes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesim::planner {

struct Layout {
    int tensor_parallel_size = 1;
    int pipeline_parallel_size = 1;
    int data_parallel_size = 1;  // replicas (vLLM engines) of TP × PP GPUs each
    bool enable_expert_parallel = false;

    [[nodiscard]] int gpus() const { return tensor_parallel_size * pipeline_parallel_size * data_parallel_size; }
    [[nodiscard]] int gpus_per_replica() const { return tensor_parallel_size * pipeline_parallel_size; }
    // "tp2 pp1 dp4", "tp1 pp1 dp8 ep": as the plan's tables label it.
    [[nodiscard]] std::string label() const;
    bool operator==(const Layout&) const = default;
};

struct LayoutSpace {
    int gpus = 8;            // the budget: every layout uses all of them
    int gpus_per_node = 8;   // GPUs come in nodes of this many (8 on an HGX board)
    bool moe = false;        // the model has routed experts: expert-parallel variants too
    std::optional<int> max_pipeline_parallel_size;  // none: any that tiles the budget
};

// Every layout of `space.gpus` GPUs (TP × PP × DP = gpus), in order of TP, then PP, then EP off before on:
//   - TP divides gpus_per_node: a tensor-parallel group never leaves its node (its all-reduces run every layer);
//   - a replica (TP × PP GPUs) either fits inside one node, dividing it, or is whole nodes, so replicas tile the
//     nodes without sharing one across a boundary;
//   - with `moe`, each layout with PP = 1 and TP × DP > 1 also comes with expert parallelism on (EP = TP × DP);
//     servesim models no EP with pipeline stages (docs/PARALLELISM.md), so none is listed.
// ConfigError when gpus or gpus_per_node is below 1, when gpus is not whole nodes (naming both and the nearest
// budgets), or when max_pipeline_parallel_size is below 1.
[[nodiscard]] std::vector<Layout> enumerate_layouts(const LayoutSpace& space);

}  // namespace servesim::planner
