// C ABI over a few kernels for the Python composition check (calibration/runner/composition.py loads it with ctypes
// and passes torch tensors' data pointers and the current stream). Returns 0 on success, 1 on error (message in
// servesim_last_error()).
#include <cstdint>
#include <exception>
#include <string>

#include "kernels/kernels.h"

namespace {

thread_local std::string g_last_error;

template <typename F>
int guarded(F&& f) {
    try {
        f();
        return 0;
    } catch (const std::exception& e) {
        g_last_error = e.what();
        return 1;
    }
}

// The tensors and shape the two GDN entries share, from the C arguments (bf16 buffers as void*).
servesim::kernels::GdnIo gdn_io(const void* q,
                                const void* k,
                                const void* v,
                                const float* g,
                                const float* beta,
                                void* o,
                                void* state,
                                int state_fp32,
                                int num_seqs,
                                int hk,
                                int hv,
                                float scale) {
    servesim::kernels::GdnIo io;
    io.q = static_cast<const std::uint16_t*>(q);
    io.k = static_cast<const std::uint16_t*>(k);
    io.v = static_cast<const std::uint16_t*>(v);
    io.g = g;
    io.beta = beta;
    io.o = static_cast<std::uint16_t*>(o);
    io.state = state;
    io.state_dtype = state_fp32 ? servesim::kernels::StateDtype::kFp32 : servesim::kernels::StateDtype::kBf16;
    io.num_seqs = num_seqs;
    io.num_k_heads = hk;
    io.num_v_heads = hv;
    io.scale = scale;
    return io;
}

}  // namespace

extern "C" {

const char* servesim_last_error() {
    return g_last_error.c_str();
}

std::size_t servesim_gdn_prefill_workspace_bytes(int num_seqs, int seq_len, int hk, int hv) {
    return servesim::kernels::gdn_prefill_workspace_bytes(num_seqs, seq_len, hk, hv);
}

int servesim_gdn_prefill(const void* q,
                         const void* k,
                         const void* v,
                         const float* g,
                         const float* beta,
                         void* o,
                         void* state,
                         int state_fp32,
                         int use_initial_state,
                         int num_seqs,
                         int seq_len,
                         int hk,
                         int hv,
                         float scale,
                         void* workspace,
                         void* stream) {
    return guarded([&] {
        servesim::kernels::GdnPrefillArgs a;
        static_cast<servesim::kernels::GdnIo&>(a) =
            gdn_io(q, k, v, g, beta, o, state, state_fp32, num_seqs, hk, hv, scale);
        a.use_initial_state = use_initial_state != 0;
        a.seq_len = seq_len;
        a.workspace = workspace;
        servesim::kernels::gdn_prefill(a, stream);
    });
}

int servesim_gdn_decode(const void* q,
                        const void* k,
                        const void* v,
                        const float* g,
                        const float* beta,
                        void* o,
                        void* state,
                        int state_fp32,
                        int num_seqs,
                        int hk,
                        int hv,
                        float scale,
                        void* stream) {
    return guarded([&] {
        servesim::kernels::GdnDecodeArgs a;
        static_cast<servesim::kernels::GdnIo&>(a) =
            gdn_io(q, k, v, g, beta, o, state, state_fp32, num_seqs, hk, hv, scale);
        servesim::kernels::gdn_decode(a, stream);
    });
}

int servesim_conv1d_prefill(const void* x,
                            const void* w,
                            void* state,
                            int use_initial_state,
                            void* y,
                            int num_seqs,
                            int seq_len,
                            int channels,
                            void* stream) {
    return guarded([&] {
        servesim::kernels::conv1d_prefill(static_cast<const std::uint16_t*>(x), static_cast<const std::uint16_t*>(w),
                                          static_cast<std::uint16_t*>(state), use_initial_state != 0,
                                          static_cast<std::uint16_t*>(y), num_seqs, seq_len, channels, stream);
    });
}

int servesim_conv1d_update(
    const void* x, const void* w, void* state, void* y, int num_seqs, int channels, void* stream) {
    return guarded([&] {
        servesim::kernels::conv1d_update(static_cast<const std::uint16_t*>(x), static_cast<const std::uint16_t*>(w),
                                         static_cast<std::uint16_t*>(state), static_cast<std::uint16_t*>(y), num_seqs,
                                         channels, stream);
    });
}

int servesim_prefill_attention_variant(const void* q,
                                       const void* k,
                                       const void* v,
                                       void* o,
                                       int chunk,
                                       int cached,
                                       int hq,
                                       int hkv,
                                       int hd,
                                       float scale,
                                       int variant,
                                       void* stream);

int servesim_prefill_attention(const void* q,
                               const void* k,
                               const void* v,
                               void* o,
                               int chunk,
                               int cached,
                               int hq,
                               int hkv,
                               int hd,
                               float scale,
                               void* stream) {
    return servesim_prefill_attention_variant(q, k, v, o, chunk, cached, hq, hkv, hd, scale, 0, stream);
}

// As servesim_prefill_attention with PrefillAttentionArgs::variant (0 = default; prefill_attention.cu lists them).
int servesim_prefill_attention_variant(const void* q,
                                       const void* k,
                                       const void* v,
                                       void* o,
                                       int chunk,
                                       int cached,
                                       int hq,
                                       int hkv,
                                       int hd,
                                       float scale,
                                       int variant,
                                       void* stream) {
    return guarded([&] {
        servesim::kernels::PrefillAttentionArgs a;
        a.q = static_cast<const std::uint16_t*>(q);
        a.k = static_cast<const std::uint16_t*>(k);
        a.v = static_cast<const std::uint16_t*>(v);
        a.o = static_cast<std::uint16_t*>(o);
        a.chunk_tokens = chunk;
        a.cached_tokens = cached;
        a.num_q_heads = hq;
        a.num_kv_heads = hkv;
        a.head_dim = hd;
        a.scale = scale;
        a.variant = variant;
        servesim::kernels::prefill_attention(a, stream);
    });
}

}  // extern "C"
