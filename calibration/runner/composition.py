#!/usr/bin/env python3
# Composition check and kernels-vs-torch ratios for calibration/profiles/<gpu>/REPORT.md (issue 4, step 3).
# Measures whole-model step times in PyTorch with random bf16 weights and writes them in the measurements CSV format
# (calibration/README.md) for `servesim-calibrate --profile P --add-composition CSV`:
#   prefill: the plain-torch stack captured in a CUDA graph, and a transformers forward (dense models: Qwen3ForCausalLM / LlamaForCausalLM from a config, logits_to_keep=1)
#            and, for every model, a plain-torch layer stack (F.linear, SDPA flash, our GDN/conv kernels via ctypes
#            for hybrids, because transformers' torch GDN fallback is not representative: docs/SOURCES.md,
#            "transformers' fallback for Gated DeltaNet").
#   decode:  the same plain-torch stack, one step of B sequences with C cached tokens, captured in a CUDA graph.
# cuDNN SDPA is disabled (its per-shape plan builds distort timings: docs/SOURCES.md, "Attention kernels").
import argparse, ctypes, csv, math, os, statistics, sys, time
import torch
import torch.nn.functional as F

torch.backends.cuda.enable_cudnn_sdp(False)
DEV = "cuda"
BF = torch.bfloat16

MODELS = {
    "Qwen3-4B": dict(h=2560, inter=9728, layers=36, hq=32, hkv=8, hd=128, vocab=151936, qk_norm=True, theta=1e6),
    "Qwen3-8B": dict(h=4096, inter=12288, layers=36, hq=32, hkv=8, hd=128, vocab=151936, qk_norm=True, theta=1e6),
    "Llama-3.1-8B": dict(h=4096, inter=14336, layers=32, hq=32, hkv=8, hd=128, vocab=128256, qk_norm=False, theta=5e5),
    # Qwen3.5-4B text model: (3 GDN + 1 gated full attention) x 8
    "Qwen3.5-4B": dict(h=2560, inter=9216, layers=32, hq=16, hkv=4, hd=256, vocab=248320, qk_norm=True, theta=1e7,
                       gated=True, rot=64, hybrid=True, hk=16, hv=32, dk=128, dv=128),
}


