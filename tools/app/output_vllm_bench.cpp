// `--format vllm-bench`: the result JSON of vllm bench serve --save-result; see output_vllm_bench.h.
#include "tools/app/output_vllm_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/error.h"
#include "tools/app/output_fields.h"

namespace servesim::app {

double np_percentile(const std::vector<double>& sorted, double q) {
    const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

namespace {

// vllm bench serve names a percentile key p<int> when the percentile is whole, else p<float> (str(99.9) = "99.9").
std::string percentile_word(double p) {
    return p == std::floor(p) ? fmt::format("{}", static_cast<std::int64_t>(p)) : fmt::format("{}", p);
}

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : text) {
        if (ch == ',') {
            out.push_back(cur);
            cur.clear();
        } else if (ch != ' ') {
            cur += ch;
        }
    }
    out.push_back(cur);
    return out;
}

}  // namespace

BenchOptions parse_bench_options(const std::string& percentile_metrics, const std::string& metric_percentiles) {
    BenchOptions o;
    if (!percentile_metrics.empty()) {
        o.percentile_metrics.clear();
        for (const auto& m : split_commas(percentile_metrics)) {
            if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el") {
                throw ConfigError("--percentile-metrics: '" + m + "' is not a metric; allowed: ttft, tpot, itl, e2el");
            }
            o.percentile_metrics.push_back(m);
        }
    }
    if (!metric_percentiles.empty()) {
        o.metric_percentiles.clear();
        for (const auto& p : split_commas(metric_percentiles)) {
            double v = 0;
            const auto r = std::from_chars(p.data(), p.data() + p.size(), v);
            if (p.empty() || r.ec != std::errc() || r.ptr != p.data() + p.size() || !(v >= 0 && v <= 100)) {
                throw ConfigError("--metric-percentiles: '" + p + "' is not a percentile; give numbers in [0, 100], "
                                  "e.g. 50,90,99");
            }
            o.metric_percentiles.push_back(v);
        }
    }
    return o;
}

