// `type: bench_serve`: reading the keys (the tool's flag names with underscores), sampling the four datasets as
// vllm/benchmarks/datasets.py does, the send schedule of serve.py get_request, and the open-loop send loop shared with
// `type: synthetic` (OpenLoopWorkload, whose max_concurrency is the tool's asyncio semaphore). The dataset files are
// JSONL read with nlohmann_json; their fields are documented in workloads/README.md.
#include "workloads/bench_serve_workload.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/input_file.h"
#include "workloads/content_ids.h"
#include "workloads/open_loop_workload.h"
#include "workloads/python_random.h"

namespace servesim::workloads {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// datasets.py is_valid_sequence, with the defaults every dataset of the tool uses: a prompt and an output of at
// least 4 tokens (the output check is skipped when --sharegpt-output-len fixes the output), a prompt of at most
// 1024 tokens and prompt + output of at most 2048.
bool is_valid_sequence(std::int64_t prompt_tokens, std::int64_t output_tokens, bool skip_output_check) {
    constexpr std::int64_t kMinLen = 4;
    constexpr std::int64_t kMaxPromptLen = 1024;
    constexpr std::int64_t kMaxTotalLen = 2048;
    return prompt_tokens >= kMinLen && (skip_output_check || output_tokens >= kMinLen) &&
           prompt_tokens <= kMaxPromptLen && prompt_tokens + output_tokens <= kMaxTotalLen;
}

bool is_inf_text(const YamlMap& m, std::string_view key) {
    const YAML::Node n = m.node(key);
    const std::string text = n.IsScalar() ? n.Scalar() : "";
    return text == "inf" || text == ".inf" || text == "Inf" || text == ".Inf";
}

double positive_or_inf(const YamlMap& m, std::string_view key, double fallback) {
    if (!m.has(key)) {
        return fallback;
    }
    if (is_inf_text(m, key)) {
        return kInf;
    }
    const double v = m.get<double>(key);
    if (!(v > 0)) {
        m.fail(key, fmt::format("must be a positive number or inf, got {}", v));
    }
    return v;
}

double range_ratio(const YamlMap& m, std::string_view key) {
    const double r = m.get<double>(key);
    if (!(r >= 0 && r < 1)) {
        m.fail(key, fmt::format("must lie in [0, 1), got {}", r));
    }
    return r;
}

std::int64_t non_negative(const YamlMap& m, std::string_view key, std::int64_t fallback) {
    const auto v = m.get_or<std::int64_t>(key, fallback);
    if (v < 0) {
        m.fail(key, fmt::format("must be non-negative, got {}", v));
    }
    return v;
}

// Each dataset's own keys, refused with any other dataset.
struct DatasetKeys {
    std::string_view dataset;
    std::vector<std::string_view> keys;
};

const std::vector<DatasetKeys>& dataset_keys() {
    static const std::vector<DatasetKeys> table = {
        {"random", {"random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len"}},
        {"prefix_repetition",
         {"prefix_repetition_prefix_len", "prefix_repetition_suffix_len", "prefix_repetition_num_prefixes",
          "prefix_repetition_output_len"}},
        {"custom", {"dataset_path", "custom_output_len"}},
        {"sharegpt", {"dataset_path", "sharegpt_output_len", "sharegpt_include_multi_turn", "sharegpt_max_turns"}},
    };
    return table;
}

// One JSON object per non-blank line; `on_object(json, line)`.
template <typename F>
void read_jsonl(const std::string& path, F&& on_object) {
    std::ifstream in = open_input_file(path, "dataset file");
    std::string buffer;
    int line = 0;
    while (std::getline(in, buffer)) {
        ++line;
        if (buffer.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(buffer);
        } catch (const nlohmann::json::parse_error& e) {
            throw ConfigError(path, line, "", fmt::format("malformed JSON at byte {}: {}", e.byte, e.what()));
        }
        if (!j.is_object()) {
            throw ConfigError(path, line, "", "expected a JSON object per line");
        }
        on_object(j, line);
    }
}

std::int64_t json_count(
    const nlohmann::json& v, const std::string& path, int line, const char* field, std::int64_t min) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < min) {
        throw ConfigError(path, line, field, fmt::format("expected an integer >= {}, got {}", min, v.dump()));
    }
    return v.get<std::int64_t>();
}

