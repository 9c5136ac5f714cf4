// PartialResults: the partial-results file of a sweep or plan (docs/MPI.md "Faults and --resume"). The root appends
// each run's result as it finishes (result_codec.h bytes, keyed by the run config's fingerprint) and flushes it, so
// a run that fails, or a job that is killed, keeps every run finished before; `--resume FILE` reads them back and
// runs only the rest, and the output is byte-identical to an uninterrupted run. A record cut short by a crash at
// the end of the file is dropped (that run runs again).
//
// Layout: the line "servesim partial results v1\n", a u32 byte-order mark, then records
// [u64 fingerprint][u64 byte count][bytes].
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "tools/app/executor.h"
#include "tools/app/experiment.h"

namespace servesim::app {

class PartialResults {
public:
    // A new file at `path` (replacing one there). ConfigError naming `flag` when it cannot be written.
    static PartialResults create(const std::string& path, const std::string& flag);
    // The runs `path` holds, appending new ones after them. ConfigError naming `flag` when it cannot be read or is
    // not a partial-results file of this build's layout.
    static PartialResults resume(const std::string& path, const std::string& flag);

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
    std::size_t num_loaded_ = 0;
    std::size_t num_appended_ = 0;
};

// The partial-results file of a sweep or plan from its flags: --resume FILE (read, then appended to), else
// --checkpoint FILE (new), else a new servesim-partial-<pid>.bin in `default_dir`, which the caller removes once the
// run succeeded (`is_default`; nullopt when `default_dir` cannot be written: then nothing is kept).
[[nodiscard]] std::optional<PartialResults> open_partial_results(const std::string& checkpoint,
                                                                 const std::string& resume,
                                                                 const std::string& default_dir, bool& is_default);

// After a failure: "N finished runs are kept in FILE; repeat the command with --resume FILE to run only the rest".
[[nodiscard]] std::string kept_note(const PartialResults& partial);

// The partial-results file of one sweep or plan command: opened from its flags on the root (other ranks keep none),
// around the command's runs. run(log, body) calls body(file or nullptr); when body fails (not RunAbandoned: the
// root reports those) it writes "servesim: <kept_note>" to `log` and rethrows; when it succeeds a default file is
// removed.
class PartialResultsScope {
public:
    PartialResultsScope(bool root, const std::string& checkpoint, const std::string& resume,
                        const std::string& default_dir) {
        if (root) {
            file_ = open_partial_results(checkpoint, resume, default_dir, is_default_);
        }
    }

    template <typename Body>
    auto run(std::ostream& log, Body&& body) {
        try {
            auto result = body(file_ ? &*file_ : nullptr);
            remove_default();
            return result;
        } catch (const RunAbandoned&) {
            throw;
        } catch (...) {
            if (file_) {
                log << "servesim: " << kept_note(*file_) << "\n";
            }
            throw;
        }
    }

private:
    void remove_default();

    std::optional<PartialResults> file_;
    bool is_default_ = false;
};

}  // namespace servesim::app
