// Open-loop workloads: the shared send loop (bounds, max_concurrency), the synthetic source and the trace source, and
// their YAML readers. Each keeps exactly one request ahead of the simulator, so a trace streams in constant memory.
#include "workloads/open_loop_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "common/clock_range.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/token_range.h"
#include "workloads/content_ids.h"

namespace servesim::workloads {

OpenLoopWorkload::OpenLoopWorkload(std::unique_ptr<OpenLoopSource> source,
                                   RequestBounds bounds,
                                   std::optional<std::int64_t> max_concurrency,
                                   std::optional<core::Duration> request_timeout)
    : source_(std::move(source)),
      bounds_(bounds),
      max_concurrency_(max_concurrency),
      request_timeout_(request_timeout) {
    advance();
}

void OpenLoopWorkload::advance() {
    next_.reset();
    if (bounds_.count_reached(num_sent_)) {
        return;
    }
    next_ = source_->next(num_sent_);
    if (next_ && bounds_.end && next_->arrival > *bounds_.end) {
        next_.reset();
    }
}

std::optional<core::SimTime> OpenLoopWorkload::next_arrival_time() {
    if (!next_) {
        return std::nullopt;
    }
    if (max_concurrency_ && static_cast<std::int64_t>(in_flight_.size()) >= *max_concurrency_) {
        return std::nullopt;  // held until a request finishes
    }
    const core::SimTime send = std::max(next_->arrival, not_before_);
    if (bounds_.end && send > *bounds_.end) {
        next_.reset();  // it would leave after `duration`: nothing more is sent
        return std::nullopt;
    }
    return send;
}

RequestSpec OpenLoopWorkload::pop_next_arrival() {
    const auto send = next_arrival_time();
    SERVESIM_CHECK(send.has_value(), "pop_next_arrival with nothing ready ({} sent)", num_sent_);
    RequestSpec r;
    r.id = core::RequestId{static_cast<std::uint64_t>(num_sent_)};
    r.arrival = *send;
    r.prompt = std::move(next_->prompt);
    r.max_output_tokens = next_->max_output_tokens;
    r.answer_content = answer_content(r.id);
    r.timeout = request_timeout_;
    in_flight_.insert(core::to_int(r.id));
    ++num_sent_;
    advance();
    return r;
}

void OpenLoopWorkload::on_request_finished(core::RequestId id, core::SimTime now) {
    const auto erased = in_flight_.erase(core::to_int(id));
    SERVESIM_CHECK(erased == 1, "request {} finished but is not in flight", core::to_int(id));
    not_before_ = std::max(not_before_, now);
}

void OpenLoopWorkload::on_request_timed_out(core::RequestId id, core::SimTime now) {
    // vllm bench serve: the request function catches the aiohttp time-out and returns a failed output, which leaves
    // limited_request_func's `async with semaphore` and frees the slot, as a finish does (serve.py).
    on_request_finished(id, now);
}

bool OpenLoopWorkload::exhausted() const {
    return !next_ || (bounds_.end && std::max(next_->arrival, not_before_) > *bounds_.end);
}

std::string OpenLoopWorkload::describe() const {
    std::string out = source_->describe();
    if (max_concurrency_) {
        out += fmt::format(", max concurrency {}", *max_concurrency_);
    }
    return out;
}

namespace {

std::optional<std::int64_t> parse_max_concurrency(const YamlMap& m) {
    if (!m.has("max_concurrency")) {
        return std::nullopt;
    }
    return m.get_in_range<std::int64_t>("max_concurrency", 1, std::int64_t{1} << 40);
}

class SyntheticSource final : public OpenLoopSource {
  public:
    SyntheticSource(SyntheticConfig config, std::uint64_t seed)
        : config_(std::move(config)),
          arrivals_(make_arrival_process(config_.arrival, core::RngStream(seed, "synthetic.arrivals"))),
          lengths_rng_(seed, "synthetic.lengths") {}

