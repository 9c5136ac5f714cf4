// The router registry and the routers: load-only ones, and cache-aware ones as deployed (llm-d's scorers, Dynamo's
// KV router) over an index of the prefixes they routed (docs/CLUSTER.md).
#include "sim/cluster/router.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "common/error.h"
#include "sim/cluster/kv_store.h"

namespace servesim::cluster {
namespace {

class RoundRobinRouter final : public Router {
public:
    std::size_t route(const core::TokenContent&, const std::vector<ReplicaLoad>& loads) override {
        return next_++ % loads.size();
    }

private:
    std::size_t next_ = 0;
};

// Fewest requests in the replica (waiting + running); ties go to the lowest index. O(replicas) per request by
// definition.
class LeastLoadedRouter final : public Router {
public:
    [[nodiscard]] bool needs_loads() const override { return true; }

    std::size_t route(const core::TokenContent&, const std::vector<ReplicaLoad>& loads) override {
        std::size_t best = 0;
        for (std::size_t i = 1; i < loads.size(); ++i) {
            if (loads[i].num_waiting + loads[i].num_running < loads[best].num_waiting + loads[best].num_running) {
                best = i;
            }
        }
        return best;
    }
};

// vLLM's internal data-parallel load balancer (v1/engine/core_client.py DPLBAsyncMPClient
// .get_core_engine_for_request): the engine with the lowest 4·waiting + running; ties to the lowest index. vLLM
// reads counts the DP coordinator publishes every 100 ms and bumps its local copy per routed request; servesim
// reads the instantaneous counts (the refresh interval is not modelled).
class VllmDpRouter final : public Router {
public:
    [[nodiscard]] bool needs_loads() const override { return true; }

    std::size_t route(const core::TokenContent&, const std::vector<ReplicaLoad>& loads) override {
        auto score = [](const ReplicaLoad& l) { return 4 * l.num_waiting + l.num_running; };
        std::size_t best = 0;
        for (std::size_t i = 1; i < loads.size(); ++i) {
            if (score(loads[i]) < score(loads[best])) {
                best = i;
            }
        }
        return best;
    }
};

// Requests whose first content run (a tenant's system prompt) is the same go to the same replica, so its prefix is
// cached once; a fixed hash, so the mapping is deterministic.
class PrefixAffinityRouter final : public Router {
public:
    std::size_t route(const core::TokenContent& prompt, const std::vector<ReplicaLoad>& loads) override {
        const std::uint64_t key = prompt.empty() ? 0 : core::mix64(static_cast<std::uint64_t>(prompt.front().content));
        return static_cast<std::size_t>(key % loads.size());
    }
};

// Which replicas hold each block, as a router believes it: per group of 64 replicas one map from the block to a
// bitset of them, so one walk over a prompt's blocks gives every replica's leading matched blocks (the walk of
// llm-d's LongestPrefixScorer, llm-d-kv-cache-manager pkg/kvcache/kvblock_scorer.go: the pods holding block 0,
// intersected block by block): O(blocks × ⌈replicas / 64⌉ + replicas) per request instead of O(blocks × replicas)
// (issue 15 item 5).
class ReplicaBlockSets {
public:
    explicit ReplicaBlockSets(std::size_t num_replicas)
        : num_replicas_(num_replicas), maps_((num_replicas + 63) / 64) {}

    [[nodiscard]] bool holds(std::uint64_t key, std::size_t r) const {
        return (maps_[r / 64].find(key) & bit(r)) != 0;
    }
    void hold(std::uint64_t key, std::size_t r) {
        auto& map = maps_[r / 64];
        if (std::uint64_t* v = map.find_value(key)) {
            *v |= bit(r);
        } else {
            map.insert(key, bit(r));
        }
    }
    // Nothing when r does not hold the key.
    void release(std::uint64_t key, std::size_t r) {
        auto& map = maps_[r / 64];
        std::uint64_t* v = map.find_value(key);
        if (v == nullptr || (*v & bit(r)) == 0) {
            return;
        }
        if ((*v & ~bit(r)) == 0) {
            map.erase(key);  // before the value reads as empty
        } else {
            *v &= ~bit(r);
        }
    }

