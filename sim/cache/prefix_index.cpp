// PrefixIndex: (hash, group) → cached blocks, no dedupe (vLLM BlockHashToBlockMap); see prefix_index.h.
#include "sim/cache/prefix_index.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cache {

std::optional<core::BlockId> PrefixIndex::get_one_block(const BlockHashWithGroupId& key) const {
    const auto it = map_.find(key);
    if (it == map_.end()) {
        return std::nullopt;
    }
    return it->second.first;
}

bool PrefixIndex::contains(const BlockHashWithGroupId& key, core::BlockId block) const {
    const auto it = map_.find(key);
    if (it == map_.end()) {
        return false;
    }
    return it->second.first == block ||
           std::find(it->second.more.begin(), it->second.more.end(), block) != it->second.more.end();
}

void PrefixIndex::insert(const BlockHashWithGroupId& key, core::BlockId block) {
    auto [it, inserted] = map_.try_emplace(key);
    if (inserted) {
        it->second.first = block;
    } else {
        it->second.more.push_back(block);
    }
    ++num_entries_;
}

void PrefixIndex::pop(const BlockHashWithGroupId& key, core::BlockId block) {
    const auto it = map_.find(key);
    SERVESIM_CHECK(it != map_.end(), "block {} not indexed under hash {:#x} group {}", core::to_int(block),
                   static_cast<std::uint64_t>(key.hash), key.group);
    Entry& entry = it->second;
    if (entry.first == block) {
        if (entry.more.empty()) {
            map_.erase(it);
        } else {
            entry.first = entry.more.front();
            entry.more.erase(entry.more.begin());
        }
    } else {
        const auto pos = std::find(entry.more.begin(), entry.more.end(), block);
        SERVESIM_CHECK(pos != entry.more.end(), "block {} not indexed under hash {:#x} group {}",
                       core::to_int(block), static_cast<std::uint64_t>(key.hash), key.group);
        entry.more.erase(pos);
    }
    --num_entries_;
}

}  // namespace servesim::cache
