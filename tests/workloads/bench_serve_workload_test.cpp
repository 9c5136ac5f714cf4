// Tests of workloads/bench_serve_workload.*: `vllm bench serve`'s send schedule (serve.py get_request), its
// max_concurrency semaphore under a slow server, and its datasets (datasets.py): the random dataset's length ranges
// and shared prefix, prefix_repetition's assignment and shuffle, custom JSONL's shuffle and oversampling, ShareGPT
// single- and multi-turn. Orders that come from the tool's random.shuffle were printed by CPython 3.11 (each test
// quotes the command). Bad input is refused before anything runs, naming the key.
#include "workloads/bench_serve_workload.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/content_ids.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::error_of;
using servesim::workloads::test::yaml;

namespace {

// A dataset file in the temp folder; returns its path.
std::string write_file(const std::string& name, const std::string& text) {
    const auto path = (std::filesystem::temp_directory_path() / ("servesim_bench_serve_" + name)).string();
    std::ofstream(path) << text;
    return path;
}

core::Duration seconds(double s) {
    return core::Duration::from_s(s);
}

}  // namespace

TEST_CASE("bench_serve schedule: rate inf sends everything at t = 0, burstiness inf spaces by 1/rate",
          "[workloads][bench_serve]") {
    core::RngStream rng(1, "test");
    for (const auto t : bench_serve_schedule(5, std::numeric_limits<double>::infinity(), 1.0, rng)) {
        CHECK(t.ns() == 0);
    }
    // rate 2, constant gaps 0.5 s: the first request leaves after one gap (get_request sleeps before it too).
    const auto constant = bench_serve_schedule(4, 2.0, std::numeric_limits<double>::infinity(), rng);
    REQUIRE(constant.size() == 4);
    CHECK(constant[0].s() == 0.5);
    CHECK(constant[1].s() == 1.0);
    CHECK(constant[2].s() == 1.5);
    CHECK(constant[3].s() == 2.0);
}

TEST_CASE("bench_serve schedule: gamma gaps rescaled so the last request leaves at num_prompts / rate",
          "[workloads][bench_serve]") {
    // 4000 requests at 10 req/s, burstiness 0.25: the last leaves at exactly 400 s. Gamma gaps of shape k have a
    // coefficient of variation 1/√k = 2 (the rescaling by ≈ 1 ± 1/√(4000·k) ≈ 3 % leaves it unchanged); the SE of the
    // sample CV at k = 0.25 over 4000 gaps is ≈ 0.05, so the tolerance 0.25 is 5 SE.
    core::RngStream rng(7, "test");
    const auto t = bench_serve_schedule(4000, 10.0, 0.25, rng);
    REQUIRE(t.size() == 4000);
    CHECK(std::abs(t.back().s() - 400.0) < 1e-6);
    double sum = 0;
    double sum_sq = 0;
    double prev = 0;
    for (const auto x : t) {
        const double gap = x.s() - prev;
        CHECK(gap >= 0);
        sum += gap;
        sum_sq += gap * gap;
        prev = x.s();
    }
    const double mean = sum / 4000.0;
    const double cv = std::sqrt(sum_sq / 4000.0 - mean * mean) / mean;
    CHECK(std::abs(mean - 0.1) < 1e-9);
    CHECK(std::abs(cv - 2.0) < 0.25);
}

