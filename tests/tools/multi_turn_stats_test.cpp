// `--format multi-turn-bench` (tools/app/multi_turn_stats; docs/OUTPUTS.md): the statistics summary of vLLM's
// benchmarks/multi_turn/benchmark_serving_multi_turn.py (process_statistics) on hand-timed requests, every cell
// worked out; the extra quantile columns past 100 samples; a lone sample's missing std; a real multi_turn_bench
// run's message counts; --warmup-percentages; refused for order-only runs.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"
#include "tools/app/multi_turn_stats.h"
#include "tools/app/scenario.h"

namespace servesim::app {
namespace {

bool close(double a, double b) { return std::abs(a - b) < 1e-9 * std::max(1.0, std::abs(b)); }

core::SimTime at(double ms) { return core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

// Four requests timed by hand (ms), given to the collector in finish order (B 25, A 30, D 40, C 60):
//   request  sent  first token  finish  output  prompt  turn  → ttft  tpot             latency  messages  chunks
//   A        0     10           30      5       100     1        10    (30−10)/4 = 5    30       1         4
//   B        5     25           25      1       300     2        20    0 (one token)    20       3         0
//   C        10    16           60      3       500     3        6     (60−16)/2 = 22   50       5         2
//   D        20    28           40      4       200     0        8     (40−28)/3 = 4    20       1         3
// (D is not part of a dialogue: one message.) Sorted by start: A, B, C, D; the last row is D, which ends at 40 ms
// although C ends at 60, so runtime_sec = (40 − 0)/1000 = 0.040 and requests_per_sec = 4/0.040 = 100.
ExperimentResult hand_timed() {
    metrics::MetricsCollector m(core::SimTime::zero(), /*exact_percentiles=*/true, /*keep_request_records=*/true);
    for (double t : {0.0, 5.0, 10.0, 20.0}) {
        m.on_sent(at(t));
    }
    auto finished = [&](double sent, double first, double end, std::int64_t prompt, std::int64_t output, int turn) {
        metrics::MetricsCollector::FinishedRequest f;
        f.arrival = at(sent);
        f.first_scheduled = at(sent);
        f.first_token = at(first);
        f.finish = at(end);
        f.prompt_tokens = prompt;
        f.output_tokens = output;
        f.turn = turn;
        m.on_finished(f);
    };
    finished(5, 25, 25, 300, 1, 2);    // B
    finished(0, 10, 30, 100, 5, 1);    // A
    finished(20, 28, 40, 200, 4, 0);   // D
    finished(10, 16, 60, 500, 3, 3);   // C
    ExperimentResult r;
    r.config.name = "hand";
    r.config.seed = 7;
    r.model_name = "Qwen3-4B";
    r.sim.summary = m.summarize({}, 0, at(60));
    assess_result(r);
    return r;
}

// The whitespace-separated cells of the table row `label` in `text` (the label first).
std::vector<std::string> row_cells(const std::string& text, const std::string& label) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(label + " ", 0) == 0) {
            std::istringstream cells(line);
            std::vector<std::string> out;
            std::string c;
            while (cells >> c) {
                out.push_back(c);
            }
            return out;
        }
    }
    return {};
}

void check_row(const MultiTurnStatsRow& row, const char* metric, double mean, double std_dev, double min,
               std::vector<double> q, double max) {
    INFO(metric);
    CHECK(row.metric == metric);
    CHECK(row.count == 4);
    CHECK(close(row.mean, mean));
    REQUIRE(row.std_dev);
    CHECK(close(*row.std_dev, std_dev));
    CHECK(close(row.min, min));
    REQUIRE(row.quantiles.size() == q.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
        CHECK(close(row.quantiles[i], q[i]));
    }
    CHECK(close(row.max, max));
}

