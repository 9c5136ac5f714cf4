# Experiment (issue 37): how long does a step wait when vLLM's Triton fused-MoE kernel meets a variant it has not
# compiled? Triton compiles one binary per tile config (the constexprs) and per specialisation of the integer
# arguments (== 1, divisible by 16); vLLM's start-up reaches only some of them (vLLM PR #55268), and the first step that
# selects another compiles it on the spot. This times that compile for the project's reproduction of vLLM's fused_moe
# GEMM (moe_triton.py's moe_gemm: the same algorithm, gather by sorted id, expert tile, optional routing weight) at
# Mixtral-8x7B TP 2's shapes (8 experts, top-2, hidden 4096, 7168 per rank), both projections of one MoE layer, per
# tile config and per divisibility class of (EM, num_valid_tokens): wall time of the first call (compile + run) minus
# the second (run), with a fresh TRITON_CACHE_DIR ("cold") and then in a second process with the cache on disk
# ("warm": vLLM restarted on the same machine). Run on the device:
#   python3 triton_jit_probe.py OUTDIR cold CACHEDIR && python3 triton_jit_probe.py OUTDIR warm CACHEDIR
import json
import os
import sys
import time

OUT, PHASE, CACHE = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["TRITON_CACHE_DIR"] = CACHE  # before triton is imported

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

from moe_triton import DEV, BF, align, moe_gemm  # noqa: E402

E, TOPK, H, I = 8, 2, 4096, 7168
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the spread of vLLM's tuned H100 files and its
# get_default_config choices
CONFIGS = [(16, 64, 64, 1, 4, 3), (16, 128, 128, 1, 8, 4), (32, 128, 64, 8, 4, 4), (64, 128, 64, 1, 4, 3),
           (64, 256, 64, 16, 8, 4), (128, 256, 64, 1, 8, 4)]
# token counts M whose (EM, num_valid = 2M) fall in different divisibility classes: EM = 2M + 8 (BLOCK_M - 1) ≡ 2M + 8
# (mod 16) for every BLOCK_M, so M ≡ 0 (mod 8): num_valid ≡ 0, EM ≡ 8; M ≡ 4 (mod 8): EM ≡ 0; odd M: neither
TOKENS = [1000, 1004, 1001]


def layer(x, w13, w2, inter, out, wts, ids, c, M):
    bm, bn, bk, gm, nw, ns = c
    sid, eid, npad, EM = align(ids, E, bm)
    moe_gemm[(triton.cdiv(EM, bm) * triton.cdiv(2 * I, bn),)](
        x, w13, inter, wts, sid, eid, npad, 2 * I, H, M * TOPK, x.stride(0), w13.stride(0), w13.stride(1),
        inter.stride(0), A_DIV=TOPK, MUL_W=False, BM=bm, BN=bn, BK=bk, GROUP_M=gm, EM=EM, num_warps=nw, num_stages=ns)
    act = F.silu(inter[:, :I]) * inter[:, I:]
    moe_gemm[(triton.cdiv(EM, bm) * triton.cdiv(H, bn),)](
        act, w2, out, wts, sid, eid, npad, H, I, M * TOPK, act.stride(0), w2.stride(0), w2.stride(1), out.stride(0),
        A_DIV=1, MUL_W=True, BM=bm, BN=bn, BK=bk, GROUP_M=gm, EM=EM, num_warps=nw, num_stages=ns)
    return EM


def main():
    os.makedirs(OUT, exist_ok=True)
    log = open(os.path.join(OUT, f"triton_jit_{PHASE}.log"), "w")

    def P(s):
        print(s, flush=True)
        log.write(s + "\n")
        log.flush()

    P(f"{torch.cuda.get_device_name(0)} torch {torch.__version__} triton {triton.__version__} phase {PHASE} "
      f"cache {CACHE} ({len(os.listdir(CACHE)) if os.path.isdir(CACHE) else 0} entries)")
    w13 = torch.randn(E, 2 * I, H, device=DEV, dtype=BF) * 0.02
    w2 = torch.randn(E, H, I, device=DEV, dtype=BF) * 0.02
    rows = []
    for c in CONFIGS:
        for M in TOKENS:
            x = torch.randn(M, H, device=DEV, dtype=BF)
            wts, ids = torch.topk(torch.softmax(torch.randn(M, E, device=DEV), -1), TOPK, -1)
            wts = (wts / wts.sum(-1, keepdim=True)).reshape(-1).contiguous()
            ids = ids.to(torch.int32)
            inter = torch.empty(M * TOPK, 2 * I, device=DEV, dtype=BF)
            out = torch.empty(M * TOPK, H, device=DEV, dtype=BF)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            EM = layer(x, w13, w2, inter, out, wts, ids, c, M)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            layer(x, w13, w2, inter, out, wts, ids, c, M)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            r = dict(phase=PHASE, cfg=c, M=M, EM_mod16=EM % 16, num_valid_mod16=(M * TOPK) % 16,
                     first_s=round(t1 - t0, 4), second_s=round(t2 - t1, 4), compile_s=round((t1 - t0) - (t2 - t1), 4))
            rows.append(r)
            P(json.dumps(r))
    json.dump(rows, open(os.path.join(OUT, f"triton_jit_{PHASE}.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
