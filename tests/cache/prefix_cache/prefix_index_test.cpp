// Tests of sim/cache/prefix_cache/prefix_index.*: (hash, group) → blocks with duplicates in insertion order (vLLM
// BlockHashToBlockMap), on the 8-byte slots that keep only a tag and the block, the full key read back through key_of
// (the block pool's entries in the engine; a plain vector here).
#include "sim/cache/prefix_cache/prefix_index.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "tests/catch.h"

namespace servesim::cache {
namespace {

// The pool's side: the key each block is cached under.
struct Keys {
    std::vector<BlockHashWithGroupId> of_block;
    BlockHashWithGroupId operator()(std::uint32_t block) const { return of_block[block]; }
};

std::optional<std::uint32_t> lookup(const PrefixIndex& index, const Keys& keys, BlockHashWithGroupId key) {
    const auto block = index.get_one_block(key, keys);
    return block ? std::optional<std::uint32_t>{core::to_int(*block)} : std::nullopt;
}

// The multiplicative inverse of Fibonacci hashing's odd constant modulo 2^64 (Newton's iteration: each step doubles
// the correct low bits, 5 → 10 → … → 64 after five steps from x = a, which is its own inverse modulo 8).
std::uint64_t inverse_of_golden() {
    const std::uint64_t a = 0x9e3779b97f4a7c15ULL;
    std::uint64_t x = a;
    for (int i = 0; i < 5; ++i) {
        x *= 2 - a * x;
    }
    return x;
}

TEST_CASE("PrefixIndex: keys whose tags collide are told apart by the pool's key", "[cache]") {
    // h and h + inv(φ) mix to h·φ and h·φ + 1: the same top 32 bits (tag and home slot) unless the low half is all
    // ones, which it is not for h = 12345. Both land in one probe run; only key_of tells them apart.
    const std::uint64_t inv = inverse_of_golden();
    REQUIRE(inv * 0x9e3779b97f4a7c15ULL == 1);
    const BlockHashWithGroupId k1{core::BlockHash{12345}, 0};
    const BlockHashWithGroupId k2{core::BlockHash{12345 + inv}, 0};
    REQUIRE(((12345 * 0x9e3779b97f4a7c15ULL) >> 32) == (((12345 + inv) * 0x9e3779b97f4a7c15ULL) >> 32));
    Keys keys;
    keys.of_block = {k1, k2};
    PrefixIndex index;
    index.reserve(4);
    index.insert(k1, core::BlockId{0}, keys);
    index.insert(k2, core::BlockId{1}, keys);
    CHECK(index.num_entries() == 2);
    CHECK_FALSE(index.has_duplicates());  // two keys, not one key with two blocks
    CHECK(lookup(index, keys, k1) == 0u);
    CHECK(lookup(index, keys, k2) == 1u);
    CHECK(index.contains(k2, core::BlockId{1}, keys));
    CHECK_FALSE(index.contains(k2, core::BlockId{0}, keys));
    // Popping the first leaves the second findable (backward shift moves it to the home slot).
    index.pop(k1, core::BlockId{0}, keys);
    CHECK(lookup(index, keys, k1) == std::nullopt);
    CHECK(lookup(index, keys, k2) == 1u);
    CHECK(index.num_entries() == 1);
}

TEST_CASE("PrefixIndex: duplicates answer in insertion order; growth and deletion keep every key findable", "[cache]") {
    // Blocks 0..199 under keys 1000 + b in group b % 3; then block 200 and 201 duplicate block 7's key.
    // From 16 slots (the default) the table doubles as it fills past half: 200 keys need 512 slots.
    Keys keys;
    for (std::uint32_t b = 0; b < 200; ++b) {
        keys.of_block.push_back(BlockHashWithGroupId{core::BlockHash{1000 + b}, static_cast<std::int32_t>(b % 3)});
    }
    keys.of_block.push_back(keys.of_block[7]);
    keys.of_block.push_back(keys.of_block[7]);
    PrefixIndex index;
    for (std::uint32_t b = 0; b < 202; ++b) {
        index.insert(keys.of_block[b], core::BlockId{b}, keys);
    }
    CHECK(index.num_entries() == 202);
    CHECK(index.has_duplicates());
    for (std::uint32_t b = 0; b < 200; ++b) {
        CHECK(lookup(index, keys, keys.of_block[b]) == b);
    }
    // Key 1007/group 1: 7 first; popping 7 hands the key to 200 (the earliest remaining), then 201.
    index.pop(keys.of_block[7], core::BlockId{7}, keys);
    CHECK(lookup(index, keys, keys.of_block[7]) == 200u);
    index.pop(keys.of_block[7], core::BlockId{201}, keys);  // a later duplicate leaves from the middle
    CHECK(lookup(index, keys, keys.of_block[7]) == 200u);
    CHECK_FALSE(index.has_duplicates());
    // Removing every even block leaves exactly the odd ones (and 200 under 7's key).
    for (std::uint32_t b = 0; b < 200; b += 2) {
        index.pop(keys.of_block[b], core::BlockId{b}, keys);
    }
    for (std::uint32_t b = 1; b < 200; b += 2) {
        CHECK(lookup(index, keys, keys.of_block[b]) == (b == 7 ? 200u : b));
    }
    for (std::uint32_t b = 0; b < 200; b += 2) {
        CHECK(lookup(index, keys, keys.of_block[b]) == std::nullopt);
    }
    CHECK(index.num_entries() == 100);
    // Same hash, other group: another key.
    CHECK(lookup(index, keys, BlockHashWithGroupId{core::BlockHash{1001}, 2}) == std::nullopt);
}

TEST_CASE("PrefixIndex: one-probe insert finds a duplicate past a colliding key; pops of lone keys and duplicates",
          "[cache]") {
    // Reserved for 8 keys, so no insert below grows the table and each takes the one-probe path. k1 and k2 share a
    // tag and home slot (see above), so k2 sits after k1 in one run; a second block under k1 must join k1's slot as a
    // duplicate, not take the empty slot after k2. Entries: k1 → [0, 2], k2 → [1]: 3 entries over 2 keys.
    // pop(k1, 0): k1 has a duplicate waiting, so block 2 moves up (pop_from). pop(k2, 1): k2's lone block, its slot
    // emptied at once. pop(k1, 2): likewise; the index is empty.
    const std::uint64_t inv = inverse_of_golden();
    const BlockHashWithGroupId k1{core::BlockHash{12345}, 0};
    const BlockHashWithGroupId k2{core::BlockHash{12345 + inv}, 0};
    Keys keys;
    keys.of_block = {k1, k2, k1};
    PrefixIndex index;
    index.reserve(8);
    index.insert(k1, core::BlockId{0}, keys);
    index.insert(k2, core::BlockId{1}, keys);
    index.insert(k1, core::BlockId{2}, keys);
    CHECK(index.num_entries() == 3);
    CHECK(index.has_duplicates());
    CHECK(lookup(index, keys, k1) == 0u);
    CHECK(lookup(index, keys, k2) == 1u);
    CHECK(index.contains(k1, core::BlockId{2}, keys));
    index.pop(k1, core::BlockId{0}, keys);
    CHECK(lookup(index, keys, k1) == 2u);
    CHECK_FALSE(index.has_duplicates());
    index.pop(k2, core::BlockId{1}, keys);
    CHECK(lookup(index, keys, k2) == std::nullopt);
    CHECK(lookup(index, keys, k1) == 2u);
    index.pop(k1, core::BlockId{2}, keys);
    CHECK(lookup(index, keys, k1) == std::nullopt);
    CHECK(index.num_entries() == 0);
}

}  // namespace
}  // namespace servesim::cache
