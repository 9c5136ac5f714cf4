#!/usr/bin/env python3
"""Writes scenarios/speculative/README.md from the speculative-decoding examples, every figure and every number in
its prose computed from the runs (issue 42: no literal numbers in generated reports):

  scenarios/speculative/llama-3.1-70b-eagle3.yaml       Llama-3.1-70B, EAGLE-3 (k = 3), four H100s
  scenarios/speculative/deepseek-v3-mtp.yaml             DeepSeek-V3 FP8, its MTP layer (k = 1 and 3), eight H200s
  scenarios/speculative/llama-3.1-70b-draft-model.yaml   Llama-3.1-70B, Llama-3.1-8B drafting (k = 4), four H100s

  python3 tools/speculative/report.py [build/tools/servesim]      (about 5 s)

Each scenario is run with `servesim sweep SCENARIO --format csv` (deterministic: seed 1, as the files set it).
"""
import csv
import io
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "scenarios", "speculative", "README.md")
SCENARIOS = [
    ("llama-3.1-70b-eagle3.yaml", "Llama-3.1-70B with EAGLE-3 on four H100s"),
    ("deepseek-v3-mtp.yaml", "DeepSeek-V3 with its MTP layer on eight H200s"),
    ("llama-3.1-70b-draft-model.yaml", "Llama-3.1-70B with Llama-3.1-8B as its draft model on four H100s"),
]
COLUMNS = [
    ("experiment", "experiment", "s"), ("request_rate", "rate", "g"), ("status", "status", "s"),
    ("throughput_rps", "throughput rps", "2f"), ("ttft_ms_p50", "TTFT p50 ms", "ms"),
    ("tpot_ms_mean", "TPOT mean ms", "ms"), ("tpot_ms_p99", "TPOT p99 ms", "ms"), ("itl_ms_p50", "ITL p50 ms", "ms"),
    ("itl_ms_mean", "ITL mean ms", "ms"), ("e2e_ms_mean", "E2E mean ms", "ms"), ("kv_usage_max", "KV usage max", "2f"),
    ("preemptions", "preemptions", "g"), ("spec_mean_acceptance_length", "mean acceptance length", "2f"),
    ("spec_acceptance_rate", "acceptance rate", "2f"),
]


