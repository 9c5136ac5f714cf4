// LruBlockTiers' arena, walks and inserts; see lru_block_tiers.h.
#include "sim/cluster/lru_block_tiers.h"

#include <algorithm>

#include "common/error.h"

namespace servesim::cluster {

LruBlockTiers::LruBlockTiers(std::size_t num_tiers, std::int64_t capacity_blocks_each)
    : capacity_(capacity_blocks_each), lists_(num_tiers) {
    SERVESIM_CHECK(num_tiers <= 0xffff, "{} tiers under one LRU index", num_tiers);
    // Each tier's region: twice its capacity, below kFree over all the regions.
    const double wanted = 2.0 * static_cast<double>(std::max<std::int64_t>(capacity_, 0));
    std::uint64_t limit =
        wanted >= static_cast<double>(kFree) ? std::uint64_t{kFree} : static_cast<std::uint64_t>(wanted);
    if (num_tiers > 1) {
        region_shift_ = std::max(1, static_cast<int>(std::bit_width(limit - (limit > 0 ? 1 : 0))));
        while ((static_cast<std::uint64_t>(num_tiers) << region_shift_) > kFree) {
            --region_shift_;
        }
        limit = std::min(limit, std::uint64_t{1} << region_shift_);
        // At most capacity_ nodes of a tier are live, so a region above that always has a free node for the sweep.
        SERVESIM_CHECK(capacity_ <= 0 || limit > static_cast<std::uint64_t>(capacity_),
                       "{} tiers of {} blocks under one LRU index", num_tiers, capacity_);
    }
    for (std::size_t t = 0; t < num_tiers; ++t) {
        List& l = lists_[t];
        l.begin = l.end = l.sweep = static_cast<std::uint32_t>(num_tiers > 1 ? t << region_shift_ : 0);
        l.limit = static_cast<std::uint32_t>(l.begin + limit);
    }
}

inline std::uint32_t LruBlockTiers::allocate(List& l, const Cursor* at) {
    if (at != nullptr) {
        // In the region's used part (unsigned: a node below begin wraps high).
        const std::uint32_t after = at->node + 1;
        if (after - l.begin < l.end - l.begin && links_[after].prev == kFree) {
            return after;
        }
    }
    if (l.end < l.limit) {
        const std::uint32_t n = l.end++;
        if (n >= keys_.size()) {
            grow_nodes(n);
        }
        return n;
    }
    return sweep(l);
}

void LruBlockTiers::grow_nodes(std::uint32_t n) {
    // Free nodes up to n at least (other regions' unused ends), and up to the storage already reserved: growing a
    // node at a time cost a call per insert while the regions fill. Nodes past n are free and unused (no region's
    // `end` reaches them), so nothing reads them but as free.
    // The last region's limit bounds every node (a region exists: n belongs to one).
    const std::size_t reserved =
        std::min<std::size_t>(std::min(keys_.capacity(), links_.capacity()), lists_.back().limit);
    const std::size_t size = std::max(static_cast<std::size_t>(n) + 1, reserved);
    keys_.resize(size, kFreeKey);
    links_.resize(size);
}

std::uint32_t LruBlockTiers::sweep(List& l) {
    // At the limit at most half the region's nodes are live, so the sweep finds a free one.
    const Link* const links = links_.data();
    std::uint32_t s = l.sweep;
    while (links[s].prev != kFree) {
        s = s + 1 == l.end ? l.begin : s + 1;
    }
    l.sweep = s + 1 == l.end ? l.begin : s + 1;
    return s;
}

void LruBlockTiers::unlink(std::uint32_t n) {
    List& l = lists_[tier_at(n)];
    Link& x = links_[n];
    (x.prev == kNil ? l.head : links_[x.prev].next) = x.next;
    (x.next == kNil ? l.tail : links_[x.next].prev) = x.prev;
    x.prev = x.next = kNil;
    --l.size;
}

void LruBlockTiers::append(std::uint32_t n) {
    List& l = lists_[tier_at(n)];
    Link& x = links_[n];
    x.prev = l.tail;
    x.next = kNil;
    (l.tail == kNil ? l.head : links_[l.tail].next) = n;
    l.tail = n;
    ++l.size;
}

std::size_t LruBlockTiers::touch_find(std::uint64_t key, Cursor& at) {
    const std::uint32_t n = find_node(key, at);
    if (n == kNil) {
        return npos;
    }
    at.node = n;
    const std::size_t tier = tier_at(n);
    if (lists_[tier].tail != n) {
        unlink(n);
        append(n);
        ++lists_[tier].shifts;
    }
    return tier;
}

std::size_t LruBlockTiers::touch_find_general(std::uint64_t key, TouchWalk& walk) {
    const std::uint32_t n = find_node(key, walk.at);
    if (n == kNil) {
        return npos;
    }
    if (walk.run_first == kNil || links_[walk.at.node].next != n) {  // not next in the list: a new run
        end_touches(walk);
        walk.run_first = n;
        walk.run_len = 0;
    }
    walk.at.node = n;
    ++walk.run_len;
    return tier_at(n);
}

void LruBlockTiers::end_touches(TouchWalk& walk) {
    if (walk.run_first == kNil) {
        return;
    }
    const std::uint32_t s = walk.run_first;
    const std::uint32_t e = walk.at.node;
    walk.run_first = kNil;
    List& l = lists_[tier_at(s)];
    if (l.tail == e) {  // the run ends the list already
        return;
    }
    l.shifts += walk.run_len;
    Link& first = links_[s];
    Link& last = links_[e];
    // Cut [s, e] out (e is not the tail, so a node follows it), then hang it after the tail (not in the run).
    (first.prev == kNil ? l.head : links_[first.prev].next) = last.next;
    links_[last.next].prev = first.prev;
    links_[l.tail].next = s;
    first.prev = l.tail;
    last.next = kNil;
    l.tail = e;
}

bool LruBlockTiers::insert(std::size_t tier, std::uint64_t key, std::uint64_t* evicted, Cursor* at) {
    if (capacity_ <= 0) {
        return false;
    }
    if (const std::uint32_t held = at != nullptr ? find_node(key, *at) : index_.find(key, keys_.data());
        held != kNil) {
        if (at != nullptr) {
            at->node = held;
        }
        return false;
    }
    return put_absent(lists_[tier], key, evicted, at);
}

bool LruBlockTiers::insert_absent(std::size_t tier, std::uint64_t key, std::uint64_t* evicted, Cursor* at) {
    if (capacity_ <= 0) {
        return false;
    }
    return put_absent(lists_[tier], key, evicted, at);
}

inline bool LruBlockTiers::put_absent(List& l, std::uint64_t key, std::uint64_t* evicted, Cursor* at) {
    if (l.size >= capacity_) {  // the least recent block of this tier goes; its node is freed
        // unlink(head): a head has no previous node, and its list is `l`.
        std::uint64_t* const node_keys = keys_.data();
        Link* const links = links_.data();
        const std::uint32_t v = l.head;
        Link& x = links[v];
        const std::uint64_t victim = node_keys[v];
        if (evicted != nullptr) {
            *evicted = victim;
        }
        const std::uint32_t next = x.next;
        l.head = next;
        (next == kNil ? l.tail : links[next].prev) = kNil;
        x.prev = kFree;
        x.next = kNil;
        node_keys[v] = kFreeKey;
        --l.size;
        ++l.shifts;
        if (next != kNil) {  // the next eviction of this tier starts there: its index slot, and the node after it
            __builtin_prefetch(index_.probe_address(node_keys[next]));
            if (const std::uint32_t after = links[next].next; after != kNil) {
                __builtin_prefetch(&links[after]);
                __builtin_prefetch(&node_keys[after]);
            }
        }
        // live_ is unchanged (one out, one in), so it stays below kFree as the last insert that raised it checked.
        const std::uint32_t n = allocate(l, at);
        index_.replace(victim, v, key, n);
        link_new(l, n, key, at);
        return true;
    }
    SERVESIM_CHECK(live_ + 1 < kFree, "more than 2^32 - 3 blocks in an LRU index");
    const std::uint32_t n = allocate(l, at);
    ++live_;
    index_.insert(key, n);
    link_new(l, n, key, at);
    return false;
}

inline void LruBlockTiers::link_new(List& l, std::uint32_t n, std::uint64_t key, Cursor* at) {
    // append(n) for a node of `l`, holding `key`.
    Link* const links = links_.data();
    Link& x = links[n];
    keys_[n] = key;
    x.prev = l.tail;
    x.next = kNil;
    (l.tail == kNil ? l.head : links[l.tail].next) = n;
    l.tail = n;
    ++l.size;
    if (at != nullptr) {
        at->node = n;
    }
}

}  // namespace servesim::cluster
