// Reading a vLLM server's Prometheus /metrics text; see server_metrics.h for the metrics and the vLLM code behind them.
#include "tools/app/server_metrics.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

#include "common/error.h"
#include "common/input_file.h"

namespace servesim::app {
namespace {

bool name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (!first && c >= '0' && c <= '9');
}

// A sample value as the exposition format writes it: a float, +Inf, -Inf or NaN.
std::optional<double> parse_value(std::string_view s) {
    if (s == "+Inf" || s == "Inf") {
        return HUGE_VAL;
    }
    if (s == "-Inf") {
        return -HUGE_VAL;
    }
    if (s == "NaN") {
        return std::nan("");
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

struct Sample {
    std::string_view name;
    double value = 0;
};

// One non-comment line: name, optional {labels} (quoted values with \\, \" and \n escapes), value, optional
// timestamp. Throws with file:line on anything else.
Sample parse_sample(std::string_view line, const std::string& path, int line_no) {
    const auto fail = [&](const std::string& what) {
        throw ConfigError(path, line_no, "",
                          fmt::format("not a Prometheus sample line ({}); expected name{{label=\"value\",...}} value "
                                      "[timestamp], as vLLM's /metrics writes it",
                                      what));
    };
    std::size_t i = 0;
    while (i < line.size() && name_char(line[i], i == 0)) {
        ++i;
    }
    if (i == 0) {
        fail("no metric name");
    }
    Sample s;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
        ++i;
        bool in_quotes = false;
        for (; i < line.size(); ++i) {
            const char c = line[i];
            if (in_quotes) {
                if (c == '\\') {
                    ++i;  // the escaped character
                } else if (c == '"') {
                    in_quotes = false;
                }
            } else if (c == '"') {
                in_quotes = true;
            } else if (c == '}') {
                break;
            }
        }
        if (i >= line.size()) {
            fail("unclosed '{'");
        }
        ++i;  // past '}'
    }
    if (i >= line.size() || (line[i] != ' ' && line[i] != '\t')) {
        fail("no value after the name");
    }
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) {
        ++i;
    }
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') {
        ++end;
    }
    const auto value = parse_value(line.substr(i, end - i));
    if (!value) {
        fail(fmt::format("value '{}' is not a number", line.substr(i, end - i)));
    }
    s.value = *value;
    return s;
}

struct Sum {
    double total = 0;
    int series = 0;
    void add(double v) {
        total += v;
        ++series;
    }
};

}  // namespace

ServerMetrics parse_server_metrics(std::string_view text, const std::string& path) {
    // Counters: prometheus_client writes X_total; a plain X is accepted from exporters that do not (X_total wins
    // when both are present, so nothing is counted twice).
    Sum queries_total, queries, hits_total, hits, preempt_total, preempt, success_total, success, usage;
    int line_no = 0;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) {
            nl = text.size();
        }
        std::string_view line = text.substr(pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos || line[first] == '#') {
            continue;
        }
        const Sample s = parse_sample(line.substr(first), path, line_no);
        Sum* target = nullptr;
        bool counter = true;
        if (s.name == "vllm:prefix_cache_queries_total") {
            target = &queries_total;
        } else if (s.name == "vllm:prefix_cache_queries") {
            target = &queries;
        } else if (s.name == "vllm:prefix_cache_hits_total") {
            target = &hits_total;
        } else if (s.name == "vllm:prefix_cache_hits") {
            target = &hits;
        } else if (s.name == "vllm:num_preemptions_total") {
            target = &preempt_total;
        } else if (s.name == "vllm:num_preemptions") {
            target = &preempt;
        } else if (s.name == "vllm:request_success_total") {
            target = &success_total;
        } else if (s.name == "vllm:request_success") {
            target = &success;
        } else if (s.name == "vllm:kv_cache_usage_perc") {
            target = &usage;
            counter = false;
        }
        if (target == nullptr) {
            continue;
        }
        const bool bad = counter ? !(std::isfinite(s.value) && s.value >= 0)
                                 : !(std::isfinite(s.value) && s.value >= 0 && s.value <= 1);
        if (bad) {
            throw ConfigError(path, line_no, std::string(s.name),
                              fmt::format("{} is not a valid {}; allowed: {}", s.value, counter ? "counter" : "gauge",
                                          counter ? "a finite number >= 0" : "a fraction from 0 to 1"));
        }
        target->add(s.value);
    }
    const auto pick = [](const Sum& with_total, const Sum& plain) -> std::optional<double> {
        if (with_total.series > 0) {
            return with_total.total;
        }
        if (plain.series > 0) {
            return plain.total;
        }
        return std::nullopt;
    };
    ServerMetrics m;
    m.path = path;
    m.prefix_cache_queries = pick(queries_total, queries);
    m.prefix_cache_hits = pick(hits_total, hits);
    m.preemptions = pick(preempt_total, preempt);
    m.request_success = pick(success_total, success);
    if (usage.series > 0) {
        m.kv_cache_usage = usage.total / usage.series;
        m.kv_cache_usage_series = usage.series;
    }
    if (!m.prefix_cache_queries || !m.prefix_cache_hits) {
        throw ConfigError(fmt::format(
            "{}: no vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total sample: not the /metrics text of a "
            "vLLM server (v1 engine, vLLM 0.10 or later); save it with curl http://HOST:PORT/metrics > FILE",
            path));
    }
    return m;
}

ServerMetrics read_server_metrics(const std::string& path) {
    return parse_server_metrics(read_input_file(path, "metrics dump"), path);
}

ServerMetricsDelta server_metrics_delta(const std::optional<ServerMetrics>& before, const ServerMetrics& after) {
    const auto diff = [&](const std::optional<double> ServerMetrics::*field,
                          const char* name) -> std::optional<double> {
        const auto& a = after.*field;
        if (!a) {
            return std::nullopt;
        }
        if (!before) {
            return *a;
        }
        const auto& b = (*before).*field;
        if (!b) {
            return std::nullopt;  // in one dump only: no difference to take
        }
        if (*a < *b) {
            throw ConfigError(fmt::format(
                "{}: {} fell from {} (in {}) to {}: the server restarted between the two dumps, so their difference "
                "is not this run's; take both dumps from one server process",
                after.path, name, *b, before->path, *a));
        }
        return *a - *b;
    };
    ServerMetricsDelta d;
    d.prefix_cache_queries = *diff(&ServerMetrics::prefix_cache_queries, "vllm:prefix_cache_queries");
    d.prefix_cache_hits = *diff(&ServerMetrics::prefix_cache_hits, "vllm:prefix_cache_hits");
    d.preemptions = diff(&ServerMetrics::preemptions, "vllm:num_preemptions");
    d.request_success = diff(&ServerMetrics::request_success, "vllm:request_success");
    d.kv_cache_usage = after.kv_cache_usage;
    if (d.prefix_cache_hits > d.prefix_cache_queries) {
        // vLLM adds a lookup's hit tokens and its queried tokens together, hits <= queried (PrefixCacheStats.record).
        throw ConfigError(fmt::format("{}: vllm:prefix_cache_hits rose by {} but vllm:prefix_cache_queries only by {}: "
                                      "a hit can never exceed its query; are the two dumps from the same server?",
                                      after.path, d.prefix_cache_hits, d.prefix_cache_queries));
    }
    return d;
}

}  // namespace servesim::app
