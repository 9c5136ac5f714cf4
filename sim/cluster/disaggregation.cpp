// Prefill–decode disaggregation; see disaggregation.h.
#include "sim/cluster/disaggregation.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "sim/cache/prefix_cache/block_hash.h"

namespace servesim::cluster {

namespace {

PoolSettings parse_pool(const YamlMap& m) {
    m.allow_only({"replicas", "gpu", "tensor_parallel_size", "first_gpu"});
    PoolSettings p;
    p.line = m.line("replicas");
    p.replicas = m.get_in_range<int>("replicas", 1, 1024);
    p.gpu = m.get_or<std::string>("gpu", "");
    p.tensor_parallel_size = m.has("tensor_parallel_size") ? m.get_in_range<int>("tensor_parallel_size", 1, 64) : 1;
    p.first_gpu = m.has("first_gpu") ? m.get_in_range<int>("first_gpu", 0, 1 << 20) : -1;
    return p;
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) {
        return 0;
    }
    const auto n = static_cast<double>(sorted.size());
    const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n)));
    return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace

DisaggregationSettings parse_disaggregation(const YamlMap& m) {
    m.allow_only({"kv_connector", "prefill", "decode", "proxy"});
    DisaggregationSettings s;
    s.file = m.file();
    s.key = m.path();
    s.line = m.line("prefill");
    s.kv_connector = m.get_or<std::string>("kv_connector", "NixlConnector");
    if (s.kv_connector != "NixlConnector") {
        m.fail("kv_connector", "unknown connector '" + s.kv_connector +
                                   "'; allowed: NixlConnector (vLLM's --kv-transfer-config kv_connector; the decode "
                                   "instance reads the prefill instance's blocks)");
    }
    s.proxy = m.get_or<std::string>("proxy", "");
    s.prefill = parse_pool(m.map("prefill"));
    s.decode = parse_pool(m.map("decode"));
    const int tp_p = s.prefill.tensor_parallel_size;
    const int tp_d = s.decode.tensor_parallel_size;
    // The pools' GPU ranges (first_gpu defaults: prefill 0, decode right after the prefill pool) must not overlap.
    const int p_begin = std::max(0, s.prefill.first_gpu);
    const int p_end = p_begin + s.prefill.replicas * tp_p;
    const int d_begin = s.decode.first_gpu >= 0 ? s.decode.first_gpu : p_end;
    const int d_end = d_begin + s.decode.replicas * tp_d;
    if (p_begin < d_end && d_begin < p_end) {
        m.fail("decode", fmt::format("the decode pool's GPUs [{}, {}) overlap the prefill pool's [{}, {}) (GPUs in "
                                     "the topology's order; set first_gpu)",
                                     d_begin, d_end, p_begin, p_end));
    }
    // nixl/tp_mapping.py compute_tp_mapping: one side's TP size is a multiple of the other's.
    if (std::max(tp_p, tp_d) % std::min(tp_p, tp_d) != 0) {
        m.fail("decode", fmt::format("decode.tensor_parallel_size ({}) and prefill.tensor_parallel_size ({}) must "
                                     "divide one another (the NixlConnector maps ranks by their ratio)",
                                     tp_d, tp_p));
    }
    return s;
}

NixlConnector::NixlConnector(Role role, int block_size, const DisaggregationConfig& config, const Topology* topology,
                             TransferTracker* tracker, std::vector<std::vector<std::size_t>> prefill_gpus,
                             std::vector<std::size_t> own_gpus, std::size_t index)
    : role_(role),
      block_size_(block_size),
      config_(config),
      topology_(topology),
      tracker_(tracker),
      index_(static_cast<std::uint32_t>(index)),
      prefill_gpus_(std::move(prefill_gpus)),
      own_gpus_(std::move(own_gpus)) {
    store_config_.block_size_tokens = block_size;
    store_config_.offload_prompt_only = true;
}

void NixlConnector::expect(core::RequestId id, std::size_t prefill, core::SimTime arrival) {
    pending_[core::to_int(id)] = Pending{prefill, 0, arrival};
}

std::optional<std::size_t> NixlConnector::forget(core::RequestId id) {
    const auto it = pending_.find(core::to_int(id));
    if (it == pending_.end()) {
        return std::nullopt;
    }
    const std::size_t prefill = it->second.prefill;
    pending_.erase(it);
    return prefill;
}

