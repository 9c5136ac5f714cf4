// Google Benchmark for tools/app/scenario.cpp's sweep expansion (issue 41): the time to read a scenario whose sweep
// has N points, every point merged, parsed and checked (memory plan included) before anything is simulated. Not a
// test. Linear in N since the expansion builds every point's nodes in the document's own yaml-cpp memory set
// (NodeArena); before, 1,000 points took 26 s and 0.8 GB here. Arg: points.
#include <benchmark/benchmark.h>

#include <string>

#include <fmt/format.h>

#include "tools/app/scenario.h"

namespace {

std::string grid_scenario(int points) {
    std::string rates;
    for (int i = 0; i < points; ++i) {
        rates += fmt::format("{}{}", i == 0 ? "" : ", ", 1.0 + 0.01 * i);
    }
    return "name: grid\ngpu: H100\nmodel: Qwen3-4B\n"
           "workload: {type: synthetic, num_requests: 10, rate: 1, prompt_tokens: 100, output_tokens: 10}\n"
           "sweep:\n  workload.rate: [" + rates + "]\n";
}

void BM_SweepExpansion(benchmark::State& state) {
    const std::string text = grid_scenario(static_cast<int>(state.range(0)));
    for (auto _ : state) {
        const auto sc = servesim::app::load_scenario_text(text, "grid.yaml", std::vector<servesim::app::Override>{});
        benchmark::DoNotOptimize(sc.experiments.size());
    }
    state.SetComplexityN(state.range(0));
}

BENCHMARK(BM_SweepExpansion)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Complexity();

}  // namespace