TEST_CASE("bench_serve ramp-up: request i at the ramp's rate, times not rescaled", "[workloads][bench_serve]") {
    // Linear 1 → 4 req/s over 4 requests, constant gaps: rates 1, 2, 3, 4 → gaps 1, 0.5, 1/3, 0.25 → sends at 1,
    // 1.5, 1.8333, 2.0833. Exponential 1 → 8: rates 1, 2, 4, 8 → 1, 1.5, 1.75, 1.875.
    core::RngStream rng(1, "test");
    const double inf = std::numeric_limits<double>::infinity();
    const auto linear = bench_serve_schedule(4, inf, inf, rng, BenchServeRampUp{false, 1, 4});
    REQUIRE(linear.size() == 4);
    CHECK(linear[0].s() == 1.0);
    CHECK(linear[1].s() == 1.5);
    CHECK(std::abs(linear[2].s() - (1.5 + 1.0 / 3.0)) < 1e-9);
    CHECK(std::abs(linear[3].s() - (1.5 + 1.0 / 3.0 + 0.25)) < 1e-9);
    const auto exponential = bench_serve_schedule(4, inf, inf, rng, BenchServeRampUp{true, 1, 8});
    CHECK(std::abs(exponential[3].s() - 1.875) < 1e-9);
    CHECK(error_of("type: bench_serve\nramp_up_strategy: linear\nramp_up_start_rps: 0\nramp_up_end_rps: 5\n")
              .find("'workload.ramp_up_start_rps': must be positive") != std::string::npos);
    CHECK(error_of("type: bench_serve\nrequest_rate: 3\nramp_up_strategy: linear\nramp_up_start_rps: 1\n"
                   "ramp_up_end_rps: 5\n")
              .find("'workload.request_rate': not used with ramp_up_strategy") != std::string::npos);
}

TEST_CASE("bench_serve sends open loop: a slow server does not delay the sends", "[workloads][bench_serve]") {
    // 3 requests, rate 1 with constant gaps → scheduled at 1, 2, 3 s; each takes 5 s; no semaphore: sent at 1, 2, 3.
    auto w = make_workload(yaml(R"(
type: bench_serve
request_rate: 1
burstiness: inf
num_prompts: 3
random_input_len: 100
random_output_len: 10
)"),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(5); });
    REQUIRE(served.size() == 3);
    CHECK(served[0].spec.arrival.s() == 1.0);
    CHECK(served[1].spec.arrival.s() == 2.0);
    CHECK(served[2].spec.arrival.s() == 3.0);
    CHECK(w->exhausted());
}

TEST_CASE("bench_serve max_concurrency holds a request until a slot frees", "[workloads][bench_serve]") {
    // Scheduled at 1, 2, 3 s, 5 s each. max_concurrency 1: 1 → finishes 6 → the second leaves at 6 → 11 → the third
    // at 11. max_concurrency 2: 1 and 2 leave on time; the third waits for the first's finish at 6.
    const auto sends = [](int max_concurrency) {
        auto w = make_workload(yaml(fmt::format(R"(
type: bench_serve
request_rate: 1
burstiness: inf
max_concurrency: {}
num_prompts: 3
random_input_len: 100
random_output_len: 10
)",
                                                max_concurrency)),
                               1);
        std::vector<double> out;
        for (const auto& s : drive(*w, [](const RequestSpec&) { return seconds(5); })) {
            out.push_back(s.spec.arrival.s());
        }
        return out;
    };
    CHECK(sends(1) == std::vector<double>{1.0, 6.0, 11.0});
    CHECK(sends(2) == std::vector<double>{1.0, 2.0, 6.0});
    // request_rate inf with max_concurrency 2 is a closed loop of 2: sent at 0, 0, then at the first finish, 5.
    auto w = make_workload(yaml("type: bench_serve\nmax_concurrency: 2\nnum_prompts: 3\nrandom_input_len: 100\n"), 1);
    std::vector<double> out;
    for (const auto& s : drive(*w, [](const RequestSpec&) { return seconds(5); })) {
        out.push_back(s.spec.arrival.s());
    }
    CHECK(out == std::vector<double>{0.0, 0.0, 5.0});
}

