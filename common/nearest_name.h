// Did-you-mean (issue 39): the known name nearest a mistyped one, for the command line's flags
// (tools/app/flag_suggestions.h), scenario keys (YamlMap::allow_only, --set), GPU names and model presets. Header-only:
// the readers in common/, calibration/ and models/ use it without a library between them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

// Edit distance between two strings: insertions, deletions, substitutions and swaps of two adjacent characters, each 1
// (the optimal-string-alignment distance, so "modle" is 1 from "model", as a typist would count it). Three rows of the
// table at a time.
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        before.swap(previous);
        previous.swap(row);
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                row[j] = std::min(row[j], before[j - 2] + 1);
            }
        }
    }
    return row[b.size()];
}

// The known name nearest `typed` ("num_reques" → "num_requests"): the smallest edit distance, if it is at most
// max(2, a quarter of the typed name's length); ties go to the first in `known`; an exact match is not a
// suggestion. nullopt when none is that near.
template <class Names>
[[nodiscard]] std::optional<std::string> nearest_name(std::string_view typed, const Names& known) {
    const std::size_t limit = std::max<std::size_t>(2, typed.size() / 4);
    std::optional<std::string> best;
    std::size_t best_distance = limit + 1;
    for (const auto& k : known) {
        const std::string_view name(k);
        const std::size_t d = edit_distance(typed, name);
        if (d > 0 && d < best_distance) {
            best_distance = d;
            best = std::string(name);
        }
    }
    return best;
}

// "; did you mean 'x'?" for the nearest known name, or nothing.
template <class Names>
[[nodiscard]] std::string did_you_mean(std::string_view typed, const Names& known) {
    const std::optional<std::string> near = nearest_name(typed, known);
    return near ? "; did you mean '" + *near + "'?" : std::string();
}

}  // namespace servesim
