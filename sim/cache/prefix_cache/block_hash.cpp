// BlockHasher: chained block hashes over content runs (vLLM hash_block_tokens); see block_hash.h for the function.
#include "sim/cache/prefix_cache/block_hash.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

BlockHasher::BlockHasher(int block_size_tokens)
    : block_size_tokens_(block_size_tokens),
      mixed_block_size_(core::mix64(static_cast<std::uint64_t>(block_size_tokens))),
      next_block_end_tokens_(block_size_tokens) {
    SERVESIM_CHECK(block_size_tokens > 0, "block size must be positive, got {}", block_size_tokens);
}

const std::vector<core::BlockHash>* FirstRunHashMemo::find(core::ContentId c) const {
    const auto it = hashes_.find(c);
    return it == hashes_.end() ? nullptr : &it->second;
}

const std::vector<core::BlockHash>* FirstRunHashMemo::lookup(core::ContentId c) {
    if (!enabled_) {
        return nullptr;
    }
    const auto* known = find(c);
    ++num_lookups_;
    num_hits_ += known != nullptr ? 1 : 0;
    if (num_hits_ == 0 && num_lookups_ >= kProbeLookups) {
        enabled_ = false;
        num_hashes_ = 0;
        std::unordered_map<core::ContentId, std::vector<core::BlockHash>, ContentIdHash>().swap(hashes_);
    }
    return known;
}

void FirstRunHashMemo::record(core::ContentId c, std::span<const core::BlockHash> hashes) {
    if (!enabled_) {
        return;
    }
    auto it = hashes_.find(c);
    const std::size_t known = it == hashes_.end() ? 0 : it->second.size();
    if (hashes.size() <= known || num_hashes_ + (hashes.size() - known) > kMaxHashes) {
        return;
    }
    if (it == hashes_.end()) {
        it = hashes_.emplace(c, std::vector<core::BlockHash>{}).first;
    }
    it->second.assign(hashes.begin(), hashes.end());
    num_hashes_ += hashes.size() - known;
}

void BlockHasher::extend_blocks(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs,
                                std::int64_t num_tokens, FirstRunHashMemo* memo) {
    // A decode step that completes a block (vLLM Request.append_output_token_ids → update_block_hashes): exactly one
    // more block, lying entirely inside the last run (the answer) from the cursor on. extend_runs would take one
    // piece (that run's content, the cursor's offset, a whole block) and reach the same hash and cursor; here
    // without its loop, its checks and its memo branches. A block that crosses into the answer, or a cursor left
    // at the end of an earlier run (a prompt ending on a block boundary), takes the general routine.
    const std::int64_t block_size = block_size_tokens_;
    if (!hashes.empty() && hashes.size() == num_hashed_blocks_ && num_tokens >= next_block_end_tokens_ &&
        num_tokens < next_block_end_tokens_ + block_size && run_index_ + 1 == runs.size() &&
        offset_in_run_ + block_size <= runs.back().length_tokens) {
        std::uint64_t h = static_cast<std::uint64_t>(hashes.back());
        h = core::hash_combine(h, static_cast<std::uint64_t>(runs.back().content));
        h = core::hash_combine(h, static_cast<std::uint64_t>(offset_in_run_));
        h = core::hash_combine_mixed(h, mixed_block_size_);
        hashes.push_back(core::BlockHash{h});
        offset_in_run_ += block_size;
        ++num_hashed_blocks_;
        next_block_end_tokens_ += block_size;
        return;
    }
    extend_runs(hashes, runs, num_tokens, memo);
}

