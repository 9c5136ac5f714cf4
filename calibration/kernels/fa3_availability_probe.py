# Probe (issue 38, docs/COST-MODEL.md "Against real vLLM runs"): can this GPU machine time the FlashAttention-3 decode
# vLLM runs on Hopper? The tables' decode attention is torch SDPA's FlashAttention-2; vLLM 0.15 on an H100 runs FA3
# (vllm/v1/attention/backends/flash_attn.py through vllm_flash_attn). torch 2.11 can route SDPA's flash backend to
# FA3 or FA4 (torch.nn.attention.activate_flash_attention_impl) when the flash-attn 3 / 4 package is installed. This
# times one-query decode attention over contiguous caches with the default FA2, then tries each registered
# implementation and prints the rate (K and V bytes read over the mean time of 20 calls) or why it could not run.
# Run on the device: python3 fa3_availability_probe.py
import torch
import torch.nn.attention as attn
import torch.nn.functional as F

SHAPES = [(80, 32, 32, 700), (256, 32, 32, 1024), (128, 32, 8, 4096), (256, 32, 8, 4096)]  # batch, q, kv heads, ctx


def mean_us(fn, calls=20):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1000


def main():
    print(torch.cuda.get_device_name(0), torch.__version__, "impls:", attn.list_flash_attention_impls())
    for batch, q_heads, kv_heads, ctx in SHAPES:
        q = torch.randn(batch, q_heads, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(batch, kv_heads, ctx, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        gb = 2 * k.numel() * 2 / 1e9

        def call():
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=q_heads != kv_heads)

        with attn.sdpa_kernel(attn.SDPBackend.FLASH_ATTENTION):
            us = mean_us(call)
        row = [f"batch {batch} heads {q_heads}/{kv_heads} ctx {ctx}", f"FA2 {us:.1f} us {gb / us * 1e6:.0f} GB/s"]
        for impl in attn.list_flash_attention_impls():
            try:
                attn.activate_flash_attention_impl(impl)
            except Exception as e:  # the package behind the implementation is missing
                row.append(f"{impl}: cannot activate ({e})")
                continue
            try:
                with attn.sdpa_kernel(attn.SDPBackend.FLASH_ATTENTION):
                    us = mean_us(call)
                row.append(f"{impl} {us:.1f} us {gb / us * 1e6:.0f} GB/s")
            except Exception as e:  # activated, but refused this call
                row.append(f"{impl}: failed ({e})")
            finally:
                attn.restore_flash_attention_impl()
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