    std::optional<OpenLoopRequest> next(std::int64_t index) override {
        OpenLoopRequest r;
        if (index > 0) {
            time_ = time_ + arrivals_->next_gap();  // the first request leaves at t = 0, as in vllm bench serve
        }
        r.arrival = time_;
        if (config_.shared_prefix_tokens > 0) {
            r.prompt.push_back({shared_prefix_content(), config_.shared_prefix_tokens});
        }
        const std::int64_t unique_tokens = config_.prompt_tokens.sample(lengths_rng_);
        if (unique_tokens > 0) {
            r.prompt.push_back({unique_prompt_content(static_cast<std::uint64_t>(index)), unique_tokens});
        }
        r.max_output_tokens = config_.output_tokens.sample(lengths_rng_);
        return r;
    }

    std::string describe() const override {
        std::string out = fmt::format("synthetic, {}, prompt {} (+{} shared), output {}",
                                      describe_arrival(config_.arrival), config_.prompt_tokens.describe(),
                                      config_.shared_prefix_tokens, config_.output_tokens.describe());
        if (config_.bounds.num_requests) {
            out += fmt::format(", {} requests", *config_.bounds.num_requests);
        }
        return out;
    }

  private:
    SyntheticConfig config_;
    std::unique_ptr<ArrivalProcess> arrivals_;
    core::RngStream lengths_rng_;
    core::SimTime time_;
};

class TraceSource final : public OpenLoopSource {
  public:
    explicit TraceSource(TraceConfig config)
        : config_(std::move(config)), reader_(open_trace(config_.path, config_.format, config_.reader)) {}

    std::optional<OpenLoopRequest> next(std::int64_t) override {
        if (config_.limit && num_read_ >= *config_.limit) {
            return std::nullopt;
        }
        auto record = reader_->next();
        if (!record) {
            return std::nullopt;
        }
        ++num_read_;
        OpenLoopRequest r;
        const double arrival_s = record->arrival.s() * config_.time_scale;
        if (arrival_s > kMaxDurationS) {
            throw ConfigError(config_.path, static_cast<int>(record->line), "timestamp",
                              fmt::format("{:g} s after time_scale {:g} is beyond the simulated clock's range; "
                                          "allowed: up to {:.0e} s",
                                          arrival_s, config_.time_scale, kMaxDurationS));
        }
        r.arrival = core::SimTime::from_ns(
            static_cast<std::int64_t>(std::llround(static_cast<double>(record->arrival.ns()) * config_.time_scale)));
        r.prompt = std::move(record->prompt);
        r.max_output_tokens = std::max<std::int64_t>(1, record->output_tokens);  // vLLM needs max_tokens >= 1
        if (config_.max_output_tokens) {
            r.max_output_tokens = std::min(r.max_output_tokens, *config_.max_output_tokens);
        }
        return r;
    }

    std::string describe() const override {
        std::string out =
            fmt::format("trace {} ({})", std::filesystem::path(config_.path).filename().string(), config_.format);
        if (config_.time_scale != 1.0) {
            out += fmt::format(", time × {:g}", config_.time_scale);
        }
        return out;
    }

