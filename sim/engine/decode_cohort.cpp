// DecodeCohort; see decode_cohort.h and docs/DECODE-COHORT.md.
#include "sim/engine/decode_cohort.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::engine {

std::int64_t DecodeCohort::leave_seq(const Request& r, std::int64_t seq, std::int64_t max_model_len) {
    const cache::KvRunningSummary& s = r.kv_summary;
    if (s.slot_tokens < 0 || s.uncached_from_tokens < 0 || r.next_hash_at_tokens <= 0) {
        return seq;  // the block lists or the hasher must be asked: no shortcut to when the request leaves
    }
    // Plan seq + k (k >= 0) as a member: c0 + k computed tokens before it and one token in it; its token brings the
    // request to P + o0 + p0 + k + 1 tokens (p0: the placeholder of the plan in flight at the join, whose token
    // comes first); at its schedule the request has c0 + k + 1 − p0 tokens (a decode: computed + 1 = tokens +
    // placeholders).
    const std::int64_t c0 = r.num_computed_tokens;
    const std::int64_t o0 = r.num_output_tokens;
    const std::int64_t p0 = r.num_output_placeholders;
    // The first k at which the step is not plain:
    std::int64_t k = r.max_output_tokens - o0 - p0 - 1;                            // its token is the last
    k = std::min(k, r.next_hash_at_tokens - (r.num_prompt_tokens + o0 + p0 + 1));  // its token completes a block
    k = std::min(k, s.slot_tokens - c0);                    // c0 + k + 1 > the slots held: a new block
    k = std::min(k, s.uncached_from_tokens - 1 + p0 - c0);  // c0 + k + 1 − p0 ≥ uncached_from: a block to cache
    k = std::min(k, max_model_len - 1 - c0);                // max_model_len cuts the step to 0 tokens
    return seq + std::max<std::int64_t>(k, 0);
}

void DecodeCohort::join(Request& r, std::int64_t seq, std::int64_t leave_seq) {
    SERVESIM_CHECK(leave_seq > seq && r.cohort_key == 0, "decode cohort: request {} joins at plan {} to leave at {}",
                   core::to_int(r.id), seq, leave_seq);
    r.cohort_join_seq = seq;
    r.cohort_key = 2 * leave_seq + (measured(r) ? 1 : 0);
    if (size_ == 0 || seq < oldest_join_seq_) {
        oldest_join_seq_ = seq;
    }
    ++size_;
    num_measured_ += measured(r) ? 1 : 0;
    sum_computed_minus_join_ += r.num_computed_tokens - seq;
}

void DecodeCohort::write_back(Request& r, std::int64_t seq) {
    const std::int64_t join_seq = r.cohort_join_seq;
    // Scheduled as a member in plans join_seq .. seq − 1 (every plan since it joined: the scheduler visits every
    // running request); all of them ended except the one in flight, if it is one of them.
    const std::int64_t num_scheduled = seq - join_seq;
    const std::int64_t num_ended = num_scheduled - (in_flight_seq_ >= join_seq ? 1 : 0);
    SERVESIM_CHECK(r.cohort_key != 0 && num_scheduled >= 0 && num_ended >= 0,
                   "decode cohort: request {} (joined at plan {}) leaves at plan {}", core::to_int(r.id), join_seq,
                   seq);
    --size_;
    num_measured_ -= measured(r) ? 1 : 0;
    sum_computed_minus_join_ -= r.num_computed_tokens - join_seq;
    r.cohort_key = 0;
    r.cohort_join_seq = 0;
    r.num_computed_tokens += num_scheduled;
    r.num_output_placeholders += num_scheduled - num_ended;
    r.num_output_tokens += num_ended;
    if (num_ended > 0) {
        r.last_token = last_end_;  // the last plan that ended held it
        r.max_token_gap = std::max(r.max_token_gap, longest_gap_since(join_seq));
    }
    if (num_scheduled > num_ended) {
        late_leavers_.push_back(&r);  // the plan in flight still owes it a token
    }
    if (size_ == 0) {
        gaps_.clear();  // only members read them
    }
}

core::Duration DecodeCohort::longest_gap_since(std::int64_t join_seq) const {
    // The entries at or after join_seq are at most the plans since the join (a few block sizes' worth): scan back.
    std::size_t i = gaps_.size();
    while (i > 0 && gaps_[i - 1].seq >= join_seq) {
        --i;
    }
    return i == gaps_.size() ? core::Duration{} : gaps_[i].gap;
}

void DecodeCohort::ended(std::int64_t seq, core::SimTime now, bool had_members) {
    if (had_members && size_ > 0) {
        const core::Duration gap = now - last_end_;
        while (!gaps_.empty() && gaps_.back().gap <= gap) {
            gaps_.pop_back();
        }
        gaps_.push_back(Gap{seq, gap});
        if (gaps_.size() > kMaxGapsBeforeTrim && gaps_.front().seq < oldest_join_seq_) {
            // Falling step times keep every entry: those older than every member's join are never read.
            const auto keep = std::lower_bound(gaps_.begin(), gaps_.end(), oldest_join_seq_,
                                               [](const Gap& g, std::int64_t s) { return g.seq < s; });
            gaps_.erase(gaps_.begin(), keep);
        }
    }
    last_end_ = now;
    in_flight_seq_ = -1;
}

}  // namespace servesim::engine
