// PipelineParallelCostModel: the step time of a pipelined engine, wrapped around either cost model (roofline or
// calibrated profile, both costing one pass of a batch through every layer). vLLM v1 runs pipeline parallelism with
// a batch queue of pipeline_parallel_size batches in flight (vllm/v1/engine/core.py EngineCore.step_with_batch_queue;
// MultiprocExecutor.max_concurrent_batches returns pp_size): it schedules a new micro-batch while earlier ones are
// still in the stages, and a decoding request waits for its token before it is scheduled again (its
// num_new_tokens is 0 until the output comes back: v1/core/sched/scheduler.py). In the steady state the running
// requests are spread over P micro-batches, and every request advances once per round trip of its micro-batch.
// servesim's replica runs one step at a time, so one step here stands for that round trip: the scheduler's batch
// split into m = min(P, sequences) micro-batches (a request is never split; fewer sequences than stages leave the
// rest of the pipeline idle: the bubble), and its time is one micro-batch through all layers (the inner model on
// the batch's 1/m share) plus P−1 stage-to-stage sends of that micro-batch's hidden states and residual
// (IntermediateTensors, vllm/model_executor/models/llama.py; each tensor-parallel rank sends its 1/TP slice,
// vllm/distributed/parallel_state.py send_tensor_dict with all_gather_group). The sends are added to comm_ms.
// That is the latency of a step whose outputs the scheduler waits for (decodes, a prompt's last chunk). A step of
// prefill chunks only waits for nothing: step_with_batch_queue schedules the next batch at once (it returns
// without blocking while the queue has room), and the scheduler hands the same prompts their next chunks because
// num_computed_tokens moved when the chunk was scheduled. Such a step costs the pipeline fill interval instead: its
// m micro-batches through the first stage (1/P of the layers) and m sends, after which the next step starts; a
// lone C-chunk prompt then takes (C − 1) intervals plus one full pass, as the pipeline does.
// What this leaves out is in docs/PARALLELISM.md.
#pragma once

#include <memory>
#include <string>

#include "sim/engine/collectives.h"
#include "sim/engine/cost_model.h"

namespace servesim::engine {

struct PipelineHop {
    int pipeline_parallel_size = 1;
    int tensor_parallel_size = 1;
    int hidden_size = 0;
    double dtype_bytes = 2;
    CollectiveLink link;          // the replica's TP × PP GPUs' link (collective_link_for_group); 0 B/s = no send cost

    // One stage-to-stage send of `tokens` tokens: hidden states and residual, this rank's 1/TP slice, costed as an
    // NCCL point-to-point send on the link (CollectiveCostModel::send_ms).
    [[nodiscard]] double send_ms(double tokens) const;
};

class PipelineParallelCostModel final : public CostModel {
public:
    PipelineParallelCostModel(std::unique_ptr<CostModel> inner, const PipelineHop& hop);

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override;

    [[nodiscard]] std::string describe() const override;

    [[nodiscard]] LocalAttentionSpans local_attention_spans() const override { return inner_->local_attention_spans(); }

    // The share of `shape` one of m micro-batches carries (counts rounded up, the longest chunk unchanged).
    [[nodiscard]] static BatchShape micro_batch(const BatchShape& shape, std::int64_t m);

private:
    std::unique_ptr<CostModel> inner_;
    PipelineHop hop_;
};

}  // namespace servesim::engine