    // out[r]: how many leading blocks of `hashes` replica r holds.
    void matched(std::span<const core::BlockHash> hashes, std::vector<std::int64_t>& out) const {
        out.assign(num_replicas_, 0);
        constexpr std::size_t kAhead = 16;  // prefetch distance, in blocks: the maps miss the cache
        for (std::size_t w = 0; w < maps_.size(); ++w) {
            const auto& map = maps_[w];
            const std::size_t in_group = std::min<std::size_t>(64, num_replicas_ - 64 * w);
            std::uint64_t alive = in_group == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << in_group) - 1;
            std::size_t n = 0;
            for (; n < hashes.size() && alive != 0; ++n) {
                if (n + kAhead < hashes.size()) {
                    __builtin_prefetch(map.probe_address(core::to_int(hashes[n + kAhead])));
                }
                const std::uint64_t held = alive & map.find(core::to_int(hashes[n]));
                for (std::uint64_t gone = alive & ~held; gone != 0; gone &= gone - 1) {
                    out[64 * w + static_cast<std::size_t>(std::countr_zero(gone))] = static_cast<std::int64_t>(n);
                }
                alive = held;
            }
            for (; alive != 0; alive &= alive - 1) {
                out[64 * w + static_cast<std::size_t>(std::countr_zero(alive))] = static_cast<std::int64_t>(n);
            }
        }
    }

private:
    [[nodiscard]] static std::uint64_t bit(std::size_t r) { return std::uint64_t{1} << (r % 64); }

    std::size_t num_replicas_;
    std::vector<FlatKeyMap<std::uint64_t, 0>> maps_;  // per 64 replicas: block → the replicas holding it
};

// What a cache-aware router believes each replica caches: out[r] = the leading blocks of a prompt replica r holds.
class PrefixView {
public:
    virtual ~PrefixView() = default;
    virtual void matched(std::span<const core::BlockHash> hashes, core::SimTime now, std::size_t num_replicas,
                         std::vector<std::int64_t>& out) = 0;
    // The router sent `hashes` to replica r at `now`.
    virtual void routed(std::size_t r, std::span<const core::BlockHash> hashes, core::SimTime now) = 0;
    [[nodiscard]] virtual KvEventFeed* feed() { return nullptr; }
};

// Which replica holds which prefix, as a router can know it without engine events: the blocks of each prompt it
// routed, per replica, in an LRU of the replica's GPU capacity (llm-d's approximate prefix-cache scorer, which keeps
// an LRU index of the prefixes it sent to each pod; Dynamo's router without KV events). A routing becomes visible
// cache_signal_delay later (the engine's KV events or metrics reach the router late).
class RoutedPrefixIndex final : public PrefixView {
public:
    explicit RoutedPrefixIndex(const RouterOptions& o)
        : options_(o), delay_(core::Duration::from_s(o.cache_signal_delay_s)) {}

    // out[r]: the leading blocks of `hashes` the router believes replica r (< num_replicas) holds at `now`. Each
    // replica's LRU is walked from block 0 until it misses a block (the walk of llm-d's LongestPrefixScorer, per
    // pod). A routed prompt's blocks sit in consecutive nodes of its replica's LRU (LruBlockTiers), so past block 0
    // a walk reads mostly the next node rather than a random index slot; this replaced one walk over a block →
    // replicas map (ReplicaBlockSets, still the precise index's), whose every block was a random read, and its upkeep
    // at each routing's insert and eviction (bench/README.md, "Fourth round").
    void matched(std::span<const core::BlockHash> hashes, core::SimTime now, std::size_t num_replicas,
                 std::vector<std::int64_t>& out) override {
        ensure(num_replicas);
        advance(now);
        out.assign(num_replicas, 0);
        if (hashes.empty()) {
            return;
        }
        const std::uint64_t first = core::to_int(hashes[0]);
        for (const LruBlockTier& tier : tiers_) {  // block 0's probes, one per replica, overlap
            tier.prefetch_touch(first);
        }
        constexpr std::size_t kAhead = 16;  // prefetch distance, in blocks: where a chain of nodes breaks
        const std::size_t size = hashes.size();
        for (std::size_t r = 0; r < num_replicas; ++r) {
            const LruBlockTier& tier = tiers_[r];
            LruBlockTier::Cursor at;
            if (!tier.contains(first, at)) {
                continue;
            }
            // Stretches of consecutive nodes in one loop (contains_run), the key after each looked up alone.
            std::size_t n = 1;
            while (n < size) {
                n += tier.contains_run(hashes.subspan(n), kAhead, at);
                if (n == size) {
                    break;
                }
                if (n + kAhead < size) {
                    tier.prefetch_walk(core::to_int(hashes[n + kAhead]), kAhead, at);
                }
                if (!tier.contains(core::to_int(hashes[n]), at)) {
                    break;
                }
                ++n;
            }
            out[r] = static_cast<std::int64_t>(n);
        }
    }

