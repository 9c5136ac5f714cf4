// The load rules of a run's status; see run_status.h and docs/OUTPUTS.md "Status".
#include "tools/app/run_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace servesim::app {

const char* run_status_name(RunStatus s) {
    switch (s) {
        case RunStatus::kOk:
            return "ok";
        case RunStatus::kOverloaded:
            return "overloaded";
        case RunStatus::kTruncatedByMaxTime:
            return "truncated_by_max_time";
        case RunStatus::kNoRequestsMeasured:
            return "no_requests_measured";
        case RunStatus::kRejected:
            return "rejected";
        case RunStatus::kTimedOut:
            return "timed_out";
        case RunStatus::kTooShort:
            return "too_short";
        case RunStatus::kDoesNotFit:
            return "does_not_fit";
    }
    return "ok";
}

std::string thousands(std::int64_t v) {
    // The magnitude as unsigned: -v overflows for the most negative value.
    const auto as_unsigned = static_cast<std::uint64_t>(v);
    const std::uint64_t magnitude = v < 0 ? std::uint64_t{0} - as_unsigned : as_unsigned;
    std::string digits = fmt::format("{}", magnitude);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) {
            out += ',';
        }
        out += digits[i];
    }
    return (v < 0 ? "-" : "") + out;
}

namespace {

// Waiting requests at the last time-series sample at or before t (0 before the first sample).
std::int64_t waiting_at(const std::vector<cluster::TimeSample>& ts, double t_s) {
    std::int64_t w = 0;
    for (const auto& s : ts) {
        if (s.t_s > t_s) {
            break;
        }
        w = s.num_waiting;
    }
    return w;
}

}  // namespace

std::vector<StatusFinding> load_findings(const metrics::Summary& s, const std::vector<cluster::TimeSample>& ts,
                                         const StatusInputs& in) {
    std::vector<StatusFinding> out;
    const double last_send = in.warmup_s + s.send_window_s;
    const double first_send = last_send - s.send_span_s;

    // Queue growth between the middle of the sending window and its end.
    const double t_mid = (in.warmup_s + last_send) / 2.0;
    const std::int64_t w_end = waiting_at(ts, last_send);
    const std::int64_t w_mid = waiting_at(ts, t_mid);
    const std::int64_t floor_n = std::max<std::int64_t>(
        kQueueGrowthMin, static_cast<std::int64_t>(std::ceil(kQueueGrowthFraction * static_cast<double>(s.num_requests_sent))));
    if (w_end - w_mid >= floor_n) {
        out.push_back({RunStatus::kOverloaded,
                       fmt::format("{} requests waiting when the last one was sent at {:.1f} s, up from {} at {:.1f} "
                                   "s; the queue was still growing, so latencies measure queueing, not the engine's "
                                   "steady state",
                                   thousands(w_end), last_send, thousands(w_mid), t_mid)});
    }

    // Clients held back: they sent below the offered rate by more than the shortfall and the arrivals' own noise.
    const double sent_rps = s.sent_rps();
    if (in.offered_rps && !in.all_at_once && sent_rps > 0) {
        const double n_gaps = static_cast<double>(s.num_requests_sent - 1);
        const double allowed = std::max(kSendShortfall, kSendNoiseSigmas * in.arrival_cv / std::sqrt(n_gaps));
        const double shortfall = 1.0 - sent_rps / *in.offered_rps;
        if (shortfall > allowed) {
            out.push_back({RunStatus::kOverloaded,
                           fmt::format("the clients were held back: they sent {:.3g} req/s of the {:.3g} offered ({:.0f} "
                                       "% short, more than the {:.1f} % that chance or the planner's shortfall allow "
                                       "over {} sends): each waits for its answers (mean E2E {:.2f} s, {:.2f} s of "
                                       "it queued), so the load as offered was not served",
                                       sent_rps, *in.offered_rps, 100.0 * shortfall, 100.0 * allowed,
                                       thousands(s.num_requests_sent), s.e2e_ms.mean / 1000.0,
                                       s.queue_ms.mean / 1000.0) +
                               (s.queue_ms.mean < kLittleQueueShare * s.e2e_ms.mean
                                    ? "; the server queued little, so the clients are too few to offer this rate at "
                                      "this latency"
                                    : "")});
        }
    }

    // TTFT that grows from the first third of the send window to the last.
    const auto& th = s.ttft_by_send_third;
    if (!in.all_at_once && th.count[0] > 0 && th.count[2] > 0) {
        const double first = th.mean_ttft_ms[0];
        const double last = th.mean_ttft_ms[2];
        if (last >= kTtftGrowthFactor * first && last - first >= kTtftGrowthMinMs) {
            out.push_back({RunStatus::kOverloaded,
                           fmt::format("TTFT grew through the run: mean {:.0f} ms for the requests sent in the last "
                                       "third of the send window, {:.0f} ms in the first; latencies depend on the "
                                       "run's length",
                                       last, first)});
        }
    }

    if (in.all_at_once) {
        return out;  // a burst at t = 0 is all drain by design: no steady state is claimed
    }
    // Too short: a drain longer than the sending.
    const double drain_s = s.duration_s - s.send_window_s;
    if (s.num_requests_sent > 1 && drain_s > s.send_span_s) {
        out.push_back({RunStatus::kTooShort,
                       fmt::format("the drain after the last send ({:.1f} s) is longer than the send window "
                                   "({:.1f} s): most of the run is the ramp-down, nothing steady was measured; send "
                                   "more requests",
                                   drain_s, s.send_span_s)});
    }
    // Too short: the KV cache still filling through the window.
    if (s.send_span_s > 0) {
        double level = 0;
        int n = 0;
        for (const auto& t : ts) {
            if (t.t_s >= first_send + s.send_span_s / 2 && t.t_s <= last_send) {
                level += t.kv_usage;
                ++n;
            }
        }
        if (n > 0) {
            level /= n;
            std::optional<double> filled_at;
            for (const auto& t : ts) {
                if (t.t_s >= first_send && t.t_s <= last_send && t.kv_usage >= kFillLevel * level) {
                    filled_at = t.t_s;
                    break;
                }
            }
            if (level >= kFillMinUsage && filled_at && *filled_at - first_send > kFillFractionOfWindow * s.send_span_s) {
                out.push_back({RunStatus::kTooShort,
                               fmt::format("the KV cache was still filling: its usage reached {:.0f} % of its level "
                                           "late in the window ({:.2f}) only {:.1f} s into the {:.1f} s send window, "
                                           "so nothing steady was measured; send more requests",
                                           100.0 * kFillLevel, level, *filled_at - first_send, s.send_span_s)});
            }
        }
    }
    return out;
}

}  // namespace servesim::app
