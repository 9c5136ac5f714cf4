#!/usr/bin/python3 -I
"""Plots a `servesim validate --out DIR` folder (docs/VALIDATION.md) into DIR/validation.png: per measured run, the
prediction against the measurement of TTFT mean, E2E mean and ITL mean (window "all"), as predicted / measured on a
log scale with the ±10 % band shaded; overloaded runs hatched.

Run by `servesim validate --out DIR --plot` as Debian's `/usr/bin/python3 -I -S` (no user or site packages; only
Debian's dist-packages, where python3-matplotlib lives, is added below), or by hand the same way.
Usage: plot_validation.py DIR
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

METRICS = [("ttft_mean_ms", "TTFT mean"), ("e2e_mean_ms", "E2E mean"), ("itl_mean_ms", "ITL mean")]


def main(folder):
    with open(os.path.join(folder, "validation.json")) as f:
        report = json.load(f)
    runs = report["runs"]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 0.35 * len(runs) + 1.5), sharey=True)
    names = [r["run"] for r in runs]
    for ax, (key, title) in zip(axes, METRICS):
        ratios = []
        for r in runs:
            m = r["windows"][0]["metrics"].get(key)
            ok = m and m.get("measured") and m.get("predicted")
            ratios.append(m["predicted"] / m["measured"] if ok else float("nan"))
        ys = range(len(runs))
        ax.axvspan(0.9, 1.1, color="0.9")
        ax.axvline(1.0, color="0.5", lw=0.8)
        bars = ax.barh(list(ys), [x - 1 for x in ratios], left=1, color="tab:blue")
        for b, r in zip(bars, runs):
            if r["overloaded"]:
                b.set_hatch("//")
                b.set_color("tab:orange")
        ax.set_xscale("log")
        ax.set_title(title + ": predicted / measured")
        ax.set_yticks(list(ys))
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
    fig.tight_layout()
    out = os.path.join(folder, "validation.png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
