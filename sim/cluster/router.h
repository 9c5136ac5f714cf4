// Routers: which replica serves a new request (data parallelism: a separate KV cache per replica, so routing
// decides prefix-cache locality; vllm-v1-behaviour.md §8). A small interface chosen by name from one table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/content.h"

namespace servesim::cluster {

// What a router may look at: per replica load, and the request's first content run.
struct ReplicaLoad {
    std::size_t num_waiting = 0;
    std::size_t num_running = 0;
};

class Router {
public:
    virtual ~Router() = default;

    // `loads` has one entry per replica; it is filled only for routers that read it (needs_loads), so routing stays
    // O(1) per request for the others, whatever the cluster size.
    [[nodiscard]] virtual std::size_t route(const core::TokenContent& prompt, const std::vector<ReplicaLoad>& loads) = 0;

    [[nodiscard]] virtual bool needs_loads() const { return false; }
};

struct RouterEntry {
    std::string_view name;
    std::string_view description;
    std::unique_ptr<Router> (*make)();
};

// The registry: round_robin, least_loaded, vllm_dp, prefix_affinity.
[[nodiscard]] const std::vector<RouterEntry>& router_table();

// Throws ConfigError listing the known names.
[[nodiscard]] std::unique_ptr<Router> make_router(std::string_view name);

}  // namespace servesim::cluster
