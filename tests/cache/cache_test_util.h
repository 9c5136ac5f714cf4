// Test helpers for tests/cache: a request as the engine would hold it (content runs, hashes, computed tokens) and
// the scheduler's two calls (lookup, then allocate) with check_invariants() after each operation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/cache/prefix_cache/block_hash.h"
#include "sim/core/content.h"
#include "sim/core/ids.h"

namespace servesim::cache::testing {

inline core::ContentId content(std::uint64_t c) { return core::ContentId{c}; }

// Block ids from their numbers, and back (a list or a queue compared with a literal).
inline std::vector<core::BlockId> block_ids(std::initializer_list<std::uint32_t> values) {
    std::vector<core::BlockId> out;
    for (const auto v : values) {
        out.push_back(core::BlockId{v});
    }
    return out;
}
inline std::vector<std::uint32_t> block_numbers(std::span<const core::BlockId> blocks) {
    std::vector<std::uint32_t> out;
    for (const auto b : blocks) {
        out.push_back(core::to_int(b));
    }
    return out;
}

// Block hashes from their values (a hand-made hash chain).
inline std::vector<core::BlockHash> hash_chain(std::initializer_list<std::uint64_t> values) {
    std::vector<core::BlockHash> out;
    for (const auto v : values) {
        out.push_back(core::BlockHash{v});
    }
    return out;
}

// A run of n tokens of content c.
inline core::ContentRun run(std::uint64_t c, std::int64_t n) { return core::ContentRun{core::ContentId{c}, n}; }

// Every full block's chained hash of `runs`, hashed from token 0 without a memo.
inline std::vector<core::BlockHash> hash_all(const core::TokenContent& runs, int block_size) {
    BlockHasher hasher(block_size);
    std::vector<core::BlockHash> hashes;
    hasher.extend(hashes, runs, core::total_tokens(runs));
    return hashes;
}

struct TestRequest {
    TestRequest(std::uint64_t id_value, core::TokenContent runs_in, int block_size_tokens)
        : id(core::RequestId{id_value}), runs(std::move(runs_in)), hasher(block_size_tokens) {
        hasher.extend(hashes, runs, num_tokens());
    }

    [[nodiscard]] std::int64_t num_tokens() const { return core::total_tokens(runs); }

    // Generated tokens: a new run (or the last run growing), hashed incrementally.
    void append_output(core::ContentId answer, std::int64_t n) {
        if (!runs.empty() && runs.back().content == answer) {
            runs.back().length_tokens += n;
        } else {
            runs.push_back(core::ContentRun{answer, n});
        }
        hasher.extend(hashes, runs, num_tokens());
    }

    [[nodiscard]] CacheRequest view() const {
        return CacheRequest{id, &hashes, num_tokens(), num_computed_tokens, preempted_before};
    }

    core::RequestId id;
    core::TokenContent runs;
    BlockHasher hasher;
    std::vector<core::BlockHash> hashes;
    std::int64_t num_computed_tokens = 0;
    bool preempted_before = false;
};

// The waiting-queue path of one scheduler step: lookup, then allocate n tokens after the hit.
// Returns the hit length in tokens, or −1 when the allocation failed.
inline std::int64_t admit(KvCacheManager& m, TestRequest& r, std::int64_t n_or_rest = -1,
                          bool full_sequence_must_fit = false) {
    const CacheHit hit = m.get_computed_blocks(r.view());
    m.check_invariants();
    const std::int64_t n = n_or_rest > 0 ? n_or_rest : r.num_tokens() - hit.num_tokens;
    const bool ok = m.allocate_slots(r.view(), n, hit, 0, full_sequence_must_fit);
    m.check_invariants();
    if (!ok) {
        return -1;
    }
    r.num_computed_tokens = hit.num_tokens + n;
    return hit.num_tokens;
}

// The running-queue path: n more tokens for a request that already holds blocks.
inline bool advance(KvCacheManager& m, TestRequest& r, std::int64_t n) {
    const bool ok = m.allocate_slots(r.view(), n, CacheHit{});
    m.check_invariants();
    if (ok) {
        r.num_computed_tokens += n;
    }
    return ok;
}

inline void release(KvCacheManager& m, TestRequest& r) {
    m.free(r.id);
    m.check_invariants();
    r.num_computed_tokens = 0;
}

inline std::vector<core::BlockId> ids(std::initializer_list<std::uint32_t> values) {
    std::vector<core::BlockId> out;
    for (const auto v : values) {
        out.push_back(core::BlockId{v});
    }
    return out;
}

inline std::int64_t count_real(const std::vector<core::BlockId>& blocks) {
    std::int64_t n = 0;
    for (const auto b : blocks) {
        n += b != core::BlockId{0} ? 1 : 0;
    }
    return n;
}

inline KvCacheConfig full_attention_config(std::int64_t num_gpu_blocks, int block_size_tokens,
                                           bool enable_prefix_caching = true) {
    KvCacheConfig c;
    c.num_gpu_blocks = num_gpu_blocks;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, block_size_tokens, 0, 1});
    c.enable_prefix_caching = enable_prefix_caching;
    return c;
}

}  // namespace servesim::cache::testing
