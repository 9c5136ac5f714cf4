// Pipelined step time; see pipeline_parallel_cost_model.h.
#include "sim/engine/pipeline_parallel_cost_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace servesim::engine {

double PipelineHop::send_ms(double tokens) const {
    if (pipeline_parallel_size <= 1) {
        return 0.0;
    }
    const double bytes = 2.0 * tokens * hidden_size * dtype_bytes / std::max(1, tensor_parallel_size);
    return CollectiveCostModel(link, 2).send_ms(bytes);
}

PipelineParallelCostModel::PipelineParallelCostModel(std::unique_ptr<CostModel> inner, const PipelineHop& hop)
    : inner_(std::move(inner)), hop_(hop) {
    SERVESIM_CHECK(inner_ != nullptr, "PipelineParallelCostModel without an inner cost model");
    SERVESIM_CHECK(hop_.pipeline_parallel_size >= 1, "pipeline_parallel_size {}", hop_.pipeline_parallel_size);
}

BatchShape PipelineParallelCostModel::micro_batch(const BatchShape& s, std::int64_t m) {
    if (m <= 1) {
        return s;
    }
    auto share = [m](std::int64_t n) { return (n + m - 1) / m; };
    BatchShape b = s;
    b.num_tokens = share(s.num_tokens);
    b.num_prefill_tokens = share(s.num_prefill_tokens);
    b.num_prefill_seqs = share(s.num_prefill_seqs);
    b.prefill_attention_work = s.prefill_attention_work / static_cast<double>(m);
    b.num_gdn_chunks = share(s.num_gdn_chunks);
    b.num_decode_seqs = share(s.num_decode_seqs);
    b.decode_context_tokens = share(s.decode_context_tokens);
    b.num_sampled_seqs = share(s.num_sampled_seqs);
    b.num_snapshots = share(s.num_snapshots);
    b.num_seqs = share(s.num_seqs);
    for (LocalAttentionWork& w : b.local) {
        w.prefill_attention_work /= static_cast<double>(m);
        w.decode_context_tokens = share(w.decode_context_tokens);
    }
    return b;  // prefill_max_context_tokens: the longest chunk is whole in one micro-batch
}

StepCost PipelineParallelCostModel::step_cost(const BatchShape& shape) const {
    const int pp = hop_.pipeline_parallel_size;
    if (pp <= 1) {
        return inner_->step_cost(shape);
    }
    const std::int64_t m = std::clamp<std::int64_t>(shape.num_seqs, 1, pp);
    const BatchShape micro = micro_batch(shape, m);
    StepCost c = inner_->step_cost(micro);
    const double send_ms = hop_.send_ms(static_cast<double>(micro.num_tokens));
    if (shape.num_decode_seqs == 0 && shape.num_sampled_seqs == 0) {
        // Pipeline fill: nothing in this step waits for an output (only prefill chunks that are not their prompt's
        // last), so the scheduler's next batch — the same prompts' next chunks among them (their
        // num_computed_tokens moved at schedule time) — enters the first stage as soon as that stage has run these
        // m micro-batches and sent them on: m · (one stage's 1/P of the layers + one send). The step's last
        // micro-batch is still in the later stages; the step that samples pays the whole pass.
        const double stage_share = static_cast<double>(m) / static_cast<double>(pp);
        c.gemm_ms *= stage_share;
        c.lm_head_ms *= stage_share;
        c.attn_prefill_ms *= stage_share;
        c.attn_decode_ms *= stage_share;
        c.gdn_ms *= stage_share;
        c.snapshot_ms *= stage_share;
        c.comm_ms = c.comm_ms * stage_share + static_cast<double>(m) * send_ms;
        return c;  // overhead_ms: the engine's per-batch CPU work, whole
    }
    c.comm_ms += static_cast<double>(pp - 1) * send_ms;
    return c;
}

std::string PipelineParallelCostModel::describe() const {
    return fmt::format("{}, PP {}", inner_->describe(), hop_.pipeline_parallel_size);
}

}  // namespace servesim::engine
