#!/usr/bin/python3
"""Turns the hybrid-policy sweeps (out/hybrid-policies/{default,0.26}/*.csv and inspect-*.json; see run_all.sh) into
scenarios/hybrid-policies/RESULTS.md with PNG plots. Every figure in the report, the prose's included, is read from
those files: the sentences state comparisons computed here (which is larger, by how much, where a curve falls), so a
regeneration restates them from its own numbers. The words name the mechanisms (docs/HYBRID-POLICIES.md).
Each run is made under servesim's default vLLM release and under 0.26 (the seed study's); table cells give both as
"default / 0.26", or one figure where the two agree. Needs python3-matplotlib.
Usage: python3 tools/hybrid_policies/report.py OUT_DIR REPORT_DIR"""
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

POLICIES = ["vllm", "sglang-no-buffer", "sglang-extra-buffer", "marconi", "checkpoint"]
DECOUPLED = POLICIES[1:]
RELEASES = ["default", "0.26"]  # sub-folders of OUT_DIR (run_all.sh)
MIB = 1024.0 * 1024.0
# Two hit rates in a ranking read as "equal" when they print the same at one decimal.
SAME = 0.0005


def rows(out, release, name):
    with open(os.path.join(out, release, name + ".csv")) as f:
        return list(csv.DictReader(f))


def num(r, k):
    v = r.get(k, "")
    return float(v) if v not in ("", None) else math.nan


def fmt(x, d=0):
    return "—" if math.isnan(x) else f"{x:,.{d}f}"


def pct(x, d=1):
    return "—" if math.isnan(x) else f"{100.0 * x:.{d}f} %"


def points(x, d=1):
    return f"{100.0 * abs(x):.{d}f} points"


def table(header, body):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def pick(rs, name, key, value):
    for r in rs:
        if r["experiment"] == name and r[key] == str(value):
            return r
    raise KeyError((name, key, value))


def by_name(rs, name):
    for r in rs:
        if r["experiment"] == name:
            return r
    raise KeyError(name)


def both(cells):
    """'a / b' for the two releases, one figure where they print the same."""
    a, b = cells
    return a if a == b else f"{a} / {b}"


def vs(a, b, what="", d=1):
    """'equal to B' or 'X points above / below B' (hit rates)."""
    if math.isnan(a) or math.isnan(b):
        return "not comparable to " + what
    if pct(a, d) == pct(b, d):
        return f"equal to {what}{pct(b, d)}"
    return f"{points(a - b, d)} {'above' if a > b else 'below'} {what}{pct(b, d)}"


def ranking(values):
    """'a (x) > b (y) = c (y)' from [(name, value)], largest first."""
    ordered = sorted(values, key=lambda nv: -nv[1])
    text = f"{ordered[0][0]} ({pct(ordered[0][1])})"
    for (_, prev), (name, v) in zip(ordered, ordered[1:]):
        text += (" = " if abs(prev - v) < SAME else " > ") + f"{name} ({pct(v)})"
    return text


def gpu_share(r):
    """The snapshot term's share of the run's summed step time."""
    total = sum(num(r, k) for k in r if k.startswith("step_ms_total_") and not math.isnan(num(r, k)))
    return num(r, "step_ms_total_snapshot") / total if total > 0 else math.nan


def sweep_table(data, key, values, names):
    body = []
    for v in values:
        for n in names:
            rr = [pick(data[rel], n, key, v) for rel in RELEASES]
            cell = lambda k, f: both([f(num(r, k)) for r in rr])  # noqa: E731
            body.append([v, n, cell("prefix_cache_hit_rate", pct), cell("attention_hit_rate", pct),
                         cell("ttft_ms_p50", fmt), cell("ttft_ms_p99", fmt),
                         cell("itl_ms_mean", lambda x: fmt(x, 1)), cell("output_tokens_per_s", fmt),
                         cell("effective_block_size", fmt), cell("state_slots", fmt), cell("state_copies", fmt),
                         cell("step_ms_total_snapshot", fmt), cell("snapshots_evicted", fmt),
                         cell("state_admission_waits", fmt)])
    return table([key, "run", "hit rate", "attention hit", "TTFT p50 ms", "TTFT p99 ms", "ITL mean ms",
                  "output tok/s", "block", "state slots", "state copies", "snapshot ms", "evicted",
                  "admission waits"], body)


