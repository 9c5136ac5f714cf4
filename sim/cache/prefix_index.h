// PrefixIndex: the prefix cache's lookup table, (block hash, group index) → cached blocks (vLLM block_pool.py
// BlockHashToBlockMap). Owns only the map; block states and eviction are the BlockPool's (block_pool.h).
// No dedupe: several blocks may sit under one key (identical blocks computed concurrently); a lookup returns the
// earliest inserted that is still there, as vLLM's insertion-ordered dict does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache {

// vLLM BlockHashWithGroupId: the same tokens cached in two KV cache groups are two different entries.
struct BlockHashWithGroupId {
    core::BlockHash hash{};
    std::int32_t group = 0;
    bool operator==(const BlockHashWithGroupId&) const = default;
};

class PrefixIndex {
public:
    [[nodiscard]] std::optional<core::BlockId> get_one_block(const BlockHashWithGroupId& key) const;
    [[nodiscard]] bool contains(const BlockHashWithGroupId& key, core::BlockId block) const;
    void insert(const BlockHashWithGroupId& key, core::BlockId block);
    // Removes `block` from under `key`; it must be there.
    void pop(const BlockHashWithGroupId& key, core::BlockId block);
    // Number of (key, block) entries.
    [[nodiscard]] std::int64_t num_entries() const { return num_entries_; }
    // Sizes the table for up to num_blocks keys, so that caching never rehashes.
    void reserve(std::int64_t num_blocks) { map_.reserve(static_cast<std::size_t>(num_blocks)); }

private:
    struct KeyHash {
        std::size_t operator()(const BlockHashWithGroupId& k) const {
            return static_cast<std::size_t>(
                core::hash_combine(static_cast<std::uint64_t>(k.hash), static_cast<std::uint64_t>(k.group)));
        }
    };
    struct Entry {
        core::BlockId first{};              // the block a lookup returns (earliest inserted still present)
        std::vector<core::BlockId> more;  // later duplicates in insertion order; empty in the common case
    };

    std::unordered_map<BlockHashWithGroupId, Entry, KeyHash> map_;
    std::int64_t num_entries_ = 0;
};

}  // namespace servesim::cache
