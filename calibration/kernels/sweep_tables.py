#!/usr/bin/env python3
# Kernel-table sweep (issue 38, item 1): times, on the GPU it runs on, the operations one vLLM step is made of and
# writes them as calibration/kernels/<catalog name>.yaml in the format of docs/briefs "kernel-table format"
# (servesim_kernel_table: 1). It owns the measurement only; the cost model that composes steps from it lives elsewhere.
#
# What each op stands for in vLLM (v0.15-era, V1 engine):
#   gemm_bf16          unquantized linear layers: vllm/model_executor/layers/linear.py UnquantizedLinearMethod.apply
#                      -> F.linear -> cuBLASLt (timed here through the same F.linear).
#   gemm_fp8_tensor    Fp8LinearMethod per-tensor W8A8; vLLM calls cutlass_scaled_mm (CUTLASS 3.x, fast accumulation);
#                      timed here with torch._scaled_mm (cuBLASLt), use_fast_accum=True.
#   gemm_fp8_rowwise   per-token activation x per-channel weight scales (vLLM: cutlass_scaled_mm with vector scales);
#                      timed with torch._scaled_mm row-wise scales (torch's CUTLASS row-wise kernel).
#   gemm_fp8_block     1x128 activation / 128x128 weight block scales (vLLM: W8A8BlockFp8LinearOp, DeepGEMM/CUTLASS/
#                      Triton); timed with torch._scaled_mm block-wise scales (cuBLASLt >= 12.9), only if the
#                      result checks against a dequantised reference.
#   attn_prefill(_cached), attn_decode
#                      vLLM's FlashAttention backend (vllm/v1/attention/backends/flash_attn.py, paged KV, varlen).
#                      Timed with torch SDPA (flash / cuDNN / mem-efficient backends) over a CONTIGUOUS KV cache: the
#                      `backend:` field says which; there is no paged kernel in torch.
#   attn_decode_mla    vLLM's MLA backends (FlashMLA / Triton MLA) with absorbed weights; timed as bmm + softmax + bmm
#                      over the latent cache (kv_lora_rank + rope dims), 3 kernels.
#   moe                fused_moe (Triton) routed experts; timed with torch._grouped_mm (CUTLASS grouped GEMM) for
#                      gate_up and down plus one SiLU*mul kernel.
#   moe_routing        topk_softmax + moe_align_block_size + permute/unpermute (moe_sum); timed as plain torch ops
#                      (softmax, topk, renormalise, argsort, gather, scatter, weighted sum): an upper bound.
#   rmsnorm / silu_mul / rope / qk_norm
#                      vLLM's fused_add_rms_norm, silu_and_mul, rotary_embedding (neox) CUDA kernels; timed with
#                      one-pass Triton kernels written here that move the same bytes (checked against torch).
#   sampling           vLLM's Sampler: greedy = argmax; top_p = the torch-native sort/softmax/cumsum path
#                      (vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p + random sample by exponential).
#   forwards           whole forwards written in plain torch from the same kernels (random weights).
# Timing (device README METHOD.md): every op is warmed up eagerly, then captured N times into a CUDA graph, cycling
# over enough input sets (random data) that they exceed 3x L2; the graph is replayed several times, each replay
# timed with CUDA events; the median replay time divided by N is one call. Whole prefill forwards are timed eagerly.
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import time
import traceback

# ----------------------------------------------------------------------------------------------------------------
# Model shapes (hidden, intermediate, heads ...): from models/presets/*.yaml, the development-set configs in
# the validation runs' models/*.json (their published config.json files; docs/SOURCES.md, "The validation runs") and
# the published config.json files named in the comments.
# prio 0 = development set and the issue's target models, 1 = other presets (timed after the rest).
MODELS = [
    dict(name="Llama-2-7b", h=4096, inter=11008, hq=32, hkv=32, hd=128, vocab=32000, tps=[1, 2, 4], prio=0),
    dict(name="CodeLlama-34b", h=8192, inter=22016, hq=64, hkv=8, hd=128, vocab=32000, tps=[1, 2, 4], prio=0),
    dict(name="Llama-2-70b", h=8192, inter=28672, hq=64, hkv=8, hd=128, vocab=32000, tps=[1, 2, 4, 8], prio=0),
    dict(name="Mixtral-8x7B", h=4096, inter=None, hq=32, hkv=8, hd=128, vocab=32000, tps=[1, 2, 4],
         moe=(8, 2, 14336), prio=0),
    dict(name="Qwen3-4B", h=2560, inter=9728, hq=32, hkv=8, hd=128, vocab=151936, tps=[1, 2, 4], prio=0),
    dict(name="Llama-3.1-8B", h=4096, inter=14336, hq=32, hkv=8, hd=128, vocab=128256, tps=[1, 2, 4], prio=0),
    # Qwen/Qwen3-30B-A3B config.json: hidden 2048, 48 layers, 32 q / 4 kv heads x 128, 128 experts top-8, moe 768
    dict(name="Qwen3-30B-A3B", h=2048, inter=None, hq=32, hkv=4, hd=128, vocab=151936, tps=[1, 2, 4],
         moe=(128, 8, 768), prio=0),
    dict(name="Qwen3-8B", h=4096, inter=12288, hq=32, hkv=8, hd=128, vocab=151936, tps=[1, 2, 4], prio=1),
    dict(name="Qwen3-32B", h=5120, inter=25600, hq=64, hkv=8, hd=128, vocab=151936, tps=[1, 2, 4], prio=1),
    dict(name="Llama-3.1-70B", h=8192, inter=28672, hq=64, hkv=8, hd=128, vocab=128256, tps=[1, 2, 4, 8], prio=1),
    dict(name="Llama-3.1-405B", h=16384, inter=53248, hq=128, hkv=8, hd=128, vocab=128256, tps=[2, 4, 8], prio=1),
    dict(name="Qwen3-235B-A22B", h=4096, inter=None, hq=64, hkv=4, hd=128, vocab=151936, tps=[2, 4, 8],
         moe=(128, 8, 1536), prio=1),
    dict(name="MiniMax-M2.5", h=3072, inter=None, hq=48, hkv=8, hd=128, vocab=200064, tps=[2, 4, 8],
         moe=(256, 8, 1536), prio=1),
    # hybrids: attention layers have an output gate (q projection doubled); GDN projections from the published
    # config.json files
    dict(name="Qwen3.5-4B", h=2560, inter=9216, hq=16, hkv=4, hd=256, vocab=248320, tps=[1, 2], gated=True,
         gdn=(16, 32, 128, 128), prio=1),
    dict(name="Qwen3.5-27B", h=5120, inter=17408, hq=24, hkv=4, hd=256, vocab=248320, tps=[1, 2, 4], gated=True,
         gdn=(16, 48, 128, 128), prio=1),
    dict(name="Qwen3-Next-80B-A3B", h=2048, inter=None, hq=16, hkv=2, hd=256, vocab=151936, tps=[1, 2, 4],
         gated=True, gdn=(16, 32, 128, 128), moe=(512, 10, 512), shared=512, prio=1),
    # Nemotron-H-8B: Mamba2 in_proj h -> 2*8192 + 2*8*128 + 128, out_proj 8192 -> h; relu2 MLP 21504 (not gated)
    dict(name="Nemotron-H-8B", h=4096, inter=21504, hq=32, hkv=8, hd=128, vocab=131072, tps=[1, 2], relu2=True,
         mamba=(8192, 8, 128, 128), prio=1),
]

W4_GROUP = 128    # the usual GPTQ / AWQ group size
W4_INNER_K = 8    # tinygemm's inner k tiles: needs k % (8 * 16) == 0
M_GRID = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144,
          8192, 16384]


