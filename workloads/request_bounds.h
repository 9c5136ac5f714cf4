// When a workload stops sending: after `num_requests` requests and/or once the send time passes `duration`
// (both optional, both counted from t = 0). Shared by every workload type; a warm-up window is the metrics' business.
// Also the key every type shares for how long its client waits for a request (`request_timeout`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "common/clock_range.h"
#include "common/yaml_reader.h"
#include "sim/core/time.h"

namespace servesim::workloads {

struct RequestBounds {
    std::optional<std::int64_t> num_requests;  // requests sent at most
    std::optional<core::SimTime> end;          // nothing is sent after this time

    [[nodiscard]] bool allows(std::int64_t num_sent, core::SimTime send_time) const {
        return (!num_requests || num_sent < *num_requests) && (!end || send_time <= *end);
    }

    [[nodiscard]] bool count_reached(std::int64_t num_sent) const { return num_requests && num_sent >= *num_requests; }
};

// A rate key (requests per second) already read as a positive number: refused outside [kMinRatePerS,
// kMaxRatePerS] (common/clock_range.h), so its gaps stay inside the simulated clock. `zero_allowed`: 0 means "no
// sleep" for the key and passes.
inline void check_rate_range(const YamlMap& m, std::string_view key, double rate_per_s, bool zero_allowed = false) {
    if (zero_allowed && rate_per_s == 0) {
        return;
    }
    if (!(rate_per_s >= kMinRatePerS && rate_per_s <= kMaxRatePerS)) {
        m.fail(key, fmt::format("{:g} requests per second is outside the simulated clock's range; allowed: {:g} (a "
                                "mean gap of 11.6 days) to {:g} (one per nanosecond){}",
                                rate_per_s, kMinRatePerS, kMaxRatePerS, zero_allowed ? ", or 0" : ""));
    }
}

// A duration key ("30s", "5min", 2.5) as a Duration.
[[nodiscard]] inline core::Duration parse_duration_key(const YamlMap& m, std::string_view key) {
    const auto text = m.get<std::string>(key);
    return core::Duration::from_s(parse_duration_s(text, m.file(), m.line(key), m.key_path(key)));
}

// `request_timeout` (workloads/README.md "Client time-outs"): how long a client waits for a request's last token
// after sending it; absent = no time-out (vllm bench serve's own aiohttp limit is 6 h). Refused unless a duration
// above 0: a time-out of 0 would fail every request before its first step.
[[nodiscard]] inline std::optional<core::Duration> parse_request_timeout(const YamlMap& m) {
    if (!m.has("request_timeout")) {
        return std::nullopt;
    }
    const core::Duration t = parse_duration_key(m, "request_timeout");
    if (t.ns() <= 0) {
        m.fail("request_timeout", "must be a duration above 0 (e.g. 300s, 5min), got '" +
                                      m.get<std::string>("request_timeout") + "'; leave the key out for no time-out");
    }
    return t;
}

// Reads `num_requests` (>= 1) and `duration`; `require_one` demands at least one of them (an endless workload).
[[nodiscard]] inline RequestBounds parse_request_bounds(const YamlMap& m, bool require_one) {
    RequestBounds b;
    if (m.has("num_requests")) {
        b.num_requests = m.get<std::int64_t>("num_requests");
        if (*b.num_requests < 1) {
            m.fail("num_requests", "must be at least 1, got " + std::to_string(*b.num_requests));
        }
    }
    if (m.has("duration")) {
        b.end = core::SimTime::zero() + parse_duration_key(m, "duration");
    }
    if (require_one && !b.num_requests && !b.end) {
        m.fail("num_requests", "this workload never ends by itself: give num_requests and/or duration");
    }
    return b;
}

}  // namespace servesim::workloads
