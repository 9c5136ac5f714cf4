# Experiment (issue 38, docs/COST-MODEL.md "Composition against torch-timed forwards"): does torch's FlashAttention
# decode read a large KV cache more slowly when the calls of a replay cycle over more distinct caches? The table's
# attn_decode op times each (batch, context) point over 2 caches (sweep_tables.py nsets with a 24 GiB cap), the decode
# forwards over up to 0.3 x GPU memory of them (one per layer where they fit: 9 of 4.3 GB at 256 x 4,096 on an H200),
# and a server's layers each read their own part of a pool of tens of GB. The forwards at 256 x 4,096 came out 10-12 %
# slower than the table composes them on both Hoppers while 256 x 8,192 (whose two table caches already total 17 GB)
# agrees. This times the same SDPA flash decode (q_len 1, contiguous [B, ctx, kv_heads, 128] cache, GQA 32/8) at a few
# points with 1, 2, 4 and 8 distinct caches cycled in one CUDA graph (moe_triton.time_graph_cycling), as
# sweep_tables.time_calls does.
# Run on the device: python3 attn_decode_footprint_probe.py OUTDIR
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from moe_triton import time_graph_cycling

DEV, BF = "cuda", torch.bfloat16
HQ, HKV, HD = 32, 8, 128
POINTS = [(256, 2048), (256, 4096), (128, 4096), (256, 8192)]
SETS = [1, 2, 4, 8]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    free = torch.cuda.mem_get_info()[0]
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "points": []}
    print(res["device"], flush=True)
    for B, C in POINTS:
        kv_bytes = 2 * B * C * HKV * HD * 2
        for n in SETS:
            if n * kv_bytes > 0.8 * free:
                continue
            qs = [torch.randn(B, 1, HQ, HD, device=DEV, dtype=BF).transpose(1, 2) for _ in range(n)]
            ks = [torch.randn(B, C, HKV, HD, device=DEV, dtype=BF).transpose(1, 2) for _ in range(n)]
            vs = [torch.randn(B, C, HKV, HD, device=DEV, dtype=BF).transpose(1, 2) for _ in range(n)]

            def fn(i):
                def f():
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=True)
                return f

            fns = [fn(i) for i in range(n)]
            us = time_graph_cycling(fns, calls=max(8, 2 * n), reps=5)
            row = {"batch": B, "context": C, "sets": n, "footprint_gb": round(n * kv_bytes / 1e9, 2),
                   "us": round(us, 2), "tb_per_s": round(kv_bytes / us / 1e6, 3)}
            res["points"].append(row)
            print(row, flush=True)
            qs = ks = vs = fns = None
            torch.cuda.empty_cache()
    with open(os.path.join(out, "attn_decode_footprint.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
