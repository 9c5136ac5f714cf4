// Launch API of the CUDA kernels that calibration times (docs/ARCHITECTURE.md, "Layers"). CUDA-free header: device
// pointers
// are typed by element bits (bf16 = uint16_t, fp8 e4m3 = uint8_t), streams are opaque. Every launch checks its
// arguments and the launch itself and throws std::runtime_error on failure. CPU references: kernels/cpu_reference.h.
// Layouts (row-major, tokens outermost): activations [tokens, heads, head_dim]; paged KV cache
// [num_blocks, block_size, kv_heads, head_dim] (vLLM's per-layer key_cache/value_cache); GDN state
// [slots, v_heads, k_head_dim, v_head_dim] (key-major, as fla; vLLM stores the transpose).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace servesim::kernels {

using bf16_t = std::uint16_t;
using fp8_t = std::uint8_t;
using StreamHandle = void*;  // cudaStream_t; nullptr = default stream

// ---- GEMM (cuBLAS, bf16 in/out, fp32 accumulate): C[M,N] = A[M,K] · W[N,K]ᵀ (a torch Linear) ----
class GemmRunner {
  public:
    GemmRunner();
    ~GemmRunner();
    GemmRunner(const GemmRunner&) = delete;
    GemmRunner& operator=(const GemmRunner&) = delete;
    void run(const bf16_t* a, const bf16_t* w, bf16_t* c, int m, int n, int k, StreamHandle stream);

  private:
    void* handle_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
};

// ---- FP8 W8A8 GEMM (cuBLASLt e4m3 × e4m3, fp32 accumulate, bf16 out): C = A · Wᵀ ----
// Shapes as GemmRunner; M, N and K multiples of 16 (cuBLASLt's fp8 rule: callers pad the token count M, as a tiled
// fp8 kernel computes whole tiles anyway). The kernel choice of each shape is fixed on its first call (cuBLASLt
// heuristic). Two scalings, fixed per runner (dequantized value = stored · scale):
//  - kPerTensor: a_scale / w_scale point to one float each, 16-byte aligned (vLLM's per-tensor fp8 checkpoints);
//  - kBlock128: the DeepSeek-V3 / Qwen3-FP8 recipe (`weight_block_size: [128, 128]`): a_scale holds one float per
//    token and 128-column group, element (token t, group g) at g·M + t (token-contiguous, as vLLM's
//    per_token_group_quant_fp8 with column-major scales writes it; quantize_fp8_per_token_group below);
//    w_scale holds one float per 128×128 weight tile, tile (n-block j, k-block g) at j·round_up(K/128, 4) + g.
//    K a multiple of 128. Hopper only (cuBLASLt ≥ 12.9).
enum class Fp8Scaling { kPerTensor, kBlock128 };

class Fp8GemmRunner {
  public:
    explicit Fp8GemmRunner(Fp8Scaling scaling = Fp8Scaling::kPerTensor);
    ~Fp8GemmRunner();
    Fp8GemmRunner(const Fp8GemmRunner&) = delete;
    Fp8GemmRunner& operator=(const Fp8GemmRunner&) = delete;
    void run(const fp8_t* a, const fp8_t* w, bf16_t* c, int m, int n, int k, const float* a_scale,
             const float* w_scale, StreamHandle stream);
    [[nodiscard]] Fp8Scaling scaling() const { return scaling_; }

  private:
    struct Plans;
    std::unique_ptr<Plans> plans_;
    Fp8Scaling scaling_;
    void* handle_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
};

// Floats of kBlock128 weight scales for an N×K weight: ceil(N/128) · round_up(K/128, 4).
[[nodiscard]] inline std::size_t fp8_block_weight_scale_count(int n, int k) {
    const std::size_t kb4 = (static_cast<std::size_t>(k) / 128 + 3) / 4 * 4;
    return (static_cast<std::size_t>(n) + 127) / 128 * kb4;
}

// Dynamic per-token fp8 quantization (vLLM dynamic_per_token_scaled_fp8_quant): scales[r] = max|x[r,:]| / 448,
// y[r,:] = e4m3(x[r,:] / scales[r]). width a multiple of 8.
void quantize_fp8_per_token(const bf16_t* x, fp8_t* y, float* scales, int rows, int width, StreamHandle stream);

