// The router registry and the three routers.
#include "sim/cluster/router.h"

#include "common/error.h"

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

}  // namespace

const std::vector<RouterEntry>& router_table() {
    static const std::vector<RouterEntry> table = {
        {"round_robin", "each new request to the next replica in turn",
         [] { return std::unique_ptr<Router>(new RoundRobinRouter()); }},
        {"least_loaded", "the replica with the fewest waiting + running requests",
         [] { return std::unique_ptr<Router>(new LeastLoadedRouter()); }},
        {"vllm_dp", "vLLM's data-parallel load balancer: the fewest 4 x waiting + running",
         [] { return std::unique_ptr<Router>(new VllmDpRouter()); }},
        {"prefix_affinity", "the replica chosen by a hash of the prompt's first run (the system prompt)",
         [] { return std::unique_ptr<Router>(new PrefixAffinityRouter()); }},
    };
    return table;
}

std::unique_ptr<Router> make_router(std::string_view name) {
    std::string known;
    for (const auto& e : router_table()) {
        if (e.name == name) {
            return e.make();
        }
        known += (known.empty() ? "" : ", ") + std::string(e.name);
    }
    throw ConfigError("router: unknown router '" + std::string(name) + "'; known: " + known);
}

}  // namespace servesim::cluster
