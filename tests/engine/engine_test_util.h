// Test helpers for tests/engine and tests/cluster: a cost model with exact step times (FixedCost), a scripted
// workload of hand-made requests, small KV cache configurations, and a harness that drives the real Scheduler and
// KvCacheManager one step at a time (schedule, then the replica's emit phase) with check_invariants() after each.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_spec.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/engine/cost_model.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"
#include "workloads/workload.h"

namespace servesim::engine::testing {

// One MoE layer (no attention): hidden 1024, 8 gated experts of 512, top-2, bf16.
inline models::ModelSpec one_moe_layer() {
    models::ModelSpec m;
    m.name = "toy-moe";
    m.hidden_size = 1024;
    m.vocab_size = 1000;
    models::MoeMlp moe;
    moe.num_experts = 8;
    moe.num_experts_per_tok = 2;
    moe.moe_intermediate_size = 512;
    m.layers.push_back(models::Layer{models::NoMixer{}, moe});
    return m;
}

inline core::ContentId content(std::uint64_t c) { return core::ContentId{c}; }

// Equal within an absolute tolerance (milliseconds and rates worked out by hand to 1e-6).
inline bool close(double a, double b, double tol = 1e-6) { return std::abs(a - b) < tol; }

// A calibrated profile of round coefficients for hand-worked cost-model tests (ms): gemm 1 + 0.01·tokens, lm_head
// 0.1 + 0.001·tokens, attn_prefill 1e-6·work, attn_decode 0.05 + 1e-5·context + 0.002·sequences, overhead
// 0.5 + 0.01·sequences.
inline constexpr const char* kProfileText = R"(servesim_profile: 1
gpu: test
date: "2026-11-29"
software: test
model: test
source: calibrated
hybrid: false
curves:
  gemm: {variables: [tokens], pieces: [{x_min: 1, x_max: 4096, coefficients: [1.0, 0.01, 0]}], r2: 1, max_rel_residual: 0, num_points: 3}
  lm_head: {variables: [tokens], pieces: [{x_min: 1, x_max: 256, coefficients: [0.1, 0.001, 0]}], r2: 1, max_rel_residual: 0, num_points: 3}
  attn_prefill: {variables: [work], pieces: [{x_min: 0, x_max: 1.0e9, coefficients: [0, 1.0e-6, 0]}], r2: 1, max_rel_residual: 0, num_points: 3}
  attn_decode: {variables: [context_tokens, sequences], pieces: [{x_min: 0, x_max: 1.0e7, coefficients: [0.05, 1.0e-5, 0.002]}], r2: 1, max_rel_residual: 0, num_points: 3}
  overhead: {variables: [sequences], pieces: [{x_min: 0, x_max: 1024, coefficients: [0.5, 0.01, 0]}], r2: 1, max_rel_residual: 0, num_points: 3}
)";

// Step time = base_ms + per_token_ms × scheduled tokens: exact, so every timestamp can be worked out by hand.
class FixedCost : public CostModel {
public:
    explicit FixedCost(double base_ms, double per_token_ms = 0) : base_ms_(base_ms), per_token_ms_(per_token_ms) {}

    [[nodiscard]] StepCost step_cost(const BatchShape& shape) const override {
        StepCost c;
        c.overhead_ms = base_ms_ + per_token_ms_ * static_cast<double>(shape.num_tokens);
        return c;
    }

    [[nodiscard]] std::string describe() const override { return "fixed"; }

private:
    double base_ms_;
    double per_token_ms_;
};

// Requests sent at fixed times, whatever finishes (open loop).
class ScriptedWorkload : public workloads::Workload {
public:
    explicit ScriptedWorkload(std::vector<workloads::RequestSpec> specs) : pending_(specs.begin(), specs.end()) {}

    [[nodiscard]] std::optional<core::SimTime> next_arrival_time() override {
        if (pending_.empty()) {
            return std::nullopt;
        }
        return pending_.front().arrival;
    }

    workloads::RequestSpec pop_next_arrival() override {
        workloads::RequestSpec s = pending_.front();
        pending_.pop_front();
        return s;
    }

    void on_request_finished(core::RequestId id, core::SimTime) override { finished.push_back(id); }

    void on_request_timed_out(core::RequestId id, core::SimTime now) override {
        timed_out.emplace_back(id, now);
    }

    [[nodiscard]] bool exhausted() const override { return pending_.empty(); }

