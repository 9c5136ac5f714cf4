// The partial-results file; see partial_results.h.
#include "tools/app/partial_results.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "tools/app/plan.h"
#include "tools/app/result_codec.h"

namespace servesim::app {

namespace {

constexpr std::string_view kMagic = "servesim partial results v2\n";
constexpr std::string_view kMagicAnyVersion = "servesim partial results v";
constexpr std::uint32_t kByteOrderMark = 0x01020304;
constexpr std::size_t kHeaderBytes = kMagic.size() + 4 + 4 + 8;  // before the header's CRC
constexpr std::size_t kRecordHeaderBytes = 8 + 8;                // before the record header's CRC
constexpr std::size_t kCrcBytes = 4;

std::uint32_t crc32(std::string_view bytes) {
    boost::crc_32_type crc;  // CRC-32/IEEE 802.3, as zlib's crc32 and gzip
    crc.process_bytes(bytes.data(), bytes.size());
    return crc.checksum();
}

template <typename T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(std::string_view in, std::size_t pos) {
    T v{};
    std::memcpy(&v, in.data() + pos, sizeof v);
    return v;
}

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
    for (const char ch : bytes) {
        h ^= static_cast<unsigned char>(ch);
        h *= 1099511628211ULL;
    }
    return h;
}

constexpr std::uint64_t kFnvOffset = 1469598103934665603ULL;

std::string header(std::uint64_t scenario_fingerprint) {
    std::string h(kMagic);
    put(h, kByteOrderMark);
    put(h, result_codec_version());
    put(h, scenario_fingerprint);
    put(h, crc32(h));
    return h;
}

}  // namespace

PartialResults PartialResults::create(const std::string& path,
                                      const std::string& flag,
                                      std::uint64_t scenario_fingerprint) {
    PartialResults p(path, flag);
    const std::string h = header(scenario_fingerprint);
    p.out_.open(path, std::ios::binary | std::ios::trunc);
    p.out_.write(h.data(), static_cast<std::streamsize>(h.size()));
    p.out_.flush();
    if (!p.out_) {
        throw ConfigError(fmt::format("{}: cannot write the partial-results file '{}'", flag, path));
    }
    return p;
}

PartialResults PartialResults::create_on_first_append(const std::string& path,
                                                      const std::string& flag,
                                                      std::uint64_t scenario_fingerprint) {
    PartialResults p = create(path, flag, scenario_fingerprint);
    p.out_.close();
    std::error_code ec;
    std::filesystem::remove(path, ec);
    p.unwritten_header_ = header(scenario_fingerprint);
    return p;
}