    void routed(std::size_t r, std::span<const core::BlockHash> hashes, core::SimTime now) override {
        pending_.push_back(Pending{now + delay_, r, {hashes.begin(), hashes.end()}});
        advance(now);
    }

private:
    struct Pending {
        core::SimTime visible_at;
        std::size_t replica;
        std::vector<core::BlockHash> hashes;
    };

    // Sizes the index for the cluster (known at the first routing).
    void ensure(std::size_t num_replicas) {
        if (tiers_.empty()) {
            for (std::size_t r = 0; r < num_replicas; ++r) {
                const std::int64_t c = options_.capacity_blocks(r);
                tiers_.emplace_back(c > 0 ? c : std::int64_t{1} << 40);  // unknown: no bound
            }
        }
        SERVESIM_CHECK(tiers_.size() == num_replicas, "the cluster's size changed between routings");
    }

    void advance(core::SimTime now) {
        // Constant delay: visible times are in routing order.
        while (!pending_.empty() && pending_.front().visible_at <= now) {
            const Pending& p = pending_.front();
            LruBlockTier& tier = tiers_[p.replica];
            constexpr std::size_t kAhead = 16;  // prefetch distance, in blocks: the tables miss the cache
            const std::size_t n = p.hashes.size();
            // The walk's place in the LRU's nodes (a routed prompt's are mostly in a row); its touches are moved to
            // the most-recent end a run at a time (LruBlockTiers::TouchWalk), the run ended before each insert.
            LruBlockTier::TouchWalk walk;
            const std::span<const core::BlockHash> hashes(p.hashes);
            std::size_t i = 0;
            while (i < n) {
                i += tier.touch_run(hashes.subspan(i), kAhead, walk);  // the pending run goes on (one loop)
                if (i == n) {
                    break;
                }
                if (i + kAhead < n) {  // the index slot, unless the chain of nodes goes on to it
                    tier.prefetch_walk(core::to_int(hashes[i + kAhead]), kAhead, walk.at);
                }
                const std::uint64_t key = core::to_int(hashes[i]);
                ++i;
                if (tier.touch_if_held(key, walk)) {
                    continue;
                }
                tier.end_touches(walk);  // moves a run; holds no key more or less
                tier.insert_absent(key, nullptr, &walk.at);
            }
            tier.end_touches(walk);
            pending_.pop_front();
        }
    }

    RouterOptions options_;  // each replica's capacity (capacity_blocks)
    core::Duration delay_;
    std::vector<LruBlockTier> tiers_;         // per replica: the routed blocks, LRU
    std::deque<Pending> pending_;
};

// What each replica's GPU prefix cache holds, from its KV events (llm-d's precise prefix-cache index, the
// kv-cache-manager's kvblock.Index fed by kvevents.Pool; Dynamo's KvIndexer): BlockStored adds the replica to the
// block's holders, BlockRemoved takes it out, each cache_signal_delay after the step that emitted it ended. A set per
// block as llm-d keeps it: a second copy of a block (computed twice concurrently) is one entry, and the first copy's
// eviction removes it. Events of the first KV cache group only (the full-attention group; a hybrid model's other
// groups are not indexed). vLLM's AllBlocksCleared (reset_prefix_cache) has no counterpart: servesim never resets.
class KvEventIndex final : public PrefixView, public KvEventFeed {
public:
    explicit KvEventIndex(const RouterOptions& o) : delay_(core::Duration::from_s(o.cache_signal_delay_s)) {}

    cache::KvEventSink& sink(std::size_t replica) override { return replica_(replica).sink; }

    void publish(std::size_t replica, core::SimTime at) override {
        Replica& r = replica_(replica);
        for (const auto& [stored, key] : r.sink.unpublished) {
            r.pending.push_back(Event{at + delay_, stored, key});
        }
        r.sink.unpublished.clear();
    }