// Dynamic per-token-group fp8 quantization, groups of 128 columns (vLLM per_token_group_quant_fp8, group_size 128,
// column-major scales): scales[g · rows + r] = max|x[r, 128g : 128g+128]| / 448, y = e4m3(x / scale). width a
// multiple of 128; rows a multiple of 4 (the scale columns stay 16-byte aligned for cuBLASLt).
void quantize_fp8_per_token_group(const bf16_t* x, fp8_t* y, float* scales, int rows, int width, StreamHandle stream);

// ---- Causal prefill attention, FlashAttention-2 style (mma.sync m16n8k16, bf16, GQA, head_dim 128 or 256) ----
// One sequence: q [chunk, Hq, hd]; k, v [cached + chunk, Hkv, hd] (the cached prefix first); o [chunk, Hq, hd].
// Query i sits at absolute position cached + i and attends keys 0 … cached + i.
struct PrefillAttentionArgs {
    const bf16_t* q = nullptr;
    const bf16_t* k = nullptr;
    const bf16_t* v = nullptr;
    bf16_t* o = nullptr;
    int chunk_tokens = 0;
    int cached_tokens = 0;
    int num_q_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;  // 128 or 256
    float scale = 0;   // softmax scale, usually 1/sqrt(head_dim)
    // Tiling (prefill_attention.cu's header): 0 the per-head-dim default, 1 the previous 64×64 kernel, 2 128×64 with
    // 4 warps × 32 rows (hd 128), 3 128×64 with 8 warps × 16 rows, 4 256×64 with 8 warps × 32 rows (hd 128).
    int variant = 0;
};

void prefill_attention(const PrefillAttentionArgs& args, StreamHandle stream);

// ---- Paged decode attention, split-K over the block table (bf16 or fp8 e4m3 KV with per-tensor scales) ----
enum class KvDtype { kBf16, kFp8E4m3 };

struct DecodeAttentionArgs {
    const bf16_t* q = nullptr;  // [seqs, Hq, hd]
    const void* k_cache = nullptr;
    const void* v_cache = nullptr;
    KvDtype kv_dtype = KvDtype::kBf16;
    float k_scale = 1.0f;
    float v_scale = 1.0f;
    const int* block_table = nullptr;  // [seqs, max_blocks_per_seq]
    int max_blocks_per_seq = 0;
    const int* seq_lens = nullptr;  // [seqs] context tokens including the new one
    int num_seqs = 0;
    int num_q_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;  // 128 or 256
    int block_size = 16;
    float scale = 0;
    bf16_t* o = nullptr;         // [seqs, Hq, hd]
    float* workspace = nullptr;  // decode_attention_workspace_bytes()
    int num_splits = 1;          // partitions of the context; 1 = no merge pass
    int variant = 0;  // 0 = mma pipeline (default), 1 = previous register kernel, 2 / 3 = mma deeper / shallower
};

// Splits so that kv_heads·seqs·splits fills the GPU about twice, each split ≥ 256 tokens.
[[nodiscard]] int decode_attention_splits(int num_seqs, int num_kv_heads, int max_context_tokens, int num_sms);
[[nodiscard]] std::size_t decode_attention_workspace_bytes(int num_seqs, int num_q_heads, int head_dim, int num_splits);
void decode_attention(const DecodeAttentionArgs& args, StreamHandle stream);

// ---- KV-cache write (vLLM reshape_and_cache): token t's K/V go to slot slot_mapping[t] ----
struct KvWriteArgs {
    const bf16_t* k = nullptr;  // [tokens, Hkv, hd]
    const bf16_t* v = nullptr;
    void* k_cache = nullptr;
    void* v_cache = nullptr;
    KvDtype kv_dtype = KvDtype::kBf16;
    float k_scale = 1.0f;
    float v_scale = 1.0f;
    const int* slot_mapping = nullptr;  // [tokens]: block · block_size + offset
    int num_tokens = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
};

void kv_cache_write(const KvWriteArgs& args, StreamHandle stream);

// ---- Gated DeltaNet (dk = dv = 128; Hv a multiple of Hk) ----
enum class StateDtype { kFp32, kBf16 };