nlohmann::ordered_json to_vllm_bench(const ExperimentResult& r, const BenchOptions& options) {
    const auto& s = r.sim.summary;
    nlohmann::ordered_json j;
    // servesim's identity of the run (vllm bench serve puts its own metadata at the same level).
    j["backend"] = "servesim";
    j["name"] = r.config.name;
    j["seed"] = r.config.seed;
    j["status"] = run_status_name(r.status);
    j["status_reason"] = r.status_reason.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.status_reason);
    j["model_id"] = r.model_name;
    j["cost_model"] = r.cost_model;
    j["vllm_version"] = r.config.engine.vllm_version;
    j["num_prompts"] = s.num_requests_sent;
    // vllm bench serve writes the configured rate, "inf" for all at once; null where servesim's workload has none.
    j["request_rate"] = r.offered_rps           ? nlohmann::ordered_json(*r.offered_rps)
                        : r.offered_all_at_once ? nlohmann::ordered_json("inf")
                                                : nlohmann::ordered_json();
    // burstiness and max_concurrency as the workload sets them (bench_serve's keys are the tool's flags); null
    // where the workload has no such key.
    for (const char* key : {"burstiness", "max_concurrency"}) {
        const YAML::Node v = r.config.workload[key];
        nlohmann::ordered_json value;
        if (v && v.IsScalar()) {
            const Cell typed = typed_value("", v.Scalar());
            value = cell_json(typed);
        } else if (std::string(key) == "burstiness" && r.config.workload["type"] &&
                   r.config.workload["type"].Scalar() == "bench_serve") {
            value = 1.0;  // the tool's default --burstiness
        }
        j[key] = value;
    }
    std::int64_t input = 0;
    std::int64_t output = 0;
    std::vector<double> ttft, tpot, e2el;
    for (const auto& q : s.requests) {
        input += q.prompt_tokens;
        output += q.output_tokens;
        ttft.push_back(q.ttft_ms);
        e2el.push_back(q.e2e_ms);
        if (q.has_tpot()) {
            tpot.push_back(q.tpot_ms());
        }
    }
    const bool window = s.duration_s > 0;
    auto per_s = [&](double v) { return window ? nlohmann::ordered_json(v / s.duration_s) : nlohmann::ordered_json(); };
    j["duration"] = window ? nlohmann::ordered_json(s.duration_s) : nlohmann::ordered_json();
    j["completed"] = s.num_requests_finished;
    // A timed-out request is a failed RequestFuncOutput for the tool (its aiohttp time-out, caught).
    j["failed"] = s.num_requests_rejected + s.num_requests_timed_out + r.sim.num_unfinished;
    j["total_input_tokens"] = input;
    j["total_output_tokens"] = output;
    j["request_throughput"] = per_s(static_cast<double>(s.num_requests_finished));
    j["request_goodput"] = r.num_requests_good ? per_s(static_cast<double>(*r.num_requests_good))
                                               : nlohmann::ordered_json();
    j["output_throughput"] = per_s(static_cast<double>(output));
    j["total_token_throughput"] = per_s(static_cast<double>(input + output));
    auto add = [&](const std::string& metric, std::vector<double> values) {
        nlohmann::ordered_json mean, median, stddev;
        std::vector<nlohmann::ordered_json> pct(options.metric_percentiles.size());
        if (!values.empty()) {
            std::sort(values.begin(), values.end());
            double sum = 0;
            for (double v : values) {
                sum += v;
            }
            const double m = sum / static_cast<double>(values.size());
            double sq = 0;
            for (double v : values) {
                sq += (v - m) * (v - m);
            }
            mean = m;
            median = np_percentile(values, 50);
            stddev = std::sqrt(sq / static_cast<double>(values.size()));  // np.std: population (ddof = 0)
            for (std::size_t i = 0; i < pct.size(); ++i) {
                pct[i] = np_percentile(values, options.metric_percentiles[i]);
            }
        }
        j[fmt::format("mean_{}_ms", metric)] = mean;
        j[fmt::format("median_{}_ms", metric)] = median;
        j[fmt::format("std_{}_ms", metric)] = stddev;
        for (std::size_t i = 0; i < pct.size(); ++i) {
            j[fmt::format("p{}_{}_ms", percentile_word(options.metric_percentiles[i]), metric)] = pct[i];
        }
    };
    // vllm bench serve processes ttft, tpot, itl, e2el in this order, each only when selected.
    for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), metric) ==
            options.percentile_metrics.end()) {
            continue;
        }
        if (std::string(metric) == "ttft") {
            add(metric, ttft);
        } else if (std::string(metric) == "tpot") {
            add(metric, tpot);
        } else if (std::string(metric) == "e2el") {
            add(metric, e2el);
        } else {
            // Pooled ITLs are not kept one by one: mean and population std from their running moments, median and
            // percentiles from the summary's distribution, which holds p50, p90 and p99.
            const auto& d = s.itl_ms;
            const bool any = d.count > 0;
            j["mean_itl_ms"] = any ? nlohmann::ordered_json(s.itl_moments.mean) : nlohmann::ordered_json();
            j["median_itl_ms"] = any ? nlohmann::ordered_json(d.p50) : nlohmann::ordered_json();
            j["std_itl_ms"] = any ? nlohmann::ordered_json(std::sqrt(s.itl_moments.m2 /
                                                                     static_cast<double>(s.itl_moments.count)))
                                  : nlohmann::ordered_json();
            for (double p : options.metric_percentiles) {
                const double v = p == 50 ? d.p50 : p == 90 ? d.p90 : d.p99;
                j[fmt::format("p{}_itl_ms", percentile_word(p))] = any ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
            }
        }
    }
    return j;
}

void check_bench_percentiles(const BenchOptions& options) {
    for (double p : options.metric_percentiles) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), "itl") !=
                options.percentile_metrics.end() &&
            p != 50 && p != 90 && p != 99) {
            throw ConfigError(fmt::format("--metric-percentiles: {} for itl: servesim keeps pooled inter-token "
                                          "latencies as p50, p90 and p99 only; leave itl out of --percentile-metrics "
                                          "or ask for 50, 90 or 99",
                                          percentile_word(p)));
        }
    }
}

std::string format_vllm_bench(const std::vector<ExperimentResult>& results, const BenchOptions& options) {
    check_bench_percentiles(options);
    std::vector<nlohmann::ordered_json> objects;
    for (const auto& point : results) {
        if (point.order_only) {
            throw ConfigError("--format vllm-bench: `mode: order_only` has no timings; use table, csv or json");
        }
        for (const ExperimentResult* run : runs_of(point)) {
            objects.push_back(to_vllm_bench(*run, options));
        }
    }
    if (objects.size() == 1) {
        return objects.front().dump(2) + "\n";
    }
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (auto& o : objects) {
        arr.push_back(std::move(o));
    }
    return arr.dump(2) + "\n";
}

}  // namespace servesim::app
