// common/nearest_name.h: the edit distance, and the nearest known name suggested only within max(2, length / 4)
// edits (an exact match is no suggestion).
#include "common/nearest_name.h"

#include <string>
#include <vector>

#include "tests/catch.h"

using servesim::did_you_mean;
using servesim::edit_distance;
using servesim::nearest_name;

TEST_CASE("edit distance counts insertions, deletions, substitutions and adjacent swaps", "[common]") {
    CHECK(edit_distance("", "") == 0);
    CHECK(edit_distance("--gpu", "--gpu") == 0);
    CHECK(edit_distance("--max-num-seq", "--max-num-seqs") == 1);  // one insertion
    CHECK(edit_distance("--fromat", "--format") == 1);             // r and o swapped
    CHECK(edit_distance("modle", "model") == 1);                   // l and e swapped
    CHECK(edit_distance("modle", "mode") == 1);                    // one deletion
    CHECK(edit_distance("kitten", "sitting") == 3);                // the textbook case: k→s, e→i, +g
    CHECK(edit_distance("ab", "") == 2);
}

TEST_CASE("the nearest name is suggested within max(2, length / 4) edits, never the name itself", "[common]") {
    const std::vector<std::string> keys = {"rate", "num_requests", "request_timeout", "tenants"};
    // "num_reques" (10 characters) is 2 deletions from num_requests: within max(2, 10 / 4) = 2.
    CHECK(nearest_name("num_reques", keys) == std::optional<std::string>("num_requests"));
    CHECK(did_you_mean("num_reques", keys) == "; did you mean 'num_requests'?");
    // "tenant" is 1 from tenants and 4 from rate: the nearest wins.
    CHECK(nearest_name("tenant", keys) == std::optional<std::string>("tenants"));
    // "burst" is 3 or more edits from every key, above the limit 2.
    CHECK_FALSE(nearest_name("burst", keys).has_value());
    CHECK(did_you_mean("burst", keys).empty());
    CHECK_FALSE(nearest_name("rate", keys).has_value());  // exact: nothing to suggest
    // A tie goes to the first known name: "modle" is 1 from both model and mode.
    CHECK(nearest_name("modle", std::vector<std::string>{"model", "mode"}) == std::optional<std::string>("model"));
}