std::int64_t NixlConnector::lookup_request(core::RequestId id, std::span<const core::BlockHash>,
                                           std::int64_t local_hit_tokens, std::int64_t num_tokens) {
    if (role_ == Role::kPrefill) {
        return 0;  // a P request has do_remote_decode only: no remote prefill to pull
    }
    const auto it = pending_.find(core::to_int(id));
    if (it == pending_.end()) {
        return 0;  // do_remote_prefill already cleared (a preempted request recomputes locally)
    }
    // get_num_new_matched_tokens: count = len(prompt_token_ids) − num_computed_tokens (the local prefix hit). The
    // local hit stops at num_tokens − 1 (KVCacheManager.get_computed_blocks), so count ≥ 1 and a read always follows.
    it->second.local_hit_tokens = local_hit_tokens;
    return std::max<std::int64_t>(0, num_tokens - local_hit_tokens);
}


core::Duration NixlConnector::start_load_request(core::RequestId id, std::int64_t external_tokens, core::SimTime now) {
    const auto it = pending_.find(core::to_int(id));
    SERVESIM_CHECK(role_ == Role::kDecode && it != pending_.end(), "NIXL load of request {} without remote prefill",
                   core::to_int(id));
    const Pending p = it->second;
    pending_.erase(it);  // update_state_after_alloc: do_remote_prefill = False (one transfer per request)
    // update_state_after_alloc reads into the blocks allocated for the external tokens (get_unhashed_block_ids):
    // the local hit is whole blocks, so they are ceil(external / block size); the last, partial block is read whole.
    const std::int64_t blocks = (external_tokens + block_size_ - 1) / block_size_;
    const double rank_bytes = static_cast<double>(blocks) * config_.bytes_per_block / config_.decode_tp;
    // nixl/tp_mapping.py compute_tp_mapping: a decode rank reads from prefill rank rank·tp_p/tp_d when tp_d ≥ tp_p
    // (or the KV is MLA's replicated latent), else from its tp_p/tp_d prefill ranks, each holding part of its heads.
    const std::vector<std::size_t>& src = prefill_gpus_[p.prefill];
    const int tp_p = config_.prefill_tp;
    const int tp_d = config_.decode_tp;
    core::Duration longest = core::Duration::from_ns(0);
    // The read's transfers are one group: its end frees the prefill blocks, so the tracker reports it.
    const TransferOwner owner{index_, core::to_int(id), /*report_end=*/true};
    for (int d = 0; d < tp_d; ++d) {
        const std::size_t dst = own_gpus_[static_cast<std::size_t>(d)];
        if (tp_d >= tp_p || config_.replicated_kv) {
            const std::size_t from = src[static_cast<std::size_t>(d * tp_p / tp_d)];
            const auto& slices = paths_.get(*topology_, from, dst);
            longest = std::max(longest, tracker_->start_slices(
                                            slices, rank_bytes / static_cast<double>(slices.size()), now, owner));
        } else {
            const int k = tp_p / tp_d;
            for (int j = 0; j < k; ++j) {
                const std::size_t from = src[static_cast<std::size_t>(d * k + j)];
                const auto& slices = paths_.get(*topology_, from, dst);
                longest = std::max(longest, tracker_->start_slices(
                                                slices, rank_bytes / k / static_cast<double>(slices.size()), now,
                                                owner));
            }
        }
    }
    reads_.push_back(Read{id, p.prefill, now, now + longest, rank_bytes * tp_d, p.local_hit_tokens, p.arrival});
    return longest;
}

bool NixlConnector::request_finished(core::RequestId) {
    // NixlConnectorScheduler.request_finished: a P request (do_remote_decode) finished by its length cap keeps its
    // blocks for the decode side's read (delay_free_blocks); a D request frees at once.
    return role_ == Role::kPrefill;
}

void NixlConnector::record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens) {
    // Scheduler.connector_prefix_cache_stats: queries num_tokens − local hit, hits the external tokens.
    stats_.queries += num_tokens - local_hit_tokens;
    stats_.hits += external_hit_tokens;
}