struct Entry {
    std::uint64_t index = 0;                    // 0-based among the file's entries: content ids derive from it
    std::vector<std::int64_t> messages;         // sharegpt: token counts, user first; custom: {prompt_len}
    std::optional<std::int64_t> output_tokens;  // custom's output_tokens field
};

// custom: {"prompt_len": n, "output_tokens": m}; `prompt` (text) and other fields are ignored.
std::vector<Entry> read_custom(const BenchServeConfig& c) {
    std::vector<Entry> out;
    read_jsonl(c.dataset_path, [&](const nlohmann::json& j, int line) {
        Entry e;
        e.index = out.size();
        const auto it = j.find("prompt_len");
        if (it == j.end()) {
            throw ConfigError(c.dataset_path, line, "prompt_len",
                              "missing field: servesim needs each prompt's token count (it does not tokenize "
                              "`prompt`)");
        }
        e.messages.push_back(json_count(*it, c.dataset_path, line, "prompt_len", 1));
        if (const auto o = j.find("output_tokens"); o != j.end()) {
            e.output_tokens = json_count(*o, c.dataset_path, line, "output_tokens", 1);
        } else if (c.custom_output_len == -1) {
            throw ConfigError(c.dataset_path, line, "output_tokens",
                              "missing field: with custom_output_len -1 every line needs output_tokens, as the "
                              "tool requires");
        }
        out.push_back(std::move(e));
    });
    return out;
}

// sharegpt: {"conversations": [user tokens, assistant tokens, ...]} or {"input_len": n, "output_len": m}. Entries
// with fewer than two messages are dropped, as ShareGPTDataset.load_data drops them (after numbering, so an entry's
// content id does not depend on its neighbours).
std::vector<Entry> read_sharegpt(const BenchServeConfig& c) {
    std::vector<Entry> out;
    std::uint64_t index = 0;
    read_jsonl(c.dataset_path, [&](const nlohmann::json& j, int line) {
        Entry e;
        e.index = index++;
        if (const auto conv = j.find("conversations"); conv != j.end()) {
            if (!conv->is_array()) {
                throw ConfigError(c.dataset_path, line, "conversations",
                                  "expected an array of message token counts, got " + conv->dump());
            }
            for (const auto& v : *conv) {
                e.messages.push_back(json_count(v, c.dataset_path, line, "conversations", 0));
            }
        } else if (j.contains("input_len") && j.contains("output_len")) {
            e.messages.push_back(json_count(j["input_len"], c.dataset_path, line, "input_len", 0));
            e.messages.push_back(json_count(j["output_len"], c.dataset_path, line, "output_len", 0));
        } else {
            throw ConfigError(c.dataset_path, line, "",
                              "expected `conversations` (message token counts) or `input_len` and `output_len`");
        }
        if (e.messages.size() >= 2) {
            out.push_back(std::move(e));
        }
    });
    return out;
}

// BenchmarkDataset.maybe_oversample_requests: random.seed(seed), then random.choice over the sampled requests for
// each missing one (copies: the same prompt content again).
void oversample(std::vector<BenchServeRequest>& requests, const BenchServeConfig& c) {
    if (c.no_oversample || static_cast<std::int64_t>(requests.size()) >= c.num_prompts) {
        return;
    }
    PythonRandom rng(c.seed);
    const std::size_t sampled = requests.size();
    const auto needed = static_cast<std::size_t>(c.num_prompts) - sampled;
    for (std::size_t i = 0; i < needed; ++i) {
        requests.push_back(requests[rng.choice_index(sampled)]);
    }
}

void fail_empty(const BenchServeConfig& c, const std::string& why) {
    throw ConfigError(c.dataset_path, 0, "",
                      "no request can be sampled from this dataset (workload.dataset_path): " + why);
}