def plot_sweep(data, key, values, names, title, path, labels):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for n in names:
        for rel, style in zip(RELEASES, ["-", ":"]):
            if rel != RELEASES[0] and n != "vllm":
                continue  # the other runs do not depend on the release (the tables show both)
            rs = data[rel]
            hit = [num(pick(rs, n, key, v), "prefix_cache_hit_rate") * 100 for v in values]
            ttft = [num(pick(rs, n, key, v), "ttft_ms_mean") for v in values]
            tput = [num(pick(rs, n, key, v), "output_tokens_per_s") for v in values]
            label = n if n != "vllm" else f"vllm ({labels[rel]})"
            st = "--" if n == "full-attention" else style
            axes[0].plot(values, hit, st, marker="o", label=label)
            axes[1].plot(values, ttft, st, marker="o", label=label)
            axes[2].plot(values, tput, st, marker="o", label=label)
    for ax, label in zip(axes, ["prefix-cache hit rate (%)", "TTFT mean (ms)", "output tokens/s"]):
        ax.set_xscale("log", base=2)
        ax.set_xticks(values)
        ax.set_xticklabels([str(v) for v in values])
        ax.set_xlabel(key)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def release_independent(data, name, exclude):
    """Whether every run but `exclude` gives the same figures under both releases."""
    a, b = data[RELEASES[0]], data[RELEASES[1]]
    keys = ["prefix_cache_hit_rate", "ttft_ms_mean", "itl_ms_mean", "state_copies"]
    for ra, rb in zip(a, b):
        if ra["experiment"] in exclude:
            continue
        if any(ra.get(k, "") != rb.get(k, "") for k in keys):
            return False
    return True


def collapse_point(rs, name, key, values):
    """The first sweep value where `name`'s hit rate is below half of its hit rate at the first value (None)."""
    first = num(pick(rs, name, key, values[0]), "prefix_cache_hit_rate")
    for v in values:
        if num(pick(rs, name, key, v), "prefix_cache_hit_rate") < first / 2:
            return v
    return None