void BlockHasher::extend_runs(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs,
                              std::int64_t num_tokens, FirstRunHashMemo* memo) {
    // Blocks entirely inside the first run (when starting from 0 with a memo): their hashes depend only on its content.
    std::size_t num_first_run_blocks = 0;
    if (hashes.empty()) {
        run_index_ = 0;
        offset_in_run_ = 0;
        num_hashed_blocks_ = 0;
        const std::size_t num_full_blocks =
            static_cast<std::size_t>(std::max<std::int64_t>(num_tokens / block_size_tokens_, 0));
        // The capacity the caller reserved carries over to a taken list.
        const std::size_t capacity = std::max(hashes.capacity(), num_full_blocks);
        HashCursor parked;
        const bool taken = memo != nullptr && memo->block_size_tokens() == block_size_tokens_ &&
                           memo->turns().take(runs, num_full_blocks, hashes, parked);
        if (taken) {
            // The previous turn of this dialogue: its runs open `runs`, so its hashes and cursor are what this pass
            // would reach there (turn_hash_handoff.h).
            run_index_ = parked.run_index;
            offset_in_run_ = parked.offset_in_run;
            num_hashed_blocks_ = parked.num_hashed_blocks;
        }
        hashes.reserve(capacity);
        if (!taken && memo != nullptr && memo->enabled() && !runs.empty() &&
            memo->block_size_tokens() == block_size_tokens_) {
            SERVESIM_CHECK(runs.front().length_tokens >= 0, "run 0 has {} tokens", runs.front().length_tokens);
            num_first_run_blocks = static_cast<std::size_t>(
                std::min(runs.front().length_tokens, std::max<std::int64_t>(num_tokens, 0)) / block_size_tokens_);
            if (const auto* known = memo->lookup(runs.front().content)) {
                const std::size_t n = std::min(known->size(), num_first_run_blocks);
                hashes.assign(known->begin(), known->begin() + static_cast<std::ptrdiff_t>(n));
                offset_in_run_ = static_cast<std::int64_t>(n) * block_size_tokens_;
                num_hashed_blocks_ = n;
            }
        }
    }
    SERVESIM_CHECK(hashes.size() == num_hashed_blocks_,
                   "hash list has {} blocks but this hasher's cursor is after {} blocks (one hasher per request)",
                   hashes.size(), num_hashed_blocks_);
    const std::int64_t block_size = block_size_tokens_;
    // mix64 of the current run's content id, computed once per run rather than once per block.
    std::size_t mixed_run_index = runs.size();
    std::uint64_t mixed_content = 0;
    while (static_cast<std::int64_t>(hashes.size() + 1) * block_size <= num_tokens) {
        std::uint64_t h = hashes.empty() ? kNoneHashSeed : static_cast<std::uint64_t>(hashes.back());
        std::int64_t remaining = block_size;
        while (remaining > 0) {
            SERVESIM_CHECK(run_index_ < runs.size(), "num_tokens {} exceeds the content ({} runs)", num_tokens,
                           runs.size());
            const core::ContentRun& run = runs[run_index_];
            const std::int64_t available = run.length_tokens - offset_in_run_;
            SERVESIM_CHECK(available >= 0, "run {} shrank below the hashed offset {}", run_index_, offset_in_run_);
            if (available == 0) {
                ++run_index_;
                offset_in_run_ = 0;
                continue;
            }
            const std::int64_t take = std::min(available, remaining);
            if (mixed_run_index != run_index_) {
                mixed_run_index = run_index_;
                mixed_content = core::mix64(static_cast<std::uint64_t>(run.content));
            }
            // = hash_combine(hash_combine(hash_combine(h, content), offset), take), with the repeated mixes reused.
            h = core::hash_combine_mixed(h, mixed_content);
            h = core::hash_combine(h, static_cast<std::uint64_t>(offset_in_run_));
            h = core::hash_combine_mixed(
                h, take == block_size ? mixed_block_size_ : core::mix64(static_cast<std::uint64_t>(take)));
            offset_in_run_ += take;
            remaining -= take;
        }
        hashes.push_back(core::BlockHash{h});
        ++num_hashed_blocks_;
    }
    next_block_end_tokens_ = static_cast<std::int64_t>(num_hashed_blocks_ + 1) * block_size;
    if (num_first_run_blocks > 0) {
        memo->record(runs.front().content,
                     std::span<const core::BlockHash>(hashes).first(std::min(num_first_run_blocks, hashes.size())));
    }
}

}  // namespace servesim::cache
