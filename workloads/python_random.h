// CPython's `random` module, draw for draw: the Mersenne Twister (MT19937) seeded from an integer the way
// random.seed(int) does (init_by_array over the integer's 32-bit words), getrandbits, and the shuffle and choice built
// on _randbelow. vLLM's benchmark clients order their datasets with random.seed(seed) + random.shuffle
// (vllm/benchmarks/datasets.py: ShareGPTDataset.load_data, CustomDataset.load_data,
// PrefixRepetitionRandomDataset.sample) and pick conversations with random.choice
// (benchmarks/multi_turn/benchmark_serving_multi_turn.py: client_main), so with this class the same seed gives the
// same order as the tool. The algorithms are the published MT19937 (Matsumoto & Nishimura 2002, init_by_array) and
// Python's documented shuffle (Fisher–Yates from the end, j = _randbelow(i + 1)).
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/error.h"

namespace servesim::workloads {

class PythonRandom {
  public:
    // random.seed(seed) for a non-negative integer seed.
    explicit PythonRandom(std::uint64_t seed) {
        std::vector<std::uint32_t> key;
        for (std::uint64_t s = seed; s != 0; s >>= 32) {
            key.push_back(static_cast<std::uint32_t>(s & 0xffffffffULL));
        }
        if (key.empty()) {
            key.push_back(0);  // random.seed(0) keys with one zero word
        }
        init_by_array(key);
    }

    // random.getrandbits(k) for 0 <= k <= 32.
    [[nodiscard]] std::uint32_t getrandbits(int k) {
        SERVESIM_CHECK(k >= 0 && k <= 32, "getrandbits supports 0..32 bits here, got {}", k);
        if (k == 0) {
            return 0;
        }
        return next_u32() >> (32 - k);
    }

    // random._randbelow(n): uniform in [0, n), by rejection on bit_length(n) bits. n >= 1, below 2^32.
    [[nodiscard]] std::uint64_t randbelow(std::uint64_t n) {
        SERVESIM_CHECK(n >= 1 && n <= 0xffffffffULL, "randbelow needs 1 <= n < 2^32, got {}", n);
        int k = 0;
        for (std::uint64_t v = n; v != 0; v >>= 1) {
            ++k;
        }
        std::uint64_t r = getrandbits(k);
        while (r >= n) {
            r = getrandbits(k);
        }
        return r;
    }

    // random.shuffle(x).
    template <typename T>
    void shuffle(std::vector<T>& x) {
        for (std::size_t i = x.size(); i-- > 1;) {
            const auto j = static_cast<std::size_t>(randbelow(i + 1));
            std::swap(x[i], x[j]);
        }
    }

    // The index random.choice(seq) picks from a sequence of `size` elements.
    [[nodiscard]] std::size_t choice_index(std::size_t size) { return static_cast<std::size_t>(randbelow(size)); }

  private:
    static constexpr int kN = 624;
    static constexpr int kM = 397;

    void init_genrand(std::uint32_t s) {
        mt_[0] = s;
        for (int i = 1; i < kN; ++i) {
            mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
        }
        index_ = kN;
    }

    void init_by_array(const std::vector<std::uint32_t>& key) {
        init_genrand(19650218U);
        int i = 1;
        std::size_t j = 0;
        for (std::size_t k = std::max<std::size_t>(kN, key.size()); k > 0; --k) {
            mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<std::uint32_t>(j);
            ++i;
            ++j;
            if (i >= kN) {
                mt_[0] = mt_[kN - 1];
                i = 1;
            }
            if (j >= key.size()) {
                j = 0;
            }
        }
        for (int k = kN - 1; k > 0; --k) {
            mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<std::uint32_t>(i);
            ++i;
            if (i >= kN) {
                mt_[0] = mt_[kN - 1];
                i = 1;
            }
        }
        mt_[0] = 0x80000000U;
        index_ = kN;
    }

    std::uint32_t next_u32() {
        if (index_ >= kN) {
            for (int i = 0; i < kN; ++i) {
                const std::uint32_t y = (mt_[i] & 0x80000000U) | (mt_[(i + 1) % kN] & 0x7fffffffU);
                mt_[i] = mt_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1U) != 0 ? 0x9908b0dfU : 0U);
            }
            index_ = 0;
        }
        std::uint32_t y = mt_[index_++];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680U;
        y ^= (y << 15) & 0xefc60000U;
        y ^= y >> 18;
        return y;
    }

    std::array<std::uint32_t, kN> mt_{};
    int index_ = kN;
};

}  // namespace servesim::workloads
