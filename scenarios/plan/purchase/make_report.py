#!/usr/bin/python3 -I
"""A purchase decision with `servesim plan --gpus` (docs/PLANNER.md "Layout search"): runs the plans below and writes
REPORT.md from their plan.json, so that every figure in the report is the plan's (no number is typed into its prose).

Llama-3.1-70B in FP8 (dense) and Qwen3-30B-A3B (MoE), each on one 8-GPU node of H100 or H200: every TP x PP x DP
(x EP) layout of the node, the largest request rate each sustains under the SLO, in tokens/s per GPU against tokens/s
per user, what binds, the error band, $/Mtok at the built-in cited prices, and the `vllm serve` line of the best
layout per GPU.

Usage (from the repository root, after building): scenarios/plan/purchase/run.sh  (SERVESIM=path/to/servesim)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SERVESIM = os.environ.get("SERVESIM", os.path.join(ROOT, "build", "tools", "servesim"))

# What is asked: inputs, quoted into the report as they are passed.
GPUS = "H100,H200"
NODE_GPUS = 8
MAX_PP = 2  # pipeline stages beyond 2 inside one node only lengthen the critical path; --max-pp keeps the run short
SLO = "ttft_p99=2s,tpot_p99=40ms"
WORKLOAD = ["--num-prompts", "1500", "--random-input-len", "2000", "--random-output-len", "400",
            "--random-range-ratio", "0.5"]
PLANS = [
    ("llama-70b-fp8", "Llama-3.1-70B in FP8 (dense)",
     ["--model", "Llama-3.1-70B", "--quantization", "fp8", "--max-model-len", "8192"]),
    ("qwen3-30b-a3b", "Qwen3-30B-A3B (MoE: 128 experts, 8 active)",
     ["--model", "Qwen3-30B-A3B", "--max-model-len", "8192"]),
]


def command(name, model_args):
    return ([SERVESIM, "plan"] + model_args + ["--grid", "gpu=" + GPUS, "--gpus", str(NODE_GPUS),
                                               "--gpus-per-node", str(NODE_GPUS), "--max-pp", str(MAX_PP),
                                               "--slo", SLO, "--start-load", "4", "--tolerance", "0.05"] +
            WORKLOAD + ["--out", os.path.join(HERE, "results", name)])


def shown(cmd):
    return " ".join(["servesim"] + cmd[1:-2] + ["--out", "results/" + os.path.basename(cmd[-1])])


def fmt_opt(v, unit=""):
    return "—" if v is None else f"{v:g}{unit}"


def layout_table(plan):
    rows = ["| GPU | layout | max req/s | out tok/s per GPU | tok/s per user | $/Mtok | binds | headroom | answer |",
            "|---|---|---|---|---|---|---|---|---|"]
    confs = sorted(plan["configurations"], key=lambda c: (c["gpu"], c["rank"] is None, c["rank"] or 0,
                                                          c["config"]))
    for c in confs:
        if c["answer"] in ("does_not_fit", "not_accepted"):
            rows.append(f"| {c['gpu']} | {c['layout']} | — | — | — | — | — | — | {c['answer']} |")
            continue
        head = ", ".join(f"{k} {v:.0f} %" for k, v in c["headroom_pct"].items() if v is not None)
        star = " *" if c["on_frontier"] else ""
        rows.append(f"| {c['gpu']} | {c['layout']}{star} | {fmt_opt(c['max_load_rounded'])} | "
                    f"{fmt_opt(c['output_tokens_per_s_per_gpu_rounded'])} | {fmt_opt(c['tokens_per_s_per_user_rounded'])} | "
                    f"{fmt_opt(c['usd_per_mtok_rounded'])} | {c['binding']} | {head} | {c['answer']} |")
    return "\n".join(rows)


def best_per_gpu(plan):
    chosen = set(plan["chosen"])
    out = {}
    for c in plan["configurations"]:
        if c["config"] in chosen:
            out[c["gpu"]] = c
    return out


def main():
    sections = []
    timings = []
    plans = {}
    for name, title, model_args in PLANS:
        cmd = command(name, model_args)
        start = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        timings.append((name, time.time() - start))
        with open(os.path.join(HERE, "results", name, "plan.json")) as f:
            plans[name] = json.load(f)
        plan = plans[name]
        best = best_per_gpu(plan)
        unfit = [c for c in plan["configurations"] if c["answer"] == "does_not_fit"]
        lines = [f"## {title}", "", "```", shown(cmd), "```", "", layout_table(plan), ""]
        if plan["frontier_slo"]:
            lines.append(f"`*` marks the cost / {plan['frontier_slo']} Pareto frontier ({plan['frontier_slo']} binds the "
                         "most answers). ")
        else:
            lines.append("No SLO binds any answer here (the server's capacity does), so no Pareto star is drawn. ")
        n_layouts = len(plan["configurations"])
        lines.append(f"{n_layouts} layouts were planned ({len(unfit)} do not fit). Headroom is how far below its bound "
                     "each SLO's statistic was at the answer.")
        lines.append("")
        for c in unfit:
            lines.append(f"- **{c['gpu']} {c['layout']} does not fit**: {c['status_reason']}")
        if unfit:
            lines.append("")
        gpus = sorted(best)
        short = [c for c in plan["configurations"] if (c["binding_reason"] or "").startswith("too_short")]
        if short:
            lines.append(f"- **{len(short)} answers are lower bounds** ("
                         + ", ".join(f"{c['gpu']} {c['layout']}" for c in short) +
                         "): the probe above each failed as `too_short` — at that rate the "
                         f"{WORKLOAD[1]} prompts are all sent in less time than the run then takes to drain, so nothing steady "
                         "was measured — "
                         "not because a limit was reached. More prompts (a longer run) would move them up.")
        for g in gpus:
            c = best[g]
            lines.append(f"- **Best on {g}: {c['layout']}** — {fmt_opt(c['max_load_rounded'])} req/s, "
                         f"{fmt_opt(c['output_tokens_per_s_per_gpu_rounded'])} output tokens/s per GPU at "
                         f"{fmt_opt(c['tokens_per_s_per_user_rounded'])} tokens/s per user, "
                         f"${fmt_opt(c['usd_per_mtok_rounded'])} per million tokens on {c['gpus']} GPUs "
                         f"({c['nodes']} node{'s' if c['nodes'] != 1 else ''}) at ${c['usd_per_gpu_hour']:.2f}/GPU-h; binds: {c['binding']}"
                         + (f" ({c['binding_reason']})" if c["binding_reason"] else "") +
                         f"; band {c['band']}.")
        if len(gpus) == 2 and all(best[g]["usd_per_mtok"] for g in gpus):
            a, b = best[gpus[0]], best[gpus[1]]
            ratio = b["usd_per_mtok"] / a["usd_per_mtok"]
            cheaper = gpus[0] if ratio > 1 else gpus[1]
            load_ratio = b["max_load"] / a["max_load"]
            price_ratio = b["usd_per_gpu_hour"] / a["usd_per_gpu_hour"]
            unvalidated = [g for g in gpus if best[g]["band_half_width_pct"] is None]
            if unvalidated:
                sure = (f"the {' and '.join(unvalidated)} answer is not validated against real runs, so this ratio is "
                        "the roofline's, not a measured one")
            else:
                widest = max(best[g]["band_half_width_pct"] for g in gpus)
                sure = (f"beyond the ±{widest:.0f} % band" if abs(ratio - 1) * 100 > widest
                        else f"inside the ±{widest:.0f} % band: too close to call")
            lines.append(f"- **{cheaper} is cheaper per token**: the best {gpus[1]} layout sustains {load_ratio:.2f}× the "
                         f"best {gpus[0]} layout's rate for {price_ratio:.2f}× the price per GPU-hour, so its $/Mtok is "
                         f"{ratio:.2f}× ({sure}" +
                         "".join(f"; the {g} figure is a lower bound (too_short above it)" for g in gpus
                                 if (best[g]["binding_reason"] or "").startswith("too_short")) + ").")
        lines.append("")
        lines.append("Launch commands of the best layouts (the plan's `launch:` section):")
        lines.append("")
        lines.append("```")
        for g in gpus:
            lines.append(f"# {best[g]['config']}")
            lines.append(best[g]["vllm_serve"])
        lines.append("```")
        lines.append("")
        sections.append("\n".join(lines))

    any_plan = plans[PLANS[0][0]]
    prices = {}
    bands = {}
    for plan in plans.values():
        for c in plan["configurations"]:
            prices[c["gpu"]] = (c["usd_per_gpu_hour"], c["price_source"], c["price_date"])
            bands[c["gpu"]] = c["validation"]
    head = [
        "# A purchase decision: Llama-3.1-70B FP8 and Qwen3-30B-A3B on one node of H100 or H200",
        "",
        "Generated by `scenarios/plan/purchase/make_report.py` (run through `run.sh`) from the plans' JSON in "
        "`results/`; every figure below is the plan's. Method: docs/PLANNER.md (\"Layout search\", \"What binds, and "
        "how sure\", \"Cost\").",
        "",
        "## The question",
        "",
        f"Which layout of one {NODE_GPUS}-GPU node serves the most requests per second under the SLO "
        f"(`{SLO}`; the server must also keep up: at most {any_plan['max_shortfall'] * 100:g} % of requests queued at "
        "the last send), and is an H100 or an H200 node cheaper per token? The load is `vllm bench serve`'s random "
        f"dataset (`{' '.join(WORKLOAD)}`, Poisson arrivals), roofline cost model, vLLM's defaults for each GPU "
        f"(prefix caching on), `max_model_len` 8192. Layouts: every TP × PP × DP of {NODE_GPUS} GPUs with at most "
        f"{MAX_PP} pipeline stages (`--max-pp`), plus expert parallelism for the MoE; DP replicas balanced by vLLM's "
        "DP load balancer.",
        "",
        "Prices (the built-in cited table; `--prices FILE` for yours):",
        "",
    ]
    for g, (p, src, date) in sorted(prices.items()):
        head.append(f"- {g}: " + (f"${p:.2f} per GPU-hour — {src}, {date}" if p != "unpriced" else "unpriced"))
    # (a price without a source and date would print as uncited: the built-in table has none)
    head += ["", "How sure: each answer's figures are rounded to the validated error band of the metric that binds "
             "(docs/VALIDATION.md); where no real run validated the roofline on a GPU the band reads `not validated` "
             "and figures keep two significant digits. The bands behind these answers:", ""]
    for g, v in sorted(bands.items()):
        head.append(f"- {g}: {v}")
    head.append("")
    tail = ["## What this answer rests on", "",
            "- **The roofline time model**, validated on the H100 only (the bands above); the H200 figures are the "
            "roofline's.",
            "- **MoE experts at their grouped GEMM's measured rate**: a step's routed experts run at the share of "
            "the dense GEMM rate that vLLM's fused MoE kernel reached on an H100 at that step's tokens per expert "
            "(0.35 at 128 or fewer, 0.75 from 1,024; docs/COST-MODEL.md \"MoE experts near the ridge\"), so the "
            "GEMMs of a 2,048-token Qwen3-30B-A3B prefill on an H100 cost about 1.6× what a dense-rate roofline "
            "charged.",
            "- **Pipeline and expert parallelism are approximated** (docs/PARALLELISM.md): a pipelined step stands "
            "for the round trip of one micro-batch through every stage, the expert all-to-all is costed with NCCL's "
            "α-β figures, and the DP replicas of an expert-parallel layout step in lockstep with equal loads. The "
            "validated band was measured on tensor-parallel runs only (calibration/validation/bands.yaml: no "
            "pipeline, expert or data parallelism), so it does not cover these approximations: before buying on a "
            "pp or ep layout, run its `vllm serve` line above on a rented node and compare with `servesim validate`.",
            "- **The search assumes that what passes at a rate passes below it.** Every probe is listed in "
            "`results/*/plan.txt`; where the queue criterion flips between neighbouring rates (the backlog is a "
            "count at one instant: its noise shrinks with more prompts), the answer is the largest rate that passed.",
            "",
            "## Run time", "",
            "Measured by this script on the machine that generated this report:", ""]
    for name, secs in timings:
        tail.append(f"- `{name}`: {secs:.0f} s")
    tail.append("")
    with open(os.path.join(HERE, "REPORT.md"), "w") as f:
        f.write("\n".join(head) + "\n" + "\n".join(sections) + "\n" + "\n".join(tail))
    print(f"make_report: wrote {HERE}/REPORT.md", file=sys.stderr)


if __name__ == "__main__":
    main()
