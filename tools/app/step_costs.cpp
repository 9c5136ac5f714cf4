// The --step-costs batch and its term-by-term report; see step_costs.h.
#include "tools/app/step_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "common/error.h"

namespace servesim::app {

namespace {

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
    throw ConfigError("command line: --step-costs: '" + spec + "': " + why +
                      "; allowed: prefill=TOKENS, prefill=TOKENS@CACHED, prefill=SEQSxTOKENS[@CACHED], "
                      "decode=SEQSxCONTEXT or decode=SEQS (e.g. prefill=2048 decode=64x2048)");
}

std::int64_t whole(const std::string& spec, const std::string& text, std::int64_t lo) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
        bad(spec, "'" + text + "' is not a whole number");
    }
    if (v < lo || v > (std::int64_t{1} << 30)) {
        bad(spec, fmt::format("{} is out of range ({} to 2^30)", v, lo));
    }
    return v;
}

}  // namespace

BatchPart parse_batch_part(const std::string& spec) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos) {
        bad(spec, "expected KIND=SIZE");
    }
    const std::string kind = spec.substr(0, eq);
    std::string rest = spec.substr(eq + 1);
    BatchPart p;
    if (kind != "prefill" && kind != "decode") {
        bad(spec, "'" + kind + "' is not a batch part");
    }
    p.decode = kind == "decode";
    // A separator present with nothing after it is an empty number, not the form without the separator.
    std::optional<std::string> cached;
    if (const auto at = rest.find('@'); at != std::string::npos) {
        if (p.decode) {
            bad(spec, "a decode's context is written decode=SEQSxCONTEXT");
        }
        cached = rest.substr(at + 1);
        rest = rest.substr(0, at);
    }
    std::string first = rest;
    std::optional<std::string> second;
    if (const auto x = rest.find('x'); x != std::string::npos) {
        first = rest.substr(0, x);
        second = rest.substr(x + 1);
    }
    if (p.decode) {
        p.count = whole(spec, first, 1);
        p.chunk = 1;
        // The context includes the new token: cached = context − 1.
        p.cached = second ? whole(spec, *second, 1) - 1 : 0;
    } else {
        if (!second) {
            p.chunk = whole(spec, first, 1);
        } else {
            p.count = whole(spec, first, 1);
            p.chunk = whole(spec, *second, 1);
        }
        p.cached = cached ? whole(spec, *cached, 0) : 0;
    }
    return p;
}

engine::BatchShape batch_shape_of(const std::vector<BatchPart>& parts, const engine::LocalAttentionSpans& local) {
    engine::BatchShape s;
    s.num_local_spans = local.count;
    for (const auto& p : parts) {
        for (std::int64_t i = 0; i < p.count; ++i) {
            s.num_tokens += p.chunk;
            ++s.num_seqs;
            ++s.num_sampled_seqs;  // every part's chunk ends its prompt (a prefill) or samples (a decode)
            if (p.decode) {
                ++s.num_decode_seqs;
                s.decode_context_tokens += p.cached + 1;
                for (int j = 0; j < local.count; ++j) {
                    s.local[j].decode_context_tokens += local.spans[j].decode_keys(p.cached + 1);
                }
                continue;
            }
            ++s.num_prefill_seqs;
            s.num_prefill_tokens += p.chunk;
            s.prefill_attention_work +=
                static_cast<double>(p.chunk) * (static_cast<double>(p.cached) + static_cast<double>(p.chunk) / 2.0);
            s.prefill_max_context_tokens = std::max(s.prefill_max_context_tokens, p.cached + p.chunk);
            s.num_gdn_chunks += (p.chunk + 63) / 64;
            for (int j = 0; j < local.count; ++j) {
                const engine::LocalAttentionSpan& span = local.spans[j];
                s.local[j].prefill_attention_work += span.prefill_work(p.cached, p.chunk);
                s.local[j].prefill_max_context_tokens =
                    std::max(s.local[j].prefill_max_context_tokens, span.prefill_span_tokens(p.cached, p.chunk));
            }
        }
    }
    return s;
}

std::string describe_batch(const std::vector<BatchPart>& parts) {
    std::string out;
    for (const auto& p : parts) {
        out += (out.empty() ? "" : " + ") +
               (p.decode ? fmt::format("{} decode{} at context {}", p.count, p.count == 1 ? "" : "s", p.cached + 1)
                         : fmt::format("{}prefill of {} tokens after {} cached",
                                       p.count == 1 ? "" : fmt::format("{} × ", p.count), p.chunk, p.cached));
    }
    return out;
}

std::string step_costs_table(const engine::CostModel& cost, const std::vector<BatchPart>& parts) {
    const engine::BatchShape s = batch_shape_of(parts, cost.local_attention_spans());
    const std::vector<engine::StepTerm> terms = cost.step_terms(s);
    double total = 0;
    for (const auto& t : terms) {
        total += t.ms;
    }
    std::string out = fmt::format("-- step cost: {} --\n", cost.describe());
    out += fmt::format("batch: {} ({} token{}, {} sequence{})\n\n", describe_batch(parts), s.num_tokens,
                       s.num_tokens == 1 ? "" : "s", s.num_seqs, s.num_seqs == 1 ? "" : "s");
    out += fmt::format("{:<28}{:>12}{:>9}  {}\n", "term", "ms", "share", "source");
    for (const auto& t : terms) {
        out += fmt::format("{:<28}{:>12.4f}{:>8.1f}%  {}\n", t.name, t.ms, total > 0 ? 100.0 * t.ms / total : 0.0,
                           t.source);
    }
    out += fmt::format("{:<28}{:>12.4f}\n", "total", total);
    return out;
}

nlohmann::ordered_json step_costs_json(const engine::CostModel& cost, const std::vector<BatchPart>& parts) {
    const engine::BatchShape s = batch_shape_of(parts, cost.local_attention_spans());
    nlohmann::ordered_json j;
    j["cost_model"] = cost.describe();
    j["batch"] = describe_batch(parts);
    j["num_tokens"] = s.num_tokens;
    j["num_seqs"] = s.num_seqs;
    nlohmann::ordered_json terms = nlohmann::ordered_json::array();
    double total = 0;
    for (const auto& t : cost.step_terms(s)) {
        terms.push_back({{"term", t.name}, {"ms", t.ms}, {"source", t.source}});
        total += t.ms;
    }
    j["terms"] = terms;
    j["total_ms"] = total;
    return j;
}

}  // namespace servesim::app
