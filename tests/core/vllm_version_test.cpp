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
        CHECK(m.find("0.18 to 0.30") != std::string::npos);
    }
    CHECK(error_of("0.31").find("outside") != std::string::npos);
    CHECK(error_of("1.0").find("outside") != std::string::npos);
    CHECK(error_of("0.17").find("outside") != std::string::npos);
    CHECK(parse_vllm_version("0.30.2") == VllmVersion{0, 30, 2});  // patch releases of the newest are modelled
}

TEST_CASE("vLLM version: the default is the newest modelled release", "[core][vllm_version]") {
    CHECK(kNewestModelled.str() == "0.30");
    CHECK(kNewestModelled.kv_size_from_concurrency());
    CHECK(kNewestModelled.default_gpu_memory_utilization() == 0.92);
    CHECK(parse_vllm_version("0.20").default_gpu_memory_utilization() == 0.90);
}

}  // namespace
}  // namespace servesim::core
