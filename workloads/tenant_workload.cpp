// Tenant dialogues: reading `type: tenants`, one RNG stream per tenant and purpose (lengths, arrivals), prompts built
// by appending runs to the tenant's dialogue history (O(prompt runs) per request), a heap of pending turns ordered by
// (send time, tenant). Content ids come from workloads/content_ids.h.
#include "workloads/tenant_workload.h"

#include <fmt/format.h>

#include "common/error.h"
#include "workloads/content_ids.h"

namespace servesim::workloads {

TenantWorkloadConfig parse_tenant_workload(const YamlMap& m) {
    m.allow_only({"type", "tenants", "system_prompt_tokens", "shared_prefix_tokens", "turns_per_dialogue",
                  "user_tokens", "answer_tokens", "think_time", "arrival", "rate", "burstiness", "num_requests",
                  "duration"});
    TenantWorkloadConfig c;
    c.num_tenants = m.get_in_range<std::int64_t>("tenants", 1, 1'000'000);
    c.system_prompt_tokens = LengthDistribution::parse(m, "system_prompt_tokens", 0);
    c.shared_prefix_tokens = m.get_or<std::int64_t>("shared_prefix_tokens", 0);
    if (c.shared_prefix_tokens < 0) {
        m.fail("shared_prefix_tokens", fmt::format("must be non-negative, got {}", c.shared_prefix_tokens));
    }
    c.turns_per_dialogue = m.get_in_range<int>("turns_per_dialogue", 1, 1'000'000);
    c.user_tokens = LengthDistribution::parse(m, "user_tokens", 0);
    c.answer_tokens = LengthDistribution::parse(m, "answer_tokens", 1);
    if (m.has("think_time")) {
        c.think_time = parse_duration_key(m, "think_time");
    }
    c.arrival = parse_arrival(m, /*allow_infinite_rate=*/false, {"closed_loop"});
    c.closed_loop = c.arrival.process == "closed_loop";
    c.bounds = parse_request_bounds(m, /*require_one=*/true);
    return c;
}

TenantWorkload::TenantWorkload(TenantWorkloadConfig config, std::uint64_t seed) : config_(std::move(config)) {
    tenants_.reserve(static_cast<std::size_t>(config_.num_tenants));
    ArrivalConfig per_tenant = config_.arrival;
    per_tenant.rate_per_s /= static_cast<double>(config_.num_tenants);
    for (std::int64_t i = 0; i < config_.num_tenants; ++i) {
        const auto index = static_cast<std::uint64_t>(i);
        Tenant t(core::TenantId{static_cast<std::uint32_t>(i)}, core::RngStream(seed, "tenants.lengths", index));
        if (!config_.closed_loop) {
            t.arrivals = make_arrival_process(per_tenant, core::RngStream(seed, "tenants.arrivals", index));
        }
        if (config_.shared_prefix_tokens > 0) {
            t.dialogue_prefix.push_back({shared_prefix_content(), config_.shared_prefix_tokens});
        }
        const std::int64_t system_tokens = config_.system_prompt_tokens.sample(t.lengths_rng);
        if (system_tokens > 0) {
            t.dialogue_prefix.push_back({system_prompt_content(t.id), system_tokens});
        }
        t.history = t.dialogue_prefix;
        tenants_.push_back(std::move(t));
    }
    for (std::size_t i = 0; i < tenants_.size(); ++i) {
        schedule_next(i, core::SimTime::zero());
    }
}

void TenantWorkload::schedule_next(std::size_t tenant_index, core::SimTime ready) {
    Tenant& t = tenants_[tenant_index];
    core::SimTime send = ready;
    if (t.arrivals) {
        // The tenant's own open-loop clock runs on regardless; the turn also waits for the previous answer.
        t.open_loop_time = t.open_loop_time + t.arrivals->next_gap();
        send = std::max(send, t.open_loop_time);
    }
    if (config_.bounds.end && send > *config_.bounds.end) {
        return;  // the tenant is done: nothing more is sent after `duration`
    }
    pending_.push({send.ns(), tenant_index});
}

std::optional<core::SimTime> TenantWorkload::next_arrival_time() {
    if (pending_.empty() || config_.bounds.count_reached(num_sent_)) {
        return std::nullopt;
    }
    return core::SimTime::from_ns(pending_.top().first);
}

RequestSpec TenantWorkload::pop_next_arrival() {
    SERVESIM_CHECK(!pending_.empty() && !config_.bounds.count_reached(num_sent_),
                   "pop_next_arrival with nothing pending ({} pending, {} sent)", pending_.size(), num_sent_);
    const auto [send_ns, index] = pending_.top();
    pending_.pop();
    Tenant& t = tenants_[index];

    RequestSpec r;
    r.id = core::RequestId{static_cast<std::uint64_t>(num_sent_)};
    r.tenant = t.id;
    r.arrival = core::SimTime::from_ns(send_ns);
    r.turn = t.next_turn;
    const core::ContentRun user{user_message_content(t.id, t.dialogue, t.next_turn),
                                config_.user_tokens.sample(t.lengths_rng)};
    r.max_output_tokens = config_.answer_tokens.sample(t.lengths_rng);
    r.answer_content = answer_content(r.id);
    if (user.length_tokens > 0) {
        t.history.push_back(user);
    }
    r.prompt = t.history;
    if (t.next_turn < config_.turns_per_dialogue) {
        t.history.push_back({r.answer_content, r.max_output_tokens});  // exactly what this request generates
        ++t.next_turn;
    } else {
        t.history = t.dialogue_prefix;  // restart with the same system prompt
        ++t.dialogue;
        t.next_turn = 1;
    }
    t.in_flight = true;
    in_flight_.emplace(core::to_int(r.id), index);
    ++num_sent_;
    return r;
}

void TenantWorkload::on_request_finished(core::RequestId id, core::SimTime now) {
    const auto it = in_flight_.find(core::to_int(id));
    SERVESIM_CHECK(it != in_flight_.end(), "request {} finished but is not in flight", core::to_int(id));
    const std::size_t index = it->second;
    in_flight_.erase(it);
    tenants_[index].in_flight = false;
    if (!config_.bounds.count_reached(num_sent_)) {
        schedule_next(index, now + config_.think_time);
    }
}

bool TenantWorkload::exhausted() const {
    return config_.bounds.count_reached(num_sent_) || (pending_.empty() && in_flight_.empty());
}

std::string TenantWorkload::describe() const {
    const std::string arrivals = config_.closed_loop ? std::string("closed loop") : describe_arrival(config_.arrival);
    return fmt::format("{} tenants × {} turns, {}", config_.num_tenants, config_.turns_per_dialogue, arrivals);
}

}  // namespace servesim::workloads
