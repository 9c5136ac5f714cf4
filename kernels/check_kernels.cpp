// servesim-kernel-check: GPU correctness of every calibration kernel against its CPU reference (fresh random inputs
// per case, outputs poisoned with NaN first, ‖out − ref‖/‖ref‖ in double), then kernel timings with achieved
// TFLOP/s or GB/s against the measured ceilings. `--check` runs only the checks (the ctest "gpu" test);
// `--bench [--csv FILE]` adds the timings; `--bench-fp8` times only the fp8 GEMMs and their activation quantization.
// Inputs come from a fresh seed each run unless --seed is given.
// Exit status 1 when any check fails, 2 when no GPU is present.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_reference.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kernels.h"

namespace k = servesim::kernels;
namespace ref = servesim::kernels::ref;

namespace {

// One timing row of --bench (and of --csv).
struct BenchRow {
    std::string op;
    std::string shape;
    double ms;
    double tflops;
    double gbps;
};

// What one run of the checks and timings shares, made in main and passed down (no file-scope state): the input
// generator (seeded by --seed N, else from std::random_device, printed), the failed checks, the timing rows.
struct CheckContext {
    std::mt19937_64 rng;
    int failures = 0;
    std::vector<BenchRow> rows;
};

std::vector<float> random_vec(CheckContext& cx, std::size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = d(cx.rng);
    }
    return v;
}

// Uploads as bf16 and returns the device buffer; `v` is rounded to the bf16 values in place.
k::DeviceBuffer upload_bf16(std::vector<float>& v) {
    std::vector<std::uint16_t> bits(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        bits[i] = ref::float_to_bf16(v[i]);
        v[i] = ref::bf16_to_float(bits[i]);
    }
    k::DeviceBuffer b(bits.size() * 2);
    k::copy_to_device(b.get(), bits.data(), bits.size() * 2);
    return b;
}

k::DeviceBuffer upload_f32(const std::vector<float>& v) {
    k::DeviceBuffer b(v.size() * 4);
    k::copy_to_device(b.get(), v.data(), v.size() * 4);
    return b;
}

k::DeviceBuffer upload_i32(const std::vector<int>& v) {
    k::DeviceBuffer b(std::max<std::size_t>(1, v.size()) * 4);
    k::copy_to_device(b.get(), v.data(), v.size() * 4);
    return b;
}

std::vector<float> download_bf16(const k::DeviceBuffer& b, std::size_t n) {
    std::vector<std::uint16_t> bits(n);
    k::copy_to_host(bits.data(), b.get(), n * 2);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = ref::bf16_to_float(bits[i]);
    }
    return v;
}

std::vector<float> download_f32(const k::DeviceBuffer& b, std::size_t n) {
    std::vector<float> v(n);
    k::copy_to_host(v.data(), b.get(), n * 4);
    return v;
}

k::DeviceBuffer poisoned(std::size_t bytes) {
    k::DeviceBuffer b(bytes);
    k::fill_bytes(b.get(), bytes, 0xFF);
    return b;
}

void report(CheckContext& cx, const std::string& name, double err, double tol) {
    const bool ok = err <= tol;
    std::printf("  %-58s rel_err %.3e  (tol %.0e)  %s\n", name.c_str(), err, tol, ok ? "ok" : "FAIL");
    if (!ok) {
        ++cx.failures;
    }
}

void check_gemm(CheckContext& cx) {
    const int m = 77;
    const int n = 320;
    const int kk = 256;
    auto a = random_vec(cx, static_cast<std::size_t>(m) * kk, -1, 1);
    auto w = random_vec(cx, static_cast<std::size_t>(n) * kk, -1, 1);
    auto da = upload_bf16(a);
    auto dw = upload_bf16(w);
    auto dc = poisoned(static_cast<std::size_t>(m) * n * 2);
    k::GemmRunner runner;
    runner.run(da.as<k::bf16_t>(), dw.as<k::bf16_t>(), dc.as<k::bf16_t>(), m, n, kk, nullptr);
    report(cx, "gemm cuBLAS 77x320x256",
           ref::rel_l2_error(download_bf16(dc, static_cast<std::size_t>(m) * n), ref::gemm(a, w, m, n, kk)), 1e-2);
}

// FP8 W8A8: the activations quantized per token on the GPU, the weights per tensor on the host; the reference is
// the float GEMM of the dequantized operands (so only accumulation order and the bf16 output round differ), and
// the per-token quantization is checked against the CPU e4m3 rounding of x / (amax / 448).
void check_gemm_fp8(CheckContext& cx) {
    const int m = 80;  // a multiple of 16 (cuBLASLt fp8)
    const int n = 320;
    const int kk = 256;
    auto a = random_vec(cx, static_cast<std::size_t>(m) * kk, -1, 1);
    auto w = random_vec(cx, static_cast<std::size_t>(n) * kk, -1, 1);
    // a as bf16 values (what the GPU quantizes).
    for (auto& x : a) {
        x = ref::bf16_to_float(ref::float_to_bf16(x));
    }
    const float w_scale = 1.0f / 448.f;  // |w| <= 1
    std::vector<std::uint8_t> w8(w.size());
    std::vector<float> wq(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
        w8[i] = ref::float_to_fp8_e4m3(w[i] / w_scale);
        wq[i] = ref::fp8_e4m3_to_float(w8[i]) * w_scale;
    }
    auto da = upload_bf16(a);
    k::DeviceBuffer a8(static_cast<std::size_t>(m) * kk);
    k::DeviceBuffer a_scales(static_cast<std::size_t>(m) * 4);
    k::quantize_fp8_per_token(da.as<k::bf16_t>(), a8.as<k::fp8_t>(), a_scales.as<float>(), m, kk, nullptr);
    std::vector<std::uint8_t> a8_host(static_cast<std::size_t>(m) * kk);
    k::copy_to_host(a8_host.data(), a8.get(), a8_host.size());
    const std::vector<float> scales = download_f32(a_scales, m);
    std::vector<float> aq(a.size());
    std::vector<float> aq_ref(a.size());
    double max_scale_err = 0;
    for (int r = 0; r < m; ++r) {
        float amax = 0;
        for (int c = 0; c < kk; ++c) {
            amax = std::max(amax, std::fabs(a[static_cast<std::size_t>(r) * kk + c]));
        }
        const float sc = std::max(amax, 1e-12f) / 448.f;
        max_scale_err = std::max(max_scale_err, std::fabs(static_cast<double>(scales[r]) - sc) / sc);
        for (int c = 0; c < kk; ++c) {
            const std::size_t i = static_cast<std::size_t>(r) * kk + c;
            aq[i] = ref::fp8_e4m3_to_float(a8_host[i]) * scales[r];
            aq_ref[i] = ref::fp8_e4m3_to_float(ref::float_to_fp8_e4m3(a[i] / sc)) * sc;
        }
    }
    report(cx, "fp8 per-token quant scales 80x256", max_scale_err, 1e-6);
    report(cx, "fp8 per-token quant values 80x256", ref::rel_l2_error(aq, aq_ref), 1e-2);
    // The GEMM: one per-tensor activation scale (vLLM's per-tensor path), so quantize a with the global amax.
    float amax = 0;
    for (const float x : a) {
        amax = std::max(amax, std::fabs(x));
    }
    const float a_scale = amax / 448.f;
    std::vector<std::uint8_t> a8t(a.size());
    std::vector<float> aqt(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        a8t[i] = ref::float_to_fp8_e4m3(a[i] / a_scale);
        aqt[i] = ref::fp8_e4m3_to_float(a8t[i]) * a_scale;
    }
    k::DeviceBuffer da8(a8t.size());
    k::DeviceBuffer dw8(w8.size());
    k::copy_to_device(da8.get(), a8t.data(), a8t.size());
    k::copy_to_device(dw8.get(), w8.data(), w8.size());
    k::DeviceBuffer dscales(128);  // a_scale at 0, w_scale 64 bytes on (scale pointers kept 16-byte aligned)
    std::vector<float> sc(32, 0.f);
    sc[0] = a_scale;
    sc[16] = w_scale;
    k::copy_to_device(dscales.get(), sc.data(), 128);
    auto dc = poisoned(static_cast<std::size_t>(m) * n * 2);
    k::Fp8GemmRunner runner;
    runner.run(da8.as<k::fp8_t>(), dw8.as<k::fp8_t>(), dc.as<k::bf16_t>(), m, n, kk, dscales.as<float>(),
               dscales.as<float>() + 16, nullptr);
    report(cx, "gemm fp8 cuBLASLt 80x320x256",
           ref::rel_l2_error(download_bf16(dc, static_cast<std::size_t>(m) * n), ref::gemm(aqt, wq, m, n, kk)), 1e-2);
}

