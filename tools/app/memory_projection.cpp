// Memory projection before work starts; see memory_projection.h and docs/MEMORY-PROJECTION.md (how each term was
// measured, and the projection against peak RSS).
#include "tools/app/memory_projection.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/input_file.h"
#include "sim/cache/prefix_cache/block_pool.h"
#include "tools/app/run_status.h"
#include "workloads/workload.h"

namespace servesim::app {

namespace {

// Measured with /usr/bin/time -v (peak RSS) on the Release build (g++ 12), docs/MEMORY-PROJECTION.md "Constants":
// the process running one 10-request synthetic run (base.yaml): 11.7 MB.
constexpr std::int64_t kBaseBytes = 12'000'000;
// A request alive in the simulator (waiting or running: the client's spec, the engine's request, its queue entries),
// less its block hashes: 400,000 requests sent at once (rate inf) minus 100,000, 100-token prompts, 820.7 B each,
// less the 7 hashes of 8 B.
constexpr std::int64_t kAliveRequestBytes = 770;
// One block hash (vLLM Request.block_hashes: one per full prompt block, computed when the request arrives); a
// 2,000-token prompt measured 0.52 B per token over a 100-token one (8 B per 16-token block).
constexpr std::int64_t kBlockHashBytes = 8;
// A tenant's client state (its length and arrival streams, dialogue): 80,000 tenants minus 20,000 at 1 req/s,
// 5,248 B each.
constexpr std::int64_t kTenantBytes = 5'250;
// A finished request's record kept for requests.csv, vllm-bench and multi-turn statistics (RequestRecord in a
// growing vector, and its summary rows): 400,000 requests with --out minus without, 320 B each.
constexpr std::int64_t kRecordBytes = 320;
// exact_percentiles keeps every sample as a double (TTFT, TPOT, E2E per request, an ITL per output token); a vector
// holds up to twice its samples (capacity doubling). sizeof(double) × 2, not measured.
constexpr std::int64_t kExactSampleBytes = 16;
// A block of the host tiers of cluster.kv_connector (LruBlockTiers: key, links, index slot), filled by unique
// prompts: LMCache 2 hosts x 187,500 blocks 48.7 B each, 2 x 375,000 blocks 44.0 B; Mooncake 46 B.
constexpr std::int64_t kStoreBlockBytes = 50;
// A CPU block of engine.kv_offloading_size (the offloading connector's LRU and lookup): 455,111 blocks (1,000 GiB of
// Qwen3-4B) filled by unique prompts, 91 B each.
constexpr std::int64_t kOffloadBlockBytes = 95;
// A block in a cache-aware router's index of what each replica holds (llm_d, dynamo_kv: sim/cluster/router.cpp
// RoutedPrefixIndex's LRU per replica, or the precise scorer's map): large.yaml (128 replicas, llm_d, 200,000
// prompts of 109 blocks on average: 21.9 M blocks routed, none evicted) peaked 780 MB above the other terms, 35.6 B
// per block.
constexpr std::int64_t kRouterBlockBytes = 36;
// Requests drawn from the workload to take its mean prompt and output lengths.
constexpr int kSampledRequests = 64;

std::optional<double> number_at(const YAML::Node& w, const char* key) {
    const YAML::Node n = w[key];
    if (!n || !n.IsScalar()) {
        return std::nullopt;
    }
    try {
        const double v = n.as<double>();
        return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
    } catch (const YAML::Exception&) {
        return std::nullopt;  // a duration with a unit, `inf`: handled by the caller where it matters
    }
}

std::optional<double> duration_at(const YAML::Node& w, const char* key) {
    const YAML::Node n = w[key];
    if (!n || !n.IsScalar()) {
        return std::nullopt;
    }
    return parse_duration_s(n.Scalar(), "workload", 0, key);
}

// Lines of a trace file (an upper bound on its records), counted once per path.
std::int64_t trace_lines(const std::string& path) {
    static thread_local std::map<std::string, std::int64_t> counted;
    if (const auto it = counted.find(path); it != counted.end()) {
        return it->second;
    }
    (void)check_input_file(path, "trace file", kNoFileSizeBound);
    std::ifstream in(path, std::ios::binary);
    std::int64_t lines = 0;
    char buf[1 << 16];
    bool last_newline = true;
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        const auto n = static_cast<std::size_t>(in.gcount());
        lines += std::count(buf, buf + n, '\n');
        last_newline = buf[n - 1] == '\n';
    }
    lines += last_newline ? 0 : 1;
    counted.emplace(path, lines);
    return lines;
}

// Requests the run sends at most, from the workload's keys; nullopt when only the run can tell (a multi-turn
// benchmark without max_num_requests).
std::optional<std::int64_t> requests_sent(const ExperimentConfig& c) {
    const YAML::Node& w = c.workload;
    const std::string type = w["type"] ? w["type"].Scalar() : "";
    std::optional<double> n;
    const auto cap = [&](std::optional<double> v) {
        if (v) {
            n = n ? std::min(*n, *v) : *v;
        }
    };
    cap(number_at(w, "num_requests"));
    if (type == "synthetic" || type == "tenants") {
        const std::optional<double> rate = number_at(w, "rate");
        std::optional<double> horizon_s = duration_at(w, "duration");
        horizon_s = horizon_s ? std::min(*horizon_s, c.max_time_s) : c.max_time_s;
        if (rate) {
            cap(std::ceil(*rate * *horizon_s) + 1);
        }
    } else if (type == "bench_serve") {
        cap(number_at(w, "num_prompts").value_or(1000.0));  // vllm bench serve's default --num-prompts
    } else if (type == "multi_turn_bench") {
        cap(number_at(w, "max_num_requests"));
    } else if (type == "trace") {
        cap(number_at(w, "limit"));
        if (w["trace"] && w["trace"].IsScalar()) {
            cap(static_cast<double>(trace_lines(w["trace"].Scalar())));
        }
    }
    if (!n) {
        return std::nullopt;
    }
    return static_cast<std::int64_t>(std::min(*n, 9.0e15));
}

// Requests alive at once, at most: every request sent when the client does not wait for answers and the replicas
// fall behind; a semaphore's (max_concurrency) or a closed loop's clients otherwise.
std::int64_t requests_alive(const ExperimentConfig& c, std::int64_t sent) {
    const YAML::Node& w = c.workload;
    const std::string type = w["type"] ? w["type"].Scalar() : "";
    std::int64_t alive = sent;
    const auto cap = [&](std::optional<double> v) {
        if (v && *v >= 1) {
            alive = std::min(alive, static_cast<std::int64_t>(*v));
        }
    };
    cap(number_at(w, "max_concurrency"));
    if (type == "tenants") {
        cap(number_at(w, "tenants"));  // one request in flight per tenant
    } else if (type == "multi_turn_bench") {
        cap(number_at(w, "max_active_conversations"));
    }
    return alive;
}

struct SampledLengths {
    double prompt_tokens = 0;
    double output_tokens = 0;
};

// The mean prompt and output lengths of the workload's first requests (its own draws, with the run's seed).
SampledLengths sample_lengths(const ExperimentConfig& c) {
    // Once per workload and seed: a sweep's points mostly share them, and a bench_serve dataset is read to sample.
    static thread_local std::map<std::pair<std::string, std::uint64_t>, SampledLengths> sampled;
    YAML::Emitter text;
    text << c.workload;
    const auto key = std::make_pair(std::string(text.c_str()), c.seed);
    if (const auto it = sampled.find(key); it != sampled.end()) {
        return it->second;
    }
    SampledLengths s;
    const auto w = workloads::make_workload(YamlMap(c.workload, c.file, "workload"), c.seed);
    int n = 0;
    for (; n < kSampledRequests && w->next_arrival_time(); ++n) {
        const workloads::RequestSpec r = w->pop_next_arrival();
        s.prompt_tokens += static_cast<double>(core::total_tokens(r.prompt));
        s.output_tokens += static_cast<double>(r.max_output_tokens);
    }
    if (n > 0) {
        s.prompt_tokens /= n;
        s.output_tokens /= n;
    }
    sampled.emplace(key, s);
    return s;
}

void add_pool_terms(const PreparedExperiment& p, const char* pool, std::vector<MemoryTerm>& terms) {
    std::map<std::int64_t, std::int64_t> replicas_by_blocks;  // a replica's blocks -> replicas with that many
    for (int i = 0; i < p.config.replicas; ++i) {
        ++replicas_by_blocks[replica_plan(p, static_cast<std::size_t>(i)).num_gpu_blocks];
    }
    for (const auto& [blocks, replicas] : replicas_by_blocks) {
        const std::int64_t bytes = replicas * cache::BlockPool::metadata_bytes(blocks, p.plan.enable_prefix_caching);
        terms.push_back({fmt::format("KV block metadata{}: {} replica{} x {} blocks", pool, replicas,
                                     replicas == 1 ? "" : "s", thousands(blocks)),
                         bytes});
    }
}

// The host tiers a run fills at most: engine.kv_offloading_size per replica, cluster.kv_connector's per host.
void add_host_tier_terms(const PreparedExperiment& p, std::vector<MemoryTerm>& terms) {
    const ExperimentConfig& c = p.config;
    if (c.engine.kv_offloading_size_gib && !p.prefill_pool) {
        std::int64_t blocks = 0;
        for (int i = 0; i < c.replicas; ++i) {
            blocks += offload_config(c.engine, replica_plan(p, static_cast<std::size_t>(i)), p.gpu).num_cpu_blocks;
        }
        terms.push_back({fmt::format("CPU offload blocks (kv_offloading_size): {}", thousands(blocks)),
                         blocks * kOffloadBlockBytes});
    }
    if (c.kv_connector && c.topology && !p.prefill_pool) {
        const cluster::KvStoreConfig k = kv_store_config(p);
        std::set<std::size_t> hosts;
        for (const auto& gpus : p.replica_gpus) {
            if (!gpus.empty()) {
                hosts.insert(c.topology->nearest_host(gpus.front()));
            }
        }
        const auto num_hosts = static_cast<std::int64_t>(hosts.size());
        const std::int64_t blocks = num_hosts * k.host_capacity_blocks + k.remote_capacity_blocks;
        terms.push_back({fmt::format("KV connector store: {} host{} x {} blocks{}", num_hosts,
                                     num_hosts == 1 ? "" : "s", thousands(k.host_capacity_blocks),
                                     k.remote_capacity_blocks > 0
                                         ? fmt::format(" + {} remote", thousands(k.remote_capacity_blocks))
                                         : ""),
                         blocks * kStoreBlockBytes});
    }
}

}  // namespace

