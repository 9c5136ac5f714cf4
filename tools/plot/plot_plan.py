#!/usr/bin/python3 -I
"""Plots a `servesim plan --out DIR` folder (docs/PLANNER.md) into DIR/plan-latency.png and DIR/plan-cost.png.

plan-latency.png: one panel per SLO bound — the bound's statistic (worst replicate) against the load (or the
replica count, for a target-load plan), one colour per configuration, the SLO as a dashed line and each
configuration's answer as a vertical dotted line. plan-cost.png: $ per million tokens against the statistic of the
SLO that binds the most answers (the plan's frontier_slo; the first SLO, without a frontier, when none binds) at each
configuration's answer, the Pareto frontier joined.

Run by `servesim plan --out DIR --plot` as Debian's `/usr/bin/python3 -I -S` (no user or site packages; only
Debian's dist-packages, where python3-matplotlib lives, is added below), or by hand the same way.
Usage: plot_plan.py DIR
"""
import sys

if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")

import json  # noqa: E402
import os  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
matplotlib.rcdefaults()  # ignore any matplotlibrc
import matplotlib.pyplot as plt  # noqa: E402


def main(folder):
    with open(os.path.join(folder, "plan.json")) as f:
        plan = json.load(f)
    bounds = [b.strip() for b in plan["slo"].split(",")]
    names = [b.split(" ")[0] for b in bounds]
    limits = [float(b.split("≤")[1].strip().split(" ")[0]) for b in bounds]
    target = plan["target_load"] is not None
    configs = [c["config"] for c in plan["configurations"]]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {c: colours[i % len(colours)] for i, c in enumerate(configs)}

    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.2), squeeze=False)
    for ax, name, limit in zip(axes[0], names, limits):
        for conf in plan["configurations"]:
            pts = sorted(
                ((p["replicas"] if target else p["load"]), p[name + "_ms"], p["passed"] == p["replicates"])
                for p in plan["probes"]
                if p["config"] == conf["config"] and p[name + "_ms"] is not None
            )
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            c = colour[conf["config"]]
            ax.plot(xs, ys, "-", color=c, alpha=0.6, label=conf["config"])
            ax.scatter([x for x, _, ok in pts if ok], [y for _, y, ok in pts if ok], color=c, marker="o", s=22)
            ax.scatter([x for x, _, ok in pts if not ok], [y for _, y, ok in pts if not ok], color=c, marker="x",
                       s=30)
            best = conf["min_replicas"] if target else conf["max_load"]
            if best is not None:
                ax.axvline(best, color=c, linestyle=":", linewidth=1)
        ax.axhline(limit, color="black", linestyle="--", linewidth=1, label=f"SLO {limit:g} ms")
        ax.set_yscale("log")
        ax.set_xlabel("replicas" if target else plan["load_key"] + (" (req/s)" if plan["load_key"].endswith("rate")
                                                                   else ""))
        ax.set_ylabel(f"{name} (ms, worst replicate)")
        ax.set_title(f"{name}: o passed, x failed, dotted = answer", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    question = plan["question"]
    fig.suptitle(f"{os.path.basename(plan['scenario'])} — {question}\nSLO {plan['slo']}; "
                 f"{plan['replicates']} replicate(s) per probe", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "plan-latency.png"), dpi=110)
    plt.close(fig)

    priced = [c for c in plan["configurations"] if c["usd_per_mtok"] is not None]
    if priced:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        first = plan.get("frontier_slo") or names[0]
        points = []
        for conf in priced:
            probe = [p for p in plan["probes"] if p["config"] == conf["config"] and
                     (p["replicas"] if target else p["load"]) == (conf["min_replicas"] if target else conf["max_load"])
                     and p["passed"] == p["replicates"]]
            if not probe or probe[-1][first + "_ms"] is None:
                continue
            points.append((conf["usd_per_mtok"], probe[-1][first + "_ms"], conf))
        for cost, lat, conf in points:
            c = colour[conf["config"]]
            label = f"{conf['config']} ({conf['gpus']} GPU{'s' if conf['gpus'] != 1 else ''})"
            ax.scatter([cost], [lat], color=c, s=70 if conf["on_frontier"] else 35,
                       marker="*" if conf["on_frontier"] else "o", label=label)
        front = sorted((cost, lat) for cost, lat, conf in points if conf["on_frontier"])
        if len(front) > 1:
            ax.plot([p[0] for p in front], [p[1] for p in front], "k--", linewidth=1, label="Pareto frontier")
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
        ax.set_xlabel("$ per million tokens (input + output)")
        ax.set_ylabel(f"{first} at the answer (ms)")
        ax.set_title(f"cost against {first} at each configuration's answer (* = frontier)"
                     if plan.get("frontier_slo") else
                     f"cost against {first} at each answer (no SLO binds any answer: no frontier)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.margins(x=0.1, y=0.15)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "plan-cost.png"), dpi=110)
        plt.close(fig)
    print(f"plot_plan: wrote {folder}/plan-latency.png" + (" and plan-cost.png" if priced else ""), file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
