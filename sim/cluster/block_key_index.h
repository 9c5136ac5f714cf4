// The block-key indexes of the cluster's KV stores and routers: FlatKeyMap (block key → a value; the precise
// router's ReplicaBlockSets) and NodeKeyIndex (block key → node of LruBlockTiers, half-size slots). Both are
// open-addressing tables with linear probing and Fibonacci hashing, sized for the cluster benchmark's probe rates
// (bench/README.md, "The cluster benchmark" and "Cluster memory traffic"). No vLLM counterpart: vLLM's stores
// (Mooncake, LMCache) keep their own maps; only what they hold is modelled (kv_store.h).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace servesim::cluster {

// An open-addressing hash map from a block key (a chained block hash) to a value, `kEmpty` marking a free slot (never
// stored): linear probing, backward-shift deletion, load at most 1/2, Fibonacci hashing. The precise router index
// (ReplicaBlockSets) probes it once per prompt block, so a node-based map's cache miss per probe dominated a cluster
// run (bench/README.md, "The cluster benchmark"); the LRU tiers' index is NodeKeyIndex, with half-size slots.
template <typename V, V kEmpty>
class FlatKeyMap {
public:
    FlatKeyMap() { rehash(16); }
    // The value of `key`, or kEmpty.
    [[nodiscard]] V find(std::uint64_t key) const {
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.value == kEmpty || s.key == key) {
                return s.value;
            }
        }
    }
    // The stored value of `key` for an update in place (not to kEmpty), or nullptr.
    [[nodiscard]] V* find_value(std::uint64_t key) {
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.value == kEmpty) {
                return nullptr;
            }
            if (s.key == key) {
                return &s.value;
            }
        }
    }
    // Where find(key) starts probing, for __builtin_prefetch by a caller that knows its keys ahead (the prefetch sits
    // in the caller's body, as for cache::PrefixIndex::probe_address).
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return &slots_[home(key)]; }
    // `key` must be absent and `value` not kEmpty.
    void insert(std::uint64_t key, V value) {
        if (size_ >= max_size_) {  // load at most 1/2
            rehash(2 * slots_.size());
        }
        std::size_t i = home(key);
        while (slots_[i].value != kEmpty) {
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{key, value};
        ++size_;
    }
    // `key` must be present.
    void erase(std::uint64_t key) {
        // No free slot lies between a present key's home and its slot, so the first slot holding `key` is its own
        // (a free slot's key is not read as a match before it).
        std::size_t i = home(key);
        while (slots_[i].key != key) {
            i = (i + 1) & mask_;
        }
        // Backward shift: pull later entries of the probe run into the hole unless their home lies after it.
        for (std::size_t j = (i + 1) & mask_; slots_[j].value != kEmpty; j = (j + 1) & mask_) {
            if (((j - home(slots_[j].key)) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Slot{};
        --size_;
    }
    [[nodiscard]] std::size_t size() const { return size_; }

private:
    struct Slot {
        std::uint64_t key = 0;
        V value = kEmpty;
    };
    [[nodiscard]] std::size_t home(std::uint64_t key) const {
        return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
    }
    void rehash(std::size_t num_slots) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(num_slots, Slot{});
        mask_ = num_slots - 1;
        shift_ = 64 - std::countr_zero(num_slots);
        max_size_ = num_slots / 2;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.value != kEmpty) {
                insert(s.key, s.value);
            }
        }
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 64;
    std::size_t size_ = 0;
    std::size_t max_size_ = 0;  // half the slots: an insert at this size grows the table first
};

// The LRU tiers' index: block key → node, for keys whose node holds them (LruBlockTiers's key array). A slot is 8
// bytes, the node and a 32-bit tag of the key (the high half of its Fibonacci hash), not the 16 of a FlatKeyMap slot
// (an 8-byte key and a 4-byte value, padded): half the memory, so a probe run crosses a cache line half as often and
// the table is half the lines (the pool's 2^20 slots: 8 MiB instead of 16; bench/README.md, "Cluster memory
// traffic"). A tag that matches is confirmed against the node's key, which a walk that finds a key reads next anyway;
// a key that is absent is mostly told by its tag alone. The home slot is the tag's top bits (as FlatKeyMap's: the
// same hash, the same slots), so erase's backward shift and the growth need no key. Linear probing, load at most 1/2.
class NodeKeyIndex {
public:
    static constexpr std::uint32_t npos = 0xffffffffu;
    NodeKeyIndex() { rehash(16); }
    // The node holding `key` (npos: none); node_keys[n] is node n's key.
    [[nodiscard]] std::uint32_t find(std::uint64_t key, const std::uint64_t* node_keys) const {
        const std::uint32_t t = tag(key);
        for (std::size_t i = home(t);; i = (i + 1) & mask_) {
            const Slot s = slots_[i];
            if (s.node == npos || (s.tag == t && node_keys[s.node] == key)) {
                return s.node;
            }
        }
    }
    // Where find(key) starts probing, for __builtin_prefetch.
    [[nodiscard]] const void* probe_address(std::uint64_t key) const { return &slots_[home(tag(key))]; }
    // `key` must be absent and `node` not npos.
    void insert(std::uint64_t key, std::uint32_t node) {
        if (size_ >= max_size_) {  // load at most 1/2
            rehash(2 * slots_.size());
        }
        put(tag(key), node);
    }
    // erase(old_key, old_node) then insert(new_key, new_node), without insert's growth check (the size is back to
    // what it was).
    void replace(std::uint64_t old_key, std::uint32_t old_node, std::uint64_t new_key, std::uint32_t new_node) {
        erase(old_key, old_node);
        put(tag(new_key), new_node);
    }
    // `key` must be present, in `node` (the slot is found by its node: each node is in one slot at most).
    void erase(std::uint64_t key, std::uint32_t node) {
        std::size_t i = home(tag(key));
        while (slots_[i].node != node) {
            i = (i + 1) & mask_;
        }
        // Backward shift: pull later entries of the probe run into the hole unless their home lies after it.
        for (std::size_t j = (i + 1) & mask_; slots_[j].node != npos; j = (j + 1) & mask_) {
            if (((j - home(slots_[j].tag)) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Slot{};
        --size_;
    }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] std::size_t num_slots() const { return slots_.size(); }

private:
    struct Slot {
        std::uint32_t tag = 0;
        std::uint32_t node = npos;
    };
    static_assert(sizeof(Slot) == 8);
    [[nodiscard]] static std::uint32_t tag(std::uint64_t key) {
        return static_cast<std::uint32_t>((key * 0x9e3779b97f4a7c15ULL) >> 32);
    }
    [[nodiscard]] std::size_t home(std::uint32_t t) const { return static_cast<std::size_t>(t >> shift_); }
    void put(std::uint32_t t, std::uint32_t node) {
        std::size_t i = home(t);
        while (slots_[i].node != npos) {
            i = (i + 1) & mask_;
        }
        slots_[i] = Slot{t, node};
        ++size_;
    }
    // The table regrown to num_slots (a power of two, at most 2^32: the home is the tag's top bits).
    void rehash(std::size_t num_slots);

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 32;
    std::size_t size_ = 0;
    std::size_t max_size_ = 0;  // half the slots: an insert at this size grows the table first
};

}  // namespace servesim::cluster