PartialResults PartialResults::resume(const std::string& path,
                                      const std::string& flag,
                                      std::uint64_t scenario_fingerprint) {
    PartialResults p(path, flag);
    std::string text;
    try {
        text = read_input_file(path, "partial-results file");
    } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: {}", flag, e.what()));
    }
    const std::string afresh = "; run the command without --resume to start afresh";
    const auto damaged = [&](const std::string& what) {
        return ConfigError(fmt::format("{}: '{}' is damaged: {}; nothing was resumed{}", flag, path, what, afresh));
    };
    if (!text.starts_with(kMagic)) {
        // "servesim partial results vN\n" of another N: a file of another release, not a damaged one.
        const std::size_t eol = text.find('\n');
        if (text.starts_with(kMagicAnyVersion) && eol != std::string::npos && eol > kMagicAnyVersion.size() &&
            eol <= kMagicAnyVersion.size() + 4 &&
            text.find_first_not_of("0123456789", kMagicAnyVersion.size()) == eol) {
            throw ConfigError(
                fmt::format("{}: '{}' is a partial-results file of another servesim release (format "
                            "v{}; this build reads v2): its runs cannot be read back{}",
                            flag, path, text.substr(kMagicAnyVersion.size(), eol - kMagicAnyVersion.size()), afresh));
        }
        throw ConfigError(
            fmt::format("{}: '{}' is not a servesim partial-results file (written by --checkpoint, or "
                        "kept by a sweep or plan that failed), or its first line is damaged{}",
                        flag, path, afresh));
    }
    if (text.size() < kHeaderBytes + kCrcBytes) {
        throw damaged(fmt::format("its header ends after {} of {} bytes", text.size(), kHeaderBytes + kCrcBytes));
    }
    const auto mark = get<std::uint32_t>(text, kMagic.size());
    if (mark == __builtin_bswap32(kByteOrderMark)) {
        throw ConfigError(fmt::format("{}: '{}' was written on a machine of another byte order{}", flag, path, afresh));
    }
    if (crc32(std::string_view(text).substr(0, kHeaderBytes)) != get<std::uint32_t>(text, kHeaderBytes)) {
        throw damaged("its header fails its CRC-32 checksum");
    }
    const auto codec = get<std::uint32_t>(text, kMagic.size() + 4);
    if (codec != result_codec_version()) {
        throw ConfigError(
            fmt::format("{}: '{}' was written by another servesim build (result codec version {}; this "
                        "build reads {}): its runs cannot be read back{}",
                        flag, path, codec, result_codec_version(), afresh));
    }
    if (get<std::uint64_t>(text, kMagic.size() + 8) != scenario_fingerprint) {
        throw ConfigError(fmt::format(
            "{}: '{}' holds the runs of another scenario (another scenario file, --set, --seed or --grid, or with "
            "--out or --format changing whether request records are kept): it does not continue this command; "
            "repeat the command that wrote it with --resume, or run this one without --resume to start afresh",
            flag, path));
    }
    std::size_t pos = kHeaderBytes + kCrcBytes;
    std::size_t good_end = pos;
    std::size_t record = 0;
    while (pos < text.size()) {
        ++record;
        const std::string_view rest = std::string_view(text).substr(pos);
        // A record cut short by a crash (or followed by the zeros a file system may leave after one): that run
        // runs again.
        if (rest.find_first_not_of('\0') == std::string_view::npos || rest.size() < kRecordHeaderBytes + kCrcBytes) {
            break;
        }
        if (crc32(rest.substr(0, kRecordHeaderBytes)) != get<std::uint32_t>(rest, kRecordHeaderBytes)) {
            throw damaged(fmt::format("record {} (at byte {}) fails its header's CRC-32 checksum", record, pos));
        }
        const auto fingerprint = get<std::uint64_t>(rest, 0);
        const auto size = get<std::uint64_t>(rest, 8);
        const std::size_t body = kRecordHeaderBytes + kCrcBytes;
        if (rest.size() - body < kCrcBytes || size > rest.size() - body - kCrcBytes) {
            break;  // cut short: its header is whole, its bytes are not
        }
        const std::string_view bytes = rest.substr(body, size);
        if (crc32(bytes) != get<std::uint32_t>(rest, body + size)) {
            throw damaged(fmt::format("record {} (at byte {}) fails its CRC-32 checksum", record, pos));
        }
        p.stored_[fingerprint] = std::string(bytes);
        pos += body + size + kCrcBytes;
        good_end = pos;
    }
    p.num_loaded_ = p.stored_.size();
    // Append after the last whole record: a torn tail is cut off, the records before are never rewritten (a process
    // killed now loses nothing).
    std::error_code ec;
    if (good_end < text.size()) {
        std::filesystem::resize_file(path, good_end, ec);
    }
    p.out_.open(path, std::ios::binary | std::ios::app);
    if (ec || !p.out_) {
        throw ConfigError(fmt::format("{}: cannot write '{}'", flag, path));
    }
    return p;
}

bool PartialResults::find(const ExperimentConfig& config, ExperimentResult& out) const {
    const auto it = stored_.find(config_fingerprint(config));
    if (it == stored_.end()) {
        return false;
    }
    try {
        decode_result(it->second, out);
    } catch (const InvariantError& e) {
        // Only bytes that pass their checksum get here: written by a build of the same codec version that
        // encoded otherwise (or made to pass); refused as the file's fault, not ours.
        throw ConfigError(
            fmt::format("{}: '{}' holds a record that this build cannot read ({}); run the command "
                        "without --resume to start afresh",
                        flag_, path_, e.what()));
    }
    return true;
}

void PartialResults::append(const ExperimentConfig& config, const ExperimentResult& result) {
    const std::string bytes = encode_result(result);
    std::string head;
    put(head, config_fingerprint(config));
    put(head, static_cast<std::uint64_t>(bytes.size()));
    put(head, crc32(head));
    std::string tail;
    put(tail, crc32(bytes));
    if (!unwritten_header_.empty()) {
        out_.open(path_, std::ios::binary | std::ios::trunc);
        head.insert(0, unwritten_header_);
        unwritten_header_.clear();
    }
    out_.write(head.data(), static_cast<std::streamsize>(head.size()));
    out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out_.write(tail.data(), static_cast<std::streamsize>(tail.size()));
    out_.flush();
    if (!out_) {
        throw ConfigError(fmt::format("{}: cannot write to the partial-results file '{}'", flag_, path_));
    }
    ++num_appended_;
}

std::uint64_t scenario_fingerprint(const std::vector<ExperimentConfig>& experiments) {
    std::uint64_t h = fnv1a(kFnvOffset, "run");
    for (const auto& c : experiments) {
        std::string bytes;
        put(bytes, config_fingerprint(c));
        h = fnv1a(h, bytes);
    }
    return h;
}