TEST_CASE("bench_serve random dataset: lengths uniform on [L(1-r), L(1+r)] after a shared prefix",
          "[workloads][bench_serve]") {
    // input 100, ratio 0.5 → [50, 150]; output 10 with its own ratio 0.3 → [floor 7, ceil 13]. 3000 requests: every
    // value of the 101 input lengths and the 7 output lengths appears (P(one missing) < 101·(1 − 1/101)^3000 ≈ 1e-11),
    // and the mean input is 100 ± 0.53·... (SD 29.2 / √3000 = 0.53; tolerance 2.5).
    auto w = make_workload(yaml(R"(
type: bench_serve
num_prompts: 3000
random_input_len: 100
random_output_len: 10
random_range_ratio: {input: 0.5, output: 0.3}
random_prefix_len: 30
)"),
                           3);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration{}; });
    REQUIRE(served.size() == 3000);
    std::set<std::int64_t> inputs;
    std::set<std::int64_t> outputs;
    std::set<std::uint64_t> unique_ids;
    double sum = 0;
    for (const auto& s : served) {
        REQUIRE(s.spec.prompt.size() == 2);
        CHECK(s.spec.prompt[0] == core::ContentRun{dataset_prefix_content(0), 30});
        inputs.insert(s.spec.prompt[1].length_tokens);
        unique_ids.insert(core::to_int(s.spec.prompt[1].content));
        outputs.insert(s.spec.max_output_tokens);
        sum += static_cast<double>(s.spec.prompt[1].length_tokens);
        CHECK(s.spec.arrival.ns() == 0);  // request_rate defaults to inf, as in the tool
    }
    CHECK(*inputs.begin() == 50);
    CHECK(*inputs.rbegin() == 150);
    CHECK(inputs.size() == 101);
    CHECK(*outputs.begin() == 7);
    CHECK(*outputs.rbegin() == 13);
    CHECK(outputs.size() == 7);
    CHECK(unique_ids.size() == 3000);  // the random part is nobody else's
    CHECK(std::abs(sum / 3000.0 - 100.0) < 2.5);
}

TEST_CASE("bench_serve prefix_repetition: num_prompts // num_prefixes per prefix, shuffled as the tool does",
          "[workloads][bench_serve]") {
    // 10 prompts, 3 prefixes → 3 per prefix, 9 requests, built prefix-major [0,0,0,1,1,1,2,2,2], then
    // random.seed(7); random.shuffle → python3 -c "import random; random.seed(7); x=[0,0,0,1,1,1,2,2,2];
    // random.shuffle(x); print(x)" prints [0, 2, 2, 1, 0, 2, 1, 0, 1].
    auto w = make_workload(yaml(R"(
type: bench_serve
dataset_name: prefix_repetition
num_prompts: 10
prefix_repetition_num_prefixes: 3
prefix_repetition_prefix_len: 64
prefix_repetition_suffix_len: 16
prefix_repetition_output_len: 8
seed: 7
)"),
                           99);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 9);
    const std::vector<std::uint64_t> expected = {0, 2, 2, 1, 0, 2, 1, 0, 1};
    std::set<std::uint64_t> suffixes;
    for (std::size_t i = 0; i < served.size(); ++i) {
        const auto& p = served[i].spec.prompt;
        REQUIRE(p.size() == 2);
        CHECK(p[0] == core::ContentRun{dataset_prefix_content(expected[i]), 64});
        CHECK(p[1].length_tokens == 16);
        suffixes.insert(core::to_int(p[1].content));
        CHECK(served[i].spec.max_output_tokens == 8);
    }
    CHECK(suffixes.size() == 9);
}

