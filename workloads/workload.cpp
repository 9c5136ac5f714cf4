// make_workload / validate_workload: the registry table of workload types ({name, description, validate, factory}),
// chosen by the `type:` key. Every type reads its own keys strictly: an unknown key lists the allowed
// ones.
#include "workloads/workload.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "workloads/bench_serve_workload.h"
#include "workloads/multi_turn_bench_workload.h"
#include "workloads/open_loop_workload.h"
#include "workloads/tenant_workload.h"

namespace servesim::workloads {

namespace {

struct WorkloadType {
    std::string_view name;
    std::string_view description;
    void (*validate)(const YamlMap&);
    std::unique_ptr<Workload> (*factory)(const YamlMap&, std::uint64_t seed);
};

const std::vector<WorkloadType>& workload_type_table() {
    static const std::vector<WorkloadType> table = {
        {"tenants", "tenants with a system prompt each, multi-turn dialogues, closed loop or per-tenant arrivals",
         [](const YamlMap& m) { (void)parse_tenant_workload(m); },
         [](const YamlMap& m, std::uint64_t seed) -> std::unique_ptr<Workload> {
             return std::make_unique<TenantWorkload>(parse_tenant_workload(m), seed);
         }},
        {"synthetic", "independent requests: an arrival process and prompt/output length distributions",
         [](const YamlMap& m) { (void)parse_synthetic_workload(m); },
         [](const YamlMap& m, std::uint64_t seed) {
             return make_synthetic_workload(parse_synthetic_workload(m), seed);
         }},
        {"trace", "replay of a request trace file (mooncake JSONL, azure CSV), streamed; validation reads it all",
         [](const YamlMap& m) { (void)check_trace(parse_trace_workload(m)); },
         [](const YamlMap& m, std::uint64_t) { return make_trace_workload(parse_trace_workload(m)); }},
        {"bench_serve",
         "vllm bench serve: a sampled dataset sent open loop at request_rate (gamma burstiness), "
         "max_concurrency as its semaphore",
         [](const YamlMap& m) { (void)make_bench_serve_workload(parse_bench_serve_workload(m, 0), 0); },
         [](const YamlMap& m, std::uint64_t seed) {
             return make_bench_serve_workload(parse_bench_serve_workload(m, seed), seed);
         }},
        {"multi_turn_bench",
         "vLLM's multi-turn benchmark: closed-loop clients over generated conversations, whole "
         "history each turn",
         [](const YamlMap& m) { (void)parse_multi_turn_bench_workload(m, 0); },
         [](const YamlMap& m, std::uint64_t seed) {
             return make_multi_turn_bench_workload(parse_multi_turn_bench_workload(m, seed));
         }},
    };
    return table;
}

const WorkloadType& find_type(const YamlMap& node) {
    const auto name = node.get<std::string>("type");
    const auto& table = workload_type_table();
    const auto it = std::find_if(table.begin(), table.end(), [&](const auto& t) { return t.name == name; });
    if (it == table.end()) {
        std::string names;
        for (const auto& t : table) {
            names += (names.empty() ? "" : ", ") + std::string(t.name);
        }
        node.fail("type", "unknown workload type '" + name + "'; allowed: " + names);
    }
    return *it;
}

}  // namespace

std::vector<WorkloadTypeInfo> workload_types() {
    std::vector<WorkloadTypeInfo> out;
    for (const auto& t : workload_type_table()) {
        out.push_back({t.name, t.description});
    }
    return out;
}

std::unique_ptr<Workload> make_workload(const YamlMap& node, std::uint64_t seed) {
    return find_type(node).factory(node, seed);
}

void validate_workload(const YamlMap& node) {
    find_type(node).validate(node);
}

}  // namespace servesim::workloads