def main():
    out, report_dir = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(report_dir, "plots"), exist_ok=True)
    names = ["tenants", "tenants-fp8", "agentic", "models", "mooncake", "mooncake-order-only"]
    D = {n: {rel: rows(out, rel, n) for rel in RELEASES} for n in names}
    rel_name = {rel: D["tenants"][rel][0]["vllm_version"] for rel in RELEASES}
    labels = {"default": f"default release, {rel_name['default']}", "0.26": rel_name["0.26"]}
    dflt, old = RELEASES
    insp = {}
    for m in ["Qwen3.5-4B", "Nemotron-H-8B", "Qwen3-Next-80B-A3B"]:
        with open(os.path.join(out, f"inspect-{m}.json")) as f:
            insp[m] = json.load(f)
    q = insp["Qwen3.5-4B"]
    t_vals = [5, 10, 20, 40, 80]
    a_vals = [4, 8, 16, 32]
    t_names = ["full-attention"] + POLICIES + ["checkpoint-ratio-2"]
    a_names = ["full-attention"] + POLICIES + ["checkpoint-ratio-0.1"]
    tn, fp8, ag = D["tenants"], D["tenants-fp8"], D["agentic"]
    g = lambda data, rel, n, v, f: num(pick(data[rel], n, "tenants", v), f)  # noqa: E731
    hit = lambda data, rel, n, v: g(data, rel, n, v, "prefix_cache_hit_rate")  # noqa: E731

    md = ["# Hybrid prefix-cache policies side by side\n"]
    md.append(
        "Generated by `tools/hybrid_policies/run_all.sh` (sweeps and `servesim inspect`, then "
        "`tools/hybrid_policies/report.py`); every figure below, the prose's included, is read from "
        "`out/hybrid-policies/`. Each scenario runs twice: under servesim's default vLLM release "
        f"({rel_name[dflt]}) and under {rel_name[old]} (the seed study's release, the scenarios' own pin). **A table "
        f"cell reads \"{rel_name[dflt]} / {rel_name[old]}\"; one figure means both releases give it.** The policies, "
        "the memory split, who pays for which state copy and what a copy costs are in "
        "[docs/HYBRID-POLICIES.md](../../docs/HYBRID-POLICIES.md). Runs: `tenants.yaml` / `tenants-fp8.yaml` (the "
        "seed study's tenants on its RTX 3090 with its calibrated profiles and logged KV pools), `agentic.yaml` "
        "(closed-loop long-context sessions on an H200, roofline), `models.yaml` (Nemotron-H-8B and "
        "Qwen3-Next-80B-A3B TP 2 on H200s, bf16 and fp8 KV), `mooncake.yaml` (the Mooncake conversation trace, "
        "timed, on H200 replicas), `mooncake-order-only.yaml` (the same trace in order-only mode, one pool per "
        "size). One seed per point (the scenarios' `seed`).\n")
    timing = os.path.join(out, "timing.txt")
    if os.path.exists(timing):
        with open(timing) as f:
            md.append(f.read().strip() + "\n")

    # What changed: the mechanism (issue 44), with this regeneration's figures.
    c5 = pick(tn[dflt], "checkpoint", "tenants", 5)
    m5 = pick(tn[dflt], "marconi", "tenants", 5)
    v5o = pick(tn[old], "vllm", "tenants", 5)
    md.append(
        "**What changed (issue 44).** (1) checkpoint and marconi keep a sequence's end at its last 16-token "
        "boundary, which the live state has passed when the request stops; they now pay what owning that state "
        "takes: a second state slot per running request and a copy at the prompt's last boundary and at every "
        "output boundary (at 5 tenants checkpoint makes "
        f"{fmt(num(c5, 'state_copies'))} copies for {fmt(num(c5, 'snapshots_taken'))} snapshots kept, marconi "
        f"{fmt(num(m5, 'state_copies'))} for {fmt(num(m5, 'snapshots_taken'))}); a finish hands its buffer or live "
        "slot to the pool without a copy, as SGLang does. (2) Every scheme's copies have one price: the state read "
        "and written at the GPU's copy bandwidth, plus one more chunk of the recurrent scan for a copy taken inside "
        "a prefill chunk off the scan's grid. vLLM's align mode is no longer charged the RTX 3090 profile's fitted "
        f"per-snapshot residual (at 5 tenants under {rel_name[old]} its snapshot term is now "
        f"{fmt(num(v5o, 'step_ms_total_snapshot'))} ms over the run, against checkpoint's "
        f"{fmt(num(c5, 'step_ms_total_snapshot'))} ms). (3) Both releases are shown: the scenarios pin "
        f"{rel_name[old]}, while servesim runs {rel_name[dflt]} by default.\n")

    # The answer.
    f5, f10 = hit(tn, dflt, "full-attention", 5), hit(tn, dflt, "full-attention", 10)
    ck5, ck10 = hit(tn, dflt, "checkpoint", 5), hit(tn, dflt, "checkpoint", 10)
    md.append("## The answer\n")
    md.append(
        "**Yes: keep the states in a pool of their own and vLLM's page-sized block goes away.** vLLM stores a state "
        "as pages of the attention pool, so its attention page is raised to the state's size "
        f"({q['page_size_bytes'] / MIB:.2f} MiB per layer for Qwen3.5-4B, a "
        f"{fmt(g(tn, dflt, 'vllm', 5, 'effective_block_size'))}-token block; docs/KV-POOL.md). With the pools apart "
        "the attention block is 16 and the states sit where a policy puts them. The `checkpoint` scheme keeps one "
        "every K tokens, one at each branch point a lookup finds and one at each sequence's end. On the seed "
        f"study's 5 tenants its hit rate is {pct(ck5, 2)}, {vs(ck5, f5, 'the full-attention model’s ', 2)} "
        f"(vLLM: {pct(hit(tn, dflt, 'vllm', 5))} under {rel_name[dflt]}, {pct(hit(tn, old, 'vllm', 5))} under "
        f"{rel_name[old]}); at 10 tenants {pct(ck10, 2)}, {vs(ck10, f10, 'full attention’s ', 2)} (vLLM "
        f"{pct(hit(tn, dflt, 'vllm', 10))} / {pct(hit(tn, old, 'vllm', 10))}). The state-pool policies give the "
        + ("same figures under both releases (the release changes only vLLM's own pool and scheduler rules here)"
           if release_independent(tn, "tenants", {"vllm"}) else "figures shown in the table under each release")
        + ".\n")
    # How many slots a tenant is enough: the largest tenant count where checkpoint stays within a point of its
    # attention hit, and the next one.
    slots = g(tn, dflt, "checkpoint", 5, "state_slots")
    ok = [t for t in t_vals if g(tn, dflt, "checkpoint", t, "attention_hit_rate") -
          hit(tn, dflt, "checkpoint", t) < 0.01]
    enough = max(ok) if ok else None
    short = next((t for t in t_vals if enough is not None and t > enough), None)
    cost = (f"**What it costs.** Each snapshot is one state: {q['state_bytes_per_sequence'] / MIB:.1f} MiB for "
            f"Qwen3.5-4B, the size of {q['state_bytes_per_sequence'] / q['kv_bytes_per_token']:,.0f} tokens of its "
            "bf16 attention KV, and checkpoint and marconi hold two of them per running request. There are two "
            "real limits. The first is how many states the pool holds: SGLang's default split gives the seed "
            f"study's 3090 {fmt(slots)} slots. ")
    if enough is not None:
        cost += (f"That keeps checkpoint within a point of its attention hit up to {enough} tenants "
                 f"({pct(hit(tn, dflt, 'checkpoint', enough))}, {slots / enough:.1f} slots a tenant)")
        if short is not None:
            cost += (f" but not at {short} ({pct(hit(tn, dflt, 'checkpoint', short))} against an attention hit of "
                     f"{pct(g(tn, dflt, 'checkpoint', short, 'attention_hit_rate'))}, {slots / short:.1f} slots a "
                     "tenant)")
        cost += ". "
    cost += ("The second is how much memory is left for attention: the same split leaves the H200 fewer attention "
             "tokens than vLLM's shared pool, and long agentic sessions run out of them (§3). vLLM's shared pool "
             "needs no split, but pays with the block and the chunk-end rule.\n")
    md.append(cost)

    # 1. Tenants.
    md.append("## 1. Seed-study tenants (RTX 3090, bf16 KV)\n")
    plot_sweep(tn, "tenants", t_vals, t_names, "seed-study tenants, RTX 3090, bf16 KV",
               os.path.join(report_dir, "plots", "tenants.png"), labels)
    md.append("![tenants](plots/tenants.png)\n")
    md.append(sweep_table(tn, "tenants", t_vals, t_names) + "\n")
    md.append("How to read the table:\n")
    att5 = g(tn, dflt, "checkpoint", 5, "attention_hit_rate")
    md.append(
        f"- *Attention hit* is what the 16-token attention pool alone had cached ({pct(att5)} at 5 tenants, "
        f"{vs(att5, f5, 'the full-attention model’s ')}). *Hit rate* is what a state allowed; the gap between the "
        "two is recomputed prefix. vLLM has no attention-only figure: its page-sized block loses up to a block a "
        "turn, and a state exists only where a step ended on a block boundary.\n")
    md.append(
        f"- Ranking of the state-pool policies by hit rate ({rel_name[dflt]}"
        + (", the same under " + rel_name[old] if release_independent(tn, "tenants", {"vllm"}) else "") + "): "
        + "; ".join(f"{t} tenants: " + ranking([(n, hit(tn, dflt, n, t)) for n in DECOUPLED]) for t in t_vals)
        + ".\n")
    cps = {rel: collapse_point(tn[rel], "vllm", "tenants", t_vals) for rel in RELEASES}
    md.append(
        "- **vLLM's own pool depends on the release.** "
        + " ".join(
            f"Under {rel_name[rel]} its hit rate is {pct(hit(tn, rel, 'vllm', 5))} at 5 tenants and "
            + (f"falls below half of that first at {cps[rel]} tenants ({pct(hit(tn, rel, 'vllm', cps[rel]))})."
               if cps[rel] else "stays above half of that at every tenant count.")
            for rel in RELEASES)
        + f" At 40 tenants: {pct(hit(tn, dflt, 'vllm', 40))} / {pct(hit(tn, old, 'vllm', 40))}, TTFT p50 "
        f"{fmt(g(tn, dflt, 'vllm', 40, 'ttft_ms_p50'))} / {fmt(g(tn, old, 'vllm', 40, 'ttft_ms_p50'))} ms "
        "(docs/VLLM-VERSIONS.md lists the hybrid rules that changed between them).\n")
    waits = [(n, t) for n in DECOUPLED for t in t_vals if g(tn, dflt, n, t, "state_admission_waits") > 0]
    md.append(
        "- **Slots per running request** (the *state slots* column is the pool; docs/HYBRID-POLICIES.md \"Who pays "
        "for a state\"): sglang-no-buffer holds its live state only; checkpoint and marconi also their end-state "
        "buffer; sglang-extra-buffer its ping-pong pair as well. Admissions waited for a state slot in: "
        + (", ".join(f"{n} at {t} tenants ({fmt(g(tn, dflt, n, t, 'state_admission_waits'))})" for n, t in waits)
           if waits else "no run")
        + ". A waiting admission queues the request as a full KV pool does, so TTFT grows with it.\n")
    shares = [(n, gpu_share(pick(tn[dflt], n, "tenants", 5))) for n in POLICIES]
    md.append(
        "- **Snapshot time** (the *snapshot ms* column: every copy at one price) at 5 tenants, as a share of the "
        "run's summed step time: "
        + ", ".join(f"{n} {s * 100:.2f} %" for n, s in shares)
        + f" (vLLM under {rel_name[dflt]}; {gpu_share(pick(tn[old], 'vllm', 'tenants', 5)) * 100:.2f} % under "
        f"{rel_name[old]}). checkpoint and marconi copy most: a buffer copy every 16 output tokens of every "
        "request, and a cut of the scan at the prompt's last boundary.\n")
    r2, ck = "checkpoint-ratio-2", "checkpoint"
    md.append(
        f"- `{r2}` gives states 2/3 of the memory: more slots, fewer attention tokens. At 40 tenants (bf16) its hit "
        f"rate is {pct(hit(tn, dflt, r2, 40))} against checkpoint's {pct(hit(tn, dflt, ck, 40))} (attention hit "
        f"{pct(g(tn, dflt, r2, 40, 'attention_hit_rate'))} against {pct(g(tn, dflt, ck, 40, 'attention_hit_rate'))}),"
        f" at 80 {pct(hit(tn, dflt, r2, 80))} against {pct(hit(tn, dflt, ck, 80))}; with fp8 KV (§2) at 40: "
        f"{pct(hit(fp8, dflt, r2, 40))} against {pct(hit(fp8, dflt, ck, 40))}.\n")
    fa40 = pick(tn[dflt], "full-attention", "tenants", 40)
    md.append(
        "- TTFT and throughput follow the hit rate: a miss is prefill the GPU has to run. The full-attention model "
        f"at 40 tenants ({pct(num(fa40, 'prefix_cache_hit_rate'))}, TTFT p50 {fmt(num(fa40, 'ttft_ms_p50'))} ms) "
        f"has a KV pool of {fmt(num(fa40, 'kv_cache_tokens'))} tokens, the hybrid's attention pool under checkpoint "
        f"{fmt(g(tn, dflt, 'checkpoint', 40, 'kv_cache_tokens'))}.\n")

    # 2. fp8.
    md.append("## 2. fp8 KV (RTX 3090)\n")
    plot_sweep(fp8, "tenants", [5, 20, 40], t_names, "seed-study tenants, RTX 3090, fp8 KV",
               os.path.join(report_dir, "plots", "tenants-fp8.png"), labels)
    md.append("![tenants fp8](plots/tenants-fp8.png)\n")
    md.append(sweep_table(fp8, "tenants", [5, 20, 40], t_names) + "\n")
    md.append(
        "fp8 halves the attention page, so vLLM's block grows from "
        f"{fmt(g(tn, dflt, 'vllm', 5, 'effective_block_size'))} to {fmt(g(fp8, dflt, 'vllm', 5, 'effective_block_size'))}"
        f" tokens and its hit rate at 5 tenants is {pct(hit(fp8, dflt, 'vllm', 5))} / {pct(hit(fp8, old, 'vllm', 5))}. "
        "The decoupled policies keep their 16-token block whatever the KV dtype; their states stay in the model "
        f"dtype while the attention pool holds twice the tokens: checkpoint reaches {pct(hit(fp8, dflt, ck, 5))} at 5 "
        f"tenants and {pct(hit(fp8, dflt, ck, 40))} at 40 (bf16: {pct(hit(tn, dflt, ck, 40))}).\n")

    # 3. Agentic.
    md.append("## 3. Long-context agentic sessions (H200)\n")
    plot_sweep(ag, "tenants", a_vals, a_names, "agentic sessions, H200, bf16 KV",
               os.path.join(report_dir, "plots", "agentic.png"), labels)
    md.append("![agentic](plots/agentic.png)\n")
    md.append(sweep_table(ag, "tenants", a_vals, a_names) + "\n")
    ga = lambda rel, n, v, f: num(pick(ag[rel], n, "tenants", v), f)  # noqa: E731
    best = lambda rel, v: max(POLICIES + ["checkpoint-ratio-0.1"],  # noqa: E731
                              key=lambda n: ga(rel, n, v, "prefix_cache_hit_rate"))
    md.append(
        "`tenants` is the number of concurrent sessions; the full-attention reference is Llama-3.1-8B (Qwen3-4B's "
        "context is too short for these sessions), so its absolute TTFT is a larger model's. At 8 sessions every "
        "hybrid policy is within "
        f"{points(max(ga(dflt, 'checkpoint', 8, 'attention_hit_rate') - ga(dflt, n, 8, 'prefix_cache_hit_rate') for n in DECOUPLED))}"
        f" of the attention pool's hit rate ({pct(ga(dflt, 'checkpoint', 8, 'attention_hit_rate'))}), and vLLM "
        f"reaches {pct(ga(dflt, 'vllm', 8, 'prefix_cache_hit_rate'))} / {pct(ga(old, 'vllm', 8, 'prefix_cache_hit_rate'))}: "
        "prompts are long, so a block's loss is a small fraction. At 32 sessions the default split leaves the "
        f"attention pool {fmt(ga(dflt, 'checkpoint', 32, 'kv_cache_tokens'))} tokens and its LRU evicts the sessions' "
        f"prefixes (attention hit {pct(ga(dflt, 'checkpoint', 32, 'attention_hit_rate'))}), while vLLM's shared "
        f"pool holds {fmt(ga(dflt, 'vllm', 32, 'kv_cache_tokens'))} tokens and keeps "
        f"{pct(ga(dflt, 'vllm', 32, 'prefix_cache_hit_rate'))} / {pct(ga(old, 'vllm', 32, 'prefix_cache_hit_rate'))}. "
        "Giving the states 1/11 of the memory (`checkpoint-ratio-0.1`: "
        f"{fmt(ga(dflt, 'checkpoint-ratio-0.1', 32, 'state_slots'))} slots) gives "
        f"{pct(ga(dflt, 'checkpoint-ratio-0.1', 32, 'prefix_cache_hit_rate'))} there; the best run at 32 sessions is "
        f"{best(dflt, 32)} under {rel_name[dflt]} and {best(old, 32)} under {rel_name[old]}. At 16 sessions the same "
        f"small pool gives {pct(ga(dflt, 'checkpoint-ratio-0.1', 16, 'prefix_cache_hit_rate'))} against "
        f"checkpoint's {pct(ga(dflt, 'checkpoint', 16, 'prefix_cache_hit_rate'))} at the default split: a fixed "
        "split is the decoupled design's real cost.\n")

    # 4. Other hybrids.
    md.append("## 4. Other hybrids (H200; bf16 and fp8 KV)\n")
    body = []
    models = D["models"]
    for dtype in ["auto", "fp8"]:
        for ra, rb in zip(models[dflt], models[old]):
            if ra["kv_cache_dtype"] != dtype:
                continue
            c = lambda k, f: both([f(num(ra, k)), f(num(rb, k))])  # noqa: E731
            body.append([dtype, ra["experiment"], c("effective_block_size", fmt), c("prefix_cache_hit_rate", pct),
                         c("attention_hit_rate", pct), c("ttft_ms_mean", fmt), c("ttft_ms_p99", fmt),
                         c("itl_ms_mean", lambda x: fmt(x, 1)), c("state_slots", fmt), c("state_copies", fmt),
                         c("step_ms_total_snapshot", fmt), c("snapshots_evicted", fmt)])
    md.append(table(["KV dtype", "run", "block", "hit rate", "attention hit", "TTFT mean ms", "TTFT p99 ms",
                     "ITL mean ms", "state slots", "state copies", "snapshot ms", "evicted"], body) + "\n")
    n_, x_ = insp["Nemotron-H-8B"], insp["Qwen3-Next-80B-A3B"]
    mrow = lambda rel, n: by_name([r for r in models[rel] if r["kv_cache_dtype"] == "auto"], n)  # noqa: E731
    ranks = []
    for prefix in ["nemotron", "qwen3-next"]:
        ranks.append(f"{prefix}: " + ranking([(n, num(mrow(dflt, f"{prefix}-{n}"), "prefix_cache_hit_rate"))
                                              for n in ["checkpoint", "marconi", "sglang-no-buffer", "vllm"]]))
    md.append(
        f"Nemotron-H-8B's state is {n_['state_bytes_per_sequence'] / MIB:.0f} MiB; vLLM's block for it is "
        f"{fmt(num(mrow(dflt, 'nemotron-vllm'), 'effective_block_size'))} tokens under {rel_name[dflt]} and "
        f"{fmt(num(mrow(old, 'nemotron-vllm'), 'effective_block_size'))} under {rel_name[old]} (the mode each release "
        f"picks for it). Qwen3-Next-80B-A3B at TP 2 has {x_['state_bytes_per_sequence'] / MIB:.0f} MiB per rank. "
        f"With fp8 vLLM's blocks double. Ranking by hit rate (bf16, {rel_name[dflt]}): " + "; ".join(ranks) + ".\n")

    # 5. Mooncake, timed.
    md.append("## 5. Mooncake conversation trace, timed (H200 replicas)\n")
    mk = {rel: {r["experiment"]: r for r in D["mooncake"][rel]} for rel in RELEASES}
    body = []
    for name in mk[dflt]:
        ra, rb = mk[dflt][name], mk[old][name]
        c = lambda k, f: both([f(num(ra, k)), f(num(rb, k))])  # noqa: E731
        body.append([name, ra["model_name"], c("effective_block_size", fmt), c("prefix_cache_hit_rate", pct),
                     c("attention_hit_rate", pct), c("ttft_ms_mean", fmt), c("ttft_ms_p99", fmt),
                     c("itl_ms_mean", lambda x: fmt(x, 1)), c("requests_rejected", fmt), c("state_slots", fmt),
                     c("state_copies", fmt), c("step_ms_total_snapshot", fmt), c("snapshots_evicted", fmt)])
    md.append(table(["run", "model", "block", "hit rate", "attention hit", "TTFT mean ms", "TTFT p99 ms",
                     "ITL mean ms", "rejected", "state slots", "state copies", "snapshot ms", "evicted"], body) + "\n")
    k = mk[dflt]
    lo_n = min(DECOUPLED, key=lambda n: num(k[n], "prefix_cache_hit_rate"))
    hi_n = max(DECOUPLED, key=lambda n: num(k[n], "prefix_cache_hit_rate"))
    busy = max(DECOUPLED, key=lambda n: num(k[n], "step_ms_total_snapshot"))
    md.append(
        "The trace's arrival times drive the replicas behind `least_loaded` routing, which spreads each "
        "conversation's requests over them: even the 16-token attention pools hit only "
        f"{pct(num(k['checkpoint'], 'attention_hit_rate'))}. The dense reference refuses "
        f"{fmt(num(k['full-attention'], 'requests_rejected'))} prompts longer than its context, so its figures cover "
        f"shorter prompts. vLLM's hybrid block is {fmt(num(k['vllm'], 'effective_block_size'))} tokens, which "
        "straddles the trace's hash blocks, so its hit rate is "
        f"{pct(num(k['vllm'], 'prefix_cache_hit_rate'))} / {pct(num(mk[old]['vllm'], 'prefix_cache_hit_rate'))}. The "
        f"decoupled policies range from {pct(num(k[lo_n], 'prefix_cache_hit_rate'))} ({lo_n}) to "
        f"{pct(num(k[hi_n], 'prefix_cache_hit_rate'))} ({hi_n}); {busy} spends the most on copies "
        f"({fmt(num(k[busy], 'step_ms_total_snapshot'))} ms over the run). TTFT mean spans "
        f"{fmt(min(num(k[n], 'ttft_ms_mean') for n in DECOUPLED))} to "
        f"{fmt(max(num(k[n], 'ttft_ms_mean') for n in DECOUPLED))} ms across them.\n")

    # 6. Order-only.
    md.append("## 6. Mooncake conversation trace, order-only (one pool, Qwen3.5-27B)\n")
    oo = D["mooncake-order-only"]
    caps = []
    for r in oo[dflt]:
        if r["kv_cache_memory_bytes"] not in caps:
            caps.append(r["kv_cache_memory_bytes"])
    body = []
    for ra, rb in zip(oo[dflt], oo[old]):
        c = lambda k, f: both([f(num(ra, k)), f(num(rb, k))])  # noqa: E731
        body.append([ra["kv_cache_memory_bytes"], ra["experiment"], c("effective_block_size", fmt),
                     c("kv_cache_tokens", fmt), c("prefix_cache_hit_rate", lambda x: pct(x, 2)),
                     c("attention_hit_rate", lambda x: pct(x, 2)), c("state_slots", fmt), c("snapshots_taken", fmt),
                     c("snapshots_evicted", fmt), c("snapshots_evicted_orphan", fmt)])
    md.append(table(["KV memory", "run", "block", "attention pool tokens", "hit rate", "attention hit", "state slots",
                     "snapshots", "evicted", "of them orphans"], body) + "\n")
    o = lambda rel, n, c, f: num(pick(oo[rel], n, "kv_cache_memory_bytes", c), f)  # noqa: E731
    lo, hi = caps[0], caps[-1]
    md.append(
        "Order-only mode with a `model` replays the trace through the engine one request at a time, in arrival "
        "order, one output token each (docs/HYBRID-POLICIES.md \"Order-only replay\"), into one pool of the given "
        "KV memory: it isolates the cache from routing and concurrency. Per size, by hit rate ("
        + rel_name[dflt] + "): "
        + "; ".join(f"{c}: " + ranking([(n, o(dflt, n, c, "prefix_cache_hit_rate")) for n in POLICIES])
                    for c in caps)
        + f". vLLM's shared pool has no split: at {hi} it holds {fmt(o(dflt, 'vllm', hi, 'kv_cache_tokens'))} tokens "
        f"against the decoupled pools' {fmt(o(dflt, 'checkpoint', hi, 'kv_cache_tokens'))} "
        f"({pct(o(dflt, 'vllm', hi, 'prefix_cache_hit_rate'), 2)} / {pct(o(old, 'vllm', hi, 'prefix_cache_hit_rate'), 2)}"
        f" hit rate there, {pct(o(dflt, 'vllm', lo, 'prefix_cache_hit_rate'), 2)} / "
        f"{pct(o(old, 'vllm', lo, 'prefix_cache_hit_rate'), 2)} at {lo}). The orphans are states whose attention "
        "block the pool had already evicted, reclaimed first.\n")

    # Where each wins: stated from the comparisons above.
    md.append("## Where each wins\n")
    win = []
    for rel in RELEASES:
        b = best(rel, 32)
        win.append(f"agentic sessions at 32 under {rel_name[rel]}: {b} "
                   f"({pct(ga(rel, b, 32, 'prefix_cache_hit_rate'))}), vLLM "
                   f"{pct(ga(rel, 'vllm', 32, 'prefix_cache_hit_rate'))}, checkpoint at the default split "
                   f"{pct(ga(rel, 'checkpoint', 32, 'prefix_cache_hit_rate'))}")
    md.append("- **Long sessions, memory-bound:** " + "; ".join(win) + ".")
    near = [t for t in t_vals if f5 > 0 and abs(hit(tn, dflt, "checkpoint", t) -
                                                 hit(tn, dflt, "full-attention", t)) < 0.005]
    md.append("- **checkpoint** is within half a point of the full-attention model on the seed-study tenants at "
              + (", ".join(str(t) for t in near) if near else "no tenant count") + " tenants (bf16), and first among "
              "the state-pool policies at "
              + ", ".join(str(t) for t in t_vals
                          if max(DECOUPLED, key=lambda n: hit(tn, dflt, n, t)) == "checkpoint")
              + " tenants.")
    press = [t for t in t_vals if t >= 40]
    md.append("- **Under state-pool pressure** (40 and 80 tenants): "
              + "; ".join(f"{t}: " + ranking([(n, hit(tn, dflt, n, t)) for n in DECOUPLED]) for t in press)
              + ". The second slot checkpoint and marconi now hold per running request counts most here.")
    md.append("- **vLLM's own pool depends on the release:** at 40 tenants its hit rate "
              f"is {pct(hit(tn, dflt, 'vllm', 40))} under {rel_name[dflt]} and {pct(hit(tn, old, 'vllm', 40))} under "
              f"{rel_name[old]}; the state-pool policies "
              + ("do not change with the release." if release_independent(tn, "tenants", {"vllm"})
                 else "change too (see the table).") + "\n")
    md.append("## Not covered\n")
    md.append(
        "- The attention KV stays in 16-token blocks for every policy: sglang-no-buffer's states are token-"
        "granular (a hit can end inside a block), its KV match is not. SGLang's leaf-first eviction of KV and "
        "state together is modelled only as far as two separate pools allow (docs/HYBRID-POLICIES.md \"Joint "
        "eviction\").\n"
        "- The cost of a scan cut is derived from the roofline's GDN / Mamba rates and checked against one H100 "
        "measurement of the project's GDN kernel (docs/HYBRID-POLICIES.md \"What a snapshot costs\"); the RTX 3090 "
        "runs use the derivation. Marconi's α tuning, speculative decoding and CPU "
        "offload with these policies are not modelled. One seed per point.\n")
    with open(os.path.join(report_dir, "RESULTS.md"), "w") as f:
        f.write("\n".join(md))
    print(f"report: wrote {os.path.join(report_dir, 'RESULTS.md')}")


if __name__ == "__main__":
    main()
