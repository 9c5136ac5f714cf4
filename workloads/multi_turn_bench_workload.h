// `type: multi_turn_bench` — the clients of vLLM's benchmarks/multi_turn/benchmark_serving_multi_turn.py
// (client_main, get_client_config, main_mp): num_clients closed-loop clients share one queue of generated
// conversations; each keeps max_active_conversations / num_clients of them active, picks one per request
// (round_robin: the deque's right end, a continued conversation re-enters at the left; random: random.choice), sends
// that conversation's whole history plus the next user message, waits for the answer (whose length is the dataset's
// answer length, min_tokens = max_tokens), then sleeps an exponential time if request_rate > 0. A client stops when
// it reaches its share of max_num_requests or finds the queue empty; by default (early stop) the first client to stop
// stops them all, each after its request in flight.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/rng.h"
#include "workloads/conversation_generator.h"
#include "workloads/python_random.h"
#include "workloads/workload.h"

namespace servesim::workloads {

struct MultiTurnBenchConfig {
    ConversationGeneratorConfig conversations;
    std::int64_t num_clients = 1;
    std::int64_t max_active_conversations = 1;     // over all clients; default num_clients
    std::optional<std::int64_t> max_num_requests;  // over all clients
    std::optional<std::int64_t> max_turns;         // messages (user + assistant) per conversation
    double request_rate_per_s = 0;                 // per client, after each answer; 0 = no sleep
    bool random_sampling = false;                  // conversation_sampling: random (else round_robin)
    bool early_stop = true;                        // !no_early_stop
    std::uint64_t seed = 0;
    // `request_timeout` (the tool's --request-timeout-sec, whose own default is 120 s; none here unless set): a
    // request's time-out is max(it, 0.2 s × its max_tokens), as send_request stretches it.
    std::optional<core::Duration> request_timeout;
};

[[nodiscard]] MultiTurnBenchConfig parse_multi_turn_bench_workload(const YamlMap& m, std::uint64_t seed);

class MultiTurnBenchWorkload final : public Workload {
  public:
    MultiTurnBenchWorkload(MultiTurnBenchConfig config, std::vector<GeneratedConversation> conversations);

    std::optional<core::SimTime> next_arrival_time() override;
    RequestSpec pop_next_arrival() override;
    void on_request_finished(core::RequestId id, core::SimTime now) override;
    void on_request_timed_out(core::RequestId id, core::SimTime now) override;
    bool exhausted() const override;
    std::string describe() const override;

  private:
    struct Client {
        Client(PythonRandom choice, core::RngStream sleep) : choice_rng(choice), sleep_rng(sleep) {}

        PythonRandom choice_rng;              // random.seed(seed + client_id + 1), as client_main
        core::RngStream sleep_rng;            // the poisson sleeps
        std::vector<std::size_t> active;      // active_convs, in insertion order
        std::deque<std::size_t> round_robin;  // conv_id_queue
        std::int64_t num_answered = 0;        // num_successes
        bool task_queue_empty = false;
        bool exited = false;
    };

    struct Conversation {
        std::int64_t messages_used = 0;  // turns_count
        core::TokenContent history;      // what the next request sends before its user message
    };

    struct Send {
        std::size_t client = 0;
        std::size_t conversation = 0;
    };

    // The client's loop body from its top: stop checks, refill, pick a conversation; schedules its send at `t`.
    void wake(std::size_t client, core::SimTime t);
    void exit_client(std::size_t client, core::SimTime t);
    [[nodiscard]] std::int64_t turn_limit(std::size_t conversation) const;

    MultiTurnBenchConfig config_;
    std::vector<GeneratedConversation> generated_;
    std::vector<Conversation> conversations_;
    std::vector<Client> clients_;
    std::int64_t active_per_client_ = 1;
    std::optional<std::int64_t> requests_per_client_;
    std::size_t next_conversation_ = 0;                    // the shared task queue's head
    std::optional<core::SimTime> stop_time_;               // the first client's exit (early stop)
    using Pending = std::pair<std::int64_t, std::size_t>;  // (send ns, client): ties go to the lower client
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
    std::vector<std::optional<Send>> next_send_;         // per client, while pending
    std::unordered_map<std::uint64_t, Send> in_flight_;  // request id → who sent it (lookup only)
    std::int64_t num_sent_ = 0;
};

[[nodiscard]] std::unique_ptr<Workload> make_multi_turn_bench_workload(const MultiTurnBenchConfig& config);

}  // namespace servesim::workloads
