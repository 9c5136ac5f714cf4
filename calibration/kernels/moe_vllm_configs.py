# Experiment (issue 38): how fast does vLLM's fused MoE kernel run with the tile configurations vLLM ships for the
# GPU (vllm/model_executor/layers/fused_moe/configs/E=8,N=7168, E=8,N=14336, E=128,N=768 and E=128,N=384 ...
# device_name=NVIDIA_H100_80GB_HBM3.json or NVIDIA_H200.json: one tile choice per token count, the nearest key to M
# picked by fused_moe.try_get_optimal_moe_config, the same for both projections)? moe_triton.py searched a grid
# without the 128 x 256 tiles those files use from about 1,024 tokens on, so its large-M figures are not vLLM's. This
# script times the same Triton rendering of fused_moe (moe_triton.moe_gemm: pairs sorted by expert and padded to the
# tile height, gate_up, SiLU-mul, down scaled by the routing weight, the top-k sum) with the shipped tiles, beside
# torch's grouped GEMM pair (what the kernel table's `moe` op times), at M = 8 ... 16,384 tokens, and reports each
# one's fraction of the bf16 peak by tokens per expert (m_e = M * top_k / E): the curve GroupedGemmEfficiency
# (sim/engine/grouped_gemm_efficiency.h) is read from, and the table op `moe_vllm_fused` (the paired fused and
# grouped times, which the measured cost model scales `moe` by; calibration/kernels/README.md).
# Run on the device: cd calibration/kernels && python3 moe_vllm_configs.py OUTDIR [TOKENS,...] [DEADLINE_S].
# Results: logs/<gpu>-moe-vllm-configs.*
import json, os, sys, time
import torch
import torch.nn.functional as F
import triton

from moe_triton import DEV, BF, align, moe_gemm, time_graph

PEAK_BF16 = 989.4e12  # H100 SXM and H200 dense bf16 (calibration/gpus/H100-SXM.yaml, H200.yaml)

# The shipped tiles, (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) by the file's token-count key, per
# device name and shape (experts, top_k, hidden, intermediate per rank): vllm_fused_moe_tiles.json beside this file.
def shipped():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_fused_moe_tiles.json")) as f:
        data = json.load(f)
    return {dev: {name: (s["experts"], s["top_k"], s["hidden"], s["intermediate"],
                         {int(m): tuple(t) for m, t in s["tiles"].items()})
                  for name, s in shapes.items()}
            for dev, shapes in data.items() if not dev.startswith("_")}


TOKENS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def main(out, tokens=TOKENS, deadline_s=240.0):
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "moe_vllm_configs.log"), "w")

    def P(*a):
        s = " ".join(str(x) for x in a)
        print(s, flush=True)
        log.write(s + "\n")
        log.flush()

    device = torch.cuda.get_device_name(0)
    P(device, torch.__version__, triton.__version__)
    SHIPPED = shipped()
    if device not in SHIPPED:
        P(f"no shipped tiles recorded here for {device}; known: {sorted(SHIPPED)}")
        return
    results = []
    t0 = time.time()
    for name, (E, topk, H, I, table) in SHIPPED[device].items():
        w13 = torch.randn(E, 2 * I, H, device=DEV, dtype=BF) * 0.02
        w2 = torch.randn(E, H, I, device=DEV, dtype=BF) * 0.02
        w13t, w2t = w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous()
        for M in tokens:
            if time.time() - t0 > deadline_s:
                P("DEADLINE")
                break
            cfg = table[min(table, key=lambda k: abs(k - M))]
            bm, bn, bk, gm, nw, ns = cfg
            x = torch.randn(M, H, device=DEV, dtype=BF)
            wts, ids = torch.topk(torch.softmax(torch.randn(M, E, device=DEV), -1), topk, -1)
            wts = (wts / wts.sum(-1, keepdim=True)).reshape(-1).contiguous()
            ids = ids.to(torch.int32)
            flat = ids.reshape(-1).long()
            order = torch.argsort(flat, stable=True)
            offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
            xp = x.index_select(0, order // topk)

            def grouped():
                y = torch._grouped_mm(xp, w13t, offs=offs)
                return torch._grouped_mm(F.silu(y[:, :I]) * y[:, I:], w2t, offs=offs)

            sid, eid, npad, EM = align(ids, E, bm)
            inter = torch.empty(M * topk, 2 * I, device=DEV, dtype=BF)
            outb = torch.empty(M * topk, H, device=DEV, dtype=BF)

            def fused():
                moe_gemm[(triton.cdiv(EM, bm) * triton.cdiv(2 * I, bn),)](
                    x, w13, inter, wts, sid, eid, npad, 2 * I, H, M * topk, x.stride(0), w13.stride(0),
                    w13.stride(1), inter.stride(0), A_DIV=topk, MUL_W=False, BM=bm, BN=bn, BK=bk, GROUP_M=gm, EM=EM,
                    num_warps=nw, num_stages=ns)
                act = F.silu(inter[:, :I]) * inter[:, I:]
                moe_gemm[(triton.cdiv(EM, bm) * triton.cdiv(H, bn),)](
                    act, w2, outb, wts, sid, eid, npad, H, I, M * topk, act.stride(0), w2.stride(0), w2.stride(1),
                    outb.stride(0), A_DIV=1, MUL_W=True, BM=bm, BN=bn, BK=bk, GROUP_M=gm, EM=EM, num_warps=nw,
                    num_stages=ns)
                return outb.view(M, topk, H).sum(1)

            # the two paths agree (same routing, same weights) before either is timed
            ref = torch.zeros(M, H, device=DEV, dtype=torch.float32)
            ref.index_add_(0, order // topk, grouped().float() * wts[order][:, None].float())
            got = fused().float()
            err = ((got - ref).abs().max() / ref.abs().max()).item()
            t_grouped = time_graph(grouped)
            t_fused = time_graph(fused)
            flops = 2.0 * M * topk * 3 * H * I
            r = dict(shape=name, M=M, tokens_per_expert=M * topk / E, cfg=cfg, rel_err=round(err, 4),
                     grouped_us=round(t_grouped, 2), fused_us=round(t_fused, 2),
                     grouped_eff=round(flops / (t_grouped * 1e-6) / PEAK_BF16, 3),
                     fused_eff=round(flops / (t_fused * 1e-6) / PEAK_BF16, 3))
            results.append(r)
            P(json.dumps(r))
        del w13, w2, w13t, w2t
        torch.cuda.empty_cache()
    json.dump(results, open(os.path.join(out, "moe_vllm_configs.json"), "w"), indent=1)


if __name__ == "__main__":
    # python3 moe_vllm_configs.py OUTDIR [TOKENS,...] [DEADLINE_S]
    main(sys.argv[1], [int(t) for t in sys.argv[2].split(",")] if len(sys.argv) > 2 else TOKENS,
         float(sys.argv[3]) if len(sys.argv) > 3 else 240.0)
