// CPU references for the calibration kernels (kernels/cpu_reference.h): straightforward loops, double accumulation.
#include "kernels/cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace servesim::kernels::ref {

float bf16_to_float(std::uint16_t bits) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f = 0;
    std::memcpy(&f, &u, 4);
    return f;
}

std::uint16_t float_to_bf16(float x) {
    std::uint32_t u = 0;
    std::memcpy(&u, &x, 4);
    if (std::isnan(x)) {
        return static_cast<std::uint16_t>((u >> 16) | 0x40);
    }
    const std::uint32_t lsb = (u >> 16) & 1u;
    u += 0x7FFFu + lsb;
    return static_cast<std::uint16_t>(u >> 16);
}

float fp8_e4m3_to_float(std::uint8_t b) {
    const int sign = (b >> 7) & 1;
    const int exp = (b >> 3) & 0xF;
    const int man = b & 0x7;
    float v = 0;
    if (exp == 0xF && man == 0x7) {
        v = std::numeric_limits<float>::quiet_NaN();
    } else if (exp == 0) {
        v = std::ldexp(static_cast<float>(man) / 8.0f, -6);
    } else {
        v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
    return sign ? -v : v;
}

std::uint8_t float_to_fp8_e4m3(float x) {
    if (std::isnan(x)) {
        return 0x7F;
    }
    // Exhaustive nearest search over the 126 finite non-negative codes, ties to even mantissa.
    const float a = std::min(std::fabs(x), 448.0f);
    std::uint8_t best = 0;
    float best_err = std::numeric_limits<float>::infinity();
    for (int c = 0; c <= 0x7E; ++c) {
        const float v = fp8_e4m3_to_float(static_cast<std::uint8_t>(c));
        const float err = std::fabs(v - a);
        if (err < best_err || (err == best_err && (c & 1) == 0)) {
            best_err = err;
            best = static_cast<std::uint8_t>(c);
        }
    }
    return static_cast<std::uint8_t>(best | (x < 0 ? 0x80 : 0));
}

double rel_l2_error(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) {
        return std::numeric_limits<double>::infinity();
    }
    double num = 0;
    double den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
            return std::numeric_limits<double>::infinity();
        }
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += static_cast<double>(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<float> gemm(const std::vector<float>& a, const std::vector<float>& w, int m, int n, int k) {
    std::vector<float> c(static_cast<std::size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int p = 0; p < k; ++p) {
                s += static_cast<double>(a[static_cast<std::size_t>(i) * k + p]) *
                     w[static_cast<std::size_t>(j) * k + p];
            }
            c[static_cast<std::size_t>(i) * n + j] = static_cast<float>(s);
        }
    }
    return c;
}

namespace {

// One query row against keys [0, n_keys) of kv head `kvh`; key rows found through `key_row(t)`.
template <typename KeyRow>
void attend(const float* qrow,
            const std::vector<float>& k,
            const std::vector<float>& v,
            int n_keys,
            int hd,
            float scale,
            KeyRow key_row,
            float* out) {
    std::vector<double> s(n_keys);
    double mx = -std::numeric_limits<double>::infinity();
    for (int t = 0; t < n_keys; ++t) {
        const float* kr = &k[key_row(t)];
        double d = 0;
        for (int i = 0; i < hd; ++i) {
            d += static_cast<double>(qrow[i]) * kr[i];
        }
        s[t] = d * scale;
        mx = std::max(mx, s[t]);
    }
    double l = 0;
    for (auto& x : s) {
        x = std::exp(x - mx);
        l += x;
    }
    for (int i = 0; i < hd; ++i) {
        double o = 0;
        for (int t = 0; t < n_keys; ++t) {
            o += s[t] * v[key_row(t) + i];
        }
        out[i] = static_cast<float>(o / l);
    }
}

}  // namespace

std::vector<float> prefill_attention(const std::vector<float>& q,
                                     const std::vector<float>& k,
                                     const std::vector<float>& v,
                                     int chunk,
                                     int cached,
                                     int hq,
                                     int hkv,
                                     int hd,
                                     float scale) {
    std::vector<float> o(static_cast<std::size_t>(chunk) * hq * hd);
    const int group = hq / hkv;
    for (int i = 0; i < chunk; ++i) {
        for (int h = 0; h < hq; ++h) {
            const int kvh = h / group;
            auto row = [&](int t) { return (static_cast<std::size_t>(t) * hkv + kvh) * hd; };
            attend(&q[(static_cast<std::size_t>(i) * hq + h) * hd], k, v, cached + i + 1, hd, scale, row,
                   &o[(static_cast<std::size_t>(i) * hq + h) * hd]);
        }
    }
    return o;
}