RunMemoryProjection project_run_memory(const PreparedExperiment& p) {
    RunMemoryProjection r;
    const ExperimentConfig& c = p.config;
    r.run = c.name;
    if (p.order_only_trace && !p.order_only_engine_replay) {
        return r;  // the trace is shared (project_memory); the order-only pool is the trace's own blocks
    }
    if (p.prefill_pool) {
        add_pool_terms(*p.prefill_pool, " (prefill)", r.terms);
        add_pool_terms(*p.decode_pool, " (decode)", r.terms);
    } else {
        add_pool_terms(p, "", r.terms);
    }
    add_host_tier_terms(p, r.terms);
    const std::optional<std::int64_t> sent = requests_sent(c);
    if (sent) {
        const SampledLengths lengths = sample_lengths(c);
        const int block = std::max(1, p.plan.block_size);
        const auto hashes = static_cast<std::int64_t>(lengths.prompt_tokens / block);
        const std::int64_t alive = requests_alive(c, *sent);
        r.terms.push_back({fmt::format("requests alive at once: {} (mean prompt {:.0f} tokens)", thousands(alive),
                                       lengths.prompt_tokens),
                           alive * (kAliveRequestBytes + hashes * kBlockHashBytes)});
        if (c.router == "llm_d" || c.router == "dynamo_kv") {
            // The router's index holds at most every block routed, and never more than the replicas' pools hold.
            std::int64_t pool_blocks = 0;
            for (int i = 0; i < c.replicas; ++i) {
                pool_blocks += replica_plan(p, static_cast<std::size_t>(i)).num_gpu_blocks;
            }
            const std::int64_t routed = std::min(pool_blocks, *sent * hashes);
            r.terms.push_back({fmt::format("router index ({}): {} blocks", c.router, thousands(routed)),
                               routed * kRouterBlockBytes});
        }
        if (c.keep_request_records) {
            r.terms.push_back({fmt::format("request records: {}", thousands(*sent)), *sent * kRecordBytes});
            if (c.keep_request_itls) {  // --save-detailed: one double per gap after the first token
                const auto gaps = static_cast<std::int64_t>(std::max(0.0, lengths.output_tokens - 1.0));
                r.terms.push_back({fmt::format("per-request ITLs (--save-detailed): {} requests x {} gaps",
                                               thousands(*sent), gaps),
                                   *sent * (gaps * static_cast<std::int64_t>(sizeof(double)) +
                                             static_cast<std::int64_t>(sizeof(std::vector<double>)))});
            }
        }
        if (c.exact_percentiles) {
            const auto samples = static_cast<std::int64_t>(3.0 + lengths.output_tokens);
            r.terms.push_back({fmt::format("exact percentile samples: {} requests x {}", thousands(*sent), samples),
                               *sent * samples * kExactSampleBytes});
        }
    } else {
        r.terms.push_back({"requests: their number is known only as the run goes (not projected)", 0});
    }
    if (c.workload["type"] && c.workload["type"].Scalar() == "tenants") {
        if (const auto t = number_at(c.workload, "tenants")) {
            const auto tenants = static_cast<std::int64_t>(*t);
            r.terms.push_back({fmt::format("tenants: {}", thousands(tenants)), tenants * kTenantBytes});
        }
    }
    std::stable_sort(r.terms.begin(), r.terms.end(),
                     [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes > b.bytes; });
    for (const auto& t : r.terms) {
        r.total_bytes += t.bytes;
    }
    return r;
}

