// The status of a finished run (docs/OUTPUTS.md "Status"): one word a reader can filter on, with a one-line reason,
// shared by `run`, `sweep` and `plan`. It answers "did this run measure the deployment serving the load it was
// offered, in a steady state?" — which vLLM's own benchmark never says (vllm bench serve prints the same table for a
// server that keeps up and for one whose queue grows without end), so the rules are ours, each with its threshold
// named below and its reason in docs/OUTPUTS.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cluster/simulation.h"
#include "sim/metrics/metrics.h"

namespace servesim::app {

// In order of precedence (the first that applies is the status; every one that applies is a warning).
enum class RunStatus {
    kOk,
    kOverloaded,          // the queue grew, the clients were held back, or TTFT grew through the run
    kTruncatedByMaxTime,  // max_time came before the workload was done
    kNoRequestsMeasured,  // nothing was sent after the warm-up
    kRejected,            // every measured request was refused (max_model_len, or a prompt that never fits the cache)
    kTimedOut,            // clients gave up on some requests (workload.request_timeout)
    kTooShort,            // the send window is short against the drain or the cache's filling: nothing steady
    kDoesNotFit,          // `plan` only: vLLM refuses the configuration at start-up (the model does not fit)
};

[[nodiscard]] const char* run_status_name(RunStatus s);

// Queue growth: the waiting queue grew by at least max(kQueueGrowthMin, kQueueGrowthFraction × sent) from the middle
// of the send window to its end (time-series samples).
inline constexpr std::int64_t kQueueGrowthMin = 8;
inline constexpr double kQueueGrowthFraction = 0.05;
// Clients held back: sent_rps below the offered rate by more than max(kSendShortfall, kSendNoiseSigmas × cv /
// √(sent − 1)). kSendShortfall is the planner's default --max-shortfall (PlanRequest::max_shortfall); the second
// term is the arrival process's own noise: with gaps of coefficient of variation cv (1 for Poisson, 1/√burstiness for
// gamma, 0 for constant spacing) the rate measured over n − 1 gaps has a relative standard deviation cv / √(n − 1),
// and a shortfall within three of those is chance (one run in 740 of an unloaded Poisson server).
inline constexpr double kSendShortfall = 0.05;
inline constexpr double kSendNoiseSigmas = 3.0;
// The held-back reason adds that the clients are too few (tenants, max_concurrency) when the requests spent under
// this share of their E2E queued: the latency that held them back is service, not queueing.
inline constexpr double kLittleQueueShare = 0.1;
// TTFT growth: the mean TTFT of the requests sent in the last third of the send window is at least
// kTtftGrowthFactor × that of the first third, and larger by at least kTtftGrowthMinMs.
inline constexpr double kTtftGrowthFactor = 2.0;
inline constexpr double kTtftGrowthMinMs = 100.0;
// Too short: the drain (last send → last finish) is longer than the send span; or the KV cache, at least
// kFillMinUsage full over the span's second half (a level from which it can fill and preempt), took more than
// kFillFractionOfWindow of the send span to reach kFillLevel of that level.
inline constexpr double kFillMinUsage = 0.5;
inline constexpr double kFillLevel = 0.9;
inline constexpr double kFillFractionOfWindow = 0.5;

// What the rules read, besides the run's summary and time series.
struct StatusInputs {
    double warmup_s = 0;
    std::optional<double> offered_rps;  // the workload's finite rate, when it has one
    double arrival_cv = 1.0;            // coefficient of variation of the offered gaps (see kSendNoiseSigmas)
    bool all_at_once = false;           // rate inf: everything sent at t = 0 (a drain by design; no rate rule)
};

struct StatusFinding {
    RunStatus status;
    std::string reason;  // one line, without the status name
};

// The load rules (overloaded, too_short) that apply to a run that finished its workload, in precedence order; empty
// when none does. The caller decides the statuses that come first (no_requests_measured, rejected, truncated).
[[nodiscard]] std::vector<StatusFinding> load_findings(const metrics::Summary& s,
                                                       const std::vector<cluster::TimeSample>& timeseries,
                                                       const StatusInputs& in);

// A count with thousands separators ("86,400"), as status reasons and warnings print counts.
[[nodiscard]] std::string thousands(std::int64_t v);

}  // namespace servesim::app