std::vector<BenchServeRequest> sample_random(const BenchServeConfig& c, core::RngStream& rng) {
    // utils.py get_sampling_params: input in [floor(L(1−r)), ceil(L(1+r))], output likewise with a floor of 1,
    // both integer-uniform and inclusive. The tokenizer's special tokens (subtracted from L by the tool, then added
    // back by the server) are taken as 0.
    const auto lo_in = static_cast<std::int64_t>(
        std::floor(static_cast<double>(c.random_input_len) * (1.0 - c.random_input_range_ratio)));
    const auto hi_in = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(c.random_input_len) * (1.0 + c.random_input_range_ratio)));
    const auto lo_out =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(static_cast<double>(c.random_output_len) *
                                                                       (1.0 - c.random_output_range_ratio))));
    const auto hi_out =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(static_cast<double>(c.random_output_len) *
                                                                      (1.0 + c.random_output_range_ratio))));
    std::vector<BenchServeRequest> out(static_cast<std::size_t>(c.num_prompts));
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::int64_t input = rng.uniform_int(lo_in, hi_in);
        out[i].output_tokens = rng.uniform_int(lo_out, hi_out);
        if (c.random_prefix_len > 0) {
            out[i].prompt.push_back({dataset_prefix_content(0), c.random_prefix_len});  // generated once
        }
        if (input > 0) {
            out[i].prompt.push_back({unique_prompt_content(i), input});  // (offset + i + arange) % vocab: unique
        }
    }
    return out;
}

std::vector<BenchServeRequest> sample_prefix_repetition(const BenchServeConfig& c) {
    // PrefixRepetitionRandomDataset.sample: num_prompts // num_prefixes prompts per prefix, built prefix by prefix,
    // then random.shuffle (random.seed(seed) in the constructor; nothing else draws from `random` in between).
    const std::int64_t per_prefix = c.num_prompts / c.prefix_repetition_num_prefixes;
    std::vector<BenchServeRequest> out;
    out.reserve(static_cast<std::size_t>(per_prefix * c.prefix_repetition_num_prefixes));
    for (std::int64_t p = 0; p < c.prefix_repetition_num_prefixes; ++p) {
        for (std::int64_t k = 0; k < per_prefix; ++k) {
            BenchServeRequest r;
            if (c.prefix_repetition_prefix_len > 0) {
                r.prompt.push_back(
                    {dataset_prefix_content(static_cast<std::uint64_t>(p)), c.prefix_repetition_prefix_len});
            }
            if (c.prefix_repetition_suffix_len > 0) {
                r.prompt.push_back({unique_prompt_content(out.size()), c.prefix_repetition_suffix_len});
            }
            r.output_tokens = std::max<std::int64_t>(1, c.prefix_repetition_output_len);
            out.push_back(std::move(r));
        }
    }
    if (!c.disable_shuffle) {
        PythonRandom(c.seed).shuffle(out);
    }
    return out;
}

std::vector<BenchServeRequest> sample_custom(const BenchServeConfig& c) {
    // CustomDataset: load_data shuffles the lines (random.seed(seed)); sample takes the first num_prompts.
    auto entries = read_custom(c);
    if (entries.empty()) {
        fail_empty(c, "the file has no line");
    }
    if (!c.disable_shuffle) {
        PythonRandom(c.seed).shuffle(entries);
    }
    std::vector<BenchServeRequest> out;
    for (const auto& e : entries) {
        if (static_cast<std::int64_t>(out.size()) >= c.num_prompts) {
            break;
        }
        BenchServeRequest r;
        r.prompt.push_back({dataset_entry_content(e.index), e.messages[0]});
        r.output_tokens = c.custom_output_len == -1 ? *e.output_tokens : std::max<std::int64_t>(1, c.custom_output_len);
        out.push_back(std::move(r));
    }
    oversample(out, c);
    return out;
}