TEST_CASE("bench_serve custom JSONL: lines shuffled with the seed, then oversampled by random.choice",
          "[workloads][bench_serve]") {
    // 3 lines; random.seed(0); shuffle([0,1,2]) → [0, 2, 1]. num_prompts 5 → 2 more: random.seed(0);
    // [random.choice(range(3)) for _ in range(2)] → [1, 1], i.e. the sampled list's second entry (line 2) twice.
    const auto path = write_file("custom.jsonl",
                                 "{\"prompt\": \"a\", \"prompt_len\": 100, \"output_tokens\": 10}\n"
                                 "{\"prompt_len\": 200, \"output_tokens\": 20}\n"
                                 "\n"
                                 "{\"prompt_len\": 300, \"output_tokens\": 30}\n");
    auto w = make_workload(yaml(fmt::format(R"(
type: bench_serve
dataset_name: custom
dataset_path: {}
custom_output_len: -1
num_prompts: 5
seed: 0
)",
                                            path)),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 5);
    const std::vector<std::uint64_t> lines = {0, 2, 1, 2, 2};
    for (std::size_t i = 0; i < 5; ++i) {
        REQUIRE(served[i].spec.prompt.size() == 1);
        CHECK(served[i].spec.prompt[0].content == dataset_entry_content(lines[i]));
        CHECK(served[i].spec.prompt[0].length_tokens == 100 * static_cast<std::int64_t>(lines[i] + 1));
        CHECK(served[i].spec.max_output_tokens == 10 * static_cast<std::int64_t>(lines[i] + 1));
    }
    // With the tool's default custom_output_len (256) the file's output_tokens are overridden.
    auto fixed = make_workload(
        yaml(fmt::format("type: bench_serve\ndataset_name: custom\ndataset_path: {}\nnum_prompts: 3\n", path)), 1);
    for (const auto& s : drive(*fixed, [](const RequestSpec&) { return seconds(1); })) {
        CHECK(s.spec.max_output_tokens == 256);
    }
}

TEST_CASE("bench_serve sharegpt multi-turn replays the dataset's answers without waiting for the server",
          "[workloads][bench_serve]") {
    // One conversation of two turns [u 10, a 20, u 30, a 40] and one of one turn [u 5, a 6]; disable_shuffle keeps
    // the file's order. Multi-turn: request 0 = [u0] → 20, request 1 = [u0, a0 (the dataset's), u1] → 40, request 2
    // = [u'0] → 6. Rate 1, constant gaps, 100 s per request: sent at 1, 2, 3 — turn 2 leaves long before turn 1's
    // answer (at 101), and its prompt holds the dataset's answer, not the generated one.
    const auto path = write_file("sharegpt.jsonl",
                                 "{\"conversations\": [10, 20, 30, 40]}\n"
                                 "{\"conversations\": [7]}\n"
                                 "{\"input_len\": 5, \"output_len\": 6}\n");
    auto w = make_workload(yaml(fmt::format(R"(
type: bench_serve
dataset_name: sharegpt
dataset_path: {}
sharegpt_include_multi_turn: true
disable_shuffle: true
request_rate: 1
burstiness: inf
num_prompts: 3
)",
                                            path)),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(100); });
    REQUIRE(served.size() == 3);
    CHECK(served[0].spec.prompt == core::TokenContent{{dataset_message_content(0, 0), 10}});
    CHECK(served[0].spec.max_output_tokens == 20);
    CHECK(served[1].spec.prompt == core::TokenContent{{dataset_message_content(0, 0), 10},
                                                      {dataset_message_content(0, 1), 20},
                                                      {dataset_message_content(0, 2), 30}});
    CHECK(served[1].spec.max_output_tokens == 40);
    CHECK(served[1].spec.arrival.s() == 2.0);
    CHECK(served[1].spec.arrival < served[0].finish);
    // Entry 1 has one message and is dropped (ShareGPTDataset keeps entries with >= 2); entry 2 keeps its index.
    CHECK(served[2].spec.prompt == core::TokenContent{{dataset_message_content(2, 0), 5}});
    CHECK(served[2].spec.max_output_tokens == 6);
    // sharegpt_max_turns 1: one request per conversation, so only 2 requests (no_oversample keeps it at 2).
    auto capped = make_workload(yaml(fmt::format("type: bench_serve\ndataset_name: sharegpt\ndataset_path: {}\n"
                                                 "sharegpt_include_multi_turn: true\nsharegpt_max_turns: 1\n"
                                                 "disable_shuffle: true\nno_oversample: true\nnum_prompts: 3\n",
                                                 path)),
                                1);
    const auto capped_served = drive(*capped, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(capped_served.size() == 2);
    CHECK(capped_served[1].spec.prompt == core::TokenContent{{dataset_message_content(2, 0), 5}});
}

