// Tests sim/engine/collectives.*: α-β costs of each collective on two link kinds, vLLM's custom all-reduce switch
// points, the link a GPU group gets from its GPU file, and a TP-4 decode step's comm term on NVSwitch vs PCIe without
// peer-to-peer. Every expected figure is worked by hand in the comment beside it from the constants of collectives.cpp:
// NCCL ring base latency LL 6.6 / Simple 8.4 µs, per step NVLink 0.6 / 3.4 µs and PCI 1.0 / 5.7 µs, LL at 1/4 of the
// bus bandwidth for all-reduce and 1/3 otherwise; bus bandwidth NVLink 329/355/361 of 450 at 2/4/8 ranks, PCIe
// without P2P 0.3125 of the link; custom all-reduce one-shot 4.3 µs, two-shot 12.34 µs at 0.598 of the bus.
#include "sim/engine/collectives.h"

#include <cmath>

#include "calibration/gpu_spec.h"
#include "models/model_registry.h"
#include "sim/engine/tensor_parallel_comm.h"
#include "tests/catch.h"

namespace servesim::engine {
namespace {

bool near(double a, double b, double tol = 1e-9) { return std::abs(a - b) <= tol; }

constexpr double kMiB = 1024.0 * 1024.0;
const CollectiveLink kNvswitch{LinkKind::kNvlinkSwitch, 450e9};  // H100 SXM's NVLink 4, one way
const CollectiveLink kPcieHost{LinkKind::kPcieHost, 32e9};       // PCIe Gen4 x16 without P2P (L40S, RTX 4090)

TEST_CASE("Collectives on NVSwitch, 8 ranks: NCCL's ring, LL for small messages, Simple for large", "[engine][comm]") {
    const CollectiveCostModel c(kNvswitch, 8, /*custom_all_reduce=*/false);
    CHECK(near(c.bus_bytes_per_s(), 361e9, 1e-3));  // 450 · 361/450
    // All-reduce of 64 MiB: 2·7/8 · 67,108,864 = 117,440,512 B on the bus. Simple: 8.4 + 14 · 3.4 = 56 µs +
    // 117,440,512 / 361e9 s = 325.320 µs → 381.320 µs (LL: 15 µs + 1,301.3 µs).
    CHECK(near(c.all_reduce_ms(64 * kMiB), 0.3813200, 1e-6));
    // All-reduce of 4 KiB: 7,168 B on the bus. LL: 6.6 + 14 · 0.6 = 15 µs + 7,168 / 90.25e9 s = 0.0794 µs →
    // 15.0794 µs (Simple: 56.02 µs).
    CHECK(near(c.all_reduce_ms(4096), 0.0150794, 1e-7));
    // All-gather (and reduce-scatter) of 64 MiB gathered: 7/8 · 64 MiB = 58,720,256 B, 7 steps. Simple: 8.4 + 7 · 3.4
    // = 32.2 µs + 162.660 µs = 194.860 µs.
    CHECK(near(c.all_gather_ms(64 * kMiB), 0.1948600, 1e-6));
    CHECK(near(c.reduce_scatter_ms(64 * kMiB), 0.1948600, 1e-6));
    // All-to-all of 64 MiB per rank: one step, 7/8 of it leaves: 8.4 + 3.4 = 11.8 µs + 162.660 µs = 174.460 µs.
    CHECK(near(c.all_to_all_ms(64 * kMiB), 0.1744600, 1e-6));
    CHECK_FALSE(c.uses_custom_all_reduce(4096));  // disabled here
}

TEST_CASE("Collectives over PCIe without peer-to-peer, 4 ranks: through host memory, NCCL only", "[engine][comm]") {
    const CollectiveCostModel c(kPcieHost, 4);
    CHECK(near(c.bus_bytes_per_s(), 10e9, 1e-3));  // 32 GB/s · 0.3125
    // No P2P: vLLM's custom all-reduce cannot start (_can_p2p), whatever the size.
    CHECK_FALSE(c.uses_custom_all_reduce(16384));
    // All-reduce of 4 MiB: 1.5 · 4,194,304 = 6,291,456 B on the bus. Simple: 8.4 + 6 · 5.7 = 42.6 µs + 629.1456 µs =
    // 671.7456 µs (LL: 12.6 + 2,516.6 µs).
    CHECK(near(c.all_reduce_ms(4 * kMiB), 0.6717456, 1e-7));
    // All-reduce of 16 KiB: 24,576 B on the bus. LL: 6.6 + 6 · 1.0 = 12.6 µs + 24,576 / 2.5e9 s = 9.8304 µs →
    // 22.4304 µs (Simple: 45.06 µs).
    CHECK(near(c.all_reduce_ms(16384), 0.0224304, 1e-7));
    // All-gather of 4 MiB gathered: 3/4 · 4 MiB = 3,145,728 B, 3 steps. Simple: 8.4 + 3 · 5.7 = 25.5 µs +
    // 314.5728 µs = 340.0728 µs.
    CHECK(near(c.all_gather_ms(4 * kMiB), 0.3400728, 1e-7));
    CHECK(near(c.reduce_scatter_ms(4 * kMiB), 0.3400728, 1e-7));
    // All-to-all of 4 MiB per rank: 8.4 + 5.7 = 14.1 µs + 314.5728 µs = 328.6728 µs.
    CHECK(near(c.all_to_all_ms(4 * kMiB), 0.3286728, 1e-7));
    // One rank, or no link: nothing to cost.
    CHECK(CollectiveCostModel(kPcieHost, 1).all_reduce_ms(4 * kMiB) == 0);
    CHECK(CollectiveCostModel(CollectiveLink{LinkKind::kNetwork, 0}, 16).all_reduce_ms(4 * kMiB) == 0);
}

TEST_CASE("vLLM's custom all-reduce: one-shot, two-shot, and NCCL from 8 MiB", "[engine][comm]") {
    // TP 4 on NVSwitch, bus 355 GB/s.
    const CollectiveCostModel c(kNvswitch, 4);
    // 256 KiB: below 512 KiB on ≤ 4 GPUs → one-shot, every rank reads 3 peers' buffers:
    // 4.3 µs + 3 · 262,144 / 355e9 s = 4.3 + 2.2153 = 6.5153 µs.
    CHECK(c.uses_custom_all_reduce(256 * 1024.0));
    CHECK(c.custom_all_reduce_one_shot(256 * 1024.0));
    CHECK(near(c.all_reduce_ms(256 * 1024.0), 0.0065153, 1e-7));
    // 512 KiB is not below 512 KiB → two-shot, priced as vLLM's benchmark timed it on 4 H100s (PR #24532): 12.34 µs
    // + 2·3/4 · 524,288 B over 0.598 of the bus (212.2 GB/s) = 12.34 + 3.7061 = 16.0461 µs (measured there: 17 µs).
    CHECK_FALSE(c.custom_all_reduce_one_shot(512 * 1024.0));
    CHECK(near(c.all_reduce_ms(512 * 1024.0), 0.0160461, 1e-7));
    // 2 MiB (Llama-2-70B TP 4 decoding 128 sequences: 128 · 8192 · 2 B): 12.34 + 1.5 · 2,097,152 / 212.2e9 s =
    // 12.34 + 14.8243 = 27.1643 µs (measured: 26 µs; the former 2 · 4.3 µs at the full bus gave 17.46 µs).
    CHECK(near(c.all_reduce_ms(2 * kMiB), 0.0271643, 1e-7));
    // The last size below 8 MiB (inputs are multiples of 16 B): two-shot, 12.34 µs + 1.5 · 8,388,592 / 212.2e9 s =
    // 12.34 + 59.2973 = 71.6373 µs.
    CHECK(c.uses_custom_all_reduce(8 * kMiB - 16));
    CHECK(near(c.all_reduce_ms(8 * kMiB - 16), 0.0716373, 1e-7));
    // 8 MiB: should_custom_ar wants inp_size < max_size, so NCCL: Simple 8.4 + 6 · 3.4 = 28.8 µs + 35.4448 µs =
    // 64.2448 µs — the step up where vLLM hands all-reduces to pynccl.
    CHECK_FALSE(c.uses_custom_all_reduce(8 * kMiB));
    CHECK(near(c.all_reduce_ms(8 * kMiB), 0.0642448, 1e-7));
    // On 8 GPUs one-shot stops at 256 KiB.
    const CollectiveCostModel c8(kNvswitch, 8);
    CHECK(c8.custom_all_reduce_one_shot(256 * 1024.0 - 16));
    CHECK_FALSE(c8.custom_all_reduce_one_shot(256 * 1024.0));
    // Where vLLM does not run it: 3 ranks (not in 2, 4, 6, 8), 4 PCIe GPUs even with P2P (not fully connected),
    // across nodes. Two PCIe GPUs with P2P do (world size 2), one-shot.
    CHECK_FALSE(CollectiveCostModel(kNvswitch, 3).uses_custom_all_reduce(4096));
    CHECK_FALSE(CollectiveCostModel(CollectiveLink{LinkKind::kPcieP2p, 32e9}, 4).uses_custom_all_reduce(4096));
    CHECK_FALSE(CollectiveCostModel(CollectiveLink{LinkKind::kNetwork, 50e9}, 2).uses_custom_all_reduce(4096));
    CHECK(CollectiveCostModel(CollectiveLink{LinkKind::kPcieP2p, 32e9}, 2).uses_custom_all_reduce(4096));
}

TEST_CASE("Hopper NVSwitch: symmetric memory caps the custom all-reduce at 6 and 8 GPUs and takes the rest (bf16)",
          "[engine][comm]") {
    // vLLM PR #24111: on compute capability 9.0 with multicast the custom kernel takes messages below 512 KiB (6 GPUs)
    // or 256 KiB (8), torch's multimem all-reduce those below 64 MiB: 10.67 µs + S / 209.7 GB/s (vLLM's TP 6 H100
    // benchmark, 13–31 µs at 0.5–4 MiB).
    const CollectiveLink hopper{LinkKind::kNvlinkSwitch, 450e9, 0, 90};
    const CollectiveCostModel c8(hopper, 8);
    // 128 KiB: custom one-shot, 4.3 µs + 7 · 131,072 / 361e9 s = 4.3 + 2.5416 = 6.8416 µs.
    CHECK(c8.uses_custom_all_reduce(128 * 1024.0));
    CHECK(near(c8.all_reduce_ms(128 * 1024.0), 0.0068416, 1e-7));
    // 256 KiB is not below the cap: multimem, 10.67 + 262,144 / 209.7e9 s = 10.67 + 1.2501 = 11.9201 µs.
    CHECK_FALSE(c8.uses_custom_all_reduce(256 * 1024.0));
    CHECK(c8.uses_symm_mem_all_reduce(256 * 1024.0));
    CHECK(near(c8.all_reduce_ms(256 * 1024.0), 0.0119201, 1e-7));
    // 1 MiB (Llama-3-70B TP 8 decoding 64 sequences): 10.67 + 5.0004 = 15.6704 µs. Without symmetric memory (another
    // GPU generation) the custom two-shot runs it: 12.34 + 1.75 · 1,048,576 / (0.598 · 361e9) s = 20.8438 µs.
    CHECK(near(c8.all_reduce_ms(kMiB), 0.0156704, 1e-7));
    CHECK(near(CollectiveCostModel(kNvswitch, 8).all_reduce_ms(kMiB), 0.0208438, 1e-7));
    // 64 MiB is not below 64 MiB: NCCL, 381.320 µs as in the first test case.
    CHECK_FALSE(c8.uses_symm_mem_all_reduce(64 * kMiB));
    CHECK(near(c8.all_reduce_ms(64 * kMiB), 0.3813200, 1e-6));
    // 6 GPUs: the cap is 512 KiB, so 512 KiB is multimem: 10.67 + 2.5002 = 13.1702 µs.
    const CollectiveCostModel c6(hopper, 6);
    CHECK(c6.uses_custom_all_reduce(512 * 1024.0 - 16));
    CHECK(near(c6.all_reduce_ms(512 * 1024.0), 0.0131702, 1e-7));
    // 4 GPUs keep the custom kernel below 8 MiB (two-shot at 2 MiB: 27.1643 µs); multimem takes 8 to 32 MiB: 16 MiB is
    // 10.67 + 80.0058 = 90.6758 µs; 32 MiB goes to NCCL: Simple 8.4 + 6 · 3.4 = 28.8 µs + 1.5 · 33,554,432 / 355e9 s =
    // 141.7793 µs → 170.5793 µs.
    const CollectiveCostModel c4(hopper, 4);
    CHECK(near(c4.all_reduce_ms(2 * kMiB), 0.0271643, 1e-7));
    CHECK(near(c4.all_reduce_ms(16 * kMiB), 0.0906758, 1e-7));
    CHECK(near(c4.all_reduce_ms(32 * kMiB), 0.1705793, 1e-6));
    // 2 GPUs: custom below 8 MiB as before; what torch's two-shot would take above is left to NCCL (not modelled).
    CHECK_FALSE(CollectiveCostModel(hopper, 2).uses_symm_mem_all_reduce(16 * kMiB));
    // --disable-custom-all-reduce leaves symmetric memory on: 128 KiB at 8 GPUs is multimem, 10.67 + 0.6250 µs.
    CHECK(
        near(CollectiveCostModel(hopper, 8, /*custom_all_reduce=*/false).all_reduce_ms(128 * 1024.0), 0.0112950, 1e-7));
    // An fp16 model: symmetric memory takes bf16 only, yet the custom cap stays lowered, so 1 MiB at 8 GPUs goes to
    // NCCL: LL 6.6 + 14 · 0.6 = 15 µs + 1.75 · 1,048,576 / 90.25e9 s = 20.3325 µs → 35.3325 µs.
    const CollectiveCostModel fp16(hopper, 8, true, /*bf16_activations=*/false);
    CHECK_FALSE(fp16.uses_custom_all_reduce(kMiB));
    CHECK_FALSE(fp16.uses_symm_mem_all_reduce(kMiB));
    CHECK(near(fp16.all_reduce_ms(kMiB), 0.0353325, 1e-7));
}

TEST_CASE("Collectives across nodes: NCCL's ring crosses the network on the node boundaries only", "[engine][comm]") {
    // TP 16 on H100 SXM nodes of 8: NDR NIC 50 GB/s (bus 46 GB/s), 2 nodes. An all-reduce of 1 MiB: 30 steps, 2 of
    // them across the network. 2·15/16 · 1,048,576 = 1,966,080 B on the bus. Simple: 8.4 + 28 · 3.4 (NVLink) + 2 · 14.0
    // (network) = 131.6 µs + 1,966,080 / 46e9 s = 42.741 µs → 174.341 µs (LL: 28.8 + 170.96 = 199.76 µs). No custom
    // all-reduce across nodes.
    const CollectiveLink net = collective_link_for_group(calibration::find_gpu("H100"), 16);
    CHECK(net.gpus_per_node == 8);
    const CollectiveCostModel c(net, 16);
    CHECK_FALSE(c.uses_custom_all_reduce(1024 * 1024.0));
    CHECK(near(c.all_reduce_ms(1024 * 1024.0), 0.174341, 1e-6));
    // A pipeline send over that link crosses the network: Simple 8.4 + 14.0 µs + 1 MiB / 46e9 s = 45.195 µs; LL 6.6 +
    // 2.7 + 1,048,576 / 15.333e9 s = 77.686 µs.
    CHECK(near(CollectiveCostModel(net, 2).send_ms(1024 * 1024.0), 0.0451951, 1e-7));
}

TEST_CASE("A GPU group's link comes from its GPU file", "[engine][comm]") {
    using calibration::find_gpu;
    // H100 SXM: NVSwitch inside the 8-GPU node, the 400 Gb/s NIC (50 GB/s) beyond it.
    CHECK(collective_link_for_group(find_gpu("H100"), 8).kind == LinkKind::kNvlinkSwitch);
    CHECK(collective_link_for_group(find_gpu("H100"), 8).link_bytes_per_s == 450e9);
    CHECK(collective_link_for_group(find_gpu("H100"), 16).kind == LinkKind::kNetwork);
    CHECK(collective_link_for_group(find_gpu("H100"), 16).link_bytes_per_s == 50e9);
    // H100 NVL: the bridged pair, then the node's PCIe Gen5 with P2P.
    CHECK(collective_link_for_group(find_gpu("H100 NVL"), 2).kind == LinkKind::kNvlinkBridge);
    CHECK(collective_link_for_group(find_gpu("H100 NVL"), 4).kind == LinkKind::kPcieP2p);
    CHECK(collective_link_for_group(find_gpu("H100 NVL"), 4).link_bytes_per_s == 64e9);
    // L40S: PCIe without P2P at any size.
    CHECK(collective_link_for_group(find_gpu("L40S"), 8).kind == LinkKind::kPcieHost);
    CHECK(collective_link_for_group(find_gpu("L40S"), 8).link_bytes_per_s == 32e9);
    // GH200: beyond its NVL2 pair the network, for which its file gives no figure (0: refused by the experiment).
    CHECK(collective_link_for_group(find_gpu("GH200"), 2).link_bytes_per_s == 450e9);
    CHECK(collective_link_for_group(find_gpu("GH200"), 4).kind == LinkKind::kNetwork);
    CHECK(collective_link_for_group(find_gpu("GH200"), 4).link_bytes_per_s == 0);
}

TEST_CASE("A TP-4 decode step's comm term: NVSwitch vs PCIe without peer-to-peer", "[engine][comm]") {
    // Llama-3.1-8B (32 layers, hidden 4096, bf16): 64 all-reduces per step; 32 decode tokens → 32 · 4096 · 2 =
    // 262,144 B each.
    const models::ModelSpec llama = models::resolve_model("Llama-3.1-8B");
    const TensorParallelComm h100 =
        make_tensor_parallel_comm(llama, 4, collective_link_for_group(calibration::find_gpu("H100"), 4));
    const TensorParallelComm l40s =
        make_tensor_parallel_comm(llama, 4, collective_link_for_group(calibration::find_gpu("L40S"), 4));
    CHECK(h100.num_allreduces_per_step == 64);
    // H100 NVSwitch: custom one-shot, 6.5153 µs each (above) → 64 · 6.5153 = 416.98 µs.
    CHECK(near(h100.step_ms(32), 0.416979, 1e-6));
    // L40S: NCCL over host memory, bus 10 GB/s, 393,216 B on the bus: Simple 42.6 + 39.3216 = 81.9216 µs (LL: 169.9)
    // → 64 · 81.9216 = 5,242.98 µs: 12.6x the NVSwitch step (the former flat model gave 1.43 ms for both links'
    // figures, 10 µs per all-reduce plus the ring's bytes over 32 GB/s).
    CHECK(near(l40s.step_ms(32), 5.2429824, 1e-6));
    // TP 1: no term.
    CHECK(make_tensor_parallel_comm(llama, 1, CollectiveLink{}).step_ms(32) == 0);
}

}  // namespace
}  // namespace servesim::engine
