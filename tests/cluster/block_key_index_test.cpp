// Tests of sim/cluster/block_key_index.*: the flat key map and the node key index keep every key through inserts,
// erases and growth (against std::map over random operations), tell keys of one tag apart, and treat key 0 (a free
// slot's key) as any other.
#include "sim/cluster/block_key_index.h"

#include <map>
#include <random>
#include <vector>

#include "sim/cluster/lru_block_tiers.h"
#include "tests/catch.h"

namespace servesim::cluster {
namespace {

// The flat key map's empty value in these tests (a 32-bit index map, as the router keeps 64-bit masks).
constexpr std::uint32_t kNoValue = 0xffffffffu;

TEST_CASE("KV store: the flat key map keeps every key through inserts, erases and growth", "[cluster][kv_store]") {
    // 1,000 keys inserted (the table grows from 16 slots to 4,096), every third erased, then all looked up: the
    // erased ones are gone, the others keep their values; erasing moves later keys of a probe run back.
    FlatKeyMap<std::uint32_t, kNoValue> m;
    for (std::uint32_t i = 0; i < 1000; ++i) {
        m.insert(std::uint64_t{i} * 0x10001ULL, i);
    }
    for (std::uint32_t i = 0; i < 1000; i += 3) {
        m.erase(std::uint64_t{i} * 0x10001ULL);
    }
    std::size_t kept = 0;
    for (std::uint32_t i = 0; i < 1000; ++i) {
        const std::uint32_t v = m.find(std::uint64_t{i} * 0x10001ULL);
        if (i % 3 == 0) {
            CHECK(v == kNoValue);
        } else {
            CHECK(v == i);
            ++kept;
        }
    }
    CHECK(kept == 666);
    CHECK(m.size() == 666);
}

TEST_CASE("KV store: the node key index tells keys of one tag apart by their node's key", "[cluster][kv_store]") {
    // A slot keeps a 32-bit tag, the high half of key · C (C = 0x9e3779b97f4a7c15, mod 2^64), and its node. With
    // C' = C^-1 mod 2^64, key 0 (0 · C = 0) and keys C' and 2C' (products 1 and 2) all have tag 0, so home slot 0 of
    // the 16-slot table. By hand: 0 in node 0 and C' in node 1 fill slots 0 and 1. find(C') meets tag 0 in slot 0,
    // whose node's key is 0, and goes on to slot 1: node 1. find(2C') meets two tags 0 and stops at empty slot 2:
    // npos. Erasing 0 (node 0) shifts C' back to slot 0 (its home); replace(C', node 1, 2C', node 2) leaves 2C' alone.
    constexpr std::uint64_t C = 0x9e3779b97f4a7c15ULL;
    std::uint64_t inv = C;  // Newton's iteration for the inverse of an odd number mod 2^64: 6 rounds double the bits
    for (int i = 0; i < 6; ++i) {
        inv *= 2 - C * inv;
    }
    REQUIRE(inv * C == 1);
    const std::vector<std::uint64_t> node_keys = {0, inv, 2 * inv};
    NodeKeyIndex m;
    CHECK(m.num_slots() == 16);
    CHECK(m.probe_address(0) == m.probe_address(inv));
    CHECK(m.probe_address(inv) == m.probe_address(2 * inv));
    m.insert(0, 0);
    m.insert(inv, 1);
    CHECK(m.find(0, node_keys.data()) == 0);
    CHECK(m.find(inv, node_keys.data()) == 1);
    CHECK(m.find(2 * inv, node_keys.data()) == NodeKeyIndex::npos);
    m.erase(0, 0);
    CHECK(m.size() == 1);
    CHECK(m.find(0, node_keys.data()) == NodeKeyIndex::npos);
    CHECK(m.find(inv, node_keys.data()) == 1);
    m.replace(inv, 1, 2 * inv, 2);
    CHECK(m.size() == 1);
    CHECK(m.find(inv, node_keys.data()) == NodeKeyIndex::npos);
    CHECK(m.find(2 * inv, node_keys.data()) == 2);
}

TEST_CASE("KV store: the node key index keeps every key through inserts, erases and growth", "[cluster][kv_store]") {
    // 20,000 random operations on keys from a small range (so tags and homes collide often) against std::map: a key's
    // node is the next free number; erase and replace name the node the map holds. Growth from 16 slots to 2^k with the
    // load at most 1/2.
    NodeKeyIndex m;
    std::map<std::uint64_t, std::uint32_t> ref;
    std::vector<std::uint64_t> node_keys;
    std::mt19937_64 rng(7);
    for (int op = 0; op < 20000; ++op) {
        const std::uint64_t key = rng() % 3000;
        const auto it = ref.find(key);
        if (it == ref.end()) {
            const auto node = static_cast<std::uint32_t>(node_keys.size());
            node_keys.push_back(key);
            if (!ref.empty() && rng() % 2 == 0) {  // replace a present key
                const auto victim = ref.begin();
                m.replace(victim->first, victim->second, key, node);
                ref.erase(victim);
            } else {
                m.insert(key, node);
            }
            ref[key] = node;
        } else if (rng() % 2 == 0) {
            m.erase(key, it->second);
            ref.erase(it);
        }
        CHECK(m.size() == ref.size());
        CHECK(2 * m.size() <= m.num_slots());
        const std::uint64_t probe = rng() % 3000;
        const auto p = ref.find(probe);
        CHECK(m.find(probe, node_keys.data()) == (p == ref.end() ? NodeKeyIndex::npos : p->second));
    }
    for (const auto& [key, node] : ref) {
        CHECK(m.find(key, node_keys.data()) == node);
    }
}

TEST_CASE("KV store: the flat key map erases and inserts key 0, a free slot's key too", "[cluster][kv_store]") {
    // Keys 0 (a free slot's key too), 1, 2 with values 10, 11, 12. Erase 0 and insert 5 → 15: 0 is gone, 5 maps to
    // 15, the size stays 3; erase 5 and insert 0 → 20 puts 0 back. Nine keys into the first 16 slots: the ninth insert grows the
    // table (load at most 1/2), and all nine stay.
    FlatKeyMap<std::uint32_t, kNoValue> m;
    m.insert(0, 10);
    m.insert(1, 11);
    m.insert(2, 12);
    m.erase(0);
    m.insert(5, 15);
    CHECK(m.find(0) == kNoValue);
    CHECK(m.find(5) == 15);
    CHECK(m.find(1) == 11);
    CHECK(m.find(2) == 12);
    CHECK(m.size() == 3);
    m.erase(5);
    m.insert(0, 20);
    CHECK(m.find(5) == kNoValue);
    CHECK(m.find(0) == 20);
    m.erase(0);
    CHECK(m.find(0) == kNoValue);
    CHECK(m.size() == 2);
    for (std::uint32_t k = 3; k < 10; ++k) {
        m.insert(k, 10 + k);
    }
    CHECK(m.size() == 9);
    for (std::uint32_t k = 1; k < 10; ++k) {
        CHECK(m.find(k) == 10 + k);
    }
}

}  // namespace
}  // namespace servesim::cluster
