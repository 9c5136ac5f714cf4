// Times a C++ rendering of vLLM's ngram lookup (NgramProposer: the longest suffix n-gram (min..max) that occurred
// earlier, found with a KMP prefix function over the reversed context, then the k tokens after it).
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>
int propose(const std::vector<int32_t>& tokens, int min_n, int max_n, int k, std::vector<int32_t>& out, std::vector<int32_t>& lps) {
    const int n = (int)tokens.size();
    // reversed view: r[i] = tokens[n-1-i]
    lps.assign(max_n, 0);
    int longest = 0, pos = -1, prev = 0;
    int i = 1;
    while (i < n) {
        if (tokens[n - 1 - prev] == tokens[n - 1 - i]) {
            ++prev;
            if (prev >= longest) { longest = prev; pos = i; }
            if (i < max_n) lps[i] = prev;
            if (prev == max_n) prev = lps[max_n - 1];
            ++i;
        } else if (prev != 0) {
            prev = lps[prev - 1];
        } else {
            ++i;
        }
    }
    out.clear();
    if (longest < min_n) return 0;
    const int start = n - 1 - pos + longest;
    for (int j = 0; j < k && start + j < n; ++j) out.push_back(tokens[start + j]);
    return (int)out.size();
}
int main() {
    std::mt19937 rng(1);
    for (int len : {512, 2048, 8192}) {
        std::vector<int32_t> t(len);
        for (auto& x : t) x = rng() % 32000;
        std::vector<int32_t> out, lps;
        long sink = 0;
        const int reps = 20000;
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) { t[len - 1] = r % 32000; sink += propose(t, 5, 5, 3, out, lps); }
        auto t1 = std::chrono::steady_clock::now();
        double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
        std::printf("context %d: %.3f us per lookup (sink %ld)\n", len, us, sink);
    }
}