def run(binary, scenario):
    out = subprocess.run([binary, "sweep", os.path.join(ROOT, "scenarios", "speculative", scenario), "--format", "csv"],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return list(csv.DictReader(io.StringIO(out)))


def num(row, key):
    v = row.get(key, "")
    try:
        return float(v)
    except ValueError:
        return None


def cell(v, kind):
    if v in ("", None):
        return "—"
    if kind == "s":
        return v
    x = float(v)
    if kind == "g":
        return f"{x:g}"
    if kind == "ms":
        return f"{x:.0f}" if x >= 100 else f"{x:.2f}"
    return f"{x:.2f}"


def ms(x):
    return f"{x:.0f} ms" if x >= 100 else f"{x:.1f} ms"


def table(rows):
    out = "| " + " | ".join(h for _, h, _ in COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    for r in rows:
        out += "| " + " | ".join(cell(r.get(k, ""), kind) for k, _, kind in COLUMNS) + " |\n"
    return out


def findings(rows):
    """The conclusions, each from the numbers: lightest rate (TPOT and ITL), middle rate (the poorest drafter
    against none), heaviest rate (throughput and preemptions)."""
    rates = sorted({num(r, "request_rate") for r in rows})
    at = lambda rate: [r for r in rows if num(r, "request_rate") == rate]
    by = lambda rs, name: next(r for r in rs if r["experiment"] == name)
    spec = [r for r in rows if num(r, "spec_mean_acceptance_length") is not None]
    default = next(r["experiment"] for r in spec if "default" in r["experiment"])
    out = []
    light0 = at(rates[0])
    drafts = [r for r in light0 if r["experiment"].startswith("draft")]
    if drafts:
        # A draft model's memory and time: its weights and KV layers shrink the pool; its forwards lengthen ITL.
        off0, d = by(light0, "off"), drafts[0]
        out.append(f"- **The draft model's memory:** the KV pool holds {num(d, 'kv_cache_tokens'):.0f} tokens "
                   f"({num(d, 'kv_cache_memory_gib'):.2f} GiB per GPU) against {num(off0, 'kv_cache_tokens'):.0f} "
                   f"({num(off0, 'kv_cache_memory_gib'):.2f} GiB) without speculation: its weights come off the "
                   f"memory and every cached token also holds its KV layers. Its forwards (k of them a step, the "
                   f"first over the step's tokens) put the ITL p50 at {ms(num(d, 'itl_ms_p50'))} against "
                   f"{ms(num(off0, 'itl_ms_p50'))} without it, and the acceptance decides whether that pays: TPOT "
                   + ", ".join(f"{ms(num(r, 'tpot_ms_mean'))} at mean acceptance length "
                               f"{num(r, 'spec_mean_acceptance_length'):.1f}" for r in drafts)
                   + f", against {ms(num(off0, 'tpot_ms_mean'))} without speculation and "
                   f"{ms(num(by(light0, default), 'tpot_ms_mean'))} with `{default}`. The acceptance of a draft "
                   f"model has no published default: these lengths are inputs, not measurements.")
    light = at(rates[0])
    off, dflt = by(light, "off"), by(light, default)
    out.append(f"- **At the lightest rate ({rates[0]:g} rps), speculation cuts TPOT** from {ms(num(off, 'tpot_ms_mean'))} "
               f"without it to {ms(num(dflt, 'tpot_ms_mean'))} with `{default}` (mean acceptance length "
               f"{num(dflt, 'spec_mean_acceptance_length'):.2f}), while the ITL per chunk moves from "
               f"{ms(num(off, 'itl_ms_p50'))} to {ms(num(dflt, 'itl_ms_p50'))} p50: the price of verifying k + 1 tokens "
               f"per request and of the drafter's passes, paid once per chunk of "
               f"{num(dflt, 'spec_mean_acceptance_length'):.1f} tokens.")
    if len(rates) >= 3:
        mid = at(rates[len(rates) // 2])
        off_m = by(mid, "off")
        worst = min((r for r in mid if num(r, "spec_mean_acceptance_length") is not None),
                    key=lambda r: num(r, "spec_mean_acceptance_length"))
        verdict = "worse than" if num(worst, "tpot_ms_mean") > num(off_m, "tpot_ms_mean") else "still better than"
        why = ("every decode holds its lookahead slots and gains little from them"
               if num(worst, "kv_usage_max") > num(off_m, "kv_usage_max")
               else "requests finish sooner, so fewer hold blocks at once, despite the lookahead slots")
        if num(worst, "kv_cache_tokens") < num(off_m, "kv_cache_tokens"):
            why += (f", in a pool of {num(worst, 'kv_cache_tokens'):.0f} tokens against "
                    f"{num(off_m, 'kv_cache_tokens'):.0f}: the drafter's weights and KV layers take the rest")
        out.append(f"- **The poorest drafter at {rates[len(rates) // 2]:g} rps** (`{worst['experiment']}`, mean acceptance "
                   f"length {num(worst, 'spec_mean_acceptance_length'):.2f}) gives a TPOT of "
                   f"{ms(num(worst, 'tpot_ms_mean'))}, {verdict} no speculation ({ms(num(off_m, 'tpot_ms_mean'))}); KV "
                   f"usage peaks at {num(worst, 'kv_usage_max'):.2f} against {num(off_m, 'kv_usage_max'):.2f} ({why}).")
    heavy = at(rates[-1])
    off_h = by(heavy, "off")
    best = max(heavy, key=lambda r: num(r, "throughput_rps"))
    statuses = sorted({r["status"] for r in heavy})
    out.append(f"- **At the heaviest rate ({rates[-1]:g} rps)** the runs are {', '.join(statuses)}; throughput goes from "
               f"{num(off_h, 'throughput_rps'):.2f} rps without speculation to {num(best, 'throughput_rps'):.2f} with "
               f"`{best['experiment']}`, and preemptions from {num(off_h, 'preemptions'):g} to "
               f"{num(best, 'preemptions'):g}: requests that finish sooner free their blocks sooner. A plan that counts "
               f"on speculation for capacity rests on the acceptance the deployment really gets: measure it (vLLM "
               f"logs the per-position rates) and give it as `engine.speculative_acceptance`.")
    return "\n".join(out) + "\n"


def main(argv):
    binary = argv[1] if len(argv) > 1 else os.path.join(ROOT, "build", "tools", "servesim")
    text = ("# Speculative decoding examples\n\n"
            "Written by `tools/speculative/report.py` from the scenarios beside this file; every number below comes "
            "from those runs (seed 1). Nothing here was measured on a GPU: the cost model is the roofline, which is "
            "not validated for these models and GPUs (docs/VALIDATION.md), and is optimistic for MLA + MoE models "
            "at TP 8 (docs/COST-MODEL.md). TPOT is (E2E − TTFT) / (output − 1); ITL is per output chunk, as `vllm "
            "bench serve` counts it: one chunk carries every token a step gave the request. Run one with "
            "`servesim sweep scenarios/speculative/FILE.yaml --format csv`.\n")
    for scenario, title in SCENARIOS:
        rows = run(binary, scenario)
        r0 = rows[0]
        text += (f"\n## {title}\n\n`{scenario}`: {r0['model_name']} on {r0['gpu_name']} at tensor_parallel_size "
                 f"{r0['tensor_parallel_size']}, `vllm bench serve`'s random dataset (mean prompt "
                 f"{num(r0, 'mean_prompt_tokens'):.0f} tokens, mean output {num(r0, 'mean_output_tokens'):.0f}); cost "
                 f"model `{r0['cost_model']}`.\n\n")
        text += table(rows) + "\nWhat the model says:\n\n" + findings(rows)
    text += ("\nModelled in every run above: the drafter's weights and KV layers in GPU memory (an EAGLE-3 or MTP "
             "head is one layer of the target's shape; a draft model is its whole checkpoint), and EAGLE/MTP's "
             "last-block drop on prefix hits (these loads share no prefixes; only preempted requests re-admitted "
             "over their own blocks meet it). Not modelled here (docs/SPECULATIVE-DECODING.md): the drafter's smaller "
             "vocabulary where it has one (its lm_head is priced at the target's, an upper bound).\n")
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