// What both GDN entry points take, T being the step's tokens: q, k [T, Hk, 128], v [T, Hv, 128], g [T, Hv]
// log-decay (≤ 0), beta [T, Hv] in (0, 1), o [T, Hv, 128]; the recurrent state in state_dtype; the sequences, head
// counts and q's scale.
struct GdnIo {
    const bf16_t* q = nullptr;
    const bf16_t* k = nullptr;
    const bf16_t* v = nullptr;
    const float* g = nullptr;
    const float* beta = nullptr;
    bf16_t* o = nullptr;
    void* state = nullptr;
    StateDtype state_dtype = StateDtype::kFp32;
    int num_seqs = 0;
    int num_k_heads = 0;
    int num_v_heads = 0;
    float scale = 0;
};

// Chunked prefill (chunk 64) of num_seqs sequences of seq_len tokens each, packed [seqs·seq_len, …].
// q, k [T, Hk, 128] (raw: L2-normalised inside; q also scaled by `scale`), v [T, Hv, 128], g [T, Hv] log-decay
// (≤ 0), beta [T, Hv] in (0, 1). state [seqs, Hv, 128, 128] in state_dtype: read as the initial state when
// use_initial_state, and overwritten with the final state. Kernels: q (and k, variant 1) L2-norm, chunk prep (K·Kᵀ,
// triangular solve, W/U), the serial state pass (one step per chunk), the chunk output (mma.sync).
struct GdnPrefillArgs : GdnIo {
    bool use_initial_state = false;
    int seq_len = 0;
    void* workspace = nullptr;  // gdn_prefill_workspace_bytes()
    // Launches to run (timing breakdowns only): bit 0 L2-norm, 1 chunk prep, 2 state pass, 3 output.
    unsigned stage_mask = 0xF;
    // 0: chunk prep on tensor cores, K·Kᵀ shared by a k-head's value heads, k L2-norm fused into it (bit 0 then
    // normalises q only); 1: the previous fp32 SIMT chunk prep (per value head) after a q+k L2-norm.
    int variant = 0;
};

[[nodiscard]] std::size_t gdn_prefill_workspace_bytes(int num_seqs, int seq_len, int num_k_heads, int num_v_heads);
void gdn_prefill(const GdnPrefillArgs& args, StreamHandle stream);

// Align-mode snapshot write: copies `count` states (bf16 or fp32 [Hv,128,128] each) from src slots to dst slots.
void gdn_snapshot_copy(const void* state,
                       void* snapshots,
                       StateDtype dtype,
                       const int* src_slots,
                       const int* dst_slots,
                       int count,
                       int num_v_heads,
                       StreamHandle stream);

// One recurrent decode step for num_seqs sequences: q, k [seqs, Hk, 128], v [seqs, Hv, 128], g, beta [seqs, Hv];
// state[state_slots[s]] updated in place; o [seqs, Hv, 128].
struct GdnDecodeArgs : GdnIo {
    const int* state_slots = nullptr;  // nullptr = identity
};

void gdn_decode(const GdnDecodeArgs& args, StreamHandle stream);

// ---- Causal depthwise conv1d + SiLU (kernel width 4) ----
// Prefill: x [seqs·len, C] → y [seqs·len, C]; weight [C, 4]; conv_state [seqs, 3, C] bf16 (initial if
// use_initial_state, then the last three inputs are written back). variant 0: 16-byte vectors, each thread 8
// channels × 16 consecutive tokens with the 3-token history in registers (needs C % 8 == 0 and 16-byte aligned
// pointers, else variant 1 runs); 1: the previous one-thread-per-element kernel.
void conv1d_prefill(const bf16_t* x,
                    const bf16_t* weight,
                    bf16_t* conv_state,
                    bool use_initial_state,
                    bf16_t* y,
                    int num_seqs,
                    int seq_len,
                    int channels,
                    StreamHandle stream,
                    int variant = 0);
// Update: one token per sequence, x [seqs, C]; state [seqs, 3, C] shifted in place.
void conv1d_update(const bf16_t* x,
                   const bf16_t* weight,
                   bf16_t* conv_state,
                   bf16_t* y,
                   int num_seqs,
                   int channels,
                   StreamHandle stream);

// ---- Mixture of experts (kernels/moe.cu): vLLM's FusedMoE steps for T tokens — router GEMM, top-k over the
// softmax, permutation into expert order, expert gate_up and down as grouped GEMMs (one problem per expert with its
// own row count), SiLU·mul, the weighted un-permute sum — plus Qwen3-Next's shared expert and its sigmoid gate. ----
struct MoeShape {
    int hidden = 0;
    int num_experts = 0;
    int top_k = 0;
    int intermediate = 0;            // per expert, this rank's share under tensor parallelism
    int shared_intermediate = 0;     // 0 = no shared expert
    bool shared_expert_gate = true;  // sigmoid(x · w_gate) scales the shared expert (Qwen3-Next)
    bool norm_topk_prob = true;      // renormalise the k selected probabilities to sum 1
};

