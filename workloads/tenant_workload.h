// Tenants holding multi-turn dialogues (seed study's agentic profile): each tenant has its own system prompt and
// sends turn t with prompt [shared prefix?, system, u1, a1, …, u_t], so hits come from content. A tenant sends its
// next turn only after the previous answer finished (+ think time); after the last turn it restarts a dialogue with
// the same system prompt. Arrivals: closed loop, or paced by `rate` in one of the ways a tenant client can be
// written (TenantPacing; workloads/README.md compares them under overload).
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "workloads/arrival_process.h"
#include "workloads/length_distribution.h"
#include "workloads/request_bounds.h"
#include "workloads/workload.h"

namespace servesim::workloads {

// How `rate` paces the tenants (none applies with `arrival: closed_loop`). Every way keeps at most one request per
// tenant in flight; they differ in who waits under overload and in the order tenants come back.
enum class TenantPacing {
    // Each tenant has its own stream at rate/T and sends turn k at max(its k-th stream time, previous answer +
    // think time): a lagging tenant catches up back to back, and under overload the order turns near-cyclic.
    kPerTenantStream,
    // Each tenant sleeps a gap of its rate/T process after each answer (+ think time), as vLLM's multi-turn
    // benchmark client does with its --request-rate: the sent rate is below `rate` even on an idle server.
    kSleepAfterAnswer,
    // One stream at `rate` for the whole client; each send goes to the tenant idle the longest (a send waits for
    // a tenant when all are busy, later sends keep their times): tenants return in a cyclic order.
    kGlobalFifo,
    // As kGlobalFifo, but each send goes to an idle tenant picked uniformly at random (stream "tenants.choice").
    kGlobalRandom,
};

[[nodiscard]] const char* tenant_pacing_name(TenantPacing p);

struct TenantWorkloadConfig {
    std::int64_t num_tenants = 1;
    LengthDistribution system_prompt_tokens = LengthDistribution::fixed(0);  // drawn once per tenant
    std::int64_t shared_prefix_tokens = 0;                                   // common to all tenants, before system
    int turns_per_dialogue = 1;
    LengthDistribution user_tokens = LengthDistribution::fixed(1);    // per turn
    LengthDistribution answer_tokens = LengthDistribution::fixed(1);  // per turn, >= 1
    core::Duration think_time;
    bool closed_loop = false;  // true: next turn = finish + think time; false: paced by `arrival` and `pacing`
    TenantPacing pacing = TenantPacing::kPerTenantStream;
    ArrivalConfig arrival;     // total rate over all tenants
    RequestBounds bounds;
    // `request_timeout`: a turn not answered this long after its send is given up; the tenant then abandons the
    // dialogue and starts a new one (workloads/README.md "Client time-outs").
    std::optional<core::Duration> request_timeout;
};

[[nodiscard]] TenantWorkloadConfig parse_tenant_workload(const YamlMap& m);

class TenantWorkload final : public Workload {
  public:
    TenantWorkload(TenantWorkloadConfig config, std::uint64_t seed);

    std::optional<core::SimTime> next_arrival_time() override;
    RequestSpec pop_next_arrival() override;
    void on_request_finished(core::RequestId id, core::SimTime now) override;
    void on_request_timed_out(core::RequestId id, core::SimTime now) override;
    bool exhausted() const override;
    std::string describe() const override;

  private:
    struct Tenant {
        Tenant(core::TenantId tenant_id, core::RngStream rng) : id(tenant_id), lengths_rng(rng) {}

        core::TenantId id{};
        core::RngStream lengths_rng;
        std::unique_ptr<ArrivalProcess> arrivals;  // null when closed loop
        core::TokenContent dialogue_prefix;        // [shared?, system]: every dialogue starts with it
        core::TokenContent history;                // runs of the current dialogue so far
        std::uint64_t dialogue = 0;                // 0-based count of restarts
        int next_turn = 1;                         // 1-based
        core::SimTime open_loop_time;              // the tenant's next open-loop arrival
        bool in_flight = false;
    };

    // Makes the tenant's next turn pending (per-tenant pacings): at max(open-loop time, ready) or ready + gap;
    // drops it past the duration bound.
    void schedule_next(std::size_t tenant_index, core::SimTime ready);

    [[nodiscard]] bool global_pacing() const {
        return config_.pacing == TenantPacing::kGlobalFifo || config_.pacing == TenantPacing::kGlobalRandom;
    }

    // Global pacings: the next send time (the next stream time, or later when no tenant is idle by then).
    [[nodiscard]] std::optional<core::SimTime> next_global_send() const;
    // Global pacings: takes the tenant the send at `send` goes to out of the idle set.
    std::size_t take_idle_tenant(core::SimTime send);

    TenantWorkloadConfig config_;
    std::vector<Tenant> tenants_;
    // Pending turns by (send time ns, tenant index): ties broken by tenant index, never by container order.
    using Pending = std::pair<std::int64_t, std::size_t>;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
    std::unordered_map<std::uint64_t, std::size_t> in_flight_;  // request id → tenant index (lookup only)
    // Global pacings: the client's one stream, its next time, and the tenants not in flight by the time they are
    // ready (answer + think time), ordered by (ready time ns, tenant index).
    std::unique_ptr<ArrivalProcess> global_arrivals_;
    core::SimTime global_next_;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> idle_;
    std::optional<core::RngStream> choice_rng_;
    std::int64_t num_sent_ = 0;
};

}  // namespace servesim::workloads
