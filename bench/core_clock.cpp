// servesim_core_clock: the clock the current core really runs at, so that a benchmark's CPU seconds can be read as
// cycles (CPU s × GHz) and compared across machines. The lent machines differ from one session to the next (on
// 2026-12-03 a 2.9 GHz core ran the agentic benchmark's binary of the day before ~1.6× slower than it had run then); a
// speed figure in seconds alone cannot tell a faster simulator from a faster core (bench/README.md, "Reading a time").
//
// Method: a chain of dependent register-to-register adds, one cycle each (an add's latency on x86-64 and AArch64
// cores), timed by the thread's CPU clock. The empty asm statements with x as an in/out operand keep the compiler
// from folding the adds; the added value is a register, not an immediate, because newer x86 cores fold chains of
// add-immediate at rename (such a chain read 10 GHz on the 2.9 GHz core). The loop's own counter and branch run beside
// the chain (a one-add loop is bound by its taken branch instead: it read 2.3 GHz there). An imul chain (3 cycles
// each) gave the same 2.9 GHz. Best of several trials: interference can only slow a trial down.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace {

constexpr std::int64_t kAddsPerIteration = 8;
constexpr std::int64_t kIterations = 100'000'000;  // 8·10⁸ cycles: ~0.3 s at 2.9 GHz
constexpr int kTrials = 5;

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// One trial: seconds of CPU for kIterations × kAddsPerIteration dependent adds.
double time_add_chain(std::uint64_t& sink) {
    std::uint64_t x = sink;
    std::uint64_t step = sink | 1;  // a register operand: some cores fold chains of add-immediate at rename
    asm volatile("" : "+r"(step));
    const double start = thread_cpu_seconds();
    for (std::int64_t i = 0; i < kIterations; ++i) {
        // kAddsPerIteration adds, each reading the one before (x is an in/out operand of each barrier), unrolled
        // so that no inner branch paces the chain.
#pragma GCC unroll 8
        for (std::int64_t k = 0; k < kAddsPerIteration; ++k) {
            asm volatile("" : "+r"(x));
            x += step;
        }
    }
    const double seconds = thread_cpu_seconds() - start;
    sink = x;
    return seconds;
}

}  // namespace

int main() {
    std::uint64_t sink = 1;
    double best = time_add_chain(sink);  // the first trial also warms the core up
    for (int t = 1; t < kTrials; ++t) {
        best = std::min(best, time_add_chain(sink));
    }
    const double cycles = static_cast<double>(kIterations * kAddsPerIteration);
    if (best <= 0.0 || sink == 0) {
        std::fprintf(stderr, "servesim_core_clock: the CPU clock of this thread did not advance\n");
        return 1;
    }
    std::printf("core clock: %.2f GHz (%.0f dependent adds in %.3f s of CPU, best of %d)\n", cycles / best / 1e9,
                cycles, best, kTrials);
    return 0;
}
