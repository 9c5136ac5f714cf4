// Tenant dialogues: reading `type: tenants`, one RNG stream per tenant and purpose (lengths, arrivals), prompts built
// by appending runs to the tenant's dialogue history (O(prompt runs) per request), a heap of pending turns ordered by
// (send time, tenant). Content ids come from workloads/content_ids.h.
#include "workloads/tenant_workload.h"

#include <fmt/format.h>

#include "common/error.h"
#include "workloads/content_ids.h"

namespace servesim::workloads {

const char* tenant_pacing_name(TenantPacing p) {
    switch (p) {
        case TenantPacing::kPerTenantStream:
            return "per_tenant_stream";
        case TenantPacing::kSleepAfterAnswer:
            return "sleep_after_answer";
        case TenantPacing::kGlobalFifo:
            return "global_fifo";
        case TenantPacing::kGlobalRandom:
            return "global_random";
    }
    return "per_tenant_stream";
}

TenantWorkloadConfig parse_tenant_workload(const YamlMap& m) {
    m.allow_only({"type", "tenants", "system_prompt_tokens", "shared_prefix_tokens", "turns_per_dialogue",
                  "user_tokens", "answer_tokens", "think_time", "arrival", "rate", "burstiness", "pacing",
                  "num_requests", "duration", "request_timeout"});
    TenantWorkloadConfig c;
    c.num_tenants = m.get_in_range<std::int64_t>("tenants", 1, 1'000'000);
    c.system_prompt_tokens = LengthDistribution::parse(m, "system_prompt_tokens", 0);
    c.shared_prefix_tokens = parse_shared_prefix_tokens(m);
    c.turns_per_dialogue = m.get_in_range<int>("turns_per_dialogue", 1, 1'000'000);
    c.user_tokens = LengthDistribution::parse(m, "user_tokens", 0);
    c.answer_tokens = LengthDistribution::parse(m, "answer_tokens", 1);
    // A dialogue's first turn holds the shared prefix, the system prompt and the first user message only.
    check_prompt_not_empty(m, "user_tokens",
                           {{"shared_prefix_tokens", c.shared_prefix_tokens},
                            {"system_prompt_tokens", c.system_prompt_tokens.min_tokens()},
                            {"user_tokens", c.user_tokens.min_tokens()}});
    if (m.has("think_time")) {
        c.think_time = parse_duration_key(m, "think_time");
    }
    c.arrival = parse_arrival(m, /*allow_infinite_rate=*/false, {"closed_loop"});
    c.closed_loop = c.arrival.process == "closed_loop";
    if (m.has("pacing")) {
        if (c.closed_loop) {
            m.fail("pacing", "not used with `arrival: closed_loop` (each turn follows the previous answer)");
        }
        const auto p = m.get<std::string>("pacing");
        bool found = false;
        std::string names;
        for (const TenantPacing v : {TenantPacing::kPerTenantStream, TenantPacing::kSleepAfterAnswer,
                                     TenantPacing::kGlobalFifo, TenantPacing::kGlobalRandom}) {
            names += (names.empty() ? "" : ", ") + std::string(tenant_pacing_name(v));
            if (p == tenant_pacing_name(v)) {
                c.pacing = v;
                found = true;
            }
        }
        if (!found) {
            m.fail("pacing", fmt::format("'{}' is not a pacing; allowed: {}", p, names));
        }
    }
    c.bounds = parse_request_bounds(m, /*require_one=*/true);
    c.request_timeout = parse_request_timeout(m);
    return c;
}

TenantWorkload::TenantWorkload(TenantWorkloadConfig config, std::uint64_t seed) : config_(std::move(config)) {
    tenants_.reserve(static_cast<std::size_t>(config_.num_tenants));
    ArrivalConfig per_tenant = config_.arrival;
    per_tenant.rate_per_s /= static_cast<double>(config_.num_tenants);
    for (std::int64_t i = 0; i < config_.num_tenants; ++i) {
        const auto index = static_cast<std::uint64_t>(i);
        Tenant t(core::TenantId{static_cast<std::uint32_t>(i)}, core::RngStream(seed, "tenants.lengths", index));
        if (!config_.closed_loop && !global_pacing()) {
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
    if (global_pacing()) {
        global_arrivals_ = make_arrival_process(config_.arrival, core::RngStream(seed, "tenants.global_arrivals"));
        global_next_ = core::SimTime::zero() + global_arrivals_->next_gap();  // a gap from t = 0, as per tenant
        if (config_.pacing == TenantPacing::kGlobalRandom) {
            choice_rng_.emplace(seed, "tenants.choice");
        }
        for (std::size_t i = 0; i < tenants_.size(); ++i) {
            idle_.push({0, i});
        }
        return;
    }
    for (std::size_t i = 0; i < tenants_.size(); ++i) {
        schedule_next(i, core::SimTime::zero());
    }
}

std::optional<core::SimTime> TenantWorkload::next_global_send() const {
    if (idle_.empty()) {
        return std::nullopt;  // every tenant waits for an answer; a finish makes one idle again
    }
    const core::SimTime send = std::max(global_next_, core::SimTime::from_ns(idle_.top().first));
    if (config_.bounds.end && send > *config_.bounds.end) {
        return std::nullopt;
    }
    return send;
}

std::size_t TenantWorkload::take_idle_tenant(core::SimTime send) {
    if (config_.pacing == TenantPacing::kGlobalFifo) {
        const std::size_t index = idle_.top().second;  // idle the longest (ties: lower index)
        idle_.pop();
        return index;
    }
    // Uniformly among the tenants idle by `send`, in (ready time, index) order so the draw is reproducible.
    std::vector<Pending> ready;
    while (!idle_.empty() && idle_.top().first <= send.ns()) {
        ready.push_back(idle_.top());
        idle_.pop();
    }
    const auto pick = static_cast<std::size_t>(choice_rng_->uniform_int(0, static_cast<std::int64_t>(ready.size()) - 1));
    for (std::size_t i = 0; i < ready.size(); ++i) {
        if (i != pick) {
            idle_.push(ready[i]);
        }
    }
    return ready[pick].second;
}

void TenantWorkload::schedule_next(std::size_t tenant_index, core::SimTime ready) {
    Tenant& t = tenants_[tenant_index];
    core::SimTime send = ready;
    if (t.arrivals && config_.pacing == TenantPacing::kSleepAfterAnswer) {
        send = ready + t.arrivals->next_gap();  // the gap starts when the answer is in
    } else if (t.arrivals) {
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
    if (config_.bounds.count_reached(num_sent_)) {
        return std::nullopt;
    }
    if (global_pacing()) {
        return next_global_send();
    }
    if (pending_.empty()) {
        return std::nullopt;
    }
    return core::SimTime::from_ns(pending_.top().first);
}

RequestSpec TenantWorkload::pop_next_arrival() {
    std::int64_t send_ns = 0;
    std::size_t index = 0;
    if (global_pacing()) {
        const auto send = next_global_send();
        SERVESIM_CHECK(send.has_value() && !config_.bounds.count_reached(num_sent_),
                       "pop_next_arrival with no idle tenant ({} sent)", num_sent_);
        send_ns = send->ns();
        index = take_idle_tenant(*send);
        // The stream's next time follows its own schedule: sends delayed for a tenant do not shift later ones.
        global_next_ = global_next_ + global_arrivals_->next_gap();
    } else {
        SERVESIM_CHECK(!pending_.empty() && !config_.bounds.count_reached(num_sent_),
                       "pop_next_arrival with nothing pending ({} pending, {} sent)", pending_.size(), num_sent_);
        send_ns = pending_.top().first;
        index = pending_.top().second;
        pending_.pop();
    }
    Tenant& t = tenants_[index];

    RequestSpec r;
    r.id = core::RequestId{static_cast<std::uint64_t>(num_sent_)};
    r.tenant = t.id;
    r.arrival = core::SimTime::from_ns(send_ns);
    r.turn = t.next_turn;
    r.session = ((static_cast<std::uint64_t>(index) + 1) << 32) | (t.dialogue & 0xffffffffu);
    r.last_in_session = t.next_turn == config_.turns_per_dialogue;
    const core::ContentRun user{user_message_content(t.id, t.dialogue, t.next_turn),
                                config_.user_tokens.sample(t.lengths_rng)};
    r.max_output_tokens = config_.answer_tokens.sample(t.lengths_rng);
    r.answer_content = answer_content(r.id);
    r.timeout = config_.request_timeout;
    if (user.length_tokens > 0) {
        t.history.push_back(user);
    }
    // One spare run: the engine's Request appends the answer to its content (engine/request.h), which would
    // otherwise reallocate an exact-size copy once per request.
    r.prompt.reserve(t.history.size() + 1);
    r.prompt.assign(t.history.begin(), t.history.end());
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
    if (config_.bounds.count_reached(num_sent_)) {
        return;
    }
    if (global_pacing()) {
        idle_.push({(now + config_.think_time).ns(), index});
    } else {
        schedule_next(index, now + config_.think_time);
    }
}

void TenantWorkload::on_request_timed_out(core::RequestId id, core::SimTime now) {
    // The answer never came, so the next turn cannot carry it: the tenant abandons the dialogue (a user whose chat
    // hung starts over) and opens a new one with the same system prompt, paced as after an answer (servesim's own
    // client; no tool to follow). A timed-out last turn had restarted the dialogue at its send already.
    const auto it = in_flight_.find(core::to_int(id));
    SERVESIM_CHECK(it != in_flight_.end(), "request {} timed out but is not in flight", core::to_int(id));
    Tenant& t = tenants_[it->second];
    if (t.next_turn != 1) {
        t.history = t.dialogue_prefix;
        ++t.dialogue;
        t.next_turn = 1;
    }
    on_request_finished(id, now);
}

bool TenantWorkload::exhausted() const {
    if (config_.bounds.count_reached(num_sent_)) {
        return true;
    }
    if (global_pacing()) {
        return in_flight_.empty() && !next_global_send();
    }
    return pending_.empty() && in_flight_.empty();
}

std::string TenantWorkload::describe() const {
    std::string arrivals = config_.closed_loop ? std::string("closed loop") : describe_arrival(config_.arrival);
    if (!config_.closed_loop && config_.pacing != TenantPacing::kPerTenantStream) {
        arrivals += std::string(", paced ") + tenant_pacing_name(config_.pacing);
    }
    return fmt::format("{} tenants × {} turns, {}", config_.num_tenants, config_.turns_per_dialogue, arrivals);
}

}  // namespace servesim::workloads