  private:
    TraceConfig config_;
    std::unique_ptr<TraceReader> reader_;
    std::int64_t num_read_ = 0;
};

}  // namespace

SyntheticConfig parse_synthetic_workload(const YamlMap& m) {
    m.allow_only({"type", "arrival", "rate", "burstiness", "prompt_tokens", "output_tokens", "shared_prefix_tokens",
                  "num_requests", "duration", "max_concurrency", "request_timeout"});
    SyntheticConfig c;
    c.arrival = parse_arrival(m, /*allow_infinite_rate=*/true);
    c.prompt_tokens = LengthDistribution::parse(m, "prompt_tokens", 0);
    c.output_tokens = LengthDistribution::parse(m, "output_tokens", 1);
    c.shared_prefix_tokens = parse_shared_prefix_tokens(m);
    check_prompt_not_empty(m, "prompt_tokens",
                           {{"shared_prefix_tokens", c.shared_prefix_tokens},
                            {"prompt_tokens", c.prompt_tokens.min_tokens()}});
    c.bounds = parse_request_bounds(m, /*require_one=*/true);
    c.max_concurrency = parse_max_concurrency(m);
    c.request_timeout = parse_request_timeout(m);
    return c;
}

std::unique_ptr<Workload> make_synthetic_workload(const SyntheticConfig& config, std::uint64_t seed) {
    return std::make_unique<OpenLoopWorkload>(std::make_unique<SyntheticSource>(config, seed), config.bounds,
                                              config.max_concurrency, config.request_timeout);
}

std::string resolve_trace_path(const std::string& written, const std::string& scenario_file) {
    namespace fs = std::filesystem;
    const fs::path p(written);
    if (p.is_absolute() || scenario_file.empty()) {
        return written;
    }
    const fs::path beside = fs::path(scenario_file).parent_path() / p;
    std::error_code ec;
    if (fs::exists(beside, ec)) {
        return beside.string();
    }
    return written;
}

TraceConfig parse_trace_workload(const YamlMap& m) {
    m.allow_only({"type", "trace", "format", "time_scale", "limit", "block_tokens", "num_requests", "duration",
                  "max_concurrency", "max_output_tokens", "request_timeout"});
    TraceConfig c;
    c.path = resolve_trace_path(m.get<std::string>("trace"), m.file());
    c.format = m.get<std::string>("format");
    const auto& formats = trace_formats();
    if (std::none_of(formats.begin(), formats.end(), [&](const auto& f) { return f.name == c.format; })) {
        std::string names;
        for (const auto& f : formats) {
            names += (names.empty() ? "" : ", ") + std::string(f.name);
        }
        m.fail("format", "unknown trace format '" + c.format + "'; allowed: " + names);
    }
    c.time_scale = m.get_or<double>("time_scale", 1.0);
    if (!(c.time_scale >= 0 && c.time_scale <= 1e6)) {
        m.fail("time_scale",
               fmt::format("must lie in [0, 1e6] (it multiplies inter-arrival times), got {:g}", c.time_scale));
    }
    if (m.has("limit")) {
        c.limit = m.get_in_range<std::int64_t>("limit", 1, std::numeric_limits<std::int64_t>::max());
    }
    if (m.has("max_output_tokens")) {
        c.max_output_tokens =
            m.get_in_range<std::int64_t>("max_output_tokens", 1, kMaxTokenCount);  // common/token_range.h
    }
    if (m.has("block_tokens")) {
        if (c.format != "mooncake") {
            m.fail("block_tokens", "only used with `format: mooncake`");
        }
        c.reader.block_tokens = m.get_in_range<std::int64_t>("block_tokens", 1, 1 << 20);
    }
    c.bounds = parse_request_bounds(m, /*require_one=*/false);
    c.max_concurrency = parse_max_concurrency(m);
    c.request_timeout = parse_request_timeout(m);
    try {
        check_input_file(c.path, "trace file", kNoFileSizeBound);
    } catch (const ConfigError& e) {
        m.fail("trace", e.what());
    }
    return c;
}

std::int64_t check_trace(const TraceConfig& config) {
    auto reader = open_trace(config.path, config.format, config.reader);
    std::int64_t n = 0;
    while ((!config.limit || n < *config.limit) && reader->next()) {
        ++n;
    }
    if (n == 0) {
        throw ConfigError(config.path + ": the trace holds no records (only a header or blank lines)");
    }
    return n;
}

std::unique_ptr<Workload> make_trace_workload(const TraceConfig& config) {
    return std::make_unique<OpenLoopWorkload>(std::make_unique<TraceSource>(config), config.bounds,
                                              config.max_concurrency, config.request_timeout);
}

}  // namespace servesim::workloads
