"""Clock probe: does a GEMM run slower once the H200 has been busy for a while (power-limited clocks) than in a
short burst from idle? The sweep times each point in short bursts, the composition check times long whole
forwards; this tells whether the two see the same clocks. Times torch.mm (cuBLAS) bursts after an idle pause and
after a sustained load, and reads the SM clock and power draw with nvidia-smi during each. Leaves the card's
settings alone (METHOD.md). Usage: python3 clock_probe.py [--out FILE]"""
import argparse
import subprocess
import time

import torch


def smi():
    q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader"],
                       capture_output=True, text=True).stdout.strip()
    return q


def burst(a, b, n):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        start.record()
        torch.mm(a, b)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = []
    shapes = [(512, 4096, 28672), (2048, 4096, 28672), (8192, 4096, 28672), (1, 4096, 28672)]
    for m, k, n in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        torch.mm(a, b)
        torch.cuda.synchronize()
        time.sleep(1.0)
        idle_clock = smi()
        t_burst = burst(a, b, 10)
        after_burst = smi()
        t0 = time.time()
        while time.time() - t0 < 1.5:
            for _ in range(20):
                torch.mm(a, b)
            torch.cuda.synchronize()
        hot_clock = smi()
        t_hot = burst(a, b, 30)
        flops = 2.0 * m * k * n
        line = (f"M {m} K {k} N {n}: burst-from-idle {t_burst:.4f} ms ({flops / t_burst / 1e9:.0f} TFLOP/s)"
                f"  sustained {t_hot:.4f} ms ({flops / t_hot / 1e9:.0f} TFLOP/s)  ratio {t_hot / t_burst:.3f}"
                f"  | smi idle [{idle_clock}] after burst [{after_burst}] hot [{hot_clock}]")
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