DisaggregatedSimulation::DisaggregatedSimulation(const SimulationConfig& common, const DisaggregationConfig& config,
                                                 const engine::CostModel& prefill_cost,
                                                 const engine::CostModel& decode_cost, workloads::Workload& workload,
                                                 std::unique_ptr<Router> prefill_router,
                                                 std::unique_ptr<Router> decode_router)
    : common_(common),
      config_(config),
      prefill_cost_(prefill_cost),
      decode_cost_(decode_cost),
      workload_(workload),
      prefill_router_(std::move(prefill_router)),
      decode_router_(std::move(decode_router)),
      metrics_(common.warmup_end, common.exact_percentiles, common.keep_request_records, common.keep_request_itls),
      prefill_metrics_(common.warmup_end, common.exact_percentiles, false),
      tracker_(*common.topology) {
    SERVESIM_CHECK(common_.topology != nullptr, "disaggregation needs a topology");
    const auto gpus = common_.topology->gpus();
    const auto p_tp = static_cast<std::size_t>(config_.prefill_tp);
    const auto d_tp = static_cast<std::size_t>(config_.decode_tp);
    const auto n_p = static_cast<std::size_t>(config_.num_prefill);
    const auto n_d = static_cast<std::size_t>(config_.num_decode);
    // Placement: each pool takes consecutive GPUs in file order from its first GPU (by default the prefill pool
    // from GPU 0, the decode pool right after it).
    const std::size_t p0 = static_cast<std::size_t>(config_.prefill_first_gpu);
    const std::size_t base = config_.decode_first_gpu >= 0 ? static_cast<std::size_t>(config_.decode_first_gpu)
                                                           : p0 + n_p * p_tp;
    SERVESIM_CHECK(gpus.size() >= p0 + n_p * p_tp && gpus.size() >= base + n_d * d_tp,
                   "{} GPUs for {}×{} prefill from {} and {}×{} decode from {}", gpus.size(), n_p, p_tp, p0, n_d,
                   d_tp, base);
    std::vector<std::vector<std::size_t>> prefill_gpus(n_p);
    for (std::size_t i = 0; i < n_p; ++i) {
        prefill_gpus[i].assign(gpus.begin() + static_cast<std::ptrdiff_t>(p0 + i * p_tp),
                               gpus.begin() + static_cast<std::ptrdiff_t>(p0 + (i + 1) * p_tp));
    }
    const int block_size = config_.decode_replica.scheduler.block_size;
    for (std::size_t i = 0; i < n_p; ++i) {
        connectors_.push_back(std::make_unique<NixlConnector>(NixlConnector::Role::kPrefill,
                                                              config_.prefill_replica.scheduler.block_size, config_,
                                                              common_.topology.get(), &tracker_,
                                                              std::vector<std::vector<std::size_t>>{},
                                                              prefill_gpus[i], i));
        engine::ReplicaConfig rc = config_.prefill_replicas.empty() ? config_.prefill_replica
                                                                    : config_.prefill_replicas.at(i);
        rc.index = static_cast<int>(i);
        prefill_.push_back(std::make_unique<engine::Replica>(rc, prefill_cost_, prefill_metrics_, connectors_.back().get()));
    }
    for (std::size_t i = 0; i < n_d; ++i) {
        std::vector<std::size_t> own(gpus.begin() + static_cast<std::ptrdiff_t>(base + i * d_tp),
                                     gpus.begin() + static_cast<std::ptrdiff_t>(base + (i + 1) * d_tp));
        connectors_.push_back(std::make_unique<NixlConnector>(NixlConnector::Role::kDecode, block_size, config_,
                                                              common_.topology.get(), &tracker_, prefill_gpus,
                                                              std::move(own), i));
        engine::ReplicaConfig rc = config_.decode_replicas.empty() ? config_.decode_replica
                                                                   : config_.decode_replicas.at(i);
        rc.index = static_cast<int>(n_p + i);  // requests.csv: the replica that streamed the tokens
        rc.hold_token_gaps = rc.hold_token_gaps || common_.keep_request_itls;  // --save-detailed's per-request ITLs
        decode_.push_back(std::make_unique<engine::Replica>(rc, decode_cost_, metrics_, connectors_.back().get()));
    }
    // The proxy's hops: an instance's API server runs on the host nearest its first GPU; the proxy on its own
    // vertex (default: the host nearest the prefill pool's first GPU). A hop takes the path latency between them;
    // without a host in the topology nothing locates the servers, and the hops take no time.
    const Topology& t = *common_.topology;
    const std::size_t proxy =
        config_.proxy_vertex != Topology::npos ? config_.proxy_vertex : t.nearest_host(prefill_gpus.front().front());
    auto hop = [&](std::size_t first_gpu) {
        const std::size_t host = t.nearest_host(first_gpu);
        if (proxy == Topology::npos || host == Topology::npos) {
            return core::Duration::from_ns(0);
        }
        return core::Duration::from_s(t.path(proxy, host).latency_s);
    };
    for (std::size_t i = 0; i < n_p; ++i) {
        hop_.push_back(hop(prefill_gpus[i].front()));
    }
    for (std::size_t i = 0; i < n_d; ++i) {
        hop_.push_back(hop(gpus[base + i * d_tp]));
    }
}

