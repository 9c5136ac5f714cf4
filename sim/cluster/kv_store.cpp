// The cluster-wide KV store and its per-replica connector views; see kv_store.h.
#include "sim/cluster/kv_store.h"

#include <algorithm>

#include <cmath>

#include <fmt/format.h>

#include "common/error.h"

namespace servesim::cluster {

// A replica's connector: lookups and loads go to the store; stores are queued and land two step ends later.
class SharedKvStore::View final : public cache::KvConnector {
public:
    View(SharedKvStore& store, std::size_t replica, const cache::CpuOffloadConfig& rules)
        : store_(store), replica_(replica), rules_(rules) {}

    std::int64_t lookup(std::span<const core::BlockHash> hashes, std::int64_t local_hit_tokens,
                        std::int64_t num_tokens) override {
        return store_.lookup(replica_, hashes, local_hit_tokens, num_tokens, last_sources_);
    }
    // The scheduler's lookup of a request: what it proves held is kept for the request's first saves.
    std::int64_t lookup_request(core::RequestId id, std::span<const core::BlockHash> hashes,
                                std::int64_t local_hit_tokens, std::int64_t num_tokens) override {
        HeldPrefix held;
        const std::int64_t external =
            store_.lookup(replica_, hashes, local_hit_tokens, num_tokens, last_sources_, &held);
        if (held.blocks > 0) {
            held_[core::to_int(id)] = held;
        } else {
            held_.erase(core::to_int(id));
        }
        return external;
    }
    bool request_finished(core::RequestId id) override {
        held_.erase(core::to_int(id));
        return false;
    }

    core::Duration start_load(std::int64_t, core::SimTime now) override {
        return store_.start_load(replica_, last_sources_, now, TransferOwner{});
    }
    // The load's transfers belong to the request: when other transfers change their shares, the store's tracker
    // reports the request's new end (cluster::Simulation moves its wait, Replica::retime_load).
    core::Duration start_load_request(core::RequestId id, std::int64_t, core::SimTime now) override {
        return store_.start_load(replica_, last_sources_, now,
                                 TransferOwner{static_cast<std::uint32_t>(replica_), core::to_int(id), false});
    }

    void record(std::int64_t num_tokens, std::int64_t local_hit_tokens, std::int64_t external_hit_tokens) override {
        // Scheduler.connector_prefix_cache_stats.record(num_tokens = num_tokens − local, num_hits = external).
        stats_.queries += num_tokens - local_hit_tokens;
        stats_.hits += external_hit_tokens;
    }

    void store(std::span<const core::BlockHash> hashes, std::int64_t first_block, std::int64_t end_block,
               std::int64_t, std::int64_t, std::int64_t) override {
        if (end_block <= first_block) {
            return;
        }
        // One resize for the range, then plain stores: a push_back per key checked the capacity each time.
        const std::size_t old_size = queued_.size();
        const std::size_t count = static_cast<std::size_t>(end_block - first_block);
        queued_.resize(old_size + count);
        std::uint64_t* out = queued_.data() + old_size;
        const core::BlockHash* in = hashes.data() + first_block;
        for (std::size_t i = 0; i < count; ++i) {
            out[i] = core::to_int(in[i]);
        }
    }
    // store() of a request's blocks; those its last lookup proved held are marked (HeldRange), for start_saves and
    // on_step_end to skip while the proof lasts. The proof is dropped once the request's saves pass its blocks.
    void store_request(core::RequestId id, std::span<const core::BlockHash> hashes, std::int64_t first_block,
                       std::int64_t end_block, std::int64_t snapshot_first, std::int64_t snapshot_end,
                       std::int64_t num_hit_blocks) override {
        const std::size_t base = queued_.size();
        store(hashes, first_block, end_block, snapshot_first, snapshot_end, num_hit_blocks);
        const auto it = held_.find(core::to_int(id));
        if (it == held_.end()) {
            return;
        }
        const HeldPrefix& prefix = it->second;
        const std::int64_t end = std::min(end_block, prefix.blocks);
        if (end > first_block) {
            HeldRange range;
            range.begin = base;
            range.end = base + static_cast<std::size_t>(end - first_block);
            range.last = end == prefix.blocks ? prefix.last : LruBlockTiers::Cursor{};
            range.prefix = prefix;
            queued_held_.push_back(range);
        }
        if (end_block >= prefix.blocks) {
            held_.erase(it);
        }
    }

