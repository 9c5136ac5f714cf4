// ChunkedLocalAttentionManager (sim/cache/managers/chunked_local_attention_manager.*), vLLM's
// ChunkedLocalAttentionManager: blocks left of the current attention chunk are freed while a request runs and count as
// computed (null blocks) in a prefix-cache hit, which then needs only the cached blocks of the last chunk. As in
// Llama 4, the chunked group sits beside a full-attention group (alone, every block left of the chunk would count as a
// hit).
#include "sim/cache/managers/kv_cache_manager.h"
#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::admit;
using testing::advance;
using testing::content;
using testing::TestRequest;

// Group 0: full attention; group 1: chunked local attention, chunk 32; B = 16 for both.
KvCacheConfig chunked_config() {
    KvCacheConfig c;
    c.num_gpu_blocks = 40;
    c.groups.push_back(KvCacheGroup{KvGroupKind::kFullAttention, 16, 0, 1});
    KvCacheGroup g;
    g.kind = KvGroupKind::kChunkedLocal;
    g.block_size_tokens = 16;
    g.attention_chunk_tokens = 32;
    g.num_layers = 1;
    c.groups.push_back(g);
    return c;
}

TEST_CASE("Chunked local attention frees the blocks left of the current chunk", "[cache][chunked]") {
    // Chunk 32, B = 16; 128 tokens in two steps of 64. At the second allocation 64 tokens are computed: skipped =
    // floor(64 / 32) · 32 = 64 tokens → blocks 0–3 become null blocks; blocks 4–7 are allocated for 64..127.
    KvCacheManager m(chunked_config());
    TestRequest r(0, {{content(1), 128}}, 16);
    REQUIRE(admit(m, r, 64) == 0);
    REQUIRE(advance(m, r, 64));
    const auto blocks = m.get_block_ids(r.id)[1];
    REQUIRE(blocks.size() == 8);
    for (int i = 0; i < 4; ++i) {
        CHECK(blocks[static_cast<std::size_t>(i)] == core::BlockId{0});
    }
    CHECK(testing::count_real(blocks) == 4);
    // Full attention keeps all 8.
    CHECK(testing::count_real(m.get_block_ids(r.id)[0]) == 8);
}

TEST_CASE("A chunked-local hit is null blocks up to the chunk start, then the cached blocks of the chunk",
          "[cache][chunked]") {
    KvCacheManager m(chunked_config());
    TestRequest r(0, {{content(1), 128}}, 16);
    REQUIRE(admit(m, r, 64) == 0);
    REQUIRE(advance(m, r, 64));
    // Same prompt again: the hit may cover at most 127 tokens → 7 blocks. Full attention has blocks 0–6 cached
    // (112 tokens). Chunked, max 112: chunk start floor(112 / 32) · 32 = 96 → 6 null blocks, then block 6
    // (tokens 96–111), cached by the first request though its blocks 0–3 are gone: hit 7 · 16 = 112 tokens.
    TestRequest again(1, {{content(1), 128}}, 16);
    CHECK(admit(m, again) == 112);
    // Chunked: skipped floor(112 / 32) · 32 = 96 tokens → 6 null blocks; block 6 shared, a new block for 112..127.
    CHECK(testing::count_real(m.get_block_ids(again.id)[1]) == 2);
    CHECK(testing::count_real(m.get_block_ids(again.id)[0]) == 8);
}

}  // namespace
}  // namespace servesim::cache
