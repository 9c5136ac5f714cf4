// Streaming readers of request traces (traces/README.md): Mooncake JSONL (prefix-chained hash ids, one per
// 512-token block, each becoming one prompt run), Azure LLM CSV (arrivals and lengths, every prompt unique) and a
// plain CSV, t_s,prompt_tokens,output_tokens[,prefix_id] (prompts with equal prefix_ids share their start). A
// reader holds one line at a time, never the file; a malformed record throws ConfigError naming file, line and field.
// Usable without the simulator (the order-only capacity mode): while (auto r = reader->next()) { ... }.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/content.h"
#include "sim/core/time.h"

namespace servesim::workloads {

struct TraceRecord {
    core::SimTime arrival;           // from the trace's start, as recorded (no time_scale applied)
    core::TokenContent prompt;       // runs; total_tokens(prompt) is the record's input length
    std::int64_t output_tokens = 0;  // as recorded (may be 0)
    std::int64_t line = 0;           // 1-based line of the record in its file
};

struct TraceReaderOptions {
    std::int64_t block_tokens = 512;  // Mooncake: tokens per hashed block (the published traces use 512)
};

class TraceReader {
  public:
    virtual ~TraceReader() = default;

    // The next record in file order, or nullopt at the end of the file.
    [[nodiscard]] virtual std::optional<TraceRecord> next() = 0;

    [[nodiscard]] virtual const std::string& path() const = 0;
};

struct TraceFormatEntry {
    std::string_view name;
    std::string_view description;
    std::unique_ptr<TraceReader> (*factory)(const std::string& path, const TraceReaderOptions&);
};

// The formats by name: mooncake, azure, csv.
[[nodiscard]] const std::vector<TraceFormatEntry>& trace_formats();

// Opens `path` in `format`; an unknown format lists the valid ones, a missing file names the path.
[[nodiscard]] std::unique_ptr<TraceReader> open_trace(const std::string& path,
                                                      std::string_view format,
                                                      const TraceReaderOptions& options = {});

// "2023-11-16 18:15:46.6805900" → nanoseconds since 1970-01-01 00:00:00 (proleptic Gregorian, no time zone), or
// nullopt when the text is not of that form or its year is outside 1678–2261 (int64 nanoseconds). Exposed for tests.
[[nodiscard]] std::optional<std::int64_t> parse_timestamp_ns(std::string_view text);

}  // namespace servesim::workloads
