// Tests of workloads/trace_reader.* and `type: trace`: Mooncake hash ids become 512-token runs with a partial last
// block, Azure timestamps become seconds from the first record, time_scale and limit apply, and every malformed
// record is an error naming the file, the line and the field. Fixtures: tests/fixtures/traces/ (hand-made).
#include "workloads/trace_reader.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/catch.h"
#include "tests/workloads/workload_test_util.h"
#include "workloads/content_ids.h"

using namespace servesim;
using namespace servesim::workloads;
using servesim::workloads::test::drive;
using servesim::workloads::test::fixture;
using servesim::workloads::test::yaml;

namespace {

// Reads a whole fixture; returns the error message or "" if none.
std::string read_error(const std::string& name, const std::string& format) {
    try {
        auto reader = open_trace(fixture(name), format);
        while (reader->next()) {
        }
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("Mooncake reader maps each hash id to a 512-token run, the last one partial", "[workloads][trace]") {
    // mooncake_small.jsonl:
    //   1: t 0 ms,      1200 tokens, ids [0,1,2] → runs 512, 512, 1200 − 1024 = 176
    //   2: t 250 ms,    1024 tokens, ids [0,1]   → runs 512, 512 (same ids ⇒ same prefix as record 1)
    //   3: t 1000.5 ms,  600 tokens, ids [0,3]   → runs 512, 88
    auto reader = open_trace(fixture("mooncake_small.jsonl"), "mooncake");
    const auto r1 = reader->next();
    const auto r2 = reader->next();
    const auto r3 = reader->next();
    CHECK_FALSE(reader->next().has_value());
    REQUIRE(r1);
    REQUIRE(r2);
    REQUIRE(r3);
    const core::TokenContent expected1 = {
        {trace_block_content(0), 512}, {trace_block_content(1), 512}, {trace_block_content(2), 176}};
    CHECK(r1->prompt == expected1);
    CHECK(r2->prompt == core::TokenContent(expected1.begin(), expected1.begin() + 2));
    const core::TokenContent expected3 = {{trace_block_content(0), 512}, {trace_block_content(3), 88}};
    CHECK(r3->prompt == expected3);
    CHECK(r1->arrival.ns() == 0);
    CHECK(r2->arrival.ns() == 250'000'000);
    CHECK(r3->arrival.ns() == 1'000'500'000);
    CHECK(r1->output_tokens == 10);
    CHECK(r3->output_tokens == 0);
    CHECK(r3->line == 3);
}

TEST_CASE("Mooncake trace workload applies time_scale and limit", "[workloads][trace]") {
    // time_scale 2: arrivals 0, 0.5 s; limit 2 stops before record 3.
    auto w = make_workload(yaml("type: trace\ntrace: " + fixture("mooncake_small.jsonl") +
                                "\nformat: mooncake\ntime_scale: 2\nlimit: 2\n"),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration::from_s(1); });
    REQUIRE(served.size() == 2);
    CHECK(served[0].spec.arrival.ns() == 0);
    CHECK(served[1].spec.arrival.ns() == 500'000'000);
    CHECK(served[1].spec.max_output_tokens == 5);
    CHECK(w->exhausted());
}

TEST_CASE("Trace workload caps output lengths at max_output_tokens", "[workloads][trace]") {
    // Recorded outputs 10, 5, 0 (sent as 1); max_output_tokens 3 → 3, 3, 1.
    auto w = make_workload(yaml("type: trace\ntrace: " + fixture("mooncake_small.jsonl") +
                                "\nformat: mooncake\nmax_output_tokens: 3\n"),
                           1);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration::from_s(1); });
    REQUIRE(served.size() == 3);
    CHECK(served[0].spec.max_output_tokens == 3);
    CHECK(served[1].spec.max_output_tokens == 3);
    CHECK(served[2].spec.max_output_tokens == 1);
}

TEST_CASE("Trace workload sends a recorded output length of 0 as 1 token", "[workloads][trace]") {
    auto w = make_workload(yaml("type: trace\ntrace: " + fixture("mooncake_small.jsonl") + "\nformat: mooncake\n"), 1);
    const auto served = drive(*w, [](const RequestSpec&) { return core::Duration::from_s(1); });
    REQUIRE(served.size() == 3);
    CHECK(served[2].spec.max_output_tokens == 1);
}

TEST_CASE("Azure reader turns timestamps into seconds from the first record", "[workloads][trace]") {
    // 2023-11-16 23:59:59.75 → 0; 2023-11-17 00:00:01.0 → 1.25 s (across midnight); 00:00:01.0000001 → +100 ns.
    auto reader = open_trace(fixture("azure_small.csv"), "azure");
    std::vector<TraceRecord> records;
    while (auto r = reader->next()) {
        records.push_back(*r);
    }
    REQUIRE(records.size() == 3);
    CHECK(records[0].arrival.ns() == 0);
    CHECK(records[1].arrival.ns() == 1'250'000'000);
    CHECK(records[2].arrival.ns() == 1'250'000'100);
    CHECK(records[0].prompt.size() == 1);
    CHECK(core::total_tokens(records[1].prompt) == 200);
    CHECK(records[1].output_tokens == 20);
    CHECK(records[2].output_tokens == 0);
    CHECK(records[0].prompt[0].content != records[1].prompt[0].content);  // no shared prefixes
    CHECK(records[2].line == 4);
}

TEST_CASE("parse_timestamp_ns counts from 1970-01-01", "[workloads][trace]") {
    CHECK(parse_timestamp_ns("1970-01-01 00:00:00") == 0);
    // 2000-03-01: 30 years (7 leap days 1972–1996) + Jan 31 + Feb 29 (2000 is a leap year) = 10957 + 60 = 11017 days.
    CHECK(parse_timestamp_ns("2000-03-01 00:00:01.5") == (11017LL * 86400 + 1) * 1'000'000'000 + 500'000'000);
    CHECK_FALSE(parse_timestamp_ns("2023/11/16 18:15:46").has_value());
    CHECK_FALSE(parse_timestamp_ns("2023-11-16 18:15:46.").has_value());
}

TEST_CASE("Mooncake malformed JSON names the file and line", "[workloads][trace]") {
    const auto msg = read_error("mooncake_bad_json.jsonl", "mooncake");
    CHECK(contains(msg, "mooncake_bad_json.jsonl:2: "));
    CHECK(contains(msg, "malformed JSON"));
}

TEST_CASE("Mooncake missing field names the file, line and field", "[workloads][trace]") {
    // Line 2 is blank (skipped but counted); line 3 lacks output_length.
    const auto msg = read_error("mooncake_missing_field.jsonl", "mooncake");
    CHECK(contains(msg, "mooncake_missing_field.jsonl:3: 'output_length': missing field"));
}

TEST_CASE("Mooncake hash id count must be ceil(input_length / 512)", "[workloads][trace]") {
    // 1025 tokens need 3 blocks (512 + 512 + 1); the record has 2 ids.
    const auto msg = read_error("mooncake_bad_hash_count.jsonl", "mooncake");
    CHECK(contains(msg,
                   "mooncake_bad_hash_count.jsonl:1: 'hash_ids': expected ceil(input_length 1025 / 512) = 3 "
                   "hash ids, got 2"));
}

TEST_CASE("Azure malformed token count names the file, line and column", "[workloads][trace]") {
    const auto msg = read_error("azure_bad_tokens.csv", "azure");
    CHECK(contains(msg, "azure_bad_tokens.csv:3: 'ContextTokens': expected an integer from 1 to 1000000000, got 'abc'"));
}

TEST_CASE("Trace numbers beyond what the simulator holds are refused naming file, line and field",
          "[workloads][trace][regression]") {
    // 1e4004 overflows a double (nlohmann's out_of_range used to escape as an uncaught exception); a 1e30 ms
    // timestamp and a 2^63 − 1 token prompt used to wrap in the ns clock and in the block rounding; the year 9999
    // is outside the ±292 years int64 nanoseconds hold.
    CHECK(contains(read_error("mooncake_huge_number.jsonl", "mooncake"), "mooncake_huge_number.jsonl:2: "));
    CHECK(contains(read_error("mooncake_huge_number.jsonl", "mooncake"), "unreadable JSON"));
    CHECK(contains(read_error("mooncake_huge_timestamp.jsonl", "mooncake"),
                   "mooncake_huge_timestamp.jsonl:1: 'timestamp': expected a number of milliseconds from 0 to "
                   "1000000000000"));
    CHECK(contains(read_error("mooncake_huge_input.jsonl", "mooncake"),
                   "mooncake_huge_input.jsonl:1: 'input_length': expected an integer from 1 to 1000000000"));
    CHECK(contains(read_error("azure_year_9999.csv", "azure"), "azure_year_9999.csv:3: 'TIMESTAMP'"));
    CHECK(contains(read_error("azure_year_9999.csv", "azure"), "1678 to 2261"));
    CHECK_FALSE(parse_timestamp_ns("1677-12-31 23:59:59").has_value());
    CHECK(parse_timestamp_ns("2261-12-31 23:59:59").has_value());
}

TEST_CASE("validate_workload reads the whole trace and reports a malformed line", "[workloads][trace]") {
    std::string msg;
    try {
        validate_workload(yaml("type: trace\ntrace: " + fixture("mooncake_bad_json.jsonl") + "\nformat: mooncake\n"));
    } catch (const ConfigError& e) {
        msg = e.what();
    }
    CHECK(contains(msg, "mooncake_bad_json.jsonl:2: "));
}

TEST_CASE("Trace workload rejects an unknown format and a missing file", "[workloads][trace]") {
    std::string format_msg;
    try {
        validate_workload(yaml("type: trace\ntrace: " + fixture("azure_small.csv") + "\nformat: sharegpt\n"));
    } catch (const ConfigError& e) {
        format_msg = e.what();
    }
    CHECK(contains(format_msg, "'workload.format': unknown trace format 'sharegpt'; allowed: mooncake, azure"));
    std::string file_msg;
    try {
        validate_workload(yaml("type: trace\ntrace: /nonexistent/x.jsonl\nformat: mooncake\n"));
    } catch (const ConfigError& e) {
        file_msg = e.what();
    }
    CHECK(contains(file_msg, "'workload.trace': /nonexistent/x.jsonl: cannot open the trace file: no such file"));
}

namespace {

// Writes `text` to a temporary plain CSV trace and returns its path.
std::string plain_trace(const std::string& name, const std::string& text) {
    const std::string path = (std::filesystem::temp_directory_path() / ("servesim_plain_" + name + ".csv")).string();
    std::ofstream(path) << text;
    return path;
}

std::vector<TraceRecord> read_all(const std::string& path) {
    auto reader = open_trace(path, "csv");
    std::vector<TraceRecord> out;
    while (auto r = reader->next()) {
        out.push_back(*r);
    }
    return out;
}

std::string plain_error(const std::string& name, const std::string& text) {
    try {
        (void)read_all(plain_trace(name, text));
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("Plain CSV trace: prefix_tokens shares only the group's text, the rest is each request's own",
          "[workloads][trace]") {
    // Columns in any order. Lines 2 and 3 share document "doc-a": 300 tokens of it, then 200 and 500 of their own.
    // Line 4 names "doc-a" without prefix_tokens: the document cut at 600 tokens (it shares 300 with the others'
    // 300-token prefix run, as two runs of one text). Line 5 has no prefix_id: wholly its own.
    const auto records = read_all(plain_trace("prefix_tokens",
                                              "prefix_id,t_s,prompt_tokens,output_tokens,prefix_tokens\n"
                                              "doc-a,0,500,10,300\n"
                                              "doc-a,0.5,800,10,300\n"
                                              "doc-a,1.0,600,10,\n"
                                              ",1.5,100,10,\n"));
    REQUIRE(records.size() == 4);
    const core::ContentId doc = records[0].prompt[0].content;
    CHECK(records[0].prompt == core::TokenContent{{doc, 300}, {unique_prompt_content(2), 200}});
    CHECK(records[1].prompt == core::TokenContent{{doc, 300}, {unique_prompt_content(3), 500}});
    CHECK(records[2].prompt == core::TokenContent{{doc, 600}});
    CHECK(records[3].prompt == core::TokenContent{{unique_prompt_content(5), 100}});
    CHECK(records[1].arrival.ns() == 500'000'000);
}

TEST_CASE("Plain CSV trace: string prefix ids are stable texts; integer ids keep their old content",
          "[workloads][trace]") {
    const auto a = read_all(plain_trace("ids_a", "t_s,prompt_tokens,output_tokens,prefix_id\n0,64,1,user_a\n"
                                                 "0,64,1,7\n0,64,1,user_b\n"));
    const auto b = read_all(plain_trace("ids_b", "t_s,prompt_tokens,output_tokens,prefix_id\n0,64,1,user_a\n"
                                                 "0,64,1,007\n"));
    // The same id text in two files is the same content; different texts differ; "007" reads as the integer 7.
    CHECK(a[0].prompt == b[0].prompt);
    CHECK_FALSE(a[0].prompt == a[2].prompt);
    CHECK(a[1].prompt == b[1].prompt);
    // A 3-column line under a prefix_id header is a prompt of its own, as before.
    const auto c = read_all(plain_trace("short_line", "t_s,prompt_tokens,output_tokens,prefix_id\n0,64,1\n"));
    CHECK(c[0].prompt == core::TokenContent{{unique_prompt_content(2), 64}});
}

TEST_CASE("Plain CSV trace: a bad header or prefix_tokens names the file, line and what is allowed",
          "[workloads][trace]") {
    CHECK(contains(plain_error("unknown_col", "t_s,prompt_tokens,output_tokens,session\n0,1,1,x\n"),
                   ":1: unknown column 'session' in the header; allowed: t_s, prompt_tokens, output_tokens, "
                   "prefix_id, prefix_tokens"));
    CHECK(contains(plain_error("missing_col", "t_s,prompt_tokens\n0,1\n"),
                   ":1: the header has no 'output_tokens' column"));
    CHECK(contains(plain_error("twice", "t_s,t_s,prompt_tokens,output_tokens\n"), "column 't_s' appears twice"));
    CHECK(contains(plain_error("tokens_alone", "t_s,prompt_tokens,output_tokens,prefix_tokens\n0,10,1,5\n"),
                   "a 'prefix_tokens' column needs a 'prefix_id' column"));
    // More shared tokens than the prompt has: refused with the line's own bound.
    CHECK(contains(plain_error("too_many", "t_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,1,d,101\n"),
                   ":2: 'prefix_tokens': expected an integer from 0 to the line's prompt_tokens (100), got '101'"));
    CHECK(contains(plain_error("no_id", "t_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,1,,50\n"),
                   ":2: 'prefix_tokens': given without a prefix_id on the same line"));
}