TEST_CASE("Multi-turn bench stats: describe() of the hand-timed requests, every cell", "[tools][output][multi_turn]") {
    const ExperimentResult r = hand_timed();
    const auto s = multi_turn_stats(r.sim.summary.requests);
    REQUIRE(s);
    CHECK(close(s->runtime_sec, 0.040));
    REQUIRE(s->requests_per_sec);
    CHECK(close(*s->requests_per_sec, 100));
    // Fewer than 100 samples: 25, 50, 75, 90 %. With n = 4 the linear quantile's rank is q · 3: 0.75, 1.5, 2.25, 2.7.
    CHECK(s->quantiles_percent == std::vector<double>{25, 50, 75, 90});
    REQUIRE(s->rows.size() == 7);
    // ttft 6, 8, 10, 20: mean 11; deviations −5, −3, −1, 9 → Σ² 116, sample std √(116/3);
    // 25 % 6 + 0.75·2 = 7.5, 50 % 8 + 0.5·2 = 9, 75 % 10 + 0.25·10 = 12.5, 90 % 10 + 0.7·10 = 17.
    check_row(s->rows[0], "ttft_ms", 11, std::sqrt(116.0 / 3), 6, {7.5, 9, 12.5, 17}, 20);
    // tpot 0, 4, 5, 22 (B's one-token answer counts as 0, as the tool keeps it): mean 31/4 = 7.75;
    // Σ² 7.75² + 3.75² + 2.75² + 14.25² = 284.75 → √(284.75/3); 0 + 0.75·4 = 3, 4 + 0.5·1 = 4.5,
    // 5 + 0.25·17 = 9.25, 5 + 0.7·17 = 16.9.
    check_row(s->rows[1], "tpot_ms", 7.75, std::sqrt(284.75 / 3), 0, {3, 4.5, 9.25, 16.9}, 22);
    // latency 20, 20, 30, 50: mean 30; Σ² 100 + 100 + 0 + 400 = 600 → √200; 20, 20 + 0.5·10 = 25,
    // 30 + 0.25·20 = 35, 30 + 0.7·20 = 44.
    check_row(s->rows[2], "latency_ms", 30, std::sqrt(200.0), 20, {20, 25, 35, 44}, 50);
    // messages in the prompt 1, 1, 3, 5: mean 2.5; Σ² 2.25 + 2.25 + 0.25 + 6.25 = 11 → √(11/3); 1, 1 + 0.5·2 = 2,
    // 3 + 0.25·2 = 3.5, 3 + 0.7·2 = 4.4.
    check_row(s->rows[3], "input_num_turns", 2.5, std::sqrt(11.0 / 3), 1, {1, 2, 3.5, 4.4}, 5);
    // prompt tokens 100, 200, 300, 500: mean 275; Σ² 175² + 75² + 25² + 225² = 87,500 → √(87500/3);
    // 100 + 0.75·100 = 175, 250, 300 + 0.25·200 = 350, 300 + 0.7·200 = 440.
    check_row(s->rows[4], "input_num_tokens", 275, std::sqrt(87500.0 / 3), 100, {175, 250, 350, 440}, 500);
    // output tokens 1, 3, 4, 5: mean 3.25; Σ² 2.25² + 0.25² + 0.75² + 1.75² = 8.75 → √(8.75/3);
    // 1 + 0.75·2 = 2.5, 3.5, 4 + 0.25 = 4.25, 4 + 0.7 = 4.7.
    check_row(s->rows[5], "output_num_tokens", 3.25, std::sqrt(8.75 / 3), 1, {2.5, 3.5, 4.25, 4.7}, 5);
    // chunks after the first = output − 1: 0, 2, 3, 4, the same std.
    check_row(s->rows[6], "output_num_chunks", 2.25, std::sqrt(8.75 / 3), 0, {1.5, 2.5, 3.25, 3.7}, 4);

    // The printed summary, as pandas prints it with display.precision 2: two decimals, then the trailing zeros that
    // a whole column shares dropped down to one decimal (count 4 → 4.0; min 6, 0, 20, 1, 100, 1, 0 → 6.0 …; 90 %
    // 17, 16.9, 44, 4.4, 440, 4.7, 3.7 → one decimal), columns right-aligned two spaces apart.
    const std::string text = format_multi_turn_bench({r});
    CHECK(text.find("name=hand\n") != std::string::npos);
    CHECK(text.find("seed=7\n") != std::string::npos);
    CHECK(text.find("runtime_sec = 0.040\n") != std::string::npos);
    CHECK(text.find("requests_per_sec = 100.000\n") != std::string::npos);
    // Widths: the labels 17 ("output_num_tokens"); count 5 ("count"); mean, std 6 ("275.00", "170.78"); min, 25 %,
    // 50 %, 90 %, max 5 ("100.0", …); 75 % 6 ("350.00"). Std: √(116/3) = 6.218, √(284.75/3) = 9.742, √200 = 14.142,
    // √(11/3) = 1.915, √(87500/3) = 170.783, √(8.75/3) = 1.708.
    const std::string table = "                   count    mean     std    min    25%    50%     75%    90%    max\n"
                              "ttft_ms              4.0   11.00    6.22    6.0    7.5    9.0   12.50   17.0   20.0\n"
                              "tpot_ms              4.0    7.75    9.74    0.0    3.0    4.5    9.25   16.9   22.0\n"
                              "latency_ms           4.0   30.00   14.14   20.0   20.0   25.0   35.00   44.0   50.0\n"
                              "input_num_turns      4.0    2.50    1.91    1.0    1.0    2.0    3.50    4.4    5.0\n"
                              "input_num_tokens     4.0  275.00  170.78  100.0  175.0  250.0  350.00  440.0  500.0\n"
                              "output_num_tokens    4.0    3.25    1.71    1.0    2.5    3.5    4.25    4.7    5.0\n"
                              "output_num_chunks    4.0    2.25    1.71    0.0    1.5    2.5    3.25    3.7    4.0\n";
    CHECK(text.find(table) != std::string::npos);
}

