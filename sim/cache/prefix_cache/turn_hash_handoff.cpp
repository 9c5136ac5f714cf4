// TurnHashHandoff: a finished turn's block hashes handed to its dialogue's next turn; see turn_hash_handoff.h.
#include "sim/cache/prefix_cache/turn_hash_handoff.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

void TurnHashHandoff::give(core::TokenContent&& runs, std::vector<core::BlockHash>&& hashes,
                           const HashCursor& cursor) {
    SERVESIM_CHECK(!runs.empty(), "handing off the hashes of an empty content");
    SERVESIM_CHECK(hashes.size() == cursor.num_hashed_blocks, "{} hashes but the cursor is after {} blocks",
                   hashes.size(), cursor.num_hashed_blocks);
    if (!entries_) {
        entries_ = std::make_unique<Entry[]>(kNumEntries);
        index_ = std::make_unique<std::uint32_t[]>(kNumIndexSlots);
        std::fill(index_.get(), index_.get() + kNumIndexSlots, kNoEntry);
    }
    const core::ContentId key = runs.back().content;
    const auto e = static_cast<std::uint32_t>(num_given_ % kNumEntries);
    ++num_given_;
    Entry& entry = entries_[e];
    entry.runs = std::move(runs);
    entry.hashes = std::move(hashes);
    entry.cursor = cursor;
    // Of the key's two slots, one that names no live entry, else the one naming the older entry (ring age).
    const std::size_t a = slot_a(key);
    const std::size_t b = slot_b(key);
    const auto live = [&](std::size_t slot) {
        const std::uint32_t x = index_[slot];
        if (x == kNoEntry || x == e || entries_[x].runs.empty()) {
            return false;
        }
        const core::ContentId k = entries_[x].runs.back().content;
        return slot_a(k) == slot || slot_b(k) == slot;
    };
    const auto age = [&](std::size_t slot) { return (e + kNumEntries - index_[slot]) % kNumEntries; };
    std::size_t slot = a;
    if (live(a) && (!live(b) || age(b) > age(a))) {
        slot = b;
    }
    index_[slot] = e;
}

bool TurnHashHandoff::take_from(std::uint32_t e, const core::TokenContent& runs, std::size_t max_blocks,
                                std::vector<core::BlockHash>& hashes, HashCursor& cursor) {
    Entry& entry = entries_[e];
    if (entry.runs.size() > runs.size() || entry.hashes.size() > max_blocks ||
        !std::equal(entry.runs.begin(), entry.runs.end(), runs.begin())) {
        return false;
    }
    hashes = std::move(entry.hashes);
    cursor = entry.cursor;
    entry.runs.clear();
    entry.hashes = {};
    return true;
}

bool TurnHashHandoff::take(const core::TokenContent& runs, std::size_t max_blocks, std::vector<core::BlockHash>& hashes,
                           HashCursor& cursor) {
    SERVESIM_CHECK(hashes.empty(), "taking a handoff into a hash list of {} blocks", hashes.size());
    if (!entries_) {
        return false;
    }
    const std::size_t n = runs.size();
    // The previous answer sits before the new user message and the new answer's run (engine::Request appends it,
    // empty): run n−3; without one of those, n−2 or n−1.
    for (std::size_t back = 3; back >= 1; --back) {
        if (n < back) {
            continue;
        }
        const core::ContentId key = runs[n - back].content;
        for (const std::size_t slot : {slot_a(key), slot_b(key)}) {
            if (names(slot, key) && take_from(index_[slot], runs, max_blocks, hashes, cursor)) {
                index_[slot] = kNoEntry;
                return true;
            }
        }
    }
    return false;
}

std::size_t TurnHashHandoff::num_parked() const {
    if (!entries_) {
        return 0;
    }
    return static_cast<std::size_t>(
        std::count_if(entries_.get(), entries_.get() + kNumEntries, [](const Entry& e) { return !e.runs.empty(); }));
}

}  // namespace servesim::cache
