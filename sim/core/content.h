// Prompt content without tokens (docs/ARCHITECTURE.md, "Prompt content as runs"): a request's token sequence is a list
// of runs (content id, length). Token j of a run with content c is the token "(c, j)": two sequences share a prefix
// exactly where their runs agree. A tenant's system prompt is one run, each user message one run, each generated answer
// one run whose id is derived from the request that produced it, so a dialogue's next prompt contains it.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/ids.h"

namespace servesim::core {

struct ContentRun {
    ContentId content{};
    std::int64_t length_tokens = 0;
    bool operator==(const ContentRun&) const = default;
};

using TokenContent = std::vector<ContentRun>;

[[nodiscard]] inline std::int64_t total_tokens(const TokenContent& runs) {
    std::int64_t n = 0;
    for (const auto& r : runs) {
        n += r.length_tokens;
    }
    return n;
}

// Stable 64-bit mixing (splitmix64 finaliser), used for content ids and block hashes: a fixed, documented function,
// never std::hash, so outputs are identical on every platform.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// hash_combine(seed, v) with mixed = mix64(v) already computed, for values that repeat across many combines.
[[nodiscard]] constexpr std::uint64_t hash_combine_mixed(std::uint64_t seed, std::uint64_t mixed) {
    return mix64(seed ^ (mixed + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

[[nodiscard]] constexpr std::uint64_t hash_combine(std::uint64_t seed, std::uint64_t value) {
    return hash_combine_mixed(seed, mix64(value));
}

}  // namespace servesim::core