    void matched(std::span<const core::BlockHash> hashes, core::SimTime now, std::size_t num_replicas,
                 std::vector<std::int64_t>& out) override {
        if (!sets_) {
            num_indexed_ = std::max(num_replicas, replicas_.size());
            sets_.emplace(num_indexed_);
        }
        for (std::size_t i = 0; i < replicas_.size(); ++i) {
            auto& pending = replicas_[i]->pending;  // per replica in publish order: its steps end in order
            while (!pending.empty() && pending.front().visible_at <= now) {
                const Event& e = pending.front();
                e.stored ? sets_->hold(e.key, i) : sets_->release(e.key, i);
                pending.pop_front();
            }
        }
        sets_->matched(hashes, out);
        out.resize(num_replicas);
    }

    void routed(std::size_t, std::span<const core::BlockHash>, core::SimTime) override {}
    KvEventFeed* feed() override { return this; }

private:
    struct Event {
        core::SimTime visible_at;
        bool stored = false;
        std::uint64_t key = 0;
    };
    struct Sink final : public cache::KvEventSink {
        std::vector<std::pair<bool, std::uint64_t>> unpublished;  // (stored?, block) in emission order
        void block_stored(core::BlockHash hash, int group) override {
            if (group == 0) {
                unpublished.emplace_back(true, core::to_int(hash));
            }
        }
        void block_removed(core::BlockHash hash, int group) override {
            if (group == 0) {
                unpublished.emplace_back(false, core::to_int(hash));
            }
        }
    };
    struct Replica {
        Sink sink;
        std::deque<Event> pending;
    };
    Replica& replica_(std::size_t r) {
        SERVESIM_CHECK(!sets_ || r < num_indexed_, "replica {} is outside the {} indexed", r, num_indexed_);
        while (replicas_.size() <= r) {
            replicas_.push_back(std::make_unique<Replica>());
        }
        return *replicas_[r];
    }

    core::Duration delay_;
    std::vector<std::unique_ptr<Replica>> replicas_;  // stable: the block pools hold their sinks
    std::optional<ReplicaBlockSets> sets_;
    std::size_t num_indexed_ = 0;  // replicas in sets_ (fixed at the first routing)
};

std::unique_ptr<PrefixView> make_prefix_view(const RouterOptions& o) {
    if (o.precise_prefix_scorer) {
        return std::make_unique<KvEventIndex>(o);
    }
    return std::make_unique<RoutedPrefixIndex>(o);
}

// The cache-aware routers' pick: the replica whose value strictly beats all before it (`beats(a, b)`), so ties go to
// the lowest index, and the routing recorded in `index` (what the router later believes each replica caches).
template <typename Value, typename Beats>
std::size_t route_best(const RouteRequest& req, std::size_t num_replicas, PrefixView& index, Value value,
                       Beats beats) {
    std::size_t best = 0;
    double best_value = 0;
    for (std::size_t i = 0; i < num_replicas; ++i) {
        const double v = value(i);
        if (i == 0 || beats(v, best_value)) {
            best_value = v;
            best = i;
        }
    }
    index.routed(best, req.block_hashes, req.now);
    return best;
}

// llm-d's inference scheduler (the EPP's filter → score → pick with a weighted sum of scorers, highest wins): the
// prefix-cache scorer (matched leading blocks / the prompt's blocks), the queue scorer (waiting requests, min-max
// normalised: (max − q) / (max − min), 1 when all are equal) and the KV-cache-utilisation scorer (1 − usage).
// Ties go to the lowest index (llm-d picks at random among the best).
class LlmdRouter final : public Router {
public:
    explicit LlmdRouter(const RouterOptions& o) : options_(o), index_(make_prefix_view(o)) {}
    [[nodiscard]] bool needs_loads() const override { return true; }
    [[nodiscard]] bool needs_block_hashes() const override { return true; }
    [[nodiscard]] KvEventFeed* kv_event_feed() override { return index_->feed(); }