std::vector<float> decode_attention(const std::vector<float>& q,
                                    const std::vector<float>& k_cache,
                                    const std::vector<float>& v_cache,
                                    const std::vector<int>& block_table,
                                    int max_blocks,
                                    const std::vector<int>& seq_lens,
                                    int hq,
                                    int hkv,
                                    int hd,
                                    int block_size,
                                    float scale) {
    const int seqs = static_cast<int>(seq_lens.size());
    std::vector<float> o(static_cast<std::size_t>(seqs) * hq * hd);
    const int group = hq / hkv;
    for (int s = 0; s < seqs; ++s) {
        for (int h = 0; h < hq; ++h) {
            const int kvh = h / group;
            auto row = [&](int t) {
                const std::size_t slot =
                    static_cast<std::size_t>(block_table[static_cast<std::size_t>(s) * max_blocks + t / block_size]) *
                        block_size +
                    t % block_size;
                return (slot * hkv + kvh) * hd;
            };
            attend(&q[(static_cast<std::size_t>(s) * hq + h) * hd], k_cache, v_cache, seq_lens[s], hd, scale, row,
                   &o[(static_cast<std::size_t>(s) * hq + h) * hd]);
        }
    }
    return o;
}

void kv_cache_write(const std::vector<float>& k,
                    const std::vector<int>& slots,
                    int row_elems,
                    std::vector<float>& cache) {
    for (std::size_t t = 0; t < slots.size(); ++t) {
        std::copy_n(&k[t * row_elems], row_elems, &cache[static_cast<std::size_t>(slots[t]) * row_elems]);
    }
}

std::vector<float> gdn_recurrent(const std::vector<float>& q,
                                 const std::vector<float>& k,
                                 const std::vector<float>& v,
                                 const std::vector<float>& g,
                                 const std::vector<float>& beta,
                                 std::vector<float>& state,
                                 int num_seqs,
                                 int seq_len,
                                 int hk,
                                 int hv,
                                 int dk,
                                 int dv,
                                 float scale) {
    std::vector<float> o(static_cast<std::size_t>(num_seqs) * seq_len * hv * dv);
    const int group = hv / hk;
    std::vector<double> qn(dk);
    std::vector<double> kn(dk);
    std::vector<double> r(dv);
    for (int s = 0; s < num_seqs; ++s) {
        for (int h = 0; h < hv; ++h) {
            const int kh = h / group;
            float* st = &state[(static_cast<std::size_t>(s) * hv + h) * dk * dv];
            for (int t = 0; t < seq_len; ++t) {
                const std::size_t tok = static_cast<std::size_t>(s) * seq_len + t;
                const float* qr = &q[(tok * hk + kh) * dk];
                const float* kr = &k[(tok * hk + kh) * dk];
                const float* vr = &v[(tok * hv + h) * dv];
                double qs = 0;
                double ks = 0;
                for (int i = 0; i < dk; ++i) {
                    qs += static_cast<double>(qr[i]) * qr[i];
                    ks += static_cast<double>(kr[i]) * kr[i];
                }
                const double qf = scale / std::sqrt(qs + 1e-6);
                const double kf = 1.0 / std::sqrt(ks + 1e-6);
                for (int i = 0; i < dk; ++i) {
                    qn[i] = qr[i] * qf;
                    kn[i] = kr[i] * kf;
                }
                const double a = std::exp(static_cast<double>(g[tok * hv + h]));
                const double b = beta[tok * hv + h];
                for (int j = 0; j < dv; ++j) {
                    double acc = 0;
                    for (int i = 0; i < dk; ++i) {
                        acc += a * st[i * dv + j] * kn[i];
                    }
                    r[j] = b * (vr[j] - acc);  // δ
                }
                for (int i = 0; i < dk; ++i) {
                    for (int j = 0; j < dv; ++j) {
                        st[i * dv + j] = static_cast<float>(a * st[i * dv + j] + kn[i] * r[j]);
                    }
                }
                for (int j = 0; j < dv; ++j) {
                    double acc = 0;
                    for (int i = 0; i < dk; ++i) {
                        acc += static_cast<double>(st[i * dv + j]) * qn[i];
                    }
                    o[(tok * hv + h) * dv + j] = static_cast<float>(acc);
                }
            }
        }
    }
    return o;
}

