# Experiment (issues 37/38, docs/SATURATED-DECODE.md section 4): does the KV layout vLLM 0.15 uses with the
# OffloadingConnector slow down the memory reads of decode attention? With a KV connector that prefers cross-layer
# blocks (OffloadingConnector.prefer_cross_layer_blocks, vLLM PR #27743; the FlashAttention backend's stride order
# with include_num_layers_dimension), the model runner allocates one tensor (num_blocks, num_layers, 2, block_size,
# kv_heads, head_dim): a block row holds every layer's K and V page, and one layer's attention reads a fixed window
# (its K and V pages) inside each row it touches. For Mixtral-8x7B TP 2 the row is exactly 1 MiB; for CodeLlama-34B
# TP 2 1.5 MiB, for Llama-2-70B TP 4 1.25 MiB, for Llama-2-7B 8 MiB. Without a connector each layer has its own
# tensor and its pages are packed.
#
# This probe times only the reads (no attention math): for each layer, the K and V page of each touched block (one
# window of a cross-layer row, or two pages of a per-layer tensor); the blocks are a random sample of the pool (as a
# long-running server scatters them), 128 sequences x 113 blocks (1,800 tokens) unless the pool is smaller. A Triton
# kernel reads each window with 16-byte loads and writes one partial sum per 4 KiB (a negligible write); a step
# (every layer once) is replayed from a CUDA graph, median of 7 replays.
# Layouts per geometry: per-layer (packed), cross-layer (vLLM's), and cross-layer with the row padded by 4 KiB (not a
# power of two). Then a stride sweep: windows of 16–256 KiB read in random order at row strides of 0.5–8 MiB (and
# packed), to see whether the rate depends on the row size (its power-of-two part) rather than on the model.
# Reading: if the three layouts read at the same rate, the layout is ruled out; if vLLM's cross-layer layout reads
# slower than per-layer (and the padded row recovers it), the layout is a candidate for the shortfall of
# docs/SATURATED-DECODE.md, to be confirmed with vLLM's own kernel.
#
# Run on the device: python3 kv_layout_probe.py OUTDIR   (needs torch + triton; about 60 GB free GPU memory for the
# 7B pool, geometries that do not fit are reported as skipped). Ran on an H100 on 2026-12-06:
# logs/H100-SXM-kv-layout-probe.json.
import json, os, statistics, sys
import torch
import triton
import triton.language as tl

DEV = "cuda"
BLOCK_TOKENS = 16
HEAD_DIM = 128
BF16 = 2
LOAD_ELEMS = 1024  # int32 elements per program: 4 KiB

# name, layers, kv heads per rank, pool blocks per GPU (servesim's projection for the development set's settings)
GEOMETRIES = [
    ("Mixtral-8x7B TP2", 32, 4, 27531),
    ("CodeLlama-34B TP2", 48, 4, 26598),
    ("Llama-2-70B TP4", 80, 2, 31391),
    ("Llama-2-7B TP1", 32, 32, 7407),
]
TOUCHED_BLOCKS = 128 * 113


@triton.jit
def read_windows(src_ptr, idx_ptr, out_ptr, row_elems, win_elems, layer_off_elems, LOAD: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1)
    block_id = tl.load(idx_ptr + b).to(tl.int64)
    offs = c * LOAD + tl.arange(0, LOAD)
    ptrs = src_ptr + block_id * row_elems + layer_off_elems + offs
    x = tl.load(ptrs, mask=offs < win_elems, other=0)
    tl.store(out_ptr + b * tl.num_programs(1) + c, tl.sum(x, axis=0))