TEST_CASE("Multi-turn bench stats: 99 % joins at 100 samples; one sample has no std", "[tools][output][multi_turn]") {
    // 100 requests sent at 0, 1, …, 99 ms, each with TTFT k + 1 ms (k = 0 … 99): TTFT 1 … 100. Rank of 99 % =
    // 0.99 · 99 = 98.01 → 99 + 0.01·1 = 99.01; 90 %: 89.1 → 90.1; sample std of 1 … 100 = √(100·101/12) = 29.011.
    std::vector<metrics::RequestRecord> recs;
    for (int k = 0; k < 100; ++k) {
        metrics::RequestRecord q;
        q.arrival_s = k / 1000.0;
        q.ttft_ms = k + 1;
        q.e2e_ms = k + 1;
        q.prompt_tokens = 10;
        q.output_tokens = 1;
        recs.push_back(q);
    }
    const auto s = multi_turn_stats(recs);
    REQUIRE(s);
    CHECK(s->quantiles_percent == std::vector<double>{25, 50, 75, 90, 99});
    CHECK(close(s->rows[0].quantiles[3], 90.1));
    CHECK(close(s->rows[0].quantiles[4], 99.01));
    CHECK(close(*s->rows[0].std_dev, std::sqrt(100.0 * 101 / 12)));
    // The last-started request is sent at 99 ms and ends at 99 + 100 = 199 ms: runtime 0.199 s.
    CHECK(close(s->runtime_sec, 0.199));
    // One request: pandas' std is NaN there; servesim prints "—", never a number it did not measure.
    const auto one = multi_turn_stats({recs.front()});
    REQUIRE(one);
    CHECK(!one->rows[0].std_dev);
    ExperimentResult r;
    r.config.name = "one";
    r.sim.summary.requests = {recs.front()};
    const std::string text = format_multi_turn_bench({r});
    CHECK(row_cells(text, "ttft_ms") ==
          std::vector<std::string>{"ttft_ms", "1.0", "1.0", "—", "1.0", "1.0", "1.0", "1.0", "1.0", "1.0"});
    // No finished request: no table, as the tool prints "No samples to process".
    CHECK(!multi_turn_stats({}));
    r.sim.summary.requests.clear();
    CHECK(format_multi_turn_bench({r}).find("No samples to process") != std::string::npos);
}

