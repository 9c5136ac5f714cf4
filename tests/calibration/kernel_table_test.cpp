// Tests calibration/kernel_table.*: the kernel-table reader's checks (each error names the file, the key and what is
// allowed), piecewise-linear interpolation and its extension beyond the grid, the nearest-shape efficiency rule and
// the transfer to another GPU's roofline, each worked by hand on tests/fixtures/kernels/tiny.yaml.
#include "calibration/kernel_table.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "calibration/gpu_spec.h"
#include "common/error.h"
#include "tests/catch.h"

namespace sc = servesim::calibration;

namespace {

std::string fixture() {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/kernels/tiny.yaml";
}

// A minimal valid table; tests append one op.
const std::string kHead = R"(servesim_kernel_table: 1
gpu: H100-SXM
date: 2026-12-06
)";

std::string error_of(const std::string& text) {
    try {
        (void)sc::parse_kernel_table(text, "t.yaml");
    } catch (const servesim::ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

// Round rooflines so the efficiencies below can be worked by hand: 1 PFLOP/s bf16, 2 PFLOP/s fp8, 2 TB/s.
const sc::KernelRoof kRoof{1e15, 2e15, 2e12};

}  // namespace

TEST_CASE("kernel table: the fixture reads, sorted, with unknown ops ignored", "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    CHECK(t.gpu == "H100-SXM");
    CHECK(t.date == "2026-12-06");
    REQUIRE(t.gemm[0].size() == 4);
    // Sorted by n·k: 1024·1024, 1536·1024, 1024·2048 (= 2,097,152), 4096·1024.
    CHECK(t.gemm[0][0].n == 1024);
    CHECK(t.gemm[0][1].n == 1536);
    CHECK(t.gemm[0][2].k == 2048);
    CHECK(t.gemm[0][3].n == 4096);
    CHECK(t.attn_decode.size() == 1);
    CHECK(t.forwards.size() == 1);
    CHECK(t.forwards[0].kind == "decode");
    CHECK(t.forwards[0].routing == "hidden");  // the default: routed over the hidden state
    // The Gated DeltaNet ops: prefill entries sorted by sequences, conv1d keyed by mode.
    REQUIRE(t.gdn_prefill.size() == 2);
    CHECK(t.gdn_prefill[0].seqs == 1);
    CHECK(t.gdn_prefill[1].seqs == 8);
    CHECK(t.gdn_decode.size() == 1);
    REQUIRE(t.conv1d.size() == 2);
    CHECK(t.gdn_aux.size() == 1);
    CHECK(t.gdn_aux[0].width == 1024);
    CHECK(t.bf16_gemm_tflops == 780.0);
    CHECK_FALSE(t.fp8_gemm_tflops.has_value());
}

TEST_CASE("kernel table: bad input is refused naming the file, the key and what is allowed", "[calibration]") {
    CHECK(error_of("servesim_kernel_table: 2\ngpu: X\ndate: d\n")
              .find("t.yaml:1: 'servesim_kernel_table': format version 2; allowed: 1") != std::string::npos);
    CHECK(error_of(kHead + "colour: red\n").find("'colour': unknown key; allowed: servesim_kernel_table") !=
          std::string::npos);
    // A grid that is not strictly increasing.
    CHECK(error_of(kHead + "ops:\n  gemm_bf16:\n    - {n: 8, k: 8, m: [1, 4, 4], us: [1, 2, 3]}\n")
              .find("'ops.gemm_bf16[0].m': grid values 4 then 4 are not strictly increasing") != std::string::npos);
    // us of the wrong length, a time ≤ 0, an unknown key in an entry of a known op.
    CHECK(error_of(kHead + "ops:\n  gemm_bf16:\n    - {n: 8, k: 8, m: [1, 4], us: [1]}\n")
              .find("'ops.gemm_bf16[0].us': 1 times for a grid of 2 points") != std::string::npos);
    CHECK(error_of(kHead + "ops:\n  rmsnorm:\n    - {hidden: 8, tokens: [1, 4], us: [1, -2]}\n")
              .find("'ops.rmsnorm[0].us': time -2 µs; allowed: finite, > 0") != std::string::npos);
    CHECK(error_of(kHead + "ops:\n  rmsnorm:\n    - {hidden: 8, width: 3, tokens: [1], us: [1]}\n")
              .find("'ops.rmsnorm[0].width': unknown key; allowed: hidden, tokens, us") != std::string::npos);
    // A 2-D op with a row too short, and one row missing.
    CHECK(error_of(kHead + "ops:\n  attn_decode:\n    - {backend: f, head_dim: 64, q_heads: 8, kv_heads: 8, "
                           "batch: [1, 2], context: [8, 16], us: [[1, 2], [3]]}\n")
              .find("'ops.attn_decode[0].us': 1 times for a grid of 2 points") != std::string::npos);
    CHECK(error_of(kHead + "ops:\n  attn_decode:\n    - {backend: f, head_dim: 64, q_heads: 8, kv_heads: 8, "
                           "batch: [1, 2], context: [8, 16], us: [[1, 2]]}\n")
              .find("expected 2 rows (one per batch value) of 2 times (one per context value)") != std::string::npos);
    CHECK(error_of(kHead + "ops:\n  attn_prefill:\n    - {backend: f, head_dim: 64, q_heads: 8, kv_heads: 3, "
                           "tokens: [1], us: [1]}\n")
              .find("'ops.attn_prefill[0].kv_heads': q_heads 8 is not a multiple of kv_heads 3") != std::string::npos);
    // The same shape twice.
    CHECK(error_of(kHead + "ops:\n  gemm_bf16:\n    - {n: 8, k: 8, m: [1], us: [1]}\n    - {n: 8, k: 8, m: [2], "
                           "us: [1]}\n")
              .find("'ops.gemm_bf16[1]': the same shape appears twice") != std::string::npos);
    CHECK(error_of(kHead + "forwards:\n  - {model: m, kind: sideways, tokens: 1, ms: 1}\n")
              .find("'forwards[0].kind': 'sideways' is not a forward kind; allowed: prefill, decode") !=
          std::string::npos);
    CHECK(error_of(kHead + "forwards:\n  - {model: m, kind: prefill, tokens: 1, ms: 1, routing: skewed}\n")
              .find("'forwards[0].routing': 'skewed' is not a routing; allowed: hidden, balanced") !=
          std::string::npos);
    CHECK(error_of(kHead + "ops:\n  some_future_op: [1, 2, 3]\n") == "<no ConfigError>");
    // Sections a cut-short sweep left empty read as no entries.
    CHECK(error_of(kHead + "ceilings:\nops:\n  gemm_bf16:\nforwards:\n") == "<no ConfigError>");
    CHECK_THROWS_AS(sc::read_kernel_table("/nonexistent/kernels.yaml"), servesim::ConfigError);
}

TEST_CASE("kernel curve: linear inside, along the last segment beyond, never below the last time per unit",
          "[calibration]") {
    // Points (100, 10), (200, 30): slope 0.2 µs per unit.
    const sc::KernelCurve c{{100, 200}, {10, 30}};
    CHECK(c.at(150) == Approx(20.0));  // 10 + 0.2·50
    CHECK(c.at(200) == 30.0);
    // 300: along the segment 30 + 0.2·100 = 50; the per-unit floor 30·300/200 = 45; 50 wins.
    CHECK(c.at(300) == Approx(50.0));
    // Below the first point: the first point's time.
    CHECK(c.at(50) == 10.0);
    // A flattening last segment: (1, 8), (16, 10), (256, 30): at 512 the segment gives 30 + (20/240)·256 = 51.33,
    // the floor 30·512/256 = 60, so 60.
    const sc::KernelCurve f{{1, 16, 256}, {8, 10, 30}};
    CHECK(f.at(512) == Approx(60.0));
    // One point: proportional above, flat below.
    const sc::KernelCurve one{{10}, {5}};
    CHECK(one.at(20) == Approx(10.0));
    CHECK(one.at(5) == 5.0);
}

TEST_CASE("kernel grid: bilinear inside, each axis extended as a curve", "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    const sc::KernelGrid& g = t.attn_decode.at(0).batch_context;
    // batch 4, context 512: row batch 1 at 512 is 4 + 2·256/768 = 4.6667; row batch 16 is 8 + 12·256/768 = 12;
    // along batch: 4.6667 + (12 − 4.6667)·3/15 = 6.1333.
    CHECK(g.at(4, 512) == Approx(4.0 + 2.0 / 3.0 + (12.0 - 4.0 - 2.0 / 3.0) * 0.2));
    CHECK(g.at(16, 1024) == 20.0);
    // context 2048 at batch 16: along the last segment 20 + (12/768)·1024 = 36; floor 20·2 = 40 → 40.
    CHECK(g.at(16, 2048) == Approx(40.0));
}

TEST_CASE("kernel lookup: a measured GEMM shape is its own curve; another takes the nearest shapes' efficiency",
          "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    const sc::KernelCostLookup own(t, kRoof, kRoof);
    CHECK(own.gemm_us(sc::GemmKind::kBf16, 16, 1536, 1024) == 12.0);
    CHECK(own.gemm_us(sc::GemmKind::kBf16, 136, 1536, 1024) == Approx(26.0));  // halfway 12 → 40
    // (n, k) = (3072, 1024), n·k = 3,145,728, between 1024·2048 = 2,097,152 and 4096·1024 = 4,194,304:
    // weight w = ln(1.5)/ln(2) = 0.5849625. At m = 16 every shape is bandwidth-bound at 2 TB/s:
    //   (1024, 2048): bytes 16·2048·2 + 1024·2048·2 + 2·16·1024 = 4,292,608 → 2.146304 µs; measured 18 µs →
    //   efficiency 0.1192391;
    //   (4096, 1024): bytes 16·1024·2 + 4096·1024·2 + 2·16·4096 = 8,552,448 → 4.276224 µs; measured 24 µs →
    //   efficiency 0.178176;
    //   blended 0.1192391 + 0.5849625·(0.178176 − 0.1192391) = 0.1537150;
    //   (3072, 1024): bytes 32,768 + 6,291,456 + 98,304 = 6,422,528 → 3.211264 µs; / 0.1537150 = 20.8910 µs.
    const double eff_lo = 2.146304 / 18.0;
    const double eff_hi = 4.276224 / 24.0;
    const double w = std::log(1.5) / std::log(2.0);
    CHECK(own.gemm_us(sc::GemmKind::kBf16, 16, 3072, 1024) == Approx(3.211264 / (eff_lo + w * (eff_hi - eff_lo))));
    CHECK(own.gemm_us(sc::GemmKind::kBf16, 16, 3072, 1024) == Approx(20.8910).epsilon(1e-4));
    // Beyond the largest n·k: the largest entry's efficiency alone. (8192, 1024) at m = 16: bytes 32,768 +
    // 16,777,216 + 262,144 = 17,072,128 → 8.536064 µs / 0.178176 = 47.9078 µs.
    CHECK(own.gemm_us(sc::GemmKind::kBf16, 16, 8192, 1024) == Approx(8.536064 / eff_hi));
    // An fp8 W8A8 GEMM with no fp8 entry: the bf16 entry's efficiency on the fp8 roofline. (1024, 1024) at m = 16:
    // bf16 bytes 32,768 + 2,097,152 + 32,768 = 2,162,688 → 1.081344 µs, measured 10 µs: efficiency 0.1081344; fp8
    // bytes 16,384 + 1,048,576 + 32,768 = 1,097,728 → 0.548864 µs / 0.1081344 = 5.0758 µs.
    CHECK(own.gemm_us(sc::GemmKind::kFp8Tensor, 16, 1024, 1024) == Approx(0.548864 / 0.1081344));
}

TEST_CASE("kernel lookup: a GPU without a table gets the measured efficiency on its own roofline, the fixed time kept",
          "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    // Half the bandwidth, the same FLOP/s: a bandwidth-bound call's time beyond its fixed part takes twice as long.
    const sc::KernelCostLookup slow(t, kRoof, sc::KernelRoof{1e15, 2e15, 1e12});
    CHECK(slow.transfer());
    // GEMM (1024, 1024): the fixed part is the least of measured − roofline over its points (2 TB/s):
    //   m = 1: bytes 2,048 + 2,097,152 + 2,048 = 2,101,248 → 1.050624 µs; 8 − 1.050624 = 6.949376
    //   m = 16: 2,162,688 bytes → 1.081344 µs; 10 − 1.081344 = 8.918656
    //   m = 256: 3,145,728 bytes → 1.572864 µs (FLOPs 0.537 µs); 30 − 1.572864 = 28.427136
    // so 6.949376 µs; at m = 16: 6.949376 + (10 − 6.949376)·2 = 13.050624 µs (all of it doubled would be 20).
    CHECK(slow.gemm_us(sc::GemmKind::kBf16, 16, 1024, 1024) == Approx(13.050624));
    const auto d = slow.resolve_attn_decode({128, 8, 2}, {4.0 * 8 * 128, 2.0 * 2 * 128 * 2});
    REQUIRE(d);
    CHECK(d->scale == Approx(2.0));
    // Decode attention: 1,024 KV bytes a key → 0.000512 µs a key at 2 TB/s; measured − roofline at (batch,
    // context) (1, 256): 4 − 0.131072; (1, 1024): 6 − 0.524288; (16, 256): 8 − 2.097152; (16, 1024): 20 − 8.388608;
    // the least is 3.868928 µs. At (16, 1024): 3.868928 + (20 − 3.868928)·2 = 36.131072 µs.
    CHECK(d->fixed_us == Approx(3.868928));
    CHECK(sc::KernelCostLookup::attn_decode_us(*d, 16, 1024) == Approx(36.131072));
    // Compute-bound prefill: half the FLOP/s doubles it, half the bandwidth does not change it.
    const sc::KernelCostLookup half_flops(t, kRoof, sc::KernelRoof{0.5e15, 1e15, 2e12});
    const auto p = half_flops.resolve_attn_prefill({128, 8, 2}, {4.0 * 8 * 128, 0});
    REQUIRE(p);
    CHECK(sc::KernelCostLookup::attn_prefill_us(*p, 256) == Approx(100.0));
    const auto p_slow = slow.resolve_attn_prefill({128, 8, 2}, {4.0 * 8 * 128, 0});
    CHECK(sc::KernelCostLookup::attn_prefill_us(*p_slow, 256) == Approx(50.0));
}

TEST_CASE("kernel lookup: a causal prefill beyond the longest measured grows with its work, T squared",
          "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    const sc::KernelCostLookup own(t, kRoof, kRoof);
    const auto p = own.resolve_attn_prefill({128, 8, 2}, {4.0 * 8 * 128, 0});
    REQUIRE(p);
    // The fixture: 5 µs at 16 tokens, 50 µs at 256. Inside: 16 + 120 tokens = 5 + 45·120/240 = 27.5 µs.
    CHECK(sc::KernelCostLookup::attn_prefill_us(*p, 136) == Approx(27.5));
    // 512 tokens: the last segment extended gives 50 + 45·256/240 = 98 µs; the work is (512/256)² = 4× the last
    // point's: 200 µs, which wins.
    CHECK(sc::KernelCostLookup::attn_prefill_us(*p, 512) == Approx(200.0));
}

TEST_CASE("kernel lookup: attention geometry not measured is scaled by its roofline", "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    const sc::KernelCostLookup own(t, kRoof, kRoof);
    // 16 query / 4 KV heads of 128 (the same GQA ratio and head dim; twice the heads): the only entry, scaled by the
    // roofline per key: decode is bandwidth-bound, KV bytes per key 2·4·128·2 = 2048 vs 1024 → ×2.
    const auto d = own.resolve_attn_decode({128, 16, 4}, {4.0 * 16 * 128, 2.0 * 4 * 128 * 2});
    REQUIRE(d);
    CHECK_FALSE(d->exact);
    CHECK(sc::KernelCostLookup::attn_decode_us(*d, 1, 256) == Approx(8.0));
    // The measured geometry itself: exact, scale 1.
    const auto e = own.resolve_attn_decode({128, 8, 2}, {4.0 * 8 * 128, 2.0 * 2 * 128 * 2});
    REQUIRE(e);
    CHECK(e->exact);
    CHECK(e->scale == 1.0);
}

TEST_CASE("kernel tables: the built-in catalog parses and names catalog GPUs", "[calibration]") {
    for (const auto& t : sc::kernel_table_catalog()) {
        INFO(t.file);
        const auto& gpus = sc::gpu_catalog();
        const bool found =
            std::any_of(gpus.begin(), gpus.end(), [&](const sc::GpuSpec& g) { return sc::find_kernel_table(g) == &t; });
        CHECK(found);
    }
}

TEST_CASE("kernel table: the sweep's extra keys are read; sampling uses greedy where several methods are timed",
          "[calibration]") {
    const sc::KernelTable t = sc::parse_kernel_table(
        kHead +
            "ops:\n  sampling:\n    - {method: top_p, backend: torch sort, vocab: 100, batch: [1], us: [50]}\n"
            "    - {method: greedy, backend: torch argmax, vocab: 100, batch: [1], us: [5]}\n"
            "    - {method: greedy, backend: torch argmax, vocab: 1000, batch: [1], us: [9]}\n"
            "  moe:\n    - {model: m, backend: grouped_mm, experts: 8, top_k: 2, hidden: 64, intermediate: 32, "
            "tokens: [1], us: [3]}\n"
            "forwards:\n  - {model: m, kind: prefill, tokens: 8, ms: 1, layers: 2, distinct_weight_layers: 2}\n",
        "t.yaml");
    // Vocabulary 120 is nearest 100 in log; of the two entries at 100, greedy (5 µs), never top_p.
    const sc::WidthEntry* e = sc::KernelCostLookup::nearest_width(t.sampling, 120);
    REQUIRE(e != nullptr);
    CHECK(e->method == "greedy");
    CHECK(e->tokens.at(1) == 5.0);
    CHECK(sc::KernelCostLookup::nearest_width(t.sampling, 900)->width == 1000);
    CHECK(t.moe.size() == 1);
}

TEST_CASE("kernel table: the H100 sweep's per-entry keys are read (fast_accum, rotary_dim, qk_norm head sizes)",
          "[calibration]") {
    // What the first real sweep (calibration/kernels/H100-SXM.yaml) writes beyond the fixture: fp8 GEMMs say whether
    // fast accumulation was on; a partial-rotary RoPE entry names its rotated dims; two qk_norm entries of one width
    // (40 heads x 128 = 20 heads x 256 = 5,120) differ by head size and are both kept.
    const sc::KernelTable t = sc::parse_kernel_table(
        kHead +
            "ops:\n  gemm_fp8_tensor:\n    - {n: 64, k: 64, m: [1], us: [2], fast_accum: true}\n"
            "  rope:\n    - {head_dim: 256, q_heads: 16, kv_heads: 4, tokens: [1], us: [1.4], rotary_dim: 64}\n"
            "    - {head_dim: 256, q_heads: 16, kv_heads: 4, tokens: [1], us: [1.6]}\n"
            "  qk_norm:\n    - {head_dim: 128, heads: 40, tokens: [1], us: [1.4]}\n"
            "    - {head_dim: 256, heads: 20, tokens: [1], us: [1.5]}\n",
        "t.yaml");
    REQUIRE(t.gemm[1].size() == 1);
    CHECK(t.gemm[1][0].fast_accum == std::optional<bool>(true));
    REQUIRE(t.rope.size() == 2);
    CHECK(t.rope[0].rotary_dim == 64);
    CHECK(t.rope[1].rotary_dim == 256);  // absent: the whole head
    REQUIRE(t.qk_norm.size() == 2);
    CHECK(t.qk_norm[0].width == 5120);
    CHECK(t.qk_norm[1].width == 5120);
    CHECK(t.qk_norm[1].head_dim == 256);
    // A rotary_dim above head_dim is refused.
    CHECK(error_of(kHead + "ops:\n  rope:\n    - {head_dim: 64, q_heads: 1, kv_heads: 1, tokens: [1], us: [1], "
                           "rotary_dim: 128}\n")
              .find("'ops.rope[0].rotary_dim'") != std::string::npos);
}

TEST_CASE("kernel table: Gated DeltaNet ops are checked and resolved to the nearest heads, scaled by state bytes",
          "[calibration]") {
    const sc::KernelTable t = sc::read_kernel_table(fixture());
    const sc::KernelCostLookup own(t, kRoof, kRoof);
    // The fixture's geometry (4 key / 8 value heads of 128): its own curve, scale 1. 16 decodes: 9 µs.
    const auto d = own.resolve_gdn(t.gdn_decode, {4, 8, 128}, 0);
    REQUIRE(d.has_value());
    CHECK(d->scale == 1.0);
    CHECK(d->at(16) == 9.0);
    // Half the heads (tensor parallel 2): the same entry, state bytes 4·128² against 8·128²: half the time, 4.5 µs.
    const auto half = own.resolve_gdn(t.gdn_decode, {2, 4, 128}, 0);
    REQUIRE(half.has_value());
    CHECK(half->at(16) == Approx(4.5));
    // The eight-sequence prefill curve is its own entry: 256 tokens over 8 sequences, 80 µs.
    CHECK(own.resolve_gdn(t.gdn_prefill, {4, 8, 128}, 8)->at(256) == 80.0);
    // conv1d of 1,024 channels: the 2,048-channel decode entry at half the bytes, 16 rows: 1 µs.
    CHECK(own.resolve_conv1d(1024, true)->at(16) == Approx(1.0));
    // No such op in a table: nullopt, so the cost model keeps the roofline's term.
    const sc::KernelTable bare = sc::parse_kernel_table(kHead + "ops:\n  gemm_bf16:\n    - {n: 64, k: 64, m: [1], us: [2]}\n",
                                                         "t.yaml");
    const sc::KernelCostLookup none(bare, kRoof, kRoof);
    CHECK_FALSE(none.resolve_gdn(bare.gdn_decode, {4, 8, 128}, 0).has_value());
    CHECK_FALSE(none.resolve_conv1d(2048, false).has_value());
    // A conv1d mode other than prefill / decode is refused, naming it.
    CHECK(error_of(kHead + "ops:\n  conv1d:\n    - {mode: both, dim: 64, tokens: [1], us: [1]}\n")
              .find("allowed: prefill, decode") != std::string::npos);
    // A prefill entry without its sequences is refused.
    CHECK(error_of(kHead + "ops:\n  gdn_prefill:\n    - {key_heads: 1, value_heads: 1, head_dim: 64, tokens: [1], "
                           "us: [1]}\n")
              .find("seqs") != std::string::npos);
}

TEST_CASE("kernel table: vLLM's routing kernels are read in place of the torch rendering when both are timed",
          "[calibration]") {
    // The sweep writes `moe_routing` (torch softmax/topk/argsort/gather/scatter/sum, about ten kernels) and, where its
    // Triton renderings of vLLM's topk_softmax + moe_align_block_size + moe_sum passed the probe, `moe_routing_fused`.
    // The fused entry (5 / 9 µs here) is the one read; alone, the torch entry (50 / 90 µs) is read and flagged.
    const std::string torch_op = R"(  moe_routing:
    - {experts: 128, top_k: 8, hidden: 2048, tokens: [1, 256], us: [50, 90]}
)";
    const std::string fused_op = R"(  moe_routing_fused:
    - {experts: 128, top_k: 8, hidden: 2048, tokens: [1, 256], us: [5, 9], backend: triton}
)";
    const auto both = sc::parse_kernel_table(kHead + "ops:\n" + torch_op + fused_op, "t.yaml");
    REQUIRE(both.moe_routing.size() == 1);
    CHECK(both.routing_fused);
    CHECK(both.moe_routing[0].tokens.at(1) == 5);
    CHECK(both.moe_routing[0].tokens.at(256) == 9);
    // The torch entry stays readable beside it: the torch-timed forwards are composed with it.
    REQUIRE(both.moe_routing_torch.size() == 1);
    CHECK(both.moe_routing_torch[0].tokens.at(1) == 50);
    const auto torch_only = sc::parse_kernel_table(kHead + "ops:\n" + torch_op, "t.yaml");
    REQUIRE(torch_only.moe_routing.size() == 1);
    CHECK_FALSE(torch_only.routing_fused);
    CHECK(torch_only.moe_routing[0].tokens.at(1) == 50);
}

