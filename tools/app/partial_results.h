// PartialResults: the partial-results file of a sweep or plan (docs/MPI.md "Faults and --resume"). The root appends
// each run's result as it finishes (result_codec.h bytes, keyed by the run config's fingerprint) and flushes it, so
// a run that fails, a job that is killed or one stopped by SIGINT/SIGTERM (interrupt.h) keeps every run finished
// before; `--resume FILE` reads them back and runs only the rest, and the output is byte-identical to an
// uninterrupted run. A record cut short at the end of the file (a crash while writing it) is dropped (that run runs
// again); anything else that does not check out — a damaged byte anywhere, a file of another format or result-codec
// version, a file written for another scenario — is refused with a ConfigError naming the file, what is wrong and
// what to do, before any run starts: a resumed command never prints figures other than a fresh one's.
//
// Layout (format v2; docs/MPI.md "The partial-results file"): a header — the line "servesim partial results v2\n",
// u32 byte-order mark, u32 result-codec version, u64 scenario fingerprint, u32 CRC-32 of those header bytes — then
// records [u64 config fingerprint][u64 byte count][u32 CRC-32 of those 16 bytes][bytes][u32 CRC-32 of the bytes].
// The record's own header CRC tells a damaged byte count (refused) from a record cut short (dropped). CRC-32 is the
// IEEE 802.3 polynomial of zlib and gzip, computed with Boost.CRC (header-only: nothing more to link).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/app/executor.h"
#include "tools/app/experiment.h"
#include "tools/app/interrupt.h"

namespace servesim::app {

struct PlanRequest;  // tools/app/plan.h

class PartialResults {
  public:
    // A new file at `path` (replacing one there) for the scenario of `scenario_fingerprint`. ConfigError naming
    // `flag` when it cannot be written.
    static PartialResults create(const std::string& path, const std::string& flag, std::uint64_t scenario_fingerprint);
    // As create, but the file is only written at the first append (so a command that finishes no run leaves none);
    // whether `path` can be written is checked now.
    static PartialResults create_on_first_append(const std::string& path,
                                                 const std::string& flag,
                                                 std::uint64_t scenario_fingerprint);
    // The runs `path` holds, appending new ones after them. ConfigError naming `flag` and the file when it cannot be
    // read, is not a partial-results file of this build's format and codec, was written for another scenario
    // (another `scenario_fingerprint`) or is damaged.
    static PartialResults resume(const std::string& path, const std::string& flag, std::uint64_t scenario_fingerprint);

    // The stored result of the run `config` (its config and plan left to the caller), or false.
    [[nodiscard]] bool find(const ExperimentConfig& config, ExperimentResult& out) const;
    void append(const ExperimentConfig& config, const ExperimentResult& result);

    [[nodiscard]] const std::string& path() const { return path_; }

    [[nodiscard]] std::size_t num_loaded() const { return num_loaded_; }

    [[nodiscard]] std::size_t num_appended() const { return num_appended_; }

  private:
    PartialResults(std::string path, std::string flag) : path_(std::move(path)), flag_(std::move(flag)) {}

    std::string path_;
    std::string flag_;
    std::map<std::uint64_t, std::string> stored_;  // fingerprint → encoded result
    std::ofstream out_;
    std::string unwritten_header_;  // create_on_first_append: the header the first append writes first
    std::size_t num_loaded_ = 0;
    std::size_t num_appended_ = 0;
};

// The scenario fingerprint of a run or sweep: of every experiment's whole config (config_fingerprint), in order —
// any change of scenario key, --set, --seed or of whether request records are kept (--out, --format) changes it.
[[nodiscard]] std::uint64_t scenario_fingerprint(const std::vector<ExperimentConfig>& experiments);
// A plan's: the scenario text, --set, --seed, --replicates, --grid and the load key — what its probe runs are made
// of. The SLOs, targets and prices only choose which probes run, so a plan resumed with other ones is not refused.
[[nodiscard]] std::uint64_t scenario_fingerprint(const PlanRequest& plan);

// The partial-results file of a sweep or plan from its flags: --resume FILE (read, then appended to), else
// --checkpoint FILE (new), else a servesim-partial-<pid>.bin in `default_dir`, written at the first finished run,
// which the caller removes once the command succeeded (`is_default`; nullopt when `default_dir` cannot be written:
// then nothing is kept).
[[nodiscard]] std::optional<PartialResults> open_partial_results(const std::string& checkpoint,
                                                                 const std::string& resume,
                                                                 const std::string& default_dir,
                                                                 std::uint64_t scenario_fingerprint,
                                                                 bool& is_default);

// The command line that resumes from `file`: `program` and `words` (the command and its arguments, as typed) with
// any --checkpoint or --resume dropped and "--resume FILE" added, each word quoted for a POSIX shell where needed.
[[nodiscard]] std::string resume_command(const std::string& program,
                                         const std::vector<std::string>& words,
                                         const std::string& file);

// After a failure: "N finished runs are kept in FILE; repeat the command with --resume FILE to run only the rest:"
// and, on the next line, the command (resume_command).
[[nodiscard]] std::string kept_note(const PartialResults& partial, const std::string& command);

// The partial-results file of one sweep or plan command: opened from its flags on the root (other ranks keep none),
// around the command's runs. run(log, body) calls body(file or nullptr); in one process (not under MPI, whose
// launcher handles signals) it does so under an InterruptGuard. When body fails or is interrupted (not
// RunAbandoned: the root reports those) it writes what happened to `log` — the file and the --resume command when a
// run finished, else it removes a default file — and rethrows; when it succeeds a default file is removed.
class PartialResultsScope {
  public:
    // `keep`: whether this command keeps a file at all; `words`: the command and its arguments (for the --resume
    // command printed); the program's name is the one it was started by.
    PartialResultsScope(const Executor& executor,
                        bool keep,
                        const std::string& checkpoint,
                        const std::string& resume,
                        const std::string& default_dir,
                        std::uint64_t scenario_fingerprint,
                        std::vector<std::string> words);

    template <typename Body>
    auto run(std::ostream& log, Body&& body) {
        std::optional<InterruptGuard> guard;
        if (file_ && handle_signals_) {
            guard.emplace();
        }
        try {
            auto result = body(file_ ? &*file_ : nullptr);
            remove_default();
            return result;
        } catch (const RunAbandoned&) {
            throw;
        } catch (const Interrupted& e) {
            log << "servesim: " << e.what() << "\n";
            report_kept(log, true);
            throw;
        } catch (...) {
            report_kept(log, false);
            throw;
        }
    }

  private:
    void remove_default();
    // The file and the --resume command when it holds a run; else a default file is removed (and, when
    // `interrupted`, the user told that nothing was kept).
    void report_kept(std::ostream& log, bool interrupted);

    std::optional<PartialResults> file_;
    bool is_default_ = false;
    bool handle_signals_ = false;
    std::vector<std::string> words_;
};

}  // namespace servesim::app
