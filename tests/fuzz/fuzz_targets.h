// Fuzz targets: one entry per reader of user input (tools/fuzz.sh, docs/FUZZING.md). Each takes raw bytes, feeds
// them to the reader as a user would give them (a scenario, a config.json, a trace, a profile, a measurements
// file), and swallows the one exception bad input may raise: ConfigError. Anything else — a crash, a sanitizer
// report, an InvariantError, any other exception escaping — is a defect the target exists to find.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::fuzz {

struct FuzzTarget {
    std::string_view name;  // also the corpus folder: tests/fuzz/corpus/<name>/
    void (*run)(const std::uint8_t* data, std::size_t size);
};

[[nodiscard]] const std::vector<FuzzTarget>& fuzz_targets();

// yaml_grammar's document for an input (exposed so a seed's document can be printed: tests/fuzz/corpus/README.md).
[[nodiscard]] std::string scenario_from_grammar(const std::uint8_t* data, std::size_t size);

}  // namespace servesim::fuzz
