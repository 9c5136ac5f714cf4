"""Draws the PNGs of a servesim run's --out folder, into that folder:

  latency.png     TTFT and ITL percentiles, prefix-cache hit rate and throughput, against the swept key (a sweep)
                  or side by side (a run's experiments)
  timeseries.png  waiting queue, running requests, KV-cache usage and the cumulative hit rate over simulated time
  hit_rate.png    order_only runs (no timings): prefix-cache hit rate as vLLM counts it (and, for hybrids, the
                  attention layers' own hit rate) against the swept key, or one bar per experiment

One colour per experiment in every panel (shades of it for a sweep's points); titles carry the set-up (model, GPU,
mean prompt and output lengths, block size); axes carry units; x ticks sit at the swept values.

Run by `servesim plot OUT_DIR` (or `servesim run/sweep --out DIR --plot`) as `/usr/bin/python3 -I -S` with Debian's
python3-matplotlib: -I ignores PYTHON* variables and the user's site-packages, -S skips site-packages altogether, and
the lines below add back only Debian's dist-packages, so a user's own python3, pip packages or matplotlibrc cannot
change or break the plots. Reads summary.csv and timeseries.csv as tools/app/output.cpp writes them (columns: output_fields.cpp).
"""
import sys

if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")

import csv  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402

try:
    import matplotlib  # noqa: E402
except ImportError:
    sys.exit("servesim plot: matplotlib not found; install Debian's python3-matplotlib (apt-get install python3-matplotlib)")

matplotlib.use("Agg")
matplotlib.rcdefaults()  # ignore any matplotlibrc
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator  # noqa: E402

# Column order of output_fields.cpp: identity columns (experiment, swept keys) come before "model" (or "gpu" when the
# model is swept); timeseries.csv names them between "name" and "t_s".
FAMILIES = ["Blues", "Oranges", "Greens", "Reds", "Purples", "Greys", "YlOrBr", "PuRd"]
BASE = plt.get_cmap("tab10").colors


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


def number(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_value(v):
    if v is None:
        return "?"
    if abs(v) >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"


def identity_columns(out_dir):
    with open(os.path.join(out_dir, "timeseries.csv"), newline="") as f:
        header = next(csv.reader(f), [])
    if "t_s" not in header:
        return []
    return header[1 : header.index("t_s")]


def setup_line(rows, ids):
    """What every row shares (model, GPU, lengths, block size, prefix caching) as a subtitle."""
    parts = []

    def same(col):
        vals = {r.get(col) for r in rows}
        return next(iter(vals)) if len(vals) == 1 and col not in ids else None

    models = sorted({r.get("model", "") for r in rows} - {""})
    gpus = sorted({r.get("gpu", "") for r in rows} - {""})
    head = " vs ".join(models) if len(models) <= 3 else f"{len(models)} models"
    if gpus:
        head += " on " + " / ".join(gpus)
    for col, label, unit in (
        ("mean_prompt_tokens", "prompts", " tok"),
        ("mean_output_tokens", "outputs", " tok"),
        ("effective_block_size", "block", " tok"),  # the block vLLM used (block_size is what was asked)
        ("enable_prefix_caching", "prefix caching", ""),
    ):
        v = same(col)
        if v is not None:
            n = number(v)
            shown = fmt_value(n) if n is not None else {"true": "on", "false": "off"}.get(v, v)
            prefix = "mean " if col.startswith("mean_") else ""
            parts.append(f"{prefix}{label} {shown}{unit}")
    return head, ", ".join(parts)


def series_of(rows, ids):
    """Rows grouped by experiment (colour), each group ordered as written; x = the first swept key."""
    exp_col = "experiment" if "experiment" in ids else None
    swept = [c for c in ids if c != "experiment"]
    groups = {}
    for r in rows:
        key = r[exp_col] if exp_col else (r.get("model") or "run")
        groups.setdefault(key, []).append(r)
    return groups, swept


def colours(groups, points_per_group):
    """{experiment: [colour per point]}: one hue per experiment, shades for its points."""
    out = {}
    for i, (name, rows) in enumerate(groups.items()):
        n = points_per_group(rows)
        if n <= 1:
            out[name] = [BASE[i % len(BASE)]]
        else:
            cmap = plt.get_cmap(FAMILIES[i % len(FAMILIES)])
            out[name] = [cmap(0.45 + 0.5 * k / (n - 1)) for k in range(n)]
    return out


def set_x_ticks(ax, xs, numeric, labels):
    if numeric:
        vals = sorted(set(xs))
        if len(vals) > 2 and vals[0] > 0 and vals[-1] / vals[0] >= 8:
            ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(vals))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(v)))
    else:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=20 if max(len(x) for x in labels) > 8 else 0, ha="right")