// Block-scaled FP8 (the `weight_block_size: [128, 128]` recipe): activations quantized on the GPU per token and
// 128-column group, weights per 128×128 tile on the host, each group and tile with its own magnitude so that a
// scale applied to the wrong group or tile shows; the reference is the float GEMM of the dequantized operands.
// N = 320 leaves a partial last tile of 64 rows.
void check_gemm_fp8_block(CheckContext& cx) {
    const int m = 80;
    const int n = 320;
    const int kk = 512;
    const int kb = kk / 128;
    const int kb4 = (kb + 3) / 4 * 4;
    auto a = random_vec(cx, static_cast<std::size_t>(m) * kk, -1, 1);
    auto w = random_vec(cx, static_cast<std::size_t>(n) * kk, -1, 1);
    for (int r = 0; r < m; ++r) {
        for (int c = 0; c < kk; ++c) {
            float& x = a[static_cast<std::size_t>(r) * kk + c];
            x = ref::bf16_to_float(ref::float_to_bf16(x * static_cast<float>((1 + c / 128) * (1 + r % 3))));
        }
    }
    for (int r = 0; r < n; ++r) {
        for (int c = 0; c < kk; ++c) {
            w[static_cast<std::size_t>(r) * kk + c] *= 0.25f * static_cast<float>(1 + (r / 128 + 2 * (c / 128)) % 5);
        }
    }
    std::vector<float> w_scales(k::fp8_block_weight_scale_count(n, kk), 0.f);
    std::vector<std::uint8_t> w8(w.size());
    std::vector<float> wq(w.size());
    for (int j = 0; j * 128 < n; ++j) {
        for (int g = 0; g < kb; ++g) {
            float amax = 0;
            for (int r = j * 128; r < std::min(n, j * 128 + 128); ++r) {
                for (int c = g * 128; c < g * 128 + 128; ++c) {
                    amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r) * kk + c]));
                }
            }
            const float sc = amax / 448.f;
            w_scales[static_cast<std::size_t>(j) * kb4 + g] = sc;
            for (int r = j * 128; r < std::min(n, j * 128 + 128); ++r) {
                for (int c = g * 128; c < g * 128 + 128; ++c) {
                    const std::size_t i = static_cast<std::size_t>(r) * kk + c;
                    w8[i] = ref::float_to_fp8_e4m3(w[i] / sc);
                    wq[i] = ref::fp8_e4m3_to_float(w8[i]) * sc;
                }
            }
        }
    }
    auto da = upload_bf16(a);
    k::DeviceBuffer a8(static_cast<std::size_t>(m) * kk);
    k::DeviceBuffer a_scales(static_cast<std::size_t>(m) * kb * 4);
    k::quantize_fp8_per_token_group(da.as<k::bf16_t>(), a8.as<k::fp8_t>(), a_scales.as<float>(), m, kk, nullptr);
    std::vector<std::uint8_t> a8_host(static_cast<std::size_t>(m) * kk);
    k::copy_to_host(a8_host.data(), a8.get(), a8_host.size());
    const std::vector<float> scales = download_f32(a_scales, static_cast<std::size_t>(m) * kb);
    std::vector<float> aq(a.size());
    std::vector<float> aq_ref(a.size());
    double max_scale_err = 0;
    for (int r = 0; r < m; ++r) {
        for (int g = 0; g < kb; ++g) {
            float amax = 0;
            for (int c = g * 128; c < g * 128 + 128; ++c) {
                amax = std::max(amax, std::fabs(a[static_cast<std::size_t>(r) * kk + c]));
            }
            const float sc = std::max(amax, 1e-12f) / 448.f;
            const float got = scales[static_cast<std::size_t>(g) * m + r];
            max_scale_err = std::max(max_scale_err, std::fabs(static_cast<double>(got) - sc) / sc);
            for (int c = g * 128; c < g * 128 + 128; ++c) {
                const std::size_t i = static_cast<std::size_t>(r) * kk + c;
                aq[i] = ref::fp8_e4m3_to_float(a8_host[i]) * got;
                aq_ref[i] = ref::fp8_e4m3_to_float(ref::float_to_fp8_e4m3(a[i] / sc)) * sc;
            }
        }
    }
    report(cx, "fp8 per-token-group quant scales 80x512", max_scale_err, 1e-6);
    report(cx, "fp8 per-token-group quant values 80x512", ref::rel_l2_error(aq, aq_ref), 1e-2);
    k::DeviceBuffer dw8(w8.size());
    k::copy_to_device(dw8.get(), w8.data(), w8.size());
    k::DeviceBuffer dws(w_scales.size() * 4);
    k::copy_to_device(dws.get(), w_scales.data(), w_scales.size() * 4);
    auto dc = poisoned(static_cast<std::size_t>(m) * n * 2);
    k::Fp8GemmRunner runner(k::Fp8Scaling::kBlock128);
    runner.run(a8.as<k::fp8_t>(), dw8.as<k::fp8_t>(), dc.as<k::bf16_t>(), m, n, kk, a_scales.as<float>(),
               dws.as<float>(), nullptr);
    report(cx, "gemm fp8 block-scaled cuBLASLt 80x320x512",
           ref::rel_l2_error(download_bf16(dc, static_cast<std::size_t>(m) * n), ref::gemm(aq, wq, m, n, kk)), 1e-2);
}

void check_prefill(CheckContext& cx, int chunk, int cached, int hq, int hkv, int hd, int variant) {
    const int total = cached + chunk;
    auto q = random_vec(cx, static_cast<std::size_t>(chunk) * hq * hd, -1, 1);
    auto kv = random_vec(cx, static_cast<std::size_t>(total) * hkv * hd, -1, 1);
    auto vv = random_vec(cx, static_cast<std::size_t>(total) * hkv * hd, -1, 1);
    auto dq = upload_bf16(q);
    auto dk = upload_bf16(kv);
    auto dv = upload_bf16(vv);
    auto dout = poisoned(q.size() * 2);
    k::PrefillAttentionArgs a;
    a.q = dq.as<k::bf16_t>();
    a.k = dk.as<k::bf16_t>();
    a.v = dv.as<k::bf16_t>();
    a.o = dout.as<k::bf16_t>();
    a.chunk_tokens = chunk;
    a.cached_tokens = cached;
    a.num_q_heads = hq;
    a.num_kv_heads = hkv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.variant = variant;
    k::prefill_attention(a, nullptr);
    const auto want = ref::prefill_attention(q, kv, vv, chunk, cached, hq, hkv, hd, a.scale);
    char name[128];
    std::snprintf(name, sizeof name, "prefill_attention chunk %d cached %d hq %d hkv %d hd %d variant %d", chunk,
                  cached, hq, hkv, hd, variant);
    report(cx, name, ref::rel_l2_error(download_bf16(dout, q.size()), want), 2e-2);
}

void check_decode(
    CheckContext& cx, std::vector<int> lens, int hq, int hkv, int hd, bool fp8, int splits, int variant, int bs = 16) {
    const int seqs = static_cast<int>(lens.size());
    const int max_len = *std::max_element(lens.begin(), lens.end());
    const int max_blocks = (max_len + bs - 1) / bs;
    const int num_blocks = seqs * max_blocks + 3;
    std::vector<int> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), cx.rng);
    std::vector<int> table(static_cast<std::size_t>(seqs) * max_blocks);
    std::copy_n(perm.begin(), table.size(), table.begin());
    const std::size_t cache_elems = static_cast<std::size_t>(num_blocks) * bs * hkv * hd;
    auto kc = random_vec(cx, cache_elems, -1, 1);
    auto vc = random_vec(cx, cache_elems, -1, 1);
    auto q = random_vec(cx, static_cast<std::size_t>(seqs) * hq * hd, -1, 1);
    auto dq = upload_bf16(q);
    k::DeviceBuffer dk;
    k::DeviceBuffer dv;
    const float k_scale = fp8 ? 0.01f : 1.0f;
    const float v_scale = fp8 ? 0.02f : 1.0f;
    if (fp8) {
        std::vector<std::uint8_t> kb(cache_elems);
        std::vector<std::uint8_t> vb(cache_elems);
        for (std::size_t i = 0; i < cache_elems; ++i) {
            kb[i] = ref::float_to_fp8_e4m3(kc[i] / k_scale);
            vb[i] = ref::float_to_fp8_e4m3(vc[i] / v_scale);
            kc[i] = ref::fp8_e4m3_to_float(kb[i]) * k_scale;
            vc[i] = ref::fp8_e4m3_to_float(vb[i]) * v_scale;
        }
        dk = k::DeviceBuffer(cache_elems);
        dv = k::DeviceBuffer(cache_elems);
        k::copy_to_device(dk.get(), kb.data(), cache_elems);
        k::copy_to_device(dv.get(), vb.data(), cache_elems);
    } else {
        dk = upload_bf16(kc);
        dv = upload_bf16(vc);
    }
    auto dt = upload_i32(table);
    auto dl = upload_i32(lens);
    auto dout = poisoned(q.size() * 2);
    k::DeviceBuffer ws(std::max<std::size_t>(16, k::decode_attention_workspace_bytes(seqs, hq, hd, splits)));
    k::DecodeAttentionArgs a;
    a.q = dq.as<k::bf16_t>();
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.kv_dtype = fp8 ? k::KvDtype::kFp8E4m3 : k::KvDtype::kBf16;
    a.k_scale = k_scale;
    a.v_scale = v_scale;
    a.block_table = dt.as<int>();
    a.max_blocks_per_seq = max_blocks;
    a.seq_lens = dl.as<int>();
    a.num_seqs = seqs;
    a.num_q_heads = hq;
    a.num_kv_heads = hkv;
    a.head_dim = hd;
    a.block_size = bs;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.o = dout.as<k::bf16_t>();
    a.workspace = ws.as<float>();
    a.num_splits = splits;
    a.variant = variant;
    k::decode_attention(a, nullptr);
    const auto want = ref::decode_attention(q, kc, vc, table, max_blocks, lens, hq, hkv, hd, bs, a.scale);
    char name[128];
    std::snprintf(name, sizeof name, "decode_attention v%d %s seqs %d max_len %d hq %d hkv %d hd %d bs %d splits %d",
                  variant, fp8 ? "fp8" : "bf16", seqs, max_len, hq, hkv, hd, bs, splits);
    report(cx, name, ref::rel_l2_error(download_bf16(dout, q.size()), want), 2e-2);
}

