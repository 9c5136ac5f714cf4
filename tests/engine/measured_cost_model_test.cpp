// Tests of sim/engine/measured_cost_model.*: a whole step of a one-layer model composed by hand from the kernel
// table tests/fixtures/kernels/tiny.yaml (whose shapes are this model's), per-rank shapes under tensor parallelism,
// the transfer to a GPU without a table, and determinism.
#include "sim/engine/measured_cost_model.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <variant>

#include "calibration/kernel_table.h"
#include "models/model_derived.h"
#include "models/model_registry.h"
#include "models/quantization_config.h"
#include "tests/catch.h"

namespace servesim::engine {
namespace {

// hidden 1024, 8 query / 2 KV heads of 128, SwiGLU intermediate 2048, vocab 4096 (untied), bf16, one layer.
models::ModelSpec tiny_model() {
    models::ModelSpec m;
    m.name = "tiny";
    m.hidden_size = 1024;
    m.vocab_size = 4096;
    m.max_position_embeddings = 4096;
    models::Layer l;
    l.mixer = models::AttentionMixer{8, 2, 128};
    l.mlp = models::DenseMlp{2048, true};
    m.layers.push_back(l);
    return m;
}

const calibration::KernelTable& table() {
    static const calibration::KernelTable t =
        calibration::read_kernel_table(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/kernels/tiny.yaml");
    return t;
}

// H100-SXM's datasheet figures (calibration/gpus/H100-SXM.yaml); the fixture's measured shapes need none of them.
MeasuredParams params(int tp = 1) {
    MeasuredParams p;
    p.roofline.gpu_name = "H100-SXM";
    p.roofline.peak_flops_per_s = 989e12;
    p.roofline.memory_bandwidth_bytes_per_s = 3.35e12;
    p.roofline.kernel_gap_us = 3.4;  // the roofline's kernel boundaries, which the measured model must not add
    p.roofline.max_cudagraph_tokens = 512;
    p.roofline.tensor_parallel_size = tp;
    p.roofline.tp_link = CollectiveLink{LinkKind::kNvlinkSwitch, 450e9};
    p.table = &table();
    p.table_roof = calibration::KernelRoof{989e12, 1979e12, 3.35e12};
    p.target = p.table_roof;
    p.table_gpu = "H100-SXM";
    p.max_table_tokens = 1024;
    return p;
}

BatchShape decode(std::int64_t seqs, std::int64_t context) {
    BatchShape s;
    s.num_tokens = seqs;
    s.num_decode_seqs = seqs;
    s.num_seqs = seqs;
    s.num_sampled_seqs = seqs;
    s.decode_context_tokens = seqs * context;
    return s;
}

BatchShape prefill(std::int64_t chunk, std::int64_t cached) {
    BatchShape s;
    s.num_tokens = chunk;
    s.num_prefill_tokens = chunk;
    s.num_prefill_seqs = 1;
    s.num_seqs = 1;
    s.num_sampled_seqs = 1;
    s.prefill_attention_work = static_cast<double>(chunk) * (static_cast<double>(cached) + chunk / 2.0);
    s.prefill_max_context_tokens = cached + chunk;
    return s;
}

TEST_CASE("MeasuredCostModel composes a decode step of a one-layer model by hand", "[engine]") {
    const MeasuredCostModel cost(tiny_model(), models::DType::kBFloat16, params());
    // 16 decodes at 256 keys each; 16 is a CUDA-graph capture size, so the GEMMs run at m = 16:
    //   qkv_proj (1536, 1024) 12 µs, o_proj (1024, 1024) 10, gate_up_proj (4096, 1024) 24, down_proj (1024, 2048)
    //   18: 64 µs;
    //   fused add + RMSNorm ×3 (attention, MLP, final) at 16 tokens: 2 + 2·15/255 = 2.117647 each, 6.352941;
    //   SiLU·mul 2 + 3·15/255 = 2.176471; RoPE 2 + 15/255 = 2.058824;
    //   the KV cache write, one copy kernel at the fixture's ceilings (graph launch 1 µs, 3,000 GB/s): 16 tokens ×
    //   2 (read, write) × 2 (k, v) × 2 heads × 128 × 2 bytes = 32,768 bytes, 1 + 0.010923 = 1.010923 µs;
    //   per-token terms 75.599158 µs;
    //   lm_head (4096, 1024) at 16 rows 24 µs, sampling 16 rows of 4096 logits 14 µs: 38 µs;
    //   decode attention, batch 16 × context 256: 8 µs;
    //   no kernel-boundary term (table times come from graph replays and hold their gaps); no all-reduce at TP 1.
    //   Total 75.599158 + 38 + 8 = 121.599158 µs.
    const StepCost c = cost.step_cost(decode(16, 256));
    const double per_token_us =
        64.0 + 3 * (2.0 + 2.0 * 15 / 255) + (2.0 + 3.0 * 15 / 255) + (2.0 + 15.0 / 255) + (1.0 + 32768.0 / 3e12 * 1e6);
    CHECK(c.gemm_ms == Approx(per_token_us / 1e3));
    CHECK(c.gemm_ms == Approx(0.075599158));
    CHECK(c.lm_head_ms == Approx(0.038));
    CHECK(c.attn_decode_ms == Approx(0.008));
    CHECK(c.attn_prefill_ms == 0.0);
    CHECK(c.overhead_ms == 0.0);
    CHECK(c.comm_ms == 0.0);
    CHECK(c.total_ms() == Approx(0.121599158));
    // The terms listed by inspect add up to the step.
    double sum = 0;
    for (const auto& t : cost.step_terms(decode(16, 256))) {
        sum += t.ms;
    }
    CHECK(sum == Approx(c.total_ms()));
    CHECK(cost.describe() == "measured H100-SXM (kernel table " + table().file + ", 2026-12-06)");
}

TEST_CASE("MeasuredCostModel adds Qwen3's per-head q/k RMSNorm", "[engine]") {
    models::ModelSpec m = tiny_model();
    std::get<models::AttentionMixer>(m.layers[0].mixer).qk_norm = true;
    const MeasuredCostModel with(m, models::DType::kBFloat16, params());
    const MeasuredCostModel without(tiny_model(), models::DType::kBFloat16, params());
    // 16 tokens: q_norm over 8 heads of 128 is the fixture's entry (width 1,024): 2 + 15/255 = 2.058824 µs; k_norm
    // over 2 heads (width 256) takes the same entry with its data-proportional part scaled by bytes, 256/1,024, and
    // its one-token time (2 µs: the launch and fixed latency) kept: 2 + 0.058824/4 = 2.014706 µs. Together
    // 4.073529 µs.
    CHECK(with.step_cost(decode(16, 256)).gemm_ms - without.step_cost(decode(16, 256)).gemm_ms ==
          Approx((2.0 + 15.0 / 255 + 2.0 + 15.0 / 255 / 4) / 1e3));
}

TEST_CASE("MeasuredCostModel adds MLA's latent RMSNorms: kv_a_layernorm always, q_a_layernorm with a query LoRA",
          "[engine]") {
    // One MLA layer, 8 heads of (128 nope + 64 rope), v 128, kv_lora_rank 1,024, so that kv_a_layernorm reads the
    // fixture's rmsnorm entry (hidden 1,024) exactly; q_lora_rank 1,024 adds q_a_layernorm at the same width.
    auto mla_model = [](int q_lora_rank) {
        models::ModelSpec m = tiny_model();
        models::AttentionMixer a{8, 8, 192};
        a.mla = models::MlaShape{q_lora_rank, 1024, 128, 64, 128};
        m.layers[0].mixer = a;
        return m;
    };
    auto rmsnorm_ms = [](const MeasuredCostModel& c, const BatchShape& b) {
        for (const auto& t : c.step_terms(b)) {
            if (t.name == "rmsnorm") return t.ms;
        }
        return -1.0;
    };
    const MeasuredCostModel plain(tiny_model(), models::DType::kBFloat16, params());
    const MeasuredCostModel no_lora(mla_model(0), models::DType::kBFloat16, params());
    const MeasuredCostModel lora(mla_model(1024), models::DType::kBFloat16, params());
    // 16 tokens: one call of the 1,024-wide entry is 2 + (16 − 1) / 255 · (4 − 2) µs = 2.117647 µs.
    const double call_ms = (2.0 + 15.0 / 255 * 2.0) / 1e3;
    CHECK(rmsnorm_ms(no_lora, decode(16, 256)) - rmsnorm_ms(plain, decode(16, 256)) == Approx(call_ms));
    CHECK(rmsnorm_ms(lora, decode(16, 256)) - rmsnorm_ms(plain, decode(16, 256)) == Approx(2 * call_ms));
}

double term_ms(const MeasuredCostModel& c, const BatchShape& b, const std::string& name) {
    for (const auto& t : c.step_terms(b)) {
        if (t.name == name) {
            return t.ms;
        }
    }
    return -1.0;
}

TEST_CASE("MeasuredCostModel prices MLA's copies: latent cache write, query concatenation, output transpose",
          "[engine]") {
    // One MLA layer, 8 heads, kv_lora_rank 1,024 + rope 64 = a 1,088-wide latent, v 128; 16 decode tokens; each copy
    // moves its bytes once read and once written, at the fixture's ceilings (1 µs a kernel, 3,000 GB/s):
    //   concat_and_cache_mla  2 × 1,088 × 2 bytes         =  4,352 bytes a token
    //   torch.cat of q        2 × 8 × 1,088 × 2 bytes     = 34,816
    //   W_UV output transpose 2 × 8 × 128 × 2 bytes       =  4,096
    //   43,264 × 16 = 692,224 bytes: 3 × 1 + 0.230741 = 3.230741 µs.
    models::ModelSpec m = tiny_model();
    models::AttentionMixer a{8, 8, 192};
    a.mla = models::MlaShape{0, 1024, 128, 64, 128};
    m.layers[0].mixer = a;
    const MeasuredCostModel mla(m, models::DType::kBFloat16, params());
    CHECK(term_ms(mla, decode(16, 256), "copies") == Approx((3.0 + 692224.0 / 3e12 * 1e6) / 1e3));
    // A GQA layer writes its keys and values only: 2 × 2 × 2 heads × 128 × 2 bytes = 2,048 a token, one kernel.
    const MeasuredCostModel plain(tiny_model(), models::DType::kBFloat16, params());
    CHECK(term_ms(plain, decode(16, 256), "copies") == Approx((1.0 + 16 * 2048.0 / 3e12 * 1e6) / 1e3));
}

TEST_CASE("MeasuredCostModel adds the shared expert's output to the routed experts' with one copy kernel", "[engine]") {
    // DeepSeek-style MoE (8 experts, top 2, expert intermediate 512) with and without a shared expert of 1,024:
    // the add reads two hidden states and writes one, 3 × 1,024 × 2 = 6,144 bytes a token; at 16 tokens
    // 1 + 98,304 / 3e12 s = 1.032768 µs more in the copies term.
    const auto moe_model = [](int shared) {
        models::ModelSpec m = tiny_model();
        models::MoeMlp e;
        e.num_experts = 8;
        e.num_experts_per_tok = 2;
        e.moe_intermediate_size = 512;
        e.shared_expert_intermediate_size = shared;
        e.shared_expert_gate = false;
        m.layers[0].mlp = e;
        return m;
    };
    const MeasuredCostModel with(moe_model(1024), models::DType::kBFloat16, params());
    const MeasuredCostModel without(moe_model(0), models::DType::kBFloat16, params());
    CHECK(term_ms(with, decode(16, 256), "copies") - term_ms(without, decode(16, 256), "copies") ==
          Approx((1.0 + 16 * 6144.0 / 3e12 * 1e6) / 1e3));
}

TEST_CASE("MeasuredCostModel runs bf16 routed experts as vLLM's fused_moe where the table pairs it with the grouped "
          "GEMM",
          "[engine]") {
    // The fixture plus a `moe` entry for 8 experts, top 2, 1,024 → 512 (100 µs at 1 token, 200 at 64) and a
    // `moe_vllm_fused` entry of the same shape (fused 90 / 210 µs, grouped 100 / 200 at 16 / 64 tokens); copy rate
    // 3,000 GB/s, so the fused timing's top-k sum is 3 · 1,024 · 2 = 6,144 B a token, 2.048e-3 µs.
    //  - 16 decodes: grouped table 100 + 100 · 15 / 63 = 123.809524 µs; ratio (90 − 0.032768) / 100 = 0.899672:
    //    111.388024 µs.
    //  - 64 decodes: 200 · (210 − 0.131072) / 200 = 209.868928 µs.
    //  - 4 decodes, below the paired counts: the ratio at 16 held, 104.761905 · 0.899672 = 94.251450 µs.
    //  - fp8 experts (W8A8): vLLM's fp8 MoE path was not timed, so the table's op alone.
    std::string text;
    {
        std::ifstream in(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/kernels/tiny.yaml");
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const std::string moe_ops = R"(  moe:
    - {experts: 8, top_k: 2, hidden: 1024, intermediate: 512, tokens: [1, 64], us: [100, 200]}
)";
    const std::string fused_op = R"(  moe_vllm_fused:
    - {experts: 8, top_k: 2, hidden: 1024, intermediate: 512, tokens: [16, 64], us: [90, 210], grouped_us: [100, 200]}
)";
    const std::size_t ops_end = text.find("forwards:");  // the ops go before the fixture's forwards
    REQUIRE(ops_end != std::string::npos);
    const auto with_ops = [&](const std::string& ops) {
        return calibration::parse_kernel_table(text.substr(0, ops_end) + ops + text.substr(ops_end), "t.yaml");
    };
    const calibration::KernelTable grouped_only = with_ops(moe_ops);
    const calibration::KernelTable paired = with_ops(moe_ops + fused_op);
    models::ModelSpec m = tiny_model();
    models::MoeMlp e;
    e.num_experts = 8;
    e.num_experts_per_tok = 2;
    e.moe_intermediate_size = 512;
    m.layers[0].mlp = e;
    MeasuredParams pg = params();
    pg.table = &grouped_only;
    MeasuredParams pf = params();
    pf.table = &paired;
    const MeasuredCostModel grouped(m, models::DType::kBFloat16, pg);
    const MeasuredCostModel fused(m, models::DType::kBFloat16, pf);
    CHECK(term_ms(grouped, decode(16, 256), "moe experts") == Approx((100 + 100.0 * 15 / 63) / 1e3));
    CHECK(term_ms(fused, decode(16, 256), "moe experts") ==
          Approx((100 + 100.0 * 15 / 63) * (90 - 16 * 2.048e-3) / 100 / 1e3));
    CHECK(term_ms(fused, decode(64, 256), "moe experts") == Approx(200 * (210 - 64 * 2.048e-3) / 200 / 1e3));
    CHECK(term_ms(fused, decode(4, 256), "moe experts") ==
          Approx((100 + 100.0 * 3 / 63) * (90 - 16 * 2.048e-3) / 100 / 1e3));
    // A table without pairs that borrows another's (MeasuredParams::fused_table, a GPU of the same architecture):
    // the borrowed pairs with the borrowed table's copy rate, here 1,500 GB/s, so the top-k sum of 16 tokens is
    // 16 · 6,144 B / 1.5e6 B/µs = 0.065536 µs: (100 + 100 · 15 / 63) · (90 − 0.065536) / 100 µs.
    std::string borrowed_text = text;
    const std::size_t rate = borrowed_text.find("copy_gb_per_s: 3000.0");
    REQUIRE(rate != std::string::npos);
    borrowed_text.replace(rate, 21, "copy_gb_per_s: 1500.0");
    const calibration::KernelTable borrowed = calibration::parse_kernel_table(
        borrowed_text.substr(0, ops_end) + moe_ops + fused_op + borrowed_text.substr(ops_end), "b.yaml");
    MeasuredParams pb = params();
    pb.table = &grouped_only;
    pb.fused_table = &borrowed;
    pb.fused_table_gpu = "B";
    const MeasuredCostModel lent(m, models::DType::kBFloat16, pb);
    CHECK(term_ms(lent, decode(16, 256), "moe experts") ==
          Approx((100 + 100.0 * 15 / 63) * (90 - 16 * 6144 / 1.5e6) / 100 / 1e3));
    CHECK(lent.describe().find("routed experts x the B table's fused_moe / grouped GEMM") != std::string::npos);
    const models::ModelSpec m8 = models::apply_engine_quantization(m, std::string("fp8"), std::nullopt);
    const MeasuredCostModel fp8(m8, models::DType::kBFloat16, pf);
    const MeasuredCostModel fp8_grouped(m8, models::DType::kBFloat16, pg);
    CHECK(term_ms(fp8, decode(16, 256), "moe experts") == term_ms(fp8_grouped, decode(16, 256), "moe experts"));
}

TEST_CASE("MeasuredCostModel composes a prefill step by hand, with and without a cached prefix", "[engine]") {
    const MeasuredCostModel cost(tiny_model(), models::DType::kBFloat16, params());
    // One prompt of 256 tokens: GEMMs at m = 256: 40 + 30 + 80 + 60 = 210 µs; RMSNorm 3 × 4, SiLU·mul 5, RoPE 3;
    // the KV cache write of 256 tokens × 2,048 bytes (read and written) at 3,000 GB/s after a 1 µs launch:
    // 1 + 0.174763 µs; 231.174763 µs. One sampled row: lm_head 20 µs, sampling 10 µs. Causal prefill of 256
    // tokens: 50 µs. No kernel-boundary term. Total 0.311174763 ms.
    const StepCost c = cost.step_cost(prefill(256, 0));
    CHECK(c.gemm_ms == Approx(0.231174763));
    CHECK(c.lm_head_ms == Approx(0.030));
    CHECK(c.attn_prefill_ms == Approx(0.050));
    CHECK(c.total_ms() == Approx(0.311174763));
    // A chunk of 128 after 128 cached tokens, work 128·(128 + 64) = 24,576; the fixture has no attn_prefill_cached,
    // so the uncached prefill of the same keys: T = √(2·24,576) = 221.70 tokens, 5 + 45·(221.70 − 16)/240 = 43.569 µs.
    const StepCost cached = cost.step_cost(prefill(128, 128));
    CHECK(cached.attn_prefill_ms == Approx((5.0 + 45.0 * (std::sqrt(49152.0) - 16.0) / 240.0) / 1e3));
}

// One Gated DeltaNet layer (4 key / 8 value heads of 128, conv width 4, fp32 state) and the tiny model's MLP.
models::ModelSpec gdn_model() {
    models::ModelSpec m = tiny_model();
    m.name = "tiny-gdn";
    m.layers[0].mixer = models::GatedDeltaNetMixer{4, 8, 128, 128, 4, models::DType::kFloat32};
    return m;
}

TEST_CASE("MeasuredCostModel takes a Gated DeltaNet layer's kernels from the table", "[engine]") {
    const MeasuredCostModel cost(gdn_model(), models::DType::kBFloat16, params());
    // 16 decodes: recurrent kernel at batch 16, 9 µs; conv1d update at 16, 2 µs; gating + gated norm over 16 tokens,
    // 6 + 10·15/255 = 6.588235 µs. 17.588235 µs.
    CHECK(cost.step_cost(decode(16, 256)).gdn_ms == Approx((9.0 + 2.0 + 6.0 + 10.0 * 15 / 255) / 1e3));
    // One prompt of 256 tokens: chunked kernel (one sequence) 60 µs, conv1d 14 µs, gating + norm 16 µs: 90 µs.
    CHECK(cost.step_cost(prefill(256, 0)).gdn_ms == Approx(0.090));
    // 256 prompt tokens over 4 sequences: the one- and eight-sequence curves blended at log2(4)/3 = 2/3:
    // 60/3 + 80·2/3 = 73.333 µs, plus conv1d 14 and aux 16: 103.333 µs.
    BatchShape four = prefill(256, 0);
    four.num_prefill_seqs = 4;
    CHECK(cost.step_cost(four).gdn_ms == Approx((60.0 / 3 + 80.0 * 2 / 3 + 14 + 16) / 1e3));
    // A mixed step, one 256-token prompt and 16 decodes: 60 + 14 (prefill) + 9 + 2 (decodes) + gating and norm over
    // 272 tokens, beyond the last point and never below 16·272/256 = 17 µs: 102 µs.
    BatchShape mixed = prefill(256, 0);
    mixed.num_tokens += 16;
    mixed.num_decode_seqs = 16;
    mixed.decode_context_tokens = 16 * 256;
    mixed.num_seqs += 16;
    CHECK(cost.step_cost(mixed).gdn_ms == Approx(0.102));
    // inspect names the table as the term's source.
    bool listed = false;
    for (const auto& t : cost.step_terms(decode(16, 256))) {
        if (t.name == "gdn / mamba") {
            listed = true;
            CHECK(t.source == "table");
        }
    }
    CHECK(listed);
}

TEST_CASE("MeasuredCostModel prices a Gated DeltaNet layer's copies as vLLM lays out its projections", "[engine]") {
    // The layer of gdn_model(): conv channels 2 × 4 × 128 + 8 × 128 = 2,048, 8 value heads; the fixture's ceilings:
    // 1 µs a kernel, 3,000 GB/s. In every layout rearrange_mixed_qkv's q/k/v .contiguous() (vLLM PR #26437) are
    // three kernels moving 2 × 2,048 × 2 = 8,192 bytes a token, only in a step of two tokens or more.
    // Qwen3.5's layout ([q k v z], [b a]): b and a made contiguous, two kernels of 2 × 2 × 8 × 2 = 64 bytes a token,
    // also from two tokens on. One decode: no copy at all. 16 decodes: 5 + 16 × 8,256 / 3e12 s = 5.044032 µs; a
    // 256-token prompt: 5 + 256 × 8,256 / 3e12 s = 5.704512 µs.
    const MeasuredCostModel qwen35(gdn_model(), models::DType::kBFloat16, params());
    CHECK(term_ms(qwen35, decode(1, 256), "copies") == Approx(0.0));
    CHECK(term_ms(qwen35, decode(16, 256), "copies") == Approx((5.0 + 16 * 8256.0 / 3e12 * 1e6) / 1e3));
    CHECK(term_ms(qwen35, prefill(256, 0), "copies") == Approx((5.0 + 256 * 8256.0 / 3e12 * 1e6) / 1e3));
    // Qwen3-Next's interleaved layout: fix_query_key_value_ordering + torch.cat of q, k, v, one kernel moving
    // 8,192 bytes a token in every step. One decode: 1 + 8,192 / 3e12 s = 1.002731 µs; 16 decodes: 1 + 3 kernels and
    // 16 × 16,384 bytes, 4.087381 µs.
    models::ModelSpec next = gdn_model();
    std::get<models::GatedDeltaNetMixer>(next.layers[0].mixer).interleaved_projections = true;
    const MeasuredCostModel qwen3_next(next, models::DType::kBFloat16, params());
    CHECK(term_ms(qwen3_next, decode(1, 256), "copies") == Approx((1.0 + 8192.0 / 3e12 * 1e6) / 1e3));
    CHECK(term_ms(qwen3_next, decode(16, 256), "copies") == Approx((4.0 + 16 * 16384.0 / 3e12 * 1e6) / 1e3));
}

TEST_CASE("MeasuredCostModel scales the Gated DeltaNet kernels to a tensor-parallel rank's heads", "[engine]") {
    // TP 2: 2 key / 4 value heads per rank; the fixture's 8-value-head entries scaled by state bytes (1/2), conv1d
    // by channels (1,024 of 2,048: 1/2), the gated norm by width (512 of 1,024: 1/2) above its one-token time of
    // 6 µs, which is kept. 16 decodes: (9 + 2)/2 + 6 + 0.588235/2 = 11.794118 µs.
    const MeasuredCostModel cost(gdn_model(), models::DType::kBFloat16, params(2));
    CHECK(cost.step_cost(decode(16, 256)).gdn_ms == Approx(((9.0 + 2.0) / 2 + 6.0 + 10.0 * 15 / 255 / 2) / 1e3));
}

TEST_CASE("MeasuredCostModel splits projections per tensor-parallel rank", "[engine]") {
    const MeasuredCostModel cost(tiny_model(), models::DType::kBFloat16, params(2));
    // TP 2: qkv_proj per rank is (4·128 + 2·1·128, 1024) = (768, 1024), not in the table; the nearest n·k is
    // (1024, 1024) (the smallest), at its efficiency. At m = 16 both are bandwidth-bound on H100 (3.35 TB/s):
    // bytes 16·1024·2 + 768·1024·2 + 2·16·768 = 1,630,208 vs 2,162,688 for (1024, 1024) measured at 10 µs, so
    // 10 · 1,630,208 / 2,162,688 = 7.5379 µs.
    double qkv_ms = -1;
    bool comm_listed = false;
    for (const auto& t : cost.step_terms(decode(16, 256))) {
        if (t.name == "gemm qkv_proj") {
            qkv_ms = t.ms;
            CHECK(t.source == "table, nearest shape");
        }
        comm_listed = comm_listed || (t.name == "comm" && t.ms > 0);
    }
    CHECK(qkv_ms == Approx(10.0 * 1630208.0 / 2162688.0 / 1e3));
    CHECK(comm_listed);
    CHECK(cost.describe().find(", TP 2") != std::string::npos);
}

TEST_CASE("MeasuredCostModel on a GPU without a table transfers the efficiencies", "[engine]") {
    MeasuredParams p = params();
    // A100-80GB's datasheet (calibration/gpus/A100-80GB.yaml): 312 TFLOP/s bf16, no fp8, 2.039 TB/s.
    p.roofline.gpu_name = "A100-80GB";
    p.roofline.peak_flops_per_s = 312e12;
    p.roofline.memory_bandwidth_bytes_per_s = 2.039e12;
    p.target = calibration::KernelRoof{312e12, 0, 2.039e12};
    const MeasuredCostModel cost(tiny_model(), models::DType::kBFloat16, p);
    CHECK(cost.describe().rfind("measured-transfer from H100-SXM to A100-80GB", 0) == 0);
    // Decode attention of 16 × 256 is bandwidth-bound on both; its fixed part is kept (KernelCostLookup): the
    // fixture's least measured − roofline on the H100 is at (1, 256): 4 − 256 · 1,024 B / 3.35 TB/s = 3.921748 µs,
    // so 3.921748 + (8 − 3.921748) × 3.35 / 2.039 = 10.622162 µs.
    const double fixed_us = 4.0 - 256.0 * 1024.0 / 3.35e12 * 1e6;
    CHECK(cost.step_cost(decode(16, 256)).attn_decode_ms == Approx((fixed_us + (8.0 - fixed_us) * 3.35 / 2.039) / 1e3));
    CHECK(cost.step_cost(decode(16, 256)).attn_decode_ms == Approx(0.010622162));
}

TEST_CASE("MeasuredCostModel is deterministic and its tabled terms are token_detail's to the bit", "[engine]") {
    const MeasuredCostModel a(tiny_model(), models::DType::kBFloat16, params());
    const MeasuredCostModel b(tiny_model(), models::DType::kBFloat16, params());
    for (const std::int64_t n : {1, 3, 16, 600, 1024, 5000}) {
        BatchShape s = prefill(n, 0);
        CHECK(a.step_cost(s).total_ms() == b.step_cost(s).total_ms());
        // 600 and 1024 come from the table (max_table_tokens 1024), 5000 is computed: the same arithmetic.
        const std::int64_t padded = RooflineCostModel::cudagraph_padded_tokens(n, 512);
        CHECK(a.step_cost(s).gemm_ms == a.token_detail(padded).total_us() / 1e3);
    }
    // A catalogued model on the fixture: every term finite and ≥ 0.
    const models::ModelSpec qwen = models::resolve_model("Qwen3-4B");
    const MeasuredCostModel q(qwen, qwen.dtype, params());
    const StepCost c = q.step_cost(decode(64, 2048));
    CHECK(c.all_in_range());
    CHECK(c.gemm_ms > 0);
    CHECK(c.attn_decode_ms > 0);
}

TEST_CASE("MeasuredCostModel runs every linear layer of every preset once per token", "[engine]") {
    // The projections it looks up (fused as vLLM fuses them) hold the model's linear FLOPs: Σ 2·n·k over GEMMs, the
    // active experts and the lm_head equals models::linear_flops_per_token at TP 1 for attention models (to 1e-6), and
    // within 0.1 % for recurrent ones, whose count also holds 2 FLOPs per conv weight and per-head vector (A_log,
    // dt_bias, D), which run in the scan kernels, not in GEMMs (Jamba 0.045 %, the largest share); gpt-oss counts its
    // 64 sink logits per layer likewise (2 · 64 · 24 = 3,072 FLOPs of 7.2 G).
    for (const auto& name : models::preset_names()) {
        INFO(name);
        const models::ModelSpec m = models::resolve_model(name);
        const MeasuredCostModel cost(m, m.dtype, params());
        const bool recurrent =
            models::count_layers(m).gated_delta_net + models::count_layers(m).mamba2 + models::count_layers(m).mamba1 >
            0;
        CHECK(cost.linear_flops_per_token() ==
              Approx(models::linear_flops_per_token(m)).epsilon(recurrent ? 1e-3 : 1e-6));
    }
    // The other architectures of the catalogue's config.json fixtures: MLA, Mamba-1, Mamba2 hybrids, Zamba2's shared
    // block, sliding windows, chunked local attention.
    for (const char* file : {"DeepSeek-V2-Lite.json", "DeepSeek-V3.json", "Jamba-v0.1.json", "Bamba-9B.json",
                             "Zamba2-2.7B.json", "gpt-oss-20b.json", "Llama-4-Scout-17B-16E-Instruct.json",
                             "gemma-3-27b-it.json", "Falcon-H1-7B-Instruct.json", "GLM-4.5.json"}) {
        INFO(file);
        const models::ModelSpec m = models::resolve_model(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + file);
        const MeasuredCostModel cost(m, m.dtype, params());
        const bool recurrent =
            models::count_layers(m).gated_delta_net + models::count_layers(m).mamba2 + models::count_layers(m).mamba1 >
            0;
        CHECK(cost.linear_flops_per_token() ==
              Approx(models::linear_flops_per_token(m)).epsilon(recurrent ? 1e-3 : 1e-6));
    }
}

}  // namespace
}  // namespace servesim::engine
