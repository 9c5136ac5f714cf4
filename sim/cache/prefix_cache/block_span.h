// Comparing lists of block ids: how far two lists agree, the question the prefix memo (hit_chain_memo.h) and the
// block pool's segments (block_segments.h) ask of a request's block list. No vLLM counterpart: bookkeeping only.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "sim/core/ids.h"

namespace servesim::cache {

// How many leading block ids `a` and `b` have in common (at most the shorter's length). A freed request's walk along
// the memo asks this per segment, and a segment usually matches for ~160 blocks (a tenant's system prompt) and then
// differs (another dialogue's turns): 16 ids are compared at a time (a fixed-size memcmp, which GCC compiles to a
// few loads and compares), then two at a time within the first differing group, the lowest set bit of the two
// words' difference naming the first differing id (x86-64 and the other targets built are little-endian).
[[nodiscard]] inline std::size_t leading_blocks_in_common(std::span<const core::BlockId> a,
                                                          std::span<const core::BlockId> b) {
    static_assert(sizeof(core::BlockId) == 4 && std::endian::native == std::endian::little);
    const std::size_t n = std::min(a.size(), b.size());
    constexpr std::size_t kGroup = 16;
    std::size_t i = 0;
    while (i + kGroup <= n && std::memcmp(a.data() + i, b.data() + i, kGroup * sizeof(core::BlockId)) == 0) {
        i += kGroup;
    }
    for (; i + 2 <= n; i += 2) {
        std::uint64_t x = 0;
        std::uint64_t y = 0;
        std::memcpy(&x, a.data() + i, sizeof x);
        std::memcpy(&y, b.data() + i, sizeof y);
        if (x != y) {
            return i + (std::countr_zero(x ^ y) >= 32 ? 1 : 0);
        }
    }
    if (i < n && a[i] == b[i]) {
        ++i;
    }
    return i;
}

}  // namespace servesim::cache
