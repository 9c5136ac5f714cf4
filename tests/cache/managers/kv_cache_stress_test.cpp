// A seeded random workload over sim/cache (shared prefixes, chunked prefill, decode, preemption by free) for each
// group layout; check_invariants() after every operation (docs/ARCHITECTURE.md, "Invariants"). Deterministic:
// std::mt19937_64 raw draws only.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::content;
using testing::TestRequest;

void run_random_workload(const KvCacheConfig& config, int block_size, std::uint64_t seed) {
    KvCacheManager m(config);
    std::mt19937_64 rng(seed);
    const auto draw = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
    std::vector<std::unique_ptr<TestRequest>> running;
    std::uint64_t next_id = 0;
    for (int step = 0; step < 400; ++step) {
        m.begin_step();
        // Running requests: the rest of the prefill in chunks of whole blocks, or one decode token.
        for (std::size_t i = 0; i < running.size();) {
            TestRequest& r = *running[i];
            std::int64_t n = r.num_tokens() - r.num_computed_tokens;
            if (n == 0) {
                r.append_output(content(1000 + core::to_int(r.id)), 1);
                n = 1;
            } else if (n > block_size) {
                n = (1 + draw(3)) * block_size;
                n = std::min(n, r.num_tokens() - r.num_computed_tokens);
            }
            if (testing::advance(m, r, n) && draw(40) != 0) {
                ++i;
                continue;
            }
            // Finished or out of blocks: free (a preemption when it failed).
            testing::release(m, r);
            running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        }
        // Up to two arrivals sharing one of three system prompts.
        for (int a = 0; a < 2; ++a) {
            // The id is taken before the call: function arguments are evaluated in an unspecified order, so reading
            // next_id in one argument and incrementing it in another let compilers differ (clang: -Wunsequenced).
            const std::uint64_t id = next_id++;
            auto r = std::make_unique<TestRequest>(
                id,
                core::TokenContent{{content(1 + static_cast<std::uint64_t>(draw(3))), 100 + draw(4) * block_size},
                                   {content(100 + id), 1 + draw(3 * block_size)}},
                block_size);
            const std::int64_t n = std::min<std::int64_t>(r->num_tokens(), (1 + draw(4)) * block_size);
            const CacheHit hit = m.get_computed_blocks(r->view());
            m.check_invariants();
            const std::int64_t todo = std::min(n, r->num_tokens() - hit.num_tokens);
            if (m.allocate_slots(r->view(), todo, hit, 0, draw(2) == 0)) {
                r->num_computed_tokens = hit.num_tokens + todo;
                running.push_back(std::move(r));
            }
            m.check_invariants();
        }
    }
    for (auto& r : running) {
        testing::release(m, *r);
    }
    CHECK(m.num_free_blocks() == config.num_gpu_blocks - 1);
    CHECK(m.stats().hits <= m.stats().queries);
    if (config.enable_prefix_caching) {
        CHECK(m.stats().hits > 0);
    }
}

TEST_CASE("Random workloads keep the block invariant for every group layout", "[cache]") {
    SECTION("full attention, B = 16") {
        run_random_workload(testing::full_attention_config(120, 16), 16, 1);
    }
    SECTION("full attention, caching off") {
        run_random_workload(testing::full_attention_config(120, 16, false), 16, 2);
    }
    for (const auto mode : {MambaCacheMode::kAlign, MambaCacheMode::kAll}) {
        SECTION("full attention + 2 Mamba groups, mode " + std::to_string(static_cast<int>(mode))) {
            KvCacheConfig c = testing::full_attention_config(150, 32);
            c.groups.push_back(KvCacheGroup{KvGroupKind::kMamba, 32, 0, 1});
            c.groups.push_back(KvCacheGroup{KvGroupKind::kMamba, 32, 0, 1});
            c.mamba_cache_mode = mode;
            run_random_workload(c, 32, 3);
        }
    }
    SECTION("full attention + sliding window") {
        KvCacheConfig c = testing::full_attention_config(150, 16);
        c.groups.push_back(KvCacheGroup{KvGroupKind::kSlidingWindow, 16, 64, 1});
        run_random_workload(c, 16, 4);
    }
}

}  // namespace
}  // namespace servesim::cache
