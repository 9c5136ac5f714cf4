// The one way servesim opens a file the user names (scenario, YAML/JSON, --gpu, plan --prices, --resume, traces,
// datasets, measurement files): the path must name a readable regular file no larger than a bound, and every refusal
// names the path and says why in words. A FIFO blocked forever, /dev/zero was read until bad_alloc, a directory
// reached a stream as an unnamed read error and a symlink loop printed a raw `filesystem error` (issue 41). Not a
// vLLM mechanism: input hygiene of our own (docs/INPUT-RANGES.md, "Input files").
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "common/error.h"

namespace servesim {

// Default size bound for a file read whole into memory (a scenario, a GPU file, config.json, a price table, a
// partial-results file): 1 GiB. The largest input shipped is the kernel sweep log of issue 38 (a few MB); a
// --resume file of a 1,000-point sweep is ~15 MB (issue 41). Streaming readers (traces) pass no bound and bound
// their lines instead.
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{1} << 30;
inline constexpr std::uintmax_t kNoFileSizeBound = ~std::uintmax_t{0};

// Refuses anything but a readable regular file of at most `max_bytes`; `what` names the file's role in the message
// ("scenario file", "GPU file"). Returns the file's size. Symbolic links are followed (a link to a regular file is
// fine); a loop of links is named as one.
inline std::uintmax_t check_input_file(const std::string& path, std::string_view what,
                                       std::uintmax_t max_bytes = kMaxInputFileBytes) {
    namespace fs = std::filesystem;
    const auto refuse = [&](std::string_view why) -> ConfigError {
        return ConfigError(fmt::format("{}: {}; expected a {} (a regular file)", path, why, what));
    };
    if (path.empty()) {
        throw ConfigError(fmt::format("an empty path was given for the {}", what));
    }
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec) {
        if (ec == std::errc::too_many_symbolic_link_levels) {
            throw refuse("a loop of symbolic links");
        }
        const auto cannot_open = [&](std::string_view why) {
            return ConfigError(fmt::format("{}: cannot open the {}: {}", path, what, why));
        };
        if (ec == std::errc::no_such_file_or_directory) {
            throw cannot_open("no such file");
        }
        if (ec == std::errc::not_a_directory) {
            throw cannot_open("no such file (a part of the path is not a directory)");
        }
        if (ec == std::errc::permission_denied) {
            throw cannot_open("permission denied");
        }
        if (ec == std::errc::filename_too_long) {
            throw cannot_open("the path is too long");
        }
        throw cannot_open(ec.message());
    }
    switch (status.type()) {
        case fs::file_type::regular:
            break;
        case fs::file_type::not_found:
            throw ConfigError(fmt::format("{}: cannot open the {}: no such file", path, what));
        case fs::file_type::directory:
            throw refuse("a directory");
        case fs::file_type::fifo:
            throw refuse("a FIFO (named pipe), which may never end or never open");
        case fs::file_type::character:
        case fs::file_type::block:
            throw refuse("a device, not a file");
        case fs::file_type::socket:
            throw refuse("a socket");
        default:
            throw refuse("not a regular file");
    }
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) {
        throw refuse("its size cannot be read (" + ec.message() + ")");
    }
    if (size > max_bytes) {
        throw ConfigError(fmt::format("{}: {} bytes is larger than a {} can be (at most {} bytes)", path, size, what,
                                      max_bytes));
    }
    return size;
}

// check_input_file, then an open binary stream; a file that cannot be opened (permissions) is named.
inline std::ifstream open_input_file(const std::string& path, std::string_view what,
                                     std::uintmax_t max_bytes = kNoFileSizeBound) {
    check_input_file(path, what, max_bytes);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw ConfigError(fmt::format("{}: cannot open the {} (not readable)", path, what));
    }
    return in;
}

// check_input_file, then the whole text. At most max_bytes are read even if the file grows meanwhile.
inline std::string read_input_file(const std::string& path, std::string_view what,
                                   std::uintmax_t max_bytes = kMaxInputFileBytes) {
    const std::uintmax_t size = check_input_file(path, what, max_bytes);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw ConfigError(fmt::format("{}: cannot open the {} (not readable)", path, what));
    }
    std::string text;
    text.resize(static_cast<std::size_t>(size));
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (in.bad()) {
        throw ConfigError(fmt::format("{}: read error in the {}", path, what));
    }
    // A file that grew after its size was taken is read up to max_bytes more, never without end.
    char buffer[1 << 16];
    while (in && text.size() <= max_bytes) {
        in.read(buffer, sizeof buffer);
        text.append(buffer, static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) {
        throw ConfigError(fmt::format("{}: read error in the {}", path, what));
    }
    if (text.size() > max_bytes) {
        throw ConfigError(fmt::format("{}: larger than a {} can be (at most {} bytes)", path, what, max_bytes));
    }
    return text;
}

}  // namespace servesim
