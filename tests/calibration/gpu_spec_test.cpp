// Tests calibration/gpu_spec.*: the GPU data files (calibration/gpus/*.yaml), their strict reader and the lookup by
// the names people type.
#include "calibration/gpu_spec.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "common/units.h"
#include "tests/catch.h"

namespace sc = servesim::calibration;
using servesim::kGiB;

namespace {

std::string error_of(const char* name) {
    try {
        (void)sc::find_gpu(name);
    } catch (const servesim::ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

// A complete, valid GPU file (a made-up card); tests change one line of it.
const std::string kValid = R"(name: Test GPU
vendor: nvidia
device_name: NVIDIA Test GPU
compute_capability: 90
memory_marketed_gb: 80
memory_reported_bytes: 84932978278
memory_bandwidth_gb_per_s: 2000
bf16_dense_tflops: 500
fp8_dense_tflops: 1000
fp4_dense_tflops: 0
host_link: {kind: pcie, pcie_gen: 5, bandwidth_gb_per_s: 64}
interconnect: {topology: nvlink_switch, bandwidth_gb_per_s: 450, domain_gpus: 8}
)";

std::string replace_line(std::string text, const std::string& key, const std::string& line) {
    const auto at = text.find(key + ":");
    const auto end = text.find('\n', at);
    return text.replace(at, end - at, line);
}

std::string parse_error(const std::string& text) {
    try {
        (void)sc::parse_gpu_spec(text, "my_gpu.yaml");
    } catch (const servesim::ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

}  // namespace

TEST_CASE("GPU names match case-insensitively with or without brand and spaces", "[calibration]") {
    CHECK(sc::find_gpu("h200").name == "H200");
    CHECK(sc::find_gpu("RTX 3090").name == "RTX 3090");
    CHECK(sc::find_gpu("rtx3090").name == "RTX 3090");
    CHECK(sc::find_gpu("3090").name == "RTX 3090");
    CHECK(sc::find_gpu("NVIDIA GeForce RTX 4090").name == "RTX 4090");
    CHECK(sc::find_gpu("a100-80gb").name == "A100-80GB");
    CHECK(sc::find_gpu("A100 40GB").name == "A100-40GB");
    CHECK(sc::find_gpu("H100").name == "H100-SXM");
    CHECK(sc::find_gpu("b200").name == "B200");
    CHECK(sc::find_gpu("l40s").name == "L40S");
}

TEST_CASE("find_gpu gives the catalog's entry for every name and alias, whichever way it finds it", "[calibration]") {
    // "H200" is its file's name (calibration/gpus/H200.yaml): only that file is read. "H200 SXM" is an alias, "H100"
    // names no file (the catalog's H100-SXM.yaml has it as an alias): both go through the whole catalog. Either way
    // the spec is the catalog's, field for field.
    for (const auto& g : sc::gpu_catalog()) {
        INFO(g.file);
        CHECK(sc::find_gpu(g.name) == g);
        for (const auto& a : g.aliases) {
            INFO(a);
            CHECK(sc::find_gpu(a) == g);
        }
    }
    CHECK(sc::find_gpu("h200").file == "calibration/gpus/H200.yaml");
    CHECK(sc::find_gpu("H200 SXM").file == "calibration/gpus/H200.yaml");
    CHECK(sc::find_gpu("H100").file == "calibration/gpus/H100-SXM.yaml");
}

TEST_CASE("An unknown GPU is an error listing the known names", "[calibration]") {
    const auto msg = error_of("TPU v5");
    CHECK(msg.find("TPU v5") != std::string::npos);
    for (const auto& g : sc::gpu_catalog()) {
        CHECK(msg.find(g.name) != std::string::npos);
    }
    CHECK(error_of("").find("unknown GPU") != std::string::npos);
}

TEST_CASE("Memory is what cudaMemGetInfo reports, below the marketed size", "[calibration]") {
    // H200: measured 150,109,880,320 B = 139.80 GiB (141 GB marketed).
    CHECK(sc::find_gpu("H200").memory_bytes == 150'109'880'320);
    // RTX 3090: a 24 GiB card reports about 23.69 GiB.
    const double rtx3090_gib = static_cast<double>(sc::find_gpu("RTX 3090").memory_bytes) / kGiB;
    CHECK(rtx3090_gib > 23.6);
    CHECK(rtx3090_gib < 23.8);
}

TEST_CASE("vLLM's large-GPU defaults: at least 70 GiB and not an A100", "[calibration]") {
    constexpr std::int64_t k70GiB = 70LL * 1024 * 1024 * 1024;
    auto large = [](const sc::GpuSpec& g) { return g.memory_bytes >= k70GiB && !g.is_a100; };
    CHECK(large(sc::find_gpu("H100")));
    CHECK(large(sc::find_gpu("H200")));
    CHECK(large(sc::find_gpu("B200")));
    CHECK_FALSE(large(sc::find_gpu("A100-80GB")));  // ≥ 70 GiB but an A100
    CHECK_FALSE(large(sc::find_gpu("L40S")));
    CHECK_FALSE(large(sc::find_gpu("RTX 4090")));
}

TEST_CASE("Peaks are dense figures; Ampere has no fp8", "[calibration]") {
    // H100/H200 SXM: 989.4 TFLOP/s bf16 dense (1,979 is the 2:4-sparse figure); fp8 1,978.9, twice that to rounding.
    const auto h200 = sc::find_gpu("H200");
    CHECK(h200.bf16_dense_flops_per_s > 989e12);
    CHECK(h200.bf16_dense_flops_per_s < 990e12);
    CHECK(h200.fp8_dense_flops_per_s / h200.bf16_dense_flops_per_s > 1.999);
    CHECK(h200.fp8_dense_flops_per_s / h200.bf16_dense_flops_per_s < 2.001);
    CHECK(h200.memory_bandwidth_bytes_per_s == 4.8e12);
    CHECK(h200.compute_capability == 90);
    CHECK(sc::find_gpu("A100-80GB").fp8_dense_flops_per_s == 0);
    CHECK(sc::find_gpu("RTX 3090").fp8_dense_flops_per_s == 0);
    for (const auto& g : sc::gpu_catalog()) {
        INFO(g.name);
        CHECK(g.memory_bytes > 0);
        CHECK(g.memory_bandwidth_bytes_per_s > 0);
        CHECK(g.bf16_dense_flops_per_s > 0);
        CHECK(g.host_link_bytes_per_s > 0);
    }
}

TEST_CASE("Every catalog GPU has a cited data file and a unique name", "[calibration][gpus]") {
    // The issue's cards: the eight of the former compiled-in table plus these.
    for (const char* name : {"L4", "A10G", "H100 PCIe", "H100 NVL", "H20", "GH200", "GB200", "B300", "RTX PRO 6000",
                             "MI300X", "MI325X", "RTX 3090", "RTX 4090", "L40S", "A100-40GB", "A100-80GB", "H100-SXM",
                             "H200", "B200"}) {
        INFO(name);
        const auto g = sc::find_gpu(name);
        CHECK(g.file.rfind("calibration/gpus/", 0) == 0);
    }
    CHECK(sc::gpu_catalog().size() == 19);
    CHECK(sc::find_gpu("MI300X").vendor == "amd");
    CHECK(sc::find_gpu("RTX PRO 6000 Blackwell").name == "RTX PRO 6000");
}

TEST_CASE("The former compiled-in table reads back bit for bit from the data files", "[calibration][gpus]") {
    // The old table computed each figure as <datasheet number> × 1e9 or 1e12 and memory as GiB × 2^30 truncated;
    // the files keep the numbers and the reader multiplies the same way, so every double is identical (outputs for
    // these GPUs stay byte-identical).
    auto gib = [&](double g) { return static_cast<std::int64_t>(g * kGiB); };
    const auto r4090 = sc::find_gpu("RTX 4090");
    CHECK(r4090.memory_bytes == gib(23.69));
    CHECK(r4090.bf16_dense_flops_per_s == 165.2 * 1e12);
    CHECK(r4090.fp8_dense_flops_per_s == 330.3 * 1e12);
    CHECK(r4090.host_link_bytes_per_s == 32e9);
    CHECK(r4090.interconnect_bytes_per_s == 32e9);
    const auto l40s = sc::find_gpu("L40S");
    CHECK(l40s.memory_bytes == gib(44.4));
    CHECK(l40s.bf16_dense_flops_per_s == 362.05 * 1e12);
    const auto a100 = sc::find_gpu("A100-40GB");
    CHECK(a100.memory_bytes == gib(39.39));
    CHECK(a100.interconnect_bytes_per_s == 300 * 1e9);
    CHECK(a100.is_a100);
    const auto h100 = sc::find_gpu("H100-SXM");
    CHECK(h100.memory_bytes == gib(79.1));
    CHECK(h100.bf16_dense_flops_per_s == 989.4 * 1e12);
    CHECK(h100.fp8_dense_flops_per_s == 1978.9 * 1e12);
    CHECK(h100.memory_bandwidth_bytes_per_s == 3350 * 1e9);
    CHECK(h100.host_link_bytes_per_s == 64e9);
    CHECK(sc::find_gpu("A100-80GB").memory_bytes == gib(79.15));
    CHECK(sc::find_gpu("B200").memory_bytes == gib(178.4));
    CHECK(sc::find_gpu("B200").interconnect_bytes_per_s == 900 * 1e9);
    CHECK(sc::find_gpu("RTX 3090").memory_bytes == gib(23.69));
    // The roofline efficiencies default to the values compiled in before (engine::RooflineParams).
    CHECK(h100.gemm_efficiency == 0.72);
    CHECK(h100.attention_efficiency == 0.55);
    CHECK(h100.gdn_efficiency == 0.25);
    CHECK(h100.bandwidth_efficiency == 0.85);
    CHECK(h100.decode_attention_efficiency == 0.85);
}

TEST_CASE("GPU files say whether PCIe peers reach each other and how fast the network is", "[calibration][gpus]") {
    // GeForce cards and the L40S have no peer-to-peer (their files cite the reports); the other PCIe cards do.
    CHECK_FALSE(sc::find_gpu("RTX 4090").interconnect_peer_to_peer);
    CHECK_FALSE(sc::find_gpu("RTX 3090").interconnect_peer_to_peer);
    CHECK_FALSE(sc::find_gpu("L40S").interconnect_peer_to_peer);
    CHECK(sc::find_gpu("RTX PRO 6000").interconnect_peer_to_peer);
    CHECK(sc::find_gpu("H100 NVL").interconnect_peer_to_peer);
    // DGX-class nodes: one 400 Gb/s NIC per GPU (50 GB/s) on H100/H200/B200, 200 Gb/s (25 GB/s) on A100.
    CHECK(sc::find_gpu("H100").network_bytes_per_s == 50e9);
    CHECK(sc::find_gpu("H200").network_bytes_per_s == 50e9);
    CHECK(sc::find_gpu("A100-80GB").network_bytes_per_s == 25e9);
    CHECK(sc::find_gpu("GH200").network_bytes_per_s == 0);  // not given: groups beyond the NVL2 pair are refused
    // The keys are checked against the topology, and the old fixed latency is refused by name.
    CHECK(parse_error(replace_line(kValid, "interconnect",
                                   "interconnect: {topology: nvlink_switch, bandwidth_gb_per_s: 450, domain_gpus: 8, "
                                   "peer_to_peer: false}"))
              .find("'interconnect.peer_to_peer': only for topology: pcie or nvlink_bridge") != std::string::npos);
    CHECK(parse_error(replace_line(kValid, "interconnect",
                                   "interconnect: {topology: pcie, bandwidth_gb_per_s: 64, network_gb_per_s: 50}"))
              .find("'interconnect.network_gb_per_s': only for topology: nvlink_switch or xgmi_mesh") !=
          std::string::npos);
    CHECK(parse_error(replace_line(kValid, "interconnect",
                                   "interconnect: {topology: nvlink_switch, bandwidth_gb_per_s: 450, domain_gpus: 8, "
                                   "allreduce_latency_ms: 0.01}"))
              .find("'interconnect.allreduce_latency_ms': is no longer read") != std::string::npos);
}

TEST_CASE("A GPU resolves by the name its driver reports, as a calibrated profile records it", "[calibration][gpus]") {
    // What torch.cuda.get_device_name / nvidia-smi print on the device machines (KINDS.md: "NVIDIA H100 80GB HBM3",
    // "NVIDIA H200"), and the GH200 / B300 names of their files.
    CHECK(sc::find_gpu("NVIDIA H100 80GB HBM3").name == "H100-SXM");
    CHECK(sc::find_gpu("NVIDIA H200").name == "H200");
    CHECK(sc::find_gpu("NVIDIA GH200 480GB").name == "GH200");
    CHECK(sc::find_gpu("NVIDIA B300 SXM6 AC").name == "B300");
    CHECK(sc::find_gpu("NVIDIA GeForce RTX 4090").name == "RTX 4090");
    CHECK(sc::find_gpu("AMD Instinct MI300X").name == "MI300X");
    CHECK(sc::find_gpu("H100").answers_to("NVIDIA H100 80GB HBM3"));
    CHECK(sc::find_gpu("H100").answers_to("h100 sxm5"));
    CHECK_FALSE(sc::find_gpu("H100").answers_to("NVIDIA H100 PCIe"));
    // Every catalog GPU resolves by its own device_name.
    for (const auto& g : sc::gpu_catalog()) {
        INFO(g.device_name);
        CHECK(sc::find_gpu(g.device_name).name == g.name);
    }
    // An unknown name is refused with the list of what is allowed.
    const std::string msg = error_of("NVIDIA H300 80GB HBM5");
    CHECK(msg.find("unknown GPU 'NVIDIA H300 80GB HBM5'") != std::string::npos);
    CHECK(msg.find("known GPUs: A100-40GB, A100-80GB") != std::string::npos);
    CHECK(msg.find("the name its driver reports") != std::string::npos);
    // A name one edit from a catalog name or alias is suggested; the driver's long name above is 2 edits from
    // "NVIDIA H100 80GB HBM3" (an alias of H100-SXM), within its limit max(2, 21 / 4) = 5.
    CHECK(error_of("H10").find("unknown GPU 'H10'; did you mean 'H100'?") != std::string::npos);
    CHECK(msg.find("did you mean 'NVIDIA H100 80GB HBM3'?") != std::string::npos);
}

TEST_CASE("A user GPU file reads with defaults for the optional keys", "[calibration][gpus]") {
    const auto g = sc::parse_gpu_spec(kValid, "my_gpu.yaml");
    CHECK(g.name == "Test GPU");
    CHECK(g.memory_bytes == 84932978278);
    CHECK(g.bf16_dense_flops_per_s == 500e12);
    CHECK(g.interconnect_domain_gpus == 8);
    CHECK(g.gemm_efficiency == 0.72);
    CHECK_FALSE(g.usd_per_gpu_hour.has_value());
    CHECK_FALSE(g.is_a100);
    const auto tuned = sc::parse_gpu_spec(kValid +
                                              "roofline: {gemm_efficiency: 0.6, decode_attention_efficiency: 0.7}\n"
                                              "price_usd_per_gpu_hour: 2.5\n"
                                              "price_source: \"our contract\"\nprice_date: \"2026-11\"\n",
                                          "my_gpu.yaml");
    CHECK(tuned.gemm_efficiency == 0.6);
    CHECK(tuned.attention_efficiency == 0.55);
    CHECK(tuned.decode_attention_efficiency == 0.7);
    CHECK(tuned.usd_per_gpu_hour == 2.5);
    CHECK(tuned.price_source == "our contract");
    CHECK(tuned.price_date == "2026-11");
}

TEST_CASE("A user GPU file with a missing key is refused naming the file and the key", "[calibration][gpus]") {
    const auto msg = parse_error(replace_line(kValid, "bf16_dense_tflops", ""));
    CHECK(msg.find("my_gpu.yaml") != std::string::npos);
    CHECK(msg.find("'bf16_dense_tflops': missing required key") != std::string::npos);
    const auto nested = parse_error(replace_line(kValid, "host_link", "host_link: {kind: pcie, pcie_gen: 5}"));
    CHECK(nested.find("'host_link.bandwidth_gb_per_s': missing required key") != std::string::npos);
}

TEST_CASE("A user GPU file with an unknown key is refused naming the file and the key", "[calibration][gpus]") {
    const auto msg = parse_error(kValid + "fp16_dense_tflops: 500\n");
    CHECK(msg.find("my_gpu.yaml:13") != std::string::npos);  // the 13th line
    // One substitution from a known key, so the nearest is suggested (common/nearest_name.h).
    CHECK(msg.find("'fp16_dense_tflops': unknown key; did you mean 'bf16_dense_tflops'?; allowed: name, aliases") !=
          std::string::npos);
    const auto nested = parse_error(kValid + "roofline: {gemm_eff: 0.5}\n");
    CHECK(nested.find("'roofline.gemm_eff': unknown key") != std::string::npos);
}

TEST_CASE("A user GPU file with a bad value is refused naming the file and the key", "[calibration][gpus]") {
    CHECK(parse_error(replace_line(kValid, "memory_bandwidth_gb_per_s", "memory_bandwidth_gb_per_s: fast"))
              .find("my_gpu.yaml:7: 'memory_bandwidth_gb_per_s': expected a number, got 'fast'") != std::string::npos);
    CHECK(parse_error(replace_line(kValid, "vendor", "vendor: intel"))
              .find("'vendor': 'intel' is not a vendor; allowed: nvidia, amd") != std::string::npos);
    CHECK(parse_error(replace_line(kValid, "interconnect",
                                   "interconnect: {topology: infiniband, bandwidth_gb_per_s: 50}"))
              .find("'interconnect.topology': 'infiniband' is not a topology; allowed: pcie") != std::string::npos);
    CHECK(parse_error(replace_line(kValid, "interconnect", "interconnect: {topology: pcie, bandwidth_gb_per_s: 64, "
                                                           "domain_gpus: 8}"))
              .find("'interconnect.domain_gpus': not used with topology: pcie") != std::string::npos);
}

TEST_CASE("A user GPU file with a value out of range is refused naming the file and the key", "[calibration][gpus]") {
    CHECK(parse_error(replace_line(kValid, "bf16_dense_tflops", "bf16_dense_tflops: 0"))
              .find("'bf16_dense_tflops': value 0 is out of range; allowed: 0.1 to 100000") != std::string::npos);
    CHECK(parse_error(kValid + "roofline: {bandwidth_efficiency: 1.2}\n")
              .find("'roofline.bandwidth_efficiency': value 1.2 is out of range") != std::string::npos);
    CHECK(parse_error(kValid + "price_usd_per_gpu_hour: -1\n")
              .find("'price_usd_per_gpu_hour': value -1 is out of range") != std::string::npos);
    // A price is cited or absent (docs/GPUS.md "Prices").
    CHECK(parse_error(kValid + "price_usd_per_gpu_hour: 2\n")
              .find("'price_usd_per_gpu_hour': a price needs 'price_source' too") != std::string::npos);
    CHECK(parse_error(kValid + "price_usd_per_gpu_hour: 2\nprice_source: x\n")
              .find("a price needs 'price_date' too") != std::string::npos);
    CHECK(parse_error(kValid + "price_usd_per_gpu_hour: 2\nprice_source: x\nprice_date: late 2025\n")
              .find("'price_date': 'late 2025' is not a date; allowed: YYYY-MM or YYYY-MM-DD") != std::string::npos);
    CHECK(parse_error(kValid + "price_source: x\n").find("'price_source': only with price_usd_per_gpu_hour") !=
          std::string::npos);
    // 80 GB marketed but 80 GiB·1000 reported: a unit slip (80 GiB = 85,899,345,920 B is the most allowed).
    CHECK(parse_error(replace_line(kValid, "memory_reported_bytes", "memory_reported_bytes: 85899345921"))
              .find("'memory_reported_bytes': 85899345921 bytes (80.00 GiB) does not fit memory_marketed_gb 80") !=
          std::string::npos);
}

TEST_CASE("find_gpu reads a GPU file by path", "[calibration][gpus]") {
    const std::string name = "servesim_gpu_spec_test_" + std::to_string(::getpid()) + ".yaml";
    const std::string path = (std::filesystem::temp_directory_path() / name).string();
    {
        std::ofstream out(path);
        out << kValid;
    }
    CHECK(sc::find_gpu(path).name == "Test GPU");
    CHECK(sc::find_gpu(path).file == path);
    std::remove(path.c_str());
    CHECK(error_of("no_such_gpu.yaml").find("no_such_gpu.yaml: cannot open the GPU file") != std::string::npos);
}
