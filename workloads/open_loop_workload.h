// Open-loop workloads, whose send times do not depend on finishes: synthetic requests (an arrival process, length
// distributions, unique prompts or a shared prefix) and trace replay (Mooncake, Azure; streamed one record ahead).
// An optional max_concurrency holds a request until fewer are in flight, as vllm bench serve's semaphore does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "workloads/arrival_process.h"
#include "workloads/length_distribution.h"
#include "workloads/request_bounds.h"
#include "workloads/trace_reader.h"
#include "workloads/workload.h"

namespace servesim::workloads {

// One request of an open-loop sequence before it gets an id.
struct OpenLoopRequest {
    core::SimTime arrival;
    core::TokenContent prompt;
    std::int64_t max_output_tokens = 1;
};

// Where an open-loop workload's requests come from, in arrival order.
class OpenLoopSource {
  public:
    virtual ~OpenLoopSource() = default;

    // The next request (index = how many came before), or nullopt when the source has no more.
    [[nodiscard]] virtual std::optional<OpenLoopRequest> next(std::int64_t index) = 0;

    [[nodiscard]] virtual std::string describe() const = 0;
};

class OpenLoopWorkload final : public Workload {
  public:
    // `request_timeout`: every request's RequestSpec::timeout (none: the client waits for ever).
    OpenLoopWorkload(std::unique_ptr<OpenLoopSource> source,
                     RequestBounds bounds,
                     std::optional<std::int64_t> max_concurrency,
                     std::optional<core::Duration> request_timeout = std::nullopt);

    std::optional<core::SimTime> next_arrival_time() override;
    RequestSpec pop_next_arrival() override;
    void on_request_finished(core::RequestId id, core::SimTime now) override;
    void on_request_timed_out(core::RequestId id, core::SimTime now) override;
    bool exhausted() const override;
    std::string describe() const override;

  private:
    // Pulls the next request from the source into next_ unless the bounds or the source end it.
    void advance();

    std::unique_ptr<OpenLoopSource> source_;
    RequestBounds bounds_;
    std::optional<std::int64_t> max_concurrency_;
    std::optional<core::Duration> request_timeout_;
    std::optional<OpenLoopRequest> next_;
    std::int64_t num_sent_ = 0;
    std::unordered_set<std::uint64_t> in_flight_;  // membership only, never iterated
    core::SimTime not_before_;                     // last finish: a request held by max_concurrency leaves then
};

struct SyntheticConfig {
    ArrivalConfig arrival;
    LengthDistribution prompt_tokens = LengthDistribution::fixed(1);
    LengthDistribution output_tokens = LengthDistribution::fixed(1);
    std::int64_t shared_prefix_tokens = 0;  // common to all requests, before the unique part
    RequestBounds bounds;
    std::optional<std::int64_t> max_concurrency;
    std::optional<core::Duration> request_timeout;  // `request_timeout`
};

[[nodiscard]] SyntheticConfig parse_synthetic_workload(const YamlMap& m);

[[nodiscard]] std::unique_ptr<Workload> make_synthetic_workload(const SyntheticConfig& config, std::uint64_t seed);

struct TraceConfig {
    std::string path;    // resolved (see resolve_trace_path)
    std::string format;  // a name from trace_formats()
    double time_scale = 1.0;
    std::optional<std::int64_t> limit;  // records read at most
    // Caps each record's output length (1: a prefill pool, which produces only the first token).
    std::optional<std::int64_t> max_output_tokens;
    TraceReaderOptions reader;
    RequestBounds bounds;
    std::optional<std::int64_t> max_concurrency;
    std::optional<core::Duration> request_timeout;  // `request_timeout`
};

// `trace:` as written, relative to the scenario file's folder; if no file is there, relative to the working directory.
[[nodiscard]] std::string resolve_trace_path(const std::string& written, const std::string& scenario_file);

[[nodiscard]] TraceConfig parse_trace_workload(const YamlMap& m);

[[nodiscard]] std::unique_ptr<Workload> make_trace_workload(const TraceConfig& config);

// Reads every record the workload would read (up to `limit`), streaming, so a malformed line stops the run before
// anything is simulated; returns the number of records.
std::int64_t check_trace(const TraceConfig& config);

}  // namespace servesim::workloads
