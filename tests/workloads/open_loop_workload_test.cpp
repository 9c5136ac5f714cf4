// Tests of workloads/open_loop_workload.* for `type: synthetic`: arrival processes (inf, constant, poisson, gamma),
// unique prompts or a shared prefix, num_requests, and vllm bench serve's max_concurrency semaphore.
#include "workloads/open_loop_workload.h"

#include <cmath>
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

core::Duration ten_s(const RequestSpec&) {
    return core::Duration::from_s(10);
}

}  // namespace

TEST_CASE("Synthetic rate inf sends every request at t = 0 with unique prompts", "[workloads][synthetic]") {
    auto w =
        make_workload(yaml("type: synthetic\nrate: inf\nprompt_tokens: 1000\noutput_tokens: 20\nnum_requests: 5\n"), 1);
    const auto served = drive(*w, ten_s);
    REQUIRE(served.size() == 5);
    std::set<std::uint64_t> contents;
    for (const auto& s : served) {
        CHECK(s.spec.arrival.ns() == 0);
        REQUIRE(s.spec.prompt.size() == 1);
        CHECK(s.spec.prompt[0].length_tokens == 1000);
        CHECK(s.spec.max_output_tokens == 20);
        contents.insert(core::to_int(s.spec.prompt[0].content));
    }
    CHECK(contents.size() == 5);
    CHECK(w->exhausted());
}

TEST_CASE("Synthetic constant arrivals are evenly spaced from t = 0", "[workloads][synthetic]") {
    // rate 4 → gaps of 250 ms: 0, 0.25, 0.5, 0.75 s.
    auto w = make_workload(
        yaml("type: synthetic\narrival: constant\nrate: 4\nprompt_tokens: 10\noutput_tokens: 1\nnum_requests: 4\n"), 1);
    const auto served = drive(*w, ten_s);
    REQUIRE(served.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(served[i].spec.arrival.ns() == static_cast<std::int64_t>(i) * 250'000'000);
    }
}

TEST_CASE("Synthetic poisson and gamma arrivals keep the configured mean rate", "[workloads][synthetic]") {
    // 20,000 requests at 10 req/s: 19,999 gaps of mean 0.1 s. Poisson (CV 1): SE of the rate ≈ 10/√20000 = 0.07;
    // gamma with burstiness 0.5 (CV √2): SE ≈ 0.1; tolerance 0.4 req/s for both.
    for (const std::string arrival : {"poisson", "gamma\nburstiness: 0.5"}) {
        auto w = make_workload(yaml("type: synthetic\narrival: " + arrival +
                                    "\nrate: 10\nprompt_tokens: 10\noutput_tokens: 1\nnum_requests: 20000\n"),
                               77);
        const auto served = drive(*w, [](const RequestSpec&) { return core::Duration{}; });
        REQUIRE(served.size() == 20000);
        const double rate = 19999.0 / served.back().spec.arrival.s();
        CHECK(std::fabs(rate - 10.0) < 0.4);
    }
}

TEST_CASE("Synthetic shared prefix starts every prompt, the rest is unique", "[workloads][synthetic]") {
    auto w =
        make_workload(yaml("type: synthetic\nrate: 2\nshared_prefix_tokens: 300\n"
                           "prompt_tokens: {dist: uniform, min: 100, max: 200}\noutput_tokens: 5\nnum_requests: 6\n"),
                      3);
    std::set<std::uint64_t> tails;
    for (const auto& s : drive(*w, ten_s)) {
        REQUIRE(s.spec.prompt.size() == 2);
        CHECK(s.spec.prompt[0] == core::ContentRun{shared_prefix_content(), 300});
        CHECK(s.spec.prompt[1].length_tokens >= 100);
        CHECK(s.spec.prompt[1].length_tokens <= 200);
        tails.insert(core::to_int(s.spec.prompt[1].content));
    }
    CHECK(tails.size() == 6);
}

TEST_CASE("Synthetic max_concurrency holds requests until one finishes", "[workloads][synthetic]") {
    // All 5 at t = 0, at most 2 in flight, 10 s each: sent at 0, 0, 10, 10, 20.
    auto w = make_workload(
        yaml("type: synthetic\nrate: inf\nprompt_tokens: 10\noutput_tokens: 1\nnum_requests: 5\nmax_concurrency: 2\n"),
        1);
    const auto served = drive(*w, ten_s);
    REQUIRE(served.size() == 5);
    const std::vector<double> expected = {0, 0, 10, 10, 20};
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(served[i].spec.arrival.s() == expected[i]);
    }
}

TEST_CASE("Synthetic rejects a negative or zero rate and an unknown arrival process", "[workloads][synthetic]") {
    const std::string base = "type: synthetic\nprompt_tokens: 10\noutput_tokens: 1\nnum_requests: 5\n";
    CHECK(error_of(base + "rate: -1\n").find("'workload.rate': must be a positive number") != std::string::npos);
    CHECK(error_of(base + "rate: 0\n").find("must be a positive number") != std::string::npos);
    const auto unknown = error_of(base + "rate: 1\narrival: bursty\n");
    CHECK(unknown.find("unknown arrival process 'bursty'; allowed: poisson, gamma, constant") != std::string::npos);
    CHECK(error_of(base + "rate: 1\nburstiness: 2\n").find("only used with `arrival: gamma`") != std::string::npos);
}

TEST_CASE("make_workload rejects an unknown type and lists the registered ones", "[workloads]") {
    const auto msg = error_of("type: replay\n");
    CHECK(msg.find("'workload.type'") != std::string::npos);
    CHECK(msg.find("allowed: tenants, synthetic, trace, bench_serve, multi_turn_bench") != std::string::npos);
    CHECK(workload_types().size() == 5);
}
