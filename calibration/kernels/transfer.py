#!/usr/bin/env python3
# Transfer check for the kernel tables (issue 38, item 3): predicts one GPU's table from another's by scaling each
# measured time with the ratio of the two GPUs' rooflines for that call (the larger of FLOPs / peak and bytes /
# bandwidth, so a memory-bound call scales with bandwidth and a compute-bound one with the matrix rate), and reports
# the error of the prediction per op class. Runs on the CPU: `python3 calibration/kernels/transfer.py SRC.yaml DST.yaml`
# (defaults: H100-SXM -> H200). Peaks come from calibration/gpus/<name>.yaml (datasheet) and, as a second column,
# from each table's own measured `ceilings` (bf16 GEMM TFLOP/s, copy GB/s).
import os
import statistics
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def flops_bytes(op, e, i, j=None):
    """FLOPs and the fewest bytes moved for grid point i (and j for 2-D grids) of entry e of op."""
    if op.startswith("gemm_"):
        m, n, k = e["m"][i], e["n"], e["k"]
        el = 2 if op == "gemm_bf16" else 1
        return 2.0 * m * n * k, (m * k + n * k) * el + m * n * 2
    if op == "attn_prefill":
        t, d, hq, hkv = e["tokens"][i], e["head_dim"], e["q_heads"], e["kv_heads"]
        return 2.0 * t * t * d * hq, (2 * t * hq * d + 2 * t * hkv * d) * 2
    if op == "attn_prefill_cached":
        c, ctx, d, hq, hkv = e["chunk"][i], e["context"][j], e["head_dim"], e["q_heads"], e["kv_heads"]
        return 4.0 * c * (ctx + c / 2) * d * hq, (2 * c * hq * d + 2 * (ctx + c) * hkv * d) * 2
    if op == "attn_decode":
        b, ctx, d, hq, hkv = e["batch"][i], e["context"][j], e["head_dim"], e["q_heads"], e["kv_heads"]
        return 4.0 * b * ctx * d * hq, 2 * b * ctx * hkv * d * 2 + 2 * b * hq * d * 2
    if op == "attn_decode_mla":
        b, ctx, h, r, p = e["batch"][i], e["context"][j], e["q_heads"], e["kv_lora_rank"], e["rope_dim"]
        # two bmm over the latent cache plus the scores written, read by softmax, written and read again
        return 2.0 * b * h * ctx * (2 * r + p), b * ctx * (r + p) * 2 * 2 + b * h * ctx * 2 * 4
    if op == "moe":
        t, ex, k, h, inter = e["tokens"][i], e["experts"], e["top_k"], e["hidden"], e["intermediate"]
        touched = ex * (1 - (1 - k / ex) ** t)
        return 2.0 * t * k * 3 * h * inter, touched * 3 * h * inter * 2 + t * k * (2 * h + 6 * inter) * 2
    if op == "moe_routing":
        t, ex, k, h = e["tokens"][i], e["experts"], e["top_k"], e["hidden"]
        return 0.0, t * ex * 4 + 3 * t * k * h * 2 + t * h * 2
    if op == "rmsnorm":
        return 0.0, 4 * e["tokens"][i] * e["hidden"] * 2
    if op == "qk_norm":
        return 0.0, 2 * e["tokens"][i] * e["heads"] * e["head_dim"] * 2
    if op == "silu_mul":
        return 0.0, 3 * e["tokens"][i] * e["intermediate"] * 2
    if op == "rope":
        rot = e.get("rotary_dim", e["head_dim"])
        return 0.0, 2 * e["tokens"][i] * (e["q_heads"] + e["kv_heads"]) * rot * 2
    if op == "sampling":
        passes = 1 if e.get("method") == "greedy" else 8
        return 0.0, passes * e["batch"][i] * e["vocab"] * 4
    return None


def key(op, e):
    skip = {"us", "m", "tokens", "batch", "context", "chunk"}
    return (op,) + tuple(sorted((k, str(v)) for k, v in e.items() if k not in skip))