struct MoeWeights {
    const bf16_t* router = nullptr;       // [E, h]
    const bf16_t* w13 = nullptr;          // [E, 2I, h]: each expert's gate rows, then its up rows (vLLM w13_weight)
    const bf16_t* w2 = nullptr;           // [E, h, I]
    const bf16_t* shared_w13 = nullptr;   // [2Is, h]
    const bf16_t* shared_w2 = nullptr;    // [h, Is]
    const bf16_t* shared_gate = nullptr;  // [h]
};

// k distinct experts per token drawn uniformly from a seeded mt19937_64 (raw output): the routing of a random
// router, [T, k] row-major. Used to fix the grouping of timed graphs.
[[nodiscard]] std::vector<int> moe_random_routing(int num_tokens, int top_k, int num_experts, std::uint64_t seed);

enum class MoeGemmMode { kGrouped, kLoop };  // cublasGemmGroupedBatchedEx, or one cublasGemmEx per expert

// The grouped GEMMs take each expert's row count on the host, so the grouping is fixed by set_routing() (host top-k
// ids, outside any capture) and every forward_experts() after it runs that grouping; route() still computes the
// router logits and the top-k on the device (their cost, and the weights the un-permute uses).
class MoeRunner {
  public:
    MoeRunner(const MoeShape& shape, int max_tokens);
    ~MoeRunner();
    MoeRunner(const MoeRunner&) = delete;
    MoeRunner& operator=(const MoeRunner&) = delete;

    // Router logits [T, E] (bf16) and top-k softmax → topk_ids() [T, k], topk_weights() [T, k] (device).
    void route(const bf16_t* x, int num_tokens, const MoeWeights& w, StreamHandle stream);
    // Fixes the grouping from host top-k ids [T, k]: counts and offsets per expert, each row's permuted position.
    void set_routing(const int* topk_ids_host, int num_tokens);
    // Permute, grouped gate_up, SiLU·mul, grouped down, shared expert, weighted sum → out [T, h]. Capturable.
    void forward_experts(const bf16_t* x, const MoeWeights& w, bf16_t* out, StreamHandle stream);
    // Grouped by default; the first uncaptured forward_experts() falls back to kLoop (and says so on stderr) when
    // cuBLAS refuses the grouped call or its capture.
    void set_gemm_mode(MoeGemmMode mode);
    [[nodiscard]] MoeGemmMode gemm_mode() const;

    [[nodiscard]] const int* topk_ids() const;
    [[nodiscard]] const float* topk_weights() const;
    [[nodiscard]] const bf16_t* router_logits() const;
    [[nodiscard]] int num_active_experts() const;  // experts with at least one row in the current routing

  private:
    struct State;
    std::unique_ptr<State> s_;
};

// ---- Small ops ----
// y = x / rms(x) · w (fp32 math), rows of `width`; when residual != nullptr, x + residual is normalised and
// written back to residual (vLLM fused_add_rms_norm).
void rms_norm(const bf16_t* x,
              bf16_t* residual,
              const bf16_t* weight,
              bf16_t* y,
              int rows,
              int width,
              float eps,
              StreamHandle stream);
// x [rows, 2·width] = [gate | up] → y [rows, width] = silu(gate) · up.
void silu_mul(const bf16_t* x, bf16_t* y, int rows, int width, StreamHandle stream);
// Neox-style rotate-half RoPE in place on the first rot_dim dims of each head: x [tokens, heads, head_dim].
void rope(bf16_t* x,
          const int* positions,
          int tokens,
          int heads,
          int head_dim,
          int rot_dim,
          float theta,
          StreamHandle stream);
// Greedy sampling: argmax over logits [rows, vocab] (bf16) → tokens [rows].
void argmax_rows(const bf16_t* logits, int* tokens, int rows, int vocab, StreamHandle stream);
// Embedding gather: out[t] = table[ids[t]], rows of `width`.
void embedding_gather(const bf16_t* table, const int* ids, bf16_t* out, int tokens, int width, StreamHandle stream);

}  // namespace servesim::kernels