TEST_CASE("a curve read for another shape keeps its one-token time and scales the rest", "[calibration]") {
    // An elementwise kernel of 2 µs at one token and 4 µs at 256 (the fixture's rmsnorm): at 16 tokens 2 + 2·15/255
    // = 2.117647 µs. For a shape with a quarter of the bytes the launch and fixed latency (2 µs) stay and the rest,
    // 0.117647 µs, is quartered: 2.029412 µs (bytes alone would have said 0.529412, below any kernel's launch).
    sc::KernelCurve c{{1, 256}, {2, 4}};
    CHECK(c.at_scaled(16, 0.25) == Approx(2.0 + 2.0 * 15 / 255 / 4));
    CHECK(c.at_scaled(16, 1.0) == c.at(16));
    CHECK(c.at_scaled(16, 3.0) == Approx(2.0 + 3 * 2.0 * 15 / 255));
    CHECK(c.at_scaled(1, 0.25) == 2.0);
}

TEST_CASE("MoE routing of an unmeasured shape keeps the measured shape's one-token time", "[calibration]") {
    // Torch routing timed for 128 experts, top 8, hidden 2,048: 50 µs at one token (about ten launches), 90 at 256.
    // DeepSeek-V2-Lite's 64 experts, top 6 move 4·64 + 8·6·2,048 = 98,560 routing bytes a token against
    // 4·128 + 8·8·2,048 = 131,584: a ratio of 0.749027 for the data-proportional part only. One token: 50 µs (the
    // launches do not shrink with the shape); 256 tokens: 50 + 40 × 0.749027 = 79.961 µs.
    const auto t = sc::parse_kernel_table(
        kHead + "ops:\n  moe_routing:\n    - {experts: 128, top_k: 8, hidden: 2048, tokens: [1, 256], us: [50, 90]}\n",
        "t.yaml");
    const sc::KernelRoof h100{989e12, 1979e12, 3.35e12};
    const sc::KernelCostLookup lookup(t, h100, h100);
    const sc::KernelCostLookup::MoeShape lite{64, 6, 2048, 1408, true, 2, false};
    const sc::MoeEntry* e = lookup.resolve_moe_routing(lite);
    REQUIRE(e != nullptr);
    CHECK(lookup.moe_routing_us(*e, lite, 1) == Approx(50.0));
    CHECK(lookup.moe_routing_us(*e, lite, 256) == Approx(50.0 + 40.0 * 98560.0 / 131584.0));
}