std::vector<BenchServeRequest> sample_sharegpt(const BenchServeConfig& c) {
    // ShareGPTDataset: load_data shuffles the entries (random.seed(seed)); sample walks them in that order, skips
    // what is_valid_sequence refuses, stops at num_prompts. Single-turn: the first user message and the first answer's
    // length. With sharegpt_include_multi_turn (vLLM PR #54783, open): one request per answer, its prompt the
    // conversation so far with the dataset's answers — so turn k+1 does not wait for turn k and never contains what
    // the server generated.
    auto entries = read_sharegpt(c);
    if (entries.empty()) {
        fail_empty(c, "no entry has two messages");
    }
    if (!c.disable_shuffle) {
        PythonRandom(c.seed).shuffle(entries);
    }
    const bool fixed_output = c.sharegpt_output_len.has_value();
    std::vector<BenchServeRequest> out;
    for (const auto& e : entries) {
        const std::size_t pairs = e.messages.size() / 2;
        const std::size_t turns =
            c.sharegpt_include_multi_turn ? std::min<std::size_t>(pairs, c.sharegpt_max_turns.value_or(pairs)) : 1;
        core::TokenContent history;
        std::int64_t history_tokens = 0;
        for (std::size_t t = 0; t < turns; ++t) {
            if (static_cast<std::int64_t>(out.size()) >= c.num_prompts) {
                break;
            }
            const std::int64_t user = e.messages[2 * t];
            const std::int64_t answer = e.messages[2 * t + 1];
            if (user > 0) {
                history.push_back({dataset_message_content(e.index, 2 * t), user});
            }
            history_tokens += user;
            const std::int64_t output = fixed_output ? *c.sharegpt_output_len : answer;
            if (is_valid_sequence(history_tokens, output, fixed_output)) {
                out.push_back({history, std::max<std::int64_t>(1, output)});
            }
            if (answer > 0) {
                history.push_back({dataset_message_content(e.index, 2 * t + 1), answer});  // the dataset's answer
            }
            history_tokens += answer;
        }
        if (static_cast<std::int64_t>(out.size()) >= c.num_prompts) {
            break;
        }
    }
    if (out.empty()) {
        fail_empty(c, "is_valid_sequence refuses every entry (prompt 4..1024 tokens, output >= 4, total <= 2048)");
    }
    oversample(out, c);
    return out;
}

class ListSource final : public OpenLoopSource {
  public:
    ListSource(std::vector<BenchServeRequest> requests, std::vector<core::SimTime> times, std::string description)
        : requests_(std::move(requests)), times_(std::move(times)), description_(std::move(description)) {}

    std::optional<OpenLoopRequest> next(std::int64_t index) override {
        const auto i = static_cast<std::size_t>(index);
        if (i >= requests_.size()) {
            return std::nullopt;
        }
        return OpenLoopRequest{times_[i], std::move(requests_[i].prompt), requests_[i].output_tokens};
    }

    std::string describe() const override { return description_; }

  private:
    std::vector<BenchServeRequest> requests_;
    std::vector<core::SimTime> times_;
    std::string description_;
};

std::string describe_rate(const BenchServeConfig& c) {
    if (c.ramp_up) {
        return fmt::format("{} ramp-up {:g} → {:g} req/s, burstiness {:g}",
                           c.ramp_up->exponential ? "exponential" : "linear", c.ramp_up->start_rps, c.ramp_up->end_rps,
                           c.burstiness);
    }
    if (std::isinf(c.request_rate_per_s)) {
        return "all at t = 0";
    }
    if (std::isinf(c.burstiness)) {
        return fmt::format("{:g} req/s, constant gaps", c.request_rate_per_s);
    }
    return fmt::format("{:g} req/s, burstiness {:g}", c.request_rate_per_s, c.burstiness);
}

}  // namespace