MemoryProjection project_memory(const std::vector<PreparedExperiment>& runs, int jobs) {
    MemoryProjection m;
    m.base_bytes = kBaseBytes;
    std::set<const cache::OrderOnlyTrace*> traces;
    std::vector<RunMemoryProjection> all;
    all.reserve(runs.size());
    for (const auto& p : runs) {
        if (p.order_only_trace && traces.insert(p.order_only_trace.get()).second) {
            const auto& t = *p.order_only_trace;
            // Per request a prompt length and a first-block offset; per full block a dense id.
            constexpr auto kPerRequest = static_cast<std::int64_t>(sizeof(std::int64_t) + sizeof(std::uint64_t));
            m.shared_bytes += t.num_requests() * kPerRequest +
                              t.num_full_blocks() * static_cast<std::int64_t>(sizeof(cache::DenseBlockId));
        }
        all.push_back(project_run_memory(p));
    }
    std::stable_sort(all.begin(), all.end(), [](const RunMemoryProjection& a, const RunMemoryProjection& b) {
        return a.total_bytes > b.total_bytes;
    });
    all.resize(std::min(all.size(), static_cast<std::size_t>(std::max(1, jobs))));
    m.concurrent = std::move(all);
    m.total_bytes = m.base_bytes + m.shared_bytes;
    for (const auto& r : m.concurrent) {
        m.total_bytes += r.total_bytes;
    }
    return m;
}