    // The stores scheduled for a step are saved while it runs and complete with it (KVConnectorBase_V1
    // .wait_for_save, called at the end of the forward: LMCache and Mooncake Store save there), so a block is
    // visible to every replica from the end of the step that computed it.
    void on_step_start(core::SimTime now) override {
        const std::size_t first = in_step_.size();
        in_step_.insert(in_step_.end(), queued_.begin(), queued_.end());
        in_step_found_.resize(in_step_.size());
        queued_.clear();
        store_.start_saves(replica_, std::span<const std::uint64_t>(in_step_).subspan(first), now,
                           std::span<LruBlockTiers::Cursor>(in_step_found_).subspan(first), queued_held_);
        for (HeldRange& range : queued_held_) {  // from here on, indices into in_step_
            range.begin += first;
            range.end += first;
            in_step_held_.push_back(range);
        }
        queued_held_.clear();
    }

    void on_step_end() override {
        constexpr std::size_t kAhead = 16;  // prefetch distance, in blocks: each put first probes a cold index line
        WalkCursor at;
        const std::span<const std::uint64_t> keys(in_step_);
        const std::span<const LruBlockTiers::Cursor> found(in_step_found_);
        HeldRangeWalk held(store_, in_step_held_, in_step_.size());
        for (std::size_t i = 0; i < in_step_.size(); ++i) {
            // Held keys: every put a skip, only the cursor moves. A lapsed range is put as any keys (its found[i] is
            // no node, so commit probes).
            if (const std::size_t past = held.skip(i, at.pool); past != i) {
                i = past - 1;
                continue;
            }
            const std::size_t stop = held.stop();
            i += store_.commit_held_run(keys.subspan(i, stop - i), found.subspan(i, stop - i), kAhead,
                                        at);  // puts that are skips
            if (i == stop) {
                --i;  // the loop's step brings it back to `stop`: a held range, or the end
                continue;
            }
            if (i + kAhead < stop) {
                store_.prefetch_put(replica_, in_step_[i + kAhead], in_step_found_[i + kAhead], kAhead, at);
            }
            store_.commit(replica_, in_step_[i], in_step_found_[i], at);
        }
        in_step_.clear();
        in_step_found_.clear();
        in_step_held_.clear();
    }