def gemm_shapes(prio, only=None):
    """Distinct (n, k) per-rank projection shapes of the models of one priority, in first-seen order."""
    seen = {}
    for mdl in MODELS:
        if mdl["prio"] != prio or (only and mdl["name"] not in only):
            continue
        h, hq, hkv, hd = mdl["h"], mdl["hq"], mdl["hkv"], mdl["hd"]
        for tp in mdl["tps"]:
            if hq % tp:
                continue
            kv = max(1, hkv // tp)
            qn = hq // tp * hd * (2 if mdl.get("gated") else 1)
            shapes = [("qkv", qn + 2 * kv * hd, h), ("o", h, hq // tp * hd), ("lm_head", mdl["vocab"] // tp, h)]
            if mdl.get("inter"):
                if mdl.get("relu2"):
                    shapes += [("up", mdl["inter"] // tp, h), ("down", h, mdl["inter"] // tp)]
                else:
                    shapes += [("gate_up", 2 * mdl["inter"] // tp, h), ("down", h, mdl["inter"] // tp)]
            if mdl.get("moe"):
                shapes.append(("router", mdl["moe"][0], h))
            if mdl.get("shared"):
                shapes += [("shared_gate_up", 2 * mdl["shared"] // tp, h), ("shared_down", h, mdl["shared"] // tp)]
            if mdl.get("gdn"):
                hk, hv, dk, dv = mdl["gdn"]
                shapes += [("gdn_in_qkvz", (2 * hk * dk + 2 * hv * dv) // tp, h), ("gdn_in_ba", 2 * hv // tp, h),
                           ("gdn_out", h, hv * dv // tp)]
            if mdl.get("mamba"):
                di, ng, ds, nh = mdl["mamba"]
                shapes += [("mamba_in", (2 * di + 2 * ng * ds + nh) // tp, h), ("mamba_out", h, di // tp)]
            for use, n, k in shapes:
                if n % 16 or k % 16:
                    continue
                seen.setdefault((n, k), []).append(f"{mdl['name']}/tp{tp}/{use}")
    return seen



# ----------------------------------------------------------------------------------------------------------------
# Triton kernels (module level: Triton resolves the names a kernel uses among the module's globals): one-pass
# versions of vLLM's fused_add_rms_norm, silu_and_mul and neox rotary_embedding CUDA kernels.
try:
    import triton
    import triton.language as tl
except Exception:  # the CPU-only --list-shapes path needs neither
    triton = None

if triton is not None:
    @triton.jit
    def _rmsnorm_k(x_ptr, r_ptr, w_ptr, o_ptr, N, row_stride, H, head_stride, eps,
                   HAS_RES: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        t = row // H
        j = row % H
        base = t * row_stride + j * head_stride
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_RES:
            r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
            x = x + r
            tl.store(r_ptr + base + cols, x.to(tl.bfloat16), mask=mask)
        var = tl.sum(x * x, axis=0) / N
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * tl.rsqrt(var + eps) * w
        tl.store(o_ptr + base + cols, y.to(tl.bfloat16), mask=mask)

    @triton.jit
    def _silu_mul_k(x_ptr, o_ptr, I, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < I
        g = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
        y = g / (1.0 + tl.exp(-g)) * u
        tl.store(o_ptr + row * I + cols, y.to(tl.bfloat16), mask=mask)

    @triton.jit
    def _rope_k(x_ptr, pos_ptr, cs_ptr, row_stride, H, D: tl.constexpr, HALF: tl.constexpr,
                HP2: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        p = tl.load(pos_ptr + t).to(tl.int64)
        hs = tl.arange(0, HP2)[:, None]
        ds = tl.arange(0, HALF)[None, :]
        mask = (hs < H) & (ds < HALF)
        cos = tl.load(cs_ptr + p * (2 * HALF) + ds).to(tl.float32)
        sin = tl.load(cs_ptr + p * (2 * HALF) + HALF + ds).to(tl.float32)
        ptr = x_ptr + t * row_stride + hs * D + ds
        x1 = tl.load(ptr, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(ptr + HALF, mask=mask, other=0.0).to(tl.float32)
        tl.store(ptr, (x1 * cos - x2 * sin).to(tl.bfloat16), mask=mask)
        tl.store(ptr + HALF, (x2 * cos + x1 * sin).to(tl.bfloat16), mask=mask)

    # vLLM's MoE routing as its own kernels do it (vllm/model_executor/layers/fused_moe: `topk_softmax` over the
    # router logits with renormalisation; `moe_align_block_size`, which counts each expert's token slots, pads each
    # expert's run to the GEMM tile height and scatters the slot ids into that padded order; `moe_sum` over the top-k
    # outputs after the second GEMM). Four kernels here as in vLLM (align is two: count + offsets + block experts,
    # then the scatter); the permutation itself is inside vLLM's fused_moe GEMMs and is not timed here.
    @triton.jit
    def _topk_softmax_k(lg_ptr, w_ptr, id_ptr, E, K: tl.constexpr, KP2: tl.constexpr, BLOCK_E: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK_E)
        x = tl.load(lg_ptr + row * E + offs, mask=offs < E, other=float("-inf")).to(tl.float32)
        p = tl.exp(x - tl.max(x, 0))
        p = p / tl.sum(p, 0)
        ks = tl.arange(0, KP2)
        wv = tl.zeros([KP2], dtype=tl.float32)
        iv = tl.zeros([KP2], dtype=tl.int32)
        for j in tl.static_range(K):
            v = tl.max(p, 0)
            i = tl.argmax(p, 0)
            wv = tl.where(ks == j, v, wv)
            iv = tl.where(ks == j, i, iv)
            p = tl.where(offs == i, -1.0, p)
        wv = wv / tl.sum(wv, 0)
        tl.store(w_ptr + row * K + ks, wv, mask=ks < K)
        tl.store(id_ptr + row * K + ks, iv, mask=ks < K)

    @triton.jit
    def _align_count_k(id_ptr, n, E, cnt_ptr, start_ptr, eid_ptr, sorted_ptr, npad_ptr, sorted_len, max_blocks,
                       BM: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr, BLOCK_B: tl.constexpr):
        bins = tl.arange(0, NB)
        hist = tl.zeros([NB], dtype=tl.int32)
        for s0 in range(0, n, BLOCK):
            o = s0 + tl.arange(0, BLOCK)
            ids = tl.load(id_ptr + o, mask=o < n, other=NB - 1)      # bin NB-1 > E-1: the padding bin
            hist += tl.histogram(ids, NB)
        hist = tl.where(bins < E, hist, 0)
        padded = (hist + BM - 1) // BM * BM
        end = tl.cumsum(padded, 0)
        start = end - padded
        tl.store(start_ptr + bins, start, mask=bins < E)
        tl.store(cnt_ptr + bins, tl.zeros([NB], dtype=tl.int32), mask=bins < E)
        total = tl.sum(padded, 0)
        tl.store(npad_ptr, total)
        for b0 in range(0, max_blocks, BLOCK_B):
            b = b0 + tl.arange(0, BLOCK_B)
            pos = b * BM
            e = tl.sum((end[None, :] <= pos[:, None]).to(tl.int32), 1)
            tl.store(eid_ptr + b, tl.where(pos < total, e, -1), mask=b < max_blocks)
        for s0 in range(0, sorted_len, BLOCK):
            o = s0 + tl.arange(0, BLOCK)
            tl.store(sorted_ptr + o, tl.zeros([BLOCK], dtype=tl.int32) + n, mask=o < sorted_len)

    @triton.jit
    def _align_scatter_k(id_ptr, n, cnt_ptr, start_ptr, sorted_ptr, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        e = tl.load(id_ptr + o, mask=m, other=0)
        r = tl.atomic_add(cnt_ptr + e, 1, mask=m)
        base = tl.load(start_ptr + e, mask=m, other=0)
        tl.store(sorted_ptr + base + r, o, mask=m)

    @triton.jit
    def _moe_sum_k(x_ptr, o_ptr, H, K: tl.constexpr, BH: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BH + tl.arange(0, BH)
        m = offs < H
        acc = tl.zeros([BH], dtype=tl.float32)
        for j in tl.static_range(K):
            acc += tl.load(x_ptr + (t * K + j) * H + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(o_ptr + t * H + offs, acc.to(tl.bfloat16), mask=m)

    ALIGN_BM = 64      # the tile height fused_moe's configs use most for decode-to-prefill batches (BLOCK_SIZE_M)


# ----------------------------------------------------------------------------------------------------------------
class Log:
    def __init__(self, path):
        self.f = open(path, "a") if path else None
        self.t0 = time.time()

    def __call__(self, *a):
        s = f"[{time.time() - self.t0:7.1f}s] " + " ".join(str(x) for x in a)
        print(s, flush=True)
        if self.f:
            self.f.write(s + "\n")
            self.f.flush()


def fmt_num(x):
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.6g}"
    s = str(x)
    if any(c in s for c in ":#,[]{}&*!|>'\"%@`") or s.strip() != s:
        return '"' + s.replace('"', "'") + '"'
    return s


def fmt_val(v):
    if isinstance(v, list):
        return "[" + ", ".join(fmt_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {fmt_val(x)}" for k, x in v.items()) + "}"
    return fmt_num(v)


class Table:
    def __init__(self, path, header):
        self.path, self.header, self.ceilings, self.ops, self.forwards = path, header, {}, {}, []

    def add(self, op, entry):
        self.ops.setdefault(op, []).append(entry)
        self.write()

    def write(self):
        lines = ["servesim_kernel_table: 1"]
        for k, v in self.header.items():
            lines.append(f"{k}: {fmt_val(v)}")
        lines.append("ceilings:")
        for k, v in self.ceilings.items():
            lines.append(f"  {k}: {fmt_val(v)}")
        lines.append("ops:")
        for op, entries in self.ops.items():
            lines.append(f"  {op}:")
            for e in entries:
                lines.append(f"    - {fmt_val(e)}")
        lines.append("forwards:")
        for e in self.forwards:
            lines.append(f"  - {fmt_val(e)}")
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="tiny grids: checks every code path in a minute")
    ap.add_argument("--lite", action="store_true", help="fewer head geometries, widths and MoE cases (short lease)")
    ap.add_argument("--deadline-s", type=float, default=530.0, help="stop starting new entries after this")
    ap.add_argument("--sections", default="probe,ceilings,elementwise,gemm0,attention,moe,forwards,gemm0x,gemm1")
    ap.add_argument("--list-shapes", action="store_true")
    ap.add_argument("--models", default="", help="comma list: GEMM shapes of these models only")
    ap.add_argument("--fwd-models", default="", help="comma list: forwards of these models only")
    ap.add_argument("--fwd-routing", default="hidden", choices=["hidden", "balanced"],
                    help="MoE forwards: route by the random router over the hidden state (hidden), or to the top-k of "
                         "random per-token logits that outweigh it (balanced: the table's moe op's routing, and a "
                         "trained model's load-balanced spread)")
    ap.add_argument("--decode-footprint-gb", type=float, default=0.0,
                    help="attn_decode: cycle each point's calls over distinct caches totalling at least this many GB "
                         "(a server's layers each read their own; 0: two caches or 3x L2, as the first tables)")
    ap.add_argument("--kernels-lib", default="", help="libservesim_kernels_c.so: the project's Gated DeltaNet and "
                    "causal-conv1d kernels (section gdn and the hybrid forwards need it)")
    args = ap.parse_args()
    if args.list_shapes:
        for p in (0, 1):
            s = gemm_shapes(p)
            print(f"prio {p}: {len(s)} shapes")
            for (n, k), uses in s.items():
                print(f"  n={n} k={k}  {', '.join(uses)}")
        return
    run(args)


def run(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    T_START = time.time()
    DEV = "cuda"
    BF = torch.bfloat16
    FP8 = torch.float8_e4m3fn
    props = torch.cuda.get_device_properties(0)
    dev_name = torch.cuda.get_device_name(0)
    catalog = {"NVIDIA H100 80GB HBM3": "H100-SXM", "NVIDIA H200": "H200", "NVIDIA H100 NVL": "H100-NVL",
               "NVIDIA H100 PCIe": "H100-PCIe"}.get(dev_name, dev_name.replace("NVIDIA ", "").replace(" ", "-"))
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, f"{catalog}.log"))
    L2 = props.L2_cache_size
    ROT = 3 * L2
    total_mem = props.total_memory
    quick = args.quick
    sections = args.sections.split(",")

    def left():
        return args.deadline_s - (time.time() - T_START)

    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa
        drv = f"nvidia-smi failed: {e}"
    cublas = "?"
    try:
        cublas = str(torch._C._cuda_getCompiledVersion())
    except Exception:
        pass
    software = (f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
                f"driver {drv.split(',')[0] if drv else '?'}")
    if triton is not None:
        software += f", triton {triton.__version__}"
    log(f"device {dev_name} -> {catalog}; SMs {props.multi_processor_count}; L2 {L2 / 1e6:.1f} MB; "
        f"mem {total_mem / 2**30:.1f} GiB; nvidia-smi: {drv}; {software}; cuda compiled {cublas}")
    header = dict(gpu=catalog, device_name=dev_name, date=datetime.date.today().isoformat(), software=software,
                  method=("CUDA events around CUDA-graph replays of N back-to-back calls (median of replays / N), "
                          "after eager warm-up; inputs rotated over sets totalling > 3x L2; random data"))
    table = Table(os.path.join(args.out, f"{catalog}.yaml"), header)
    torch.manual_seed(0)

    # ------------------------------------------------------------------------------------------------------------
    def nsets(set_bytes, cap=256, mem_cap=2 << 30):
        n = max(2, min(cap, math.ceil(ROT / max(set_bytes, 1))))
        return max(1, min(n, mem_cap // max(set_bytes, 1)))

    def ev():
        return torch.cuda.Event(enable_timing=True)

    def time_calls(fns, target_ms=1.5, max_calls=1024, graph=True):
        """us per call: fns are zero-argument callables over rotated input sets."""
        n = len(fns)
        for f in fns:
            f()
        torch.cuda.synchronize()
        s, e = ev(), ev()
        s.record()
        for f in fns:
            f()
        e.record()
        e.synchronize()
        est = s.elapsed_time(e) / n
        calls = max(n, min(max_calls, math.ceil(target_ms / max(est, 1e-4))))
        if graph:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(calls):
                    fns[i % n]()
            g.replay()
            torch.cuda.synchronize()
            run_once = g.replay
        else:
            def run_once():
                for i in range(calls):
                    fns[i % n]()
        times = []
        s.record()
        run_once()
        e.record()
        e.synchronize()
        first = s.elapsed_time(e)
        reps = 3 if first > 60 else (5 if first > 10 else 7)
        if quick:
            reps = min(reps, 3)
        for _ in range(reps):
            s.record()
            run_once()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        if graph:
            del g
        return statistics.median(times) / calls * 1000.0

    def rnd(*shape, dtype=BF, scale=1.0):
        t = torch.randn(*shape, device=DEV, dtype=torch.float32 if dtype == FP8 else dtype)
        if scale != 1.0:
            t.mul_(scale)
        return t.to(dtype) if dtype == FP8 else t

    def r4(x):
        return float(f"{x:.4g}")

    caps = {}

    # ------------------------------------------------------------------------------------------------------------
    # Triton kernels: one-pass versions of vLLM's fused_add_rms_norm, silu_and_mul and neox rotary embedding.
    tk = {}
    if triton is not None:
        def _nw(block):
            return 4 if block <= 2048 else (8 if block <= 8192 else 16)

        def add_rmsnorm(x, res, w, out, eps=1e-6):
            T, N = x.shape
            B = triton.next_power_of_2(N)
            _rmsnorm_k[(T,)](x, res, w, out, N, N, 1, 0, eps, HAS_RES=True, BLOCK=B, num_warps=_nw(B))
            return out

        def rmsnorm(x, w, out, eps=1e-6):
            T, N = x.shape
            B = triton.next_power_of_2(N)
            _rmsnorm_k[(T,)](x, x, w, out, N, N, 1, 0, eps, HAS_RES=False, BLOCK=B, num_warps=_nw(B))
            return out

        def head_rmsnorm(buf, col_off, T, H, D, row_stride, w, eps=1e-6):
            """in-place RMSNorm of H heads of D starting at column col_off of each row of buf (Qwen3 q/k norm)"""
            v = buf.view(-1)[col_off:]
            B = triton.next_power_of_2(D)
            _rmsnorm_k[(T * H,)](v, v, w, v, D, row_stride, H, D, eps, HAS_RES=False, BLOCK=B, num_warps=1)

        def silu_mul(x, out):
            T, I2 = x.shape
            I = I2 // 2
            _silu_mul_k[(T, triton.cdiv(I, 1024))](x, out, I, BLOCK=1024, num_warps=4)
            return out

        def rope(qk, pos, cs, H, D, row_stride, rot=None):
            """in place on the first H heads of D of each row (q then k, contiguous in the qkv output)"""
            rot = rot or D
            T = pos.shape[0]
            hp2 = triton.next_power_of_2(H)
            _rope_k[(T,)](qk, pos, cs, row_stride, H, D=D, HALF=rot // 2, HP2=hp2,
                          num_warps=4 if hp2 * rot // 2 <= 4096 else 8)

        tk = dict(add_rmsnorm=add_rmsnorm, rmsnorm=rmsnorm, head_rmsnorm=head_rmsnorm, silu_mul=silu_mul,
                  rope=rope)

    def torch_silu_mul(x, out):
        I = x.shape[1] // 2
        torch.mul(F.silu(x[:, :I]), x[:, I:], out=out)
        return out

    def torch_add_rmsnorm(x, res, w, out, eps=1e-6):
        res.add_(x)
        out.copy_(F.rms_norm(res, (res.shape[1],), w, eps))
        return out

    SILU_MUL = tk.get("silu_mul", torch_silu_mul)
    ADD_RMS = tk.get("add_rmsnorm", torch_add_rmsnorm)

    # ------------------------------------------------------------------------------------------------------------
    def probe():
        log("== probe")
        for mod in ("flash_attn", "flashinfer", "vllm", "transformers", "triton"):
            try:
                mm = __import__(mod)
                log(f"module {mod} {getattr(mm, '__version__', '?')}")
            except Exception as ex:
                log(f"module {mod} absent ({type(ex).__name__})")
        # fp8 per-tensor
        a = rnd(64, 256, dtype=FP8)
        b = rnd(512, 256, dtype=FP8)
        one = torch.ones((), device=DEV, dtype=torch.float32)
        ref = a.float() @ b.float().t()
        for fast in (True, False):
            try:
                y = torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=BF, use_fast_accum=fast)
                err = ((y.float() - ref).norm() / ref.norm()).item()
                log(f"fp8 per-tensor fast_accum={fast}: rel err {err:.2e}")
                if err < 2e-2 and "fp8_tensor" not in caps:
                    caps["fp8_tensor"] = dict(fast_accum=fast)
            except Exception as ex:
                log(f"fp8 per-tensor fast_accum={fast} FAILED: {str(ex)[:200]}")
        # row-wise
        sa = torch.rand(64, 1, device=DEV) + 0.5
        sb = torch.rand(1, 512, device=DEV) + 0.5
        ref_rw = ref * sa * sb
        for fast in (True, False):
            try:
                y = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=BF, use_fast_accum=fast)
                err = ((y.float() - ref_rw).norm() / ref_rw.norm()).item()
                log(f"fp8 row-wise fast_accum={fast}: rel err {err:.2e}")
                if err < 2e-2 and "fp8_rowwise" not in caps:
                    caps["fp8_rowwise"] = dict(fast_accum=fast)
            except Exception as ex:
                log(f"fp8 row-wise fast_accum={fast} FAILED: {str(ex)[:200]}")
        # block-wise: activation 1x128 scales [M, K/128] outer-dim-major, weight 128x128 scales [N/128, K/128]
        M, N, K = 256, 512, 512
        sa = (torch.rand(K // 128, M, device=DEV) + 0.5).t()        # [M, K/128], stride (1, M)
        sb = torch.rand(N // 128, K // 128, device=DEV) + 0.5        # [N/128, K/128]
        a = rnd(M, K, dtype=FP8)
        b = rnd(N, K, dtype=FP8)
        sa_full = sa.repeat_interleave(128, dim=1)                    # [M, K]
        sb_full = sb.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)  # [N, K]
        ref_b = (a.float() * sa_full) @ (b.float() * sb_full).t()
        for fast in (False, True):
            try:
                y = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb.t(), out_dtype=BF, use_fast_accum=fast)
                err = ((y.float() - ref_b).norm() / ref_b.norm()).item()
                log(f"fp8 block 1x128/128x128 fast_accum={fast}: rel err {err:.2e}")
                if err < 2e-2 and "fp8_block" not in caps:
                    caps["fp8_block"] = dict(fast_accum=fast)
                for m in (1, 8, 100):
                    a2 = rnd(m, K, dtype=FP8)
                    s2 = (torch.rand(K // 128, m, device=DEV) + 0.5).t()
                    y = torch._scaled_mm(a2, b.t(), scale_a=s2, scale_b=sb.t(), out_dtype=BF, use_fast_accum=fast)
                    ref2 = (a2.float() * s2.repeat_interleave(128, dim=1)) @ (b.float() * sb_full).t()
                    log(f"   m={m}: rel err {((y.float() - ref2).norm() / ref2.norm()).item():.2e}")
            except Exception as ex:
                log(f"fp8 block fast_accum={fast} FAILED: {str(ex)[:300]}")
        # weight-only int4 (W4A16): torch's tinygemm kernel, the one 4-bit weight path torch ships for CUDA. vLLM runs
        # Marlin (gptq_marlin / awq_marlin) instead; this is the reference for what a dequantizing 4-bit GEMM costs.
        # Packing: two 4-bit codes per byte, the even column in the high nibble; per group of W4_GROUP inputs a scale
        # and a zero, weight = (code - 8) * scale + zero.
        try:
            N, K = 512, 1024
            q = torch.randint(0, 16, (N, K), device=DEV, dtype=torch.int32)
            sc = torch.rand(K // W4_GROUP, N, device=DEV) * 0.02 + 0.01
            zr = torch.randn(K // W4_GROUP, N, device=DEV) * 0.01
            wref = (q.float() - 8) * sc.repeat_interleave(W4_GROUP, 0).t() + zr.repeat_interleave(W4_GROUP, 0).t()
            packed = torch._convert_weight_to_int4pack(((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8), W4_INNER_K)
            sz = torch.stack([sc, zr], dim=2).to(BF).contiguous()
            for m in (1, 16, 300):
                x = rnd(m, K)
                y = torch._weight_int4pack_mm(x, packed, W4_GROUP, sz)
                ref = x.float() @ wref.t()
                err = ((y.float() - ref).norm() / ref.norm()).item()
                log(f"w4a16 tinygemm group {W4_GROUP} m={m}: rel err {err:.2e}")
                if err > 2e-2:
                    break
            else:
                caps["w4a16"] = dict(group=W4_GROUP)
        except Exception as ex:
            log(f"w4a16 tinygemm FAILED: {str(ex)[:300]}")
        # vLLM's routing kernels (Triton renderings): checked against torch before the moe section times them
        if triton is not None:
            try:
                errs = [check_fused_routing(T, E, k, h) for T, E, k, h in
                        ((1, 8, 2, 256), (37, 128, 8, 512), (300, 512, 10, 256), (2048, 8, 2, 4096))]
                log(f"fused routing check (None = passed): {errs}")
                if all(e is None for e in errs):
                    caps["fused_routing"] = True
            except Exception as ex:
                log(f"fused routing FAILED: {str(ex)[:300]}")
                traceback.print_exc()
        # grouped mm
        if hasattr(torch, "_grouped_mm"):
            E, h, n = 8, 256, 384
            x = rnd(100, h)
            w = rnd(E, n, h)
            cnt = torch.tensor([0, 10, 30, 0, 20, 25, 15, 0])
            offs = torch.cumsum(cnt, 0).to(torch.int32).to(DEV)
            ref = torch.cat([x[int(s):int(t)] @ w[i].t() for i, (s, t) in
                             enumerate(zip([0] + offs.tolist()[:-1], offs.tolist()))])
            for name, wb in (("transposed", w.transpose(1, 2)), ("contiguous", w.transpose(1, 2).contiguous())):
                try:
                    y = torch._grouped_mm(x, wb, offs=offs)
                    err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
                    log(f"grouped_mm W {name}: rel err {err:.2e}")
                    if err < 2e-2 and "grouped_mm" not in caps:
                        caps["grouped_mm"] = name
                except Exception as ex:
                    log(f"grouped_mm W {name} FAILED: {str(ex)[:200]}")
        else:
            log("torch._grouped_mm absent")
        # attention backends: causal prefill and bottom-right-aligned cached prefill vs fp32 math
        q = rnd(1, 8, 96, 128)
        k = rnd(1, 2, 160, 128)
        v = rnd(1, 2, 160, 128)
        kr = k.float().repeat_interleave(4, 1)
        vr = v.float().repeat_interleave(4, 1)
        sc = q.float() @ kr.transpose(-1, -2) / math.sqrt(128)
        lr = torch.ones(96, 160, dtype=torch.bool, device=DEV).tril(diagonal=160 - 96)
        ref_lr = torch.softmax(sc.masked_fill(~lr, float("-inf")), -1) @ vr
        sq = rnd(1, 8, 128, 128)
        sk = rnd(1, 2, 128, 128)
        sv = rnd(1, 2, 128, 128)
        ref_sq = F.scaled_dot_product_attention(sq.float(), sk.float().repeat_interleave(4, 1),
                                                sv.float().repeat_interleave(4, 1), is_causal=True)
        caps["prefill"], caps["cached"], caps["decode"] = [], [], []
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            for gqa in (True, False):
                kk, vv = (sk, sv) if gqa else (sk.repeat_interleave(4, 1), sv.repeat_interleave(4, 1))
                try:
                    with sdpa_kernel([be]):
                        y = F.scaled_dot_product_attention(sq, kk, vv, is_causal=True, enable_gqa=gqa)
                    err = ((y.float() - ref_sq).norm() / ref_sq.norm()).item()
                    log(f"sdpa {name} causal square gqa_native={gqa}: rel err {err:.2e}")
                    if err < 2e-2:
                        caps["prefill"].append((name, gqa))
                        break
                except Exception as ex:
                    log(f"sdpa {name} causal gqa_native={gqa} FAILED: {str(ex)[:160]}")
            for gqa in (True, False):
                kk, vv = (k, v) if gqa else (k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
                variants = [("is_causal", dict(is_causal=True))]
                try:
                    from torch.nn.attention.bias import causal_lower_right
                    variants.append(("lower_right_bias", dict(attn_mask=causal_lower_right(96, 160))))
                except Exception:
                    pass
                ok = False
                for vname, kw in variants:
                    try:
                        with sdpa_kernel([be]):
                            y = F.scaled_dot_product_attention(q, kk, vv, enable_gqa=gqa, **kw)
                        err = ((y.float() - ref_lr).norm() / ref_lr.norm()).item()
                        log(f"sdpa {name} cached-prefix {vname} gqa_native={gqa}: rel err vs bottom-right {err:.2e}")
                        if err < 2e-2:
                            caps["cached"].append((name, gqa, vname))
                            ok = True
                            break
                    except Exception as ex:
                        log(f"sdpa {name} cached {vname} gqa_native={gqa} FAILED: {str(ex)[:160]}")
                if ok:
                    break
            # decode: q_len 1
            dq = rnd(4, 8, 1, 128)
            dk = rnd(4, 2, 300, 128)
            dv = rnd(4, 2, 300, 128)
            dref = F.scaled_dot_product_attention(dq.float(), dk.float().repeat_interleave(4, 1),
                                                  dv.float().repeat_interleave(4, 1))
            for gqa in (True, False):
                kk, vv = (dk, dv) if gqa else (dk.repeat_interleave(4, 1), dv.repeat_interleave(4, 1))
                try:
                    with sdpa_kernel([be]):
                        y = F.scaled_dot_product_attention(dq, kk, vv, enable_gqa=gqa)
                    err = ((y.float() - dref).norm() / dref.norm()).item()
                    log(f"sdpa {name} decode gqa_native={gqa}: rel err {err:.2e}")
                    if err < 2e-2:
                        caps["decode"].append((name, gqa))
                        break
                except Exception as ex:
                    log(f"sdpa {name} decode gqa_native={gqa} FAILED: {str(ex)[:160]}")
        # Triton elementwise kernels vs torch
        if tk:
            try:
                x = rnd(37, 4096)
                r = rnd(37, 4096)
                w = rnd(4096)
                out = torch.empty_like(x)
                r0 = r.clone()
                tk["add_rmsnorm"](x, r, w, out)
                s_ = (x.float() + r0.float())
                refn = s_ * torch.rsqrt(s_.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
                e1 = ((out.float() - refn).norm() / refn.norm()).item()
                e1b = ((r.float() - s_).norm() / s_.norm()).item()
                g = rnd(37, 2 * 1000)
                o = torch.empty(37, 1000, device=DEV, dtype=BF)
                tk["silu_mul"](g, o)
                refs = F.silu(g[:, :1000].float()) * g[:, 1000:].float()
                e2 = ((o.float() - refs).norm() / refs.norm()).item()
                T, Hq, Hkv, D = 19, 6, 2, 128
                qkv = rnd(T, (Hq + 2 * Hkv) * D)
                pos = torch.randint(0, 1000, (T,), device=DEV)
                inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device=DEV).float() / D))
                fr = torch.outer(torch.arange(1024, device=DEV).float(), inv)
                cs = torch.cat([fr.cos(), fr.sin()], -1).to(BF)
                ref_q = qkv.float().clone()
                c = cs[pos, :D // 2].float()[:, None, :]
                s2 = cs[pos, D // 2:].float()[:, None, :]
                qk = ref_q[:, :(Hq + Hkv) * D].view(T, Hq + Hkv, D)
                x1, x2 = qk[..., :D // 2].clone(), qk[..., D // 2:].clone()
                qk[..., :D // 2] = x1 * c - x2 * s2
                qk[..., D // 2:] = x2 * c + x1 * s2
                tk["rope"](qkv, pos, cs, Hq + Hkv, D, qkv.stride(0))
                e3 = ((qkv.float() - ref_q).norm() / ref_q.norm()).item()
                qkv2 = rnd(T, (Hq + 2 * Hkv) * D)
                hw = rnd(D)
                refh = qkv2.float().clone()
                hh = refh[:, :Hq * D].view(T, Hq, D)
                hh.copy_(hh * torch.rsqrt(hh.pow(2).mean(-1, keepdim=True) + 1e-6) * hw.float())
                tk["head_rmsnorm"](qkv2, 0, T, Hq, D, qkv2.stride(0), hw)
                e4 = ((qkv2.float() - refh).norm() / refh.norm()).item()
                log(f"triton add_rmsnorm rel err {e1:.2e} (residual {e1b:.2e}), silu_mul {e2:.2e}, rope {e3:.2e}, "
                    f"head_rmsnorm {e4:.2e}")
                if max(e1, e1b, e2, e3, e4) > 2e-2:
                    log("TRITON KERNELS WRONG: elementwise ops fall back to torch eager")
                    tk.clear()
            except Exception as ex:
                log(f"triton kernels FAILED: {ex}")
                traceback.print_exc()
                tk.clear()
        log(f"caps: {caps}")

    # ------------------------------------------------------------------------------------------------------------
    def ceilings():
        log("== ceilings")
        n = 4096 if quick else 8192
        a, b = [rnd(n, n) for _ in range(2)], [rnd(n, n) for _ in range(2)]
        us = time_calls([lambda i=i: torch.mm(a[i], b[i]) for i in range(2)])
        table.ceilings["bf16_gemm_tflops"] = r4(2 * n ** 3 / us / 1e6)
        if "fp8_tensor" in caps:
            a8 = [x.to(FP8) for x in a]
            b8 = [x.to(FP8) for x in b]
            one = torch.ones((), device=DEV)
            fa = caps["fp8_tensor"]["fast_accum"]
            us8 = time_calls([lambda i=i: torch._scaled_mm(a8[i], b8[i].t(), scale_a=one, scale_b=one, out_dtype=BF,
                                                           use_fast_accum=fa) for i in range(2)])
            table.ceilings["fp8_gemm_tflops"] = r4(2 * n ** 3 / us8 / 1e6)
        a = b = a8 = b8 = None
        nb = 1 << (28 if quick else 30)
        src = [torch.randn(nb // 2, device=DEV, dtype=BF) for _ in range(2)]
        dst = [torch.empty_like(x) for x in src]
        # An SM kernel that reads and writes every byte, as the copy kernels the measured model prices do
        # (reshape_and_cache_flash, MLA's concatenations). A same-dtype `copy_` is a cudaMemcpyAsync, and captured in
        # a graph at >= 1 GiB it ran 20 % slower than this on an H100 (copy_ceiling_probe.py, 2,448 against
        # 3,044 GB/s): the driver's memcpy node is not the kernel a server runs.
        usc = time_calls([lambda i=i: torch.mul(src[i], 1, out=dst[i]) for i in range(2)])
        table.ceilings["copy_gb_per_s"] = r4(2 * nb / usc / 1e3)
        usm = time_calls([lambda i=i: dst[i].copy_(src[i]) for i in range(2)])
        log(f"1 GiB copy: SM kernel {2 * nb / usc / 1e3:.0f} GB/s, graph-captured memcpy {2 * nb / usm / 1e3:.0f} GB/s")
        src = dst = None
        small = torch.randn(1024, device=DEV)
        N = 2000
        for _ in range(50):
            small.add_(1.0)
        torch.cuda.synchronize()
        s, e = ev(), ev()
        res = []
        for _ in range(5):
            s.record()
            for _ in range(N):
                small.add_(1.0)
            e.record()
            e.synchronize()
            res.append(s.elapsed_time(e) * 1000 / N)
        table.ceilings["launch_us"] = r4(statistics.median(res))
        table.ceilings["graph_launch_us"] = r4(time_calls([lambda: small.add_(1.0)], target_ms=2.0, max_calls=2000))
        table.write()
        log(f"ceilings {table.ceilings}")

    # ------------------------------------------------------------------------------------------------------------
    timed_gemms = set()

    def gemm_section(prio, kinds, max_m=None):
        shapes = gemm_shapes(prio, [x for x in args.models.split(",") if x])
        mgrid = [m for m in ([1, 8, 64, 512, 4096] if quick else M_GRID) if max_m is None or m <= max_m]
        items = list(shapes.items())
        if quick:
            items = items[:3]
        log(f"== gemm prio {prio} kinds {kinds}: {len(items)} shapes")
        for kind in kinds:
            if kind != "bf16" and kind not in caps:
                log(f"skip gemm {kind}: not supported here")
                continue
            for (n, k), uses in items:
                if left() < 5:
                    log(f"DEADLINE: gemm {kind} stops before n={n} k={k}")
                    return
                if kind == "fp8_block" and (k % 128 or n % 128):
                    continue
                if kind == "w4a16" and (k % (W4_INNER_K * 16) or k % W4_GROUP or n % 8):
                    continue
                if (kind, n, k) in timed_gemms:
                    continue   # a shape of an earlier priority's models: the loader takes one entry per shape
                timed_gemms.add((kind, n, k))
                el = 2 if kind in ("bf16", "w4a16") else 1     # activation bytes
                wbytes = n * k // 2 if kind == "w4a16" else n * k * el
                nW = nsets(wbytes)
                try:
                    if kind == "bf16":
                        Ws = [rnd(n, k) for _ in range(nW)]
                    elif kind == "w4a16":
                        Ws = [torch._convert_weight_to_int4pack(
                            torch.randint(0, 256, (n, k // 2), device=DEV, dtype=torch.int32).to(torch.uint8),
                            W4_INNER_K) for _ in range(nW)]
                        szs = [(torch.rand(k // W4_GROUP, n, 2, device=DEV) * 0.02).to(BF) for _ in range(nW)]
                    else:
                        Ws = [rnd(n, k, dtype=FP8) for _ in range(nW)]
                    sw = [torch.rand(1, n, device=DEV) + 0.5 for _ in range(nW)]
                    sw_blk = [(torch.rand(n // 128, k // 128, device=DEV) + 0.5).t() for _ in range(nW)] \
                        if kind == "fp8_block" else None
                except torch.OutOfMemoryError:
                    log(f"OOM allocating W n={n} k={k}")
                    torch.cuda.empty_cache()
                    continue
                one = torch.ones((), device=DEV)
                ms, us = [], []
                t0 = time.time()
                for m in mgrid:
                    if 2 * m * n * k > 4e13 or left() < 3:
                        break
                    if m > 1024 and all("lm_head" in u for u in uses):
                        break   # lm_head runs on one row per sequence: m <= max_num_seqs
                    sb = m * k * el + wbytes + m * n * 2
                    ns = min(nsets(sb), nW)
                    try:
                        if kind == "bf16":
                            Xs = [rnd(m, k) for _ in range(ns)]
                            fns = [lambda i=i: F.linear(Xs[i], Ws[i]) for i in range(ns)]
                        elif kind == "w4a16":
                            Xs = [rnd(m, k) for _ in range(ns)]
                            fns = [lambda i=i: torch._weight_int4pack_mm(Xs[i], Ws[i], W4_GROUP, szs[i])
                                   for i in range(ns)]
                        else:
                            Xs = [rnd(m, k, dtype=FP8) for _ in range(ns)]
                            fa = caps[kind]["fast_accum"]
                            if kind == "fp8_tensor":
                                fns = [lambda i=i: torch._scaled_mm(Xs[i], Ws[i].t(), scale_a=one, scale_b=one,
                                                                    out_dtype=BF, use_fast_accum=fa)
                                       for i in range(ns)]
                            elif kind == "fp8_rowwise":
                                sx = [torch.rand(m, 1, device=DEV) + 0.5 for _ in range(ns)]
                                fns = [lambda i=i: torch._scaled_mm(Xs[i], Ws[i].t(), scale_a=sx[i], scale_b=sw[i],
                                                                    out_dtype=BF, use_fast_accum=fa)
                                       for i in range(ns)]
                            else:
                                sx = [(torch.rand(k // 128, m, device=DEV) + 0.5).t() for _ in range(ns)]
                                fns = [lambda i=i: torch._scaled_mm(Xs[i], Ws[i].t(), scale_a=sx[i],
                                                                    scale_b=sw_blk[i], out_dtype=BF,
                                                                    use_fast_accum=fa)
                                       for i in range(ns)]
                        t = time_calls(fns)
                        ms.append(m)
                        us.append(r4(t))
                    except Exception as ex:
                        log(f"gemm {kind} n={n} k={k} m={m} FAILED: {str(ex)[:200]}")
                        torch.cuda.empty_cache()
                    finally:
                        Xs = fns = None
                entry = {"n": n, "k": k, "m": ms, "us": us}
                if kind == "w4a16":
                    entry["group"] = W4_GROUP
                    entry["backend"] = "torch tinygemm (_weight_int4pack_mm)"
                elif kind != "bf16":
                    entry["fast_accum"] = caps[kind]["fast_accum"]
                if ms:
                    table.add("gemm_" + kind, entry)
                big = us[-1] if us else 0
                log(f"gemm {kind} n={n} k={k} ({uses[0]}{' +%d' % (len(uses) - 1) if len(uses) > 1 else ''}): "
                    f"{len(ms)} m, m=1 {us[0] if us else '-'} us, m={ms[-1] if ms else '-'} {big} us "
                    f"({2 * ms[-1] * n * k / big / 1e6 if us else 0:.0f} TFLOP/s), {time.time() - t0:.1f}s")
                Ws = sw = sw_blk = szs = None
                torch.cuda.empty_cache()

    # ------------------------------------------------------------------------------------------------------------
    def attention(decode_only=False):
        log("== attention" + (" (decode only)" if decode_only else ""))
        toks = [128, 512, 2048] if quick else [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
        geoms = [(128, 32, 32), (128, 32, 8), (128, 32, 4), (128, 64, 8), (128, 16, 2), (128, 8, 1), (64, 64, 8),
                 (256, 16, 4), (256, 16, 2), (256, 8, 1)]
        if quick:
            geoms = geoms[1:2] + geoms[7:8]
        elif args.lite:
            geoms = [(128, 32, 32), (128, 32, 8), (128, 32, 4), (128, 64, 8), (256, 16, 4)]
        bemap = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                 "efficient": SDPBackend.EFFICIENT_ATTENTION}
        prefill_bes = [] if decode_only else [b for b in caps.get("prefill", []) if b[0] in ("flash", "cudnn")]

        def sdpa_fn(be, q, k, v, gqa, **kw):
            def f():
                with sdpa_kernel([bemap[be]]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, **kw)
            return f

        def kv_for(gqa, hq, hkv, t):
            return t if gqa or hq == hkv else t.repeat_interleave(hq // hkv, 1)

        for be, gqa in prefill_bes:
            for hd, hq, hkv in geoms:
                if left() < 5:
                    log("DEADLINE in attention prefill")
                    break
                us = []
                for T in toks:
                    sb = T * (hq + 2 * hkv) * hd * 2 * 2
                    ns = nsets(sb, cap=64)
                    qs = [rnd(1, T, hq, hd).transpose(1, 2) for _ in range(ns)]
                    ks = [kv_for(gqa, hq, hkv, rnd(1, T, hkv, hd).transpose(1, 2)) for _ in range(ns)]
                    vs = [kv_for(gqa, hq, hkv, rnd(1, T, hkv, hd).transpose(1, 2)) for _ in range(ns)]
                    try:
                        us.append(r4(time_calls([sdpa_fn(be, qs[i], ks[i], vs[i], gqa and hq != hkv, is_causal=True)
                                                 for i in range(ns)])))
                    except Exception as ex:
                        log(f"prefill {be} {hd}/{hq}/{hkv} T={T} FAILED {str(ex)[:200]}")
                        us = None
                        break
                if us:
                    table.add("attn_prefill", {"backend": f"sdpa-{be}" + ("" if gqa or hq == hkv else "-kv-expanded"),
                                               "head_dim": hd, "q_heads": hq, "kv_heads": hkv, "tokens": toks,
                                               "us": us})
                    fl = 4 * toks[-1] ** 2 / 2 * hd * hq
                    log(f"prefill {be} hd{hd} {hq}/{hkv}: T={toks[-1]} {us[-1]} us ({fl / us[-1] / 1e6:.0f} TFLOP/s)")
        # cached-prefix prefill (chunk after context), bottom-right causal
        chunks = [128, 512] if quick else [64, 128, 256, 512, 1024, 2048, 4096, 8192]
        ctxs = [256, 2048] if quick else [256, 1024, 2048, 4096, 8192, 16384]
        cgeoms = [(128, 32, 8), (128, 32, 32), (128, 64, 8), (256, 16, 4)]
        if quick or args.lite:
            cgeoms = cgeoms[:1]
        for be, gqa, variant in ([] if decode_only else caps.get("cached", [])):
            if be not in ("flash", "efficient", "cudnn"):
                continue
            for hd, hq, hkv in cgeoms:
                if left() < 5:
                    log("DEADLINE in attention cached")
                    break
                rows = []
                try:
                    for c in chunks:
                        row = []
                        for C in ctxs:
                            L = C + c
                            sb = (c * hq + 2 * L * hkv) * hd * 2
                            ns = nsets(sb, cap=32)
                            qs = [rnd(1, c, hq, hd).transpose(1, 2) for _ in range(ns)]
                            ks = [kv_for(gqa, hq, hkv, rnd(1, L, hkv, hd).transpose(1, 2)) for _ in range(ns)]
                            vs = [kv_for(gqa, hq, hkv, rnd(1, L, hkv, hd).transpose(1, 2)) for _ in range(ns)]
                            if variant == "is_causal":
                                kw = dict(is_causal=True)
                            else:
                                from torch.nn.attention.bias import causal_lower_right
                                kw = dict(attn_mask=causal_lower_right(c, L))
                            row.append(r4(time_calls([sdpa_fn(be, qs[i], ks[i], vs[i], gqa and hq != hkv, **kw)
                                                      for i in range(ns)])))
                        rows.append(row)
                except Exception as ex:
                    log(f"cached {be} {hd}/{hq}/{hkv} FAILED {str(ex)[:200]}")
                    rows = None
                if rows:
                    table.add("attn_prefill_cached", {
                        "backend": f"sdpa-{be}" + ("-lower-right-bias" if variant != "is_causal" else "")
                        + ("" if gqa or hq == hkv else "-kv-expanded"),
                        "head_dim": hd, "q_heads": hq, "kv_heads": hkv, "chunk": chunks, "context": ctxs,
                        "us": rows})
                    log(f"cached {be} hd{hd} {hq}/{hkv}: c={chunks[-1]} ctx={ctxs[-1]} {rows[-1][-1]} us")
        # decode: 1 query per sequence, contiguous cache [B, ctx, Hkv, D] viewed as [B, Hkv, ctx, D]
        batches = [1, 16, 128] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256]
        dgeoms = geoms
        dec_bes = [b for b in caps.get("decode", []) if b[0] == "flash"] or caps.get("decode", [])[:1]
        # --decode-footprint-gb: a server's layers each read their own cache, so between two reads of one cache the
        # step reads every other layer's. Each point's calls then cycle over distinct caches carved from one random
        # pool of that size (at most 60 % of free memory); points whose two caches exceed it keep two of their own.
        pool = None
        if args.decode_footprint_gb > 0:
            pool_bytes = min(args.decode_footprint_gb * 1e9, 0.6 * torch.cuda.mem_get_info()[0])
            pool = torch.randn(int(pool_bytes) // 2, device=DEV, dtype=BF)
        for be, gqa in dec_bes:
            for hd, hq, hkv in dgeoms:
                if left() < 5:
                    log("DEADLINE in attention decode")
                    break
                cmax = 16384
                while 2 * 256 * cmax * hkv * hd * 2 > 20e9:
                    cmax //= 2
                dctx = [256, 2048] if quick else [c for c in [256, 512, 1024, 2048, 4096, 8192, 16384] if c <= cmax]
                rows = []
                try:
                    for B in batches:
                        row = []
                        for C in dctx:
                            sb = 2 * B * C * hkv * hd * 2
                            ns = nsets(sb, cap=64, mem_cap=24 << 30)
                            per = B * C * hkv * hd  # elements of one K (or V) cache
                            carve = pool is not None and 2 * sb <= pool.numel() * pool.element_size()
                            if carve:
                                ns = min(256, pool.numel() // (2 * per))

                            def cache(i, which):  # set i's K (which 0) or V (1): carved from the pool or its own
                                t = (pool[(2 * i + which) * per:(2 * i + which + 1) * per].view(B, C, hkv, hd)
                                     if carve else rnd(B, C, hkv, hd))
                                return kv_for(gqa, hq, hkv, t.transpose(1, 2))
                            qs = [rnd(B, 1, hq, hd).transpose(1, 2) for _ in range(ns)]
                            ks = [cache(i, 0) for i in range(ns)]
                            vs = [cache(i, 1) for i in range(ns)]
                            row.append(r4(time_calls([sdpa_fn(be, qs[i], ks[i], vs[i], gqa and hq != hkv)
                                                      for i in range(ns)])))
                            qs = ks = vs = None
                        rows.append(row)
                        torch.cuda.empty_cache()
                except Exception as ex:
                    log(f"decode {be} {hd}/{hq}/{hkv} FAILED {str(ex)[:200]}")
                    rows = None
                if rows:
                    table.add("attn_decode", {
                        "backend": f"sdpa-{be} q_len 1, contiguous KV (not paged)"
                        + ("" if gqa or hq == hkv else ", kv expanded")
                        + (f", calls cycle over caches in a {pool.numel() * 2 / 1e9:.0f} GB pool" if pool is not None
                           else ""),
                        "head_dim": hd, "q_heads": hq, "kv_heads": hkv, "batch": batches, "context": dctx,
                        "us": rows})
                    by = 2 * batches[-1] * dctx[-1] * hkv * hd * 2
                    log(f"decode {be} hd{hd} {hq}/{hkv}: B={batches[-1]} ctx={dctx[-1]} {rows[-1][-1]} us "
                        f"({by / rows[-1][-1] / 1e3:.0f} GB/s)")
        pool = None
        if decode_only:
            return
        # MLA absorbed decode: scores = q[B,H,576] . cache[B,ctx,576]^T; softmax; out = p . cache[..., :512]
        for H in (16, 128):
            if left() < 5:
                break
            R, P = 512, 64
            mctx = [256, 2048] if quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
            rows = []
            try:
                for B in batches:
                    row = []
                    for C in mctx:
                        sb = B * C * (R + P) * 2
                        ns = nsets(sb, cap=64, mem_cap=12 << 30)
                        qs = [rnd(B, H, R + P, scale=(R + P) ** -0.5) for _ in range(ns)]
                        cs = [rnd(B, C, R + P) for _ in range(ns)]

                        def mla(i):
                            s = torch.bmm(qs[i], cs[i].transpose(1, 2))
                            p = torch.softmax(s, dim=-1)
                            return torch.bmm(p, cs[i][..., :R])
                        row.append(r4(time_calls([lambda i=i: mla(i) for i in range(ns)])))
                        qs = cs = None
                    rows.append(row)
            except Exception as ex:
                log(f"MLA H={H} FAILED {str(ex)[:200]}")
                rows = None
            if rows:
                table.add("attn_decode_mla", {"backend": "torch bmm + softmax + bmm (3 kernels), contiguous latent cache",
                                              "q_heads": H, "kv_lora_rank": R, "rope_dim": P, "batch": batches,
                                              "context": mctx, "us": rows})
                log(f"MLA H={H}: B={batches[-1]} ctx={mctx[-1]} {rows[-1][-1]} us")

    # ------------------------------------------------------------------------------------------------------------
    def make_routing(T, E, topk, h, sets):
        out = []
        for _ in range(sets):
            logits = torch.randn(T, E, device=DEV, dtype=torch.float32)
            w, ids = torch.topk(torch.softmax(logits, -1), topk, -1)
            flat = ids.reshape(-1)
            order = torch.argsort(flat, stable=True)
            cnt = torch.zeros(E, device=DEV, dtype=torch.int32).scatter_add_(0, flat.int(),
                                                                            torch.ones_like(flat, dtype=torch.int32))
            offs = torch.cumsum(cnt, 0).to(torch.int32)
            x = rnd(T, h)
            xp = x.index_select(0, order // topk)
            out.append(dict(logits=logits, x=x, xp=xp, offs=offs, cnt=cnt.tolist() if not caps.get("grouped_mm") else None))
        return out

    def moe_fn(xp, offs, w13t, w2t, I, cnt=None, w13=None, w2=None):
        if caps.get("grouped_mm"):
            def f():
                y = torch._grouped_mm(xp, w13t, offs=offs)
                a = torch.empty(y.shape[0], I, device=DEV, dtype=BF)
                SILU_MUL(y, a)
                return torch._grouped_mm(a, w2t, offs=offs)
        else:
            def f():
                outs, s = [], 0
                for e, c in enumerate(cnt):
                    if c:
                        y = F.linear(xp[s:s + c], w13[e])
                        a = torch.empty(c, I, device=DEV, dtype=BF)
                        SILU_MUL(y, a)
                        outs.append(F.linear(a, w2[e]))
                        s += c
                return torch.cat(outs)
        return f

    def routing_fn(logits, x, topk, E):
        T, h = x.shape

        def f():
            p = torch.softmax(logits, -1)
            w, ids = torch.topk(p, topk, -1)
            w = w / w.sum(-1, keepdim=True)
            flat = ids.reshape(-1)
            order = torch.argsort(flat, stable=True)
            cnt = torch.zeros(E, device=DEV, dtype=torch.int32).scatter_add_(0, flat.int(),
                                                                            torch.ones_like(flat, dtype=torch.int32))
            offs = torch.cumsum(cnt, 0).to(torch.int32)
            xp = x.index_select(0, order // topk)
            y = torch.empty_like(xp).index_copy_(0, order, xp)     # stands for un-permuting the expert outputs
            return (y.view(T, topk, h) * w.unsqueeze(-1).to(BF)).sum(1), offs
        return f

    def fused_routing(T, E, topk, h):
        """vLLM's routing kernels over preallocated buffers: returns (run, buffers) for one input set"""
        n = T * topk
        max_sorted = n + E * (ALIGN_BM - 1)
        max_blocks = triton.cdiv(max_sorted, ALIGN_BM)
        b = dict(logits=torch.randn(T, E, device=DEV, dtype=torch.float32),
                 w=torch.empty(T, topk, device=DEV, dtype=torch.float32),
                 ids=torch.empty(T, topk, device=DEV, dtype=torch.int32),
                 cnt=torch.empty(E, device=DEV, dtype=torch.int32), start=torch.empty(E, device=DEV, dtype=torch.int32),
                 eid=torch.empty(max_blocks, device=DEV, dtype=torch.int32),
                 sorted=torch.empty(max_sorted, device=DEV, dtype=torch.int32),
                 npad=torch.empty(1, device=DEV, dtype=torch.int32),
                 y=rnd(T * topk, h), out=torch.empty(T, h, device=DEV, dtype=BF))
        be = triton.next_power_of_2(E)
        nb = triton.next_power_of_2(E + 1)

        def run():
            _topk_softmax_k[(T,)](b["logits"], b["w"], b["ids"], E, K=topk, KP2=triton.next_power_of_2(topk),
                                  BLOCK_E=be, num_warps=1 if be <= 256 else 4)
            _align_count_k[(1,)](b["ids"], n, E, b["cnt"], b["start"], b["eid"], b["sorted"], b["npad"], max_sorted,
                                 max_blocks, BM=ALIGN_BM, NB=nb, BLOCK=1024, BLOCK_B=32, num_warps=4)
            _align_scatter_k[(triton.cdiv(n, 256),)](b["ids"], n, b["cnt"], b["start"], b["sorted"], BLOCK=256,
                                                    num_warps=4)
            _moe_sum_k[(T, triton.cdiv(h, 1024))](b["y"], b["out"], h, K=topk, BH=1024, num_warps=4)
        return run, b

    def check_fused_routing(T, E, topk, h):
        """the fused routing against torch: same experts and weights, each expert's slots in its padded run"""
        run, b = fused_routing(T, E, topk, h)
        run()
        torch.cuda.synchronize()
        p = torch.softmax(b["logits"], -1)
        w, ids = torch.topk(p, topk, -1)
        w = w / w.sum(-1, keepdim=True)
        got_ids, order = torch.sort(b["ids"].long(), -1)
        want_ids, want_order = torch.sort(ids, -1)
        if not torch.equal(got_ids, want_ids):
            return "top-k experts differ"
        if (b["w"].gather(1, order) - w.gather(1, want_order)).abs().max().item() > 1e-4:
            return "top-k weights differ"
        flat = b["ids"].reshape(-1).long()
        npad = int(b["npad"].item())
        srt = b["sorted"][:npad].long()
        real = srt < T * topk
        if int(real.sum().item()) != T * topk or torch.unique(srt[real]).numel() != T * topk:
            return "sorted slots are not a permutation"
        blk_e = b["eid"][:npad // ALIGN_BM].long().repeat_interleave(ALIGN_BM)
        if not torch.equal(flat[srt[real]], blk_e[real]):
            return "a slot sits in another expert's block"
        ref = b["y"].float().view(T, topk, h).sum(1)
        if ((b["out"].float() - ref).norm() / ref.norm()).item() > 1e-2:
            return "moe_sum differs"
        return None

    MOE_CASES = [("Qwen3-30B-A3B", 128, 8, 2048, 768), ("Mixtral-8x7B tp2", 8, 2, 4096, 7168),
                 ("Mixtral-8x7B tp4", 8, 2, 4096, 3584), ("gpt-oss-120b (bf16)", 128, 4, 2880, 2880),
                 ("Qwen3-235B-A22B tp4", 128, 8, 4096, 384), ("Qwen3-Next-80B-A3B", 512, 10, 2048, 512),
                 ("MiniMax-M2.5 tp4", 256, 8, 3072, 384)]

    def moe_section():
        log(f"== moe (grouped_mm: {caps.get('grouped_mm')})")
        toks = [1, 16, 256, 2048] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
        cases = MOE_CASES[:1] if quick else (MOE_CASES[:3] if args.lite else MOE_CASES)
        timed_routings = set()
        for name, E, topk, h, I in cases:
            if left() < 8:
                log("DEADLINE in moe")
                break
            try:
                w13 = rnd(E, 2 * I, h, scale=0.02)
                w2 = rnd(E, h, I, scale=0.02)
            except torch.OutOfMemoryError:
                log(f"moe {name}: OOM")
                continue
            w13t, w2t = (w13.transpose(1, 2), w2.transpose(1, 2)) if caps.get("grouped_mm") == "transposed" else \
                (w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous())
            us, rus, fus = [], [], []
            try:
                for T in toks:
                    sets = 4 if T <= 64 else 2
                    rs = make_routing(T, E, topk, h, sets)
                    us.append(r4(time_calls([moe_fn(r["xp"], r["offs"], w13t, w2t, I, r["cnt"], w13, w2) for r in rs],
                                            graph=bool(caps.get("grouped_mm")))))
                    rus.append(r4(time_calls([routing_fn(r["logits"], r["x"], topk, E) for r in rs])))
                    rs = None
                    if caps.get("fused_routing") and (E, topk, h) not in timed_routings:
                        fus.append(r4(time_calls([fused_routing(T, E, topk, h)[0] for _ in range(sets)])))
            except Exception as ex:
                log(f"moe {name} FAILED at T={T}: {str(ex)[:300]}")
                traceback.print_exc()
                us = None
            if us:
                table.add("moe", {"model": name, "backend": "torch._grouped_mm x2 + triton silu_mul"
                                  if caps.get("grouped_mm") else "loop of F.linear per expert (eager)",
                                  "experts": E, "top_k": topk, "hidden": h, "intermediate": I, "tokens": toks,
                                  "us": us})
                if (E, topk, h) not in timed_routings:   # routing does not depend on TP: one entry per shape
                    timed_routings.add((E, topk, h))
                    table.add("moe_routing", {"model": name,
                                              "backend": "torch softmax+topk+argsort+gather+scatter+sum",
                                              "experts": E, "top_k": topk, "hidden": h, "tokens": toks, "us": rus})
                    if len(fus) == len(toks):
                        table.add("moe_routing_fused", {
                            "model": name, "backend": "triton topk_softmax + moe_align_block_size (2 kernels, "
                            f"tile {ALIGN_BM}) + moe_sum: vLLM's routing kernels", "experts": E, "top_k": topk,
                            "hidden": h, "tokens": toks, "us": fus})
                        log(f"moe {name}: fused routing T=1 {fus[0]} T={toks[-1]} {fus[-1]} us")
                log(f"moe {name}: T=1 {us[0]} us, T={toks[-1]} {us[-1]} us; routing T=1 {rus[0]} T={toks[-1]} "
                    f"{rus[-1]} us")
            w13 = w2 = w13t = w2t = None
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------------------------------------------------
    def elementwise():
        log(f"== elementwise (triton kernels: {bool(tk)})")
        toks = [1, 64, 4096] if quick else [1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384]
        be = "triton one-pass kernel" if tk else "torch eager"
        for hdim in ([4096] if quick else ([2048, 2560, 4096] if args.lite else [2048, 2560, 4096, 5120, 8192])):
            us = []
            for T in toks:
                ns = nsets(T * hdim * 8, cap=128)
                xs = [rnd(T, hdim) for _ in range(ns)]
                rs = [rnd(T, hdim) for _ in range(ns)]
                w = rnd(hdim)
                os_ = [torch.empty_like(x) for x in xs]
                us.append(r4(time_calls([lambda i=i: ADD_RMS(xs[i], rs[i], w, os_[i]) for i in range(ns)])))
            table.add("rmsnorm", {"backend": be, "hidden": hdim, "tokens": toks, "us": us})
            log(f"rmsnorm h={hdim}: {us}")
        if tk:
            for D, H in ([(128, 40)] if quick else [(128, 40), (128, 48), (128, 80), (256, 20)]):
                us = []
                for T in toks:
                    ns = nsets(T * H * D * 4, cap=128)
                    xs = [rnd(T, H * D) for _ in range(ns)]
                    w = rnd(D)
                    us.append(r4(time_calls([lambda i=i: tk["head_rmsnorm"](xs[i], 0, T, H, D, H * D, w)
                                             for i in range(ns)])))
                table.add("qk_norm", {"backend": be + ", per-head RMSNorm in place, rows = tokens x heads",
                                      "head_dim": D, "heads": H, "tokens": toks, "us": us})
                log(f"qk_norm D={D} H={H}: {us}")
        for I in ([14336] if quick else ([768, 9728, 14336] if args.lite else
                                         [768, 1536, 4864, 5504, 7168, 9728, 14336, 28672])):
            us = []
            for T in toks:
                ns = nsets(T * I * 6, cap=128)
                xs = [rnd(T, 2 * I) for _ in range(ns)]
                os_ = [torch.empty(T, I, device=DEV, dtype=BF) for _ in range(ns)]
                us.append(r4(time_calls([lambda i=i: SILU_MUL(xs[i], os_[i]) for i in range(ns)])))
            table.add("silu_mul", {"backend": be, "intermediate": I, "tokens": toks, "us": us})
            log(f"silu_mul I={I}: {us}")
        if tk:
            for D, hq, hkv, rot in ([(128, 32, 8, 128)] if quick else
                                    [(128, 32, 8, 128), (128, 32, 32, 128), (128, 64, 8, 128), (128, 16, 2, 128),
                                     (256, 16, 4, 64)]):
                cs = rnd(40960, rot)
                us = []
                for T in toks:
                    ns = nsets(T * (hq + 2 * hkv) * D * 2, cap=128)
                    xs = [rnd(T, (hq + 2 * hkv) * D) for _ in range(ns)]
                    ps = [torch.randint(0, 40960, (T,), device=DEV) for _ in range(ns)]
                    us.append(r4(time_calls([lambda i=i: tk["rope"](xs[i], ps[i], cs, hq + hkv, D, xs[i].stride(0), rot)
                                             for i in range(ns)])))
                e = {"backend": be + ", neox style, in place on q and k of the qkv output", "head_dim": D,
                     "q_heads": hq, "kv_heads": hkv, "tokens": toks, "us": us}
                if rot != D:
                    e["rotary_dim"] = rot
                table.add("rope", e)
                log(f"rope D={D} {hq}/{hkv}: {us}")
        # sampling over fp32 logits
        bs = [1, 16, 256] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256]

        def topp(lg, p=0.9, temp=0.8):
            lg = lg / temp
            ls, idx = lg.sort(-1)
            cum = ls.softmax(-1).cumsum(-1)
            mask = cum <= 1 - p
            mask[:, -1] = False
            ls = ls.masked_fill(mask, float("-inf"))
            lg2 = torch.empty_like(ls).scatter_(-1, idx, ls)
            probs = lg2.softmax(-1)
            q = torch.empty_like(probs).exponential_()
            return probs.div_(q).argmax(-1)
        for V in ([151936] if quick else [32000, 128256, 151936, 248320]):
            for meth in ("greedy", "top_p"):
                us = []
                for B in bs:
                    ns = nsets(B * V * 4, cap=64)
                    ls_ = [torch.randn(B, V, device=DEV) * 3 for _ in range(ns)]
                    if meth == "greedy":
                        fns = [lambda i=i: torch.argmax(ls_[i], -1) for i in range(ns)]
                    else:
                        fns = [lambda i=i: topp(ls_[i]) for i in range(ns)]
                    us.append(r4(time_calls(fns)))
                table.add("sampling", {"method": meth, "backend": "torch argmax" if meth == "greedy" else
                                       "torch sort+softmax+cumsum+mask+scatter+softmax+exponential argmax "
                                       "(vLLM torch-native top-p, temperature 0.8, p 0.9)",
                                       "vocab": V, "batch": bs, "us": us})
                log(f"sampling {meth} V={V}: {us}")

    # ------------------------------------------------------------------------------------------------------------
    FWD_MODELS = {
        "Qwen3-4B": dict(h=2560, inter=9728, layers=36, hq=32, hkv=8, hd=128, vocab=151936, qk_norm=True, tied=True),
        "Llama-3.1-8B": dict(h=4096, inter=14336, layers=32, hq=32, hkv=8, hd=128, vocab=128256),
        "Qwen3-30B-A3B": dict(h=2048, layers=48, hq=32, hkv=4, hd=128, vocab=151936, qk_norm=True,
                              moe=(128, 8, 768)),
        # DeepSeek-V2-Lite (tests/fixtures/hf/DeepSeek-V2-Lite.json): MLA (no q LoRA; latent 512 + rope 64, nope 128,
        # v 128), layer 0 dense (10,944), then 64 routed experts top-6 of 1,408 and 2 shared experts (2,816).
        "DeepSeek-V2-Lite": dict(h=2048, layers=27, hq=16, hkv=16, hd=192, vocab=102400, inter=10944,
                                 mla=(512, 64, 128, 128), moe=(64, 6, 1408), shared=2816, dense_first=1),
        # Qwen3.5-4B (tests/fixtures/hf/Qwen3.5-4B.json, text_config): 32 layers, every 4th gated full attention
        # (16 q / 4 kv heads x 256, partial rotary 0.25 -> 64 dims), the rest Gated DeltaNet (16 key / 32 value heads
        # x 128, fp32 state); dense SwiGLU 9,216; vocab 248,320, tied embeddings.
        "Qwen3.5-4B": dict(h=2560, inter=9216, layers=32, hq=16, hkv=4, hd=256, vocab=248320, tied=True, rot=64,
                           interval=4, gdn=(16, 32)),
    }

    class Fwd:
        """Plain-torch forward of one model with random bf16 weights, built from the same kernels as the table."""

        def __init__(self, name, c):
            self.name, self.c = name, c
            h, hq, hkv, hd = c["h"], c["hq"], c["hkv"], c["hd"]
            self.nqkv = (hq + 2 * hkv) * hd
            per_layer = (self.nqkv * h + h * hq * hd) * 2
            if c.get("moe"):
                E, k, I = c["moe"]
                per_layer += (E * 3 * I * h + E * h) * 2
            else:
                per_layer += 3 * c["inter"] * h * 2
            budget = 0.42 * total_mem
            self.n_w = max(2, min(c["layers"], int(budget // per_layer)))
            self.layers = []
            for _ in range(self.n_w):
                L = dict(qkv=rnd(self.nqkv, h, scale=0.02), o=rnd(h, hq * hd, scale=0.02), ln1=rnd(h), ln2=rnd(h),
                         qn=rnd(hd), kn=rnd(hd))
                if c.get("moe"):
                    E, k, I = c["moe"]
                    L["router"] = rnd(E, h, scale=0.02)
                    if args.fwd_routing == "balanced":
                        # logits of std 30 against the router's ~1: each token's top-k is a fresh random draw
                        L["noise"] = torch.randn(16384, E, device=DEV, dtype=torch.float32) * 30.0
                    w13 = rnd(E, 2 * I, h, scale=0.02)
                    w2 = rnd(E, h, I, scale=0.02)
                    if caps.get("grouped_mm") == "transposed":
                        L["w13t"], L["w2t"] = w13.transpose(1, 2), w2.transpose(1, 2)
                    else:
                        L["w13t"], L["w2t"] = w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous()
                        del w13, w2
                else:
                    L["gu"] = rnd(2 * c["inter"], h, scale=0.02)
                    L["d"] = rnd(h, c["inter"], scale=0.02)
                self.layers.append(L)
            self.emb = rnd(c["vocab"], h)
            self.lm = self.emb if c.get("tied") else rnd(c["vocab"], h, scale=0.02)
            self.lnf = rnd(h)
            inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=DEV).float() / hd))
            fr = torch.outer(torch.arange(40960, device=DEV).float(), inv)
            self.cs = torch.cat([fr.cos(), fr.sin()], -1).to(BF)
            self.per_layer = per_layer
            log(f"fwd {name}: {self.n_w} distinct weight layers of {c['layers']} ({per_layer / 1e9:.2f} GB each)")

        def kv_bytes(self, B, ctx):
            return B * ctx * 2 * self.c["hkv"] * self.c["hd"] * 2

        def make_kv(self, B, ctx):
            return rnd(B, ctx, 2, self.c["hkv"], self.c["hd"])

        def mlp(self, L, x, T):
            c = self.c
            if c.get("moe"):
                E, topk, I = c["moe"]
                logits = F.linear(x, L["router"])
                if "noise" in L:
                    logits = logits.float() + L["noise"][:T]
                p = torch.softmax(logits, -1, dtype=torch.float32)
                w, ids = torch.topk(p, topk, -1)
                w = w / w.sum(-1, keepdim=True)
                flat = ids.reshape(-1)
                order = torch.argsort(flat, stable=True)
                cnt = torch.zeros(E, device=DEV, dtype=torch.int32).scatter_add_(
                    0, flat.int(), torch.ones_like(flat, dtype=torch.int32))
                if getattr(self, "record", None) is not None:   # eager only: the experts this layer's tokens reach
                    self.record.append(int((cnt > 0).sum().item()))
                offs = torch.cumsum(cnt, 0).to(torch.int32)
                xp = x.index_select(0, order // topk)
                y = torch._grouped_mm(xp, L["w13t"], offs=offs)
                a = torch.empty(y.shape[0], I, device=DEV, dtype=BF)
                SILU_MUL(y, a)
                yp = torch._grouped_mm(a, L["w2t"], offs=offs)
                y = torch.empty_like(yp).index_copy_(0, order, yp)
                return (y.view(T, topk, -1) * w.unsqueeze(-1).to(BF)).sum(1)
            gu = F.linear(x, L["gu"])
            a = torch.empty(T, c["inter"], device=DEV, dtype=BF)
            SILU_MUL(gu, a)
            return F.linear(a, L["d"])

        def forward(self, ids, pos, kv, B, Tq, ctx):
            """ids/pos [B*Tq]; kv: list of per-layer caches [B, ctx, 2, Hkv, hd] (decode) or None (prefill)"""
            c = self.c
            hq, hkv, hd, h = c["hq"], c["hkv"], c["hd"], c["h"]
            T = ids.shape[0]
            x = self.emb.index_select(0, ids)
            res = torch.zeros_like(x)
            hbuf = torch.empty_like(x)
            for li in range(c["layers"]):
                L = self.layers[li % self.n_w]
                ADD_RMS(x, res, L["ln1"], hbuf)
                qkv = F.linear(hbuf, L["qkv"])
                if c.get("qk_norm") and tk:
                    tk["head_rmsnorm"](qkv, 0, T, hq, hd, self.nqkv, L["qn"])
                    tk["head_rmsnorm"](qkv, hq * hd, T, hkv, hd, self.nqkv, L["kn"])
                tk["rope"](qkv, pos, self.cs, hq + hkv, hd, self.nqkv)
                q = qkv[:, :hq * hd].view(B, Tq, hq, hd).transpose(1, 2)
                if kv is None:
                    k = qkv[:, hq * hd:(hq + hkv) * hd].view(B, Tq, hkv, hd).transpose(1, 2)
                    v = qkv[:, (hq + hkv) * hd:].view(B, Tq, hkv, hd).transpose(1, 2)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                else:
                    cache = kv[li % len(kv)]
                    cache[:, ctx - 1].copy_(qkv[:, hq * hd:].view(B, 2, hkv, hd))   # write the new token's k, v
                    k = cache[:, :, 0].transpose(1, 2)
                    v = cache[:, :, 1].transpose(1, 2)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                o = o.transpose(1, 2).reshape(T, hq * hd)
                x = F.linear(o, L["o"])
                ADD_RMS(x, res, L["ln2"], hbuf)
                x = self.mlp(L, hbuf, T)
            ADD_RMS(x, res, self.lnf, hbuf)
            last = hbuf.view(B, Tq, h)[:, -1]
            return F.linear(last, self.lm)

    class FwdMLA(Fwd):
        """DeepSeek-V2-style forward: MLA as vLLM runs it (vllm/model_executor/layers/mla.py, v1/attention/backends/
        mla/common.py): prefill unabsorbed (kv_b_proj expands the latent to per-head k_nope and v; v padded to the
        q/k head size for FlashAttention, as vLLM pads it), decode absorbed (q_nope through W_UK into the latent space,
        scores against the latent cache [c_kv, k_pe], output through W_UV); MoE layers with shared experts."""

        def __init__(self, name, c):
            self.name, self.c = name, c
            h, H = c["h"], c["hq"]
            R, P, N, V = c["mla"]
            E, k, I = c["moe"]
            per_layer = (h * H * (N + P) + h * (R + P) + R * H * (N + V) + H * V * h) * 2
            per_layer += (E * 3 * I * h + E * h + 3 * c["shared"] * h) * 2
            budget = 0.42 * total_mem
            self.n_w = max(2, min(c["layers"], int(budget // per_layer)))
            self.layers = []
            for li in range(self.n_w):
                L = dict(q=rnd(H * (N + P), h, scale=0.02), kva=rnd(R + P, h, scale=0.02),
                         kvb=rnd(H * (N + V), R, scale=0.02), o=rnd(h, H * V, scale=0.02), ln1=rnd(h), ln2=rnd(h),
                         kvn=rnd(R))
                # the absorbed views of kv_b_proj: W_UK [H, N, R] and W_UV [H, R, V]
                wkv = L["kvb"].view(H, N + V, R)
                L["wuk"] = wkv[:, :N, :].contiguous()
                L["wuv"] = wkv[:, N:, :].transpose(1, 2).contiguous()
                if li < c.get("dense_first", 0):
                    L["gu"] = rnd(2 * c["inter"], h, scale=0.02)
                    L["d"] = rnd(h, c["inter"], scale=0.02)
                else:
                    L["router"] = rnd(E, h, scale=0.02)
                    if args.fwd_routing == "balanced":
                        L["noise"] = torch.randn(16384, E, device=DEV, dtype=torch.float32) * 30.0
                    w13 = rnd(E, 2 * I, h, scale=0.02)
                    w2 = rnd(E, h, I, scale=0.02)
                    if caps.get("grouped_mm") == "transposed":
                        L["w13t"], L["w2t"] = w13.transpose(1, 2), w2.transpose(1, 2)
                    else:
                        L["w13t"], L["w2t"] = w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous()
                        del w13, w2
                    L["sgu"] = rnd(2 * c["shared"], h, scale=0.02)
                    L["sd"] = rnd(h, c["shared"], scale=0.02)
                self.layers.append(L)
            self.emb = rnd(c["vocab"], h)
            self.lm = rnd(c["vocab"], h, scale=0.02)
            self.lnf = rnd(h)
            inv = 1.0 / (1e4 ** (torch.arange(0, P, 2, device=DEV).float() / P))
            fr = torch.outer(torch.arange(40960, device=DEV).float(), inv)
            self.cs = torch.cat([fr.cos(), fr.sin()], -1).to(BF)
            self.per_layer = per_layer
            log(f"fwd {name}: {self.n_w} distinct weight layers of {c['layers']} ({per_layer / 1e9:.2f} GB each)")

        def kv_bytes(self, B, ctx):
            R, P, _, _ = self.c["mla"]
            return B * ctx * (R + P) * 2

        def make_kv(self, B, ctx):
            R, P, _, _ = self.c["mla"]
            return rnd(B, ctx, R + P)

        def ffn(self, L, x, T):
            c = self.c
            if "gu" in L:
                gu = F.linear(x, L["gu"])
                a = torch.empty(T, c["inter"], device=DEV, dtype=BF)
                SILU_MUL(gu, a)
                return F.linear(a, L["d"])
            routed = Fwd.mlp(self, L, x, T)
            sgu = F.linear(x, L["sgu"])
            a = torch.empty(T, c["shared"], device=DEV, dtype=BF)
            SILU_MUL(sgu, a)
            return routed + F.linear(a, L["sd"])

        def forward(self, ids, pos, kv, B, Tq, ctx):
            c = self.c
            h, H = c["h"], c["hq"]
            R, P, N, V = c["mla"]
            T = ids.shape[0]
            x = self.emb.index_select(0, ids)
            res = torch.zeros_like(x)
            hbuf = torch.empty_like(x)
            for li in range(c["layers"]):
                d = c.get("dense_first", 0)   # layers [0, d) dense; the MoE layers cycle over the rest
                L = self.layers[li] if li < d else self.layers[d + (li - d) % (self.n_w - d)]
                ADD_RMS(x, res, L["ln1"], hbuf)
                q = F.linear(hbuf, L["q"])
                kva = F.linear(hbuf, L["kva"])
                tk["head_rmsnorm"](kva, 0, T, 1, R, R + P, L["kvn"])
                tk["rope"](q.view(-1)[N:], pos, self.cs, H, N + P, H * (N + P), rot=P)
                tk["rope"](kva.view(-1)[R:], pos, self.cs, 1, P, R + P, rot=P)
                if kv is None:
                    e = F.linear(kva[:, :R], L["kvb"]).view(T, H, N + V)
                    k = torch.cat([e[..., :N], kva[:, R:].unsqueeze(1).expand(T, H, P)], -1)
                    v = F.pad(e[..., N:], (0, N + P - V))
                    qh = q.view(1, T, H, N + P).transpose(1, 2)
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        o = F.scaled_dot_product_attention(qh, k.view(1, T, H, N + P).transpose(1, 2),
                                                           v.view(1, T, H, N + P).transpose(1, 2), is_causal=True)
                    o = o.transpose(1, 2)[..., :V].reshape(T, H * V)
                else:
                    cache = kv[li % len(kv)]
                    cache[:, ctx - 1].copy_(kva.view(B, R + P))
                    qv = q.view(B, H, N + P)
                    ql = torch.bmm(qv[..., :N].transpose(0, 1), L["wuk"])          # [H, B, R]
                    qf = torch.cat([ql.transpose(0, 1), qv[..., N:]], -1)          # [B, H, R + P]
                    sc = torch.bmm(qf, cache.transpose(1, 2))                       # [B, H, ctx]
                    pr = torch.softmax(sc * (N + P) ** -0.5, dim=-1)
                    ol = torch.bmm(pr, cache[..., :R])                              # [B, H, R]
                    o = torch.bmm(ol.transpose(0, 1), L["wuv"]).transpose(0, 1).reshape(T, H * V)
                x = F.linear(o, L["o"])
                ADD_RMS(x, res, L["ln2"], hbuf)
                x = self.ffn(L, hbuf, T)
            ADD_RMS(x, res, self.lnf, hbuf)
            last = hbuf.view(B, Tq, h)[:, -1]
            return F.linear(last, self.lm)


    # ------------------------------------------------------------------------------------------------------------
    # Gated DeltaNet (issue 38, item 1): the project's chunked prefill and recurrent decode kernels (kernels/gdn.cu,
    # through the C ABI of kernels/c_api.cpp), the causal conv1d before them, and the gating + gated RMSNorm around
    # them. vLLM runs the same four pieces for Qwen3-Next / Qwen3.5 (vllm/model_executor/models/qwen3_next.py:
    # causal_conv1d_fn / causal_conv1d_update, fused_gdn_gating, chunk_gated_delta_rule /
    # fused_recurrent_gated_delta_rule from its FLA copy, RMSNormGated), with FLA's Triton kernels in place of ours.
    GDN_LIB = {}

    def gdn_lib():
        if "lib" in GDN_LIB:
            return GDN_LIB["lib"]
        GDN_LIB["lib"] = None
        if not args.kernels_lib or not os.path.exists(args.kernels_lib):
            log(f"gdn: no kernels library ({args.kernels_lib or 'no --kernels-lib'}): skipped")
            return None
        import ctypes
        lib = ctypes.CDLL(args.kernels_lib)
        P, I, F32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        lib.servesim_gdn_prefill_workspace_bytes.restype = ctypes.c_size_t
        lib.servesim_gdn_prefill_workspace_bytes.argtypes = [I, I, I, I]
        lib.servesim_gdn_prefill.argtypes = [P, P, P, P, P, P, P, I, I, I, I, I, I, F32, P, P]
        lib.servesim_gdn_decode.argtypes = [P, P, P, P, P, P, P, I, I, I, I, F32, P]
        lib.servesim_conv1d_prefill.argtypes = [P, P, P, I, P, I, I, I, P]
        lib.servesim_conv1d_update.argtypes = [P, P, P, P, I, I, P]
        lib.servesim_last_error.restype = ctypes.c_char_p

        class K:
            pass
        k = K()
        k.lib, k.F32 = lib, F32

        def check(rc):
            if rc != 0:
                raise RuntimeError(lib.servesim_last_error().decode())
        k.check = check
        k.stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        GDN_LIB["lib"] = k
        return k

    def gdn_gating(ba, hv, A_log, dt_bias):
        b, a = ba.float().split([hv, hv], dim=-1)
        return torch.sigmoid(b).contiguous(), (-torch.exp(A_log) * F.softplus(a + dt_bias)).contiguous()

    def gated_norm(o, z, w, T, hv, dv):
        of = o.float()
        of = of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + 1e-6)
        return ((of * w.float()).to(BF) * F.silu(z.view(T, hv, dv))).view(T, hv * dv)

    class GdnBufs:
        """The inputs of one GDN layer's kernels for T tokens (num_seqs equal sequences) or a decode batch."""

        def __init__(self, hk, hv, T, seqs, decode):
            self.hk, self.hv, self.T, self.seqs = hk, hv, T, seqs
            conv = 2 * hk * 128 + hv * 128
            self.conv = conv
            self.mixed = rnd(T, conv, scale=0.5)
            self.y = torch.empty_like(self.mixed)
            self.convw = rnd(conv, 4, scale=0.5)
            B = T if decode else seqs
            self.conv_state = rnd(B, 3, conv, scale=0.5)
            self.q = rnd(T, hk * 128, scale=0.1)
            self.k = F.normalize(rnd(T, hk, 128), dim=-1).reshape(T, hk * 128).contiguous()
            self.v = rnd(T, hv * 128, scale=0.5)
            self.g = -torch.rand(T, hv, device=DEV) * 0.1
            self.beta = torch.rand(T, hv, device=DEV)
            self.o = torch.empty(T, hv, 128, device=DEV, dtype=BF)
            self.state = (torch.rand(B, hv, 128, 128, device=DEV) - 0.5) * 0.1
            self.ws = None
            if not decode:
                lib = gdn_lib()
                nbytes = lib.lib.servesim_gdn_prefill_workspace_bytes(seqs, T // seqs, hk, hv)
                self.ws = torch.empty(max(int(nbytes), 16), device=DEV, dtype=torch.uint8)

        def conv_prefill(self):
            k = gdn_lib()
            k.check(k.lib.servesim_conv1d_prefill(self.mixed.data_ptr(), self.convw.data_ptr(),
                                                  self.conv_state.data_ptr(), 0, self.y.data_ptr(), self.seqs,
                                                  self.T // self.seqs, self.conv, k.stream()))

        def conv_update(self):
            k = gdn_lib()
            k.check(k.lib.servesim_conv1d_update(self.mixed.data_ptr(), self.convw.data_ptr(),
                                                 self.conv_state.data_ptr(), self.y.data_ptr(), self.T, self.conv,
                                                 k.stream()))

        def prefill(self, q=None, kk=None, v=None, g=None, beta=None):
            k = gdn_lib()
            q, kk, v = (self.q, self.k, self.v) if q is None else (q, kk, v)
            g, beta = (self.g, self.beta) if g is None else (g, beta)
            k.check(k.lib.servesim_gdn_prefill(q.data_ptr(), kk.data_ptr(), v.data_ptr(), g.data_ptr(),
                                               beta.data_ptr(), self.o.data_ptr(), self.state.data_ptr(), 1, 0,
                                               self.seqs, self.T // self.seqs, self.hk, self.hv,
                                               k.F32(128 ** -0.5), self.ws.data_ptr(), k.stream()))

        def decode(self, q=None, kk=None, v=None, g=None, beta=None):
            k = gdn_lib()
            q, kk, v = (self.q, self.k, self.v) if q is None else (q, kk, v)
            g, beta = (self.g, self.beta) if g is None else (g, beta)
            k.check(k.lib.servesim_gdn_decode(q.data_ptr(), kk.data_ptr(), v.data_ptr(), g.data_ptr(),
                                              beta.data_ptr(), self.o.data_ptr(), self.state.data_ptr(), 1, self.T,
                                              self.hk, self.hv, k.F32(128 ** -0.5), k.stream()))

    def gdn_section():
        log("== gdn (project kernels: chunked prefill, recurrent decode, causal conv1d; torch gating + gated norm)")
        if gdn_lib() is None:
            return
        # per-rank (key heads, value heads) of the catalogued hybrids: Qwen3.5-4B / Qwen3-Next 16/32 at TP 1, 8/16 at
        # TP 2, 4/8 at TP 4; Qwen3.5-27B 16/48, 8/24, 4/12. Head dims 128 (every catalogued GDN model).
        geoms = [(16, 32)] if quick else [(16, 32), (8, 16), (4, 8), (16, 48), (8, 24), (4, 12)]
        toks = [64, 512, 2048] if quick else [16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
        batches = [1, 8, 64] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        for hk, hv in geoms:
            if left() < 30:
                log("DEADLINE in gdn")
                return
            for seqs in (1, 8):
                us, tt = [], []
                for T in toks:
                    if T < 8 * seqs:
                        continue
                    state_bytes = seqs * hv * 128 * 128 * 4
                    ns = nsets(T * (2 * hk + 2 * hv) * 128 * 2 + 2 * state_bytes, cap=16, mem_cap=8 << 30)
                    bs = [GdnBufs(hk, hv, T, seqs, False) for _ in range(ns)]
                    us.append(r4(time_calls([lambda b=b: b.prefill() for b in bs])))
                    tt.append(T)
                    bs = None
                table.add("gdn_prefill", {"backend": "servesim kernels/gdn.cu chunked (fp32 state)", "key_heads": hk,
                                          "value_heads": hv, "head_dim": 128, "seqs": seqs, "tokens": tt, "us": us})
                log(f"gdn_prefill hk={hk} hv={hv} seqs={seqs}: {list(zip(tt, us))}")
            us = []
            for B in batches:
                ns = nsets(B * hv * 128 * 128 * 4 * 2, cap=64, mem_cap=8 << 30)
                bs = [GdnBufs(hk, hv, B, 1, True) for _ in range(ns)]
                us.append(r4(time_calls([lambda b=b: b.decode() for b in bs])))
                bs = None
            table.add("gdn_decode", {"backend": "servesim kernels/gdn.cu recurrent (fp32 state, read + written)",
                                     "key_heads": hk, "value_heads": hv, "head_dim": 128, "batch": batches, "us": us})
            log(f"gdn_decode hk={hk} hv={hv}: {list(zip(batches, us))}")
            conv = 2 * hk * 128 + hv * 128
            for mode, grid in (("prefill", toks), ("decode", batches)):
                us = []
                for T in grid:
                    ns = nsets(T * conv * 4, cap=64)
                    bs = [GdnBufs(hk, hv, T, 1, mode == "decode") for _ in range(ns)]
                    f = (lambda b: b.conv_update) if mode == "decode" else (lambda b: b.conv_prefill)
                    us.append(r4(time_calls([f(b) for b in bs])))
                    bs = None
                table.add("conv1d", {"backend": "servesim kernels causal conv1d, width 4", "mode": mode, "dim": conv,
                                     ("batch" if mode == "decode" else "tokens"): grid, "us": us})
                log(f"conv1d {mode} dim={conv}: {list(zip(grid, us))}")
            # gating (sigmoid(b), -exp(A)·softplus(a + dt_bias)) and o = RMSNorm(o)·silu(z): torch ops, an upper bound
            # on vLLM's fused_gdn_gating and RMSNormGated (one Triton kernel each)
            us = []
            for T in toks:
                ns = nsets(T * hv * 128 * 6, cap=64)
                sets = [(rnd(T, 2 * hv), rnd(T, hv, 128), rnd(T, hv * 128)) for _ in range(ns)]
                A_log, dt_bias, w = torch.zeros(hv, device=DEV), torch.ones(hv, device=DEV), rnd(128)
                us.append(r4(time_calls([lambda s=s: (gdn_gating(s[0], hv, A_log, dt_bias),
                                                      gated_norm(s[1], s[2], w, T, hv, 128)) for s in sets])))
                sets = None
            table.add("gdn_aux", {"backend": "torch ops: gating + gated RMSNorm (upper bound on vLLM's fused kernels)",
                                  "value_heads": hv, "head_dim": 128, "tokens": toks, "us": us})
            log(f"gdn_aux hv={hv}: {list(zip(toks, us))}")
            torch.cuda.empty_cache()

    class FwdHybrid(Fwd):
        """Qwen3.5 / Qwen3-Next-style forward (vllm/model_executor/models/qwen3_next.py): every
        full_attention_interval-th layer is gated attention (q and an output gate from one projection, per-head q/k
        RMSNorm, partial rotary, SDPA flash, o·sigmoid(gate)), the others Gated DeltaNet (in_proj_qkvz + in_proj_ba,
        causal conv1d, gating, the GDN kernel, gated RMSNorm, out_proj); dense SwiGLU MLPs. GDN kernels are the
        project's (kernels/gdn.cu)."""

        def __init__(self, name, c):
            self.name, self.c = name, c
            h, hq, hkv, hd = c["h"], c["hq"], c["hkv"], c["hd"]
            hk, hv = c["gdn"]
            self.conv = 2 * hk * 128 + hv * 128
            self.nqkv = (2 * hq + 2 * hkv) * hd          # [q | k | v | gate]
            attn_layer = (self.nqkv * h + h * hq * hd) * 2
            gdn_layer = ((self.conv + hv * 128) * h + 2 * hv * h + h * hv * 128) * 2
            per_layer = max(attn_layer, gdn_layer) + 3 * c["inter"] * h * 2
            self.n_w = max(2, min(c["layers"], int(0.42 * total_mem // per_layer)))
            self.kinds = ["attn" if (i + 1) % c["interval"] == 0 else "gdn" for i in range(c["layers"])]
            self.layers = []
            for i in range(self.n_w):
                L = dict(ln1=rnd(h), ln2=rnd(h), gu=rnd(2 * c["inter"], h, scale=0.02), d=rnd(h, c["inter"], scale=0.02))
                L["qkv"] = rnd(self.nqkv, h, scale=0.02)
                L["o"] = rnd(h, hq * hd, scale=0.02)
                L["qn"], L["kn"] = rnd(hd), rnd(hd)
                L["qkvz"] = rnd(self.conv + hv * 128, h, scale=0.02)
                L["ba"] = rnd(2 * hv, h, scale=0.02)
                L["out"] = rnd(h, hv * 128, scale=0.02)
                L["convw"] = rnd(self.conv, 4, scale=0.5)
                L["A_log"], L["dt_bias"], L["gn"] = torch.zeros(hv, device=DEV), torch.ones(hv, device=DEV), rnd(128)
                self.layers.append(L)
            self.emb = rnd(c["vocab"], h)
            self.lm = self.emb if c.get("tied") else rnd(c["vocab"], h, scale=0.02)
            self.lnf = rnd(h)
            rot = c["rot"]
            inv = 1.0 / (1e7 ** (torch.arange(0, rot, 2, device=DEV).float() / rot))
            fr = torch.outer(torch.arange(40960, device=DEV).float(), inv)
            self.cs = torch.cat([fr.cos(), fr.sin()], -1).to(BF)
            self.per_layer = per_layer
            self.state_sets, self.ws = None, None
            log(f"fwd {name}: {self.n_w} distinct weight layers of {c['layers']} ({per_layer / 1e9:.2f} GB each)")

        def n_attn(self):
            return self.kinds.count("attn")

        def kv_bytes(self, B, ctx):
            # one attention layer's cache plus the GDN states of the interval's other layers (fp32) and conv states
            hk, hv = self.c["gdn"]
            per_gdn = B * (hv * 128 * 128 * 4 + 3 * self.conv * 2)
            return B * ctx * 2 * self.c["hkv"] * self.c["hd"] * 2 + (self.c["interval"] - 1) * per_gdn

        def make_kv(self, B, ctx):
            hk, hv = self.c["gdn"]
            states = [((torch.rand(B, hv, 128, 128, device=DEV) - 0.5) * 0.1, rnd(B, 3, self.conv, scale=0.5))
                      for _ in range(self.c["interval"])]
            return (rnd(B, ctx, 2, self.c["hkv"], self.c["hd"]), states)

        def gdn(self, L, x, T, B, decode, st):
            c = self.c
            hk, hv = c["gdn"]
            kern = gdn_lib()
            qkvz = F.linear(x, L["qkvz"])
            mixed, z = qkvz[:, :self.conv].contiguous(), qkvz[:, self.conv:]
            beta, g = gdn_gating(F.linear(x, L["ba"]), hv, L["A_log"], L["dt_bias"])
            y = torch.empty_like(mixed)
            state, conv_state = st
            if decode:
                kern.check(kern.lib.servesim_conv1d_update(mixed.data_ptr(), L["convw"].data_ptr(),
                                                           conv_state.data_ptr(), y.data_ptr(), B, self.conv,
                                                           kern.stream()))
            else:
                kern.check(kern.lib.servesim_conv1d_prefill(mixed.data_ptr(), L["convw"].data_ptr(),
                                                            conv_state.data_ptr(), 0, y.data_ptr(), 1, T, self.conv,
                                                            kern.stream()))
            q, k, v = y.split([hk * 128, hk * 128, hv * 128], dim=-1)
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            o = torch.empty(T, hv, 128, device=DEV, dtype=BF)
            if decode:
                kern.check(kern.lib.servesim_gdn_decode(q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(),
                                                        beta.data_ptr(), o.data_ptr(), state.data_ptr(), 1, B, hk, hv,
                                                        kern.F32(128 ** -0.5), kern.stream()))
            else:
                kern.check(kern.lib.servesim_gdn_prefill(q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(),
                                                         beta.data_ptr(), o.data_ptr(), state.data_ptr(), 1, 0, 1, T,
                                                         hk, hv, kern.F32(128 ** -0.5), self.ws.data_ptr(),
                                                         kern.stream()))
            return F.linear(gated_norm(o, z, L["gn"], T, hv, 128), L["out"])

        def forward(self, ids, pos, kv, B, Tq, ctx):
            c = self.c
            hq, hkv, hd, h = c["hq"], c["hkv"], c["hd"], c["h"]
            hk, hv = c["gdn"]
            T = ids.shape[0]
            decode = kv is not None
            if not decode:
                if self.state_sets is None:
                    self.state_sets = [(torch.zeros(1, hv, 128, 128, device=DEV), rnd(1, 3, self.conv))
                                       for _ in range(c["interval"])]
                nbytes = max(int(gdn_lib().lib.servesim_gdn_prefill_workspace_bytes(1, T, hk, hv)), 16)
                if self.ws is None or self.ws.numel() < nbytes:
                    self.ws = torch.empty(nbytes, device=DEV, dtype=torch.uint8)
            x = self.emb.index_select(0, ids)
            res = torch.zeros_like(x)
            hbuf = torch.empty_like(x)
            ia = 0
            for li in range(c["layers"]):
                L = self.layers[li % self.n_w]
                ADD_RMS(x, res, L["ln1"], hbuf)
                group = kv[(li // c["interval"]) % len(kv)] if decode else None
                if self.kinds[li] == "gdn":
                    st = group[1][li % c["interval"]] if decode else self.state_sets[li % c["interval"]]
                    x = self.gdn(L, hbuf, T, B, decode, st)
                else:
                    qkv = F.linear(hbuf, L["qkv"])
                    tk["head_rmsnorm"](qkv, 0, T, hq, hd, self.nqkv, L["qn"])
                    tk["head_rmsnorm"](qkv, hq * hd, T, hkv, hd, self.nqkv, L["kn"])
                    tk["rope"](qkv, pos, self.cs, hq + hkv, hd, self.nqkv, rot=c["rot"])
                    q = qkv[:, :hq * hd].view(B, Tq, hq, hd).transpose(1, 2)
                    gate = qkv[:, (hq + 2 * hkv) * hd:]
                    if not decode:
                        k = qkv[:, hq * hd:(hq + hkv) * hd].view(B, Tq, hkv, hd).transpose(1, 2)
                        v = qkv[:, (hq + hkv) * hd:(hq + 2 * hkv) * hd].view(B, Tq, hkv, hd).transpose(1, 2)
                        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                    else:
                        cache = group[0]
                        cache[:, ctx - 1].copy_(qkv[:, hq * hd:(hq + 2 * hkv) * hd].view(B, 2, hkv, hd))
                        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                            o = F.scaled_dot_product_attention(q, cache[:, :, 0].transpose(1, 2),
                                                               cache[:, :, 1].transpose(1, 2), enable_gqa=True)
                    o = o.transpose(1, 2).reshape(T, hq * hd) * torch.sigmoid(gate)
                    x = F.linear(o, L["o"])
                ADD_RMS(x, res, L["ln2"], hbuf)
                x = self.mlp(L, hbuf, T)
            ADD_RMS(x, res, self.lnf, hbuf)
            last = hbuf.view(B, Tq, h)[:, -1]
            return F.linear(last, self.lm)

    def graph_replays_ms(fn, replays=7, then=None):
        """fn captured once into a CUDA graph, replayed once, then `replays` replays timed one by one (ms each);
        `then(graph)`, if given, runs on the same graph before it is freed (the profile section's profiled replays)."""
        with torch.no_grad():
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            g.replay()
            torch.cuda.synchronize()
            out = []
            for _ in range(replays):
                s, e = ev(), ev()
                s.record()
                g.replay()
                e.record()
                e.synchronize()
                out.append(s.elapsed_time(e))
            if then is not None:
                then(g)
        del g
        return out

    def forwards():
        log("== forwards")
        if not tk or not caps.get("grouped_mm") or not any(b[0] == "flash" for b in caps.get("prefill", [])):
            log("forwards need the triton kernels, grouped_mm and SDPA flash: skipped")
            return
        chosen = [x for x in args.fwd_models.split(",") if x]
        names = chosen or (["Qwen3-4B"] if quick else list(FWD_MODELS))
        for name in names:
            if left() < 20:
                log("DEADLINE in forwards")
                break
            c = FWD_MODELS[name]
            try:
                if c.get("gdn") and gdn_lib() is None:
                    log(f"fwd {name}: needs --kernels-lib (GDN kernels): skipped")
                    continue
                m = FwdMLA(name, c) if c.get("mla") else (FwdHybrid(name, c) if c.get("gdn") else Fwd(name, c))
            except torch.OutOfMemoryError:
                log(f"fwd {name}: OOM building weights")
                torch.cuda.empty_cache()
                continue
            # a MoE forward routed by random logits says so (the table's reader tells the two apart)
            routing_key = {"routing": "balanced"} if c.get("moe") and args.fwd_routing == "balanced" else {}
            for T in ([512, 2048] if quick else [512, 2048, 8192, 16384]):
                try:
                    ids = torch.randint(0, c["vocab"], (T,), device=DEV)
                    pos = torch.arange(T, device=DEV)
                    with torch.no_grad():
                        m.forward(ids, pos, None, 1, T, 0)
                        torch.cuda.synchronize()
                        ts = []
                        for _ in range(3 if T >= 8192 else 5):
                            s, e = ev(), ev()
                            s.record()
                            m.forward(ids, pos, None, 1, T, 0)
                            e.record()
                            e.synchronize()
                            ts.append(s.elapsed_time(e))
                    table.forwards.append({"model": name, "kind": "prefill", "tokens": T, "context": 0, "batch": 1,
                                           "ms": r4(statistics.median(ts)), "cuda_graph": False,
                                           "layers": c["layers"], "distinct_weight_layers": m.n_w, **routing_key})
                    table.write()
                    log(f"fwd {name} prefill {T}: {statistics.median(ts):.3f} ms (all {[round(t, 3) for t in ts]})")
                    if c.get("moe"):
                        # how many of the E experts each MoE layer's tokens reached (uniform top-k: E(1-(1-k/E)^T))
                        E, k, _ = c["moe"]
                        m.record = []
                        with torch.no_grad():
                            m.forward(ids, pos, None, 1, T, 0)
                        got, m.record = m.record, None
                        log(f"fwd {name} prefill {T} routing {args.fwd_routing}: experts reached per MoE layer "
                            f"min {min(got)} median {statistics.median(got)} max {max(got)} of {E} "
                            f"(uniform routing expects {E * (1 - (1 - k / E) ** T):.1f}); all {got}")
                    if T <= 2048:
                        # vLLM runs prefills of up to its largest capture size under (piecewise) CUDA graphs: the
                        # same forward replayed from a graph, without the eager launches from Python.
                        tg = graph_replays_ms(lambda: m.forward(ids, pos, None, 1, T, 0))
                        table.forwards.append({"model": name, "kind": "prefill", "tokens": T, "context": 0,
                                               "batch": 1, "ms": r4(statistics.median(tg)), "cuda_graph": True,
                                               "layers": c["layers"], "distinct_weight_layers": m.n_w, **routing_key})
                        table.write()
                        log(f"fwd {name} prefill {T} graph: {statistics.median(tg):.3f} ms "
                            f"(all {[round(t, 3) for t in tg]})")
                except Exception as ex:
                    log(f"fwd {name} prefill {T} FAILED: {str(ex)[:300]}")
                    traceback.print_exc()
                torch.cuda.empty_cache()
            for B in ([1, 64] if quick else [1, 16, 64, 256]):
                for ctx in ([1024] if quick else [1024, 4096, 8192]):
                    if left() < 10:
                        break
                    try:
                        per_layer_kv = m.kv_bytes(B, ctx)
                        n_kv = max(2, min(c["layers"], int(0.3 * total_mem // per_layer_kv)))
                        kv = [m.make_kv(B, ctx) for _ in range(n_kv)]
                        ids = torch.randint(0, c["vocab"], (B,), device=DEV)
                        pos = torch.full((B,), ctx - 1, device=DEV, dtype=torch.long)
                        m.record = [] if c.get("moe") else None
                        with torch.no_grad():
                            m.forward(ids, pos, kv, B, 1, ctx)   # eager warm-up before the capture
                            torch.cuda.synchronize()
                        if m.record:
                            log(f"fwd {name} decode B={B} ctx={ctx} routing {args.fwd_routing}: experts reached per "
                                f"MoE layer min {min(m.record)} median {statistics.median(m.record)} "
                                f"max {max(m.record)}")
                        m.record = None
                        ts = graph_replays_ms(lambda: m.forward(ids, pos, kv, B, 1, ctx))
                        table.forwards.append({"model": name, "kind": "decode", "batch": B, "context": ctx,
                                               "ms": r4(statistics.median(ts)), "cuda_graph": True,
                                               "layers": c["layers"], "distinct_weight_layers": m.n_w, **routing_key,
                                               "distinct_kv_layers": n_kv})
                        table.write()
                        log(f"fwd {name} decode B={B} ctx={ctx}: {statistics.median(ts):.3f} ms "
                            f"(kv sets {n_kv}; all {[round(t, 3) for t in ts]})")
                    except Exception as ex:
                        log(f"fwd {name} decode B={B} ctx={ctx} FAILED: {str(ex)[:300]}")
                        traceback.print_exc()
                    kv = None
                    torch.cuda.empty_cache()
            m = None
            torch.cuda.empty_cache()

    def profile_section():
        """Where a timed forward's time goes, kernel by kernel: the forward captured into a CUDA graph (as the
        forwards section times it), three replays under torch.profiler (CUPTI records the kernels a graph replay
        runs), each kernel name's count and GPU time per forward, and the replay's wall time against the sum of its
        kernels (the difference is the idle time between kernels). A diagnostic for the composition
        (`servesim inspect --check-kernels`): it names the kernels a composition misses. Written to
        $OUT/profile.json; default models: the MLA and the MoE forwards."""
        log("== profile")
        if not tk or not caps.get("grouped_mm"):
            log("profile needs the triton kernels and grouped_mm: skipped")
            return
        from torch.profiler import profile as tprofile, ProfilerActivity
        chosen = [x for x in args.fwd_models.split(",") if x]
        names = chosen or [n for n in FWD_MODELS if FWD_MODELS[n].get("mla") or FWD_MODELS[n].get("moe")]
        out = []
        for name in names:
            if left() < 20:
                log("DEADLINE in profile")
                break
            c = FWD_MODELS[name]
            if c.get("gdn") and gdn_lib() is None:
                continue
            m = FwdMLA(name, c) if c.get("mla") else (FwdHybrid(name, c) if c.get("gdn") else Fwd(name, c))
            for B, ctx in ((1, 1024), (16, 1024), (256, 1024)):
                try:
                    n_kv = max(2, min(c["layers"], int(0.3 * total_mem // m.kv_bytes(B, ctx))))
                    kv = [m.make_kv(B, ctx) for _ in range(n_kv)]
                    ids = torch.randint(0, c["vocab"], (B,), device=DEV)
                    pos = torch.full((B,), ctx - 1, device=DEV, dtype=torch.long)
                    with torch.no_grad():
                        m.forward(ids, pos, kv, B, 1, ctx)   # eager warm-up before the capture
                        torch.cuda.synchronize()
                    reps = 3
                    profiled = {}

                    def profile_replays(g):
                        with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
                            for _ in range(reps):
                                g.replay()
                            torch.cuda.synchronize()
                        profiled["events"] = prof.events()

                    # the replay's wall time outside the profiler, then the profiled replays of the same graph
                    wall_us = 1000.0 * statistics.median(
                        graph_replays_ms(lambda: m.forward(ids, pos, kv, B, 1, ctx), replays=5, then=profile_replays))
                    kern = {}
                    for evt in profiled["events"]:
                        if not str(evt.device_type).endswith("CUDA"):
                            continue
                        k = kern.setdefault(evt.name, [0, 0.0])
                        k[0] += 1
                        k[1] += evt.time_range.elapsed_us()
                    rows = sorted(([n, v[0] / reps, v[1] / reps] for n, v in kern.items()), key=lambda r: -r[2])
                    busy = sum(r[2] for r in rows)
                    calls = sum(r[1] for r in rows)
                    out.append({"model": name, "batch": B, "context": ctx, "layers": c["layers"],
                                "wall_us": r4(wall_us), "kernel_us": r4(busy), "kernels": r4(calls),
                                "per_kernel": [{"name": n[:160], "calls": r4(k), "us": r4(t)} for n, k, t in rows]})
                    with open(os.path.join(args.out, "profile.json"), "w") as f:
                        json.dump(out, f, indent=1)
                    log(f"profile {name} decode B={B} ctx={ctx}: wall {wall_us:.1f} us, kernels {busy:.1f} us in "
                        f"{calls:.0f} launches (idle {wall_us - busy:.1f} us)")
                    for n, k, t in rows[:14]:
                        log(f"    {t:9.1f} us {k:6.0f} x  {n[:110]}")
                except Exception as ex:
                    log(f"profile {name} B={B} FAILED: {str(ex)[:300]}")
                    traceback.print_exc()
                kv = None
                torch.cuda.empty_cache()
            m = None
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------------------------------------------------
    torch.backends.cuda.matmul.allow_tf32 = False
    plan = {
        "probe": probe, "ceilings": ceilings, "elementwise": elementwise, "attention": attention,
        "attn_decode": lambda: attention(decode_only=True), "moe": moe_section,
        "forwards": forwards, "gdn": gdn_section, "profile": profile_section,
        "gemm0": lambda: gemm_section(0, ["bf16", "fp8_tensor"]),
        "gemm0b": lambda: gemm_section(0, ["bf16"]),
        "gemm0f": lambda: gemm_section(0, ["fp8_tensor"]),
        "gemm0x": lambda: gemm_section(0, ["fp8_rowwise", "fp8_block"]),
        "gemm1": lambda: gemm_section(1, ["bf16", "fp8_tensor"]),
        "gemm1x": lambda: gemm_section(1, ["fp8_rowwise", "fp8_block"]),
        "gemm0w4": lambda: gemm_section(0, ["w4a16"], max_m=4096),
        "gemm1w4": lambda: gemm_section(1, ["w4a16"], max_m=4096),
    }
    if "probe" not in sections:
        sections.insert(0, "probe")
    for sec in sections:
        t0 = time.time()
        if sec != "probe" and left() < 5:
            log(f"DEADLINE: section {sec} skipped")
            continue
        try:
            plan[sec]()
        except Exception as ex:
            log(f"section {sec} FAILED: {ex}")
            traceback.print_exc()
        torch.cuda.empty_cache()
        log(f"-- section {sec}: {time.time() - t0:.1f}s (left {left():.0f}s)")
    table.write()
    log(f"done in {time.time() - T_START:.1f}s; wrote {table.path}")


if __name__ == "__main__":
    main()
