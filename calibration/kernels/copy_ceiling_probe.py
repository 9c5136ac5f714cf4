# Experiment (issue 38, docs/COST-MODEL.md "Efficiencies for GPUs without a table"): how fast does a device-to-device
# copy run, timed the ways this project times it? The kernel tables' `copy_gb_per_s` ceiling (sweep_tables.py
# ceilings: a 1 GiB bf16 `copy_`, CUDA-graph replays of two alternating copies) read 2,430 GB/s on an H100 and 2,688 on
# an H200, 0.73 and 0.56 of their datasheet bandwidths, while eager copies on the same kinds of machine have moved
# about 3.0 and 4.2-4.3 TB/s (bytes read plus written). A same-dtype contiguous `copy_` is a cudaMemcpyAsync; captured
# in a graph it becomes a memcpy node, which the driver may hand to a copy engine instead of an SM kernel. This times,
# at 256 MiB, 1 GiB and 2 GiB: the copy eagerly and graph-replayed, an SM elementwise kernel that reads and writes the
# same bytes (`torch.mul(src, 1, out=dst)`), eagerly and graph-replayed, and a read-only reduction (`src.sum()`).
# Rates are bytes moved (read + written; read only for the reduction) over the median time.
# Run on the device: python3 copy_ceiling_probe.py OUTDIR
import json
import os
import statistics
import sys

import torch

from moe_triton import time_graph_cycling

DEV, BF = "cuda", torch.bfloat16
SIZES_MIB = [256, 1024, 2048]


def eager_us(fns, calls=20, reps=7):
    for f in fns:
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(calls):
            fns[i % len(fns)]()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / calls * 1000)
    return statistics.median(ts)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": []}
    for mib in SIZES_MIB:
        nb = mib << 20
        src = [torch.randn(nb // 2, device=DEV, dtype=BF) for _ in range(2)]
        dst = [torch.empty_like(x) for x in src]
        copy = [lambda i=i: dst[i].copy_(src[i]) for i in range(2)]
        mul = [lambda i=i: torch.mul(src[i], 1, out=dst[i]) for i in range(2)]
        red = [lambda i=i: src[i].sum() for i in range(2)]
        row = {"mib": mib}
        graph = time_graph_cycling
        for name, fns, timer, moved in [("copy_eager", copy, eager_us, 2 * nb), ("copy_graph", copy, graph, 2 * nb),
                                        ("mul_eager", mul, eager_us, 2 * nb), ("mul_graph", mul, graph, 2 * nb),
                                        ("sum_graph", red, graph, nb)]:
            us = timer(fns)
            row[name] = {"us": round(us, 2), "gb_per_s": round(moved / us / 1e3, 1)}
        print(row, flush=True)
        res["rows"].append(row)
        src = dst = None
        torch.cuda.empty_cache()
    with open(os.path.join(out, "copy_ceiling.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
