// Tests of tools/app/server_metrics.*: a vLLM server's /metrics text read as vLLM writes it (counters summed over
// engines and finished reasons, the usage gauge averaged), the run's share as the difference of two dumps, and bad
// dumps refused naming the file, the line and what is allowed.
#include "tools/app/server_metrics.h"

#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::app {
namespace {

const std::string kDir = std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/validation/";

std::string error_of(const std::string& text) {
    try {
        (void)parse_server_metrics(text, "m.prom");
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError");
    return "";
}

TEST_CASE("Server metrics: counters summed over engines and reasons, the gauge averaged", "[tools][server_metrics]") {
    // The fixture's comments give the totals: queries 4000 + 1000, hits 1200 + 300, preemptions 2 + 0, successes
    // 10 + 3 + 0 (stop, length, abort); vllm:prefix_cache_queries_created and the histogram line are not read.
    const ServerMetrics before = read_server_metrics(kDir + "metrics-before.prom");
    CHECK(*before.prefix_cache_queries == 5000.0);
    CHECK(*before.prefix_cache_hits == 1500.0);
    CHECK(*before.preemptions == 2.0);
    CHECK(*before.request_success == 13.0);
    CHECK(*before.kv_cache_usage == 0.0);
    CHECK(before.kv_cache_usage_series == 2);
    // After: 5800 + 2200 (a timestamped sample), 2400 + 900, 2, 11 + 5; usage (0.25 + 0.15) / 2 = 0.20; a label
    // value holding ',', '{', '}' and an escaped quote parses.
    const ServerMetrics after = read_server_metrics(kDir + "metrics-after.prom");
    CHECK(*after.prefix_cache_queries == 8000.0);
    CHECK(*after.prefix_cache_hits == 3300.0);
    CHECK(*after.request_success == 16.0);
    CHECK(*after.kv_cache_usage == Approx(0.20).epsilon(1e-12));
    // The run's share: queries 3000, hits 1800, hit rate 1800 / 3000 = 0.6; 0 preemptions; 3 successes.
    const ServerMetricsDelta d = server_metrics_delta(before, after);
    CHECK(d.prefix_cache_queries == 3000.0);
    CHECK(d.prefix_cache_hits == 1800.0);
    CHECK(*d.hit_rate() == Approx(0.6).epsilon(1e-12));
    CHECK(*d.preemptions == 0.0);
    CHECK(*d.request_success == 3.0);
    CHECK(*d.kv_cache_usage == Approx(0.20).epsilon(1e-12));
    // Without a before dump the counters count from the server's start: 3300 / 8000 = 0.4125.
    CHECK(*server_metrics_delta(std::nullopt, after).hit_rate() == Approx(0.4125).epsilon(1e-12));
}

TEST_CASE("Server metrics: a plain counter name is read when X_total is absent, never both",
          "[tools][server_metrics]") {
    // An exporter writing vllm:prefix_cache_queries without _total: 70 queried, 7 hit → 0.1.
    const ServerMetrics plain = parse_server_metrics("vllm:prefix_cache_queries 70\nvllm:prefix_cache_hits 7\n", "p");
    CHECK(*plain.prefix_cache_queries == 70.0);
    CHECK(*plain.prefix_cache_hits == 7.0);
    CHECK_FALSE(plain.preemptions.has_value());
    CHECK_FALSE(plain.kv_cache_usage.has_value());
    // Both present: X_total (100) wins over X (70), so nothing is counted twice.
    const ServerMetrics both = parse_server_metrics(
        "vllm:prefix_cache_queries 70\nvllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 7\n", "b");
    CHECK(*both.prefix_cache_queries == 100.0);
    // No query between the dumps: no hit rate (prefix caching off), not a rate of 0.
    CHECK_FALSE(server_metrics_delta(plain, plain).hit_rate().has_value());
}

TEST_CASE("Server metrics: bad dumps are refused naming the file, the line and what is allowed",
          "[tools][server_metrics]") {
    CHECK(error_of("# just a comment\nvllm:prefix_cache_hits_total 1\n")
              .find("m.prom: no vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total sample") !=
          std::string::npos);
    CHECK(error_of("vllm:prefix_cache_queries_total{engine=\"0\" 5\n").find("m.prom:1: not a Prometheus sample line "
                                                                            "(unclosed '{')") != std::string::npos);
    CHECK(error_of("ok 1\nvllm:prefix_cache_queries_total lots\n")
              .find("m.prom:2: not a Prometheus sample line (value 'lots' is not a number)") != std::string::npos);
    CHECK(error_of("vllm:prefix_cache_queries_total -5\n")
              .find("m.prom:1: 'vllm:prefix_cache_queries_total': -5 is not a valid counter; allowed: a finite "
                    "number >= 0") != std::string::npos);
    CHECK(error_of("vllm:kv_cache_usage_perc 1.5\n").find("allowed: a fraction from 0 to 1") != std::string::npos);
    CHECK(error_of("vllm:prefix_cache_hits_total NaN\n").find("is not a valid counter") != std::string::npos);
    // A counter that fell: the server restarted between the dumps.
    const ServerMetrics before = parse_server_metrics(
        "vllm:prefix_cache_queries_total 500\nvllm:prefix_cache_hits_total 100\n", "before.prom");
    const ServerMetrics after = parse_server_metrics(
        "vllm:prefix_cache_queries_total 300\nvllm:prefix_cache_hits_total 150\n", "after.prom");
    try {
        (void)server_metrics_delta(before, after);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("after.prom: vllm:prefix_cache_queries fell from 500 (in before.prom) to 300: "
                                         "the server restarted") != std::string::npos);
    }
    // Hits rising by more than queries (+50 hits, +0 queries) cannot come from one server.
    const ServerMetrics odd = parse_server_metrics(
        "vllm:prefix_cache_queries_total 500\nvllm:prefix_cache_hits_total 150\n", "odd.prom");
    try {
        (void)server_metrics_delta(before, odd);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("rose by 50 but vllm:prefix_cache_queries only by 0") != std::string::npos);
    }
}

}  // namespace
}  // namespace servesim::app
