// `--format vllm-bench`: the result JSON of vllm bench serve --save-result; see output_vllm_bench.h.
#include "tools/app/output_vllm_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>

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

// vllm bench serve calculate_metrics' peaks over the successful requests: one-second buckets from the earliest
// send; a request counts in every bucket from its send's to its end's (both included), and each streamed chunk
// (the first token, then one per gap) in the bucket of its time. Peak concurrency needs only sends and latencies;
// the peak output rate needs every chunk's time, so `itls_s` (per request, parallel to the records) or nothing.
struct Peaks {
    std::int64_t concurrent_requests = 0;
    std::optional<double> output_tokens_per_s;
};

Peaks peaks(const std::vector<metrics::RequestRecord>& records, const std::vector<std::vector<double>>* itls_ms) {
    Peaks p;
    if (records.empty()) {
        return p;
    }
    double min_start = records.front().arrival_s;
    double max_end = records.front().arrival_s + records.front().e2e_ms / 1e3;
    for (const auto& q : records) {
        min_start = std::min(min_start, q.arrival_s);
        max_end = std::max(max_end, q.arrival_s + q.e2e_ms / 1e3);
    }
    const auto seconds = static_cast<std::size_t>(std::ceil(max_end - min_start)) + 1;
    std::vector<std::int64_t> concurrent(seconds, 0);
    std::vector<std::int64_t> chunks(seconds, 0);
    for (std::size_t i = 0; i < records.size(); ++i) {
        const auto& q = records[i];
        const auto first = static_cast<std::size_t>(q.arrival_s - min_start);
        const auto last = static_cast<std::size_t>(q.arrival_s + q.e2e_ms / 1e3 - min_start);
        for (std::size_t b = first; b <= last && b < seconds; ++b) {
            ++concurrent[b];
        }
        if (itls_ms != nullptr) {
            double t = q.arrival_s + q.ttft_ms / 1e3;
            auto count = [&](double at) {
                const double offset = at - min_start;
                if (offset >= 0 && static_cast<std::size_t>(offset) < seconds) {
                    ++chunks[static_cast<std::size_t>(offset)];
                }
            };
            count(t);
            for (double gap_ms : (*itls_ms)[i]) {
                t += gap_ms / 1e3;
                count(t);
            }
        }
    }
    p.concurrent_requests = *std::max_element(concurrent.begin(), concurrent.end());
    if (itls_ms != nullptr) {
        p.output_tokens_per_s = static_cast<double>(*std::max_element(chunks.begin(), chunks.end()));
    }
    return p;
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
    // --save-detailed: the per-request lists, in send order as the tool keeps its outputs (ties in finish order).
    // Only measured finished requests are listed (failed ones are counted in `failed`, not listed: servesim keeps no
    // record of them), so every `errors` entry is "". ttfts, itls and start_times in seconds; start_times from the
    // run's start (the tool's are its clock's readings: validate takes differences only). No generated_texts.
    const std::vector<std::vector<double>>* itls = nullptr;
    std::vector<double> pooled_itls_ms;
    if (options.save_detailed) {
        SERVESIM_CHECK(s.request_itls_ms.size() == s.requests.size(),
                       "--save-detailed: {} per-request ITL lists for {} records (keep_request_itls not set?)",
                       s.request_itls_ms.size(), s.requests.size());
        itls = &s.request_itls_ms;
        std::vector<std::size_t> order(s.requests.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return s.requests[a].arrival_s < s.requests[b].arrival_s;
        });
        auto input_lens = nlohmann::ordered_json::array();
        auto output_lens = nlohmann::ordered_json::array();
        auto ttfts = nlohmann::ordered_json::array();
        auto itl_lists = nlohmann::ordered_json::array();
        auto start_times = nlohmann::ordered_json::array();
        auto errors = nlohmann::ordered_json::array();
        for (std::size_t i : order) {
            const auto& q = s.requests[i];
            input_lens.push_back(q.prompt_tokens);
            output_lens.push_back(q.output_tokens);
            ttfts.push_back(q.ttft_ms / 1e3);
            auto gaps = nlohmann::ordered_json::array();
            for (double g : s.request_itls_ms[i]) {
                gaps.push_back(g / 1e3);
                pooled_itls_ms.push_back(g);  // the tool pools them in its outputs' order: itls += output.itl
            }
            itl_lists.push_back(std::move(gaps));
            start_times.push_back(q.arrival_s);
            errors.push_back("");
        }
        j["input_lens"] = std::move(input_lens);
        j["output_lens"] = std::move(output_lens);
        j["ttfts"] = std::move(ttfts);
        j["itls"] = std::move(itl_lists);
        j["start_times"] = std::move(start_times);
        j["errors"] = std::move(errors);
    }
    // The peaks (calculate_metrics): concurrency from sends and latencies; the output rate only with every chunk's
    // time (--save-detailed), null otherwise rather than a number not measured. Both null with no finished request.
    const Peaks pk = peaks(s.requests, itls);
    j["max_output_tokens_per_s"] = pk.output_tokens_per_s && !s.requests.empty()
                                       ? nlohmann::ordered_json(*pk.output_tokens_per_s)
                                       : nlohmann::ordered_json();
    j["max_concurrent_requests"] =
        s.requests.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(pk.concurrent_requests);
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
        } else if (options.save_detailed) {
            add(metric, pooled_itls_ms);  // every gap kept: exact, any percentile, as the tool computes them
        } else {
            // Pooled ITLs are not kept one by one: mean and population std from their running moments, median and
            // percentiles from the summary's distribution, which holds p50, p90, p95 and p99.
            const auto& d = s.itl_ms;
            const bool any = d.count > 0;
            j["mean_itl_ms"] = any ? nlohmann::ordered_json(s.itl_moments.mean) : nlohmann::ordered_json();
            j["median_itl_ms"] = any ? nlohmann::ordered_json(d.p50) : nlohmann::ordered_json();
            j["std_itl_ms"] = any ? nlohmann::ordered_json(std::sqrt(s.itl_moments.m2 /
                                                                     static_cast<double>(s.itl_moments.count)))
                                  : nlohmann::ordered_json();
            for (double p : options.metric_percentiles) {
                const double v = p == 50 ? d.p50 : p == 90 ? d.p90 : p == 95 ? d.p95 : d.p99;
                j[fmt::format("p{}_itl_ms", percentile_word(p))] = any ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
            }
        }
    }
    return j;
}