TEST_CASE("Multi-turn bench stats: a multi_turn_bench run counts the messages of each prompt",
          "[tools][output][multi_turn]") {
    // 2 clients, 2 conversations of exactly 6 messages (3 user turns): the prompts hold 1, 3 and 5 messages, two
    // requests of each; every request is measured (no warm-up).
    const std::string text = R"(
name: mt
seed: 3
model: Qwen3-4B
gpu: H200
workload:
  type: multi_turn_bench
  num_clients: 2
  conversations:
    num_conversations: 2
    prompt_input:
      num_turns: {distribution: constant, value: 6}
      prefix_num_tokens: {distribution: constant, value: 20}
      num_tokens: {distribution: constant, value: 50}
    prompt_output:
      num_tokens: {distribution: constant, value: 10}
)";
    Scenario sc = load_scenario_text(text, "mt.yaml", {}, std::nullopt);
    for (auto& x : sc.experiments) {
        x.keep_request_records = true;  // as the command line sets it for --format multi-turn-bench
    }
    const auto results = run_experiments(sc.experiments, 1, {});
    const auto s = multi_turn_stats(results.front().sim.summary.requests);
    REQUIRE(s);
    const MultiTurnStatsRow& turns = s->rows[3];
    REQUIRE(turns.metric == "input_num_turns");
    CHECK(turns.count == 6);
    CHECK(close(turns.min, 1));
    CHECK(close(turns.mean, 3));  // (1 + 1 + 3 + 3 + 5 + 5)/6
    CHECK(close(turns.max, 5));
    // Every answer is 10 tokens: nine chunks after the first.
    CHECK(close(s->rows[5].mean, 10));
    CHECK(close(s->rows[6].mean, 9));
}

TEST_CASE("Multi-turn bench stats: --warmup-percentages leaves out the first samples by send time",
          "[tools][output][multi_turn]") {
    const ExperimentResult r = hand_timed();
    // 50 % of 4: int(2.0) = 2 warm-up rows (A, B); the tail is C (sent 10, ends 60) and D (sent 20, ends 40):
    // runtime (40 − 10)/1000 = 0.030 s, 2/0.030 = 66.667 req/s. TTFT 6, 8: mean 7, sample std √((1 + 1)/1) = √2;
    // rank q · 1: 6.5, 7, 7.5, 7.8. The quantile columns still follow the 4 samples in all.
    const auto s = multi_turn_stats(r.sim.summary.requests, 0.5);
    REQUIRE(s);
    CHECK(close(s->runtime_sec, 0.030));
    CHECK(close(*s->requests_per_sec, 2 / 0.030));
    CHECK(s->rows[0].count == 2);
    CHECK(close(s->rows[0].mean, 7));
    CHECK(close(*s->rows[0].std_dev, std::sqrt(2.0)));
    CHECK(s->rows[0].quantiles.size() == 4);
    CHECK(close(s->rows[0].quantiles[0], 6.5));
    CHECK(close(s->rows[0].quantiles[3], 7.8));
    // The flag's values: "%" optional, sorted ascending; 100 % or a word is refused by name.
    CHECK(parse_warmup_percentages("50,0%") == std::vector<double>{0, 0.5});
    CHECK_THROWS_AS(parse_warmup_percentages("100%"), ConfigError);
    CHECK_THROWS_AS(parse_warmup_percentages("half"), ConfigError);
    CHECK_THROWS_AS(parse_warmup_percentages("10,"), ConfigError);
    // Several fractions: one table each, each headed with its warm-up, as the tool prints them.
    const std::string text = format_multi_turn_bench({r}, parse_warmup_percentages("0%,50%"));
    CHECK(text.find("Statistics summary (assuming 0% warmup samples):\nruntime_sec = 0.040\n") != std::string::npos);
    CHECK(text.find("Statistics summary (assuming 50% warmup samples):\nruntime_sec = 0.030\n") !=
          std::string::npos);
    CHECK(text.find("requests_per_sec = 66.667\n") != std::string::npos);
}

TEST_CASE("Multi-turn bench stats: an order-only run is refused with the reason", "[tools][output][multi_turn]") {
    ExperimentResult r;
    r.config.name = "order";
    r.order_only = cache::OrderOnlyResult{};
    try {
        (void)format_multi_turn_bench({r});
        FAIL("an order-only run was accepted");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("--format multi-turn-bench: `mode: order_only` has no timings") !=
              std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::app