def maybe_log_y(ax, values):
    vals = [v for v in values if v is not None and v > 0]
    if len(vals) > 1 and max(vals) / min(vals) >= 30:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    else:
        ax.set_ylim(bottom=0)


# Axis labels with units for keys often swept; others are shown as written.
KEY_LABELS = {
    "rate": "request rate (req/s)",
    "block_size": "block size (tokens)",
    "tenants": "tenants",
    "max_num_seqs": "max_num_seqs (requests)",
    "max_num_batched_tokens": "max_num_batched_tokens (tokens)",
    "max_model_len": "max_model_len (tokens)",
    "gpu_memory_utilization": "gpu_memory_utilization (fraction)",
    "kv_cache_memory_bytes": "KV cache (bytes)",
    "kv_offloading_size": "CPU offload (GiB)",
    "replicas": "replicas",
    "prompt_tokens": "prompt tokens",
    "output_tokens": "output tokens",
    "system_prompt_tokens": "system prompt (tokens)",
    "capacity_tokens": "capacity (tokens)",
    "max_concurrency": "max concurrency (requests)",
}


def plain_log_ticks(ax):
    """Log y axis labelled 50, 100, 1,000 instead of 10^2."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


LATENCY_PANELS = [
    ("time to first token", "ms", [("ttft_ms_p50", "p50", "-"), ("ttft_ms_p99", "p99", "--")]),
    ("inter-token latency", "ms", [("itl_ms_p50", "p50", "-"), ("itl_ms_p99", "p99", "--")]),
    ("prefix-cache hit rate", "% of prompt tokens", [("prefix_cache_hit_rate", None, "-")]),
    ("throughput", "requests/s", [("throughput_rps", None, "-")]),
]


def label_of(key):
    exp, tag = key
    return exp + (f" ({tag})" if tag else "")


def figure_legend(fig, colours, styles):
    """One legend above the panels: a colour per experiment, then the line styles."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, lw=2.5, label=l) for l, c in colours]
    handles += [Line2D([], [], color="black", ls=s, lw=1.5, label=l) for l, s in styles]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.94), ncol=min(len(handles), 6),
               fontsize=9, frameon=False)