std::vector<float> conv1d(const std::vector<float>& x,
                          const std::vector<float>& w,
                          std::vector<float>& state,
                          int num_seqs,
                          int seq_len,
                          int channels) {
    constexpr int kK = 4;
    std::vector<float> y(x.size());
    if (state.empty()) {
        state.assign(static_cast<std::size_t>(num_seqs) * (kK - 1) * channels, 0.0f);
    }
    for (int s = 0; s < num_seqs; ++s) {
        for (int c = 0; c < channels; ++c) {
            // Extended input: three state values, then the sequence.
            std::vector<double> ext(kK - 1 + seq_len);
            for (int j = 0; j < kK - 1; ++j) {
                ext[j] = state[(static_cast<std::size_t>(s) * (kK - 1) + j) * channels + c];
            }
            for (int t = 0; t < seq_len; ++t) {
                ext[kK - 1 + t] = x[(static_cast<std::size_t>(s) * seq_len + t) * channels + c];
            }
            for (int t = 0; t < seq_len; ++t) {
                double acc = 0;
                for (int j = 0; j < kK; ++j) {
                    acc += w[static_cast<std::size_t>(c) * kK + j] * ext[t + j];
                }
                y[(static_cast<std::size_t>(s) * seq_len + t) * channels + c] =
                    static_cast<float>(acc / (1.0 + std::exp(-acc)));
            }
            for (int j = 0; j < kK - 1; ++j) {
                state[(static_cast<std::size_t>(s) * (kK - 1) + j) * channels + c] =
                    static_cast<float>(ext[seq_len + j]);
            }
        }
    }
    return y;
}

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, int rows, int width, float eps) {
    std::vector<float> y(x.size());
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < width; ++i) {
            ss += static_cast<double>(x[static_cast<std::size_t>(r) * width + i]) *
                  x[static_cast<std::size_t>(r) * width + i];
        }
        const double inv = 1.0 / std::sqrt(ss / width + eps);
        for (int i = 0; i < width; ++i) {
            y[static_cast<std::size_t>(r) * width + i] =
                static_cast<float>(x[static_cast<std::size_t>(r) * width + i] * inv * w[i]);
        }
    }
    return y;
}

std::vector<float> silu_mul(const std::vector<float>& x, int rows, int width) {
    std::vector<float> y(static_cast<std::size_t>(rows) * width);
    for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < width; ++i) {
            const double gt = x[static_cast<std::size_t>(r) * 2 * width + i];
            const double up = x[static_cast<std::size_t>(r) * 2 * width + width + i];
            y[static_cast<std::size_t>(r) * width + i] = static_cast<float>(gt / (1.0 + std::exp(-gt)) * up);
        }
    }
    return y;
}

void rope(std::vector<float>& x, const std::vector<int>& positions, int heads, int hd, int rot_dim, float theta) {
    const int half = rot_dim / 2;
    for (std::size_t t = 0; t < positions.size(); ++t) {
        for (int h = 0; h < heads; ++h) {
            float* p = &x[(t * heads + h) * hd];
            for (int i = 0; i < half; ++i) {
                const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * i / rot_dim);
                const double ang = positions[t] * inv_freq;
                const double a = p[i];
                const double b = p[i + half];
                p[i] = static_cast<float>(a * std::cos(ang) - b * std::sin(ang));
                p[i + half] = static_cast<float>(b * std::cos(ang) + a * std::sin(ang));
            }
        }
    }
}

std::vector<int> argmax_rows(const std::vector<float>& logits, int rows, int vocab) {
    std::vector<int> out(rows);
    for (int r = 0; r < rows; ++r) {
        const auto* b = &logits[static_cast<std::size_t>(r) * vocab];
        out[r] = static_cast<int>(std::max_element(b, b + vocab) - b);
    }
    return out;
}