TEST_CASE("bench_serve sharegpt single-turn shuffles entries and drops what is_valid_sequence refuses",
          "[workloads][bench_serve]") {
    // 4 entries; random.seed(3); shuffle([0,1,2,3]) → [3, 0, 2, 1]. Entry 0 has a 3-token prompt (< 4: dropped),
    // so the sends are entries 3, 2, 1, then one oversampled copy (num_prompts 4).
    const auto path = write_file("sharegpt_single.jsonl",
                                 "{\"conversations\": [3, 50]}\n"
                                 "{\"conversations\": [100, 50, 7, 7]}\n"
                                 "{\"conversations\": [200, 60]}\n"
                                 "{\"conversations\": [300, 70]}\n");
    auto w = make_workload(yaml(fmt::format(R"(
type: bench_serve
dataset_name: sharegpt
dataset_path: {}
num_prompts: 4
seed: 3
)",
                                            path)),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return seconds(1); });
    REQUIRE(served.size() == 4);
    CHECK(served[0].spec.prompt == core::TokenContent{{dataset_message_content(3, 0), 300}});
    CHECK(served[1].spec.prompt == core::TokenContent{{dataset_message_content(2, 0), 200}});
    CHECK(served[2].spec.prompt == core::TokenContent{{dataset_message_content(1, 0), 100}});
    CHECK(served[2].spec.max_output_tokens == 50);
}

TEST_CASE("bench_serve refuses bad input before anything runs, naming the key", "[workloads][bench_serve]") {
    const std::string base = "type: bench_serve\nnum_prompts: 10\n";
    CHECK(error_of(base + "request_rat: 5\n").find("'workload.request_rat': unknown key") != std::string::npos);
    CHECK(error_of(base + "request_rate: 0\n").find("'workload.request_rate'") != std::string::npos);
    CHECK(error_of(base + "request_rate: -2\n").find("must be a positive number or inf") != std::string::npos);
    CHECK(error_of(base + "burstiness: 0\n").find("'workload.burstiness'") != std::string::npos);
    CHECK(error_of(base + "max_concurrency: 0\n").find("'workload.max_concurrency'") != std::string::npos);
    // 2^32 prompts used to be accepted and allocate a 34 GB schedule; the cap is 1e8 (docs/INPUT-RANGES.md).
    CHECK(error_of("type: bench_serve\nnum_prompts: 4294967296\n").find("'workload.num_prompts'") != std::string::npos);
    CHECK(error_of(base + "random_range_ratio: 1.0\n").find("must lie in [0, 1)") != std::string::npos);
    CHECK(error_of(base + "random_input_len: 0\n").find("'workload.random_input_len'") != std::string::npos);
    CHECK(error_of(base + "dataset_name: sonnet\n").find("allowed: random, prefix_repetition") != std::string::npos);
    CHECK(error_of(base + "prefix_repetition_prefix_len: 5\n").find("not used with `dataset_name: random`") !=
          std::string::npos);
    CHECK(error_of("type: bench_serve\nnum_prompts: 2\ndataset_name: prefix_repetition\n")
              .find("must be at least prefix_repetition_num_prefixes (10)") != std::string::npos);
    CHECK(error_of(base + "dataset_name: custom\n").find("'workload.dataset_path': missing required key") !=
          std::string::npos);
    CHECK(error_of(base + "dataset_name: custom\ndataset_path: /nonexistent/x.jsonl\n").find("cannot open") !=
          std::string::npos);
    const auto empty = write_file("empty.jsonl", "\n");
    CHECK(error_of(base + "dataset_name: custom\ndataset_path: " + empty + "\n").find("no request can be sampled") !=
          std::string::npos);
    const auto invalid = write_file("invalid.jsonl", "{\"conversations\": [2000, 100]}\n");
    CHECK(error_of(base + "dataset_name: sharegpt\ndataset_path: " + invalid + "\n").find("is_valid_sequence") !=
          std::string::npos);
    const auto no_len = write_file("nolen.jsonl", "{\"prompt\": \"hello\"}\n");
    const auto msg = error_of(base + "dataset_name: custom\ndataset_path: " + no_len + "\n");
    CHECK(msg.find("nolen.jsonl:1: 'prompt_len': missing field") != std::string::npos);
}
