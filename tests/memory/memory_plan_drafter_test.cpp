// The speculative drafter in vLLM's start-up arithmetic (sim/memory/memory_plan.cpp, MemoryPlanRequest::drafter and
// num_speculative_tokens): its weights come off the KV budget, its attention layers join the KV cache spec
// (get_kv_cache_spec walks the drafter's Attention layers too; same page → more full-attention layers for
// get_kv_cache_groups, another page → UniformTypeKVCacheSpecs, whose page is the sum of its layers'), and the GDN
// conv state gains num_speculative_tokens columns (gated_delta_net_state_shape's num_spec) while each Mamba group
// holds num_speculative_blocks more state blocks per request (MambaSpec.max_memory_usage_bytes).
#include <string>

#include "common/error.h"
#include "models/hf_config.h"
#include "sim/cache/managers/kv_cache_manager.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"
#include "tests/config_error.h"

namespace servesim::cache {
namespace {

std::string fixture(const std::string& name) {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name;
}

MemoryPlanRequest request_16gib() {
    MemoryPlanRequest r;
    r.gpu_memory_bytes = 150'109'880'320;  // H200
    r.kv_cache_memory_bytes = 16LL << 30;  // fixed: 17,179,869,184 B, so blocks depend on the pages alone
    r.max_model_len = 32'768;
    return r;
}

// `n` attention layers of `kv_heads` × `head_dim`, and `weight_bytes` of weights per rank.
DrafterMemoryRequest drafter(int n, int kv_heads, int head_dim, std::int64_t weight_bytes) {
    DrafterMemoryRequest d;
    d.name = "test drafter";
    d.weight_bytes = weight_bytes;
    models::AttentionMixer a;
    a.num_q_heads = 32;
    a.num_kv_heads = kv_heads;
    a.head_dim = head_dim;
    d.attention_layers.assign(static_cast<std::size_t>(n), a);
    return d;
}

TEST_CASE("Pool blocks with and without a drafter: same-page layers join the group, another page adds to each block",
          "[cache][speculative]") {
    const auto llama = models::read_hf_config(fixture("Llama-3.1-8B.json"));
    // Llama-3.1-8B, bf16: 2 · 8 KV heads · 128 · 2 B = 4,096 B per layer and token; page 16 · 4,096 = 65,536 B;
    // 32 layers: 2,097,152 B per block; 17,179,869,184 / 2,097,152 = 8,192 blocks.
    const MemoryPlan plain = plan_memory(llama, request_16gib());
    CHECK(plain.group_size == 32);
    CHECK(plain.num_gpu_blocks == 8'192);
    CHECK(plain.kv_bytes_per_token == 131'072);  // 32 · 4,096
    CHECK(plain.draft_attention_layers == 0);

    // An EAGLE-style head: one layer of the same shape joins the full-attention group: 33 · 65,536 = 2,162,688 B
    // per block; 17,179,869,184 / 2,162,688 = 7,943.8 → 7,943 blocks.
    MemoryPlanRequest r = request_16gib();
    r.drafter = drafter(1, 8, 128, 1'000'000);
    const MemoryPlan head = plan_memory(llama, r);
    CHECK(head.group_size == 33);
    REQUIRE(head.groups.size() == 1);
    CHECK(head.groups[0].num_layers == 33);
    CHECK(head.draft_block_bytes == 0);
    CHECK(head.num_gpu_blocks == 7'943);
    CHECK(head.kv_bytes_per_token == 135'168);  // 33 · 4,096
    CHECK(head.draft_kv_bytes_per_token == 4'096);
    CHECK(head.weight_bytes == plain.weight_bytes + 1'000'000);
    CHECK(head.draft_weight_bytes == 1'000'000);
    CHECK(KvCacheManager(head.kv_cache_config()).num_free_blocks() == 7'942);  // less the null block

    // A draft model of another head shape (16 layers of 8 KV heads × 64, Llama-3.2-1B's): 2 · 8 · 64 · 2 = 2,048 B
    // per layer and token, 16 · 16 · 2,048 = 524,288 B of its pages per block (UniformTypeKVCacheSpecs sums the
    // pages): 2,097,152 + 524,288 = 2,621,440 B per block; 17,179,869,184 / 2,621,440 = 6,553.6 → 6,553 blocks.
    r.drafter = drafter(16, 8, 64, 0);
    const MemoryPlan other = plan_memory(llama, r);
    CHECK(other.group_size == 32);
    CHECK(other.draft_block_bytes == 524'288);
    CHECK(other.bytes_per_block() == 2'621'440);
    CHECK(other.num_gpu_blocks == 6'553);
    CHECK(other.kv_bytes_per_token == 163'840);  // 131,072 + 16 · 2,048
    // One 32,768-token request: ⌈32,768 / 16⌉ = 2,048 blocks of 2,621,440 B either way.
    CHECK(other.blocks_per_request == 2'048);
}

TEST_CASE("The drafter's weights come off the memory left for the KV cache", "[cache][speculative]") {
    const auto llama = models::read_hf_config(fixture("Llama-3.1-8B.json"));
    MemoryPlanRequest r = request_16gib();
    r.kv_cache_memory_bytes.reset();  // from the GPU's memory
    const MemoryPlan plain = plan_memory(llama, r);
    r.drafter = drafter(1, 8, 128, 500'000'000);
    const MemoryPlan with = plan_memory(llama, r);
    // Same activation peak, non-torch and CUDA-graph terms: the KV memory falls by exactly the drafter's weights.
    CHECK(with.activation_peak_bytes == plain.activation_peak_bytes);
    CHECK(with.kv_cache_memory_bytes == plain.kv_cache_memory_bytes - 500'000'000);
    CHECK(with.num_gpu_blocks == with.kv_cache_memory_bytes / (65'536 * 33));
}

TEST_CASE("A hybrid with an MTP head: one more full-attention layer regroups the pool; the GDN conv state grows by k",
          "[cache][speculative]") {
    const auto qwen = models::read_hf_config(fixture("Qwen3.5-4B.json"));
    MemoryPlanRequest r = request_16gib();
    const MemoryPlan plain = plan_memory(qwen, r);
    REQUIRE(plain.block_size == 528);
    REQUIRE(plain.group_size == 8);
    // MTP, k = 3: the MTP layer (4 KV heads × 256, the target's page) makes 9 full-attention layers beside 24 GDN;
    // 24 ≥ 1.5 · 9, so the group size is 9: full_attention×9, mamba 9, 9, 6 (+3 padding).
    // GDN state: conv (4 − 1 + 3) · (2·16·128 + 32·128) · 2 B = 6 · 8,192 · 2 = 98,304; ssm 32·128·128·4 = 2,097,152;
    // 2,195,456 B. Attention 2 · 4 · 256 · 2 = 4,096 B per token: ⌈2,195,456 / (16 · 4,096)⌉ = ⌈33.5⌉ = 34 → B = 544
    // (528 without: 2,146,304 B of state). Page 544 · 4,096 = 2,228,224 B; blocks ⌊⌊17,179,869,184 / 2,228,224⌋ / 9⌋
    // = ⌊7,710 / 9⌋ = 856.
    r.drafter = drafter(1, 4, 256, 0);
    r.num_speculative_tokens = 3;
    const MemoryPlan mtp = plan_memory(qwen, r);
    CHECK(mtp.mamba_page_size_bytes == 2'195'456);
    CHECK(mtp.block_size == 544);
    CHECK(mtp.group_size == 9);
    REQUIRE(mtp.groups.size() == 4);
    CHECK(mtp.groups[0].kind == KvGroupKind::kFullAttention);
    CHECK(mtp.groups[0].num_layers == 9);
    CHECK(mtp.groups[3].num_layers == 6);
    CHECK(mtp.groups[3].num_padding_layers == 3);
    CHECK(mtp.num_gpu_blocks == 856);
    CHECK(mtp.num_speculative_blocks == 3);
    // One 32,768-token request (align): ⌈32,768 / 544⌉ = 61 attention blocks + 3 Mamba groups × (2 + 3) = 76.
    CHECK(mtp.blocks_per_request == 76);
    CHECK(plain.blocks_per_request == 63 + 3 * 2);  // ⌈32,768 / 528⌉ = 63
}

TEST_CASE("A drafter of another page beside recurrent layers is refused (vLLM would unify the pages)",
          "[cache][speculative]") {
    const auto qwen = models::read_hf_config(fixture("Qwen3.5-4B.json"));
    MemoryPlanRequest r = request_16gib();
    r.drafter = drafter(2, 8, 128, 0);  // 4,096 B per token like the target's 4 × 256, but 8 × 128: same bytes
    CHECK(testing::config_error_of([&] { (void)plan_memory(qwen, r); }).empty());
    r.drafter = drafter(2, 8, 64, 0);  // 2,048 B per token: another page
    CHECK(testing::config_error_of([&] { (void)plan_memory(qwen, r); }).find("unify_kv_cache_spec_page_size") !=
          std::string::npos);
}

}  // namespace
}  // namespace servesim::cache
