// HitChainMemo: remembered hit segments of one full-attention group; see hit_chain_memo.h.
#include "sim/cache/prefix_cache/hit_chain_memo.h"

#include <bit>

namespace servesim::cache {

static_assert(std::has_single_bit(HitChainMemo::kNumSlots) && HitChainMemo::kNumSlots == (std::size_t{1} << 12),
              "slot_of takes the top 12 bits");

void HitChainMemo::record(core::BlockHash key, std::span<const core::BlockId> blocks) {
    if (entries_.empty()) {
        entries_.resize(kNumSlots);
    }
    Entry& e = entries_[slot_of(key)];
    const std::size_t held = e.blocks.size();
    if (num_blocks_ - held + blocks.size() > kMaxBlocks) {
        return;
    }
    e.key = key;
    e.blocks.assign(blocks.begin(), blocks.end());
    num_blocks_ = num_blocks_ - held + blocks.size();
}

void HitChainMemo::forget(core::BlockHash key) {
    if (entries_.empty()) {
        return;
    }
    Entry& e = entries_[slot_of(key)];
    if (e.key != key) {
        return;
    }
    num_blocks_ -= e.blocks.size();
    e.blocks.clear();
}

}  // namespace servesim::cache
