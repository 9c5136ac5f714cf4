#!/usr/bin/env python3
"""Builds the RTX 3090 / vLLM 0.26 profiles of the seed study (docs/SOURCES.md, "The seed study") for Qwen3-4B and
Qwen3.5-4B with `servesim calibrate --from-measurements`.

Inputs, all published in the study (nothing tuned to its withheld outcomes):
  * prefill: "ms per 1,000 prompt tokens" is a straight line in the prompt length P with intercepts 114.3 (full) and
    124.4 (hybrid); the full model measures 193.8 at P = 16,320, which fixes its slope; the hybrid's slope is the
    full one / 4.7 (the ratio of the quadratic coefficients); at P = 512 the study measures 138.1 (full) and 154.2
    (hybrid). Points: P = 512 (measured) and 1k…16,320 on the published line (the 16,320 full point is measured).
  * decode: no timing is published, so a decode step is the bytes it reads (weights read per step + KV of every
    context token + the recurrent state read and written) over 936 GB/s times an efficiency (DECODE_EFFICIENCY,
    a stated assumption: the fraction of datasheet bandwidth that decode kernels reach; see RESULTS.md's
    sensitivity sweep).
  * align-mode snapshots: with prefix caching on (mamba_cache_mode align) the hybrid's 16k prefill is 7.6 % slower.
    Part of that is mechanism the simulator already models (align forces 528-aligned chunks, so a 16,320-token
    prompt takes 12 steps under a 2,048-token budget instead of 8, each paying the per-step cost); the rest is
    attributed to the snapshot writes and becomes the `snapshot` curve (ms per snapshot), computed below.
Run from the repository root after building: python3 tools/seed_study/make_rtx3090_profiles.py
"""
import json
import math
import subprocess
import sys

import yaml

OUT = "calibration/profiles/rtx3090-vllm0.26"
SERVESIM = "./build/tools/servesim"
BANDWIDTH = 936e9
DECODE_EFFICIENCY = 0.80
BUDGET = 2048           # vLLM's max_num_batched_tokens default on a 24 GB GPU
BLOCK = 528             # hybrid attention block size (bf16 KV)

FULL_A, FULL_AT_16320 = 114.3, 193.8
FULL_B = (FULL_AT_16320 - FULL_A) / 16320.0       # ms per 1k tokens, per token of prompt
HYB_A, HYB_B = 124.4, FULL_B / 4.7
AT_512 = {"full": 138.1, "hybrid": 154.2}
LENGTHS = [512, 1024, 2048, 4096, 8192, 16320]


