// BlockHasher: chained block hashes over content runs (vLLM hash_block_tokens); see block_hash.h for the function.
#include "sim/cache/block_hash.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

BlockHasher::BlockHasher(int block_size_tokens)
    : block_size_tokens_(block_size_tokens),
      mixed_block_size_(core::mix64(static_cast<std::uint64_t>(block_size_tokens))) {
    SERVESIM_CHECK(block_size_tokens > 0, "block size must be positive, got {}", block_size_tokens);
}

void BlockHasher::extend(std::vector<core::BlockHash>& hashes, const core::TokenContent& runs,
                         std::int64_t num_tokens) {
    if (hashes.empty()) {
        run_index_ = 0;
        offset_in_run_ = 0;
        num_hashed_blocks_ = 0;
        hashes.reserve(static_cast<std::size_t>(std::max<std::int64_t>(num_tokens / block_size_tokens_, 0)));
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
}

}  // namespace servesim::cache