BenchServeConfig parse_bench_serve_workload(const YamlMap& m, std::uint64_t seed) {
    m.allow_only({"type",
                  "request_timeout",
                  "request_rate",
                  "burstiness",
                  "ramp_up_strategy",
                  "ramp_up_start_rps",
                  "ramp_up_end_rps",
                  "max_concurrency",
                  "num_prompts",
                  "seed",
                  "dataset_name",
                  "dataset_path",
                  "disable_shuffle",
                  "no_oversample",
                  "random_input_len",
                  "random_output_len",
                  "random_range_ratio",
                  "random_prefix_len",
                  "prefix_repetition_prefix_len",
                  "prefix_repetition_suffix_len",
                  "prefix_repetition_num_prefixes",
                  "prefix_repetition_output_len",
                  "custom_output_len",
                  "sharegpt_output_len",
                  "sharegpt_include_multi_turn",
                  "sharegpt_max_turns"});
    BenchServeConfig c;
    c.request_rate_per_s = positive_or_inf(m, "request_rate", kInf);
    c.burstiness = positive_or_inf(m, "burstiness", 1.0);
    if (!std::isinf(c.request_rate_per_s)) {
        check_rate_range(m, "request_rate", c.request_rate_per_s);
    }
    if (!std::isinf(c.burstiness) && !(c.burstiness >= 1e-6 && c.burstiness <= 1e6)) {
        m.fail("burstiness", fmt::format("must lie in [1e-06, 1e+06] or be inf, got {:g}", c.burstiness));
    }
    if (m.has("ramp_up_strategy")) {
        // serve.py main's checks: no request_rate, both ends given, start <= end; a rate of 0 fails get_request's
        // assertion (linear from 0) or is refused (exponential), so the start must be positive here.
        const auto strategy = m.get<std::string>("ramp_up_strategy");
        if (strategy != "linear" && strategy != "exponential") {
            m.fail("ramp_up_strategy", "unknown strategy '" + strategy + "'; allowed: linear, exponential");
        }
        if (m.has("request_rate")) {
            m.fail("request_rate", "not used with ramp_up_strategy (the ramp sets the rate), as the tool refuses it");
        }
        BenchServeRampUp r;
        r.exponential = strategy == "exponential";
        r.start_rps = m.get<double>("ramp_up_start_rps");
        r.end_rps = m.get<double>("ramp_up_end_rps");
        if (!(r.start_rps > 0)) {
            m.fail("ramp_up_start_rps",
                   fmt::format("must be positive (the first request's rate), got {}", r.start_rps));
        }
        check_rate_range(m, "ramp_up_start_rps", r.start_rps);
        check_rate_range(m, "ramp_up_end_rps", r.end_rps);
        if (r.end_rps < r.start_rps) {
            m.fail("ramp_up_end_rps",
                   fmt::format("must be at least ramp_up_start_rps ({}), got {}", r.start_rps, r.end_rps));
        }
        c.ramp_up = r;
    } else if (m.has("ramp_up_start_rps") || m.has("ramp_up_end_rps")) {
        const auto key = m.has("ramp_up_start_rps") ? "ramp_up_start_rps" : "ramp_up_end_rps";
        m.fail(key, "only used with ramp_up_strategy");
    }
    if (m.has("max_concurrency")) {
        c.max_concurrency = m.get_in_range<std::int64_t>("max_concurrency", 1, std::int64_t{1} << 40);
    }
    c.request_timeout = parse_request_timeout(m);
    // At most 1e8 prompts: the client's schedule holds one send time per prompt (800 MB at the cap;
    // docs/INPUT-RANGES.md), ten times the largest run the benchmarks make.
    c.num_prompts =
        m.has("num_prompts") ? m.get_in_range<std::int64_t>("num_prompts", 1, 100'000'000) : c.num_prompts;
    // The schedule spans num_prompts / rate seconds (the slowest rate of a ramp): inside the simulated clock.
    const double slowest_rps = c.ramp_up ? c.ramp_up->start_rps : c.request_rate_per_s;
    if (static_cast<double>(c.num_prompts) / slowest_rps > kMaxDurationS) {
        m.fail(c.ramp_up ? "ramp_up_start_rps" : "request_rate",
               fmt::format("{} prompts at {:g} requests per second span {:g} s, beyond the simulated clock's range "
                           "(at most {:.0e} s)",
                           c.num_prompts, slowest_rps, static_cast<double>(c.num_prompts) / slowest_rps,
                           kMaxDurationS));
    }
    c.seed = m.has("seed") ? static_cast<std::uint64_t>(
                                 m.get_in_range<std::int64_t>("seed", 0, std::numeric_limits<std::int64_t>::max()))
                           : seed;
    c.dataset_name = m.get_or<std::string>("dataset_name", "random");
    const auto& table = dataset_keys();
    const auto own =
        std::find_if(table.begin(), table.end(), [&](const auto& d) { return d.dataset == c.dataset_name; });
    if (own == table.end()) {
        m.fail("dataset_name",
               "unknown dataset '" + c.dataset_name + "'; allowed: random, prefix_repetition, custom, sharegpt");
    }
    for (const auto& d : table) {
        for (const auto key : d.keys) {
            if (m.has(key) && std::find(own->keys.begin(), own->keys.end(), key) == own->keys.end()) {
                m.fail(key, "not used with `dataset_name: " + c.dataset_name + "`");
            }
        }
    }
    c.disable_shuffle = m.get_or<bool>("disable_shuffle", false);
    c.no_oversample = m.get_or<bool>("no_oversample", false);

    if (c.dataset_name == "random") {
        c.random_input_len = non_negative(m, "random_input_len", c.random_input_len);
        c.random_output_len = non_negative(m, "random_output_len", c.random_output_len);
        c.random_prefix_len = non_negative(m, "random_prefix_len", c.random_prefix_len);
        if (m.has("random_range_ratio")) {
            if (m.node("random_range_ratio").IsMap()) {
                const YamlMap r = m.map("random_range_ratio");
                r.allow_only({"input", "output"});
                c.random_input_range_ratio = range_ratio(r, "input");
                c.random_output_range_ratio = range_ratio(r, "output");
            } else {
                c.random_input_range_ratio = c.random_output_range_ratio = range_ratio(m, "random_range_ratio");
            }
        }
        const double lowest = static_cast<double>(c.random_prefix_len) +
                              std::floor(static_cast<double>(c.random_input_len) * (1.0 - c.random_input_range_ratio));
        if (lowest < 1) {
            m.fail("random_input_len",
                   "the shortest prompt (random_prefix_len + floor(random_input_len·(1 − input range ratio))) would "
                   "have no token; the tool refuses this too");
        }
    } else if (c.dataset_name == "prefix_repetition") {
        c.prefix_repetition_prefix_len =
            non_negative(m, "prefix_repetition_prefix_len", c.prefix_repetition_prefix_len);
        c.prefix_repetition_suffix_len =
            non_negative(m, "prefix_repetition_suffix_len", c.prefix_repetition_suffix_len);
        c.prefix_repetition_output_len =
            non_negative(m, "prefix_repetition_output_len", c.prefix_repetition_output_len);
        if (m.has("prefix_repetition_num_prefixes")) {
            c.prefix_repetition_num_prefixes =
                m.get_in_range<std::int64_t>("prefix_repetition_num_prefixes", 1, std::int64_t{1} << 32);
        }
        if (c.num_prompts < c.prefix_repetition_num_prefixes) {
            m.fail(m.has("num_prompts") ? "num_prompts" : "prefix_repetition_num_prefixes",
                   fmt::format("num_prompts ({}) must be at least prefix_repetition_num_prefixes ({}), as the tool "
                               "requires",
                               c.num_prompts, c.prefix_repetition_num_prefixes));
        }
        if (c.prefix_repetition_prefix_len + c.prefix_repetition_suffix_len < 1) {
            m.fail("prefix_repetition_suffix_len", "a prompt needs at least one token");
        }
    } else {
        c.dataset_path = resolve_trace_path(m.get<std::string>("dataset_path"), m.file());
        try {
            check_input_file(c.dataset_path, "dataset file", kNoFileSizeBound);
        } catch (const ConfigError& e) {
            m.fail("dataset_path", e.what());
        }
        if (c.dataset_name == "custom") {
            // Read as a number: YamlMap's integer reader refuses negative values, and -1 is the tool's "from the
            // file".
            const double written = m.get_or<double>("custom_output_len", static_cast<double>(c.custom_output_len));
            c.custom_output_len = static_cast<std::int64_t>(written);
            if (written != std::floor(written) || (c.custom_output_len != -1 && c.custom_output_len < 1)) {
                m.fail("custom_output_len",
                       fmt::format("must be at least 1, or -1 to use each line's output_tokens; got {}", written));
            }
        } else {
            if (m.has("sharegpt_output_len")) {
                c.sharegpt_output_len = m.get_in_range<std::int64_t>("sharegpt_output_len", 1, std::int64_t{1} << 32);
            }
            c.sharegpt_include_multi_turn = m.get_or<bool>("sharegpt_include_multi_turn", false);
            if (m.has("sharegpt_max_turns")) {
                if (!c.sharegpt_include_multi_turn) {
                    m.fail("sharegpt_max_turns", "only used with `sharegpt_include_multi_turn: true`");
                }
                c.sharegpt_max_turns = m.get_in_range<std::int64_t>("sharegpt_max_turns", 1, std::int64_t{1} << 32);
            }
        }
    }
    return c;
}