void check_kv_write(CheckContext& cx, bool fp8) {
    const int tokens = 37;
    const int hkv = 8;
    const int hd = 128;
    const int row = hkv * hd;
    const int slots_total = 200;
    auto kx = random_vec(cx, static_cast<std::size_t>(tokens) * row, -2, 2);
    auto vx = random_vec(cx, static_cast<std::size_t>(tokens) * row, -2, 2);
    std::vector<int> perm(slots_total);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), cx.rng);
    std::vector<int> slots(perm.begin(), perm.begin() + tokens);
    auto dk = upload_bf16(kx);
    auto dv = upload_bf16(vx);
    auto ds = upload_i32(slots);
    const std::size_t esz = fp8 ? 1 : 2;
    auto kc = poisoned(static_cast<std::size_t>(slots_total) * row * esz);
    auto vc = poisoned(static_cast<std::size_t>(slots_total) * row * esz);
    k::KvWriteArgs a;
    a.k = dk.as<k::bf16_t>();
    a.v = dv.as<k::bf16_t>();
    a.k_cache = kc.get();
    a.v_cache = vc.get();
    a.kv_dtype = fp8 ? k::KvDtype::kFp8E4m3 : k::KvDtype::kBf16;
    a.k_scale = fp8 ? 0.05f : 1.0f;
    a.v_scale = fp8 ? 0.05f : 1.0f;
    a.slot_mapping = ds.as<int>();
    a.num_tokens = tokens;
    a.num_kv_heads = hkv;
    a.head_dim = hd;
    k::kv_cache_write(a, nullptr);
    std::vector<float> got(static_cast<std::size_t>(tokens) * row);
    std::vector<float> got_v(got.size());
    if (fp8) {
        std::vector<std::uint8_t> kb(static_cast<std::size_t>(slots_total) * row);
        std::vector<std::uint8_t> vb(kb.size());
        k::copy_to_host(kb.data(), kc.get(), kb.size());
        k::copy_to_host(vb.data(), vc.get(), vb.size());
        for (int t = 0; t < tokens; ++t) {
            for (int i = 0; i < row; ++i) {
                got[static_cast<std::size_t>(t) * row + i] =
                    ref::fp8_e4m3_to_float(kb[static_cast<std::size_t>(slots[t]) * row + i]) * a.k_scale;
                got_v[static_cast<std::size_t>(t) * row + i] =
                    ref::fp8_e4m3_to_float(vb[static_cast<std::size_t>(slots[t]) * row + i]) * a.v_scale;
            }
        }
    } else {
        const auto all_k = download_bf16(kc, static_cast<std::size_t>(slots_total) * row);
        const auto all_v = download_bf16(vc, static_cast<std::size_t>(slots_total) * row);
        for (int t = 0; t < tokens; ++t) {
            std::copy_n(&all_k[static_cast<std::size_t>(slots[t]) * row], row, &got[static_cast<std::size_t>(t) * row]);
            std::copy_n(&all_v[static_cast<std::size_t>(slots[t]) * row], row,
                        &got_v[static_cast<std::size_t>(t) * row]);
        }
    }
    got.insert(got.end(), got_v.begin(), got_v.end());
    std::vector<float> want = kx;
    want.insert(want.end(), vx.begin(), vx.end());
    report(cx, std::string("kv_cache_write ") + (fp8 ? "fp8" : "bf16"), ref::rel_l2_error(got, want),
           fp8 ? 7e-2 : 1e-6);
}

void check_gdn_prefill(
    CheckContext& cx, int seqs, int len, int hk, int hv, bool initial, bool fp32_state, int variant) {
    const int d = 128;
    const std::size_t tokens = static_cast<std::size_t>(seqs) * len;
    auto q = random_vec(cx, tokens * hk * d, -1, 1);
    auto kx = random_vec(cx, tokens * hk * d, -1, 1);
    auto v = random_vec(cx, tokens * hv * d, -1, 1);
    auto g = random_vec(cx, tokens * hv, -0.3f, -0.005f);
    auto beta = random_vec(cx, tokens * hv, 0.1f, 0.9f);
    std::vector<float> state = initial ? random_vec(cx, static_cast<std::size_t>(seqs) * hv * d * d, -0.5f, 0.5f)
                                       : std::vector<float>(static_cast<std::size_t>(seqs) * hv * d * d, 0.f);
    auto dq = upload_bf16(q);
    auto dk = upload_bf16(kx);
    auto dv = upload_bf16(v);
    auto dg = upload_f32(g);
    auto db = upload_f32(beta);
    k::DeviceBuffer dstate;
    if (fp32_state) {
        dstate = upload_f32(state);
    } else {
        dstate = upload_bf16(state);
    }
    if (!initial) {
        k::fill_bytes(dstate.get(), dstate.bytes(), 0xFF);  // must not be read
    }
    auto dout = poisoned(tokens * hv * d * 2);
    k::DeviceBuffer ws(k::gdn_prefill_workspace_bytes(seqs, len, hk, hv));
    k::fill_bytes(ws.get(), ws.bytes(), 0xFF);
    k::GdnPrefillArgs a;
    a.q = dq.as<k::bf16_t>();
    a.k = dk.as<k::bf16_t>();
    a.v = dv.as<k::bf16_t>();
    a.g = dg.as<float>();
    a.beta = db.as<float>();
    a.o = dout.as<k::bf16_t>();
    a.state = dstate.get();
    a.state_dtype = fp32_state ? k::StateDtype::kFp32 : k::StateDtype::kBf16;
    a.use_initial_state = initial;
    a.num_seqs = seqs;
    a.seq_len = len;
    a.num_k_heads = hk;
    a.num_v_heads = hv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(d));
    a.workspace = ws.get();
    a.variant = variant;
    k::gdn_prefill(a, nullptr);
    const auto want = ref::gdn_recurrent(q, kx, v, g, beta, state, seqs, len, hk, hv, d, d, a.scale);
    const auto got_state = fp32_state ? download_f32(dstate, state.size()) : download_bf16(dstate, state.size());
    char name[160];
    std::snprintf(name, sizeof name, "gdn_prefill v%d seqs %d len %d hk %d hv %d %s state%s", variant, seqs, len, hk,
                  hv, fp32_state ? "fp32" : "bf16", initial ? " +initial" : "");
    report(cx, std::string(name) + " out", ref::rel_l2_error(download_bf16(dout, want.size()), want), 3e-2);
    report(cx, std::string(name) + " state", ref::rel_l2_error(got_state, state), 3e-2);
}

