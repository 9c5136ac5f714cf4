// Helpers shared by the models tests: the message of the ConfigError an expression throws, relative closeness,
// and fixture paths. Only what Catch2 2.13 and 3.x share is used.
#pragma once

#include <cmath>
#include <string>

#include "common/error.h"

namespace servesim::models::test {

// Runs f; returns the ConfigError's message, or "<no ConfigError>" when none is thrown.
template <typename F>
std::string config_error_of(F&& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

inline bool within_rel(double value, double expected, double rel) {
    return std::fabs(value - expected) <= rel * std::fabs(expected);
}

inline std::string fixture(const std::string& name) {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name;
}

}  // namespace servesim::models::test