engine::Replica& DisaggregatedSimulation::replica(std::size_t target) {
    return target < prefill_.size() ? *prefill_[target] : *decode_[target - prefill_.size()];
}

metrics::PrefixCounters DisaggregatedSimulation::prefill_counters() const {
    return prefix_counters(prefill_);  // no offload tier in a disaggregated run: the GPU counters alone
}

void DisaggregatedSimulation::arm_arrival() {
    arm_next_arrival(workload_, queue_, armed_arrival_);
}

void DisaggregatedSimulation::free_sent(core::SimTime now) {
    // The decode side's notification (NixlConnectorWorker: send_notif after the READ) is reported by the prefill
    // worker's get_finished as finished_sending; Scheduler._update_from_kv_xfer_finished frees the blocks. Freed at
    // the read's end, they are there for the prefill scheduler's next schedule().
    while (!frees_.empty() && frees_.top().at <= now) {
        const Free f = frees_.top();
        frees_.pop();
        if (prefill_[f.prefill]->finished_sending(f.id)) {
            --held_;
        }
    }
}

void DisaggregatedSimulation::notify_free(std::size_t prefill, core::RequestId id, core::SimTime at) {
    frees_.push(Free{at, prefill, id});
    queue_.push(at, core::EventPriority::kStepEnd, core::EventKind::kWake, static_cast<std::uint32_t>(prefill));
}

void DisaggregatedSimulation::start_step(std::size_t target, core::SimTime now) {
    auto& r = replica(target);
    const auto end = r.try_start_step(now);
    const bool decode = target >= prefill_.size();
    for (const auto id : r.take_rejected()) {
        if (decode) {
            // Never fits the decode instance: NixlConnectorScheduler.request_finished with do_remote_prefill still
            // set notifies the prefill side to free at once.
            if (const auto prefill = connectors_[target]->forget(id)) {
                notify_free(*prefill, id, now);
            }
        } else if (const auto it = at_prefill_.find(core::to_int(id)); it != at_prefill_.end()) {
            // Never fits the prefill instance: the proxy returns the error to the client.
            metrics_.on_sent(it->second.arrival);
            metrics_.on_rejected(it->second.arrival, metrics::RejectReason::kNeverFitsKvCache,
                                 core::total_tokens(it->second.prompt), 0);
            at_prefill_.erase(it);
        }
        workload_.on_request_finished(id, now);
    }
    if (decode) {
        for (const auto& read : connectors_[target]->take_reads()) {
            open_reads_.emplace(core::to_int(read.id), read);  // settled when the tracker says it ended
        }
    }
    if (end) {
        queue_.push(*end, core::EventPriority::kStepEnd, core::EventKind::kStepEnd, static_cast<std::uint32_t>(target));
    } else {
        arm_wake(queue_, r, static_cast<std::uint32_t>(target), now);
    }
}

