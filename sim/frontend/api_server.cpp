// The request path's queues; see api_server.h and docs/REQUEST-PATH.md.
#include "sim/frontend/api_server.h"

#include <fmt/format.h>

#include <algorithm>

namespace servesim::frontend {

core::SimTime ApiServer::admit(core::SimTime send, std::int64_t prompt_tokens) {
    // The client's half of the network first, then the event loop parses the request, the tokenizer thread encodes
    // the prompt, and the request crosses to the engine core.
    const core::SimTime at_server = send + core::Duration::from_ms(config_.client_ms);
    const core::Duration request = core::Duration::from_ms(config_.request_cpu_ms);
    const core::SimTime parsed = std::max(at_server, loop_free_) + request;
    loop_free_ = parsed;
    loop_busy_ += request;
    const core::Duration tokenize =
        core::Duration::from_us(config_.tokenize_us_per_token * static_cast<double>(prompt_tokens));
    const core::SimTime tokenized = std::max(parsed, tokenizer_free_) + tokenize;
    tokenizer_free_ = tokenized;
    tokenizer_busy_ += tokenize;
    return tokenized + core::Duration::from_ms(config_.handoff_ms);
}

core::SimTime ApiServer::stream(core::SimTime step_end, std::int64_t num_chunks) {
    const core::SimTime at_server = step_end + core::Duration::from_ms(config_.handoff_ms);
    const core::Duration work = core::Duration::from_ms(config_.output_message_cpu_ms) +
                                core::Duration::from_us(config_.chunk_cpu_us * static_cast<double>(num_chunks));
    const core::SimTime written = std::max(at_server, loop_free_) + work;
    loop_free_ = written;
    loop_busy_ += work;
    return written + core::Duration::from_ms(config_.client_ms);
}

RequestPathConfig default_request_path() {
    // One end-to-end constant, fitted (docs/REQUEST-PATH.md "Defaults and their sources"): client_ms by
    // `servesim calibrate --from-measurements RUN... --fit request-path` on the development set's runs at even
    // positions by name (7 not overloaded of 8; vLLM 0.15.1 on H100, inference-perf over HTTP), with the roofline as
    // of this change; the other 8 runs are the held-out check (docs/VALIDATION.md). It stands for everything on the
    // path that nothing here measures separately: HTTP in the client and the server, request validation,
    // tokenisation, the ZMQ hand-offs, detokenisation and the SSE write. The CPU terms stay 0 until measured.
    RequestPathConfig c;
    c.client_ms = 4.620;
    return c;
}

std::string describe(const RequestPathConfig& c) {
    if (!c.enabled()) {
        return "none";
    }
    // Only the terms that cost something, in the order a request meets them.
    std::string out;
    const auto add = [&out](double v, const std::string& text) {
        if (v > 0) {
            out += (out.empty() ? "" : ", ") + text;
        }
    };
    add(c.client_ms, fmt::format("client {:g} ms", c.client_ms));
    add(c.request_cpu_ms, fmt::format("request {:g} ms", c.request_cpu_ms));
    add(c.tokenize_us_per_token, fmt::format("tokenise {:g} us/token", c.tokenize_us_per_token));
    add(c.handoff_ms, fmt::format("hand-off {:g} ms", c.handoff_ms));
    add(c.output_message_cpu_ms, fmt::format("output {:g} ms/step", c.output_message_cpu_ms));
    add(c.chunk_cpu_us, fmt::format("{:g} us/chunk", c.chunk_cpu_us));
    return out + " (each way where it applies; docs/REQUEST-PATH.md)";
}

}  // namespace servesim::frontend
