// PrefixIndex: the prefix cache's lookup table, (block hash, group index) → cached blocks (vLLM block_pool.py
// BlockHashToBlockMap). Owns only the map; block states and eviction are the BlockPool's (block_pool.h).
// No dedupe: several blocks may sit under one key (identical blocks computed concurrently); a lookup returns the
// earliest inserted that is still there, as vLLM's insertion-ordered dict does.
// Layout: an open-addressing table (linear probing, backward-shift deletion, load ≤ 1/2) of 16-byte slots holding
// the key and the first block inline, because a prefix lookup probes it once per prompt block and a node-based map
// cost a cache miss per probe. Later duplicates, rare, wait in a side map in insertion order. Never iterated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
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
    PrefixIndex();

    [[nodiscard]] std::optional<core::BlockId> get_one_block(const BlockHashWithGroupId& key) const {
        const Slot* slot = find_slot(key);
        if (slot == nullptr) {
            return std::nullopt;
        }
        return core::BlockId{slot->block & kBlockMask};
    }

    // Where get_one_block(key) starts probing, for __builtin_prefetch: a prefix lookup knows all its keys up front,
    // so it can overlap the table's cache misses instead of taking them one after another. (The prefetch must sit
    // in the caller's body: GCC deems a function holding only a prefetch pure and deletes calls to it.)
    [[nodiscard]] const void* probe_address(const BlockHashWithGroupId& key) const { return &slots_[home(key)]; }

    [[nodiscard]] bool contains(const BlockHashWithGroupId& key, core::BlockId block) const;
    void insert(const BlockHashWithGroupId& key, core::BlockId block);
    // Removes `block` from under `key`; it must be there.
    void pop(const BlockHashWithGroupId& key, core::BlockId block);
    // Number of (key, block) entries.
    [[nodiscard]] std::int64_t num_entries() const { return num_entries_; }
    // Whether some key holds more than one block (then a lookup's answer is not simply "the block with that hash").
    [[nodiscard]] bool has_duplicates() const { return num_entries_ != num_keys_; }
    // Sizes the table for up to num_blocks keys, so that caching never rehashes.
    void reserve(std::int64_t num_blocks);

private:
    struct KeyHash {
        std::size_t operator()(const BlockHashWithGroupId& k) const {
            return static_cast<std::size_t>(
                core::hash_combine(static_cast<std::uint64_t>(k.hash), static_cast<std::uint64_t>(k.group)));
        }
    };
    // `block` carries the block id in its low 31 bits and kHasMore when later duplicates wait in more_;
    // kEmptySlot marks a free slot (no block id reaches it: insert checks ids < kBlockMask).
    struct Slot {
        std::uint64_t hash = 0;
        std::int32_t group = 0;
        std::uint32_t block = kEmptySlot;
    };
    static constexpr std::uint32_t kEmptySlot = 0xffffffffu;
    static constexpr std::uint32_t kHasMore = 0x80000000u;
    static constexpr std::uint32_t kBlockMask = 0x7fffffffu;

    // Fibonacci hashing on the top bits; the group is folded in first so groups of one hash land apart.
    [[nodiscard]] std::size_t home(const BlockHashWithGroupId& key) const {
        const std::uint64_t x = (static_cast<std::uint64_t>(key.hash) ^
                                 (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.group)) << 32)) *
                                0x9e3779b97f4a7c15ULL;
        return static_cast<std::size_t>(x >> shift_);
    }

    [[nodiscard]] const Slot* find_slot(const BlockHashWithGroupId& key) const {
        const auto hash = static_cast<std::uint64_t>(key.hash);
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            const Slot& slot = slots_[i];
            if (slot.block == kEmptySlot) {
                return nullptr;
            }
            if (slot.hash == hash && slot.group == key.group) {
                return &slot;
            }
        }
    }

    [[nodiscard]] Slot* find_slot(const BlockHashWithGroupId& key) {
        return const_cast<Slot*>(std::as_const(*this).find_slot(key));
    }

    void rehash(std::size_t capacity);
    // Empties slot i and shifts later entries of its probe run back, so no tombstones are needed.
    void erase_slot(std::size_t i);

    std::vector<Slot> slots_;  // capacity a power of two
    std::size_t mask_ = 0;
    int shift_ = 64;
    std::int64_t num_keys_ = 0;
    std::unordered_map<BlockHashWithGroupId, std::vector<core::BlockId>, KeyHash> more_;  // later duplicates, in order
    std::int64_t num_entries_ = 0;
};

}  // namespace servesim::cache
