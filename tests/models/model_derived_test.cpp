// Tests models/model_derived.*: KV bytes per token, recurrent state bytes, parameter counts, weight bytes read per
// step and FLOPs, on the presets, with every expected number worked by hand from docs/SOURCES.md, "Model
// configurations".
#include "models/model_derived.h"

#include <string>

#include "models/model_registry.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::DType;
using sm::test::within_rel;

TEST_CASE("KV bytes per token, bf16, equal 2 x kv_heads x head_dim x 2 summed over attention layers", "[models]") {
    // Qwen3-4B: 36 layers · 2 · 8 KV heads · 128 · 2 B = 147,456.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Qwen3-4B"), DType::kBFloat16) == 147'456);
    // Llama-3.1-70B: 80 · 2 · 8 · 128 · 2 = 327,680.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Llama-3.1-70B"), DType::kBFloat16) == 327'680);
    // Qwen3-235B-A22B: 94 · 2 · 4 · 128 · 2 = 192,512.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Qwen3-235B-A22B"), DType::kBFloat16) == 192'512);
    // MiniMax-M2.5: 62 · 2 · 8 · 128 · 2 = 253,952.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("MiniMax-M2.5"), DType::kBFloat16) == 253'952);
    // Qwen3.5-4B: only the 8 full-attention layers hold KV: 8 · 2 · 4 · 256 · 2 = 32,768.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Qwen3.5-4B"), DType::kBFloat16) == 32'768);
    // Qwen3-Next-80B-A3B: 12 · 2 · 2 · 256 · 2 = 24,576. Nemotron-H-8B: 4 · 2 · 8 · 128 · 2 = 16,384.
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Qwen3-Next-80B-A3B"), DType::kBFloat16) == 24'576);
    CHECK(sm::kv_bytes_per_token(sm::load_preset("Nemotron-H-8B"), DType::kBFloat16) == 16'384);
}

TEST_CASE("An fp8 KV cache halves the KV bytes per token", "[models]") {
    for (const auto& name : sm::preset_names()) {
        const auto spec = sm::load_preset(name);
        INFO(name);
        CHECK(2 * sm::kv_bytes_per_token(spec, DType::kFp8) == sm::kv_bytes_per_token(spec, DType::kBFloat16));
    }
    // Qwen3-4B fp8: 147,456 / 2 = 73,728; one layer 2 · 8 · 128 · 1 = 2,048.
    const auto q4 = sm::load_preset("Qwen3-4B");
    CHECK(sm::kv_bytes_per_token(q4, DType::kFp8) == 73'728);
    CHECK(sm::kv_bytes_per_token_layer(std::get<sm::AttentionMixer>(q4.layers[0].mixer), DType::kFp8) == 2'048);
}

TEST_CASE("Qwen3.5-4B Gated DeltaNet state: fp32 ssm plus bf16 conv per layer, 24 layers per sequence", "[models]") {
    const auto spec = sm::load_preset("Qwen3.5-4B");
    // Layer 0 is GDN. conv_dim = 2·16·128 + 32·128 = 8,192; conv (4−1)·8,192·2 B = 49,152;
    // ssm 32·128·128·4 B (mamba_ssm_dtype float32) = 2,097,152; total 2,146,304.
    const auto s = sm::state_bytes_layer(spec.layers[0], spec.dtype);
    CHECK(s.conv_bytes == 49'152);
    CHECK(s.ssm_bytes == 2'097'152);
    CHECK(s.total() == 2'146'304);
    // 24 GDN layers · 2,146,304 = 51,511,296 (SGLang's slot size).
    CHECK(sm::state_bytes_per_sequence(spec) == 51'511'296);
    CHECK(sm::max_state_bytes_layer(spec) == 2'146'304);
    // Attention layers (3, 7, ...) hold no recurrent state.
    CHECK(sm::state_bytes_layer(spec.layers[3], spec.dtype).total() == 0);
}

TEST_CASE("Qwen3-Next-80B-A3B state is bf16: 1,097,728 bytes per GDN layer", "[models]") {
    const auto spec = sm::load_preset("Qwen3-Next-80B-A3B");
    // conv 3·8,192·2 = 49,152; ssm 32·128·128·2 = 1,048,576 (no mamba_ssm_dtype → model dtype); docs/VLLM-RULES.md
    // §2.3.
    CHECK(sm::max_state_bytes_layer(spec) == 1'097'728);
    // 36 GDN layers: 36 · 1,097,728 = 39,518,208.
    CHECK(sm::state_bytes_per_sequence(spec) == 39'518'208);
}

TEST_CASE("Nemotron-H-8B Mamba2 state: fp32 ssm by vLLM's default, bf16 conv", "[models]") {
    const auto spec = sm::load_preset("Nemotron-H-8B");
    // Block 0 is 'M'. conv (4−1)·(128·64 + 2·8·128)·2 = 3·10,240·2 = 61,440;
    // ssm 128·64·128·4 = 4,194,304; total 4,255,744; 24 Mamba blocks → 102,137,856.
    const auto s = sm::state_bytes_layer(spec.layers[0], spec.dtype);
    CHECK(s.conv_bytes == 61'440);
    CHECK(s.ssm_bytes == 4'194'304);
    CHECK(sm::state_bytes_per_sequence(spec) == 102'137'856);
}

TEST_CASE("Models without recurrent layers hold no state and are not hybrid", "[models]") {
    const auto spec = sm::load_preset("Llama-3.1-8B");
    CHECK(sm::state_bytes_per_sequence(spec) == 0);
    CHECK(sm::max_state_bytes_layer(spec) == 0);
    CHECK_FALSE(sm::is_hybrid(spec));
    CHECK(sm::is_hybrid(sm::load_preset("Qwen3.5-4B")));
    CHECK(sm::is_hybrid(sm::load_preset("Nemotron-H-8B")));
}

TEST_CASE("Layer counts follow each model's pattern", "[models]") {
    const auto q35 = sm::count_layers(sm::load_preset("Qwen3.5-27B"));
    CHECK(q35.attention == 16);
    CHECK(q35.gated_delta_net == 48);
    CHECK(q35.dense_mlp == 64);
    const auto nh = sm::count_layers(sm::load_preset("Nemotron-H-8B"));
    CHECK(nh.mamba2 == 24);
    CHECK(nh.attention == 4);
    CHECK(nh.dense_mlp == 24);
    CHECK(nh.moe_mlp == 0);
    const auto qn = sm::count_layers(sm::load_preset("Qwen3-Next-80B-A3B"));
    CHECK(qn.attention == 12);
    CHECK(qn.gated_delta_net == 36);
    CHECK(qn.moe_mlp == 48);
}

TEST_CASE("Parameter counts of dense models match their hand-worked totals within 1%", "[models]") {
    // Qwen3-4B: 36·(attention 26,214,400 + MLP 3·2560·9728 = 74,711,040) = 3,633,315,840 + tied embedding
    // 151,936·2560 = 388,956,160 → 4,022,272,000 (4.02 B).
    const auto q4 = sm::count_params(sm::load_preset("Qwen3-4B"));
    CHECK(q4.layers == 3'633'315'840);
    CHECK(q4.embedding == 388'956'160);
    CHECK(q4.lm_head == 0);
    CHECK(q4.total() == 4'022'272'000);
    // Llama-3.1-70B: 80·(8192·8192·2 + 2·8192·1024 + 3·8192·28672) + 2·128,256·8192 = 70,552,387,584 (70.55 B).
    CHECK(sm::count_params(sm::load_preset("Llama-3.1-70B")).total() == 70'552'387'584);
    CHECK(within_rel(static_cast<double>(sm::count_params(sm::load_preset("Qwen3-8B")).total()), 8.19e9, 0.01));
    CHECK(within_rel(static_cast<double>(sm::count_params(sm::load_preset("Qwen3-32B")).total()), 32.76e9, 0.01));
    CHECK(within_rel(static_cast<double>(sm::count_params(sm::load_preset("Llama-3.1-8B")).total()), 8.03e9, 0.01));
}

TEST_CASE("Qwen3-235B-A22B counts 235.1 B parameters, 22.2 B active per token", "[models]") {
    const auto spec = sm::load_preset("Qwen3-235B-A22B");
    // Per layer: attention 4096·8192 + 2·4096·512 + 8192·4096 = 71,303,168; experts 128·3·4096·1536
    // = 2,415,919,104; router 4096·128 = 524,288. 94 layers + 2·151,936·4096 → 235,092,836,352.
    CHECK(sm::count_params(spec).total() == 235'092'836'352);
    // Active: 8 of 128 experts: 94·(71,303,168 + 8·18,874,368 + 524,288) + 1,244,659,712 = 22,189,965,312.
    CHECK(sm::count_active_params(spec).total() == 22'189'965'312);
    CHECK(within_rel(static_cast<double>(sm::count_active_params(spec).total()), 22.2e9, 0.01));
}

TEST_CASE("Hybrid and MoE parameter counts match B.3 within 1%", "[models]") {
    // Qwen3.5-4B text: 8·(36.7 M gated attention + 70.8 M MLP) + 24·(42.1 M GDN + 70.8 M) + tied 635.7 M
    // = 4,205,577,728 (4.21 B); the vision tower is extra.
    const auto q35 = sm::count_params(sm::load_preset("Qwen3.5-4B"));
    CHECK(q35.total() - q35.extra == 4'205'577'728);
    // Vision estimate (models/hf_config.h): 24 blocks of 12.6 M + merger 27.3 M + patch/pos 3.9 M = 333,514,240.
    CHECK(q35.extra == 333'514'240);
    CHECK(
        within_rel(static_cast<double>(sm::count_params(sm::load_preset("Qwen3.5-27B")).layers + 2LL * 248'320 * 5'120),
                   26.9e9, 0.01));
    // Qwen3-Next-80B-A3B: 79.7 B total; 3.25 B active without embeddings.
    const auto qn = sm::load_preset("Qwen3-Next-80B-A3B");
    CHECK(within_rel(static_cast<double>(sm::count_params(qn).total()), 79.7e9, 0.01));
    CHECK(within_rel(static_cast<double>(sm::count_active_params(qn).layers), 3.25e9, 0.01));
    // MiniMax-M2.5: 228.7 B total; ~10.4 B active with lm_head but not the input embedding.
    const auto mm = sm::load_preset("MiniMax-M2.5");
    CHECK(within_rel(static_cast<double>(sm::count_params(mm).total()), 228.7e9, 0.01));
    const auto mm_active = sm::count_active_params(mm);
    CHECK(within_rel(static_cast<double>(mm_active.total() - mm_active.embedding), 10.4e9, 0.01));
    // Nemotron-H-8B: 24 Mamba2 (109.6 M) + 4 attention (41.9 M) + 24 relu2 MLP (2·4096·21504) + 2 embeddings = 8.10 B.
    CHECK(within_rel(static_cast<double>(sm::count_params(sm::load_preset("Nemotron-H-8B")).total()), 8.10e9, 0.01));
}

TEST_CASE("Weight bytes in memory include the vision tower at the model dtype", "[models]") {
    const auto spec = sm::load_preset("Qwen3.5-4B");
    // (4,205,577,728 + 333,514,240) · 2 B = 9,078,183,936.
    CHECK(sm::weight_bytes_total(spec) == 9'078'183'936);
}

TEST_CASE("Weight bytes read for one token: no vision tower, no input gather, tied head read once", "[models]") {
    const auto spec = sm::load_preset("Qwen3.5-4B");
    // Layers 3,569,878,528 + lm_head (= tied embedding) 635,699,200, · 2 B = 8,411,155,456.
    CHECK(sm::weight_bytes_read_per_step(spec, 1) == 8'411'155'456);
    CHECK(sm::weight_bytes_read_per_step(spec, 0) == 0);
    // Dense: the same bytes whatever the batch.
    CHECK(sm::weight_bytes_read_per_step(spec, 4096) == 8'411'155'456);
}

TEST_CASE("Weight bytes read for one token of a MoE count only the routed experts", "[models]") {
    const auto spec = sm::load_preset("Qwen3-235B-A22B");
    // 94·(71,303,168 + 524,288 + 8·18,874,368) + lm_head 622,329,856 = 21,567,635,456 params · 2 B.
    CHECK(sm::weight_bytes_read_per_step(spec, 1) == 43'135'270'912);
    // Many tokens touch every expert: approaches all weights but the input embedding, (235,092,836,352 −
    // 622,329,856)·2.
    const double all = 2.0 * (235'092'836'352.0 - 622'329'856.0);
    CHECK(within_rel(static_cast<double>(sm::weight_bytes_read_per_step(spec, 100'000)), all, 1e-9));
    // Monotone in the batch: 2 tokens read more than 1, fewer than 2 × 8 distinct experts' worth.
    CHECK(sm::weight_bytes_read_per_step(spec, 2) > sm::weight_bytes_read_per_step(spec, 1));
}

TEST_CASE("Linear FLOPs per token are twice the active weights plus the output projection", "[models]") {
    const auto spec = sm::load_preset("Qwen3-4B");
    // 2 · (3,633,315,840 + 388,956,160) = 8,044,544,000.
    CHECK(sm::linear_flops_per_token(spec) == 8'044'544'000.0);
}

TEST_CASE("Attention FLOPs per token grow with context: 4 x Hq x head_dim per key per layer", "[models]") {
    const auto spec = sm::load_preset("Qwen3-4B");
    // 36 layers · 4 · 32 · 128 · 1000 keys = 589,824,000.
    CHECK(sm::attention_flops_per_token(spec, 1000) == 589'824'000.0);
    // Qwen3.5-4B: only 8 attention layers: 8 · 4 · 16 · 256 · 1000 = 131,072,000.
    CHECK(sm::attention_flops_per_token(sm::load_preset("Qwen3.5-4B"), 1000) == 131'072'000.0);
}

TEST_CASE("Sliding-window layers cap the attended context at the window", "[models]") {
    sm::ModelSpec spec;
    spec.hidden_size = 1024;
    spec.layers.push_back({sm::AttentionMixer{8, 8, 128, false, 4096}, sm::NoMlp{}});
    spec.layers.push_back({sm::AttentionMixer{8, 8, 128, false, 0}, sm::NoMlp{}});
    // Window layer: 4·8·128·4096; full layer: 4·8·128·10000 → 4096·(4096 + 10000) = 57,737,216.
    CHECK(sm::attention_flops_per_token(spec, 10'000) == 57'737'216.0);
    CHECK(sm::count_layers(spec).sliding_window == 1);
    // KV bytes per token do not depend on the window: 2 · (2·8·128·2) = 8,192.
    CHECK(sm::kv_bytes_per_token(spec, DType::kBFloat16) == 8'192);
}
