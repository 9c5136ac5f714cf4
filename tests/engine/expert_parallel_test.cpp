// Tests sim/memory/expert_placement.* and sim/engine/expert_parallel.*: vLLM's linear expert placement
// (determine_expert_map), the weights one GPU holds, and the busiest rank's expert work and all-to-all.
#include "sim/engine/expert_parallel.h"

#include <cmath>

#include "models/model_derived.h"
#include "models/model_registry.h"
#include "sim/memory/expert_placement.h"
#include "tests/catch.h"
#include "tests/engine/engine_test_util.h"

namespace servesim::engine {
namespace {

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

using testing::one_moe_layer;

TEST_CASE("EP: experts placed as determine_expert_map, the first E % EP ranks one more", "[engine][ep]") {
    // 128 experts on 6 ranks: 21 each, remainder 2 → ranks 0 and 1 hold 22.
    CHECK(cache::local_num_experts(128, 6, 0) == 22);
    CHECK(cache::local_num_experts(128, 6, 1) == 22);
    CHECK(cache::local_num_experts(128, 6, 2) == 21);
    CHECK(cache::local_num_experts(128, 6, 5) == 21);
    int sum = 0;
    for (int r = 0; r < 6; ++r) {
        sum += cache::local_num_experts(128, 6, r);
    }
    CHECK(sum == 128);
    CHECK(cache::max_local_experts(128, 8) == 16);
    CHECK(cache::max_local_experts(128, 1) == 128);
}

TEST_CASE("EP: Qwen3-235B-A22B on 8 ranks at TP 1 holds 16 whole experts per layer and all else", "[engine][ep]") {
    // 94 MoE layers of 128 experts, each 3 · 4096 · 1536 = 18,874,368 params: routed 227,096,395,776 params =
    // 454,192,791,552 B; a rank keeps 16 per layer: 94 · 16 · 18,874,368 · 2 B = 56,774,098,944 B, plus every other
    // weight unsharded (TP 1).
    const auto q = models::resolve_model("Qwen3-235B-A22B");
    CHECK(cache::routed_expert_weight_bytes(q) == 454'192'791'552);
    const std::int64_t rest = models::weight_bytes_total(q) - 454'192'791'552;
    CHECK(cache::expert_parallel_weight_bytes(q, 1, 8) == rest + 56'774'098'944);
    // EP 8 at TP 8 holds what TP 8 slicing holds (16 experts' worth either way).
    CHECK(cache::expert_parallel_weight_bytes(q, 8, 8) == rest / 8 + 56'774'098'944);
}

TEST_CASE("EP: the busiest rank's expert work and the dispatch/combine all-to-all", "[engine][ep]") {
    // 4 tokens on a replica, TP 1, DP 2 → EP 2, imbalance 1.5, NVSwitch at 450 GB/s (bus 329 GB/s at 2 ranks).
    ExpertParallelism ep;
    ep.expert_parallel_size = 2;
    ep.data_parallel_size = 2;
    ep.expert_load_imbalance = 1.5;
    ep.link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
    const ExpertStepWork w = expert_step_work(one_moe_layer(), ep, 4);
    // An expert: 3 · 1024 · 512 = 1,572,864 params (3,145,728 B). FLOPs: 2 · 4 tokens · 2 experts · 1,572,864 =
    // 25,165,824 sliced by TP 1; the busiest EP rank 1.5x that.
    CHECK(w.flops_tp == 25'165'824.0);
    CHECK(w.flops_ep == 37'748'736.0);
    // Weights read: TP reads the experts 4 tokens touch, 8 · (1 − 0.75^4) = 5.46875 → 17,203,200 B; an EP rank
    // its 4 experts, each touched by some of the 2 replicas' 8 tokens: 4 · (1 − 0.75^8) · 3,145,728 B.
    CHECK(near(w.weight_bytes_tp, 17'203'200.0));
    CHECK(near(w.weight_bytes_ep, 4.0 * (1.0 - std::pow(0.75, 8)) * 3'145'728.0));
    // allgather_reducescatter (vLLM's default): the DP group (2 ranks) all-gathers the 8 tokens' hidden states and
    // router logits, 8 · (1024 + 8) · 2 B = 16,512 B, of which a rank receives half: 8,256 B, whatever the routing.
    // NCCL LL (a third of 329 GB/s): 6.6 + 0.6 µs + 8,256 / 109.667e9 s = 7.27528 µs. The reduce-scatter of the
    // 8 · 1024 · 2 = 16,384 B outputs: 7.2 + 0.07470 = 7.27470 µs. Together 0.01454998 ms.
    CHECK(w.dispatch_bytes == 8256.0);
    CHECK(std::abs(w.all_to_all_ms - 0.01454998) < 1e-8);
    // deepep_low_latency: only the top-k copies, to the EP group (2 ranks): 4 tokens · 2 · 1024 · 2 B · 1.5 =
    // 24,576 B sent by the busiest rank, half to the other rank: 12,288 B. LL: 7.2 µs + 12,288 / 109.667e9 s =
    // 7.31205 µs, dispatch and combine: 0.01462410 ms.
    ExpertParallelism deepep = ep;
    deepep.backend = All2AllBackend::kDeepepLowLatency;
    const ExpertStepWork d = expert_step_work(one_moe_layer(), deepep, 4);
    CHECK(d.dispatch_bytes == 12288.0);
    CHECK(std::abs(d.all_to_all_ms - 0.01462410) < 1e-8);
    CHECK(d.flops_ep == w.flops_ep);  // the backend moves data; the experts' work is the same
    // naive runs allgather_reducescatter (vLLM PR #33728).
    ExpertParallelism naive = ep;
    naive.backend = All2AllBackend::kNaive;
    CHECK(expert_step_work(one_moe_layer(), naive, 4).all_to_all_ms == w.all_to_all_ms);
    // DP 1 (EP = TP 2 on one replica): vLLM runs no all2all (use_all2all_kernels needs dp_size > 1); the MoE output
    // is all-reduced over TP like any layer.
    ExpertParallelism tp_only = ep;
    tp_only.tensor_parallel_size = 2;
    tp_only.data_parallel_size = 1;
    CHECK(expert_step_work(one_moe_layer(), tp_only, 4).all_to_all_ms == 0);
    // Off (EP 1): no all-to-all; the work is TP's.
    ExpertParallelism off;
    const ExpertStepWork none = expert_step_work(one_moe_layer(), off, 4);
    CHECK(none.all_to_all_ms == 0);
    CHECK(none.flops_ep == none.flops_tp);
}

TEST_CASE("EP: vLLM's --all2all-backend values by name", "[engine][ep]") {
    CHECK(parse_all2all_backend("allgather_reducescatter") == All2AllBackend::kAllgatherReducescatter);
    CHECK(parse_all2all_backend("deepep_high_throughput") == All2AllBackend::kDeepepHighThroughput);
    CHECK_FALSE(parse_all2all_backend("mori_low_latency").has_value());
    CHECK(all2all_backend_names().rfind("allgather_reducescatter, naive, pplx", 0) == 0);
    CHECK_FALSE(moves_routed_copies(All2AllBackend::kNaive));
    CHECK(moves_routed_copies(All2AllBackend::kPplx));
}

}  // namespace
}  // namespace servesim::engine
