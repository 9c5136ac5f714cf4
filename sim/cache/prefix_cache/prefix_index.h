// PrefixIndex: the prefix cache's lookup table, (block hash, group index) → cached blocks (vLLM block_pool.py
// BlockHashToBlockMap). Owns only the map; block states and eviction are the BlockPool's (block_pool.h).
// No dedupe: several blocks may sit under one key (identical blocks computed concurrently); a lookup returns the
// earliest inserted that is still there, as vLLM's insertion-ordered dict does.
// Layout: an open-addressing table (linear probing, backward-shift deletion, load ≤ 1/2) of 8-byte slots: a 32-bit
// tag (the top half of the key's mix, whose top bits are also the home slot) and the first block. The full key is
// not stored: the block pool keeps it with the block (a block has a hash iff the index lists it under that key), so
// a tag match is confirmed by the caller's `key_of(block)`, a read of the pool entry it reads next anyway. Half the
// 16-byte slots of a key held inline: the table of a 54k-block pool is 1 MiB instead of 2, next to the pool's
// entries in a core's L2, where the evictions' pops and the new blocks' inserts missed. Later duplicates, rare, wait
// in a side map in insertion order. Never iterated.
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

    // Every operation that compares keys takes `key_of`: block id (uint32) → the BlockHashWithGroupId that block is
    // cached under (the block pool's entry). It is asked only for blocks the index lists.
    template <typename KeyOf>
    [[nodiscard]] std::optional<core::BlockId> get_one_block(const BlockHashWithGroupId& key, const KeyOf& key_of) const {
        const Slot* slot = find_slot(key, key_of);
        if (slot == nullptr) {
            return std::nullopt;
        }
        return core::BlockId{slot->block & kBlockMask};
    }

    // Where get_one_block(key) starts probing, for __builtin_prefetch: a prefix lookup knows all its keys up front,
    // so it can overlap the table's cache misses instead of taking them one after another. (The prefetch must sit
    // in the caller's body: GCC deems a function holding only a prefetch pure and deletes calls to it.)
    [[nodiscard]] const void* probe_address(const BlockHashWithGroupId& key) const {
        return &slots_[static_cast<std::size_t>(mixed(key) >> shift_)];
    }

    template <typename KeyOf>
    [[nodiscard]] bool contains(const BlockHashWithGroupId& key, core::BlockId block, const KeyOf& key_of) const {
        const Slot* slot = find_slot(key, key_of);
        if (slot == nullptr) {
            return false;
        }
        return (slot->block & kBlockMask) == core::to_int(block) ||
               ((slot->block & kHasMore) != 0 && more_contains(key, block));
    }
    // `block` must already be cached under `key` in the pool (key_of(block) == key).
    // One probe: a search for an absent key ends at the first empty slot of its run, which is where insert_new
    // would put it, so when no growth is due that slot takes the new key (the same table as a search followed by
    // insert_new).
    template <typename KeyOf>
    void insert(const BlockHashWithGroupId& key, core::BlockId block, const KeyOf& key_of) {
        if (static_cast<std::size_t>(num_keys_ + 1) * 2 > slots_.size()) {
            if (Slot* slot = find_slot(key, key_of)) {
                add_duplicate(*slot, key, block);
                return;
            }
            insert_new(key, block);
            return;
        }
        const ProbeEnd end = probe(key, key_of);
        Slot& slot = slots_[end.index];
        if (slot.block == kEmptySlot) {
            occupy(slot, end.tag, block);
        } else {
            add_duplicate(slot, key, block);
        }
    }
    // Removes `block` from under `key`; it must be there. The usual case, the key's only block (no duplicates
    // waiting: the kHasMore bit clear), empties its slot here; the others go through pop_from.
    template <typename KeyOf>
    void pop(const BlockHashWithGroupId& key, core::BlockId block, const KeyOf& key_of) {
        Slot* slot = find_slot(key, key_of);
        if (slot != nullptr && slot->block == core::to_int(block)) {
            erase_slot(static_cast<std::size_t>(slot - slots_.data()));
            --num_entries_;
            return;
        }
        pop_from(slot, key, block);
    }
    // Number of (key, block) entries.
    [[nodiscard]] std::int64_t num_entries() const { return num_entries_; }
    // Whether some key holds more than one block (then a lookup's answer is not simply "the block with that hash").
    [[nodiscard]] bool has_duplicates() const { return num_entries_ != num_keys_; }
    // Sizes the table for up to num_blocks keys, so that caching never rehashes.
    void reserve(std::int64_t num_blocks);
    // Bytes of the slot table reserve(num_blocks) allocates (the memory projection, tools/app/memory_projection.h).
    [[nodiscard]] static std::int64_t reserved_bytes(std::int64_t num_blocks);

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
        std::uint32_t tag = 0;
        std::uint32_t block = kEmptySlot;
    };
    static constexpr std::uint32_t kEmptySlot = 0xffffffffu;
    static constexpr std::uint32_t kHasMore = 0x80000000u;
    static constexpr std::uint32_t kBlockMask = 0x7fffffffu;

    // Fibonacci hashing: the home slot is the top log2(capacity) bits of the mix, the tag its top 32 bits, so the
    // home slot of a stored entry is its tag's top bits (rehash and erase_slot need no key). The group is folded in
    // first so groups of one hash land apart.
    [[nodiscard]] static std::uint64_t mixed(const BlockHashWithGroupId& key) {
        return (static_cast<std::uint64_t>(key.hash) ^
                (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.group)) << 32)) *
               0x9e3779b97f4a7c15ULL;
    }
    [[nodiscard]] std::size_t home_of_tag(std::uint32_t tag) const {
        return static_cast<std::size_t>(tag >> (shift_ - 32));
    }

    // Where a probe for `key` stops: the slot holding it, or the first empty slot of its run (where it would go).
    struct ProbeEnd {
        std::size_t index;
        std::uint32_t tag;  // the key's
    };
    template <typename KeyOf>
    [[nodiscard]] ProbeEnd probe(const BlockHashWithGroupId& key, const KeyOf& key_of) const {
        const std::uint64_t x = mixed(key);
        const auto tag = static_cast<std::uint32_t>(x >> 32);
        for (auto i = static_cast<std::size_t>(x >> shift_);; i = (i + 1) & mask_) {
            const Slot& slot = slots_[i];
            if (slot.block == kEmptySlot || (slot.tag == tag && key_of(slot.block & kBlockMask) == key)) {
                return ProbeEnd{i, tag};
            }
        }
    }
    template <typename KeyOf>
    [[nodiscard]] const Slot* find_slot(const BlockHashWithGroupId& key, const KeyOf& key_of) const {
        const Slot& slot = slots_[probe(key, key_of).index];
        return slot.block == kEmptySlot ? nullptr : &slot;
    }
    template <typename KeyOf>
    [[nodiscard]] Slot* find_slot(const BlockHashWithGroupId& key, const KeyOf& key_of) {
        return const_cast<Slot*>(std::as_const(*this).find_slot(key, key_of));
    }

    [[nodiscard]] bool more_contains(const BlockHashWithGroupId& key, core::BlockId block) const;
    void add_duplicate(Slot& slot, const BlockHashWithGroupId& key, core::BlockId block);
    void insert_new(const BlockHashWithGroupId& key, core::BlockId block);
    // An empty slot takes a new key (its tag) with its one block.
    void occupy(Slot& slot, std::uint32_t tag, core::BlockId block);
    void pop_from(Slot* slot, const BlockHashWithGroupId& key, core::BlockId block);
    void rehash(std::size_t capacity);
    // Empties slot i and shifts later entries of its probe run back, so no tombstones are needed.
    void erase_slot(std::size_t i);

    std::vector<Slot> slots_;  // capacity a power of two, at most 2^32 (the tag holds the home slot)
    std::size_t mask_ = 0;
    int shift_ = 64;
    std::int64_t num_keys_ = 0;
    std::unordered_map<BlockHashWithGroupId, std::vector<core::BlockId>, KeyHash> more_;  // later duplicates, in order
    std::int64_t num_entries_ = 0;
};

}  // namespace servesim::cache
