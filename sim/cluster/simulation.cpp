// The experiment's event loop; see simulation.h.
#include "sim/cluster/simulation.h"

#include "common/error.h"

namespace servesim::cluster {

Simulation::Simulation(const SimulationConfig& config, const engine::CostModel& cost_model,
                       workloads::Workload& workload, std::unique_ptr<Router> router)
    : config_(config),
      cost_model_(cost_model),
      workload_(workload),
      router_(std::move(router)),
      metrics_(config.warmup_end, config.exact_percentiles, config.keep_request_records, config.keep_request_itls),
      route_hash_memo_(config.replica.scheduler.block_size) {
    SERVESIM_CHECK(config_.replica_configs.empty() ||
                       config_.replica_configs.size() == static_cast<std::size_t>(config_.num_replicas),
                   "{} replica configs for {} replicas", config_.replica_configs.size(), config_.num_replicas);
    if (config_.kv_store) {
        SERVESIM_CHECK(config_.topology != nullptr, "a shared KV store needs a topology");
        const auto gpus = config_.topology->gpus();
        const auto per = static_cast<std::size_t>(config_.gpus_per_replica);
        SERVESIM_CHECK(gpus.size() >= per * static_cast<std::size_t>(config_.num_replicas),
                       "{} GPUs in the topology for {} replicas of {}", gpus.size(), config_.num_replicas, per);
        std::vector<std::vector<std::size_t>> replica_gpus(static_cast<std::size_t>(config_.num_replicas));
        for (std::size_t i = 0; i < replica_gpus.size(); ++i) {
            replica_gpus[i].assign(gpus.begin() + static_cast<std::ptrdiff_t>(i * per),
                                   gpus.begin() + static_cast<std::ptrdiff_t>((i + 1) * per));
        }
        kv_store_ = std::make_unique<SharedKvStore>(*config_.kv_store, *config_.topology, std::move(replica_gpus));
    }
    for (int i = 0; i < config_.num_replicas; ++i) {
        engine::ReplicaConfig rc = config_.replica_configs.empty()
                                       ? config_.replica
                                       : config_.replica_configs[static_cast<std::size_t>(i)];
        rc.index = i;
        rc.hold_token_gaps = config_.request_timeouts || config_.keep_request_itls;
        cache::KvConnector* connector = kv_store_ ? &kv_store_->connector(static_cast<std::size_t>(i)) : nullptr;
        replicas_.push_back(std::make_unique<engine::Replica>(rc, cost_model_, metrics_, connector));
    }
    if (config_.request_path.enabled()) {
        api_servers_.assign(replicas_.size(), frontend::ApiServer(config_.request_path));
        in_transit_.resize(replicas_.size());
        in_transit_counts_.assign(replicas_.size(), 0);
    }
    if (router_->needs_block_hashes()) {  // the router hashes every prompt: finished turns go back to it
        for (const auto& r : replicas_) {
            r->share_hash_memo(route_hash_memo_);
        }
    }
    if (KvEventFeed* feed = router_->kv_event_feed()) {  // a router reading KV events (docs/CLUSTER.md)
        for (std::size_t i = 0; i < replicas_.size(); ++i) {
            replicas_[i]->set_kv_event_sink(&feed->sink(i));
        }
    }
}

metrics::PrefixCounters prefix_counters(const std::vector<std::unique_ptr<engine::Replica>>& replicas) {
    metrics::PrefixCounters c;
    for (const auto& r : replicas) {
        const auto& s = r->kv_cache().stats();
        c.queries += s.queries;
        c.hits += s.hits;
        if (const auto* o = r->offload()) {
            c.external_queries += o->stats().queries;
            c.external_hits += o->stats().hits;
        }
    }
    return c;
}

metrics::PrefixCounters Simulation::counters() const {
    return prefix_counters(replicas_);
}

void Simulation::sample(core::SimTime now, std::vector<TimeSample>& out) const {
    TimeSample t;
    t.t_s = now.s();
    for (const auto& r : replicas_) {
        t.num_waiting += static_cast<std::int64_t>(r->num_waiting());
        t.num_running += static_cast<std::int64_t>(r->num_running());
        t.kv_usage += r->kv_cache().usage();
    }
    t.kv_usage /= static_cast<double>(replicas_.size());
    const auto c = counters();
    t.prefix_cache_queries = c.queries;
    t.prefix_cache_hits = c.hits;
    out.push_back(t);
}

void arm_next_arrival(workloads::Workload& workload, core::EventQueue& queue, std::optional<core::SimTime>& armed) {
    const auto next = workload.next_arrival_time();
    if (!next) {
        return;
    }
    if (!armed || *next < *armed) {
        const core::SimTime at = std::max(*next, queue.now());
        queue.push(at, core::EventPriority::kArrival, core::EventKind::kArrival);
        armed = at;
    }
}

void Simulation::arm_arrival() {
    arm_next_arrival(workload_, queue_, armed_arrival_);
}

void Simulation::start_step(std::size_t replica, core::SimTime now) {
    auto& r = *replicas_[replica];
    const auto end = r.try_start_step(now);
    if (KvEventFeed* feed = router_->kv_event_feed()) {
        feed->publish(replica, end ? *end : now);  // the step's events leave with its output
    }
    notify_finished(r.take_rejected(), now);
    if (end) {
        queue_.push(*end, core::EventPriority::kStepEnd, core::EventKind::kStepEnd, static_cast<std::uint32_t>(replica));
    } else {
        arm_wake(queue_, r, static_cast<std::uint32_t>(replica), now);  // idle with a load in flight
    }
}

void arm_wake(core::EventQueue& queue, const engine::Replica& replica, std::uint32_t target, core::SimTime now) {
    if (const auto wake = replica.next_wakeup()) {
        queue.push(std::max(*wake, now + core::Duration::from_ns(1)), core::EventPriority::kStepEnd,
                   core::EventKind::kWake, target);
    }
}

std::vector<TransferRetime> follow_transfers(TransferTracker& transfers,
                                             const std::vector<std::unique_ptr<engine::Replica>>& replicas,
                                             std::uint32_t target_offset, core::EventQueue& queue,
                                             std::optional<core::SimTime>& armed, core::SimTime now) {
    std::vector<TransferRetime> retimed = transfers.take_retimed();
    for (const TransferRetime& t : retimed) {
        engine::Replica& r = *replicas[t.owner.replica];
        if (r.retime_load(static_cast<core::RequestId>(t.owner.request), t.end) && !r.step_in_flight()) {
            arm_wake(queue, r, target_offset + t.owner.replica, now);
        }
    }
    if (const auto next = transfers.next_change(); next && (!armed || *next < *armed)) {
        armed = std::max(*next, now);
        queue.push(*armed, core::EventPriority::kStepEnd, core::EventKind::kTransfer);
    }
    return retimed;
}

void Simulation::notify_finished(const std::vector<core::RequestId>& ids, core::SimTime now) {
    for (const auto id : ids) {
        workload_.on_request_finished(id, now);
    }
}

std::size_t route_arrival(Router& router, const std::vector<std::unique_ptr<engine::Replica>>& replicas,
                          const core::TokenContent& prompt, const RequestOrigin& origin, core::SimTime now,
                          int block_size,
                          std::vector<ReplicaLoad>& loads, std::optional<cache::HashedPrompt>& hashed,
                          cache::FirstRunHashMemo* memo, const std::vector<std::size_t>* in_transit, bool refused) {
    loads.resize(replicas.size());
    if (router.needs_loads()) {
        for (std::size_t i = 0; i < replicas.size(); ++i) {
            loads[i] = ReplicaLoad{replicas[i]->num_waiting() + (in_transit != nullptr ? (*in_transit)[i] : 0),
                                   replicas[i]->num_running(), replicas[i]->kv_cache().usage()};
        }
    }
    hashed.reset();
    if (!router.needs_block_hashes() || refused) {
        return router.route(RouteRequest{prompt, now, {}, origin.tenant, origin.session, origin.last_in_session},
                            loads);
    }
    hashed.emplace(cache::HashedPrompt{{}, cache::BlockHasher(block_size)});
    hashed->hasher.extend(hashed->hashes, prompt, core::total_tokens(prompt), memo);
    return router.route(
        RouteRequest{prompt, now, hashed->hashes, origin.tenant, origin.session, origin.last_in_session}, loads);
}

void Simulation::handle_arrivals(core::SimTime now) {
    auto to_engine = [&](std::size_t target, engine::IncomingRequest in, std::optional<core::Duration> timeout) {
        if (api_servers_.empty()) {
            deliver(target, std::move(in), timeout, now);
            return;
        }
        const core::SimTime at_engine = api_servers_[target].admit(now, core::total_tokens(in.prompt));
        in_transit_[target].push_back(InTransit{at_engine, std::move(in), timeout});
        ++in_transit_counts_[target];
        queue_.push(at_engine, core::EventPriority::kArrival, core::EventKind::kEngineArrival,
                    static_cast<std::uint32_t>(target));
    };
    route_arrivals(workload_, now, *router_, replicas_, config_.replica.scheduler, loads_, &route_hash_memo_,
                   api_servers_.empty() ? nullptr : &in_transit_counts_, to_engine);
}

void Simulation::deliver(std::size_t target, engine::IncomingRequest in, std::optional<core::Duration> timeout,
                         core::SimTime now) {
    const core::RequestId id = in.id;
    const core::SimTime sent = in.arrival;
    if (timeout) {
        in.client_deadline = sent + *timeout;
    }
    if (!replicas_[target]->add_request(std::move(in))) {
        notify_finished({id}, now);  // refused: the client moves on
        return;
    }
    if (timeout) {
        SERVESIM_CHECK(config_.request_timeouts, "request {} has a time-out in a run configured without",
                       core::to_int(id));
        // The client's clock runs from its send; a request still on the request path when it runs out is given up
        // as soon as it reaches the engine.
        timeouts_.add(std::max(sent + *timeout, now), id, static_cast<std::uint32_t>(target));
    }
    if (!replicas_[target]->step_in_flight()) {
        start_step(target, now);
    }
}

std::optional<core::SimTime> Simulation::next_timeout() {
    if (timeouts_.empty()) {
        return std::nullopt;
    }
    return timeouts_.next([this](const RequestTimeouts::Entry& t) {
        return replicas_[t.replica]->is_live(core::RequestId{t.id});
    });
}

void Simulation::handle_timeouts(core::SimTime now) {
    for (auto next = next_timeout(); next && *next <= now; next = next_timeout()) {
        const RequestTimeouts::Entry t = timeouts_.pop();
        engine::Replica& r = *replicas_[t.replica];
        const core::RequestId id{t.id};
        if (r.time_out(id)) {
            workload_.on_request_timed_out(id, now);
            if (!r.step_in_flight()) {
                start_step(t.replica, now);  // an idle replica aborted it at once: its blocks may admit another
            }
        }
    }
}

std::int64_t Simulation::total_waiting() const {
    std::int64_t n = 0;
    for (const auto& r : replicas_) {
        n += static_cast<std::int64_t>(r->num_waiting());
    }
    return n;
}

SimulationResult Simulation::run() {
    SimulationResult result;
    arm_arrival();
    core::SimTime last_event_time = queue_.now();
    // The time series is bounded: at kMaxTimeSamples samples every other one is dropped and the interval doubles,
    // so a run of 1e9 simulated seconds keeps at most 2^20 samples (48 MB) instead of 10^9; runs shorter than
    // 2^20 intervals (12 days at 1 s) are unchanged. docs/OUTPUTS.md (timeseries.csv).
    constexpr std::size_t kMaxTimeSamples = std::size_t{1} << 20;
    core::Duration sample_interval = config_.sample_interval;
    if (config_.sample_interval.ns() > 0) {
        queue_.push(queue_.now(), core::EventPriority::kObserve, core::EventKind::kSample);
    }
    heap_pages_.advise();  // what the set-up allocated
    std::uint32_t until_advice = 0;
    while (true) {
        // A client time-out is an event kept outside the queue (cluster::RequestTimeouts): it runs when its
        // deadline comes before the queue's next event, or at the same instant after arrivals and step ends.
        const std::optional<core::SimTime> timeout = next_timeout();
        const bool timeout_first =
            timeout && (queue_.empty() || *timeout < queue_.peek().time ||
                        (*timeout == queue_.peek().time && queue_.peek().priority > core::EventPriority::kTimeout));
        if (!timeout_first && queue_.empty()) {
            break;
        }
        if (++until_advice == 4096) {  // the heap grows rarely (a 256 MiB margin): a look every 4096 events
            until_advice = 0;
            heap_pages_.advise();
        }
        if ((timeout_first ? *timeout : queue_.peek().time) > config_.max_time) {
            result.hit_max_time = true;
            break;
        }
        core::Event e;
        if (timeout_first) {
            queue_.advance_to(*timeout);
            e.time = *timeout;
            e.priority = core::EventPriority::kTimeout;
            e.kind = core::EventKind::kTimeout;
        } else {
            e = queue_.pop();
        }
        const core::SimTime now = e.time;
        if (e.kind != core::EventKind::kSample && e.kind != core::EventKind::kTransfer) {
            ++result.num_events;
            last_event_time = now;  // samples only observe: they never extend the run; a transfer's end matters
                                    // through the wake it brings
        }
        if (!warmup_snapshot_taken_ && now >= config_.warmup_end) {
            metrics_.snapshot_warmup_counters(counters());
            for (const auto& r : replicas_) {
                preemptions_at_warmup_ += r->num_preemptions();
            }
            warmup_snapshot_taken_ = true;
        }
        switch (e.kind) {
            case core::EventKind::kArrival:
                if (armed_arrival_ && *armed_arrival_ == now) {
                    armed_arrival_.reset();
                }
                handle_arrivals(now);
                if (config_.stop_when_waiting_exceeds && total_waiting() > *config_.stop_when_waiting_exceeds) {
                    result.stopped_overloaded = true;
                }
                break;
            case core::EventKind::kStepEnd: {
                auto& r = *replicas_[e.target];
                // The client learns of a finish when its last token arrives (after the request path, if any).
                const auto& finished = r.end_step(now, api_servers_.empty() ? nullptr : &api_servers_[e.target]);
                notify_finished(finished, r.last_stream_time());
                // Finished in the engine, but the last chunk would reach the client after it gave up: a time-out,
                // told at the client's deadline (between the step's end and the chunk's arrival).
                for (const engine::Replica::ClientTimeOut& t : r.timed_out_at_client()) {
                    workload_.on_request_timed_out(t.id, t.deadline);
                }
                start_step(e.target, now);  // replicas share nothing: only this one can have new room
                break;
            }
            case core::EventKind::kEngineArrival: {
                auto& transit = in_transit_[e.target];
                SERVESIM_CHECK(!transit.empty() && transit.front().at_engine == now,
                               "engine arrival at {} ns without its request", now.ns());
                InTransit t = std::move(transit.front());
                transit.pop_front();
                --in_transit_counts_[e.target];
                deliver(e.target, std::move(t.request), t.timeout, now);
                break;
            }
            case core::EventKind::kWake:
                if (!replicas_[e.target]->step_in_flight()) {
                    start_step(e.target, now);
                }
                break;
            case core::EventKind::kTransfer:
                if (armed_transfer_ && *armed_transfer_ == now) {
                    armed_transfer_.reset();
                }
                kv_store_->transfers().advance(now);
                break;
            case core::EventKind::kTimeout:
                handle_timeouts(now);
                break;
            case core::EventKind::kSample:
                sample(now, result.timeseries);
                if (result.timeseries.size() > kMaxTimeSamples) {  // 2^20 + 1: the last (even) index is kept
                    auto& ts = result.timeseries;
                    std::size_t kept = 0;
                    for (std::size_t i = 0; i < ts.size(); i += 2) {
                        ts[kept++] = ts[i];
                    }
                    ts.resize(kept);
                    sample_interval = sample_interval + sample_interval;
                }
                if (!queue_.empty() || next_timeout()) {  // keep sampling only while something else will happen
                    queue_.push(now + sample_interval, core::EventPriority::kObserve, core::EventKind::kSample);
                }
                break;
        }
        if (result.stopped_overloaded) {
            break;
        }
        if (kv_store_) {
            (void)follow_transfers(kv_store_->transfers(), replicas_, 0, queue_, armed_transfer_, now);
        }
        arm_arrival();
    }
    std::int64_t preemptions = 0;
    for (const auto& r : replicas_) {
        preemptions += r->num_preemptions();
        result.num_unfinished += static_cast<std::int64_t>(r->num_requests());
        result.total_cost += r->total_cost();
        if (r->config().speculative) {
            if (!result.speculative) {
                result.speculative.emplace();
            }
            *result.speculative += r->speculative_stats();
        }
        if (const cache::HybridStateCache* states = r->kv_cache().hybrid_state_cache()) {
            if (!result.hybrid_state) {
                result.hybrid_state.emplace();
            }
            cache::HybridStateStats& sum = *result.hybrid_state;
            const cache::HybridStateStats& one = states->stats();
            sum.num_lookups += one.num_lookups;
            sum.attention_hit_tokens += one.attention_hit_tokens;
            sum.state_hit_tokens += one.state_hit_tokens;
            sum.num_snapshots_taken += one.num_snapshots_taken;
            sum.num_state_copies += one.num_state_copies;
            sum.num_evictions += one.num_evictions;
            sum.num_admission_waits += one.num_admission_waits;
            sum.num_orphans_evicted += one.num_orphans_evicted;
            sum.peak_snapshots += one.peak_snapshots;
        }
    }
    if (!warmup_snapshot_taken_) {
        metrics_.snapshot_warmup_counters(counters());
    }
    result.summary = metrics_.summarize(counters(), preemptions - preemptions_at_warmup_, last_event_time);
    return result;
}

}  // namespace servesim::cluster
