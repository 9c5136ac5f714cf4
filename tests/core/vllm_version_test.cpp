// Tests of sim/core/vllm_version.*: release numbers parse whole, compare by (major, minor, patch), print as the
// user wrote them, and releases outside the modelled range are refused naming the range.
#include "sim/core/vllm_version.h"

#include <string>

#include "common/error.h"
#include "tests/catch.h"

namespace servesim::core {
namespace {

std::string error_of(const std::string& text) {
    try {
        (void)parse_vllm_version(text);
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("no ConfigError for '" << text << "'");
    return "";
}

TEST_CASE("vLLM version: two or three numbers, compared field by field", "[core][vllm_version]") {
    const VllmVersion v = parse_vllm_version("0.25.1");
    CHECK(v == VllmVersion{0, 25, 1});
    CHECK(v.str() == "0.25.1");
    CHECK(parse_vllm_version("0.26").str() == "0.26");
    CHECK(parse_vllm_version("0.26.0") == VllmVersion{0, 26, 0});
    CHECK(v.at_least(0, 25, 1));
    CHECK_FALSE(v.at_least(0, 26));
    CHECK(VllmVersion{0, 25, 0} < v);
}

TEST_CASE("vLLM version: malformed text and unmodelled releases are refused naming the range",
          "[core][vllm_version]") {
    for (const char* bad : {"", "0", "0.", "0.26.", "v0.26", "0.26rc1", "0.26.0.1", "-0.26", "0.x"}) {
        INFO(bad);
        const std::string m = error_of(bad);
        CHECK(m.find("0.18 to 0.34") != std::string::npos);
    }
    CHECK(error_of("0.35").find("outside 0.18") == std::string::npos);  // the message names the range once
    CHECK(error_of("0.35").find("vLLM 0.35 is outside the releases whose rules servesim models (0.18 to 0.34)") !=
          std::string::npos);
    CHECK(error_of("1.0").find("outside") != std::string::npos);
    CHECK(error_of("0.17").find("outside") != std::string::npos);
    CHECK(parse_vllm_version("0.34.2") == VllmVersion{0, 34, 2});  // patch releases of the newest are modelled
    for (const char* added : {"0.31", "0.32", "0.33", "0.34"}) {  // issue 40: accepted once documented
        INFO(added);
        CHECK(parse_vllm_version(added).str() == added);
    }
}

TEST_CASE("vLLM version: the default is the newest modelled release", "[core][vllm_version]") {
    CHECK(kNewestModelled.str() == "0.34");
    CHECK(kNewestModelled.kv_size_from_concurrency());
    CHECK(kNewestModelled.default_gpu_memory_utilization() == 0.92);
    CHECK(parse_vllm_version("0.20").default_gpu_memory_utilization() == 0.90);
}

TEST_CASE("vLLM version: 0.31 to 0.34 switch no modelled rule (docs/VLLM-VERSIONS.md lists what was checked)",
          "[core][vllm_version]") {
    // Every predicate answers for 0.31 … 0.34 as it does for 0.30: no pull request found in those releases changes
    // a rule servesim models. A new switch for one of them must change this test and the doc's table together.
    const VllmVersion base{0, 30, 0};
    for (const VllmVersion v : {VllmVersion{0, 31, 0}, VllmVersion{0, 32, 0}, VllmVersion{0, 33, 0},
                                VllmVersion{0, 34, 0}, VllmVersion{0, 34, 5}}) {
        INFO(v.str());
        CHECK(v.kv_size_from_concurrency() == base.kv_size_from_concurrency());
        CHECK(v.default_gpu_memory_utilization() == base.default_gpu_memory_utilization());
        CHECK(v.swa_admission_cap() == base.swa_admission_cap());
        CHECK(v.marconi_shared_prefix_admission() == base.marconi_shared_prefix_admission());
        CHECK(v.shared_prefix_boundary_on_request() == base.shared_prefix_boundary_on_request());
        CHECK(v.hybrid_prefix_caching_on_by_default() == base.hybrid_prefix_caching_on_by_default());
        CHECK(v.mamba_align_default_for_all_hybrids() == base.mamba_align_default_for_all_hybrids());
        CHECK(v.sparse_retention_by_default() == base.sparse_retention_by_default());
        CHECK(v.mamba_honours_retention_interval() == base.mamba_honours_retention_interval());
        CHECK(v.has_prefix_match_unit() == base.has_prefix_match_unit());
        CHECK(v.offload_prompt_only_by_default() == base.offload_prompt_only_by_default());
        CHECK(v.offload_supports_mamba_align() == base.offload_supports_mamba_align());
        CHECK(v.kv_budget_subtracts_cudagraph_estimate() == base.kv_budget_subtracts_cudagraph_estimate());
        CHECK(v.batch_tokens_16k_on_160gib_gpus() == base.batch_tokens_16k_on_160gib_gpus());
    }
}

}  // namespace
}  // namespace servesim::core