    std::size_t route(const RouteRequest& req, const std::vector<ReplicaLoad>& loads) override {
        std::size_t qmin = loads.front().num_waiting;
        std::size_t qmax = qmin;
        for (const auto& l : loads) {
            qmin = std::min(qmin, l.num_waiting);
            qmax = std::max(qmax, l.num_waiting);
        }
        const double blocks = static_cast<double>(req.block_hashes.size());
        index_->matched(req.block_hashes, req.now, loads.size(), matched_);
        // precise-prefix-cache-scorer (llm-d-inference-scheduler, indexedScoresToNormalizedScoredPods): a replica
        // holding no leading block scores 0; the others are min-max normalised among themselves, 1 when all equal.
        std::int64_t hit_min = 0;
        std::int64_t hit_max = 0;
        for (const std::int64_t m : matched_) {
            if (m > 0) {
                hit_min = hit_min == 0 ? m : std::min(hit_min, m);
                hit_max = std::max(hit_max, m);
            }
        }
        const auto precise = [&](std::int64_t m) {
            if (m == 0) {
                return 0.0;
            }
            return hit_max == hit_min ? 1.0
                                      : static_cast<double>(m - hit_min) / static_cast<double>(hit_max - hit_min);
        };
        const auto score = [&](std::size_t i) {
            const auto m = matched_[i];
            const double prefix = options_.precise_prefix_scorer ? precise(m)
                                                                 : (blocks > 0 ? static_cast<double>(m) / blocks : 0.0);
            const double queue = qmax == qmin ? 1.0
                                              : static_cast<double>(qmax - loads[i].num_waiting) /
                                                    static_cast<double>(qmax - qmin);
            const double kv = 1.0 - loads[i].kv_usage;
            return options_.prefix_weight * prefix + options_.queue_weight * queue +
                   options_.kv_utilization_weight * kv;
        };
        return route_best(req, loads.size(), *index_, score, std::greater<double>());
    }

private:
    RouterOptions options_;
    std::unique_ptr<PrefixView> index_;
    std::vector<std::int64_t> matched_;  // per replica, reused
};

// NVIDIA Dynamo's KV-aware router: cost = overlap_weight × blocks still to prefill (the prompt's blocks − the
// overlap) + the worker's active blocks (decode load, here kv_usage × capacity); the lowest cost wins (temperature
// 0), ties to the lowest index.
class DynamoKvRouter final : public Router {
public:
    explicit DynamoKvRouter(const RouterOptions& o) : options_(o), index_(make_prefix_view(o)) {}
    [[nodiscard]] bool needs_loads() const override { return true; }
    [[nodiscard]] bool needs_block_hashes() const override { return true; }
    [[nodiscard]] KvEventFeed* kv_event_feed() override { return index_->feed(); }

    std::size_t route(const RouteRequest& req, const std::vector<ReplicaLoad>& loads) override {
        const auto blocks = static_cast<double>(req.block_hashes.size());
        index_->matched(req.block_hashes, req.now, loads.size(), matched_);
        const auto cost = [&](std::size_t i) {
            const double prefill = blocks - static_cast<double>(matched_[i]);
            const double active = loads[i].kv_usage * static_cast<double>(options_.capacity_blocks(i));
            return options_.overlap_weight * prefill + active;
        };
        return route_best(req, loads.size(), *index_, cost, std::less<double>());
    }

private:
    RouterOptions options_;
    std::unique_ptr<PrefixView> index_;
    std::vector<std::int64_t> matched_;  // per replica, reused
};

// Session affinity (llm-d's session-affinity scorer: the response names the pod that served it, in a session token
// or cookie the client presents again, and that pod scores 1, the others 0). Which requests share a session depends
// on the client (`session_key`): by default a tenant's (one cookie jar for all its conversations), or one
// conversation's (workloads::RequestSpec::session; a workload without conversations, a trace, falls back to the
// tenant). A session's first request goes to the replica with the fewest waiting + running (ties to the lowest
// index), every later one to the same replica, whatever its load; requests with neither (0) are routed by load. A
// conversation's entry is dropped with its last request, so the table holds only the live ones (llm-d keeps no
// table: the token travels with the client).
class SessionAffinityRouter final : public Router {
public:
    explicit SessionAffinityRouter(const RouterOptions& o) : per_conversation_(o.session_per_conversation) {}

    [[nodiscard]] bool needs_loads() const override { return true; }

    std::size_t route(const RouteRequest& req, const std::vector<ReplicaLoad>& loads) override {
        const bool by_conversation = per_conversation_ && req.session != 0;
        // Conversation ids and tenant ids are kept apart by the key's top bit.
        const std::uint64_t key = by_conversation ? (req.session | (std::uint64_t{1} << 63))
                                                  : static_cast<std::uint64_t>(core::to_int(req.tenant));
        const bool ends = by_conversation && req.last_in_session;
        if (key != 0) {
            if (const auto it = home_.find(key); it != home_.end()) {
                const std::size_t home = it->second;
                if (ends) {
                    home_.erase(it);
                }
                return home;
            }
        }
        std::size_t best = 0;
        for (std::size_t i = 1; i < loads.size(); ++i) {
            if (loads[i].num_waiting + loads[i].num_running < loads[best].num_waiting + loads[best].num_running) {
                best = i;
            }
        }
        if (key != 0 && !ends) {
            home_.emplace(key, best);
        }
        return best;
    }

private:
    bool per_conversation_;
    std::unordered_map<std::uint64_t, std::size_t> home_;  // session → its replica (lookups only: no iteration)
};

}  // namespace

