// Google Benchmark for sim/cluster's routers: the time of one routing decision as the cluster grows (issue 15:
// per-request routing cost independent of the cluster size where the router allows). Not a test. The prompts are
// the cluster benchmark's shape: 1,000 tenants, each a 2,600-token system prompt (162 blocks of 16) and ~40 blocks
// of its own; llm_d and dynamo_kv walk a prompt's blocks once for all replicas (a block → replicas map) and touch
// the chosen replica's LRU, so only their O(replicas) score loop and the loads grow with the cluster.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster/router.h"

namespace {

namespace cluster = servesim::cluster;
namespace core = servesim::core;

constexpr int kTenants = 1000;
constexpr int kSystemBlocks = 162;
constexpr int kOwnBlocks = 40;
constexpr int kPrompts = 8192;

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return x | 1;  // never 0
}

// kPrompts prompts' block hashes: prompt p belongs to tenant p mod kTenants; its first blocks are the tenant's
// system prompt (shared by every prompt of that tenant), the rest its own.
std::vector<std::vector<core::BlockHash>> prompts() {
    std::vector<std::vector<core::BlockHash>> out(kPrompts);
    for (int p = 0; p < kPrompts; ++p) {
        const auto tenant = static_cast<std::uint64_t>(p % kTenants);
        for (int b = 0; b < kSystemBlocks; ++b) {
            out[p].push_back(core::BlockHash{mix((tenant << 20) + static_cast<std::uint64_t>(b))});
        }
        for (int b = 0; b < kOwnBlocks; ++b) {
            out[p].push_back(core::BlockHash{mix((std::uint64_t{1} << 50) + (static_cast<std::uint64_t>(p) << 8) +
                                                 static_cast<std::uint64_t>(b))});
        }
    }
    return out;
}

void route_many(benchmark::State& state, const std::string& name) {
    const auto replicas = static_cast<std::size_t>(state.range(0));
    cluster::RouterOptions o;
    o.replica_capacity_blocks = 16'418;  // Qwen3-32B's blocks on one H200 (the cluster benchmark's replicas)
    o.cache_signal_delay_s = 0.1;
    o.kv_utilization_weight = 1;
    auto router = cluster::make_router(name, o);
    const auto hashes = prompts();
    std::vector<cluster::ReplicaLoad> loads(replicas);
    const core::TokenContent prompt{{core::ContentId{1}, (kSystemBlocks + kOwnBlocks) * 16}};
    std::size_t p = 0;
    std::int64_t now_ns = 0;
    for (auto _ : state) {
        now_ns += 3'125'000;  // 320 requests/s
        if (router->needs_loads()) {  // as route_arrival: the loads are read only for routers that use them
            for (std::size_t r = 0; r < replicas; ++r) {
                loads[r] = cluster::ReplicaLoad{(p + r) % 3, (p * 7 + r) % 11, static_cast<double>((p + r) % 10) / 10};
            }
        }
        const std::size_t target =
            router->route(cluster::RouteRequest{prompt, core::SimTime::from_ns(now_ns), hashes[p],
                                                core::TenantId{static_cast<std::uint32_t>(p % kTenants) + 1}},
                          loads);
        benchmark::DoNotOptimize(target);
        p = (p + 1) % kPrompts;
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_RouteLlmD(benchmark::State& state) { route_many(state, "llm_d"); }
void BM_RouteDynamoKv(benchmark::State& state) { route_many(state, "dynamo_kv"); }
void BM_RouteSessionAffinity(benchmark::State& state) { route_many(state, "session_affinity"); }
void BM_RouteRoundRobin(benchmark::State& state) { route_many(state, "round_robin"); }

BENCHMARK(BM_RouteLlmD)->Arg(4)->Arg(16)->Arg(64)->Arg(256);
BENCHMARK(BM_RouteDynamoKv)->Arg(4)->Arg(16)->Arg(64)->Arg(256);
BENCHMARK(BM_RouteSessionAffinity)->Arg(4)->Arg(16)->Arg(64)->Arg(256);
BENCHMARK(BM_RouteRoundRobin)->Arg(4)->Arg(16)->Arg(64)->Arg(256);

}  // namespace