void DisaggregatedSimulation::follow_reads(core::SimTime now) {
    // The reads' owners are decode replicas (NixlConnector), whose event targets follow the prefill pool's.
    const auto first_decode = static_cast<std::uint32_t>(prefill_.size());
    for (const TransferRetime& t : follow_transfers(tracker_, decode_, first_decode, queue_, armed_transfer_, now)) {
        if (!t.ended) {
            continue;
        }
        const auto it = open_reads_.find(t.owner.request);
        SERVESIM_CHECK(it != open_reads_.end(), "NIXL read of request {} ended but was not started", t.owner.request);
        NixlConnector::Read read = it->second;
        open_reads_.erase(it);
        read.done = t.end;
        notify_free(read.prefill, read.id, read.done);
        if (read.arrival >= common_.warmup_end) {
            measured_transfer_ms_.push_back((read.done - read.start).ms());
            decode_local_hit_tokens_ += read.local_hit_tokens;
        }
        all_reads_.push_back(read);
    }
}

void DisaggregatedSimulation::send(Delivery d, core::Duration hop, core::SimTime now) {
    d.at = now + hop;
    d.seq = delivery_seq_++;
    const auto target = static_cast<std::uint32_t>(d.kind == Delivery::Kind::kToDecode ? prefill_.size() + d.target
                                                                                        : d.target);
    deliveries_.push(std::move(d));
    queue_.push(now + hop, core::EventPriority::kStepEnd, core::EventKind::kWake, target);
}

void DisaggregatedSimulation::deliver_due(core::SimTime now) {
    while (!deliveries_.empty() && deliveries_.top().at <= now) {
        Delivery d = deliveries_.top();
        deliveries_.pop();
        switch (d.kind) {
            case Delivery::Kind::kToPrefill:
                to_prefill(std::move(d.in), d.target, now);
                break;
            case Delivery::Kind::kAtProxy:
                to_decode(d.in, d.target, now);
                break;
            case Delivery::Kind::kToDecode:
                decode_arrives(d.in, d.prefill, d.target, now);
                break;
        }
    }
}

void DisaggregatedSimulation::to_decode(const engine::IncomingRequest& in, std::size_t prefill, core::SimTime now) {
    // The proxy sends the original prompt and max_tokens to a decode instance with the prefill's kv_transfer_params
    // (toy_proxy_server.py _handle_completions); the client's clock started at its own send.
    std::optional<cache::HashedPrompt> hashed;  // not handed on: the client's request is copied to the decode side
    const std::size_t d = route_arrival(*decode_router_, decode_, in.prompt, {}, now,
                                        config_.decode_replica.scheduler.block_size, loads_, hashed);
    const core::Duration hop = hop_[prefill_.size() + d];
    if (hop.ns() == 0) {
        decode_arrives(in, prefill, d, now);
        return;
    }
    send(Delivery{{}, 0, Delivery::Kind::kToDecode, d, prefill, in}, hop, now);
}

void DisaggregatedSimulation::decode_arrives(const engine::IncomingRequest& client, std::size_t prefill,
                                             std::size_t d, core::SimTime now) {
    const std::size_t target = prefill_.size() + d;
    connectors_[target]->expect(client.id, prefill, client.arrival);
    // The client sees each token one hop later, when the proxy relays it: TTFT and E2E include the hop back, ITL
    // does not move.
    engine::IncomingRequest in = client;
    in.client_delay = hop_[target];
    if (!decode_[d]->add_request(in)) {
        (void)connectors_[target]->forget(in.id);
        notify_free(prefill, in.id, now);  // refused by the decode frontend: the prefill side frees at once
        workload_.on_request_finished(in.id, now);
    } else if (!decode_[d]->step_in_flight()) {
        start_step(target, now);
    }
}

void DisaggregatedSimulation::to_prefill(engine::IncomingRequest client, std::size_t p, core::SimTime now) {
    // The prefill leg: the same prompt with max_tokens = 1 and do_remote_decode (toy_proxy_server.py
    // send_request_to_service). Its token is recorded when its response is back at the proxy, so the prefill TTFT is
    // what the proxy waits for: the client's send to the response's return.
    // The prefill router's hashes of the prompt go to the leg (cache::HashedPrompt), not to the client's request,
    // which the decode side hashes itself.
    engine::IncomingRequest leg{client.id, client.arrival, client.prompt, 1, client.answer_content, client.turn,
                                hop_[p], std::move(client.hashed_prompt)};
    client.hashed_prompt.reset();
    if (!prefill_[p]->add_request(std::move(leg))) {
        // Refused by the prefill frontend (prompt + 1 > max_model_len): the proxy returns the error.
        metrics_.on_sent(client.arrival);
        metrics_.on_rejected(client.arrival, metrics::RejectReason::kLongerThanMaxModelLen,
                             core::total_tokens(client.prompt), client.max_output_tokens);
        workload_.on_request_finished(client.id, now);
        return;
    }
    at_prefill_.emplace(core::to_int(client.id), std::move(client));
    if (!prefill_[p]->step_in_flight()) {
        start_step(p, now);
    }
}