RouterOptions parse_router_options(const YamlMap& m) {
    m.allow_only({"prefix_weight", "queue_weight", "kv_utilization_weight", "overlap_weight", "cache_signal_delay",
                  "prefix_scorer", "session_key"});
    RouterOptions o;
    auto weight = [&](const char* key, double& v) {
        v = m.get_or<double>(key, v);
        if (!(v >= 0)) {
            m.fail(key, fmt::format("must be a non-negative weight, got {}", v));
        }
    };
    weight("prefix_weight", o.prefix_weight);
    weight("queue_weight", o.queue_weight);
    weight("kv_utilization_weight", o.kv_utilization_weight);
    weight("overlap_weight", o.overlap_weight);
    if (m.has("cache_signal_delay")) {
        const YAML::Node n = m.node("cache_signal_delay");
        if (!n.IsScalar()) {
            m.fail("cache_signal_delay", "expected a duration such as 500ms or 2s");
        }
        o.cache_signal_delay_s =
            parse_duration_s(n.Scalar(), m.file(), m.line("cache_signal_delay"), m.key_path("cache_signal_delay"));
        if (!(o.cache_signal_delay_s >= 0)) {
            m.fail("cache_signal_delay", "must be non-negative");
        }
    }
    const auto scorer = m.get_or<std::string>("prefix_scorer", "approximate");
    if (scorer == "precise") {
        o.precise_prefix_scorer = true;
    } else if (scorer != "approximate") {
        m.fail("prefix_scorer", "allowed: approximate (an index of the prompts the router sent to each replica), "
                                "precise (the replicas' KV events: llm-d's precise-prefix-cache-scorer)");
    }
    const auto session = m.get_or<std::string>("session_key", "tenant");
    if (session == "conversation") {
        o.session_per_conversation = true;
    } else if (session != "tenant") {
        m.fail("session_key", "allowed: tenant (a client's one session for all its conversations), conversation (a "
                              "session per conversation)");
    }
    return o;
}

const std::vector<RouterEntry>& router_table() {
    static const std::vector<RouterEntry> table = {
        {"round_robin", "each new request to the next replica in turn",
         [](const RouterOptions&) { return std::unique_ptr<Router>(new RoundRobinRouter()); }},
        {"least_loaded", "the replica with the fewest waiting + running requests",
         [](const RouterOptions&) { return std::unique_ptr<Router>(new LeastLoadedRouter()); }},
        {"vllm_dp", "vLLM's data-parallel load balancer: the fewest 4 x waiting + running",
         [](const RouterOptions&) { return std::unique_ptr<Router>(new VllmDpRouter()); }},
        {"prefix_affinity", "the replica chosen by a hash of the prompt's first run (the system prompt)",
         [](const RouterOptions&) { return std::unique_ptr<Router>(new PrefixAffinityRouter()); }},
        {"llm_d", "llm-d's scorers: prefix cache, queue depth and KV utilisation, weighted; the highest sum",
         [](const RouterOptions& o) { return std::unique_ptr<Router>(new LlmdRouter(o)); }},
        {"dynamo_kv", "Dynamo's KV router: the lowest overlap_weight x blocks to prefill + active blocks",
         [](const RouterOptions& o) { return std::unique_ptr<Router>(new DynamoKvRouter(o)); }},
        {"session_affinity",
         "a session's requests (a tenant's; a conversation's with session_key: conversation) to the replica of its "
         "first one, chosen by fewest requests",
         [](const RouterOptions& o) { return std::unique_ptr<Router>(new SessionAffinityRouter(o)); }},
    };
    return table;
}

std::unique_ptr<Router> make_router(std::string_view name, const RouterOptions& options) {
    std::string known;
    for (const auto& e : router_table()) {
        if (e.name == name) {
            return e.make(options);
        }
        known += (known.empty() ? "" : ", ") + std::string(e.name);
    }
    throw ConfigError("router: unknown router '" + std::string(name) + "'; known: " + known);
}

}  // namespace servesim::cluster
