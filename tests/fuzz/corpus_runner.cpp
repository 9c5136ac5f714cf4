// servesim-fuzz-corpus: the bounded fuzz run of CI (docs/FUZZING.md). Runs every fuzz target over its corpus
// folder (tests/fuzz/corpus/<target>/, seeds kept in git: valid inputs and every crasher found so far) and over a
// fixed number of deterministic mutations of each seed, on the normal build (seconds), and under the sanitizer
// build in CI. A case fails when anything but a ConfigError escapes the reader, or when it runs longer than the
// per-case limit (unbounded work); the failing input is written next to the report so it can become a seed.
//
//   servesim-fuzz-corpus [--mutations N] [--target NAME] [--failures DIR] CORPUS_DIR
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace fs = std::filesystem;

namespace {

// splitmix64: a fixed, platform-independent stream for the mutations.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

std::uint64_t fnv1a(const std::string& s) {
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : s) {
        h = (h ^ c) * 1099511628211ULL;
    }
    return h;
}

// Tokens that broke readers before or sit on the edges of every range: huge, negative, non-finite, empty.
const std::vector<std::string> kDictionary = {
    "-1e5", "-1e30", "1e300", "1e4004", "-0", "0", "-1", "2147483647", "2147483648", "9223372036854775807",
    "9223372036854775808", "18446744073709551616", "nan", "inf", "-inf", ".inf", "1e-300", "0.5", "\"\"", "null",
    "[]", "{}", "true", "1e10", "9.3e9", "1678-01-01 00:00:00.0", "2262-04-12 00:00:00.0", "9999-12-31 23:59:59.9",
    "\n", ",", ":", "{", "[", "\"", "#", "- ", "'", "\t", "100000", "1e18", "1GiB", "1e300h"};

std::string mutate(const std::string& seed, Rng& rng) {
    std::string s = seed;
    const int steps = 1 + static_cast<int>(rng.below(4));
    for (int k = 0; k < steps; ++k) {
        const std::size_t pos = rng.below(s.size() + 1);
        switch (rng.below(6)) {
            case 0:  // flip a byte
                if (!s.empty()) {
                    s[rng.below(s.size())] ^= static_cast<char>(1u << rng.below(8));
                }
                break;
            case 1:  // insert a dictionary token
                s.insert(pos, kDictionary[rng.below(kDictionary.size())]);
                break;
            case 2: {  // delete a range
                const std::size_t len = rng.below(16) + 1;
                if (pos < s.size()) {
                    s.erase(pos, len);
                }
                break;
            }
            case 3: {  // duplicate a range
                if (!s.empty()) {
                    const std::size_t from = rng.below(s.size());
                    const std::size_t len = std::min<std::size_t>(rng.below(64) + 1, s.size() - from);
                    s.insert(pos, s.substr(from, len));
                }
                break;
            }
            case 4: {  // replace the number under a random position with a dictionary token
                std::size_t b = pos;
                while (b > 0 && (std::isdigit(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '.')) {
                    --b;
                }
                std::size_t e = pos;
                while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '.')) {
                    ++e;
                }
                s.replace(b, e - b, kDictionary[rng.below(kDictionary.size())]);
                break;
            }
            default:  // insert a random byte
                s.insert(pos, 1, static_cast<char>(rng.below(256)));
                break;
        }
    }
    return s;
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
    int mutations = 200;
    std::string only;
    fs::path corpus;
    fs::path failures = fs::temp_directory_path() / "servesim-fuzz-failures";
    const double limit_s = 5.0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mutations" && i + 1 < argc) {
            mutations = std::stoi(argv[++i]);
        } else if (a == "--target" && i + 1 < argc) {
            only = argv[++i];
        } else if (a == "--failures" && i + 1 < argc) {
            failures = argv[++i];
        } else if (corpus.empty() && !a.empty() && a[0] != '-') {
            corpus = a;
        } else {
            std::cerr << "usage: servesim-fuzz-corpus [--mutations N] [--target NAME] [--failures DIR] CORPUS_DIR\n";
            return 2;
        }
    }
    if (corpus.empty() || !fs::is_directory(corpus)) {
        std::cerr << "servesim-fuzz-corpus: corpus folder '" << corpus.string() << "' not found\n";
        return 2;
    }
    long passed = 0;
    long failed = 0;
    for (const auto& target : servesim::fuzz::fuzz_targets()) {
        if (!only.empty() && target.name != only) {
            continue;
        }
        const fs::path dir = corpus / std::string(target.name);
        std::vector<fs::path> seeds;
        if (fs::is_directory(dir)) {
            for (const auto& e : fs::directory_iterator(dir)) {
                if (e.is_regular_file()) {
                    seeds.push_back(e.path());
                }
            }
        }
        std::sort(seeds.begin(), seeds.end());
        long target_cases = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (const auto& seed_path : seeds) {
            const std::string seed = read_file(seed_path);
            Rng rng{fnv1a(std::string(target.name) + "/" + seed_path.filename().string())};
            for (int m = 0; m <= mutations; ++m) {
                const std::string input = m == 0 ? seed : mutate(seed, rng);
                const std::string label =
                    std::string(target.name) + "/" + seed_path.filename().string() + "#" + std::to_string(m);
                std::string problem;
                const auto start = std::chrono::steady_clock::now();
                try {
                    target.run(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
                } catch (const std::exception& e) {
                    problem = std::string("exception escaped: ") + e.what();
                } catch (...) {
                    problem = "a non-standard exception escaped";
                }
                const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                if (problem.empty() && took > limit_s) {
                    problem = "took " + std::to_string(took) + " s (limit " + std::to_string(limit_s) + " s)";
                }
                ++target_cases;
                if (problem.empty()) {
                    ++passed;
                    continue;
                }
                ++failed;
                fs::create_directories(failures);
                const fs::path out = failures / (std::string(target.name) + "-" + seed_path.filename().string() +
                                                 "-" + std::to_string(m));
                std::ofstream(out, std::ios::binary) << input;
                std::cerr << "FAIL " << label << ": " << problem << " (input: " << out.string() << ")\n";
            }
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::cout << "fuzz " << target.name << ": " << seeds.size() << " seeds, " << target_cases << " cases in "
                  << took << " s\n";
    }
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed == 0 ? 0 : 1;
}
