// EAGLE/EAGLE-3/MTP's prefix-cache rule (KvCacheConfig::use_eagle; vLLM FullAttentionManager.find_longest_cache_hit
// with use_eagle, SpeculativeConfig.use_eagle): a hit drops its last matched full-attention block, because the
// drafter's KV for the last token of a cached chunk was computed beside the token after it, which a later request
// may not share. docs/SPECULATIVE-DECODING.md.
#include "sim/cache/managers/kv_cache_manager.h"

#include "tests/cache/cache_test_util.h"
#include "tests/catch.h"

namespace servesim::cache {
namespace {

using testing::admit;
using testing::content;
using testing::release;
using testing::TestRequest;

constexpr int kB = 16;

KvCacheConfig config(bool use_eagle) {
    KvCacheConfig c = testing::full_attention_config(300, kB);
    c.use_eagle = use_eagle;
    return c;
}

TEST_CASE("EAGLE/MTP: a repeated 2,000-token prompt hits one block less, 1,968 tokens instead of 1,984",
          "[cache][speculative]") {
    // The cap is 2,000 − 1 = 1,999 tokens: ⌊1,999 / 16⌋ = 124 blocks = 1,984; the drop leaves 123 = 1,968.
    for (const bool eagle : {false, true}) {
        KvCacheManager m(config(eagle));
        TestRequest first(0, {{content(1), 2000}}, kB);
        REQUIRE(admit(m, first) == 0);
        release(m, first);
        TestRequest again(1, {{content(1), 2000}}, kB);
        CHECK(admit(m, again) == (eagle ? 1968 : 1984));
        CHECK(m.stats().hits == (eagle ? 1968 : 1984));
        m.check_invariants();
    }
}

TEST_CASE("EAGLE/MTP: a one-block hit becomes no hit", "[cache][speculative]") {
    // 17 tokens: one full block of 16 is cached and ⌊16 / 16⌋ = 1 block can hit; with the drop, none.
    for (const bool eagle : {false, true}) {
        KvCacheManager m(config(eagle));
        TestRequest first(0, {{content(7), 17}}, kB);
        REQUIRE(admit(m, first) == 0);
        release(m, first);
        TestRequest again(1, {{content(7), 17}}, kB);
        CHECK(admit(m, again) == (eagle ? 0 : 16));
        m.check_invariants();
    }
}

}  // namespace
}  // namespace servesim::cache
