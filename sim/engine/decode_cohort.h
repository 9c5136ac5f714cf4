// DecodeCohort: running requests in a steady decode, stepped together in O(1) instead of one by one. Not a vLLM
// mechanism: a shortcut that reproduces vLLM's per-request bookkeeping exactly (docs/DECODE-COHORT.md).
//
// Between the steps where something happens to it, a decoding request changes by the same amounts every step:
// vLLM's Scheduler.schedule gives it one token (num_computed_tokens + 1, one output placeholder:
// AsyncScheduler._update_after_schedule) and update_from_output appends the sampled token when the step ends
// (num_output_tokens + 1, placeholder − 1), stamped with the step's end. A member keeps the counts and token times it
// had when it joined; the cohort counts the plans it was scheduled in and those that ended, and writes the sums back
// when it leaves. The scheduler still visits every running request in order (a member costs a comparison: its
// budget token and its place among the ITL samples are kept), but a member has no entry in the plan and end_step
// does not visit it. A member leaves (is written back) at the schedule of the first plan in which its step would
// not be plain:
//   - a block boundary: allocate_slots would allocate or cache a block (cache::KvRunningSummary);
//   - its token completes a block, which the request's block hasher extends (Request::append_output_token);
//   - its token is its last (max_tokens; with async scheduling no step is scheduled past it);
//   - max_model_len would cut the step;
// and, out of turn, when the token budget runs out before its place or a preemption picks it.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/engine/request.h"

namespace servesim::engine {

class DecodeCohort {
public:
    // A request stays at least this many plans, or does not join (a join and a leave cost more than a plain step).
    static constexpr std::int64_t kMinPlans = 2;

    // Requests that arrived before `t` give no ITL samples (MetricsCollector::measured).
    void set_measured_from(core::SimTime t) { measured_from_ = t; }
    [[nodiscard]] bool measured(const Request& r) const { return r.arrival >= measured_from_; }

    // Request::cohort_key: a member stays through plan `seq` when its key exceeds stay_key(seq); key & 1 says
    // whether its ITL samples count; a non-zero key at or below stay_key(seq) is due to leave.
    [[nodiscard]] static std::int64_t stay_key(std::int64_t seq) { return 2 * seq + 1; }
    [[nodiscard]] static bool is_member(const Request& r) { return r.cohort_key != 0; }

    // --- the scheduler's side, while it schedules plan `seq` ---

    // Whether `r`'s next token comes exactly one step after its last: it sampled in the plan before (in flight, or
    // the last one that ended).
    [[nodiscard]] bool sampled_in_previous_plan(const Request& r) const {
        return in_flight_seq_ >= 0 ? r.num_output_placeholders > 0
                                   : r.num_output_tokens > 0 && r.last_token == last_end_;
    }
    // The plan at whose schedule `r` would leave if it joined at plan `seq`: `r` runs a single-token decode that
    // samples in plan `seq`, changes no block (KvRunningSummary) and sampled in the plan before. A value below
    // seq + kMinPlans means "do not join". `max_model_len`: the scheduler's.
    [[nodiscard]] static std::int64_t leave_seq(const Request& r, std::int64_t seq, std::int64_t max_model_len);
    // `r` joins at plan `seq` (its first plan as a member) and leaves at the schedule of plan `leave_seq`.
    void join(Request& r, std::int64_t seq, std::int64_t leave_seq);
    // Member `r` leaves at the schedule of plan `seq` (before that plan takes anything from it): its counts and
    // token times become what the plans since it joined made them.
    void write_back(Request& r, std::int64_t seq);

    [[nodiscard]] std::int64_t size() const { return size_; }
    [[nodiscard]] std::int64_t num_measured() const { return num_measured_; }
    // Σ over members of (context + 1) for their decode in plan `seq` (Replica::batch_shape's decode sum): a member
    // that joined at J with c0 computed tokens has c0 + (seq − J) before it.
    [[nodiscard]] std::int64_t decode_context_tokens(std::int64_t seq) const {
        return sum_computed_minus_join_ + size_ * (seq + 1);
    }

    // --- the replica's side ---

    void launched(std::int64_t seq) { in_flight_seq_ = seq; }
    // When the last step ended: the members' last token.
    [[nodiscard]] core::SimTime last_end() const { return last_end_; }
    // Members that left while the plan in flight held them: the replica appends that plan's token to each itself.
    [[nodiscard]] std::vector<Request*>& late_leavers() { return late_leavers_; }
    // Plan `seq` ended at `now`; `had_members`: it held members (whose gap was now − last_end()).
    void ended(std::int64_t seq, core::SimTime now, bool had_members);

private:
    // The longest gap of the plans since `join_seq` that ended with members.
    [[nodiscard]] core::Duration longest_gap_since(std::int64_t join_seq) const;

    std::int64_t size_ = 0;
    std::int64_t num_measured_ = 0;
    std::int64_t sum_computed_minus_join_ = 0;
    std::int64_t oldest_join_seq_ = 0;  // a lower bound on every member's join, for trimming gaps_
    core::SimTime measured_from_;
    std::int64_t in_flight_seq_ = -1;
    core::SimTime last_end_;
    std::vector<Request*> late_leavers_;
    // The gaps of ended plans that held members, (seq, gap), gaps strictly decreasing from the front: the longest
    // gap since plan J is the oldest entry at or after J.
    struct Gap {
        std::int64_t seq = 0;
        core::Duration gap;
    };
    std::vector<Gap> gaps_;
    static constexpr std::size_t kMaxGapsBeforeTrim = 4096;
};

}  // namespace servesim::engine