void check_gdn_decode(CheckContext& cx, int seqs, int hk, int hv, bool fp32_state) {
    const int d = 128;
    const int slots_total = seqs + 3;
    auto q = random_vec(cx, static_cast<std::size_t>(seqs) * hk * d, -1, 1);
    auto kx = random_vec(cx, static_cast<std::size_t>(seqs) * hk * d, -1, 1);
    auto v = random_vec(cx, static_cast<std::size_t>(seqs) * hv * d, -1, 1);
    auto g = random_vec(cx, static_cast<std::size_t>(seqs) * hv, -0.3f, -0.005f);
    auto beta = random_vec(cx, static_cast<std::size_t>(seqs) * hv, 0.1f, 0.9f);
    auto all_state = random_vec(cx, static_cast<std::size_t>(slots_total) * hv * d * d, -0.5f, 0.5f);
    std::vector<int> perm(slots_total);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), cx.rng);
    std::vector<int> slots(perm.begin(), perm.begin() + seqs);
    auto dq = upload_bf16(q);
    auto dk = upload_bf16(kx);
    auto dv = upload_bf16(v);
    auto dg = upload_f32(g);
    auto db = upload_f32(beta);
    k::DeviceBuffer dstate = fp32_state ? upload_f32(all_state) : upload_bf16(all_state);
    auto dslots = upload_i32(slots);
    auto dout = poisoned(v.size() * 2);
    k::GdnDecodeArgs a;
    a.q = dq.as<k::bf16_t>();
    a.k = dk.as<k::bf16_t>();
    a.v = dv.as<k::bf16_t>();
    a.g = dg.as<float>();
    a.beta = db.as<float>();
    a.o = dout.as<k::bf16_t>();
    a.state = dstate.get();
    a.state_dtype = fp32_state ? k::StateDtype::kFp32 : k::StateDtype::kBf16;
    a.state_slots = dslots.as<int>();
    a.num_seqs = seqs;
    a.num_k_heads = hk;
    a.num_v_heads = hv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(d));
    k::gdn_decode(a, nullptr);
    // Reference on the gathered states.
    const std::size_t per = static_cast<std::size_t>(hv) * d * d;
    std::vector<float> st(static_cast<std::size_t>(seqs) * per);
    for (int s = 0; s < seqs; ++s) {
        std::copy_n(&all_state[slots[s] * per], per, &st[s * per]);
    }
    const auto want = ref::gdn_recurrent(q, kx, v, g, beta, st, seqs, 1, hk, hv, d, d, a.scale);
    const auto got_all = fp32_state ? download_f32(dstate, all_state.size()) : download_bf16(dstate, all_state.size());
    std::vector<float> got_st(st.size());
    for (int s = 0; s < seqs; ++s) {
        std::copy_n(&got_all[slots[s] * per], per, &got_st[s * per]);
    }
    char name[128];
    std::snprintf(name, sizeof name, "gdn_decode seqs %d hk %d hv %d %s state", seqs, hk, hv,
                  fp32_state ? "fp32" : "bf16");
    report(cx, std::string(name) + " out", ref::rel_l2_error(download_bf16(dout, want.size()), want), 2e-2);
    report(cx, std::string(name) + " state", ref::rel_l2_error(got_st, st), fp32_state ? 1e-4 : 1e-2);
}

void check_conv(CheckContext& cx, int seqs, int len, int c, int variant) {
    auto x = random_vec(cx, static_cast<std::size_t>(seqs) * len * c, -1, 1);
    auto w = random_vec(cx, static_cast<std::size_t>(c) * 4, -1, 1);
    auto state = random_vec(cx, static_cast<std::size_t>(seqs) * 3 * c, -1, 1);
    auto dx = upload_bf16(x);
    auto dw = upload_bf16(w);
    auto dst = upload_bf16(state);
    auto dy = poisoned(x.size() * 2);
    k::conv1d_prefill(dx.as<k::bf16_t>(), dw.as<k::bf16_t>(), dst.as<k::bf16_t>(), true, dy.as<k::bf16_t>(), seqs, len,
                      c, nullptr, variant);
    auto want = ref::conv1d(x, w, state, seqs, len, c);
    char name[96];
    std::snprintf(name, sizeof name, "conv1d_prefill v%d seqs %d len %d C %d (+state)", variant, seqs, len, c);
    report(cx, name, ref::rel_l2_error(download_bf16(dy, x.size()), want), 1e-2);
    report(cx, "conv1d_prefill final state", ref::rel_l2_error(download_bf16(dst, state.size()), state), 1e-6);
    // One update step from the state just written.
    auto x1 = random_vec(cx, static_cast<std::size_t>(seqs) * c, -1, 1);
    auto dx1 = upload_bf16(x1);
    auto dy1 = poisoned(x1.size() * 2);
    k::conv1d_update(dx1.as<k::bf16_t>(), dw.as<k::bf16_t>(), dst.as<k::bf16_t>(), dy1.as<k::bf16_t>(), seqs, c,
                     nullptr);
    auto want1 = ref::conv1d(x1, w, state, seqs, 1, c);
    report(cx, "conv1d_update", ref::rel_l2_error(download_bf16(dy1, x1.size()), want1), 1e-2);
    report(cx, "conv1d_update state", ref::rel_l2_error(download_bf16(dst, state.size()), state), 1e-6);
}

void check_small_ops(CheckContext& cx) {
    const int rows = 33;
    const int width = 2560;
    auto x = random_vec(cx, static_cast<std::size_t>(rows) * width, -2, 2);
    auto w = random_vec(cx, width, 0.5f, 1.5f);
    auto dx = upload_bf16(x);
    auto dw = upload_bf16(w);
    auto dy = poisoned(x.size() * 2);
    k::rms_norm(dx.as<k::bf16_t>(), nullptr, dw.as<k::bf16_t>(), dy.as<k::bf16_t>(), rows, width, 1e-6f, nullptr);
    report(cx, "rms_norm 33x2560",
           ref::rel_l2_error(download_bf16(dy, x.size()), ref::rms_norm(x, w, rows, width, 1e-6f)), 1e-2);
    auto x2 = random_vec(cx, static_cast<std::size_t>(rows) * 2 * 1024, -3, 3);
    auto dx2 = upload_bf16(x2);
    auto dy2 = poisoned(static_cast<std::size_t>(rows) * 1024 * 2);
    k::silu_mul(dx2.as<k::bf16_t>(), dy2.as<k::bf16_t>(), rows, 1024, nullptr);
    report(cx, "silu_mul 33x1024",
           ref::rel_l2_error(download_bf16(dy2, static_cast<std::size_t>(rows) * 1024), ref::silu_mul(x2, rows, 1024)),
           1e-2);
    const int tokens = 9;
    const int heads = 4;
    const int hd = 128;
    for (int rot : {128, 32}) {
        auto r = random_vec(cx, static_cast<std::size_t>(tokens) * heads * hd, -1, 1);
        std::vector<int> pos(tokens);
        for (int t = 0; t < tokens; ++t) {
            pos[t] = 17 + 301 * t;
        }
        auto dr = upload_bf16(r);
        auto dp = upload_i32(pos);
        k::rope(dr.as<k::bf16_t>(), dp.as<int>(), tokens, heads, hd, rot, 1e6f, nullptr);
        ref::rope(r, pos, heads, hd, rot, 1e6f);
        report(cx, "rope rot_dim " + std::to_string(rot), ref::rel_l2_error(download_bf16(dr, r.size()), r), 1e-2);
    }
    const int vocab = 50000;
    auto logits = random_vec(cx, static_cast<std::size_t>(5) * vocab, -10, 10);
    auto dl = upload_bf16(logits);
    auto dtok = poisoned(5 * 4);
    k::argmax_rows(dl.as<k::bf16_t>(), dtok.as<int>(), 5, vocab, nullptr);
    std::vector<int> got(5);
    k::copy_to_host(got.data(), dtok.get(), 20);
    const auto want = ref::argmax_rows(logits, 5, vocab);
    int bad = 0;
    for (int i = 0; i < 5; ++i) {
        // Ties after bf16 rounding may pick another index of the same value.
        bad += logits[static_cast<std::size_t>(i) * vocab + got[i]] !=
               logits[static_cast<std::size_t>(i) * vocab + want[i]];
    }
    report(cx, "argmax_rows 5x50000", bad, 0);
    std::vector<float> table = random_vec(cx, static_cast<std::size_t>(100) * 256, -1, 1);
    auto dtab = upload_bf16(table);
    std::vector<int> ids = {5, 99, 0, 5, 42};
    auto dids = upload_i32(ids);
    auto dout = poisoned(ids.size() * 256 * 2);
    k::embedding_gather(dtab.as<k::bf16_t>(), dids.as<int>(), dout.as<k::bf16_t>(), 5, 256, nullptr);
    std::vector<float> want_g;
    for (int id : ids) {
        want_g.insert(want_g.end(), table.begin() + id * 256, table.begin() + (id + 1) * 256);
    }
    report(cx, "embedding_gather", ref::rel_l2_error(download_bf16(dout, want_g.size()), want_g), 0);
}