    const cache::ExternalCacheStats& stats() const override { return stats_; }
    const cache::CpuOffloadConfig& config() const override { return rules_; }

private:
    SharedKvStore& store_;
    std::size_t replica_;
    cache::CpuOffloadConfig rules_;
    std::vector<Source> last_sources_;
    std::vector<std::uint64_t> queued_;
    std::vector<std::uint64_t> in_step_;
    std::vector<LruBlockTiers::Cursor> in_step_found_;  // per in_step_ key: where start_saves found it
    std::vector<HeldRange> queued_held_;   // ranges of queued_ a lookup proved held
    std::vector<HeldRange> in_step_held_;  // the same for in_step_
    std::unordered_map<std::uint64_t, HeldPrefix> held_;  // per request looked up, until its saves pass the prefix
    cache::ExternalCacheStats stats_;
};

SharedKvStore::SharedKvStore(const KvStoreConfig& config, const Topology& topology,
                             std::vector<std::vector<std::size_t>> replica_gpus)
    : config_(config),
      topology_(topology),
      tracker_(topology),
      replica_gpus_(std::move(replica_gpus)),
      pool_(0, 0),
      remote_(config.kind == KvStoreKind::kLmcache ? config.remote_capacity_blocks : 0) {
    SERVESIM_CHECK(config_.block_size_tokens > 0 && config_.bytes_per_block > 0, "bad kv store config");
    cache::CpuOffloadConfig rules;
    rules.block_size_tokens = config_.block_size_tokens;
    rules.offload_prompt_only = config_.kind == KvStoreKind::kLmcache;  // LMCache save_decode_cache = False
    for (std::size_t r = 0; r < replica_gpus_.size(); ++r) {
        SERVESIM_CHECK(!replica_gpus_[r].empty(), "replica {} has no GPU", r);
        const std::size_t host = topology_.nearest_host(replica_gpus_[r].front());
        SERVESIM_CHECK(host != Topology::npos, "replica {} has no host", r);
        auto it = std::find(hosts_.begin(), hosts_.end(), host);
        if (it == hosts_.end()) {
            hosts_.push_back(host);
            if (config_.kind == KvStoreKind::kLmcache) {
                host_tiers_.emplace_back(config_.host_capacity_blocks);
            }
            it = std::prev(hosts_.end());
        }
        replica_host_.push_back(static_cast<std::size_t>(it - hosts_.begin()));
        views_.push_back(std::make_unique<View>(*this, r, rules));
    }
    if (config_.kind == KvStoreKind::kMooncake) {
        pool_ = LruBlockTiers(hosts_.size(), config_.host_capacity_blocks);
    }
}

SharedKvStore::~SharedKvStore() = default;

cache::KvConnector& SharedKvStore::connector(std::size_t replica) { return *views_[replica]; }

std::int64_t SharedKvStore::num_resident_blocks() const {
    std::int64_t n = remote_.size() + pool_.size();
    for (const auto& t : host_tiers_) {
        n += t.size();
    }
    return n;
}

std::size_t SharedKvStore::where(std::size_t replica, std::uint64_t key) const {
    if (config_.kind == KvStoreKind::kMooncake) {
        const std::size_t h = pool_.tier_of(key);  // one copy in the pool: at most one segment holds it
        return h == LruBlockTiers::npos ? kNone : h;
    }
    const std::size_t own = replica_host_[replica];
    if (host_tiers_[own].contains(key)) {
        return own;
    }
    return remote_.contains(key) ? kRemote : kNone;
}

bool SharedKvStore::still_held(const HeldPrefix& h) const {
    for (std::size_t g = 0; g < h.num_guards; ++g) {
        if (!pool_.guard_holds(h.guards[g])) {
            return false;
        }
    }
    return true;
}

std::int64_t SharedKvStore::lookup(std::size_t replica, std::span<const core::BlockHash> hashes,
                                   std::int64_t local_hit_tokens, std::int64_t num_tokens,
                                   std::vector<Source>& sources, HeldPrefix* held) {
    sources.clear();
    if (held != nullptr) {
        *held = HeldPrefix{};
    }
    // The hits per tier of the pool, for the guards of `held` (kMaxTiers + 1 tiers: too many).
    std::array<std::pair<std::size_t, std::int64_t>, HeldPrefix::kMaxTiers> tier_hits{};
    std::size_t num_tiers_hit = 0;
    const auto count_tier = [&](std::size_t tier, std::int64_t k) {
        for (std::size_t t = 0; t < num_tiers_hit && t < tier_hits.size(); ++t) {
            if (tier_hits[t].first == tier) {
                tier_hits[t].second += k;
                return;
            }
        }
        if (num_tiers_hit < tier_hits.size()) {
            tier_hits[num_tiers_hit] = {tier, k};
        }
        ++num_tiers_hit;
    };
    const std::int64_t b = config_.block_size_tokens;
    // get_num_new_matched_tokens: the store is asked for the whole request in whole blocks (discard_partial_chunks)
    // from block 0, and returns hit − num_computed_tokens (mooncake/store/scheduler.py; LMCache the same).
    const std::int64_t max_blocks = std::min<std::int64_t>(num_tokens / b, static_cast<std::int64_t>(hashes.size()));
    const std::int64_t local_blocks = local_hit_tokens / b;
    std::int64_t hit = 0;
    constexpr std::int64_t kAhead = 8;  // prefetch distance, in blocks: the tiers' tables miss the cache
    WalkCursor at;
    // The hits' refreshes, deferred per run of blocks that follow one another in their tier's list (TouchWalk).
    LruBlockTiers::TouchWalk pool_walk;
    LruBlockTiers::TouchWalk local_walk;
    LruBlockTiers::TouchWalk remote_walk;
    const auto count_source = [&](std::size_t w, std::int64_t first, std::int64_t end) {
        // Blocks [first, end) found in tier w; those past the local hit are loaded from it.
        first = std::max(first, local_blocks);
        if (end <= first) {
            return;
        }
        const std::size_t vertex = w == kRemote ? config_.remote_vertex : hosts_[w];
        if (sources.empty() || sources.back().vertex != vertex) {
            sources.push_back(Source{vertex, 0});
        }
        sources.back().blocks += end - first;
    };
    for (; hit < max_blocks; ++hit) {
        if (config_.kind == KvStoreKind::kMooncake) {
            // The pending run goes on in one loop (LruBlockTiers::touch_run); the key after it is looked up alone.
            const auto k = static_cast<std::int64_t>(pool_.touch_run(
                hashes.subspan(static_cast<std::size_t>(hit), static_cast<std::size_t>(max_blocks - hit)),
                static_cast<std::size_t>(kAhead), pool_walk));
            if (k > 0) {
                at.pool = pool_walk.at;
                count_source(pool_.tier_at(pool_walk.at), hit, hit + k);
                count_tier(pool_.tier_at(pool_walk.at), k);
                hit += k;
                if (hit == max_blocks) {
                    break;
                }
            }
        }
        if (hit + kAhead < max_blocks) {
            prefetch_walk(replica, core::to_int(hashes[static_cast<std::size_t>(hit + kAhead)]), kAhead, at);
        }
        const std::uint64_t key = core::to_int(hashes[static_cast<std::size_t>(hit)]);
        // A hit refreshes the block in the tier it is read from (LMCache: the local tier first, then the remote).
        std::size_t w = kNone;
        if (config_.kind == KvStoreKind::kMooncake) {
            const std::size_t h = pool_.touch_find(key, pool_walk);  // one copy in the pool: at most one segment holds it
            at.pool = pool_walk.at;
            w = h == LruBlockTiers::npos ? kNone : h;
        } else if (host_tiers_[replica_host_[replica]].touch_if_held(key, local_walk)) {
            at.local = local_walk.at;
            w = replica_host_[replica];
        } else if (remote_.touch_if_held(key, remote_walk)) {
            at.remote = remote_walk.at;
            w = kRemote;
        }
        if (w == kNone) {
            break;
        }
        count_source(w, hit, hit + 1);
        if (config_.kind == KvStoreKind::kMooncake) {
            count_tier(w, 1);
        }
    }
    if (config_.kind == KvStoreKind::kMooncake) {
        pool_.end_touches(pool_walk);
        // Every hit is now at its tier's most-recent end, after the tier's other blocks.
        if (held != nullptr) {
            if (hit > 0 && num_tiers_hit <= HeldPrefix::kMaxTiers) {
                held->blocks = hit;
                held->last = pool_walk.at;
                held->num_guards = num_tiers_hit;
                for (std::size_t t = 0; t < num_tiers_hit; ++t) {
                    held->guards[t] = pool_.guard_tail(tier_hits[t].first, tier_hits[t].second);
                }
            }
        }
    } else {
        host_tiers_[replica_host_[replica]].end_touches(local_walk);
        remote_.end_touches(remote_walk);
    }
    if (hit <= local_blocks) {
        sources.clear();
        return 0;
    }
    return (hit - local_blocks) * b;
}

core::Duration SharedKvStore::start_load(std::size_t replica, const std::vector<Source>& sources,
                                         core::SimTime now, TransferOwner owner) {
    // Each tensor-parallel rank loads its share of every block (its KV heads) from each source, all in parallel;
    // the load ends with the slowest.
    std::map<std::size_t, std::int64_t> blocks_by_vertex;  // ordered: deterministic transfer order
    for (const auto& s : sources) {
        blocks_by_vertex[s.vertex] += s.blocks;
    }
    core::Duration longest = core::Duration::from_ns(0);
    for (const auto& [vertex, blocks] : blocks_by_vertex) {
        longest = std::max(longest, start_rank_transfers(replica, vertex, blocks, /*to_gpu=*/true, now, owner));
    }
    return longest;
}

core::Duration SharedKvStore::start_rank_transfers(std::size_t replica, std::size_t vertex, std::int64_t blocks,
                                                   bool to_gpu, core::SimTime now, TransferOwner owner) {
    const auto& gpus = replica_gpus_[replica];
    const double bytes = static_cast<double>(blocks) * config_.bytes_per_block / static_cast<double>(gpus.size());
    core::Duration longest = core::Duration::from_ns(0);
    for (const std::size_t gpu : gpus) {
        // Over the network, the rank's share is cut into one slice per NIC pair, all in flight at once.
        const auto& slices = to_gpu ? paths_.get(topology_, vertex, gpu) : paths_.get(topology_, gpu, vertex);
        longest = std::max(longest,
                           tracker_.start_slices(slices, bytes / static_cast<double>(slices.size()), now, owner));
    }
    return longest;
}

void SharedKvStore::prefetch_walk(std::size_t replica, std::uint64_t key, std::size_t distance,
                                  const WalkCursor& at) const {
    if (config_.kind == KvStoreKind::kMooncake) {
        pool_.prefetch_walk(key, distance, at.pool);
    } else {
        host_tiers_[replica_host_[replica]].prefetch_walk(key, distance, at.local);
    }
}

void SharedKvStore::prefetch_put(std::size_t replica, std::uint64_t key, const LruBlockTiers::Cursor& found,
                                 std::size_t distance, const WalkCursor& at) const {
    if (found.node == LruBlockTiers::Cursor{}.node) {
        prefetch_walk(replica, key, distance, at);
    } else if (config_.kind == KvStoreKind::kMooncake) {
        pool_.prefetch_node(found);
    } else {
        host_tiers_[replica_host_[replica]].prefetch_node(found);
    }
}

void SharedKvStore::start_saves(std::size_t replica, std::span<const std::uint64_t> keys, core::SimTime now,
                                std::span<LruBlockTiers::Cursor> found, std::span<const HeldRange> held) {
    // The blocks this step's saves will write, by the rules commit() applies at the step's end: a block some tier
    // holds already is not written again (Mooncake's put of a present key is skipped; LMCache checks its tiers).
    std::int64_t to_host = 0;
    std::int64_t to_remote = 0;
    const std::size_t own = replica_host_[replica];
    constexpr std::size_t kAhead = 16;  // prefetch distance, in blocks: where the chain of nodes breaks, a cold probe
    WalkCursor at;
    HeldRangeWalk held_ranges(*this, held, keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (const std::size_t past = held_ranges.skip(i, at.pool); past != i) {
            // Held, as contains() would find: no probe, no transfer.
            std::fill(found.begin() + static_cast<std::ptrdiff_t>(i), found.begin() + static_cast<std::ptrdiff_t>(past),
                      LruBlockTiers::Cursor{});
            i = past - 1;
            continue;
        }
        // The keys up to the next held range (a hint looks no further).
        const std::size_t stop = held_ranges.stop();
        if (config_.kind == KvStoreKind::kMooncake) {
            // A stretch of keys in consecutive nodes in one loop (LruBlockTiers::contains_run): each is held, in
            // the node after the one before.
            const std::uint32_t before = at.pool.node;
            const std::size_t k = pool_.contains_run(keys.subspan(i, stop - i), kAhead, at.pool);
            for (std::size_t j = 0; j < k; ++j) {
                found[i + j] = LruBlockTiers::Cursor{static_cast<std::uint32_t>(before + 1 + j)};
            }
            i += k;
            if (i == stop) {
                --i;  // the loop's step brings it back to `stop`: a held range, or the end
                continue;
            }
        }
        if (i + kAhead < stop) {
            prefetch_walk(replica, keys[i + kAhead], kAhead, at);
        }
        const std::uint64_t key = keys[i];
        found[i] = LruBlockTiers::Cursor{};
        if (config_.kind == KvStoreKind::kMooncake) {
            if (pool_.contains(key, at.pool)) {
                found[i] = at.pool;
            } else {
                ++to_host;
            }
        } else {
            if (host_tiers_[own].contains(key, at.local)) {
                found[i] = at.local;
            } else {
                ++to_host;
            }
            to_remote += config_.remote_capacity_blocks > 0 && !remote_.contains(key, at.remote) ? 1 : 0;
        }
    }
    // Each tensor-parallel rank writes its share of every block from its GPU, over the topology like a load, the
    // other way. The engine does not wait for it: the step's time is its compute (docs/CLUSTER.md "Store traffic").
    if (to_host > 0) {
        (void)start_rank_transfers(replica, hosts_[own], to_host, /*to_gpu=*/false, now, TransferOwner{});
    }
    if (to_remote > 0) {
        (void)start_rank_transfers(replica, config_.remote_vertex, to_remote, /*to_gpu=*/false, now, TransferOwner{});
    }
}

std::size_t SharedKvStore::commit_held_run(std::span<const std::uint64_t> keys,
                                           std::span<const LruBlockTiers::Cursor> found, std::size_t distance,
                                           WalkCursor& at) const {
    return config_.kind == KvStoreKind::kMooncake ? pool_.held_run(keys, found, distance, at.pool) : 0;
}

void SharedKvStore::commit(std::size_t replica, std::uint64_t key, const LruBlockTiers::Cursor& found,
                           WalkCursor& at) {
    if (config_.kind == KvStoreKind::kMooncake) {
        // One copy in the pool: a put of a present key is skipped.
        if (pool_.holds_at(key, found)) {
            at.pool = found;
        } else {
            pool_.insert(replica_host_[replica], key, nullptr, &at.pool);
        }
        return;
    }
    // LMCache: the local CPU tier and the remote store both keep a copy.
    LruBlockTier& local = host_tiers_[replica_host_[replica]];
    if (local.holds_at(key, found)) {
        at.local = found;
    } else {
        local.insert(key, nullptr, &at.local);
    }
    remote_.insert(key, nullptr, &at.remote);
}

KvConnectorSettings parse_kv_connector(const YamlMap& m) {
    m.allow_only({"type", "store", "host_size_gib", "host_size_tokens", "remote_size_gib", "remote_size_tokens",
                  "remote"});
    KvConnectorSettings s;
    s.file = m.file();
    s.key = m.path();
    s.line = m.line("type");
    const auto type = m.get<std::string>("type");
    if (type == "mooncake") {
        s.kind = KvStoreKind::kMooncake;
    } else if (type == "lmcache") {
        s.kind = KvStoreKind::kLmcache;
    } else {
        m.fail("type", "unknown connector '" + type + "'; allowed: mooncake (a global pool over the hosts' DRAM), "
                       "lmcache (a CPU tier per host plus a remote store)");
    }
    const auto store = m.get_or<std::string>("store", "eager");
    if (store != "eager") {
        m.fail("store", "allowed: eager (every newly computed full block is saved, as LMCache and Mooncake Store "
                        "do); saving on GPU eviction is not modelled");
    }
    auto size = [&](const char* gib, const char* tokens, std::optional<double>& g, std::optional<std::int64_t>& t,
                    bool required) {
        if (m.has(gib) && m.has(tokens)) {
            m.fail(tokens, fmt::format("give {} or {}, not both", gib, tokens));
        }
        if (m.has(gib)) {
            g = m.get<double>(gib);
            if (!(*g > 0)) {
                m.fail(gib, fmt::format("must be positive (GiB), got {}", *g));
            }
        } else if (m.has(tokens)) {
            t = m.get<std::int64_t>(tokens);
            if (*t <= 0) {
                m.fail(tokens, fmt::format("must be positive (tokens), got {}", *t));
            }
        } else if (required) {
            m.fail(gib, fmt::format("missing: give the per-host tier's size as {} or {}", gib, tokens));
        }
    };
    size("host_size_gib", "host_size_tokens", s.host_size_gib, s.host_size_tokens, true);
    size("remote_size_gib", "remote_size_tokens", s.remote_size_gib, s.remote_size_tokens, false);
    if (s.kind == KvStoreKind::kMooncake && (s.remote_size_gib || s.remote_size_tokens || m.has("remote"))) {
        m.fail(m.has("remote") ? "remote" : (s.remote_size_gib ? "remote_size_gib" : "remote_size_tokens"),
               "mooncake pools the hosts' DRAM: it has no remote store (that is lmcache's)");
    }
    if (m.has("remote") && !(s.remote_size_gib || s.remote_size_tokens)) {
        m.fail("remote", "a remote store needs its size: remote_size_gib or remote_size_tokens");
    }
    s.remote = m.get_or<std::string>("remote", "");
    return s;
}

KvStoreConfig make_kv_store_config(const KvConnectorSettings& s, const Topology* topology, int block_size_tokens,
                                   double bytes_per_block, int replicas, int gpus_per_replica) {
    auto fail = [&](const std::string& key, const std::string& msg) {
        throw ConfigError(s.file, s.line, s.key + (key.empty() ? "" : "." + key), msg);
    };
    if (topology == nullptr) {
        fail("", "a shared KV store moves blocks between nodes: give cluster.topology (a preset such as dgx-h100, "
                 "or {file: PATH})");
    }
    const auto gpus = topology->gpus();
    const auto needed = static_cast<std::size_t>(replicas) * static_cast<std::size_t>(gpus_per_replica);
    if (gpus.size() < needed) {
        fail("", fmt::format("{} replicas of {} GPUs need {} GPUs; cluster.topology has {}", replicas,
                             gpus_per_replica, needed, gpus.size()));
    }
    KvStoreConfig c;
    c.kind = s.kind;
    c.block_size_tokens = block_size_tokens;
    c.bytes_per_block = bytes_per_block;
    auto blocks = [&](const std::optional<double>& gib, const std::optional<std::int64_t>& tokens) -> std::int64_t {
        if (gib) {
            return static_cast<std::int64_t>(std::floor(*gib * 1024.0 * 1024.0 * 1024.0 / bytes_per_block));
        }
        return tokens ? *tokens / block_size_tokens : 0;
    };
    auto bytes_of = [&](const std::optional<double>& gib, std::int64_t n_blocks) {
        return gib ? *gib * 1024.0 * 1024.0 * 1024.0 : static_cast<double>(n_blocks) * bytes_per_block;
    };
    c.host_capacity_blocks = blocks(s.host_size_gib, s.host_size_tokens);
    const double host_bytes = bytes_of(s.host_size_gib, c.host_capacity_blocks);
    const std::string host_key = s.host_size_gib ? "host_size_gib" : "host_size_tokens";
    for (std::size_t i = 0; i < needed; i += static_cast<std::size_t>(gpus_per_replica)) {
        const std::size_t h = topology->nearest_host(gpus[i]);
        if (h == Topology::npos) {
            fail("", fmt::format("GPU '{}' reaches no host: the store's tiers live in host DRAM",
                                 topology->node(gpus[i]).name));
        }
        if (host_bytes > static_cast<double>(topology->node(h).memory_bytes)) {
            fail(host_key, fmt::format("the per-host tier ({:.1f} GiB) is larger than host '{}''s memory ({:.1f} GiB)",
                                       host_bytes / (1u << 30), topology->node(h).name,
                                       static_cast<double>(topology->node(h).memory_bytes) / (1u << 30)));
        }
    }
    if (c.host_capacity_blocks <= 0) {
        fail(host_key, "holds less than one block");
    }
    if (s.kind == KvStoreKind::kLmcache && (s.remote_size_gib || s.remote_size_tokens)) {
        std::size_t v = Topology::npos;
        if (s.remote.empty()) {
            for (std::size_t u = 0; u < topology->num_nodes() && v == Topology::npos; ++u) {
                if (topology->node(u).kind == NodeKind::kStorage) {
                    v = u;
                }
            }
            if (v == Topology::npos) {
                fail("remote", "the topology has no storage node for LMCache's remote store; name one with remote");
            }
        } else {
            v = topology->find(s.remote);
            if (v == Topology::npos) {
                fail("remote", "no node named '" + s.remote + "' in cluster.topology");
            }
        }
        c.remote_vertex = v;
        c.remote_capacity_blocks = blocks(s.remote_size_gib, s.remote_size_tokens);
        const double remote_bytes = bytes_of(s.remote_size_gib, c.remote_capacity_blocks);
        const std::string remote_key = s.remote_size_gib ? "remote_size_gib" : "remote_size_tokens";
        // A remote store on a host that also holds a replica's local tier shares that host's DRAM with it.
        bool shares_a_host = false;
        for (std::size_t i = 0; i < needed; i += static_cast<std::size_t>(gpus_per_replica)) {
            shares_a_host = shares_a_host || topology->nearest_host(gpus[i]) == v;
        }
        if (shares_a_host && remote_bytes + host_bytes > static_cast<double>(topology->node(v).memory_bytes)) {
            fail(remote_key, fmt::format("the remote store ({:.1f} GiB) and the local tier ({:.1f} GiB) on host '{}' "
                                         "are larger than its memory ({:.1f} GiB)",
                                         remote_bytes / (1u << 30), host_bytes / (1u << 30), topology->node(v).name,
                                         static_cast<double>(topology->node(v).memory_bytes) / (1u << 30)));
        }
        if (remote_bytes > static_cast<double>(topology->node(v).memory_bytes)) {
            fail(remote_key, fmt::format("the remote store ({:.1f} GiB) is larger than node '{}''s memory ({:.1f} GiB)",
                                         remote_bytes / (1u << 30), topology->node(v).name,
                                         static_cast<double>(topology->node(v).memory_bytes) / (1u << 30)));
        }
        if (c.remote_capacity_blocks <= 0) {
            fail(remote_key, "holds less than one block");
        }
    }
    return c;
}

}  // namespace servesim::cluster