std::int64_t default_memory_bound_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) {
        return std::int64_t{16} << 30;
    }
    return static_cast<std::int64_t>(0.8 * static_cast<double>(pages) * static_cast<double>(page));
}

std::int64_t parse_memory_size(const std::string& text, const std::string& origin) {
    static const std::regex re(R"(([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?) ?(B|kB|KB|KiB|MB|MiB|GB|GiB|TB|TiB)?)");
    std::smatch m;
    const auto refuse = [&] {
        return ConfigError(fmt::format("command line: {}: '{}' is not a memory size; allowed: a number of bytes above "
                                       "0 with an optional unit B, kB, KiB, MB, MiB, GB, GiB, TB, TiB (e.g. 32GiB)",
                                       origin, text));
    };
    if (!std::regex_match(text, m, re)) {
        throw refuse();
    }
    const std::string unit = m[2];
    static const std::map<std::string, double> scale = {
        {"", 1.0},         {"B", 1.0},           {"kB", 1e3},           {"KB", 1e3},
        {"KiB", 1024.0},   {"MB", 1e6},          {"MiB", 1048576.0},    {"GB", 1e9},
        {"GiB", 1073741824.0}, {"TB", 1e12},     {"TiB", 1099511627776.0}};
    const double bytes = std::stod(m[1]) * scale.at(unit);
    if (!(bytes >= 1) || bytes > 9.0e18) {
        throw refuse();
    }
    return static_cast<std::int64_t>(bytes);
}

