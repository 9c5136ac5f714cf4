// Open-loop arrival processes, as `vllm bench serve` draws them (docs/VLLM-RULES.md §7.1): poisson at a rate, gamma
// with a burstiness (shape; 1 is Poisson), constant spacing, or rate `inf` (everything at t = 0). One small interface,
// one registry table (arrival_process.cpp); gaps come from the caller's RngStream.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/yaml_reader.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"

namespace servesim::workloads {

struct ArrivalConfig {
    std::string process = "poisson";  // a name from arrival_processes()
    double rate_per_s = 1.0;          // +inf: all requests at once
    double burstiness = 1.0;          // gamma shape; only for `gamma`
};

class ArrivalProcess {
  public:
    virtual ~ArrivalProcess() = default;

    // Time from one arrival to the next.
    [[nodiscard]] virtual core::Duration next_gap() = 0;
};

struct ArrivalProcessEntry {
    std::string_view name;
    std::string_view description;
    std::unique_ptr<ArrivalProcess> (*factory)(const ArrivalConfig&, core::RngStream);
};

[[nodiscard]] const std::vector<ArrivalProcessEntry>& arrival_processes();

// Reads `arrival` (default poisson), `rate` (req/s, > 0, `inf` allowed when allow_infinite_rate) and `burstiness`
// from a workload mapping. `extra_processes` are names the caller handles itself (e.g. closed_loop); for those the
// rate is not read.
[[nodiscard]] ArrivalConfig parse_arrival(const YamlMap& m,
                                          bool allow_infinite_rate,
                                          const std::vector<std::string_view>& extra_processes = {});

// Builds the process named in `config`; a name outside the registry is an InvariantError (parse_arrival checked it).
[[nodiscard]] std::unique_ptr<ArrivalProcess> make_arrival_process(const ArrivalConfig& config, core::RngStream rng);

[[nodiscard]] std::string describe_arrival(const ArrivalConfig& config);

}  // namespace servesim::workloads
