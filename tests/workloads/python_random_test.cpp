// Tests of workloads/python_random.h: the same seed gives the same draws, shuffles and choices as CPython's `random`
// module (the expected values were printed by CPython 3.11's random, e.g.
// `python3 -c "import random; random.seed(0); x=list(range(10)); random.shuffle(x); print(x)"`).
#include "workloads/python_random.h"

#include "tests/catch.h"

using servesim::workloads::PythonRandom;

TEST_CASE("PythonRandom getrandbits(32) matches CPython after random.seed(42)", "[workloads][python_random]") {
    PythonRandom r(42);
    CHECK(r.getrandbits(32) == 2746317213U);
    CHECK(r.getrandbits(32) == 478163327U);
    CHECK(r.getrandbits(32) == 107420369U);
}

TEST_CASE("PythonRandom shuffle matches CPython's random.shuffle", "[workloads][python_random]") {
    std::vector<int> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    PythonRandom(0).shuffle(x);
    CHECK(x == std::vector<int>{7, 8, 1, 5, 3, 4, 2, 0, 9, 6});
    // A seed above 2^32 keys init_by_array with two words.
    std::vector<int> y = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    PythonRandom((std::uint64_t{1} << 40) + 7).shuffle(y);
    CHECK(y == std::vector<int>{0, 5, 2, 3, 6, 1, 8, 4, 7, 11, 10, 9});
}

TEST_CASE("PythonRandom choice_index matches CPython's random.choice", "[workloads][python_random]") {
    // random.seed(5); [random.choice(range(3)) for _ in range(8)] == [2, 1, 2, 1, 2, 2, 2, 2]
    PythonRandom r(5);
    std::vector<std::size_t> picks;
    for (int i = 0; i < 8; ++i) {
        picks.push_back(r.choice_index(3));
    }
    CHECK(picks == std::vector<std::size_t>{2, 1, 2, 1, 2, 2, 2, 2});
}