def time_step(pool, idx, row_elems, win_elems, layer_offsets, reps=7):
    chunks = triton.cdiv(win_elems, LOAD_ELEMS)
    out = torch.empty(idx.numel() * chunks, dtype=torch.int32, device=DEV)
    grid = (idx.numel(), chunks)

    def step():
        for off in layer_offsets:
            read_windows[grid](pool, idx, out, row_elems, win_elems, off, LOAD=LOAD_ELEMS)

    step()  # compile and warm
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()  # replayed, so host launch time does not hide in the step
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def probe(name, layers, kv_heads, pool_blocks, gen):
    page = BLOCK_TOKENS * kv_heads * HEAD_DIM * BF16  # one layer's K (or V) page of one block
    touched = min(TOUCHED_BLOCKS, pool_blocks)
    idx = torch.randperm(pool_blocks, generator=gen)[:touched].to(torch.int32).to(DEV)
    read_bytes = touched * 2 * page * layers
    total = layers * 2 * pool_blocks * page
    results = {}
    # layout: (row stride between blocks, bytes read per block and launch, offsets of the launches of one step)
    layouts = {
        # vLLM without a connector: per layer a tensor (2, num_blocks, 16, kv_heads, 128), K pages then V pages
        "per-layer": (page, page, [o for l in range(layers)
                                   for o in (l * 2 * pool_blocks * page, (l * 2 + 1) * pool_blocks * page)]),
        # with the OffloadingConnector: (num_blocks, num_layers, 2, 16, kv_heads, 128)
        "cross-layer (vLLM)": (layers * 2 * page, 2 * page, [l * 2 * page for l in range(layers)]),
        "cross-layer, row + 4 KiB": (layers * 2 * page + 4096, 2 * page, [l * 2 * page for l in range(layers)]),
    }
    for layout, (row_bytes, win_bytes, offsets) in layouts.items():
        size = pool_blocks * row_bytes if layout != "per-layer" else total
        try:
            pool = torch.empty(size // 4, dtype=torch.int32, device=DEV)
        except torch.cuda.OutOfMemoryError:
            results[layout] = {"skipped": f"{size / 2**30:.1f} GiB does not fit"}
            continue
        ms = time_step(pool, idx, row_bytes // 4, win_bytes // 4, [o // 4 for o in offsets])
        results[layout] = {"row_bytes": row_bytes, "step_ms": round(ms, 4),
                           "read_TBps": round(read_bytes / (ms * 1e-3) / 1e12, 3)}
        del pool
        torch.cuda.empty_cache()
    return {"geometry": name, "layers": layers, "kv_heads_per_rank": kv_heads, "pool_blocks": pool_blocks,
            "touched_blocks": touched, "page_bytes": page, "read_GB_per_step": round(read_bytes / 1e9, 3),
            "layouts": results}


def stride_sweep(gen):
    """The read rate of windows of w bytes (one layer's K and V pages of a block) at a row stride S, in a random
    order over a pool: where the rate falls for some strides (power-of-two rows keep every window at the same address
    bits) and not others, the cross-layer layout's cost is a function of its row size."""
    rows = []
    windows = [16 << 10, 32 << 10, 64 << 10, 256 << 10]
    strides_mib = [None, 0.5, 1.0, 1.0 + 1 / 256, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0]   # None: packed (stride = window)
    pool_bytes = 24 << 30
    for w in windows:
        for smib in strides_mib:
            stride = w if smib is None else int(smib * (1 << 20))
            if stride < w:
                continue
            nblocks = pool_bytes // stride
            touched = min(nblocks, (2 << 30) // w)        # about 2 GiB read per launch
            idx = torch.randperm(nblocks, generator=gen)[:touched].to(torch.int32).to(DEV)
            try:
                pool = torch.empty(nblocks * stride // 4, dtype=torch.int32, device=DEV)
            except torch.cuda.OutOfMemoryError:
                continue
            ms = time_step(pool, idx, stride // 4, w // 4, [0])
            tbps = touched * w / (ms * 1e-3) / 1e12
            rows.append({"window_bytes": w, "stride_bytes": stride, "packed": smib is None, "windows": touched,
                         "ms": round(ms, 4), "read_TBps": round(tbps, 3)})
            print(f"stride sweep: window {w >> 10:>4} KiB stride {stride / (1 << 20):8.4f} MiB "
                  f"{'(packed)' if smib is None else '        '} {tbps:.2f} TB/s", flush=True)
            del pool
            torch.cuda.empty_cache()
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 kv_layout_probe.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    gen = torch.Generator().manual_seed(37)
    rows = []
    for g in GEOMETRIES:
        r = probe(*g, gen)
        rows.append(r)
        for layout, v in r["layouts"].items():
            print(f"{r['geometry']:<20} {layout:<26} " +
                  (v["skipped"] if "skipped" in v else
                   f"row {v['row_bytes']:>9} B  step {v['step_ms']:8.3f} ms  {v['read_TBps']:.2f} TB/s"), flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    with open(os.path.join(outdir, "kv_layout_probe.json"), "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=1)
    sweep = stride_sweep(gen)
    with open(os.path.join(outdir, "kv_layout_probe.json"), "w") as f:
        json.dump({"meta": meta, "results": rows, "stride_sweep": sweep}, f, indent=1)


if __name__ == "__main__":
    main()