void check_bench_percentiles(const BenchOptions& options) {
    if (options.save_detailed) {
        return;  // every gap is kept: any percentile
    }
    for (double p : options.metric_percentiles) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), "itl") !=
                options.percentile_metrics.end() &&
            p != 50 && p != 90 && p != 95 && p != 99) {
            throw ConfigError(fmt::format("--metric-percentiles: {} for itl: servesim keeps pooled inter-token "
                                          "latencies as p50, p90, p95 and p99 only; leave itl out of "
                                          "--percentile-metrics, ask for 50, 90, 95 or 99, or add --save-detailed "
                                          "(every gap kept)",
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

namespace {

// Python's "{s:{c}^{n}}": `s` centred in `n` columns of `fill`, the odd column on the right.
std::string centred(const std::string& s, char fill, std::size_t n = 50) {
    const std::size_t pad = n > s.size() ? n - s.size() : 0;
    return std::string(pad / 2, fill) + s + std::string(pad - pad / 2, fill);
}

// One line as the tool prints it: "{:<40} {:<10}" (label padded to 40, a space, the value padded to 10).
std::string line(const std::string& label, const std::string& value) {
    return fmt::format("{:<40} {:<10}\n", label, value);
}

std::string two_decimals(const nlohmann::ordered_json& v) {
    return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "—";
}

std::string whole(const nlohmann::ordered_json& v) {
    return v.is_number_integer() ? fmt::format("{}", v.get<std::int64_t>()) : two_decimals(v);
}

std::string console_block(const nlohmann::ordered_json& j, const BenchOptions& options) {
    std::string out = centred(" Serving Benchmark Result ", '=') + "\n";
    out += line("Successful requests:", whole(j["completed"]));
    out += line("Failed requests:", whole(j["failed"]));
    if (!j["max_concurrency"].is_null()) {
        out += line("Maximum request concurrency:", whole(j["max_concurrency"]));
    }
    if (j["request_rate"].is_number()) {  // not printed for "inf" (all at once), as the tool; nor without a rate
        out += line("Request rate configured (RPS):", two_decimals(j["request_rate"]));
    }
    out += line("Benchmark duration (s):", two_decimals(j["duration"]));
    out += line("Total input tokens:", whole(j["total_input_tokens"]));
    out += line("Total generated tokens:", whole(j["total_output_tokens"]));
    out += line("Request throughput (req/s):", two_decimals(j["request_throughput"]));
    if (!j["request_goodput"].is_null()) {
        out += line("Request goodput (req/s):", two_decimals(j["request_goodput"]));
    }
    out += line("Output token throughput (tok/s):", two_decimals(j["output_throughput"]));
    out += line("Peak output token throughput (tok/s):",
                j["max_output_tokens_per_s"].is_null() && !j["max_concurrent_requests"].is_null()
                    ? "— (needs --save-detailed: every token's time)"
                    : two_decimals(j["max_output_tokens_per_s"]));
    out += line("Peak concurrent requests:", two_decimals(j["max_concurrent_requests"]));
    out += line("Total Token throughput (tok/s):", two_decimals(j["total_token_throughput"]));
    struct Metric {
        const char* key;
        const char* name;
        const char* header;
    };
    for (const Metric m : {Metric{"ttft", "TTFT", "Time to First Token"},
                           Metric{"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
                           Metric{"itl", "ITL", "Inter-token Latency"}, Metric{"e2el", "E2EL", "End-to-end Latency"}}) {
        if (std::find(options.percentile_metrics.begin(), options.percentile_metrics.end(), m.key) ==
            options.percentile_metrics.end()) {
            continue;
        }
        out += centred(m.header, '-') + "\n";
        out += line(fmt::format("Mean {} (ms):", m.name), two_decimals(j[fmt::format("mean_{}_ms", m.key)]));
        out += line(fmt::format("Median {} (ms):", m.name), two_decimals(j[fmt::format("median_{}_ms", m.key)]));
        for (double p : options.metric_percentiles) {
            const std::string word = percentile_word(p);
            out += line(fmt::format("P{} {} (ms):", word, m.name), two_decimals(j[fmt::format("p{}_{}_ms", word, m.key)]));
        }
    }
    out += std::string(50, '=') + "\n";
    return out;
}

}  // namespace

std::string format_vllm_bench_console(const std::vector<ExperimentResult>& results, const BenchOptions& options) {
    std::vector<const ExperimentResult*> runs;
    for (const auto& point : results) {
        if (point.order_only) {
            return "";  // format_vllm_bench refuses it
        }
        for (const ExperimentResult* run : runs_of(point)) {
            runs.push_back(run);
        }
    }
    std::string out;
    for (const ExperimentResult* run : runs) {
        if (runs.size() > 1) {
            out += fmt::format("{} (seed {}):\n", run->config.name, run->config.seed);
        }
        out += console_block(to_vllm_bench(*run, options), options);
    }
    return out;
}

}  // namespace servesim::app
