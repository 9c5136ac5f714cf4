// `type: multi_turn_bench`: reading the keys (the tool's flag names with underscores; the conversation generator's
// config inline or from the tool's own JSON file), and the clients' loop. A client decides its next step (stop,
// refill, pick a conversation) when its answer arrives, and sends after its sleep; an early stop at time T cancels
// every send scheduled after T, so each client still stops after the request it had in flight, as the tool's
// stop_event does.
#include "workloads/multi_turn_bench_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "workloads/content_ids.h"
#include "workloads/open_loop_workload.h"

namespace servesim::workloads {

MultiTurnBenchConfig parse_multi_turn_bench_workload(const YamlMap& m, std::uint64_t seed) {
    if (m.has("warmup_percentages") || m.has("warmup_step")) {
        const auto key = m.has("warmup_percentages") ? "warmup_percentages" : "warmup_step";
        m.fail(key,
               "not modelled here: servesim leaves warm-up out of the metrics by time; set the scenario's "
               "`warmup:` (workloads/README.md, multi_turn_bench)");
    }
    m.allow_only({"type", "input_file", "conversations", "num_clients", "max_active_conversations", "max_num_requests",
                  "max_turns", "request_rate", "conversation_sampling", "no_early_stop", "seed", "request_timeout"});
    MultiTurnBenchConfig c;
    if (m.has("input_file") == m.has("conversations")) {
        m.fail("conversations",
               "give exactly one of `conversations` (the generator's config) and `input_file` (the "
               "tool's generate_conversations JSON)");
    }
    if (m.has("input_file")) {
        const auto path = resolve_trace_path(m.get<std::string>("input_file"), m.file());
        if (!std::filesystem::exists(path)) {
            m.fail("input_file", "cannot open '" + path + "'");
        }
        c.conversations = parse_conversation_generator(YamlMap(load_yaml_file(path), path, ""));
    } else {
        c.conversations = parse_conversation_generator(m.map("conversations"));
    }
    const std::int64_t num_conversations = c.conversations.num_conversations;
    // get_client_config's checks, in its order.
    c.num_clients = m.get_in_range<std::int64_t>("num_clients", 1, 1'000'000);
    if (num_conversations < c.num_clients) {
        m.fail("num_clients", fmt::format("{} clients need at least as many conversations; the generator makes {}",
                                          c.num_clients, num_conversations));
    }
    if (m.has("max_num_requests")) {
        c.max_num_requests = m.get<std::int64_t>("max_num_requests");
        if (*c.max_num_requests / c.num_clients < 1) {
            m.fail("max_num_requests", fmt::format("must give each of the {} clients at least one request, got {}",
                                                   c.num_clients, *c.max_num_requests));
        }
    }
    c.max_active_conversations = m.get_or<std::int64_t>("max_active_conversations", c.num_clients);
    if (c.max_active_conversations > num_conversations) {
        m.fail("max_active_conversations",
               fmt::format("{} exceeds the {} conversations", c.max_active_conversations, num_conversations));
    }
    if (c.max_active_conversations / c.num_clients < 1) {
        m.fail("max_active_conversations",
               fmt::format("{} must be at least num_clients ({}): each client keeps max_active_conversations / "
                           "num_clients of them",
                           c.max_active_conversations, c.num_clients));
    }
    if (m.has("max_turns")) {
        c.max_turns = m.get_in_range<std::int64_t>("max_turns", 1, 1'000'000);
    }
    c.request_rate_per_s = m.get_or<double>("request_rate", 0.0);
    if (c.request_rate_per_s < 0) {
        m.fail("request_rate", fmt::format("must be non-negative requests per second per client (0 = no sleep), got {}",
                                           c.request_rate_per_s));
    }
    check_rate_range(m, "request_rate", c.request_rate_per_s, /*zero_allowed=*/true);
    const auto sampling = m.get_or<std::string>("conversation_sampling", "round_robin");
    if (sampling != "round_robin" && sampling != "random") {
        m.fail("conversation_sampling", "unknown value '" + sampling + "'; allowed: round_robin, random");
    }
    c.random_sampling = sampling == "random";
    c.early_stop = !m.get_or<bool>("no_early_stop", false);
    c.seed = m.has("seed") ? static_cast<std::uint64_t>(m.get_in_range<std::int64_t>("seed", 0, 1LL << 62)) : seed;
    c.request_timeout = parse_request_timeout(m);
    return c;
}

MultiTurnBenchWorkload::MultiTurnBenchWorkload(MultiTurnBenchConfig config,
                                               std::vector<GeneratedConversation> conversations)
    : config_(std::move(config)), generated_(std::move(conversations)), conversations_(generated_.size()) {
    active_per_client_ = config_.max_active_conversations / config_.num_clients;
    if (config_.max_num_requests) {
        requests_per_client_ = *config_.max_num_requests / config_.num_clients;
    }
    for (std::int64_t i = 0; i < config_.num_clients; ++i) {
        const auto index = static_cast<std::uint64_t>(i);
        clients_.emplace_back(PythonRandom(config_.seed + index + 1),
                              core::RngStream(config_.seed, "multi_turn.sleep", index));
    }
    next_send_.resize(clients_.size());
    for (std::size_t c = 0; c < clients_.size(); ++c) {
        wake(c, core::SimTime::zero());  // every client starts at t = 0; the lower index takes its conversations first
    }
}

std::int64_t MultiTurnBenchWorkload::turn_limit(std::size_t conversation) const {
    const auto messages = static_cast<std::int64_t>(generated_[conversation].message_tokens.size());
    return config_.max_turns ? std::min(*config_.max_turns, messages) : messages;
}

void MultiTurnBenchWorkload::exit_client(std::size_t client, core::SimTime t) {
    clients_[client].exited = true;
    if (config_.early_stop && (!stop_time_ || t < *stop_time_)) {
        stop_time_ = t;  // main_mp sets stop_event when the first client is done
    }
}

void MultiTurnBenchWorkload::wake(std::size_t client, core::SimTime t) {
    Client& cl = clients_[client];
    if (cl.exited) {
        return;
    }
    if (requests_per_client_ && cl.num_answered >= *requests_per_client_) {
        exit_client(client, t);
        return;
    }
    if (config_.early_stop && stop_time_ && t > *stop_time_) {
        cl.exited = true;  // stop_event seen at the top of the loop
        return;
    }
    while (static_cast<std::int64_t>(cl.active.size()) < active_per_client_ && !cl.task_queue_empty) {
        if (next_conversation_ < generated_.size()) {
            const std::size_t conv = next_conversation_++;
            if (conversations_[conv].messages_used <
                static_cast<std::int64_t>(generated_[conv].message_tokens.size())) {
                cl.active.push_back(conv);
                cl.round_robin.push_back(conv);
            }
        } else {
            cl.task_queue_empty = true;  // the client read its TERM_SIGNAL
        }
    }
    if (cl.active.empty() || cl.task_queue_empty) {
        exit_client(client, t);  // client_main leaves as soon as the queue is empty, even with active conversations
        return;
    }
    std::size_t conv = 0;
    if (config_.random_sampling) {
        conv = cl.active[cl.choice_rng.choice_index(cl.active.size())];
    } else {
        conv = cl.round_robin.back();
        cl.round_robin.pop_back();
    }
    next_send_[client] = Send{client, conv};
    pending_.push({t.ns(), client});
}

std::optional<core::SimTime> MultiTurnBenchWorkload::next_arrival_time() {
    if (pending_.empty()) {
        return std::nullopt;
    }
    const auto top = core::SimTime::from_ns(pending_.top().first);
    if (config_.early_stop && stop_time_ && top > *stop_time_) {
        while (!pending_.empty()) {  // every later send is cancelled: those clients see stop_event after waking
            clients_[pending_.top().second].exited = true;
            next_send_[pending_.top().second].reset();
            pending_.pop();
        }
        return std::nullopt;
    }
    return top;
}

RequestSpec MultiTurnBenchWorkload::pop_next_arrival() {
    const auto when = next_arrival_time();
    SERVESIM_CHECK(when.has_value(), "pop_next_arrival with nothing pending ({} sent)", num_sent_);
    const std::size_t client = pending_.top().second;
    pending_.pop();
    const Send s = *next_send_[client];
    next_send_[client].reset();
    Conversation& cv = conversations_[s.conversation];
    const GeneratedConversation& gen = generated_[s.conversation];

    // send_turn: messages[:turns_count] after the increment — the history and this user message.
    const auto user = static_cast<std::size_t>(cv.messages_used);
    cv.messages_used += 1;
    std::int64_t user_tokens = gen.message_tokens[user];
    if (user == 0 && gen.common_prefix_tokens > 0) {
        cv.history.push_back({conversation_common_prefix_content(), gen.common_prefix_tokens});
        user_tokens -= gen.common_prefix_tokens;
    }
    if (user_tokens > 0) {
        cv.history.push_back({conversation_message_content(s.conversation, user), user_tokens});
    }
    RequestSpec r;
    r.id = core::RequestId{static_cast<std::uint64_t>(num_sent_)};
    r.tenant = core::TenantId{static_cast<std::uint32_t>(client)};
    r.arrival = *when;
    r.turn = static_cast<int>(user / 2) + 1;
    r.session = static_cast<std::uint64_t>(s.conversation) + 1;  // a finite set: no end marker needed
    r.prompt = cv.history;
    r.max_output_tokens = gen.message_tokens[user + 1];  // min_tokens = max_tokens = the dataset's answer length
    r.answer_content = answer_content(r.id);
    if (config_.request_timeout) {
        // send_request: a token-based time-out of int(max_tokens × 0.2) s (a TPOT of 200 ms) replaces the base one
        // when longer.
        const core::Duration token_based = core::Duration::from_s(static_cast<double>(r.max_output_tokens / 5));
        r.timeout = std::max(*config_.request_timeout, token_based);
    }
    cv.history.push_back({r.answer_content, r.max_output_tokens});  // the server's answer replaces the dataset's
    in_flight_.emplace(core::to_int(r.id), s);
    ++num_sent_;
    return r;
}

void MultiTurnBenchWorkload::on_request_finished(core::RequestId id, core::SimTime now) {
    const auto it = in_flight_.find(core::to_int(id));
    SERVESIM_CHECK(it != in_flight_.end(), "request {} finished but is not in flight", core::to_int(id));
    const Send s = it->second;
    in_flight_.erase(it);
    Client& cl = clients_[s.client];
    ++cl.num_answered;
    Conversation& cv = conversations_[s.conversation];
    cv.messages_used += 1;  // the answer is now part of the context
    if (cv.messages_used >= turn_limit(s.conversation)) {
        cl.active.erase(std::find(cl.active.begin(), cl.active.end(), s.conversation));
    } else if (!config_.random_sampling) {
        cl.round_robin.push_front(s.conversation);  // appendleft: back of the queue
    }
    core::SimTime wake_time = now;
    if (config_.request_rate_per_s > 0) {
        wake_time = now + core::Duration::from_s_capped(cl.sleep_rng.exponential(config_.request_rate_per_s));
    }
    wake(s.client, wake_time);
}

void MultiTurnBenchWorkload::on_request_timed_out(core::RequestId id, core::SimTime now) {
    // client_main (max_retries 0, the tool's default): the asyncio TimeoutError counts a failure, drops the
    // conversation from the active ones and ends the client's loop at once (no sleep); with early stop the first
    // client out stops the others after their request in flight.
    const auto it = in_flight_.find(core::to_int(id));
    SERVESIM_CHECK(it != in_flight_.end(), "request {} timed out but is not in flight", core::to_int(id));
    const Send s = it->second;
    in_flight_.erase(it);
    Client& cl = clients_[s.client];
    const auto active = std::find(cl.active.begin(), cl.active.end(), s.conversation);
    if (active != cl.active.end()) {
        cl.active.erase(active);
    }
    exit_client(s.client, now);
}

bool MultiTurnBenchWorkload::exhausted() const {
    if (!in_flight_.empty()) {
        return false;
    }
    return pending_.empty() ||
           (config_.early_stop && stop_time_ && core::SimTime::from_ns(pending_.top().first) > *stop_time_);
}

std::string MultiTurnBenchWorkload::describe() const {
    std::string out =
        fmt::format("multi-turn bench, {} conversations, {} clients × {} active, {}", generated_.size(),
                    config_.num_clients, active_per_client_, config_.random_sampling ? "random" : "round_robin");
    if (config_.request_rate_per_s > 0) {
        out += fmt::format(", {:g} req/s per client", config_.request_rate_per_s);
    }
    return out;
}

std::unique_ptr<Workload> make_multi_turn_bench_workload(const MultiTurnBenchConfig& config) {
    core::RngStream rng(config.seed, "multi_turn.generator");
    auto conversations = generate_conversations(config.conversations, rng);
    return std::make_unique<MultiTurnBenchWorkload>(config, std::move(conversations));
}

}  // namespace servesim::workloads