// MoE layer (kernels.h MoeRunner): router logits vs the CPU GEMM, the device top-k vs the CPU top-k of the same bf16
// logits (ids exact), then the whole layer with that routing vs the CPU reference — eagerly and replayed from a CUDA
// graph, with the grouped GEMMs and with the per-expert loop.
void check_moe(CheckContext& cx,
               int tokens,
               int experts,
               int top_k,
               int hidden,
               int inter,
               int shared_inter,
               bool renorm,
               bool gate) {
    const std::size_t h = hidden;
    auto x = random_vec(cx, tokens * h, -1, 1);
    auto router = random_vec(cx, static_cast<std::size_t>(experts) * h, -0.2f, 0.2f);
    auto w13 = random_vec(cx, static_cast<std::size_t>(experts) * 2 * inter * h, -0.1f, 0.1f);
    auto w2 = random_vec(cx, static_cast<std::size_t>(experts) * h * inter, -0.1f, 0.1f);
    auto sw13 = random_vec(cx, static_cast<std::size_t>(2) * shared_inter * h, -0.1f, 0.1f);
    auto sw2 = random_vec(cx, h * shared_inter, -0.1f, 0.1f);
    auto sg = gate && shared_inter > 0 ? random_vec(cx, h, -0.1f, 0.1f) : std::vector<float>{};
    auto dx = upload_bf16(x);
    auto drouter = upload_bf16(router);
    auto dw13 = upload_bf16(w13);
    auto dw2 = upload_bf16(w2);
    auto dsw13 = upload_bf16(sw13);
    auto dsw2 = upload_bf16(sw2);
    auto dsg = upload_bf16(sg);
    k::MoeShape shape;
    shape.hidden = hidden;
    shape.num_experts = experts;
    shape.top_k = top_k;
    shape.intermediate = inter;
    shape.shared_intermediate = shared_inter;
    shape.shared_expert_gate = gate;
    shape.norm_topk_prob = renorm;
    k::MoeWeights w;
    w.router = drouter.as<k::bf16_t>();
    w.w13 = dw13.as<k::bf16_t>();
    w.w2 = dw2.as<k::bf16_t>();
    w.shared_w13 = shared_inter > 0 ? dsw13.as<k::bf16_t>() : nullptr;
    w.shared_w2 = shared_inter > 0 ? dsw2.as<k::bf16_t>() : nullptr;
    w.shared_gate = gate && shared_inter > 0 ? dsg.as<k::bf16_t>() : nullptr;
    const std::string name = "moe T" + std::to_string(tokens) + " E" + std::to_string(experts) + " k" +
                             std::to_string(top_k) + " h" + std::to_string(hidden) + " I" + std::to_string(inter) +
                             " shared" + std::to_string(shared_inter) + (renorm ? " norm" : "") + (gate ? " gate" : "");
    k::MoeRunner runner(shape, tokens);
    runner.route(dx.as<k::bf16_t>(), tokens, w, nullptr);
    k::device_synchronize();
    const std::size_t tk = static_cast<std::size_t>(tokens) * top_k;
    std::vector<float> logits(static_cast<std::size_t>(tokens) * experts);
    {
        std::vector<std::uint16_t> bits(logits.size());
        k::copy_to_host(bits.data(), runner.router_logits(), bits.size() * 2);
        for (std::size_t i = 0; i < bits.size(); ++i) {
            logits[i] = ref::bf16_to_float(bits[i]);
        }
    }
    report(cx, name + " router logits", ref::rel_l2_error(logits, ref::gemm(x, router, tokens, experts, hidden)), 1e-2);
    std::vector<int> ids(tk);
    std::vector<float> weights(tk);
    k::copy_to_host(ids.data(), runner.topk_ids(), tk * 4);
    k::copy_to_host(weights.data(), runner.topk_weights(), tk * 4);
    std::vector<int> want_ids;
    std::vector<float> want_w;
    ref::moe_topk(logits, tokens, experts, top_k, renorm, want_ids, want_w);
    std::size_t id_mismatches = 0;
    for (std::size_t i = 0; i < tk; ++i) {
        id_mismatches += ids[i] != want_ids[i] ? 1 : 0;
    }
    report(cx, name + " top-k ids (mismatch fraction)", static_cast<double>(id_mismatches) / tk, 0);
    report(cx, name + " top-k weights", ref::rel_l2_error(weights, want_w), 1e-5);
    const ref::MoeRefWeights host_w{router, w13, w2, sw13, sw2, sg};
    const auto want = ref::moe_experts(x, want_ids, want_w, host_w, shape, tokens);
    runner.set_routing(want_ids.data(), tokens);
    const std::size_t out_elems = static_cast<std::size_t>(tokens) * h;
    for (const auto mode : {k::MoeGemmMode::kGrouped, k::MoeGemmMode::kLoop}) {
        runner.set_gemm_mode(mode);
        auto dout = poisoned(out_elems * 2);
        runner.forward_experts(dx.as<k::bf16_t>(), w, dout.as<k::bf16_t>(), nullptr);
        k::device_synchronize();
        const char* label = runner.gemm_mode() == k::MoeGemmMode::kGrouped ? " grouped" : " loop";
        if (mode == k::MoeGemmMode::kGrouped && runner.gemm_mode() != mode) {
            report(cx, name + " grouped GEMM usable in a graph (fell back to loop)", 1, 0);
        }
        report(cx, name + label + " layer", ref::rel_l2_error(download_bf16(dout, out_elems), want), 2e-2);
        // The same layer replayed from a CUDA graph (the sweep times it that way).
        auto gout = poisoned(out_elems * 2);
        k::StreamHandle stream = k::create_stream();
        {
            k::CudaGraph graph;
            graph.capture(stream, [&]() {
                runner.route(dx.as<k::bf16_t>(), tokens, w, stream);
                runner.forward_experts(dx.as<k::bf16_t>(), w, gout.as<k::bf16_t>(), stream);
            });
            graph.replay(stream);
            k::device_synchronize();
        }
        k::destroy_stream(stream);
        report(cx, name + label + " layer (CUDA graph)", ref::rel_l2_error(download_bf16(gout, out_elems), want), 2e-2);
    }
}

void run_checks(CheckContext& cx) {
    std::printf("== correctness (fresh random inputs, poisoned outputs) ==\n");
    check_gemm(cx);
    check_gemm_fp8(cx);
    check_gemm_fp8_block(cx);
    // Every prefill variant (0 = default) on its edges: GQA, chunks on a cached prefix that are not a multiple of any
    // tile, a single query, chunks under 64 rows, several query tiles of the largest (256-row) tiling.
    for (int v : {0, 1, 2, 3, 4}) {
        check_prefill(cx, 200, 0, 8, 2, 128, v);
        check_prefill(cx, 64, 128, 4, 4, 128, v);
        check_prefill(cx, 1, 300, 8, 2, 128, v);
        check_prefill(cx, 37, 0, 4, 1, 128, v);
        check_prefill(cx, 45, 83, 8, 2, 128, v);
        check_prefill(cx, 300, 77, 8, 2, 128, v);
        check_prefill(cx, 600, 45, 4, 2, 128, v);
    }
    for (int v : {0, 1, 3}) {
        check_prefill(cx, 130, 70, 4, 1, 256, v);
        check_prefill(cx, 1, 300, 4, 1, 256, v);
        check_prefill(cx, 37, 100, 4, 2, 256, v);
        check_prefill(cx, 300, 77, 8, 2, 256, v);
    }
    // Every decode variant (0 = default): G = 1, 2, 4, 8; bf16 and fp8 at hd 128 and 256; one split and several
    // (empty splits when a sequence has fewer tiles than splits); lengths that end mid-tile; more than 32 tiles per
    // warp (the block-table register refill); block size 32 (two tiles per block).
    for (int v : {0, 1, 2, 3}) {
        check_decode(cx, {1, 300, 1000}, 8, 2, 128, false, 1, v);
        check_decode(cx, {1, 300, 1000}, 8, 2, 128, false, 4, v);
        check_decode(cx, {17, 700}, 16, 2, 256, false, 3, v);
        check_decode(cx, {5, 513, 2000}, 32, 8, 128, true, 2, v);
        check_decode(cx, {5000, 33}, 32, 8, 128, false, 1, v);
        check_decode(cx, {5000, 16}, 32, 8, 128, true, 1, v);
        check_decode(cx, {1, 77, 4100}, 4, 4, 128, false, 2, v);
        check_decode(cx, {1, 77, 4100}, 4, 4, 128, true, 1, v);
        check_decode(cx, {250, 1234}, 16, 2, 128, false, 1, v);
        check_decode(cx, {250, 1234}, 16, 2, 128, true, 5, v);
        check_decode(cx, {300, 999}, 16, 2, 256, true, 2, v);
        check_decode(cx, {300, 4097}, 8, 1, 256, false, 1, v);
        check_decode(cx, {40, 1000}, 8, 2, 128, false, 2, v, 32);
        check_decode(cx, {40, 1000}, 8, 2, 128, true, 1, v, 32);
    }
    check_decode(cx, {40, 1000}, 8, 2, 128, false, 2, 0, 8);  // block size 8 runs variant 1
    check_kv_write(cx, false);
    check_kv_write(cx, true);
    // Both chunk-prep variants; hv = 2·hk (Qwen3.5), hv = hk and hv = 4·hk exercise the K·Kᵀ sharing loop.
    for (int v : {0, 1}) {
        check_gdn_prefill(cx, 2, 150, 2, 4, false, true, v);
        check_gdn_prefill(cx, 1, 256, 2, 4, true, true, v);
        check_gdn_prefill(cx, 2, 70, 1, 2, true, false, v);
        check_gdn_prefill(cx, 3, 130, 2, 2, true, true, v);
        check_gdn_prefill(cx, 1, 200, 1, 4, false, false, v);
    }
    check_gdn_decode(cx, 5, 2, 4, true);
    check_gdn_decode(cx, 3, 2, 4, false);
    // Vector conv (v0): lengths that are not multiples of its 16-token tile, one shorter than the 3-token history,
    // C not a multiple of 1024 (partial thread block) and one not a multiple of 8 (falls back to the scalar kernel).
    for (int v : {0, 1}) {
        check_conv(cx, 3, 50, 256, v);
        check_conv(cx, 2, 2, 256, v);
        check_conv(cx, 2, 33, 8200, v);
    }
    check_conv(cx, 2, 37, 100, 0);
    check_small_ops(cx);
    check_moe(cx, 37, 16, 4, 256, 128, 128, true, true);
    check_moe(cx, 1, 16, 4, 256, 64, 0, false, false);
    check_moe(cx, 200, 64, 10, 512, 64, 64, true, true);
}

