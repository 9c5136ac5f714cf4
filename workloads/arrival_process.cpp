// Arrival processes: the registry table and the three gap laws. Poisson gaps are exponential (inverse CDF); gamma
// gaps follow vLLM's get_request: shape = burstiness, scale = 1/(rate·burstiness), so the mean rate is unchanged.
#include "workloads/arrival_process.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "workloads/request_bounds.h"

namespace servesim::workloads {

namespace {

class PoissonArrivals final : public ArrivalProcess {
  public:
    PoissonArrivals(double rate_per_s, core::RngStream rng) : rate_per_s_(rate_per_s), rng_(rng) {}

    core::Duration next_gap() override { return core::Duration::from_s_capped(rng_.exponential(rate_per_s_)); }

  private:
    double rate_per_s_;
    core::RngStream rng_;
};

class GammaArrivals final : public ArrivalProcess {
  public:
    GammaArrivals(double rate_per_s, double burstiness, core::RngStream rng)
        : shape_(burstiness), scale_s_(1.0 / (rate_per_s * burstiness)), rng_(rng) {}

    core::Duration next_gap() override { return core::Duration::from_s_capped(rng_.gamma(shape_, scale_s_)); }

  private:
    double shape_;
    double scale_s_;
    core::RngStream rng_;
};

class ConstantArrivals final : public ArrivalProcess {
  public:
    explicit ConstantArrivals(double rate_per_s) : gap_(core::Duration::from_s(1.0 / rate_per_s)) {}

    core::Duration next_gap() override { return gap_; }

  private:
    core::Duration gap_;
};

// rate: inf, whatever the process name: every gap is zero.
class AllAtOnce final : public ArrivalProcess {
  public:
    core::Duration next_gap() override { return core::Duration{}; }
};

std::string names(const std::vector<std::string_view>& extra) {
    std::string out;
    for (const auto& e : arrival_processes()) {
        out += (out.empty() ? "" : ", ") + std::string(e.name);
    }
    for (auto e : extra) {
        out += ", " + std::string(e);
    }
    return out;
}

}  // namespace

const std::vector<ArrivalProcessEntry>& arrival_processes() {
    static const std::vector<ArrivalProcessEntry> table = {
        {"poisson", "exponential gaps at `rate` (vllm bench serve's default)",
         [](const ArrivalConfig& c, core::RngStream rng) -> std::unique_ptr<ArrivalProcess> {
             return std::make_unique<PoissonArrivals>(c.rate_per_s, rng);
         }},
        {"gamma", "gamma gaps at `rate` with shape `burstiness` (< 1 burstier, > 1 smoother)",
         [](const ArrivalConfig& c, core::RngStream rng) -> std::unique_ptr<ArrivalProcess> {
             return std::make_unique<GammaArrivals>(c.rate_per_s, c.burstiness, rng);
         }},
        {"constant", "evenly spaced at 1/`rate`",
         [](const ArrivalConfig& c, core::RngStream) -> std::unique_ptr<ArrivalProcess> {
             return std::make_unique<ConstantArrivals>(c.rate_per_s);
         }},
    };
    return table;
}

ArrivalConfig parse_arrival(const YamlMap& m,
                            bool allow_infinite_rate,
                            const std::vector<std::string_view>& extra_processes) {
    ArrivalConfig c;
    c.process = m.get_or<std::string>("arrival", "poisson");
    const auto& table = arrival_processes();
    const bool in_table = std::any_of(table.begin(), table.end(), [&](const auto& e) { return e.name == c.process; });
    const bool is_extra = std::find(extra_processes.begin(), extra_processes.end(), c.process) != extra_processes.end();
    if (!in_table && !is_extra) {
        m.fail("arrival", "unknown arrival process '" + c.process + "'; allowed: " + names(extra_processes));
    }
    if (m.has("burstiness")) {
        if (c.process != "gamma") {
            m.fail("burstiness", "only used with `arrival: gamma`");
        }
        c.burstiness = m.get<double>("burstiness");
        if (!(c.burstiness >= 1e-6 && c.burstiness <= 1e6)) {
            // Bounded so that the gamma scale 1/(rate·burstiness) stays a finite number of seconds.
            m.fail("burstiness", fmt::format("must lie in [1e-06, 1e+06], got {:g}", c.burstiness));
        }
    }
    if (is_extra) {
        if (m.has("rate")) {
            m.fail("rate", "not used with `arrival: " + c.process + "`");
        }
        return c;
    }
    const YAML::Node rate = m.node("rate");
    const std::string text = rate.IsScalar() ? rate.Scalar() : "";
    if (text == "inf" || text == ".inf" || text == "Inf" || text == ".Inf") {
        if (!allow_infinite_rate) {
            m.fail("rate", "`inf` is not allowed here; give a finite rate in requests per second");
        }
        c.rate_per_s = std::numeric_limits<double>::infinity();
        return c;
    }
    c.rate_per_s = m.get<double>("rate");
    if (!(c.rate_per_s > 0)) {
        m.fail("rate", fmt::format("must be a positive number of requests per second{}, got {}",
                                   allow_infinite_rate ? " or inf" : "", c.rate_per_s));
    }
    check_rate_range(m, "rate", c.rate_per_s);
    return c;
}

std::unique_ptr<ArrivalProcess> make_arrival_process(const ArrivalConfig& config, core::RngStream rng) {
    if (std::isinf(config.rate_per_s)) {
        return std::make_unique<AllAtOnce>();
    }
    for (const auto& e : arrival_processes()) {
        if (e.name == config.process) {
            return e.factory(config, rng);
        }
    }
    SERVESIM_CHECK(false, "unknown arrival process '{}'", config.process);
    return nullptr;
}

std::string describe_arrival(const ArrivalConfig& config) {
    if (std::isinf(config.rate_per_s)) {
        return "all at once";
    }
    if (config.process == "gamma") {
        return fmt::format("gamma {:g} req/s (burstiness {:g})", config.rate_per_s, config.burstiness);
    }
    return fmt::format("{} {:g} req/s", config.process, config.rate_per_s);
}

}  // namespace servesim::workloads