// ---- MoE (vLLM fused_topk + fused_experts + Qwen3NextSparseMoeBlock's gated shared expert) ----
void moe_topk(const std::vector<float>& logits,
              int tokens,
              int num_experts,
              int top_k,
              bool renormalize,
              std::vector<int>& ids,
              std::vector<float>& weights) {
    ids.assign(static_cast<std::size_t>(tokens) * top_k, 0);
    weights.assign(ids.size(), 0.0f);
    for (int t = 0; t < tokens; ++t) {
        const float* row = &logits[static_cast<std::size_t>(t) * num_experts];
        const double mx = *std::max_element(row, row + num_experts);
        double sum = 0;
        for (int e = 0; e < num_experts; ++e) {
            sum += std::exp(row[e] - mx);
        }
        std::vector<bool> taken(num_experts, false);
        std::vector<double> prob(top_k);
        double selected = 0;
        for (int j = 0; j < top_k; ++j) {
            int best = -1;
            for (int e = 0; e < num_experts; ++e) {
                if (!taken[e] && (best < 0 || row[e] > row[best])) {  // strict: ties keep the lower id
                    best = e;
                }
            }
            taken[best] = true;
            ids[static_cast<std::size_t>(t) * top_k + j] = best;
            prob[j] = std::exp(row[best] - mx) / sum;
            selected += prob[j];
        }
        for (int j = 0; j < top_k; ++j) {
            weights[static_cast<std::size_t>(t) * top_k + j] =
                static_cast<float>(renormalize ? prob[j] / selected : prob[j]);
        }
    }
}

namespace {

std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v) {
        x = round_bf16(x);
    }
    return v;
}

// SwiGLU MLP of one row set: bf16(bf16(silu_mul(bf16(x · w13ᵀ))) · w2ᵀ).
std::vector<float> swiglu(const std::vector<float>& x, const float* w13, const float* w2, int rows, int h, int inter) {
    const std::vector<float> w13v(w13, w13 + static_cast<std::size_t>(2) * inter * h);
    const std::vector<float> w2v(w2, w2 + static_cast<std::size_t>(h) * inter);
    const std::vector<float> act = rounded(silu_mul(rounded(gemm(x, w13v, rows, 2 * inter, h)), rows, inter));
    return rounded(gemm(act, w2v, rows, h, inter));
}

}  // namespace

std::vector<float> moe_experts(const std::vector<float>& x,
                               const std::vector<int>& ids,
                               const std::vector<float>& weights,
                               const MoeRefWeights& w,
                               const MoeShape& shape,
                               int tokens) {
    const std::size_t h = shape.hidden;
    const std::size_t inter = shape.intermediate;
    const int top_k = shape.top_k;
    std::vector<double> acc(static_cast<std::size_t>(tokens) * h, 0.0);
    for (int t = 0; t < tokens; ++t) {
        const std::vector<float> row(x.begin() + t * h, x.begin() + (t + 1) * h);
        for (int j = 0; j < top_k; ++j) {
            const std::size_t e = ids[static_cast<std::size_t>(t) * top_k + j];
            const std::vector<float> y =
                swiglu(row, &w.w13[e * 2 * inter * h], &w.w2[e * h * inter], 1, shape.hidden, shape.intermediate);
            for (std::size_t c = 0; c < h; ++c) {
                acc[t * h + c] += static_cast<double>(weights[static_cast<std::size_t>(t) * top_k + j]) * y[c];
            }
        }
        if (shape.shared_intermediate > 0) {
            const std::vector<float> y =
                swiglu(row, w.shared_w13.data(), w.shared_w2.data(), 1, shape.hidden, shape.shared_intermediate);
            double gate = 1.0;
            if (shape.shared_expert_gate) {
                double dot = 0;
                for (std::size_t c = 0; c < h; ++c) {
                    dot += static_cast<double>(row[c]) * w.shared_gate[c];
                }
                gate = 1.0 / (1.0 + std::exp(-dot));
            }
            for (std::size_t c = 0; c < h; ++c) {
                acc[t * h + c] += gate * y[c];
            }
        }
    }
    std::vector<float> out(acc.size());
    for (std::size_t i = 0; i < acc.size(); ++i) {
        out[i] = static_cast<float>(acc[i]);
    }
    return out;
}

std::vector<float> moe_layer(const std::vector<float>& x, const MoeRefWeights& w, const MoeShape& shape, int tokens) {
    const std::vector<float> logits = rounded(gemm(x, w.router, tokens, shape.num_experts, shape.hidden));
    std::vector<int> ids;
    std::vector<float> weights;
    moe_topk(logits, tokens, shape.num_experts, shape.top_k, shape.norm_topk_prob, ids, weights);
    return moe_experts(x, ids, weights, w, shape, tokens);
}

}  // namespace servesim::kernels::ref
