// The partial-results file; see partial_results.h.
#include "tools/app/partial_results.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include "common/error.h"
#include "common/input_file.h"
#include "tools/app/result_codec.h"

namespace servesim::app {

namespace {

constexpr std::string_view kMagic = "servesim partial results v1\n";
constexpr std::uint32_t kByteOrderMark = 0x01020304;

void put_u64(std::ofstream& out, std::uint64_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); }

bool get_u64(std::string_view in, std::size_t& pos, std::uint64_t& v) {
    if (in.size() - pos < sizeof v) {
        return false;
    }
    std::memcpy(&v, in.data() + pos, sizeof v);
    pos += sizeof v;
    return true;
}

}  // namespace

PartialResults PartialResults::create(const std::string& path, const std::string& flag) {
    PartialResults p(path, flag);
    p.out_.open(path, std::ios::binary | std::ios::trunc);
    p.out_.write(kMagic.data(), static_cast<std::streamsize>(kMagic.size()));
    p.out_.write(reinterpret_cast<const char*>(&kByteOrderMark), sizeof kByteOrderMark);
    p.out_.flush();
    if (!p.out_) {
        throw ConfigError(fmt::format("{}: cannot write the partial-results file '{}'", flag, path));
    }
    return p;
}

PartialResults PartialResults::resume(const std::string& path, const std::string& flag) {
    PartialResults p(path, flag);
    std::string text;
    try {
        text = read_input_file(path, "partial-results file");
    } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: {}", flag, e.what()));
    }
    std::uint32_t mark = 0;
    if (text.size() < kMagic.size() + sizeof mark || text.compare(0, kMagic.size(), kMagic) != 0) {
        throw ConfigError(fmt::format("{}: '{}' is not a servesim partial-results file (written by --checkpoint, or "
                                      "kept by a sweep or plan that failed)",
                                      flag, path));
    }
    std::memcpy(&mark, text.data() + kMagic.size(), sizeof mark);
    if (mark != kByteOrderMark) {
        throw ConfigError(fmt::format("{}: '{}' was written on a machine of another byte order", flag, path));
    }
    std::size_t pos = kMagic.size() + sizeof mark;
    std::size_t good_end = pos;
    while (pos < text.size()) {
        std::uint64_t fingerprint = 0;
        std::uint64_t size = 0;
        if (!get_u64(text, pos, fingerprint) || !get_u64(text, pos, size) || text.size() - pos < size) {
            break;  // cut short by a crash: that run runs again
        }
        p.stored_[fingerprint] = text.substr(pos, size);
        pos += size;
        good_end = pos;
    }
    p.num_loaded_ = p.stored_.size();
    // Append after the last whole record (a torn tail is overwritten).
    text.resize(good_end);
    p.out_.open(path, std::ios::binary | std::ios::trunc);
    p.out_.write(text.data(), static_cast<std::streamsize>(text.size()));
    p.out_.flush();
    if (!p.out_) {
        throw ConfigError(fmt::format("{}: cannot write '{}'", flag, path));
    }
    return p;
}

bool PartialResults::find(const ExperimentConfig& config, ExperimentResult& out) const {
    const auto it = stored_.find(config_fingerprint(config));
    if (it == stored_.end()) {
        return false;
    }
    decode_result(it->second, out);
    return true;
}

void PartialResults::append(const ExperimentConfig& config, const ExperimentResult& result) {
    const std::string bytes = encode_result(result);
    put_u64(out_, config_fingerprint(config));
    put_u64(out_, bytes.size());
    out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out_.flush();
    if (!out_) {
        throw ConfigError(fmt::format("{}: cannot write to the partial-results file '{}'", flag_, path_));
    }
    ++num_appended_;
}

std::optional<PartialResults> open_partial_results(const std::string& checkpoint, const std::string& resume,
                                                   const std::string& default_dir, bool& is_default) {
    is_default = false;
    if (!checkpoint.empty() && !resume.empty()) {
        throw ConfigError("command line: give --checkpoint FILE or --resume FILE, not both (--resume appends the runs "
                          "it adds to its FILE)");
    }
    if (!resume.empty()) {
        return PartialResults::resume(resume, "--resume");
    }
    if (!checkpoint.empty()) {
        return PartialResults::create(checkpoint, "--checkpoint");
    }
    const std::filesystem::path path =
        std::filesystem::path(default_dir.empty() ? "." : default_dir) / fmt::format("servesim-partial-{}.bin", getpid());
    try {
        auto p = PartialResults::create(path.string(), "partial results");
        is_default = true;
        return p;
    } catch (const ConfigError&) {
        std::error_code ec;
        std::filesystem::remove(path, ec);
        return std::nullopt;
    }
}

void PartialResultsScope::remove_default() {
    if (file_ && is_default_) {
        std::error_code ec;
        std::filesystem::remove(file_->path(), ec);
    }
}

std::string kept_note(const PartialResults& partial) {
    const std::size_t n = partial.num_loaded() + partial.num_appended();
    return fmt::format("{} finished run{} {} kept in {}; repeat the command with --resume {} to run only the rest", n,
                       n == 1 ? "" : "s", n == 1 ? "is" : "are", partial.path(), partial.path());
}

}  // namespace servesim::app
