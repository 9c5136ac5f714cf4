// Parsing and printing vLLM release numbers; see vllm_version.h.
#include "sim/core/vllm_version.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "common/error.h"

namespace servesim::core {

std::string VllmVersion::str() const {
    return patch == 0 ? fmt::format("{}.{}", major, minor) : fmt::format("{}.{}.{}", major, minor, patch);
}

VllmVersion parse_vllm_version(const std::string& text) {
    // Whole-string parse of 2 or 3 dot-separated non-negative integers.
    std::vector<int> parts;
    const char* p = text.data();
    const char* end = text.data() + text.size();
    while (p < end && parts.size() < 4) {
        int value = 0;
        if (*p < '0' || *p > '9') {  // from_chars would take a sign
            parts.clear();
            break;
        }
        const auto [next, ec] = std::from_chars(p, end, value);
        if (ec != std::errc() || next == p || value < 0 || value > 999) {
            parts.clear();
            break;
        }
        parts.push_back(value);
        p = next;
        if (p < end) {
            if (*p != '.') {
                parts.clear();
                break;
            }
            ++p;
            if (p == end) {
                parts.clear();
            }
        }
    }
    const std::string range = fmt::format("{} to {}", kOldestModelled.str(), kNewestModelled.str());
    if (parts.size() < 2 || parts.size() > 3) {
        throw ConfigError(fmt::format("expected a vLLM release like 0.26 or 0.25.1 (servesim models {}), got '{}'",
                                      range, text));
    }
    const VllmVersion v{parts[0], parts[1], parts.size() == 3 ? parts[2] : 0};
    if (v < kOldestModelled || v > VllmVersion{kNewestModelled.major, kNewestModelled.minor, 999}) {
        throw ConfigError(fmt::format("vLLM {} is outside the releases whose rules servesim models ({})", v.str(),
                                      range));
    }
    return v;
}

}  // namespace servesim::core
