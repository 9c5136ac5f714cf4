// Tests calibration/gpu_spec.*: the datasheet table and lookup by the names people type.
#include "calibration/gpu_spec.h"

#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace sc = servesim::calibration;

namespace {

std::string error_of(const char* name) {
    try {
        (void)sc::find_gpu(name);
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

TEST_CASE("An unknown GPU is an error listing the known names", "[calibration]") {
    const auto msg = error_of("TPU v5");
    CHECK(msg.find("TPU v5") != std::string::npos);
    for (const auto& g : sc::gpu_catalog()) {
        CHECK(msg.find(g.name) != std::string::npos);
    }
    CHECK(error_of("").find("unknown GPU") != std::string::npos);
}

TEST_CASE("Memory is what cudaMemGetInfo reports, below the marketed size", "[calibration]") {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
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
