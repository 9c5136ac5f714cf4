// Workload: the source of requests a simulation serves (tenant dialogues, synthetic requests, trace replay).
// INTERFACE CONTRACT between workloads/ (implementations) and sim/ (the caller). The simulator pulls the next
// arrival, and tells the workload when a request finished, so closed-loop dialogues can send their next turn only
// after the previous answer arrived (a turn's prompt contains that answer: hits come from content, never from a
// hit-rate parameter).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace servesim::workloads {

// One request as the client sends it.
struct RequestSpec {
    core::RequestId id{};                // unique, increasing in send order
    core::TenantId tenant{};             // 0 when the workload has no tenants
    core::SimTime arrival;               // send time
    core::TokenContent prompt;           // runs; total_tokens(prompt) is the prompt length
    std::int64_t max_output_tokens = 1;  // the answer length (generation stops there: ignore_eos semantics)
    core::ContentId answer_content{};    // content id of the answer this request generates
    int turn = 0;                        // 1-based turn within a dialogue, 0 if not a dialogue
    // The conversation it belongs to (one id per dialogue, unique in the run; 0 when the workload has none), as a
    // chat client keeps one session for a conversation; `last_in_session`: no later request of it will come.
    std::uint64_t session = 0;
    bool last_in_session = false;
    // The client gives up on the request this long after sending it, unless its last token arrived by then
    // (workload key `request_timeout`, workloads/README.md "Client time-outs"); none: it waits for ever.
    std::optional<core::Duration> timeout;
};

class Workload {
  public:
    virtual ~Workload() = default;

    // Send time of the next request that is ready to be sent, or nullopt when none is pending right now (a
    // closed-loop tenant may still be waiting for an answer) or the workload is exhausted.
    [[nodiscard]] virtual std::optional<core::SimTime> next_arrival_time() = 0;

    // Removes and returns that request. Precondition: next_arrival_time() has a value.
    virtual RequestSpec pop_next_arrival() = 0;

    // The request finished (its last token was delivered) at `now`.
    virtual void on_request_finished(core::RequestId id, core::SimTime now) = 0;

    // The client gave up on the request at `now` (RequestSpec::timeout after its send) and moves on as that client
    // does (workloads/README.md "Client time-outs"). Called instead of on_request_finished, once.
    virtual void on_request_timed_out(core::RequestId id, core::SimTime now) = 0;

    // No request will ever be sent again (no pending request and none can be created by a finish).
    [[nodiscard]] virtual bool exhausted() const = 0;

    // Short human description for tables ("20 tenants, poisson 6 req/s").
    [[nodiscard]] virtual std::string describe() const = 0;
};

// Builds a workload from a scenario's `workload:` mapping (keys documented in workloads/README.md). Errors name the
// file, line and key. `seed` is the experiment's master seed; the mapping's `num_requests` and `duration` bound the
// run. A `type: trace` file is opened here and streamed as arrivals are pulled.
[[nodiscard]] std::unique_ptr<Workload> make_workload(const YamlMap& node, std::uint64_t seed);

// The keys make_workload accepts (for validation before anything is simulated).
void validate_workload(const YamlMap& node);

// The registry of workload types (`type:`), for `servesim list`. Added to the original contract.
struct WorkloadTypeInfo {
    std::string_view name;
    std::string_view description;
};

[[nodiscard]] std::vector<WorkloadTypeInfo> workload_types();

}  // namespace servesim::workloads