// ---------------- timings ----------------
void add_row(CheckContext& cx, const std::string& op, const std::string& shape, double ms, double flops, double bytes) {
    cx.rows.push_back({op, shape, ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9});
    std::printf("  %-18s %-40s %9.4f ms  %7.1f TFLOP/s  %7.0f GB/s\n", op.c_str(), shape.c_str(), ms,
                cx.rows.back().tflops, cx.rows.back().gbps);
    std::fflush(stdout);
}

// One fp8 recipe on Qwen3-8B's linear shapes: its activation quantization, then its GEMM (M a multiple of 16: one
// token runs as 16); five weight sets rotate so that the weights come from HBM, not L2 (fp8 weights are half the
// bytes of bf16). Every scale is 1/448.
void bench_fp8_recipe(CheckContext& cx, const std::string& op, k::Fp8Scaling scaling) {
    const bool block = scaling == k::Fp8Scaling::kBlock128;
    k::Fp8GemmRunner gemm8(scaling);
    for (auto [nn, kk] :
         {std::pair{6144, 4096}, std::pair{4096, 4096}, std::pair{24576, 4096}, std::pair{4096, 12288}}) {
        // Per-tensor: a_scale at [0], w_scale at [16] (scale pointers 16-byte aligned), per-token scales from [32].
        // Block: the 1×128 activation group scales from [0], then the 128×128 weight tile scales.
        const std::size_t act_scales = block ? 16384u * static_cast<std::size_t>(kk / 128) : 16384u + 32;
        const std::size_t all_scales = act_scales + (block ? k::fp8_block_weight_scale_count(nn, kk) : 0);
        k::DeviceBuffer scales(4 * all_scales);
        const std::vector<float> unit(all_scales, 1.0f / 448.f);
        k::copy_to_device(scales.get(), unit.data(), all_scales * 4);
        float* quant_scales = scales.as<float>() + (block ? 0 : 32);
        const float* a_scale = scales.as<float>();
        const float* w_scale = scales.as<float>() + (block ? act_scales : 16);
        for (int m : {16, 128, 1024, 4096, 16384}) {
            k::DeviceBuffer a(static_cast<std::size_t>(m) * kk * 2);
            k::DeviceBuffer a8(static_cast<std::size_t>(m) * kk);
            std::vector<k::DeviceBuffer> ws;
            const int sets = 5;
            for (int s = 0; s < sets; ++s) {
                ws.emplace_back(static_cast<std::size_t>(nn) * kk);
                k::fill_bytes(ws.back().get(), static_cast<std::size_t>(nn) * kk, 0x38);  // e4m3 1.0
            }
            k::DeviceBuffer c(static_cast<std::size_t>(m) * nn * 2);
            k::fill_random_bf16(a.as<k::bf16_t>(), static_cast<std::size_t>(m) * kk, -1, 1, 3);
            const double ms = k::time_median_ms(
                [&](int r) {
                    if (block) {
                        k::quantize_fp8_per_token_group(a.as<k::bf16_t>(), a8.as<k::fp8_t>(), quant_scales, m, kk,
                                                        nullptr);
                    } else {
                        k::quantize_fp8_per_token(a.as<k::bf16_t>(), a8.as<k::fp8_t>(), quant_scales, m, kk, nullptr);
                    }
                    gemm8.run(a8.as<k::fp8_t>(), ws[r % sets].as<k::fp8_t>(), c.as<k::bf16_t>(), m, nn, kk, a_scale,
                              w_scale, nullptr);
                },
                3, 15);
            add_row(cx, op, "M " + std::to_string(m) + " N " + std::to_string(nn) + " K " + std::to_string(kk), ms,
                    2.0 * m * nn * kk, static_cast<double>(nn) * kk + static_cast<double>(m) * (3.0 * kk + 2.0 * nn));
        }
    }
}

// The fp8 GEMM timings alone (`--bench-fp8`): per-tensor and block-scaled, each with its activation quantization,
// and the quantization launches alone, so that the two recipes' difference can be split between them.
void bench_fp8(CheckContext& cx) {
    std::printf("== FP8 W8A8 GEMM (Qwen3-8B shapes; per-token quant + cuBLASLt e4m3) ==\n");
    bench_fp8_recipe(cx, "gemm_fp8", k::Fp8Scaling::kPerTensor);
    std::printf("== FP8 block-scaled GEMM (Qwen3-8B shapes; per-token-group quant + cuBLASLt 1x128 x 128x128) ==\n");
    bench_fp8_recipe(cx, "gemm_fp8_block", k::Fp8Scaling::kBlock128);
    std::printf("== FP8 activation quantization alone (the launches before each fp8 GEMM) ==\n");
    for (int kk : {4096, 12288}) {
        for (int m : {16, 128, 1024, 16384}) {
            k::DeviceBuffer a(static_cast<std::size_t>(m) * kk * 2);
            k::DeviceBuffer a8(static_cast<std::size_t>(m) * kk);
            k::DeviceBuffer sc(static_cast<std::size_t>(m) * (kk / 128) * 4);
            k::fill_random_bf16(a.as<k::bf16_t>(), static_cast<std::size_t>(m) * kk, -1, 1, 3);
            const std::string shape = "M " + std::to_string(m) + " K " + std::to_string(kk);
            const double bytes = static_cast<double>(m) * kk * 3.0;
            add_row(cx, "quant_fp8_token", shape,
                    k::time_median_ms(
                        [&](int) {
                            k::quantize_fp8_per_token(a.as<k::bf16_t>(), a8.as<k::fp8_t>(), sc.as<float>(), m, kk,
                                                      nullptr);
                        },
                        3, 15),
                    0, bytes);
            add_row(cx, "quant_fp8_group", shape,
                    k::time_median_ms(
                        [&](int) {
                            k::quantize_fp8_per_token_group(a.as<k::bf16_t>(), a8.as<k::fp8_t>(), sc.as<float>(), m,
                                                            kk, nullptr);
                        },
                        3, 15),
                    0, bytes);
        }
    }
}