void DisaggregatedSimulation::handle_arrivals(core::SimTime now) {
    auto to_proxy = [&](std::size_t p, engine::IncomingRequest client, std::optional<core::Duration> timeout) {
        // Client time-outs are refused with disaggregation before a run starts (tools/app/experiment_prepare.cpp).
        SERVESIM_CHECK(!timeout, "request {} has a client time-out in a disaggregated run", core::to_int(client.id));
        if (hop_[p].ns() == 0) {
            to_prefill(std::move(client), p, now);
        } else {
            send(Delivery{{}, 0, Delivery::Kind::kToPrefill, p, 0, std::move(client)}, hop_[p], now);
        }
    };
    std::vector<ReplicaLoad> loads;
    route_arrivals(workload_, now, *prefill_router_, prefill_, config_.prefill_replica.scheduler, loads, nullptr,
                   nullptr, to_proxy);
}

void DisaggregatedSimulation::end_step(std::size_t target, core::SimTime now) {
    auto& r = replica(target);
    const auto finished = r.end_step(now);
    if (target >= prefill_.size()) {
        for (const auto id : finished) {
            workload_.on_request_finished(id, now);
        }
        start_step(target, now);
        return;
    }
    held_ += static_cast<std::int64_t>(finished.size());
    peak_held_ = std::max(peak_held_, held_);
    start_step(target, now);
    // The proxy gets the prefill's response (its one token is dropped) one hop later and sends the decode leg.
    for (const auto id : finished) {
        const auto it = at_prefill_.find(core::to_int(id));
        SERVESIM_CHECK(it != at_prefill_.end(), "prefill of unknown request {}", core::to_int(id));
        engine::IncomingRequest in = std::move(it->second);
        at_prefill_.erase(it);
        if (hop_[target].ns() == 0) {
            to_decode(in, target, now);
        } else {
            send(Delivery{{}, 0, Delivery::Kind::kAtProxy, target, 0, std::move(in)}, hop_[target], now);
        }
    }
}