def inspect(model):
    out = subprocess.run([SERVESIM, "inspect", "--model", model, "--gpu", "rtx3090", "--gpu-memory-utilization",
                          "0.9", "--max-model-len", "16384", "--format", "json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def write_measurements(path, model, kind, info):
    a, b = (FULL_A, FULL_B) if kind == "full" else (HYB_A, HYB_B)
    lines = [
        "# Seed-study RTX 3090 measurements for %s, written by tools/seed_study/make_rtx3090_profiles.py." % model,
        "# prefill: P=512 measured (%.1f ms per 1k tokens); other lengths on the published per-1k line" % AT_512[kind],
        "#   %.1f + %.7f * P ms per 1k tokens." % (a, b),
        "# decode: bytes read per step / (936 GB/s * %.2f): weights %d B + KV %d B per context token"
        % (DECODE_EFFICIENCY, info["weight_bytes_read_per_decode_step"], info["kv_bytes_per_token"]),
        "#   + 2 * state %d B per sequence." % info["state_bytes_per_sequence"],
        "servesim_measurements: 1",
        "gpu: RTX 3090",
        "model: %s" % model,
        "software: vLLM 0.26.0 (published study figures)",
        "hybrid: %s" % ("true" if kind == "hybrid" else "false"),
        "max_num_batched_tokens: %d   # vLLM's default on a 24 GB GPU: long prompts ran in 2,048-token chunks" % BUDGET,
        "assumed: [decode]   # decode points are bytes / (936 GB/s * %.2f), not timed" % DECODE_EFFICIENCY,
        "prefill:",
    ]
    for p in LENGTHS:
        per_1k = AT_512[kind] if p == 512 else a + b * p
        lines.append("  - {prompt_tokens: %d, ms: %.4f}" % (p, per_1k * p / 1000.0))
    lines.append("decode:")
    for batch in [1, 4, 16, 32, 64, 128]:
        for ctx in [1024, 4096, 8192]:
            byts = (info["weight_bytes_read_per_decode_step"] + batch * ctx * info["kv_bytes_per_token"]
                    + 2 * batch * info["state_bytes_per_sequence"])
            lines.append("  - {batch: %d, context_tokens: %d, ms: %.4f}"
                         % (batch, ctx, 1e3 * byts / (BANDWIDTH * DECODE_EFFICIENCY)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def curve(profile, name, *x):
    c = profile["curves"][name]
    pieces = c["pieces"]
    if len(c["variables"]) > 1:
        co = pieces[0]["coefficients"]
        return max(0.0, co[0] + sum(ci * xi for ci, xi in zip(co[1:], x)))
    v = x[0]
    for piece in pieces:
        if v <= piece["x_max"]:
            co = piece["coefficients"]
            v = max(v, piece["x_min"])
            return max(0.0, co[0] + co[1] * v + co[2] * v * v)
    piece = pieces[-1]
    co, xm = piece["coefficients"], piece["x_max"]
    return max(0.0, co[0] + co[1] * xm + co[2] * xm * xm + max(0.0, co[1] + 2 * co[2] * xm) * (v - xm))


def prefill_steps(p, align):
    """Chunks the scheduler makes for a lone prompt (vLLM: budget-limited; align: B-aligned, forced stop)."""
    chunks, done = [], 0
    last = p - p % BLOCK
    while done < p:
        n = min(BUDGET, p - done)
        if align and done < p - 1:
            if done + n < last:
                n = n // BLOCK * BLOCK
            elif done < last < done + n:
                n = last - done
        chunks.append((done, n))
        done += n
    return chunks


def composed_prefill(profile, p, align):
    total, snapshots = 0.0, 0
    for done, n in prefill_steps(p, align):
        total += (curve(profile, "gemm", n) + curve(profile, "attn_prefill", n * (done + n / 2.0))
                  + curve(profile, "overhead", 1))
        if align and (done + n) % BLOCK == 0:
            snapshots += 1
    return total + curve(profile, "lm_head", 1), snapshots


def main():
    for model, kind in [("Qwen3-4B", "full"), ("Qwen3.5-4B", "hybrid")]:
        info = inspect(model)
        meas = "%s/%s.measurements.yaml" % (OUT, model)
        write_measurements(meas, model, kind, info)
        prof = "%s/%s.yaml" % (OUT, model)
        subprocess.run([SERVESIM, "calibrate", "--from-measurements", meas, "--out", prof], check=True)
        if kind == "hybrid":
            with open(prof) as f:
                profile = yaml.safe_load(f)
            off, _ = composed_prefill(profile, 16320, align=False)
            on, snaps = composed_prefill(profile, 16320, align=True)
            per_snapshot = max(0.0, (1.076 * off - on) / snaps)
            print("%s: 16,320-token prefill %.1f ms (caching off), %.1f ms before snapshots with align "
                  "(%d steps vs %d), %d snapshots -> %.3f ms per snapshot"
                  % (model, off, on, len(prefill_steps(16320, True)), len(prefill_steps(16320, False)), snaps,
                     per_snapshot), file=sys.stderr)
            with open(prof, "a") as f:
                f.write("# Added by make_rtx3090_profiles.py: align-mode snapshot cost fitted so that a 16,320-token\n"
                        "# prefill with prefix caching on is 7.6 %% slower than with it off\n"
                        "# (docs/SOURCES.md, the seed study).\n")
            with open(prof) as f:
                text = f.read()
            text = text.replace("curves:\n", "curves:\n  snapshot:\n    variables: [snapshots]\n    r2: 1\n"
                                "    max_rel_residual: 0\n    num_points: 1\n    pieces:\n"
                                "      - {x_min: 0, x_max: 100, coefficients: [0, %.6f, 0]}\n" % per_snapshot, 1)
            with open(prof, "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
