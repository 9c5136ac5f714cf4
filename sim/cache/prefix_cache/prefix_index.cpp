// PrefixIndex: (hash, group) → cached blocks, no dedupe (vLLM BlockHashToBlockMap); see prefix_index.h.
#include "sim/cache/prefix_cache/prefix_index.h"

#include <algorithm>
#include <bit>

#include "common/error.h"

namespace servesim::cache {

namespace {

constexpr std::size_t kMinCapacity = 16;

}  // namespace

PrefixIndex::PrefixIndex() { rehash(kMinCapacity); }

void PrefixIndex::reserve(std::int64_t num_blocks) {
    const auto wanted = std::bit_ceil(static_cast<std::size_t>(std::max<std::int64_t>(num_blocks, 1)) * 2);
    if (wanted > slots_.size()) {
        rehash(wanted);
    }
}

std::int64_t PrefixIndex::reserved_bytes(std::int64_t num_blocks) {
    const auto slots = std::bit_ceil(static_cast<std::size_t>(std::max<std::int64_t>(num_blocks, 1)) * 2);
    return static_cast<std::int64_t>(std::max(slots, kMinCapacity) * sizeof(Slot));
}

void PrefixIndex::rehash(std::size_t capacity) {
    SERVESIM_CHECK(capacity <= (std::size_t{1} << 32), "prefix index of {} slots: the tag holds at most 2^32",
                   capacity);
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(capacity));
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    for (const Slot& slot : old) {
        if (slot.block == kEmptySlot) {
            continue;
        }
        std::size_t i = home_of_tag(slot.tag);
        while (slots_[i].block != kEmptySlot) {
            i = (i + 1) & mask_;
        }
        slots_[i] = slot;
    }
}

bool PrefixIndex::more_contains(const BlockHashWithGroupId& key, core::BlockId block) const {
    const auto& more = more_.at(key);
    return std::find(more.begin(), more.end(), block) != more.end();
}

void PrefixIndex::add_duplicate(Slot& slot, const BlockHashWithGroupId& key, core::BlockId block) {
    SERVESIM_CHECK(core::to_int(block) < kBlockMask, "block {} too large for the prefix index", core::to_int(block));
    slot.block |= kHasMore;
    more_[key].push_back(block);
    ++num_entries_;
}

void PrefixIndex::insert_new(const BlockHashWithGroupId& key, core::BlockId block) {
    // Keep the load at most 1/2 so probe runs stay short.
    if (static_cast<std::size_t>(num_keys_ + 1) * 2 > slots_.size()) {
        rehash(slots_.size() * 2);
    }
    const std::uint64_t x = mixed(key);
    auto i = static_cast<std::size_t>(x >> shift_);
    while (slots_[i].block != kEmptySlot) {
        i = (i + 1) & mask_;
    }
    occupy(slots_[i], static_cast<std::uint32_t>(x >> 32), block);
}

void PrefixIndex::occupy(Slot& slot, std::uint32_t tag, core::BlockId block) {
    SERVESIM_CHECK(core::to_int(block) < kBlockMask, "block {} too large for the prefix index", core::to_int(block));
    slot = Slot{tag, core::to_int(block)};
    ++num_keys_;
    ++num_entries_;
}

void PrefixIndex::erase_slot(std::size_t i) {
    // Backward shift: an entry further along the run moves into the hole unless its home lies in (hole, entry].
    for (std::size_t j = (i + 1) & mask_; slots_[j].block != kEmptySlot; j = (j + 1) & mask_) {
        const std::size_t k = home_of_tag(slots_[j].tag);
        if (((j - k) & mask_) >= ((j - i) & mask_)) {
            slots_[i] = slots_[j];
            i = j;
        }
    }
    slots_[i] = Slot{};
    --num_keys_;
}

void PrefixIndex::pop_from(Slot* slot, const BlockHashWithGroupId& key, core::BlockId block) {
    SERVESIM_CHECK(slot != nullptr, "block {} not indexed under hash {:#x} group {}", core::to_int(block),
                   static_cast<std::uint64_t>(key.hash), key.group);
    const bool has_more = (slot->block & kHasMore) != 0;
    if ((slot->block & kBlockMask) == core::to_int(block)) {
        if (!has_more) {
            erase_slot(static_cast<std::size_t>(slot - slots_.data()));
        } else {
            // The earliest remaining duplicate becomes the one lookups return (cached under the same key: the tag
            // stays).
            const auto it = more_.find(key);
            std::vector<core::BlockId>& more = it->second;
            slot->block = core::to_int(more.front()) | (more.size() > 1 ? kHasMore : 0u);
            more.erase(more.begin());
            if (more.empty()) {
                more_.erase(it);
            }
        }
    } else {
        const auto it = has_more ? more_.find(key) : more_.end();
        const auto pos = it == more_.end() ? std::vector<core::BlockId>::iterator{}
                                           : std::find(it->second.begin(), it->second.end(), block);
        SERVESIM_CHECK(it != more_.end() && pos != it->second.end(), "block {} not indexed under hash {:#x} group {}",
                       core::to_int(block), static_cast<std::uint64_t>(key.hash), key.group);
        it->second.erase(pos);
        if (it->second.empty()) {
            more_.erase(it);
            slot->block &= kBlockMask;
        }
    }
    --num_entries_;
}

}  // namespace servesim::cache