void bench(CheckContext& cx, int sms) {
    std::printf("== ceilings ==\n");
    const double copy_gbps = k::measure_copy_bandwidth_gbps(std::size_t{2} << 30);
    add_row(cx, "copy", "2 GiB device-to-device (read+write)", 2.0 * (2u << 30) / (copy_gbps * 1e9) * 1e3, 0,
            2.0 * (2u << 30));
    k::GemmRunner gemm;
    {
        const int n = 8192;
        k::DeviceBuffer a(static_cast<std::size_t>(n) * n * 2);
        k::DeviceBuffer w(static_cast<std::size_t>(n) * n * 2);
        k::DeviceBuffer c(static_cast<std::size_t>(n) * n * 2);
        k::fill_random_bf16(a.as<k::bf16_t>(), static_cast<std::size_t>(n) * n, -1, 1, 1);
        k::fill_random_bf16(w.as<k::bf16_t>(), static_cast<std::size_t>(n) * n, -1, 1, 2);
        const double ms = k::time_median_ms(
            [&](int) { gemm.run(a.as<k::bf16_t>(), w.as<k::bf16_t>(), c.as<k::bf16_t>(), n, n, n, nullptr); }, 3, 10);
        add_row(cx, "gemm", "8192x8192x8192 random", ms, 2.0 * n * n * n, 3.0 * n * n * 2);
    }
    std::printf("== GEMM (Qwen3-8B shapes) ==\n");
    for (auto [nn, kk] :
         {std::pair{6144, 4096}, std::pair{4096, 4096}, std::pair{24576, 4096}, std::pair{4096, 12288}}) {
        for (int m : {1, 16, 128, 1024, 4096, 16384}) {
            k::DeviceBuffer a(static_cast<std::size_t>(m) * kk * 2);
            std::vector<k::DeviceBuffer> ws;
            const int sets = 3;  // rotate weights so small-M runs stream them from HBM
            for (int s = 0; s < sets; ++s) {
                ws.emplace_back(static_cast<std::size_t>(nn) * kk * 2);
                k::fill_random_bf16(ws.back().as<k::bf16_t>(), static_cast<std::size_t>(nn) * kk, -1, 1, 10 + s);
            }
            k::DeviceBuffer c(static_cast<std::size_t>(m) * nn * 2);
            k::fill_random_bf16(a.as<k::bf16_t>(), static_cast<std::size_t>(m) * kk, -1, 1, 3);
            const double ms = k::time_median_ms(
                [&](int r) {
                    gemm.run(a.as<k::bf16_t>(), ws[r % sets].as<k::bf16_t>(), c.as<k::bf16_t>(), m, nn, kk, nullptr);
                },
                3, 15);
            add_row(cx, "gemm", "M " + std::to_string(m) + " N " + std::to_string(nn) + " K " + std::to_string(kk), ms,
                    2.0 * m * nn * kk, 2.0 * (static_cast<double>(nn) * kk + static_cast<double>(m) * (kk + nn)));
        }
    }
    bench_fp8(cx);
    std::printf("== prefill attention ==\n");

    struct P {
        int hq, hkv, hd, chunk, cached;
    };

    // Every variant valid for the head dim (prefill_attention.cu), named in the shape so that composition.py's
    // kernels-vs-torch ratio reports each one.
    for (P p : {P{32, 8, 128, 1024, 0}, P{32, 8, 128, 4096, 0}, P{32, 8, 128, 8192, 0}, P{32, 8, 128, 16384, 0},
                P{32, 8, 128, 2048, 8192}, P{16, 4, 256, 1024, 0}, P{16, 4, 256, 4096, 0}, P{16, 4, 256, 8192, 0},
                P{16, 4, 256, 16384, 0}, P{16, 4, 256, 2048, 8192}}) {
        const int total = p.chunk + p.cached;
        k::DeviceBuffer q(static_cast<std::size_t>(p.chunk) * p.hq * p.hd * 2);
        k::DeviceBuffer kk(static_cast<std::size_t>(total) * p.hkv * p.hd * 2);
        k::DeviceBuffer vv(static_cast<std::size_t>(total) * p.hkv * p.hd * 2);
        k::DeviceBuffer o(q.bytes());
        k::fill_random_bf16(q.as<k::bf16_t>(), q.bytes() / 2, -1, 1, 4);
        k::fill_random_bf16(kk.as<k::bf16_t>(), kk.bytes() / 2, -1, 1, 5);
        k::fill_random_bf16(vv.as<k::bf16_t>(), vv.bytes() / 2, -1, 1, 6);
        k::PrefillAttentionArgs a;
        a.q = q.as<k::bf16_t>();
        a.k = kk.as<k::bf16_t>();
        a.v = vv.as<k::bf16_t>();
        a.o = o.as<k::bf16_t>();
        a.chunk_tokens = p.chunk;
        a.cached_tokens = p.cached;
        a.num_q_heads = p.hq;
        a.num_kv_heads = p.hkv;
        a.head_dim = p.hd;
        a.scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
        for (int variant : p.hd == 128 ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{1, 3}) {
            a.variant = variant;
            const double ms = k::time_median_ms([&](int) { k::prefill_attention(a, nullptr); }, 3, 10);
            const double flops = 4.0 * p.hq * p.hd * p.chunk * (p.cached + (p.chunk + 1) / 2.0);
            add_row(cx, "prefill_attn",
                    "hq " + std::to_string(p.hq) + " hkv " + std::to_string(p.hkv) + " hd " + std::to_string(p.hd) +
                        " chunk " + std::to_string(p.chunk) + " cached " + std::to_string(p.cached) + " variant " +
                        std::to_string(variant),
                    ms, flops, static_cast<double>(q.bytes()) * 2 + kk.bytes() + vv.bytes());
        }
    }
    std::printf("== decode attention (block 16) ==\n");

    struct D {
        int seqs, ctx, hq, hkv, hd;
        bool fp8;
    };

    for (D d : {D{1, 4096, 32, 8, 128, false}, D{64, 4096, 32, 8, 128, false}, D{256, 4096, 32, 8, 128, false},
                D{128, 16384, 32, 8, 128, false}, D{256, 4096, 32, 8, 128, true}, D{128, 8192, 16, 4, 256, false}}) {
        const int bs = 16;
        const int mb = (d.ctx + bs - 1) / bs;
        const std::size_t blocks = static_cast<std::size_t>(d.seqs) * mb;
        const std::size_t esz = d.fp8 ? 1 : 2;
        k::DeviceBuffer kc(blocks * bs * d.hkv * d.hd * esz);
        k::DeviceBuffer vc(kc.bytes());
        k::fill_random_bf16(static_cast<k::bf16_t*>(kc.get()), kc.bytes() / 2, -0.5, 0.5, 7);
        k::fill_random_bf16(static_cast<k::bf16_t*>(vc.get()), vc.bytes() / 2, -0.5, 0.5, 8);
        std::vector<int> table(blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), cx.rng);
        auto dt = upload_i32(table);
        std::vector<int> lens(d.seqs, d.ctx);
        auto dl = upload_i32(lens);
        k::DeviceBuffer q(static_cast<std::size_t>(d.seqs) * d.hq * d.hd * 2);
        k::fill_random_bf16(q.as<k::bf16_t>(), q.bytes() / 2, -1, 1, 9);
        k::DeviceBuffer o(q.bytes());
        const int splits = k::decode_attention_splits(d.seqs, d.hkv, d.ctx, sms);
        k::DeviceBuffer ws(std::max<std::size_t>(16, k::decode_attention_workspace_bytes(d.seqs, d.hq, d.hd, splits)));
        k::DecodeAttentionArgs a;
        a.q = q.as<k::bf16_t>();
        a.k_cache = kc.get();
        a.v_cache = vc.get();
        a.kv_dtype = d.fp8 ? k::KvDtype::kFp8E4m3 : k::KvDtype::kBf16;
        a.block_table = dt.as<int>();
        a.max_blocks_per_seq = mb;
        a.seq_lens = dl.as<int>();
        a.num_seqs = d.seqs;
        a.num_q_heads = d.hq;
        a.num_kv_heads = d.hkv;
        a.head_dim = d.hd;
        a.scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
        a.o = o.as<k::bf16_t>();
        a.workspace = ws.as<float>();
        a.num_splits = splits;
        // Variants (decode_attention.cu): 0 = mma pipeline (default), 1 = previous kernel, 2 / 3 = mma deeper /
        // shallower; the default's row keeps the old name so that existing readers of the table still find it.
        for (int variant : {0, 1, 2, 3}) {
            a.variant = variant;
            const double ms = k::time_median_ms([&](int) { k::decode_attention(a, nullptr); }, 3, 20);
            const double bytes = 2.0 * d.seqs * d.ctx * d.hkv * d.hd * esz;
            add_row(cx, d.fp8 ? "decode_attn_fp8" : "decode_attn",
                    "seqs " + std::to_string(d.seqs) + " ctx " + std::to_string(d.ctx) + " hq " + std::to_string(d.hq) +
                        " hkv " + std::to_string(d.hkv) + " hd " + std::to_string(d.hd) + " splits " +
                        std::to_string(splits) + (variant == 0 ? "" : " variant " + std::to_string(variant)),
                    ms, 4.0 * d.hq * d.hd * d.seqs * static_cast<double>(d.ctx), bytes);
        }
    }
    std::printf("== Gated DeltaNet (Qwen3.5-4B layer: hk 16, hv 32, 128x128) ==\n");
    for (int len : {1024, 4096, 8192, 16384}) {
        const int hk = 16;
        const int hv = 32;
        const std::size_t t = static_cast<std::size_t>(len);
        k::DeviceBuffer q(t * hk * 128 * 2);
        k::DeviceBuffer kk(q.bytes());
        k::DeviceBuffer v(t * hv * 128 * 2);
        k::DeviceBuffer g(t * hv * 4);
        k::DeviceBuffer beta(t * hv * 4);
        k::DeviceBuffer o(v.bytes());
        k::DeviceBuffer st(static_cast<std::size_t>(hv) * 128 * 128 * 4);
        k::DeviceBuffer ws(k::gdn_prefill_workspace_bytes(1, len, hk, hv));
        k::fill_random_bf16(q.as<k::bf16_t>(), q.bytes() / 2, -1, 1, 11);
        k::fill_random_bf16(kk.as<k::bf16_t>(), kk.bytes() / 2, -1, 1, 12);
        k::fill_random_bf16(v.as<k::bf16_t>(), v.bytes() / 2, -1, 1, 13);
        k::fill_random_f32(g.as<float>(), t * hv, -0.3f, -0.005f, 14);
        k::fill_random_f32(beta.as<float>(), t * hv, 0.1f, 0.9f, 15);
        k::GdnPrefillArgs a;
        a.q = q.as<k::bf16_t>();
        a.k = kk.as<k::bf16_t>();
        a.v = v.as<k::bf16_t>();
        a.g = g.as<float>();
        a.beta = beta.as<float>();
        a.o = o.as<k::bf16_t>();
        a.state = st.get();
        a.num_seqs = 1;
        a.seq_len = len;
        a.num_k_heads = hk;
        a.num_v_heads = hv;
        a.scale = 1.0f / std::sqrt(128.0f);
        a.workspace = ws.get();
        // Variant 0 = mma chunk prep (k norm fused), 1 = SIMT prep; each with its per-launch breakdown (each launch
        // alone on a workspace the full run filled).
        for (int variant : {0, 1}) {
            a.variant = variant;
            a.stage_mask = 0xF;
            const std::string tag = "len " + std::to_string(len) + " v" + std::to_string(variant);
            const double ms = k::time_median_ms([&](int) { k::gdn_prefill(a, nullptr); }, 2, 10);
            const double flops = static_cast<double>(hv) * len * (6 * 64 * 128 + 4 * 64 * 128 + 6 * 128 * 128 + 2731);
            add_row(cx, "gdn_prefill", tag + " (core, 4 kernels)", ms, flops,
                    static_cast<double>(q.bytes() * 2 + v.bytes() * 2 + g.bytes() + beta.bytes()));
            const char* names[4] = {"l2norm", "chunk prep", "state pass", "output"};
            for (int stage = 0; stage < 4; ++stage) {
                a.stage_mask = 1u << stage;
                const double sms = k::time_median_ms([&](int) { k::gdn_prefill(a, nullptr); }, 2, 10);
                add_row(cx, "gdn_prefill_stage", tag + " " + names[stage], sms, 0, 0);
            }
            a.stage_mask = 0xF;
        }
        a.variant = 0;
        // conv1d over conv_dim 8192 at the same length
        k::DeviceBuffer x(t * 8192 * 2);
        k::DeviceBuffer y(x.bytes());
        k::DeviceBuffer w(8192 * 4 * 2);
        k::DeviceBuffer cs(3 * 8192 * 2);
        k::fill_random_bf16(x.as<k::bf16_t>(), x.bytes() / 2, -1, 1, 16);
        k::fill_random_bf16(w.as<k::bf16_t>(), w.bytes() / 2, -1, 1, 17);
        for (int variant : {0, 1}) {  // 0 = 16-byte vectors × 16 tokens per thread, 1 = one thread per element
            const double cms = k::time_median_ms(
                [&](int) {
                    k::conv1d_prefill(x.as<k::bf16_t>(), w.as<k::bf16_t>(), cs.as<k::bf16_t>(), false,
                                      y.as<k::bf16_t>(), 1, len, 8192, nullptr, variant);
                },
                2, 10);
            add_row(cx, "conv1d_prefill", "len " + std::to_string(len) + " C 8192 v" + std::to_string(variant), cms,
                    8.0 * t * 8192, 2.0 * static_cast<double>(x.bytes()));
        }
    }
    for (bool fp32 : {true, false}) {
        for (int seqs : {1, 64, 256}) {
            const int hk = 16;
            const int hv = 32;
            const std::size_t esz = fp32 ? 4 : 2;
            k::DeviceBuffer q(static_cast<std::size_t>(seqs) * hk * 128 * 2);
            k::DeviceBuffer kk(q.bytes());
            k::DeviceBuffer v(static_cast<std::size_t>(seqs) * hv * 128 * 2);
            k::DeviceBuffer g(static_cast<std::size_t>(seqs) * hv * 4);
            k::DeviceBuffer beta(g.bytes());
            k::DeviceBuffer o(v.bytes());
            const int sets = std::max(1, static_cast<int>(256e6 / (static_cast<double>(seqs) * hv * 128 * 128 * esz)));
            k::DeviceBuffer st(static_cast<std::size_t>(seqs) * sets * hv * 128 * 128 * esz);
            k::fill_random_bf16(q.as<k::bf16_t>(), q.bytes() / 2, -1, 1, 21);
            k::fill_random_bf16(kk.as<k::bf16_t>(), kk.bytes() / 2, -1, 1, 22);
            k::fill_random_bf16(v.as<k::bf16_t>(), v.bytes() / 2, -1, 1, 23);
            k::fill_random_f32(g.as<float>(), g.bytes() / 4, -0.3f, -0.005f, 24);
            k::fill_random_f32(beta.as<float>(), beta.bytes() / 4, 0.1f, 0.9f, 25);
            if (fp32) {
                k::fill_random_f32(st.as<float>(), st.bytes() / 4, -0.5f, 0.5f, 26);
            } else {
                k::fill_random_bf16(st.as<k::bf16_t>(), st.bytes() / 2, -0.5f, 0.5f, 26);
            }
            k::GdnDecodeArgs a;
            a.q = q.as<k::bf16_t>();
            a.k = kk.as<k::bf16_t>();
            a.v = v.as<k::bf16_t>();
            a.g = g.as<float>();
            a.beta = beta.as<float>();
            a.o = o.as<k::bf16_t>();
            a.state_dtype = fp32 ? k::StateDtype::kFp32 : k::StateDtype::kBf16;
            a.num_seqs = seqs;
            a.num_k_heads = hk;
            a.num_v_heads = hv;
            a.scale = 1.0f / std::sqrt(128.0f);
            const std::size_t set_bytes = static_cast<std::size_t>(seqs) * hv * 128 * 128 * esz;
            const double ms = k::time_median_ms(
                [&](int r) {
                    a.state = static_cast<char*>(st.get()) + (r % sets) * set_bytes;
                    k::gdn_decode(a, nullptr);
                },
                3, 20);
            add_row(cx, fp32 ? "gdn_decode_fp32" : "gdn_decode_bf16", "seqs " + std::to_string(seqs) + " hv 32", ms,
                    static_cast<double>(seqs) * hv * 7 * 128 * 128, 2.0 * static_cast<double>(set_bytes));
        }
    }
    (void)copy_gbps;
}

}  // namespace