std::string memory_text(std::int64_t bytes) {
    const auto b = static_cast<double>(bytes);
    if (b >= 1e12) {
        return fmt::format("{:.2f} TB", b / 1e12);
    }
    if (b >= 1e9) {
        return fmt::format("{:.2f} GB", b / 1e9);
    }
    if (b >= 1e6) {
        return fmt::format("{:.0f} MB", b / 1e6);
    }
    return fmt::format("{:.0f} kB", b / 1e3);
}

namespace {
// A size as --max-memory takes it, rounded up: "13GB".
std::string flag_value(std::int64_t bytes) {
    const auto b = static_cast<double>(bytes);
    if (b >= 1e12) {
        return fmt::format("{:.0f}TB", std::ceil(b / 1e12));
    }
    if (b >= 1e9) {
        return fmt::format("{:.0f}GB", std::ceil(b / 1e9));
    }
    return fmt::format("{:.0f}MB", std::ceil(b / 1e6));
}
}  // namespace

std::string projection_line(const MemoryProjection& p, std::int64_t bound_bytes) {
    return fmt::format("projected peak memory {} of {} allowed (--max-memory)", memory_text(p.total_bytes),
                       memory_text(bound_bytes));
}

void check_memory_projection(const MemoryProjection& p, std::int64_t bound_bytes) {
    if (p.total_bytes <= bound_bytes) {
        return;
    }
    std::string detail;
    std::size_t shown = 0;
    for (const auto& r : p.concurrent) {
        for (const auto& t : r.terms) {
            if (shown == 6 || t.bytes == 0) {
                break;
            }
            detail += fmt::format("\n  {}: {}: {}", r.run, t.what, memory_text(t.bytes));
            ++shown;
        }
    }
    if (p.shared_bytes > 0) {
        detail += fmt::format("\n  traces held in memory: {}", memory_text(p.shared_bytes));
    }
    throw ConfigError(fmt::format(
        "projected peak memory {} is above the bound of {} (--max-memory; default 80 % of this machine's memory); "
        "largest terms ({} run{} at once):{}\nraise it with --max-memory SIZE (e.g. --max-memory {}), run fewer "
        "points at once (--jobs), or shrink the largest term (docs/MEMORY-PROJECTION.md)",
        memory_text(p.total_bytes), memory_text(bound_bytes), p.concurrent.size(),
        p.concurrent.size() == 1 ? "" : "s", detail, flag_value(p.total_bytes + p.total_bytes / 4)));
}

}  // namespace servesim::app
