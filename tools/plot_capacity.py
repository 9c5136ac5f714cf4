#!/usr/bin/env python3
"""Plots prefix-cache hit rate against cache capacity from `servesim sweep ... --format csv` output of an order-only
scenario (scenarios/traces/mooncake-capacity.yaml): one line per trace (and per block size when several CSVs or
block sizes are given), log x. Reads the columns trace, capacity_tokens, block_size, prefix_cache_hit_rate; rows
with capacity_tokens = unlimited are drawn as a dotted horizontal line. Needs python3-matplotlib (Debian).

  servesim sweep scenarios/traces/mooncake-capacity.yaml --format csv > capacity.csv
  python3 tools/plot_capacity.py capacity.csv [more.csv ...] -o capacity.png
"""
import argparse
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_points(paths):
    """{(trace, block_size): ([(capacity, hit_rate)], unlimited_hit_rate or None)} in file order."""
    series = defaultdict(lambda: ([], None))
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                for col in ("trace", "capacity_tokens", "block_size", "prefix_cache_hit_rate"):
                    if col not in row:
                        sys.exit(f"{path}: column '{col}' missing (is this an order-only sweep?)")
                key = (row["trace"], int(row["block_size"]))
                points, unlimited = series[key]
                rate = float(row["prefix_cache_hit_rate"])
                if row["capacity_tokens"] == "unlimited":
                    series[key] = (points, rate)
                else:
                    points.append((int(row["capacity_tokens"]), rate))
    return series


def short_name(trace):
    name = trace.rsplit("/", 1)[-1]
    for prefix in ("mooncake_fast25_", "azure_llm_2023_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.rsplit(".", 1)[0].replace("_trace", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="sweep CSV file(s)")
    ap.add_argument("-o", "--output", default="capacity.png", help="PNG to write (default capacity.png)")
    ap.add_argument("--title", default="Prefix-cache hit rate vs capacity (order-only, LRU, vLLM lookup rules)")
    args = ap.parse_args()

    series = read_points(args.csv)
    if not series:
        sys.exit("no rows")
    block_sizes = sorted({b for _, b in series})
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    traces = sorted({t for t, _ in series})
    styles = ["-", "--", "-.", ":"]
    for (trace, block), (points, unlimited) in sorted(series.items()):
        color = colors[traces.index(trace) % len(colors)]
        style = styles[block_sizes.index(block) % len(styles)]
        label = short_name(trace) + (f", block {block}" if len(block_sizes) > 1 else "")
        points.sort()
        if points:
            ax.plot([c for c, _ in points], [100 * r for _, r in points], style, marker="o", markersize=3,
                    color=color, label=label)
        if unlimited is not None:
            ax.axhline(100 * unlimited, color=color, linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("cache capacity (tokens)")
    ax.set_ylabel("prefix-cache hit rate (% of prompt tokens)")
    ax.set_title(args.title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