def plot_sweep(rows, ids, out_dir, name):
    groups, swept = series_of(rows, ids)
    xkey = swept[0]
    rest = swept[1:]
    numeric = all(number(r[xkey]) is not None for r in rows)
    labels = list(dict.fromkeys(r[xkey] for r in rows))
    xpos = (lambda r: number(r[xkey])) if numeric else (lambda r: labels.index(r[xkey]))

    # One line per experiment and combination of the other swept keys.
    lines = {}
    for exp, grows in groups.items():
        for r in grows:
            tag = ", ".join(f"{c}={r[c]}" for c in rest)
            lines.setdefault((exp, tag), []).append(r)
    palette = {}
    for i, exp in enumerate(groups):
        tags = [t for (e, t) in lines if e == exp]
        cmap = plt.get_cmap(FAMILIES[i % len(FAMILIES)])
        for k, t in enumerate(tags):
            palette[(exp, t)] = BASE[i % len(BASE)] if len(tags) == 1 else cmap(0.45 + 0.5 * k / (len(tags) - 1))

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for ax, (title, unit, cols) in zip(axes.flat, LATENCY_PANELS):
        allv = []
        for key, lrows in lines.items():
            exp, tag = key
            label = exp + (f" ({tag})" if tag else "")
            for col, pct, style in cols:
                xs = [xpos(r) for r in lrows]
                ys = [number(r.get(col)) for r in lrows]
                if col == "prefix_cache_hit_rate":
                    ys = [None if y is None else 100 * y for y in ys]
                pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
                if not pts:
                    continue
                allv += [y for _, y in pts]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=4, color=palette[key],
                        label=label + (f" {pct}" if pct else ""))
                # Replicates: the line is the mean over the seeds; the band spans their min and max.
                scale = 100 if col == "prefix_cache_hit_rate" else 1
                band = [(xpos(r), number(r.get(col + "_min")), number(r.get(col + "_max"))) for r in lrows]
                band = sorted((x, lo * scale, hi * scale) for x, lo, hi in band if lo is not None and hi is not None)
                if len(band) > 1:
                    ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                                    color=palette[key], alpha=0.15, linewidth=0)
                    allv += [b[1] for b in band] + [b[2] for b in band]
        ax.set_title(title)
        ax.set_xlabel(KEY_LABELS.get(xkey, xkey))
        ax.set_ylabel(unit)
        set_x_ticks(ax, [xpos(r) for r in rows], numeric, labels)
        if unit == "ms":
            maybe_log_y(ax, allv)
        elif unit.startswith("%"):
            ax.set_ylim(0, 100)
        else:
            ax.set_ylim(bottom=0)
        if col == "throughput_rps" and xkey == "rate" and numeric:
            xs = sorted({xpos(r) for r in rows})
            ax.plot(xs, xs, ":", color="grey", label="offered (= rate)")
            ax.set_ylim(0, max(max(allv), 0) * 1.15)
            ax.legend(fontsize=8, loc="upper left", handles=[ax.get_lines()[-1]])
        ax.grid(True, alpha=0.3)
    figure_legend(fig, [(label_of(k), palette[k]) for k in lines], [("p50", "-"), ("p99", "--")])
    head, sub = setup_line(rows, ids)
    if any(r.get("ttft_ms_p50_min") for r in rows):
        sub += "; lines: mean over the seeds, bands: their min–max"
    fig.suptitle(f"{name}: {head}\n{sub}", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.915))
    path = os.path.join(out_dir, "latency.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, lines, palette


def plot_side_by_side(rows, ids, out_dir, name):
    groups, _ = series_of(rows, ids)
    names = list(groups)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    width = 0.3
    for ax, (title, unit, cols) in zip(axes.flat, LATENCY_PANELS):
        for j, (col, pct, _style) in enumerate(cols):
            for i, exp in enumerate(names):
                v = number(groups[exp][0].get(col))
                if v is None:
                    continue
                if col == "prefix_cache_hit_rate":
                    v *= 100
                off = (j - (len(cols) - 1) / 2) * width if len(cols) > 1 else 0
                bar = ax.bar(i + off, v, width * 0.95, color=BASE[i % len(BASE)], alpha=1.0 if j == 0 else 0.55,
                             edgecolor="black", linewidth=0.5)
                ax.bar_label(bar, labels=[(f"{pct}: " if pct else "") + fmt_value(v)], fontsize=8, padding=2)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=15 if max(len(n) for n in names) > 10 else 0)
        ax.set_xlim(-0.7, len(names) - 0.3)
        if unit.startswith("%"):
            ax.set_ylim(0, 100)
        ax.margins(y=0.15)
        ax.grid(True, axis="y", alpha=0.3)
    head, sub = setup_line(rows, ids)
    fig.suptitle(f"{name}: {head}\n{sub}", fontsize=12)
    fig.tight_layout()
    path = os.path.join(out_dir, "latency.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, {(exp, ""): groups[exp] for exp in names}, {(exp, ""): BASE[i % len(BASE)] for i, exp in enumerate(names)}


TIME_PANELS = [
    ("waiting", "waiting", "requests"),
    ("running", "running", "requests"),
    ("kv_usage", "KV-cache usage", "% of blocks"),
    ("prefix_cache_hit_rate_cumulative", "hit rate so far", "% of prompt tokens"),
]


def plot_timeseries(out_dir, rows, ids, lines, palette, name):
    """Rows: the four metrics; columns: the sweep's points (one column for a run); colour: the experiment."""
    ts = read_csv(os.path.join(out_dir, "timeseries.csv"))
    if not ts:
        return None
    swept = [c for c in ids if c != "experiment"]
    first_swept = swept[0] if swept else None
    points = list(dict.fromkeys(tuple(r[c] for c in ([first_swept] if first_swept else [])) for r in ts))
    shown = points
    if len(points) > 8:  # keep the panels readable: 8 evenly spaced points
        shown = [points[round(i * (len(points) - 1) / 7)] for i in range(8)]
    ncols = len(shown)
    if ncols == 1:  # a run: the four metrics as a 2 x 2 grid
        fig, grid = plt.subplots(2, 2, figsize=(12, 8.5), sharex=True)
        axes = [[ax] for ax in grid.flat]
    else:
        fig, axes = plt.subplots(len(TIME_PANELS), ncols, figsize=(3.1 * ncols + 1.2, 10.5), sharex=True,
                                 sharey="row", squeeze=False)
    peak = {}
    series = {}
    for r in ts:
        ident = {c: r[c] for c in ids}
        exp = ident.get("experiment") or next((x.get("model") for x in rows), "run")
        tag = ", ".join(f"{c}={ident[c]}" for c in swept[1:])
        point = (ident[first_swept],) if first_swept else ()
        series.setdefault((point, exp, tag), []).append(r)
    for (point, exp, tag), prs in series.items():
        if point not in shown:
            continue
        col = shown.index(point)
        t = [number(r["t_s"]) for r in prs]
        for row, (metric, _title, _unit) in enumerate(TIME_PANELS):
            y = [number(r[metric]) for r in prs]
            if metric in ("kv_usage", "prefix_cache_hit_rate_cumulative"):
                y = [None if v is None else 100 * v for v in y]
            axes[row][col].plot(t, y, color=palette.get((exp, tag), BASE[0]), lw=1.3)
            peak[row] = max([peak.get(row, 0)] + [v for v in y if v is not None])
    for col, point in enumerate(shown):
        if first_swept:
            axes[0][col].set_title(f"{KEY_LABELS.get(first_swept, first_swept)}: {point[0]}", fontsize=10)
        for row, (metric, title, unit) in enumerate(TIME_PANELS):
            ax = axes[row][col]
            ax.grid(True, alpha=0.3)
            top = max(peak.get(row, 0), 1e-9)
            # Percentages up to 100 % at most, zoomed on what was reached; counts are whole requests.
            ax.set_ylim(0, min(100.0, max(5.0, top * 1.1)) if unit.startswith("%") else max(1.0, top * 1.1))
            if not unit.startswith("%"):
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if ncols == 1:
                ax.set_title(title)
                ax.set_ylabel(unit)
            elif col == 0:
                ax.set_ylabel(f"{title}\n({unit})", fontsize=9)
            if ncols == 1 and row >= 2 or ncols > 1 and row == len(TIME_PANELS) - 1:
                ax.set_xlabel("simulated time (s)")
    figure_legend(fig, [(label_of(k), palette[k]) for k in lines], [])
    head, sub = setup_line(rows, ids)
    more = f"; {len(shown)} of {len(points)} points shown" if len(shown) < len(points) else ""
    fig.suptitle(f"{name}: {head}, over time\n{sub}{more}", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.915))
    path = os.path.join(out_dir, "timeseries.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


ORDER_ONLY_PANELS = [
    ("prefix_cache_hit_rate", "prefix-cache hit rate (vLLM's count)"),
    ("attention_hit_rate", "attention layers' hit rate (hybrids)"),
]


def plot_order_only(rows, ids, out_dir, name):
    """Hit rate of an order_only run (docs/OUTPUTS.md): lines against the first swept key (its values in the order
    the sweep lists them, as categories unless every one is a number), or bars when nothing is swept."""
    groups, swept = series_of(rows, ids)
    panels = [(c, t) for c, t in ORDER_ONLY_PANELS if any(number(r.get(c)) is not None for r in rows)]
    if not panels:
        sys.exit(f"servesim plot: {name}: no hit-rate columns to draw")
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5.2), squeeze=False)
    palette = {exp: BASE[i % len(BASE)] for i, exp in enumerate(groups)}
    if swept:
        xkey = swept[0]
        rest = swept[1:]
        numeric = all(number(r[xkey]) is not None for r in rows)
        labels = list(dict.fromkeys(r[xkey] for r in rows))
        xpos = (lambda r: number(r[xkey])) if numeric else (lambda r: labels.index(r[xkey]))
    for ax, (col, title) in zip(axes.flat, panels):
        if swept:
            for exp, grows in groups.items():
                lines = {}
                for r in grows:
                    lines.setdefault(", ".join(f"{c}={r[c]}" for c in rest), []).append(r)
                for k, (tag, lrows) in enumerate(lines.items()):
                    pts = [(xpos(r), 100 * number(r.get(col))) for r in lrows if number(r.get(col)) is not None]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], ["-", "--", ":", "-."][k % 4], marker="o",
                                ms=4, color=palette[exp], label=exp + (f" ({tag})" if tag else ""))
            ax.set_xlabel(KEY_LABELS.get(xkey, xkey))
            set_x_ticks(ax, [xpos(r) for r in rows], numeric, labels)
        else:
            names = list(groups)
            vals = [number(groups[n][0].get(col)) for n in names]
            ax.bar(range(len(names)), [100 * v if v is not None else 0 for v in vals],
                   color=[palette[n] for n in names])
            set_x_ticks(ax, [], False, names)
        ax.set_title(title)
        ax.set_ylabel("% of prompt tokens")
        ax.set_ylim(0, 100)
        ax.grid(True, alpha=0.3)
    if swept:
        handles, labels_ = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels_, loc="lower center", ncol=min(5, len(handles)), fontsize=9)
    head, sub = setup_line(rows, ids)
    fig.suptitle(f"{name}: {head} (order_only: requests replayed in arrival order, no timings)\n{sub}", fontsize=11)
    fig.tight_layout(rect=(0, 0.08 if swept else 0, 1, 0.9))
    path = os.path.join(out_dir, "hit_rate.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: servesim plot OUT_DIR")
    out_dir = argv[1]
    summary = os.path.join(out_dir, "summary.csv")
    if not os.path.exists(summary):
        sys.exit(f"servesim plot: {summary} not found; give the folder of a run's --out")
    rows = read_csv(summary)
    if not rows:
        sys.exit(f"servesim plot: {summary} has no rows")
    if "ttft_ms_p50" not in rows[0] and "ttft_ms_p50_mean" in rows[0]:
        # Replicates (docs/OUTPUTS.md): each figure X is X_mean, _min, _max, _std; plot the mean over the seeds.
        for r in rows:
            for k in list(r):
                if k.endswith("_mean") and k[:-5] + "_min" in r:
                    r.setdefault(k[:-5], r[k])
    all_ids = identity_columns(out_dir)
    ids = [c for c in all_ids if c != "seed"]  # timeseries.csv has a seed column with replicates only
    name = os.path.basename(os.path.normpath(out_dir))
    if "ttft_ms_p50" not in rows[0]:
        if "prefix_cache_hit_rate" not in rows[0]:
            sys.exit(f"servesim plot: {summary} has neither latency nor hit-rate columns")
        print("servesim: wrote " + plot_order_only(rows, ids, out_dir, name), file=sys.stderr)
        return
    swept = [c for c in ids if c != "experiment"]
    if swept:
        path, lines, palette = plot_sweep(rows, ids, out_dir, name)
    else:
        path, lines, palette = plot_side_by_side(rows, ids, out_dir, name)
    written = [path]
    ts = plot_timeseries(out_dir, rows, ids + (["seed"] if "seed" in all_ids else []), lines, palette, name)
    if ts:
        written.append(ts)
    print("servesim: wrote " + " and ".join(written), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
