// Tenants holding multi-turn dialogues (seed study's agentic profile): each tenant has its own system prompt and
// sends turn t with prompt [shared prefix?, system, u1, a1, …, u_t], so hits come from content. A tenant sends its
// next turn only after the previous answer finished (+ think time); after the last turn it restarts a dialogue with
// the same system prompt. Arrivals: closed loop, or a per-tenant open-loop stream at rate/T (send at max of both).
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

struct TenantWorkloadConfig {
    std::int64_t num_tenants = 1;
    LengthDistribution system_prompt_tokens = LengthDistribution::fixed(0);  // drawn once per tenant
    std::int64_t shared_prefix_tokens = 0;                                   // common to all tenants, before system
    int turns_per_dialogue = 1;
    LengthDistribution user_tokens = LengthDistribution::fixed(1);    // per turn
    LengthDistribution answer_tokens = LengthDistribution::fixed(1);  // per turn, >= 1
    core::Duration think_time;
    bool closed_loop = false;  // true: next turn = finish + think time; false: `arrival` at rate/T per tenant
    ArrivalConfig arrival;     // total rate over all tenants
    RequestBounds bounds;
};

[[nodiscard]] TenantWorkloadConfig parse_tenant_workload(const YamlMap& m);

class TenantWorkload final : public Workload {
  public:
    TenantWorkload(TenantWorkloadConfig config, std::uint64_t seed);

    std::optional<core::SimTime> next_arrival_time() override;
    RequestSpec pop_next_arrival() override;
    void on_request_finished(core::RequestId id, core::SimTime now) override;
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

    // Makes the tenant's next turn pending at max(open-loop time, ready); drops it past the duration bound.
    void schedule_next(std::size_t tenant_index, core::SimTime ready);

    TenantWorkloadConfig config_;
    std::vector<Tenant> tenants_;
    // Pending turns by (send time ns, tenant index): ties broken by tenant index, never by container order.
    using Pending = std::pair<std::int64_t, std::size_t>;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
    std::unordered_map<std::uint64_t, std::size_t> in_flight_;  // request id → tenant index (lookup only)
    std::int64_t num_sent_ = 0;
};

}  // namespace servesim::workloads