def points(op, e):
    us = e["us"]
    if us and isinstance(us[0], list):
        g1 = e["chunk"] if "chunk" in e else e["batch"]
        g2 = e["context"]
        for i in range(len(g1)):
            for j in range(len(g2)):
                yield (g1[i], g2[j]), i, j, us[i][j]
    else:
        grid = e.get("m") or e.get("tokens") or e.get("batch")
        for i in range(len(grid)):
            yield (grid[i],), i, None, us[i]


def roof(fb, peak_flops, bw):
    f, b = fb
    return max(f / peak_flops, b / bw)


def gpu_peaks(name):
    with open(os.path.join(HERE, "..", "gpus", f"{name}.yaml")) as fh:
        g = yaml.safe_load(fh)
    return g["bf16_dense_tflops"] * 1e12, g["memory_bandwidth_gb_per_s"] * 1e9


def main():
    src_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "H100-SXM.yaml")
    dst_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "H200.yaml")
    src, dst = [yaml.safe_load(open(p)) for p in (src_path, dst_path)]
    sheets = {t["gpu"]: gpu_peaks(t["gpu"]) for t in (src, dst)}
    meas = {t["gpu"]: (t["ceilings"]["bf16_gemm_tflops"] * 1e12, t["ceilings"]["copy_gb_per_s"] * 1e9)
            for t in (src, dst)}
    print(f"predict {dst['gpu']} from {src['gpu']}; datasheet peaks {sheets}; measured ceilings {meas}")
    dst_idx = {}
    for op, entries in (dst.get("ops") or {}).items():
        for e in entries:
            dst_idx[key(op, e)] = e
    rows = {}
    for op, entries in (src.get("ops") or {}).items():
        for e in entries:
            d = dst_idx.get(key(op, e))
            if d is None:
                continue
            dpts = {g: u for g, _, _, u in points(op, d)}
            for g, i, j, u in points(op, e):
                if g not in dpts:
                    continue
                fb = flops_bytes(op, e, i, j)
                if fb is None:
                    continue
                errs = []
                for peaks in (sheets, meas):
                    r = roof(fb, *peaks[dst["gpu"]]) / roof(fb, *peaks[src["gpu"]])
                    errs.append(u * r / dpts[g] - 1)
                cls = op
                if op.startswith("gemm_"):
                    cls = f"{op} m<=64" if g[0] <= 64 else (f"{op} m<=1024" if g[0] <= 1024 else f"{op} m>1024")
                rows.setdefault(cls, []).append((errs[0], errs[1], dpts[g] / u))
    print(f"{'op class':<26}{'points':>7}  {'datasheet ratio: median |err|, p90, worst':>44}  "
          f"{'measured-ceiling ratio: median, p90, worst':>44}  {'median dst/src':>14}")
    for cls in sorted(rows):
        r = rows[cls]
        out = [f"{cls:<26}{len(r):>7}"]
        for c in (0, 1):
            a = sorted(abs(x[c]) for x in r)
            worst = max(r, key=lambda x: abs(x[c]))[c]
            out.append(f"{statistics.median(a) * 100:>14.1f}% {a[min(len(a) - 1, int(0.9 * len(a)))] * 100:>12.1f}%"
                       f" {worst * 100:>+14.1f}%")
        out.append(f"{statistics.median(x[2] for x in r):>14.3f}")
        print("  ".join(out))
    fw_s = {(f["model"], f["kind"], f.get("batch"), f.get("tokens"), f.get("context")): f["ms"]
            for f in src.get("forwards") or []}
    print("forwards (measured dst / src):")
    for f in dst.get("forwards") or []:
        k = (f["model"], f["kind"], f.get("batch"), f.get("tokens"), f.get("context"))
        if k in fw_s:
            print(f"  {k}: {fw_s[k]} ms -> {f['ms']} ms  ratio {f['ms'] / fw_s[k]:.3f}")


if __name__ == "__main__":
    main()