std::vector<BenchServeRequest> sample_bench_serve_dataset(const BenchServeConfig& config,
                                                          core::RngStream& lengths_rng) {
    if (config.dataset_name == "random") {
        return sample_random(config, lengths_rng);
    }
    if (config.dataset_name == "prefix_repetition") {
        return sample_prefix_repetition(config);
    }
    if (config.dataset_name == "custom") {
        return sample_custom(config);
    }
    SERVESIM_CHECK(config.dataset_name == "sharegpt", "unknown dataset '{}'", config.dataset_name);
    return sample_sharegpt(config);
}

std::vector<core::SimTime> bench_serve_schedule(std::int64_t num_requests,
                                                double request_rate_per_s,
                                                double burstiness,
                                                core::RngStream& gaps_rng,
                                                const std::optional<BenchServeRampUp>& ramp_up) {
    // serve.py get_request (PR #21108, v0.10.0): a gap per request — 0 at rate inf, 1/rate at burstiness inf, else
    // Gamma(shape = burstiness, scale = 1/(rate·burstiness)) — summed from the start, so the first request leaves
    // after one gap; then, without a ramp-up, every time is scaled so the last request leaves at exactly
    // num_requests / rate. With a ramp-up the rate of request i is start + (end − start)·p (linear) or
    // start·(end/start)^p (exponential), p = i / max(n − 1, 1) (_get_current_request_rate).
    std::vector<double> delay_s(static_cast<std::size_t>(num_requests), 0.0);
    double total_s = 0;
    for (std::size_t i = 0; i < delay_s.size(); ++i) {
        auto& d = delay_s[i];
        double rate = request_rate_per_s;
        if (ramp_up) {
            const double progress =
                static_cast<double>(i) / static_cast<double>(std::max<std::int64_t>(num_requests - 1, 1));
            rate = ramp_up->exponential ? ramp_up->start_rps * std::pow(ramp_up->end_rps / ramp_up->start_rps, progress)
                                        : ramp_up->start_rps + (ramp_up->end_rps - ramp_up->start_rps) * progress;
        }
        if (std::isinf(rate)) {
            d = 0;
        } else if (std::isinf(burstiness)) {
            d = 1.0 / rate;
        } else {
            d = gaps_rng.gamma(burstiness, 1.0 / (rate * burstiness));
        }
        total_s += d;
        d = total_s;
    }
    const double factor =
        !ramp_up && total_s != 0 ? (static_cast<double>(num_requests) / request_rate_per_s) / total_s : 1.0;
    std::vector<core::SimTime> out;
    out.reserve(delay_s.size());
    for (const double d : delay_s) {
        out.push_back(core::SimTime::zero() + core::Duration::from_s_capped(d * factor));
    }
    return out;
}

std::unique_ptr<Workload> make_bench_serve_workload(const BenchServeConfig& config, std::uint64_t) {
    core::RngStream lengths_rng(config.seed, "bench_serve.lengths");
    core::RngStream gaps_rng(config.seed, "bench_serve.arrivals");
    auto requests = sample_bench_serve_dataset(config, lengths_rng);
    auto times = bench_serve_schedule(static_cast<std::int64_t>(requests.size()), config.request_rate_per_s,
                                      config.burstiness, gaps_rng, config.ramp_up);
    std::string description =
        fmt::format("vllm bench serve, {} × {}, {}", requests.size(), config.dataset_name, describe_rate(config));
    return std::make_unique<OpenLoopWorkload>(
        std::make_unique<ListSource>(std::move(requests), std::move(times), std::move(description)), RequestBounds{},
        config.max_concurrency, config.request_timeout);
}

}  // namespace servesim::workloads
