// Layout enumeration; see layouts.h.
#include "planner/layouts.h"

#include <fmt/format.h>

#include "common/error.h"

namespace servesim::planner {

std::string Layout::label() const {
    return fmt::format("tp{} pp{} dp{}{}", tensor_parallel_size, pipeline_parallel_size, data_parallel_size,
                       enable_expert_parallel ? " ep" : "");
}

std::vector<Layout> enumerate_layouts(const LayoutSpace& s) {
    if (s.gpus_per_node < 1) {
        throw ConfigError(fmt::format("--gpus-per-node: {} is not a GPU count; allowed: 1 or more", s.gpus_per_node));
    }
    if (s.gpus < 1) {
        throw ConfigError(fmt::format("--gpus: {} is not a GPU count; allowed: whole nodes of {} GPUs (--gpus-per-node)",
                                      s.gpus, s.gpus_per_node));
    }
    if (s.gpus % s.gpus_per_node != 0) {
        const int below = s.gpus / s.gpus_per_node * s.gpus_per_node;
        throw ConfigError(fmt::format(
            "--gpus: {} GPUs are not whole nodes of {} (--gpus-per-node); GPUs come in nodes: give {}{}, or the node "
            "size with --gpus-per-node",
            s.gpus, s.gpus_per_node, below > 0 ? fmt::format("{} or ", below) : std::string(), below + s.gpus_per_node));
    }
    if (s.max_pipeline_parallel_size && *s.max_pipeline_parallel_size < 1) {
        throw ConfigError(fmt::format("--max-pp: {} is not a stage count; allowed: 1 or more",
                                      *s.max_pipeline_parallel_size));
    }
    std::vector<Layout> out;
    for (int tp = 1; tp <= s.gpus_per_node; ++tp) {
        if (s.gpus_per_node % tp != 0) {
            continue;  // TP stays inside a node
        }
        for (int pp = 1; tp * pp <= s.gpus; ++pp) {
            if (s.max_pipeline_parallel_size && pp > *s.max_pipeline_parallel_size) {
                break;
            }
            const int replica = tp * pp;
            if (s.gpus % replica != 0) {
                continue;  // every GPU is used: DP = gpus / replica
            }
            const bool tiles = s.gpus_per_node % replica == 0 || replica % s.gpus_per_node == 0;
            if (!tiles) {
                continue;  // a replica would straddle a node boundary
            }
            const int dp = s.gpus / replica;
            out.push_back({tp, pp, dp, false});
            if (s.moe && pp == 1 && tp * dp > 1) {
                out.push_back({tp, pp, dp, true});
            }
        }
    }
    return out;
}

}  // namespace servesim::planner