int main(int argc, char** argv) {
    bool do_check = true;
    bool do_bench = false;
    bool do_bench_fp8 = false;
    std::string csv;
    std::uint64_t seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--check") {
            do_check = true;
            do_bench = false;
        } else if (a == "--bench") {
            do_bench = true;
        } else if (a == "--bench-only") {
            do_bench = true;
            do_check = false;
        } else if (a == "--bench-fp8") {
            do_bench_fp8 = true;
            do_check = false;
        } else if (a == "--csv" && i + 1 < argc) {
            csv = argv[++i];
        } else if (a == "--seed" && i + 1 < argc) {
            seed = std::stoull(argv[++i]);
        } else {
            std::fprintf(stderr,
                         "usage: servesim-kernel-check [--check] [--bench|--bench-only|--bench-fp8] [--csv FILE] [--seed N]\n");
            return 1;
        }
    }
    k::DeviceInfo info;
    if (!k::query_device(0, &info)) {
        std::fprintf(stderr, "servesim-kernel-check: no CUDA GPU found\n");
        return 2;
    }
    CheckContext cx;
    cx.rng.seed(seed);
    std::printf("input seed %llu (rerun with --seed to reproduce)\n", static_cast<unsigned long long>(seed));
    std::printf("device: %s, %d SMs, L2 %zu MiB, driver %d, runtime %d, cuBLAS %d\n", info.name.c_str(),
                info.multiprocessors, info.l2_bytes >> 20, info.driver_version, info.runtime_version,
                info.cublas_version);
    try {
        if (do_check) {
            run_checks(cx);
            std::printf("checks: %s (%d failures)\n", cx.failures == 0 ? "PASS" : "FAIL", cx.failures);
        }
        if (do_bench_fp8) {
            bench_fp8(cx);
        }
        if (do_bench || do_bench_fp8) {
            if (do_bench) {
                bench(cx, info.multiprocessors);
            }
            if (!csv.empty()) {
                std::ofstream f(csv);
                f << "op,shape,ms,tflops,gbps\n";
                for (const auto& r : cx.rows) {
                    f << r.op << ",\"" << r.shape << "\"," << r.ms << "," << r.tflops << "," << r.gbps << "\n";
                }
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "servesim-kernel-check: error: %s\n", e.what());
        return 1;
    }
    return cx.failures == 0 ? 0 : 1;
}
