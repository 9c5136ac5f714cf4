// Interrupts; see interrupt.h.
#include "tools/app/interrupt.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>

namespace servesim::app {

namespace {

// The one process-wide variable of servesim, and unavoidable: a signal handler receives nothing but the signal
// number, so what it records must live where the handler and the executor threads can both reach it. A lock-free
// atomic (not a plain volatile sig_atomic_t) because worker threads read it while the handler writes it; a
// lock-free atomic's store is allowed in a signal handler.
std::atomic<std::sig_atomic_t> g_interrupt_signal{0};
static_assert(std::atomic<std::sig_atomic_t>::is_always_lock_free);

extern "C" void on_interrupt(int signal) {
    g_interrupt_signal.store(signal);

    // From now on either signal has its default action (ends the process at once). sigaction is async-signal-safe.
    struct sigaction dfl {};

    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGTERM, &dfl, nullptr);
    // write(2) is async-signal-safe; a person pressing Ctrl-C sees at once that it was heard.
    static constexpr char kNote[] =
        "\nservesim: stopping after the runs in flight (a second Ctrl-C or SIGTERM ends at once)\n";
    [[maybe_unused]] const auto n = write(STDERR_FILENO, kNote, sizeof kNote - 1);
}

}  // namespace

Interrupted::Interrupted(int signal, std::size_t not_started)
    : std::runtime_error(fmt::format("stopped by {}: the runs in flight finished, {} run{} not started",
                                     signal_name(signal),
                                     not_started,
                                     not_started == 1 ? " was" : "s were")),
      signal_(signal) {}

std::string signal_name(int signal) {
    switch (signal) {
        case SIGINT:
            return "SIGINT";
        case SIGTERM:
            return "SIGTERM";
        default:
            return fmt::format("signal {}", signal);
    }
}

InterruptGuard::InterruptGuard() {
    g_interrupt_signal.store(0);

    struct sigaction sa {};

    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    // SA_RESTART: system calls in flight (file writes, joins) resume rather than fail with EINTR. The handler itself
    // restores the default action of both signals, so a second one ends the process.
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_interrupt_signal.store(0);  // a later batch of this process (a test's) runs as if none came
}

int pending_interrupt() {
    return g_interrupt_signal.load();
}

}  // namespace servesim::app