TEST_CASE("vLLM's fused_moe scales the grouped GEMM by the paired timings, at the same tokens per expert",
          "[calibration]") {
    // Mixtral-like entry (8 experts, top 2, hidden 4,096): fused 500 / 800 µs, grouped 550 / 700 µs at 128 / 512
    // tokens; copy rate 2,000 GB/s. The fused timing holds the top-k sum, (top_k + 1) · hidden · 2 bytes a token:
    // 24,576 B, 12.288e-3 µs a token at 2,000 GB/s, taken off.
    //  - 128 tokens: (500 − 1.572864) / 550 = 0.906231.
    //  - 512 tokens: (800 − 6.291456) / 700 = 1.133869.
    //  - 256 tokens: fused 600, grouped 600 (linear between the points), sum 3.145728: 0.994757.
    //  - 40 tokens: below the measured counts, held at 128's ratio (vLLM's tile choice is by token count).
    //  - A shape of 64 experts, top 6, asks for the same tokens per expert: 100 of its tokens are 100 · (6 / 64) /
    //    (2 / 8) = 37.5 of the entry's, held at 128; 1,000 of its tokens are 375 of the entry's: fused
    //    500 + 300 · 247 / 384 = 692.96875, grouped 550 + 150 · 247 / 384 = 646.484375, sum 4.608: 1.064776.
    const auto t = sc::parse_kernel_table(kHead + R"(ceilings: {copy_gb_per_s: 2000}
ops:
  moe_vllm_fused:
    - {experts: 8, top_k: 2, hidden: 4096, intermediate: 7168, tokens: [128, 512], us: [500, 800],
       grouped_us: [550, 700]}
)",
                                          "t.yaml");
    REQUIRE(t.moe_vllm_fused.size() == 1);
    const sc::KernelCostLookup lookup(t, kRoof, kRoof);
    const sc::KernelCostLookup::MoeShape mixtral{8, 2, 4096, 7168, true, 2, false};
    const sc::MoeEntry* f = lookup.resolve_moe_fused(mixtral);
    REQUIRE(f != nullptr);
    CHECK(lookup.fused_over_grouped(*f, mixtral, 128) == Approx((500 - 1.572864) / 550));
    CHECK(lookup.fused_over_grouped(*f, mixtral, 512) == Approx((800 - 6.291456) / 700));
    CHECK(lookup.fused_over_grouped(*f, mixtral, 256) == Approx((600 - 3.145728) / 600));
    CHECK(lookup.fused_over_grouped(*f, mixtral, 40) == lookup.fused_over_grouped(*f, mixtral, 128));
    const sc::KernelCostLookup::MoeShape lite{64, 6, 2048, 1408, true, 2, false};
    CHECK(lookup.fused_over_grouped(*f, lite, 100) == lookup.fused_over_grouped(*f, mixtral, 128));
    CHECK(lookup.fused_over_grouped(*f, lite, 1000) == Approx((692.96875 - 4.608) / 646.484375));
    // fp8 or weight-only experts run other vLLM kernels, not timed: no ratio.
    CHECK(lookup.resolve_moe_fused({8, 2, 4096, 7168, true, 1, true}) == nullptr);
    CHECK(lookup.resolve_moe_fused({8, 2, 4096, 7168, true, 0.53, false}) == nullptr);
    // A table without the op: none.
    const auto plain = sc::parse_kernel_table(kHead + "ops:\n", "t.yaml");
    CHECK(sc::KernelCostLookup(plain, kRoof, kRoof).resolve_moe_fused(mixtral) == nullptr);
    // grouped_us must pair every token count.
    CHECK(error_of(kHead + "ops:\n  moe_vllm_fused:\n    - {experts: 8, top_k: 2, hidden: 4096, intermediate: 7168, "
                           "tokens: [128, 512], us: [500, 800], grouped_us: [550]}\n")
              .find("t.yaml:6: 'ops.moe_vllm_fused[0].grouped_us': 1 times for a grid of 2 points") !=
          std::string::npos);
}