def median_ms(fn, warmup=2, reps=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return statistics.median(out)


class Kern:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        P, I, F32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        self.lib.servesim_gdn_prefill_workspace_bytes.restype = ctypes.c_size_t
        self.lib.servesim_gdn_prefill_workspace_bytes.argtypes = [I, I, I, I]
        self.lib.servesim_gdn_prefill.argtypes = [P, P, P, P, P, P, P, I, I, I, I, I, I, F32, P, P]
        self.lib.servesim_gdn_decode.argtypes = [P, P, P, P, P, P, P, I, I, I, I, F32, P]
        self.lib.servesim_conv1d_prefill.argtypes = [P, P, P, I, P, I, I, I, P]
        self.lib.servesim_conv1d_update.argtypes = [P, P, P, P, I, I, P]
        self.lib.servesim_last_error.restype = ctypes.c_char_p

    def check(self, rc):
        if rc != 0:
            raise RuntimeError(self.lib.servesim_last_error().decode())

    @staticmethod
    def stream():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def rms(x, w, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def rope(x, cos, sin, rot):
    # x [..., T, hd] with cos/sin [T, rot]
    xr, xp = x[..., :rot], x[..., rot:]
    half = rot // 2
    x1, x2 = xr[..., :half], xr[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return torch.cat((xr * cos + rotated * sin, xp), dim=-1)


class TorchStack:
    """Plain-torch decoder of the model's shapes (random weights), prefill of one sequence or one decode step."""

    def __init__(self, m, kern=None):
        self.m, self.kern = m, kern
        h, I, hq, hkv, hd = m["h"], m["inter"], m["hq"], m["hkv"], m["hd"]
        g = torch.Generator(device=DEV).manual_seed(0)
        rnd = lambda *s: (torch.rand(*s, device=DEV, generator=g, dtype=torch.float32) * 0.1 - 0.05).to(BF)
        self.hybrid = m.get("hybrid", False)
        self.kinds = []
        self.w = []
        for i in range(m["layers"]):
            kind = "attn" if (not self.hybrid or i % 4 == 3) else "gdn"
            L = dict(n1=torch.ones(h, device=DEV, dtype=BF), n2=torch.ones(h, device=DEV, dtype=BF),
                     gu=rnd(2 * I, h), down=rnd(h, I))
            if kind == "attn":
                qo = hq * hd * (2 if m.get("gated") else 1)
                L.update(qkv=rnd(qo + 2 * hkv * hd, h), o=rnd(h, hq * hd), qn=torch.ones(hd, device=DEV, dtype=BF),
                         kn=torch.ones(hd, device=DEV, dtype=BF))
            else:
                hk, hv, dk, dv = m["hk"], m["hv"], m["dk"], m["dv"]
                conv = 2 * hk * dk + hv * dv
                L.update(qkvz=rnd(conv + hv * dv, h), ba=rnd(2 * hv, h), out=rnd(h, hv * dv),
                         convw=rnd(conv, 4) * 10, A_log=torch.zeros(hv, device=DEV), dt_bias=torch.ones(hv, device=DEV),
                         gn=torch.ones(dv, device=DEV, dtype=BF))
            self.kinds.append(kind)
            self.w.append(L)
        self.nf = torch.ones(h, device=DEV, dtype=BF)
        self.lm = rnd(m["vocab"], h)
        self.emb = self.lm  # tied or not: only the gather cost matters

    def _rope_tables(self, positions):
        m = self.m
        rot = m.get("rot", m["hd"])
        inv = 1.0 / (m["theta"] ** (torch.arange(0, rot, 2, device=DEV, dtype=torch.float32) / rot))
        f = positions.float()[:, None] * inv[None, :]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos().to(BF), emb.sin().to(BF), rot

    def _attn_proj(self, L, x, T_shape):
        m = self.m
        B, T = T_shape
        hq, hkv, hd = m["hq"], m["hkv"], m["hd"]
        qkv = F.linear(x, L["qkv"])
        qo = hq * hd * (2 if m.get("gated") else 1)
        q, k, v = qkv.split([qo, hkv * hd, hkv * hd], dim=-1)
        gate = None
        if m.get("gated"):
            q, gate = q.view(B, T, hq, 2 * hd).split([hd, hd], dim=-1)
        q = q.reshape(B, T, hq, hd)
        k = k.reshape(B, T, hkv, hd)
        v = v.reshape(B, T, hkv, hd)
        if m["qk_norm"]:
            q, k = rms(q, L["qn"]), rms(k, L["kn"])
        return q, k, v, gate

    def _gdn(self, L, x, B, T, state, conv_state, decode):
        m, kern = self.m, self.kern
        hk, hv, dk, dv = m["hk"], m["hv"], m["dk"], m["dv"]
        conv = 2 * hk * dk + hv * dv
        qkvz = F.linear(x, L["qkvz"])
        mixed, z = qkvz.split([conv, hv * dv], dim=-1)
        mixed = mixed.contiguous()
        ba = F.linear(x, L["ba"]).float()
        b, a = ba.split([hv, hv], dim=-1)
        beta = torch.sigmoid(b).contiguous()
        g = (-torch.exp(L["A_log"]) * F.softplus(a + L["dt_bias"])).contiguous()
        y = torch.empty_like(mixed)
        st = kern.stream()
        if decode:
            kern.check(kern.lib.servesim_conv1d_update(mixed.data_ptr(), L["convw"].data_ptr(), conv_state.data_ptr(),
                                                       y.data_ptr(), B, conv, st))
        else:
            kern.check(kern.lib.servesim_conv1d_prefill(mixed.data_ptr(), L["convw"].data_ptr(), conv_state.data_ptr(),
                                                        0, y.data_ptr(), B, T, conv, st))
        q, k, v = y.split([hk * dk, hk * dk, hv * dv], dim=-1)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        o = torch.empty(B * T, hv, dv, device=DEV, dtype=BF)
        scale = 1.0 / math.sqrt(dk)
        if decode:
            kern.check(kern.lib.servesim_gdn_decode(q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(),
                                                    beta.data_ptr(), o.data_ptr(), state.data_ptr(), 1, B, hk, hv,
                                                    ctypes.c_float(scale), st))
        else:
            ws = self.ws
            kern.check(kern.lib.servesim_gdn_prefill(q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(),
                                                     beta.data_ptr(), o.data_ptr(), state.data_ptr(), 1, 0, B, T, hk,
                                                     hv, ctypes.c_float(scale), ws.data_ptr(), st))
        o = rms(o, L["gn"]) * F.silu(z.reshape(B * T, hv, dv))
        return F.linear(o.reshape(B * T, hv * dv), L["out"])

    def _mlp(self, L, x):
        gu = F.linear(x, L["gu"])
        gt, up = gu.chunk(2, dim=-1)
        return F.linear(F.silu(gt) * up, L["down"])

    def prefill(self, T):
        """One sequence of T tokens; returns a closure running the forward (logits for the last token only)."""
        m = self.m
        ids = torch.randint(0, m["vocab"], (T,), device=DEV)
        cos, sin, rot = self._rope_tables(torch.arange(T, device=DEV))
        if self.hybrid:
            hv = m["hv"]
            self.state = torch.zeros(1, hv, 128, 128, device=DEV, dtype=torch.float32)
            self.conv_state = torch.zeros(1, 3, 2 * m["hk"] * 128 + hv * 128, device=DEV, dtype=BF)
            nbytes = self.kern.lib.servesim_gdn_prefill_workspace_bytes(1, T, m["hk"], hv)
            self.ws = torch.empty(nbytes, device=DEV, dtype=torch.uint8)

        def run():
            x = self.emb[ids]
            for kind, L in zip(self.kinds, self.w):
                r = rms(x, L["n1"])
                if kind == "attn":
                    q, k, v, gate = self._attn_proj(L, r, (1, T))
                    q = rope(q.transpose(1, 2), cos, sin, rot)
                    k = rope(k.transpose(1, 2), cos, sin, rot)
                    a = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True, enable_gqa=True)
                    a = a.transpose(1, 2).reshape(T, -1)
                    if gate is not None:
                        a = a * torch.sigmoid(gate.reshape(T, -1))
                    x = x + F.linear(a, L["o"])
                else:
                    x = x + self._gdn(L, r, 1, T, self.state, self.conv_state, False)
                x = x + self._mlp(L, rms(x, L["n2"]))
            logits = F.linear(rms(x[-1:], self.nf), self.lm)
            return logits.argmax(-1)

        return run

    def decode(self, B, C):
        """One decode step of B sequences with C cached tokens each (the new token is position C)."""
        m = self.m
        hq, hkv, hd = m["hq"], m["hkv"], m["hd"]
        G = hq // hkv
        n_attn = self.kinds.count("attn")
        self.kc = [torch.rand(B, hkv, C + 1, hd, device=DEV, dtype=torch.float32).to(BF) - 0.5 for _ in range(n_attn)]
        self.vc = [torch.rand(B, hkv, C + 1, hd, device=DEV, dtype=torch.float32).to(BF) - 0.5 for _ in range(n_attn)]
        if self.hybrid:
            hv = m["hv"]
            n_gdn = self.kinds.count("gdn")
            self.states = [torch.rand(B, hv, 128, 128, device=DEV) - 0.5 for _ in range(n_gdn)]
            self.conv_states = [torch.zeros(B, 3, 2 * m["hk"] * 128 + hv * 128, device=DEV, dtype=BF)
                                for _ in range(n_gdn)]
        ids = torch.randint(0, m["vocab"], (B,), device=DEV)
        cos, sin, rot = self._rope_tables(torch.full((1,), C, device=DEV))

        def run():
            x = self.emb[ids]
            ia = ig = 0
            for kind, L in zip(self.kinds, self.w):
                r = rms(x, L["n1"])
                if kind == "attn":
                    q, k, v, gate = self._attn_proj(L, r, (B, 1))
                    q = rope(q.transpose(1, 2), cos, sin, rot)  # [B, hq, 1, hd]
                    k = rope(k.transpose(1, 2), cos, sin, rot)
                    kc, vc = self.kc[ia], self.vc[ia]
                    kc[:, :, C:C + 1].copy_(k)
                    vc[:, :, C:C + 1].copy_(v.transpose(1, 2))
                    # The G query heads of a KV group as G query rows: exact for one decode token.
                    a = F.scaled_dot_product_attention(q.reshape(B, hkv, G, hd), kc, vc)
                    a = a.reshape(B, hq * hd)
                    if gate is not None:
                        a = a * torch.sigmoid(gate.reshape(B, -1))
                    x = x + F.linear(a, L["o"])
                    ia += 1
                else:
                    x = x + self._gdn(L, r, B, 1, self.states[ig], self.conv_states[ig], True)
                    ig += 1
                x = x + self._mlp(L, rms(x, L["n2"]))
            return F.linear(rms(x, self.nf), self.lm).argmax(-1)

        return run

    def free_decode(self):
        self.kc = self.vc = self.states = self.conv_states = None


def graph_ms(fn, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return median_ms(lambda: g.replay(), warmup=3, reps=reps)


def transformers_prefill(name, m, lengths, out_rows):
    import transformers
    common = dict(hidden_size=m["h"], intermediate_size=m["inter"], num_hidden_layers=m["layers"],
                  num_attention_heads=m["hq"], num_key_value_heads=m["hkv"], head_dim=m["hd"], vocab_size=m["vocab"],
                  max_position_embeddings=40960)
    if name.startswith("Llama"):
        cfg = transformers.LlamaConfig(**common)
        cls = transformers.LlamaForCausalLM
    else:
        cfg = transformers.Qwen3Config(**common)
        cls = transformers.Qwen3ForCausalLM
    with torch.device(DEV):
        model = cls(cfg).to(BF).eval()
    for T in lengths:
        ids = torch.randint(0, m["vocab"], (1, T), device=DEV)
        with torch.no_grad():
            ms = median_ms(lambda: model(input_ids=ids, logits_to_keep=1, use_cache=False), warmup=1,
                           reps=3 if T >= 16384 else 5)
        out_rows.append(("transformers_prefill", T, 0, ms))
        print(f"  transformers prefill T={T}: {ms:.3f} ms", flush=True)
    del model
    torch.cuda.empty_cache()


def kernels_vs_torch(bench_csv, out_path):
    rows = list(csv.DictReader(open(bench_csv)))
    res = []
    torch_prefill_ms = {}  # one SDPA timing per shape, shared by the kernel's variants (shape "... variant N")
    for r in rows:
        op, shape, ours = r["op"], r["shape"], float(r["ms"])
        f = dict(zip(shape.split()[0::2], shape.split()[1::2])) if op != "copy" else {}
        torch_ms = None
        try:
            if op == "gemm" and "M" in f:
                M, N, K = int(f["M"]), int(f["N"]), int(f["K"])
                a = torch.rand(M, K, device=DEV).to(BF)
                ws = [torch.rand(N, K, device=DEV).to(BF) for _ in range(3)]
                i = [0]

                def fn():
                    i[0] += 1
                    F.linear(a, ws[i[0] % 3])
                torch_ms = median_ms(fn, 3, 15)
            elif op == "prefill_attn" and f.get("cached") == "0":
                hq, hkv, hd, T = int(f["hq"]), int(f["hkv"]), int(f["hd"]), int(f["chunk"])
                torch_ms = torch_prefill_ms.get((hq, hkv, hd, T))
                if torch_ms is None:
                    q = torch.rand(1, hq, T, hd, device=DEV).to(BF)
                    k = torch.rand(1, hkv, T, hd, device=DEV).to(BF)
                    v = torch.rand(1, hkv, T, hd, device=DEV).to(BF)
                    from torch.nn.attention import sdpa_kernel, SDPBackend
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        torch_ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                    enable_gqa=True), 3, 10)
                    torch_prefill_ms[(hq, hkv, hd, T)] = torch_ms
            elif op == "decode_attn":
                B, C, hq, hkv, hd = int(f["seqs"]), int(f["ctx"]), int(f["hq"]), int(f["hkv"]), int(f["hd"])
                q = torch.rand(B, hkv, hq // hkv, hd, device=DEV).to(BF)
                k = torch.rand(B, hkv, C, hd, device=DEV).to(BF)
                v = torch.rand(B, hkv, C, hd, device=DEV).to(BF)
                torch_ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v), 3, 20)
        except Exception as e:  # report, don't stop the run
            print(f"  torch {op} {shape}: {e}", flush=True)
        if torch_ms is not None:
            res.append((op, shape, ours, torch_ms, torch_ms / ours))
            print(f"  {op:14s} {shape:44s} ours {ours:8.4f} ms  torch {torch_ms:8.4f} ms  ours/torch speed "
                  f"{torch_ms / ours:5.2f}", flush=True)
        torch.cuda.empty_cache()
    with open(out_path, "w") as fo:
        fo.write("op,shape,ours_ms,torch_ms,speed_ratio\n")
        for r in res:
            fo.write(f'{r[0]},"{r[1]}",{r[2]},{r[3]},{r[4]}\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--bench-csv")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    kern = Kern(args.lib)
    if args.bench_csv:
        print("== kernels vs torch ==", flush=True)
        kernels_vs_torch(args.bench_csv, os.path.join(args.outdir, "kernels_vs_torch.csv"))
    for name in args.model:
        m = MODELS[name]
        t0 = time.time()
        print(f"== composition {name} ==", flush=True)
        rows = []
        lengths = [512, 2048, 8192, 32768] if args.quick else [512, 1024, 2048, 4096, 8192, 16384, 32768]
        stack = TorchStack(m, kern)
        with torch.no_grad():
            for T in lengths:
                run = stack.prefill(T)
                ms = graph_ms(run, reps=3 if T >= 16384 else 7)
                rows.append(("prefill", T, 0, ms))
                print(f"  torch-stack prefill T={T}: {ms:.3f} ms (CUDA graph)", flush=True)
            decode_cases = [(1, 2048), (8, 2048), (32, 2048), (64, 2048), (128, 2048), (256, 1024)]
            if args.quick:
                decode_cases = [(1, 2048), (32, 2048), (256, 1024)]
            for B, C in decode_cases:
                run = stack.decode(B, C)
                ms = graph_ms(run)
                rows.append(("decode", B, C + 1, ms))
                print(f"  torch-stack decode B={B} C={C}: {ms:.3f} ms (CUDA graph)", flush=True)
                stack.free_decode()
                torch.cuda.empty_cache()
        del stack
        torch.cuda.empty_cache()
        extra = []
        if not m.get("hybrid"):
            with torch.no_grad():
                transformers_prefill(name, m, [512, 2048, 8192] if args.quick else [512, 2048, 8192, 32768], extra)
        with open(os.path.join(args.outdir, f"composition_{name}.csv"), "w") as f:
            f.write("kind,size,context_tokens,ms\n")
            for kind, a, b, ms in rows:
                f.write(f"{kind},{a},{b},{ms}\n")
        with open(os.path.join(args.outdir, f"transformers_{name}.csv"), "w") as f:
            f.write("kind,size,context_tokens,ms\n")
            for kind, a, b, ms in extra:
                f.write(f"prefill,{a},{b},{ms}\n")
        print(f"  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
