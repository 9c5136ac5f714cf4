// Helpers shared by the models tests: the message of the ConfigError an expression throws, relative closeness,
// fixture paths and a layer's attention mixer. Only what Catch2 2.13 and 3.x share is used.
#pragma once

#include <cmath>
#include <string>

#include "common/error.h"
#include "models/model_spec.h"
#include "tests/config_error.h"

namespace servesim::models::test {

using servesim::testing::config_error_of;  // tests/config_error.h

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

inline bool within_rel(double value, double expected, double rel) {
    return std::fabs(value - expected) <= rel * std::fabs(expected);
}

inline std::string fixture(const std::string& name) {
    return std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/" + name;
}

// The attention mixer of layer `layer` (std::bad_variant_access if it has none, failing the test).
inline const AttentionMixer& attention_of(const ModelSpec& spec, int layer) {
    return std::get<AttentionMixer>(spec.layers.at(static_cast<std::size_t>(layer)).mixer);
}

}  // namespace servesim::models::test