std::uint64_t scenario_fingerprint(const PlanRequest& plan) {
    // Each part with its length, so that no two lists of parts hash the same bytes.
    std::uint64_t h = kFnvOffset;
    const auto part = [&](std::string_view s) {
        std::string n;
        put(n, static_cast<std::uint64_t>(s.size()));
        h = fnv1a(fnv1a(h, n), s);
    };
    part("plan");
    part(plan.scenario_text);
    for (const auto& o : plan.overrides) {
        part(o);
    }
    // The engine flags, --model, --gpu and --cost-model of plan's command line (and, without a scenario file, the
    // bench flags): each as its key and the value's YAML text.
    for (const auto& o : plan.flag_overrides) {
        part(o.path);
        part(YAML::Dump(o.value));
    }
    part(plan.seed ? std::to_string(*plan.seed) : "no seed");
    part(std::to_string(plan.replicates));
    for (const auto& [key, values] : plan.grid) {
        part(key);
        for (const auto& v : values) {
            part(v);
        }
    }
    part(plan.load_key);
    return h;
}

std::optional<PartialResults> open_partial_results(const std::string& checkpoint,
                                                   const std::string& resume,
                                                   const std::string& default_dir,
                                                   std::uint64_t scenario_fingerprint,
                                                   bool& is_default) {
    is_default = false;
    if (!checkpoint.empty() && !resume.empty()) {
        throw ConfigError(
            "command line: give --checkpoint FILE or --resume FILE, not both (--resume appends the runs "
            "it adds to its FILE)");
    }
    if (!resume.empty()) {
        return PartialResults::resume(resume, "--resume", scenario_fingerprint);
    }
    if (!checkpoint.empty()) {
        return PartialResults::create(checkpoint, "--checkpoint", scenario_fingerprint);
    }
    const std::filesystem::path path = std::filesystem::path(default_dir.empty() ? "." : default_dir) /
                                       fmt::format("servesim-partial-{}.bin", getpid());
    try {
        auto p = PartialResults::create_on_first_append(path.string(), "partial results", scenario_fingerprint);
        is_default = true;
        return p;
    } catch (const ConfigError&) {
        std::error_code ec;
        std::filesystem::remove(path, ec);
        return std::nullopt;
    }
}

std::string resume_command(const std::string& program, const std::vector<std::string>& words, const std::string& file) {
    const auto quoted = [](const std::string& w) {
        const bool plain = !w.empty() && w.find_first_not_of(
                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                             "0123456789_./=:,@%+-") == std::string::npos;
        if (plain) {
            return w;
        }
        std::string q = "'";
        for (const char ch : w) {
            q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
        }
        return q + "'";
    };
    std::string cmd = quoted(program);
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w == "--checkpoint" || w == "--resume") {
            ++i;  // and its value
            continue;
        }
        if (w.starts_with("--checkpoint=") || w.starts_with("--resume=")) {
            continue;
        }
        cmd += ' ';  // (appended piecewise: GCC 12's -Wrestrict misfires on "literal" + std::string&&)
        cmd += quoted(w);
    }
    cmd += " --resume ";
    cmd += quoted(file);
    return cmd;
}

std::string kept_note(const PartialResults& partial, const std::string& command) {
    const std::size_t n = partial.num_loaded() + partial.num_appended();
    return fmt::format(
        "{} finished run{} {} kept in {}; repeat the command with --resume {} to run only the rest:\n"
        "    {}",
        n, n == 1 ? "" : "s", n == 1 ? "is" : "are", partial.path(), partial.path(), command);
}

PartialResultsScope::PartialResultsScope(const Executor& executor,
                                         bool keep,
                                         const std::string& checkpoint,
                                         const std::string& resume,
                                         const std::string& default_dir,
                                         std::uint64_t scenario_fingerprint,
                                         std::vector<std::string> words)
    : handle_signals_(executor.num_ranks() == 1), words_(std::move(words)) {
    if (keep && executor.is_root()) {
        file_ = open_partial_results(checkpoint, resume, default_dir, scenario_fingerprint, is_default_);
    }
}

void PartialResultsScope::remove_default() {
    if (file_ && is_default_) {
        std::error_code ec;
        std::filesystem::remove(file_->path(), ec);
    }
}

void PartialResultsScope::report_kept(std::ostream& log, bool interrupted) {
    if (!file_) {
        return;
    }
    if (file_->num_loaded() + file_->num_appended() == 0 && is_default_) {
        remove_default();  // nothing finished: no file to leave behind
        if (interrupted) {
            log << "servesim: no run had finished: nothing is kept\n";
        }
        return;
    }
    // The program as it was started (glibc's program_invocation_name: argv[0]), so the line can be pasted back.
    log << "servesim: " << kept_note(*file_, resume_command(program_invocation_name, words_, file_->path())) << "\n";
}

}  // namespace servesim::app