    [[nodiscard]] std::string describe() const override { return "scripted"; }

    std::vector<core::RequestId> finished;
    std::vector<std::pair<core::RequestId, core::SimTime>> timed_out;  // (request, when the client gave up)

private:
    std::deque<workloads::RequestSpec> pending_;
};

inline workloads::RequestSpec spec(std::uint64_t id, double arrival_ms, core::TokenContent prompt,
                                   std::int64_t max_output_tokens) {
    workloads::RequestSpec s;
    s.id = core::RequestId{id};
    s.arrival = core::SimTime::from_ns(static_cast<std::int64_t>(arrival_ms * 1e6));
    s.prompt = std::move(prompt);
    s.max_output_tokens = max_output_tokens;
    s.answer_content = content(1'000'000 + id);
    return s;
}

// A plain full-attention model: one group, block size B; num_gpu_blocks includes the null block.
inline cache::KvCacheConfig full_attention_config(std::int64_t num_gpu_blocks, int block_size = 16) {
    cache::KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kFullAttention, block_size, 0, 1});
    c.enable_prefix_caching = true;
    return c;
}

// A hybrid like Qwen3.5-4B (1 full-attention group + 3 Gated DeltaNet groups) in mamba_cache_mode align.
inline cache::KvCacheConfig hybrid_align_config(std::int64_t num_gpu_blocks, int block_size) {
    cache::KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kFullAttention, block_size, 0, 8});
    for (int i = 0; i < 3; ++i) {
        c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kMamba, block_size, 0, 8});
    }
    c.enable_prefix_caching = true;
    c.mamba_cache_mode = cache::MambaCacheMode::kAlign;
    return c;
}

inline SchedulerConfig scheduler_config(std::int64_t max_num_batched_tokens, int block_size = 16,
                                        std::int64_t max_num_seqs = 1024, std::int64_t max_model_len = 100'000) {
    SchedulerConfig s;
    s.max_num_batched_tokens = max_num_batched_tokens;
    s.max_num_seqs = max_num_seqs;
    s.max_model_len = max_model_len;
    s.block_size = block_size;
    return s;
}

// The real Scheduler over the real KvCacheManager, stepped by hand. step() runs one schedule() and then what the
// replica's emit phase does at the end of the step: a token for every chunk that reached the end of its sequence,
// and the request finished (its blocks freed) once it has all its output tokens.
class Harness {
public:
    Harness(const SchedulerConfig& sc, const cache::KvCacheConfig& kc)
        : kv_(std::make_unique<cache::KvCacheManager>(kc)), scheduler_(sc, *kv_), block_size_(sc.block_size) {}

    Request* add(std::uint64_t id, core::TokenContent prompt, std::int64_t max_output_tokens) {
        requests_.push_back(std::make_unique<Request>(core::RequestId{id}, std::move(prompt), max_output_tokens,
                                                      content(1'000'000 + id), core::SimTime::zero(), block_size_));
        scheduler_.add_request(requests_.back().get());
        return requests_.back().get();
    }

    // Schedules one step (checking the block accounting), then emits its tokens (checking again).
    StepPlan step() {
        StepPlan plan = scheduler_.schedule();
        kv_->check_invariants();
        for (const auto& s : plan.scheduled) {
            if (s.samples_token && s.request->status == RequestStatus::kRunning) {
                s.request->append_output_token();
                if (s.request->is_finished()) {
                    scheduler_.finish_request(s.request);
                }
            }
        }
        kv_->check_invariants();
        return plan;
    }

    // Steps until nothing is left; returns the number of steps.
    int run_to_completion(int max_steps = 10'000) {
        int n = 0;
        while (scheduler_.has_work() && n < max_steps) {
            (void)step();
            ++n;
        }
        return n;
    }

    [[nodiscard]] cache::KvCacheManager& kv() { return *kv_; }

    [[nodiscard]] Scheduler& scheduler() { return scheduler_; }

private:
    std::unique_ptr<cache::KvCacheManager> kv_;
    Scheduler scheduler_;
    int block_size_;
    std::vector<std::unique_ptr<Request>> requests_;
};

// The number of tokens `r` got in `plan` (0 when not scheduled).
inline std::int64_t tokens_of(const StepPlan& plan, const Request* r) {
    for (const auto& s : plan.scheduled) {
        if (s.request == r) {
            return s.num_new_tokens;
        }
    }
    return 0;
}

}  // namespace servesim::engine::testing
