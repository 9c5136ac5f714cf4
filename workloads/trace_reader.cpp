// Trace readers: Mooncake JSONL (parsed per line with nlohmann_json: yaml-cpp took 1.2 s for the 12k-line
// conversation trace, nlohmann 0.1 s) and Azure CSV. Each reader keeps one std::ifstream and the previous arrival
// (timestamps must not go backwards), nothing else, so a trace of any length streams in constant memory.
#include "workloads/trace_reader.h"

#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ios>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/clock_range.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/token_range.h"
#include "workloads/content_ids.h"

namespace servesim::workloads {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    return s;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
    std::int64_t v = 0;
    const auto* end = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc{} || ptr != end || s.empty()) {
        return std::nullopt;
    }
    return v;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, std::int64_t m, std::int64_t d) {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const std::int64_t yoe = y - era * 400;
    const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

// Shared by both formats: the file, the line counter and the non-decreasing arrival check.
class LineReader {
  public:
    // A line longer than this is refused (no record needs it: the longest shipped is 2.7 KB, a 10^9-token
    // Mooncake record at 512 tokens per block needs ~16 MB of hash ids, beyond what this bound admits by design),
    // so a file without newlines (/dev/zero, a binary) is not read whole into memory.
    static constexpr std::size_t kMaxLineBytes = 1 << 20;

    explicit LineReader(std::string path) : path_(std::move(path)) {
        // A directory opens as an empty stream and a device (/dev/null, /dev/zero) as an empty or endless one:
        // only a regular file is a trace.
        check_input_file(path_, "trace file", kNoFileSizeBound);
        if (path_.size() > 3 && path_.compare(path_.size() - 3, 3, ".gz") == 0) {
            // A gzip-compressed trace (requests.csv.gz): read through zlib, a buffer at a time; lines stay bounded
            // by kMaxLineBytes as for a plain file.
            gz_ = gzopen(path_.c_str(), "rb");
            if (gz_ == nullptr) {
                throw ConfigError(path_ + ": cannot open trace file (not readable)");
            }
            gz_buffer_.resize(std::size_t{1} << 16);
        } else {
            in_.open(path_, std::ios::binary);
            if (!in_) {
                throw ConfigError(path_ + ": cannot open trace file (not readable)");
            }
        }
    }

    ~LineReader() {
        if (gz_ != nullptr) {
            gzclose(gz_);
        }
    }
    LineReader(const LineReader&) = delete;
    LineReader& operator=(const LineReader&) = delete;

    // The next non-blank line (trimmed), or nullopt at the end. At the end of a file that held no record at all,
    // the trace is refused: an empty trace would run nothing and report zeros.
    std::optional<std::string_view> next_line() {
        while (read_line()) {
            ++line_;
            const auto t = trim(buffer_);
            if (!t.empty()) {
                ++num_lines_returned_;
                return t;
            }
        }
        if (in_.bad()) {
            throw ConfigError(path_, static_cast<int>(line_), "", "read error");
        }
        if (num_lines_returned_ == 0) {
            throw ConfigError(path_ + ": the trace holds no records (an empty file)");
        }
        return std::nullopt;
    }

    [[noreturn]] void fail(std::string_view field, const std::string& message) const {
        throw ConfigError(path_, static_cast<int>(line_), std::string(field), message);
    }

    void check_order(core::SimTime arrival, std::string_view field) {
        if (arrival < last_arrival_) {
            fail(field,
                 fmt::format("timestamps must not decrease: {} s comes after {} s", arrival.s(), last_arrival_.s()));
        }
        last_arrival_ = arrival;
    }

    const std::string& path() const { return path_; }

    std::int64_t line() const { return line_; }

  private:
    // std::getline with kMaxLineBytes as the bound; false at the end of the file.
    bool read_line() {
        buffer_.clear();
        if (gz_ != nullptr) {
            return read_gz_line();
        }
        std::streambuf* sb = in_.rdbuf();
        // The file buffer throws its own std::ios_base::failure on a failed read() (EIO; /proc/self/mem is a
        // "regular file" that cannot be read): it used to end the run with rc 1 and a message naming no file.
        const auto next = [&] {
            try {
                return sb->sbumpc();
            } catch (const std::ios_base::failure&) {
                const int err = errno;
                throw ConfigError(path_, static_cast<int>(line_ + 1), "",
                                  "read error in the trace file (" +
                                      std::error_code(err, std::generic_category()).message() + ")");
            }
        };
        for (int c = next(); c != std::char_traits<char>::eof(); c = next()) {
            if (c == '\n') {
                return true;
            }
            if (buffer_.size() == kMaxLineBytes) {
                throw ConfigError(path_, static_cast<int>(line_ + 1), "",
                                  fmt::format("line longer than {} bytes; allowed: records up to {} bytes per line",
                                              kMaxLineBytes, kMaxLineBytes));
            }
            buffer_.push_back(static_cast<char>(c));
        }
        return !buffer_.empty();
    }

    // read_line for a gzip file: the same bound, a corrupt stream is a read error naming the line.
    bool read_gz_line() {
        while (true) {
            if (gz_pos_ == gz_len_) {
                const int n = gzread(gz_, gz_buffer_.data(), static_cast<unsigned>(gz_buffer_.size()));
                if (n < 0) {
                    int code = 0;
                    const char* what = gzerror(gz_, &code);
                    throw ConfigError(path_, static_cast<int>(line_ + 1), "",
                                      fmt::format("gzip read error: {}", what != nullptr ? what : "unknown"));
                }
                if (n == 0) {
                    return !buffer_.empty();
                }
                gz_pos_ = 0;
                gz_len_ = static_cast<std::size_t>(n);
            }
            const char c = gz_buffer_[gz_pos_++];
            if (c == '\n') {
                return true;
            }
            if (buffer_.size() == kMaxLineBytes) {
                throw ConfigError(path_, static_cast<int>(line_ + 1), "",
                                  fmt::format("line longer than {} bytes; allowed: records up to {} bytes per line",
                                              kMaxLineBytes, kMaxLineBytes));
            }
            buffer_.push_back(c);
        }
    }

    std::string path_;
    gzFile gz_ = nullptr;
    std::vector<char> gz_buffer_;
    std::size_t gz_pos_ = 0;
    std::size_t gz_len_ = 0;
    std::ifstream in_;
    std::string buffer_;
    std::int64_t line_ = 0;
    std::int64_t num_lines_returned_ = 0;
    core::SimTime last_arrival_;
};

// {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}; extra fields are ignored.
class MooncakeReader final : public TraceReader {
  public:
    MooncakeReader(const std::string& path, const TraceReaderOptions& options)
        : lines_(path), block_tokens_(options.block_tokens) {
        SERVESIM_CHECK(block_tokens_ > 0, "block_tokens must be positive, got {}", block_tokens_);
    }

    std::optional<TraceRecord> next() override {
        const auto text = lines_.next_line();
        if (!text) {
            return std::nullopt;
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(text->begin(), text->end());
        } catch (const nlohmann::json::parse_error& e) {
            lines_.fail("", fmt::format("malformed JSON at byte {}: {}", e.byte, e.what()));
        } catch (const nlohmann::json::exception& e) {
            // e.g. out_of_range 406: a number like 1e4004 that no double holds.
            lines_.fail("", std::string("unreadable JSON: ") + e.what());
        }
        if (!j.is_object()) {
            lines_.fail("", "expected a JSON object per line");
        }
        TraceRecord r;
        r.line = lines_.line();
        const auto& ts = field(j, "timestamp");
        // At most 10^12 ms (31.7 years): far beyond any trace, and inside the simulator's clock (int64 ns).
        if (!ts.is_number() || !(ts.get<double>() >= 0) || !(ts.get<double>() <= kMaxTimestampMs)) {
            lines_.fail("timestamp",
                        fmt::format("expected a number of milliseconds from 0 to {:.0f}, got {}", kMaxTimestampMs,
                                    ts.dump()));
        }
        r.arrival = ts.is_number_integer() ? core::SimTime::from_ns(ts.get<std::int64_t>() * 1'000'000)
                                           : core::SimTime::from_s(ts.get<double>() * 1e-3);
        lines_.check_order(r.arrival, "timestamp");
        const std::int64_t input_tokens = count(j, "input_length", 1);
        r.output_tokens = count(j, "output_length", 0);
        const auto& hashes = field(j, "hash_ids");
        if (!hashes.is_array()) {
            lines_.fail("hash_ids", "expected an array of block hash ids, got " + hashes.dump());
        }
        const auto expected = static_cast<std::size_t>((input_tokens + block_tokens_ - 1) / block_tokens_);
        if (hashes.size() != expected) {
            lines_.fail("hash_ids", fmt::format("expected ceil(input_length {} / {}) = {} hash ids, got {}",
                                                input_tokens, block_tokens_, expected, hashes.size()));
        }
        r.prompt.reserve(hashes.size());
        std::int64_t remaining = input_tokens;
        for (std::size_t i = 0; i < hashes.size(); ++i) {
            const auto& h = hashes[i];
            if (!h.is_number_unsigned()) {
                lines_.fail("hash_ids", fmt::format("entry {} must be a non-negative integer, got {}", i, h.dump()));
            }
            const std::int64_t len = std::min(block_tokens_, remaining);  // only the last block can be partial
            r.prompt.push_back({trace_block_content(h.get<std::uint64_t>()), len});
            remaining -= len;
        }
        return r;
    }

    const std::string& path() const override { return lines_.path(); }

  private:
    const nlohmann::json& field(const nlohmann::json& j, const char* name) const {
        const auto it = j.find(name);
        if (it == j.end()) {
            lines_.fail(name, "missing field");
        }
        return *it;
    }

    // A token count in [min, kMaxTokens]: the bound keeps every later sum (prompt + output, rounding up to blocks)
    // far from overflow; no model holds a billion tokens of context.
    std::int64_t count(const nlohmann::json& j, const char* name, std::int64_t min) const {
        const auto& v = field(j, name);
        if (!v.is_number_integer() || v.get<double>() < static_cast<double>(min) ||
            v.get<double>() > static_cast<double>(kMaxTokens)) {
            lines_.fail(name, fmt::format("expected an integer from {} to {}, got {}", min, kMaxTokens, v.dump()));
        }
        return v.get<std::int64_t>();
    }

    static constexpr double kMaxTimestampMs = 1e12;
    static constexpr std::int64_t kMaxTokens = kMaxTokenCount;  // common/token_range.h

    LineReader lines_;
    std::int64_t block_tokens_;
};

// TIMESTAMP,ContextTokens,GeneratedTokens; arrivals are seconds from the first record's timestamp.
class AzureReader final : public TraceReader {
  public:
    AzureReader(const std::string& path, const TraceReaderOptions&) : lines_(path) {
        const auto header = lines_.next_line();
        if (!header || *header != "TIMESTAMP,ContextTokens,GeneratedTokens") {
            lines_.fail("", "expected the header 'TIMESTAMP,ContextTokens,GeneratedTokens'");
        }
    }

    std::optional<TraceRecord> next() override {
        const auto text = lines_.next_line();
        if (!text) {
            return std::nullopt;
        }
        std::string_view rest = *text;
        std::string_view cols[3];
        for (int i = 0; i < 3; ++i) {
            const auto comma = rest.find(',');
            if ((comma == std::string_view::npos) != (i == 2)) {
                lines_.fail("", "expected 3 comma-separated columns: TIMESTAMP,ContextTokens,GeneratedTokens");
            }
            cols[i] = trim(rest.substr(0, comma));
            rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
        const auto ts_ns = parse_timestamp_ns(cols[0]);
        if (!ts_ns) {
            lines_.fail("TIMESTAMP", "expected a time like 2023-11-16 18:15:46.6805900 in the years 1678 to 2261, "
                                     "got '" + std::string(cols[0]) + "'");
        }
        if (!first_ns_) {
            first_ns_ = *ts_ns;
        }
        TraceRecord r;
        r.line = lines_.line();
        // Each year is in 1678-2261, but two of them can lie further apart than int64 ns holds (found by fuzzing:
        // 1678 then 2023): the offset from the first record is bounded by the clock's range first.
        const double offset_s = (static_cast<double>(*ts_ns) - static_cast<double>(*first_ns_)) * 1e-9;
        if (offset_s > kMaxDurationS) {
            lines_.fail("TIMESTAMP", fmt::format("{:.3g} s after the first record; allowed: up to {:.0e} s (the "
                                                 "simulated clock's range)",
                                                 offset_s, kMaxDurationS));
        }
        if (offset_s < 0) {
            lines_.fail("TIMESTAMP", fmt::format("timestamps must not decrease: {:.3g} s before the first record",
                                                 -offset_s));
        }
        r.arrival = core::SimTime::from_ns(*ts_ns - *first_ns_);
        lines_.check_order(r.arrival, "TIMESTAMP");
        const auto input_tokens = parse_int(cols[1]);
        constexpr std::int64_t kMaxTokens = kMaxTokenCount;  // as for Mooncake (common/token_range.h)
        if (!input_tokens || *input_tokens < 1 || *input_tokens > kMaxTokens) {
            lines_.fail("ContextTokens",
                        fmt::format("expected an integer from 1 to {}, got '{}'", kMaxTokens, cols[1]));
        }
        const auto output_tokens = parse_int(cols[2]);
        if (!output_tokens || *output_tokens < 0 || *output_tokens > kMaxTokens) {
            lines_.fail("GeneratedTokens",
                        fmt::format("expected an integer from 0 to {}, got '{}'", kMaxTokens, cols[2]));
        }
        r.output_tokens = *output_tokens;
        // No prefix information: the prompt is one run shared with nobody, keyed by its line.
        r.prompt.push_back({unique_prompt_content(static_cast<std::uint64_t>(r.line)), *input_tokens});
        return r;
    }

    const std::string& path() const override { return lines_.path(); }

  private:
    LineReader lines_;
    std::optional<std::int64_t> first_ns_;
};

// The plain format: a header naming its columns, one request per line. Required: `t_s` (arrival in seconds,
// non-decreasing, from any origin; the first record arrives at its t_s), `prompt_tokens`, `output_tokens`; optional:
// `prefix_id` and `prefix_tokens`, in any order. Prompts with the same prefix_id are one text: without prefix_tokens
// (no column, or an empty cell) each prompt is that text cut at its own length, so two of them share
// min(prompt_tokens) tokens (a document or conversation several requests extend); with prefix_tokens P the first P
// tokens are the group's text and the rest is the request's own (a system prompt or document followed by a
// question). A prefix_id is any text without a comma (`doc-17`, `user_a`, `7`); ids that read as non-negative
// integers keep the integer's content, so files written before string ids were accepted replay unchanged. A
// prompt without prefix_id is shared with nobody.
class PlainCsvReader final : public TraceReader {
  public:
    PlainCsvReader(const std::string& path, const TraceReaderOptions&) : lines_(path) {
        const auto header = lines_.next_line();
        if (!header) {
            lines_.fail("", "expected a header naming the columns: t_s, prompt_tokens, output_tokens and optionally "
                            "prefix_id, prefix_tokens");
        }
        int index = 0;
        for (const std::string_view name : split(*header)) {
            int* slot = name == "t_s"             ? &t_col_
                        : name == "prompt_tokens" ? &prompt_col_
                        : name == "output_tokens" ? &output_col_
                        : name == "prefix_id"     ? &prefix_col_
                        : name == "prefix_tokens" ? &prefix_tokens_col_
                                                  : nullptr;
            if (slot == nullptr) {
                lines_.fail("", fmt::format("unknown column '{}' in the header; allowed: t_s, prompt_tokens, "
                                            "output_tokens, prefix_id, prefix_tokens",
                                            name));
            }
            if (*slot >= 0) {
                lines_.fail("", fmt::format("column '{}' appears twice in the header", name));
            }
            *slot = index++;
        }
        num_cols_ = index;
        for (const auto& [col, name] : {std::pair{t_col_, "t_s"}, std::pair{prompt_col_, "prompt_tokens"},
                                        std::pair{output_col_, "output_tokens"}}) {
            if (col < 0) {
                lines_.fail("", fmt::format("the header has no '{}' column; required: t_s, prompt_tokens, "
                                            "output_tokens",
                                            name));
            }
        }
        if (prefix_tokens_col_ >= 0 && prefix_col_ < 0) {
            lines_.fail("", "a 'prefix_tokens' column needs a 'prefix_id' column (whose text the tokens are)");
        }
    }

    std::optional<TraceRecord> next() override {
        const auto text = lines_.next_line();
        if (!text) {
            return std::nullopt;
        }
        const std::vector<std::string_view> cols = split(*text);
        // A trailing optional column may be left off entirely (`0,100,10` under a prefix_id header).
        const bool short_ok = static_cast<int>(cols.size()) >= 3 && trailing_optional(static_cast<int>(cols.size()));
        if (static_cast<int>(cols.size()) != num_cols_ && !short_ok) {
            lines_.fail("", fmt::format("expected {} comma-separated columns as the header says, got {}", num_cols_,
                                        cols.size()));
        }
        const auto col = [&](int i) { return i >= 0 && i < static_cast<int>(cols.size()) ? cols[i] : std::string_view{}; };
        TraceRecord r;
        r.line = lines_.line();
        const std::string_view t_text = col(t_col_);
        double t = 0;
        std::size_t pos = 0;
        try {
            t = std::stod(std::string(t_text), &pos);
        } catch (const std::logic_error&) {
            pos = 0;
        }
        if (pos == 0 || pos != t_text.size() || !std::isfinite(t) || t < 0) {
            lines_.fail("t_s", "expected a non-negative number of seconds, got '" + std::string(t_text) + "'");
        }
        r.arrival = core::SimTime::from_ns(static_cast<std::int64_t>(std::llround(t * 1e9)));
        lines_.check_order(r.arrival, "t_s");
        const auto input_tokens = parse_int(col(prompt_col_));
        if (!input_tokens || *input_tokens < 1) {
            lines_.fail("prompt_tokens", "expected an integer >= 1, got '" + std::string(col(prompt_col_)) + "'");
        }
        const auto output_tokens = parse_int(col(output_col_));
        if (!output_tokens || *output_tokens < 0) {
            lines_.fail("output_tokens", "expected an integer >= 0, got '" + std::string(col(output_col_)) + "'");
        }
        r.output_tokens = *output_tokens;
        const std::string_view prefix = col(prefix_col_);
        const std::string_view prefix_tokens_text = col(prefix_tokens_col_);
        if (prefix.empty()) {
            if (!prefix_tokens_text.empty()) {
                lines_.fail("prefix_tokens", "given without a prefix_id on the same line; allowed: empty, or a "
                                             "prefix_id beside it");
            }
            // No prefix information: the prompt is one run shared with nobody, keyed by its line.
            r.prompt.push_back({unique_prompt_content(static_cast<std::uint64_t>(r.line)), *input_tokens});
            return r;
        }
        const core::ContentId shared = prefix_content(prefix);
        if (prefix_tokens_text.empty()) {
            r.prompt.push_back({shared, *input_tokens});
            return r;
        }
        const auto shared_tokens = parse_int(prefix_tokens_text);
        if (!shared_tokens || *shared_tokens < 0 || *shared_tokens > *input_tokens) {
            lines_.fail("prefix_tokens", fmt::format("expected an integer from 0 to the line's prompt_tokens ({}), "
                                                     "got '{}'",
                                                     *input_tokens, prefix_tokens_text));
        }
        if (*shared_tokens > 0) {
            r.prompt.push_back({shared, *shared_tokens});
        }
        if (*input_tokens > *shared_tokens) {
            r.prompt.push_back({unique_prompt_content(static_cast<std::uint64_t>(r.line)), *input_tokens - *shared_tokens});
        }
        return r;
    }

    const std::string& path() const override { return lines_.path(); }

  private:
    // The plain format's shared texts get their own tags, so they never meet other kinds of content: one for ids
    // that read as integers (the id itself), one for other text (its FNV-1a hash, the same on every platform).
    static constexpr std::uint64_t kPlainPrefixTag = 0x504c41494e000007ULL;
    static constexpr std::uint64_t kPlainTextPrefixTag = 0x504c41494e545854ULL;

    static core::ContentId prefix_content(std::string_view id) {
        if (const auto number = parse_int(id); number && *number >= 0) {
            return core::ContentId{core::hash_combine(kPlainPrefixTag, static_cast<std::uint64_t>(*number))};
        }
        std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64-bit
        for (const char c : id) {
            h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
        }
        return core::ContentId{core::hash_combine(kPlainTextPrefixTag, h)};
    }

    static std::vector<std::string_view> split(std::string_view rest) {
        std::vector<std::string_view> cols;
        while (true) {
            const auto comma = rest.find(',');
            cols.push_back(trim(rest.substr(0, comma)));
            if (comma == std::string_view::npos) {
                return cols;
            }
            rest = rest.substr(comma + 1);
        }
    }

    // Whether every column from index `given` on is optional (prefix_id or prefix_tokens).
    [[nodiscard]] bool trailing_optional(int given) const {
        for (int i = given; i < num_cols_; ++i) {
            if (i == t_col_ || i == prompt_col_ || i == output_col_) {
                return false;
            }
        }
        return given < num_cols_;
    }

    LineReader lines_;
    int t_col_ = -1;
    int prompt_col_ = -1;
    int output_col_ = -1;
    int prefix_col_ = -1;
    int prefix_tokens_col_ = -1;
    int num_cols_ = 0;
};

std::string format_names() {
    std::string out;
    for (const auto& f : trace_formats()) {
        out += (out.empty() ? "" : ", ") + std::string(f.name);
    }
    return out;
}

}  // namespace

std::optional<std::int64_t> parse_timestamp_ns(std::string_view text) {
    // YYYY-MM-DD HH:MM:SS[.fraction]
    if (text.size() < 19 || text[4] != '-' || text[7] != '-' || (text[10] != ' ' && text[10] != 'T') ||
        text[13] != ':' || text[16] != ':') {
        return std::nullopt;
    }
    const auto y = parse_int(text.substr(0, 4));
    const auto mo = parse_int(text.substr(5, 2));
    const auto d = parse_int(text.substr(8, 2));
    const auto h = parse_int(text.substr(11, 2));
    const auto mi = parse_int(text.substr(14, 2));
    const auto s = parse_int(text.substr(17, 2));
    // Years 1678–2261: nanoseconds since 1970 fit an int64 only within about ±292 years.
    if (!y || *y < 1678 || *y > 2261 || !mo || !d || !h || !mi || !s || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 ||
        *s > 60 || *h < 0 || *mi < 0 || *s < 0) {
        return std::nullopt;
    }
    std::int64_t frac_ns = 0;
    if (text.size() > 19) {
        if (text[19] != '.' || text.size() == 20 || text.size() > 29) {
            return std::nullopt;
        }
        std::int64_t scale = 100'000'000;
        for (const char c : text.substr(20)) {
            if (c < '0' || c > '9') {
                return std::nullopt;
            }
            frac_ns += (c - '0') * scale;
            scale /= 10;
        }
    }
    const std::int64_t seconds = days_from_civil(*y, *mo, *d) * 86'400 + *h * 3'600 + *mi * 60 + *s;
    return seconds * 1'000'000'000 + frac_ns;
}

const std::vector<TraceFormatEntry>& trace_formats() {
    static const std::vector<TraceFormatEntry> table = {
        {"mooncake", "JSONL: timestamp (ms), input_length, output_length, hash_ids (one per 512-token block)",
         [](const std::string& path, const TraceReaderOptions& o) -> std::unique_ptr<TraceReader> {
             return std::make_unique<MooncakeReader>(path, o);
         }},
        {"azure", "CSV: TIMESTAMP,ContextTokens,GeneratedTokens; every prompt unique",
         [](const std::string& path, const TraceReaderOptions& o) -> std::unique_ptr<TraceReader> {
             return std::make_unique<AzureReader>(path, o);
         }},
        {"csv", "CSV: t_s,prompt_tokens,output_tokens[,prefix_id]; equal prefix_ids share their prompt's start",
         [](const std::string& path, const TraceReaderOptions& o) -> std::unique_ptr<TraceReader> {
             return std::make_unique<PlainCsvReader>(path, o);
         }},
    };
    return table;
}

std::unique_ptr<TraceReader> open_trace(const std::string& path,
                                        std::string_view format,
                                        const TraceReaderOptions& options) {
    for (const auto& f : trace_formats()) {
        if (f.name == format) {
            return f.factory(path, options);
        }
    }
    throw ConfigError(path + ": unknown trace format '" + std::string(format) + "'; allowed: " + format_names());
}

}  // namespace servesim::workloads