SimulationResult DisaggregatedSimulation::run() {
    SimulationResult result;
    arm_arrival();
    core::SimTime last_event_time = queue_.now();
    if (common_.sample_interval.ns() > 0) {
        queue_.push(queue_.now(), core::EventPriority::kObserve, core::EventKind::kSample);
    }
    auto all = [&](auto&& fn) {
        for (auto& r : prefill_) {
            fn(*r);
        }
        for (auto& r : decode_) {
            fn(*r);
        }
    };
    while (!queue_.empty()) {
        if (queue_.peek().time > common_.max_time) {
            result.hit_max_time = true;
            break;
        }
        const core::Event e = queue_.pop();
        const core::SimTime now = e.time;
        if (e.kind != core::EventKind::kSample && e.kind != core::EventKind::kTransfer) {
            ++result.num_events;
            last_event_time = now;  // a transfer's end matters through the wake or free it brings
        }
        if (!warmup_snapshot_taken_ && now >= common_.warmup_end) {
            metrics_.snapshot_warmup_counters(prefill_counters());
            all([&](engine::Replica& r) { preemptions_at_warmup_ += r.num_preemptions(); });
            warmup_snapshot_taken_ = true;
        }
        free_sent(now);
        deliver_due(now);
        switch (e.kind) {
            case core::EventKind::kArrival:
                if (armed_arrival_ && *armed_arrival_ == now) {
                    armed_arrival_.reset();
                }
                handle_arrivals(now);
                break;
            case core::EventKind::kStepEnd:
                end_step(e.target, now);
                break;
            case core::EventKind::kEngineArrival:  // no request path in a disaggregated run (docs/REQUEST-PATH.md)
                break;
            case core::EventKind::kWake:
                if (!replica(e.target).step_in_flight()) {
                    start_step(e.target, now);
                }
                break;
            case core::EventKind::kTransfer:
                if (armed_transfer_ && *armed_transfer_ == now) {
                    armed_transfer_.reset();
                }
                tracker_.advance(now);
                break;
            case core::EventKind::kTimeout:  // never queued (cluster::RequestTimeouts); refused here anyway
                break;
            case core::EventKind::kSample: {
                TimeSample t;
                t.t_s = now.s();
                all([&](engine::Replica& r) {
                    t.num_waiting += static_cast<std::int64_t>(r.num_waiting());
                    t.num_running += static_cast<std::int64_t>(r.num_running());
                    t.kv_usage += r.kv_cache().usage();
                });
                t.kv_usage /= static_cast<double>(prefill_.size() + decode_.size());
                const auto c = prefill_counters();
                t.prefix_cache_queries = c.queries;
                t.prefix_cache_hits = c.hits;
                result.timeseries.push_back(t);
                if (!queue_.empty()) {
                    queue_.push(now + common_.sample_interval, core::EventPriority::kObserve, core::EventKind::kSample);
                }
                break;
            }
        }
        follow_reads(now);
        arm_arrival();
    }
    std::int64_t preemptions = 0;
    all([&](engine::Replica& r) {
        preemptions += r.num_preemptions();
        result.num_unfinished += static_cast<std::int64_t>(r.num_requests());
        result.total_cost += r.total_cost();
        if (r.config().speculative) {
            if (!result.speculative) {
                result.speculative.emplace();
            }
            *result.speculative += r.speculative_stats();
        }
    });
    if (!warmup_snapshot_taken_) {
        metrics_.snapshot_warmup_counters(prefill_counters());
    }
    const metrics::PrefixCounters at_end = prefill_counters();
    result.summary = metrics_.summarize(at_end, preemptions - preemptions_at_warmup_, last_event_time);

    DisaggregationStats s;
    s.num_prefill_replicas = config_.num_prefill;
    s.num_decode_replicas = config_.num_decode;
    std::sort(measured_transfer_ms_.begin(), measured_transfer_ms_.end());
    s.num_transfers = static_cast<std::int64_t>(measured_transfer_ms_.size());
    for (const auto& read : all_reads_) {
        if (read.arrival >= common_.warmup_end) {
            s.transfer_bytes += read.bytes;
        }
    }
    if (!measured_transfer_ms_.empty()) {
        double sum = 0;
        for (const double v : measured_transfer_ms_) {
            sum += v;
        }
        s.transfer_ms_mean = sum / static_cast<double>(measured_transfer_ms_.size());
        s.transfer_ms_p50 = percentile(measured_transfer_ms_, 0.50);
        s.transfer_ms_p90 = percentile(measured_transfer_ms_, 0.90);
        s.transfer_ms_p99 = percentile(measured_transfer_ms_, 0.99);
        s.transfer_ms_max = measured_transfer_ms_.back();
    }
    s.decode_local_hit_tokens = decode_local_hit_tokens_;
    const double run_ms = (last_event_time - core::SimTime::zero()).ms();
    if (run_ms > 0) {
        double p_ms = 0;
        double d_ms = 0;
        for (const auto& r : prefill_) {
            p_ms += r->total_cost().duration().ms();
        }
        for (const auto& r : decode_) {
            d_ms += r->total_cost().duration().ms();
        }
        s.prefill_busy_fraction = p_ms / (run_ms * static_cast<double>(prefill_.size()));
        s.decode_busy_fraction = d_ms / (run_ms * static_cast<double>(decode_.size()));
    }
    s.prefill_prefix_queries = result.summary.prefix_cache_queries;
    s.prefill_prefix_hits = result.summary.prefix_cache_hits;
    const metrics::Summary prefill_summary = prefill_metrics_.summarize(at_end, 0, last_event_time);
    s.prefill_ttft_ms_mean = prefill_summary.ttft_ms.mean;
    s.prefill_ttft_ms_p99 = prefill_summary.ttft_ms.p99;
    s.peak_held_requests = peak_held_;
    result.disaggregation = s;
    return result;
}

}  // namespace servesim::cluster
