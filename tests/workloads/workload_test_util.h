// Test helpers for tests/workloads: a YamlMap from text, the error validate_workload gives for one, and a minimal client-server loop that serves every request
// in a fixed time (no engine), so workloads can be driven through their Workload interface alone.
#pragma once

#include <functional>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "common/yaml_reader.h"
#include "tests/config_error.h"
#include "workloads/workload.h"

namespace servesim::workloads::test {

inline YamlMap yaml(const std::string& text) {
    return YamlMap(load_yaml_string(text, "test.yaml"), "test.yaml", "workload");
}

// The ConfigError validate_workload throws for the workload `text`, or "" when it is accepted.
inline std::string error_of(const std::string& text) {
    return servesim::testing::config_error_of([&] { validate_workload(yaml(text)); });
}

inline std::string fixture(const std::string& name) {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/traces/" + name;
}

struct Served {
    RequestSpec spec;
    core::SimTime finish;     // or when its client gave up
    bool timed_out = false;  // its RequestSpec::timeout was shorter than its service
};

// Serves each request in `service(spec)` after its arrival, in time order (a finish before an arrival at the same
// time), until the workload is exhausted or `max_requests` were sent. A request whose spec.timeout is shorter than
// its service times out then instead (on_request_timed_out).
inline std::vector<Served> drive(Workload& w,
                                 const std::function<core::Duration(const RequestSpec&)>& service,
                                 std::size_t max_requests = 1'000'000) {
    std::vector<Served> out;
    // finish time ns → indices into out (ordered: deterministic)
    std::multimap<std::int64_t, std::size_t> running;
    while (out.size() < max_requests) {
        const auto next = w.next_arrival_time();
        if (!running.empty() && (!next || running.begin()->first <= next->ns())) {
            const auto [t, i] = *running.begin();
            running.erase(running.begin());
            if (out[i].timed_out) {
                w.on_request_timed_out(out[i].spec.id, core::SimTime::from_ns(t));
            } else {
                w.on_request_finished(out[i].spec.id, core::SimTime::from_ns(t));
            }
            continue;
        }
        if (!next) {
            break;
        }
        RequestSpec spec = w.pop_next_arrival();
        const core::Duration served = service(spec);
        const bool timed_out = spec.timeout && *spec.timeout < served;
        const core::SimTime finish = spec.arrival + (timed_out ? *spec.timeout : served);
        out.push_back({std::move(spec), finish, timed_out});
        running.emplace(finish.ns(), out.size() - 1);
    }
    return out;
}

}  // namespace servesim::workloads::test
