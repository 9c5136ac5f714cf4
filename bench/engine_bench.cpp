// Google Benchmark for one engine step's host work in sim/engine: Scheduler::schedule over a batch of decoding
// requests that share a cached system prompt, then the replica's emit phase (one sampled token per request, which
// extends its block hashes). Not a test; it guides the per-step cost, which must stay O(requests in the step).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/engine/request.h"
#include "sim/engine/scheduler.h"

namespace {

namespace cache = servesim::cache;
namespace core = servesim::core;
namespace engine = servesim::engine;

constexpr int kBlockSize = 16;
constexpr std::int64_t kSystemPromptTokens = 2600;
constexpr std::int64_t kUserTokens = 120;
// Decode steps between refills: long enough that the refill (outside the timing) is amortised, short enough that
// the requests never finish or run out of blocks.
constexpr int kStepsPerBatch = 256;

// Schedules `num_requests` requests with one shared system prompt until all of them decode (the first one computes
// and caches the prompt; the others hit it), then times decode steps: schedule + emit.
class DecodeBatch {
public:
    explicit DecodeBatch(std::int64_t num_requests) : num_requests_(num_requests), kv_cache_(kv_config()) {
        engine::SchedulerConfig sc;
        sc.max_num_batched_tokens = 8192;
        sc.max_num_seqs = 1024;
        sc.max_model_len = 32768;
        sc.block_size = kBlockSize;
        scheduler_ = std::make_unique<engine::Scheduler>(sc, kv_cache_);
    }

    // Finishes the current batch (if any) and admits a fresh one, stepping until every request decodes.
    void refill() {
        for (const auto& r : requests_) {
            scheduler_->finish_request(r.get());
        }
        requests_.clear();
        for (std::int64_t i = 0; i < num_requests_; ++i) {
            const std::uint64_t n = next_id_++;
            core::TokenContent prompt{{core::ContentId{1}, kSystemPromptTokens},
                                      {core::ContentId{1000 + n}, kUserTokens}};
            requests_.push_back(std::make_unique<engine::Request>(core::RequestId{n}, std::move(prompt), 1 << 20,
                                                                  core::ContentId{(1ULL << 40) + n}, now_, kBlockSize));
            scheduler_->add_request(requests_.back().get());
        }
        while (scheduler_->num_waiting() > 0 || num_prefilling() > 0) {
            step();
        }
    }

    // One step: schedule, then emit (every chunk that reaches the end of its sequence samples a token).
    std::int64_t step() {
        scheduler_->schedule(now_, plan_);
        for (const auto& s : plan_.scheduled) {
            if (s.samples_token) {
                s.request->append_output_token();
            }
        }
        now_ = now_ + core::Duration::from_ms(10);
        return plan_.num_scheduled_tokens;
    }

private:
    static cache::KvCacheConfig kv_config() {
        cache::KvCacheConfig c;
        c.num_gpu_blocks = 100'000;
        c.groups.push_back(cache::KvCacheGroup{cache::KvGroupKind::kFullAttention, kBlockSize, 0, 36});
        return c;
    }

    [[nodiscard]] std::int64_t num_prefilling() const {
        std::int64_t n = 0;
        for (const auto& r : requests_) {
            n += r->num_computed_tokens < r->num_prompt_tokens ? 1 : 0;
        }
        return n;
    }

    std::int64_t num_requests_;
    cache::KvCacheManager kv_cache_;
    std::unique_ptr<engine::Scheduler> scheduler_;
    std::vector<std::unique_ptr<engine::Request>> requests_;
    engine::StepPlan plan_;
    core::SimTime now_;
    std::uint64_t next_id_ = 0;
};

// One scheduler step + emit over N decoding requests; items = requests stepped.
void BM_SchedulerDecodeStep(benchmark::State& state) {
    DecodeBatch batch(state.range(0));
    batch.refill();
    int steps_in_batch = 0;
    for (auto _ : state) {
        if (steps_in_batch == kStepsPerBatch) {
            state.PauseTiming();
            batch.refill();
            steps_in_batch = 0;
            state.ResumeTiming();
        }
        benchmark::DoNotOptimize(batch.step());
        ++steps_in_batch;
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SchedulerDecodeStep)->Arg(16)->Arg(64);

}  // namespace
