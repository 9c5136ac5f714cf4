// ApiServer: the request path outside the engine core (docs/REQUEST-PATH.md). A client times TTFT and E2E at its
// own end of vLLM's OpenAI-compatible server, so every request also spends:
//   in:  the HTTP request parsed and validated, the prompt rendered and tokenised in the API-server process
//        (vllm/entrypoints/openai/serving_completion.py, serving_engine.py; tokenisation runs on a one-worker thread
//        pool since vLLM PR #10635, `_tokenizer_executor = ThreadPoolExecutor(max_workers=1)`), then handed to the
//        engine-core process (AsyncLLM.add_request → EngineCoreClient over ZMQ, vllm/v1/engine/async_llm.py,
//        core_client.py);
//   out: each engine step's outputs go back over ZMQ as one message (EngineCoreOutputs), AsyncLLM's output handler
//        detokenises every request's new token and the server writes one SSE chunk per request
//        (vllm/v1/engine/output_processor.py OutputProcessor.process_outputs, detokenizer.py).
// The API server is one process: its event loop is one CPU that serves these jobs first come, first served, and the
// tokenizer thread a second one. At high concurrency the loop's per-chunk work is what queues, delaying every
// token (the reason for vLLM's `--api-server-count`). Each resource keeps only the time it is next free, so the
// model is O(1) per request and per step and its memory does not grow with the run.
// Calls must come in non-decreasing time (the event loop's order); a job enters its queue at the call's time.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/time.h"

namespace servesim::frontend {

// The request path's costs. All zero: no request path (the engine's own times, the default before issue 37).
struct RequestPathConfig {
    // Latency-only terms (no shared CPU): the client's own send/receive work and the network, each way, and the
    // ZMQ hand-off between the API server and the engine core, each way.
    double client_ms = 0;
    double handoff_ms = 0;
    // The API server's event loop, per request: HTTP receive, validation, prompt rendering, request set-up.
    double request_cpu_ms = 0;
    // The tokenizer thread, per prompt token.
    double tokenize_us_per_token = 0;
    // The event loop, per engine output message (one per engine step that sampled a token) and per request chunk
    // in it (incremental detokenisation, the SSE chunk's JSON and its write).
    double output_message_cpu_ms = 0;
    double chunk_cpu_us = 0;

    [[nodiscard]] bool enabled() const {
        return client_ms > 0 || handoff_ms > 0 || request_cpu_ms > 0 || tokenize_us_per_token > 0 ||
               output_message_cpu_ms > 0 || chunk_cpu_us > 0;
    }
    bool operator==(const RequestPathConfig&) const = default;
};

class ApiServer {
public:
    explicit ApiServer(const RequestPathConfig& config) : config_(config) {}

    // A request the client sent at `send`: when it reaches the engine core (its EngineCore.add_request).
    [[nodiscard]] core::SimTime admit(core::SimTime send, std::int64_t prompt_tokens);

    // An engine step that ended at `step_end` with `num_chunks` sampled tokens: when the client has them.
    [[nodiscard]] core::SimTime stream(core::SimTime step_end, std::int64_t num_chunks);

    [[nodiscard]] const RequestPathConfig& config() const { return config_; }

    // Busy time of the event loop and the tokenizer thread so far (for the run's report).
    [[nodiscard]] core::Duration loop_busy() const { return loop_busy_; }
    [[nodiscard]] core::Duration tokenizer_busy() const { return tokenizer_busy_; }

private:
    RequestPathConfig config_;
    core::SimTime loop_free_;       // the event loop's next idle time
    core::SimTime tokenizer_free_;  // the tokenizer thread's
    core::Duration loop_busy_{};
    core::Duration tokenizer_busy_{};
};

// The request path every run gets unless its scenario says otherwise (docs/REQUEST-PATH.md "Defaults and their
// sources").
[[nodiscard]] RequestPathConfig default_request_path();

// "request path: client 1 ms, ..." for a run's description; "none" when disabled.
[[nodiscard]] std::string describe(const RequestPathConfig& config);

}  // namespace servesim::frontend
