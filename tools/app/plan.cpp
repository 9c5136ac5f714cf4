// The capacity planner's driver; see plan.h and docs/PLANNER.md.
#include "tools/app/plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "calibration/gpu_spec.h"
#include "sim/cache/memory_plan.h"
#include "common/error.h"
#include "tools/app/experiment.h"
#include "tools/app/scenario.h"
#include "tools/app/validation_band.h"

namespace servesim::app {

namespace {

// The fraction of a run's requests that were queued (sent, not finished, and more than a server keeping up would
// have in service) when the last request was sent; see Planner::violations.
double backlog_fraction(const metrics::Summary& s) {
    if (s.num_requests_sent == 0 || s.send_window_s <= 0) {
        return 0.0;
    }
    const double sent = static_cast<double>(s.num_requests_sent);
    const double unfinished = sent - static_cast<double>(s.num_finished_at_last_send);
    const double in_service_ms = s.e2e_ms.count > 0 ? std::max(0.0, s.e2e_ms.mean - s.queue_ms.mean) : 0.0;
    const double in_service = sent / s.send_window_s * in_service_ms / 1000.0;
    return std::max(0.0, unfinished - in_service) / sent;
}

// The number of requests a workload sends, when its keys say it (num_requests, bench_serve's num_prompts, the
// multi-turn benchmark's max_num_requests); nullopt otherwise (a duration-bound workload: no early stop).
std::optional<std::int64_t> workload_request_count(const ExperimentConfig& x) {
    for (const char* key : {"num_requests", "num_prompts", "max_num_requests"}) {
        if (x.workload[key] && x.workload[key].IsScalar()) {
            try {
                return x.workload[key].as<std::int64_t>();
            } catch (const YAML::Exception&) {
                return std::nullopt;
            }
        }
    }
    return std::nullopt;
}

bool is_rate_key(const std::string& key) {
    const std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    return last == "rate" || last == "request_rate";
}

std::string value_text(double v) { return fmt::format("{}", v); }

// The grid's Cartesian product, first axis slowest: each point as (column, value) pairs.
std::vector<std::vector<std::pair<std::string, std::string>>> grid_points(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& grid) {
    std::vector<std::vector<std::pair<std::string, std::string>>> points{{}};
    for (const auto& [key, values] : grid) {
        std::vector<std::vector<std::pair<std::string, std::string>>> next;
        for (const auto& p : points) {
            for (const auto& v : values) {
                auto q = p;
                q.emplace_back(key, v);
                next.push_back(std::move(q));
            }
        }
        points = std::move(next);
    }
    return points;
}

struct ProbeKey {
    std::size_t configuration;
    double value;
};

class Planner {
public:
    explicit Planner(const PlanRequest& r) : r_(r) {}

    PlanResult run(const std::function<void(int, int)>& on_round) {
        build_configurations();
        std::vector<planner::ThresholdSearch> searches;
        for (std::size_t c = 0; c < result_.configurations.size(); ++c) {
            searches.emplace_back(search_options(c));
        }
        int round = 0;
        while (true) {
            std::vector<ProbeKey> keys;
            for (std::size_t c = 0; c < searches.size(); ++c) {
                if (!result_.configurations[c].does_not_fit.empty()) {
                    continue;  // vLLM would not start it: nothing to probe
                }
                if (const auto v = searches[c].next()) {
                    keys.push_back({c, *v});
                }
            }
            if (keys.empty()) {
                break;
            }
            std::vector<ExperimentConfig> configs;
            for (const auto& k : keys) {
                for (int rep = 0; rep < r_.replicates; ++rep) {
                    configs.push_back(experiment_for(k.configuration, k.value, rep));
                }
            }
            const auto results = run_experiments(configs, r_.jobs, {},
                                                 RunOptions{r_.executor, r_.partial, true, std::nullopt, nullptr});
            for (std::size_t i = 0; i < keys.size(); ++i) {
                PlanProbe p;
                p.configuration = keys[i].configuration;
                const bool replica_search = r_.target_load.has_value();
                p.load = replica_search ? *r_.target_load : keys[i].value;
                p.replicas = replica_search ? static_cast<int>(keys[i].value)
                                            : base_replicas_[keys[i].configuration];
                for (int rep = 0; rep < r_.replicates; ++rep) {
                    const ExperimentResult& er = results[i * static_cast<std::size_t>(r_.replicates) +
                                                         static_cast<std::size_t>(rep)];
                    p.summaries.push_back(er.sim.summary);
                    p.stopped = p.stopped || er.sim.stopped_overloaded;
                    if (p.status == "ok" && er.status != RunStatus::kOk) {
                        p.status = run_status_name(er.status);
                    }
                    const std::vector<std::string> why = violations(er, p.load);
                    if (why.empty()) {
                        ++p.passed;
                    } else if (p.violations.empty()) {
                        p.violations = why;
                    }
                }
                if (p.stopped) {
                    p.status = "stopped";
                }
                searches[keys[i].configuration].record(keys[i].value, p.passed, r_.replicates);
                result_.probes.push_back(std::move(p));
            }
            ++round;
            if (on_round) {
                on_round(round, static_cast<int>(result_.probes.size()));
            }
        }
        for (std::size_t c = 0; c < searches.size(); ++c) {
            if (result_.configurations[c].does_not_fit.empty()) {
                finish_configuration(c, searches[c].answer());
            }
        }
        rank();
        return std::move(result_);
    }

private:
    // The layers of overrides under every run, in order: the flags (--model and the other scenario-less flags, the
    // vLLM engine flags), --set, then `extra` (grid values, the probe's load or replicas), each with its origin so
    // that an error names what the user typed, or says it is the planner's own value.
    [[nodiscard]] std::vector<Override> layered(const std::vector<Override>& extra) const {
        std::vector<Override> o = r_.flag_overrides;
        for (const auto& s : r_.overrides) {
            o.push_back(parse_set_override(s));
        }
        o.insert(o.end(), extra.begin(), extra.end());
        return o;
    }

    [[nodiscard]] static Override planner_value(const std::string& key, const std::string& value,
                                                const std::string& origin) {
        Override o = parse_set_override(key + "=" + value);
        o.origin = origin;
        return o;
    }

    [[nodiscard]] std::vector<Override> grid_overrides(const PlanConfiguration& c) const {
        std::vector<Override> o;
        for (const auto& [k, v] : c.grid_values) {
            o.push_back(planner_value(k, v, fmt::format("--grid {}={}", k, v)));
        }
        return o;
    }

    [[nodiscard]] ExperimentConfig load_one(std::vector<Override> overrides, std::size_t index,
                                            std::optional<std::uint64_t> seed) const {
        if (seed) {
            overrides.push_back({"seed", YAML::Node(*seed), "the planner's seed for this replicate"});
        }
        const Scenario sc = load_scenario_text_without_memory_check(r_.scenario_text, r_.scenario_path, layered(overrides));
        ExperimentConfig x = sc.experiments.at(index);
        x.replicates = 1;  // the planner runs its own replicates (--replicates), one seed per experiment
        // Early stop: once more than max_shortfall of the run's requests wait at once, the backlog criterion cannot
        // be met in any useful sense (the queue only grows), so the rest of the run is not simulated.
        if (const auto n = workload_request_count(x)) {
            x.stop_when_waiting_exceeds = static_cast<std::int64_t>(std::ceil(r_.max_shortfall * static_cast<double>(*n)));
        }
        return x;
    }

    // vLLM's start-up check of the configuration's memory (cache::plan_memory): empty when it fits, else vLLM's
    // reason (the model's weights leave no room for KV blocks, or one max_model_len request does not fit).
    // Other errors of the check are left to the checked scenario load (build_configurations), which names the key.
    [[nodiscard]] static std::string does_not_fit(const ExperimentConfig& x, const calibration::GpuSpec& gpu) {
        try {
            const models::ModelSpec model = resolve_engine_model(x.model, x.engine);
            (void)cache::plan_memory(model, memory_plan_request(x.engine, gpu, x.replicas));
        } catch (const cache::DoesNotFitError& e) {
            return e.what();
        } catch (const ConfigError&) {
            return {};
        }
        return {};
    }

    void build_configurations() {
        for (const auto& point : grid_points(r_.grid)) {
            std::string label;
            PlanConfiguration proto;
            proto.grid_values = point;
            for (const auto& [k, v] : point) {
                label += fmt::format("{}{}={}", label.empty() ? "" : " ", k, v);
            }
            std::vector<Override> o = grid_overrides(proto);
            if (r_.seed) {
                o.push_back({"seed", YAML::Node(*r_.seed), "--seed"});
            }
            // vLLM's memory check is the planner's own (does_not_fit below), so that a configuration that does not fit
            // is a row of the answer rather than the end of the plan.
            const Scenario sc = load_scenario_text_without_memory_check(r_.scenario_text, r_.scenario_path, layered(o));
            bool all_fit = true;
            for (std::size_t j = 0; j < sc.experiments.size(); ++j) {
                const ExperimentConfig& x = sc.experiments[j];
                if (x.order_only) {
                    throw ConfigError(r_.scenario_path + ": plan: an order-only experiment has no latencies to plan");
                }
                PlanConfiguration c = proto;
                c.experiment_index = j;
                c.columns = x.columns;
                for (const auto& [k, v] : point) {
                    c.columns.emplace_back(k, v);
                }
                c.label = label;
                if (sc.experiments.size() > 1) {
                    c.label = x.name + (label.empty() ? "" : " " + label);
                }
                if (c.label.empty()) {
                    c.label = x.name;
                }
                const calibration::GpuSpec gpu = calibration::find_gpu(x.gpu);
                c.gpu = gpu.name;
                c.tensor_parallel_size = x.engine.tensor_parallel_size;
                c.pipeline_parallel_size = x.engine.pipeline_parallel_size;
                c.usd_per_gpu_hour = r_.prices.price_of(gpu);  // a missing price stops here, before simulating
                const std::string kind = x.cost_model == "roofline" || x.cost_model == "measured" ? x.cost_model
                                                                                                    : "profile";
                c.validation = describe_validation(kind, gpu.name);
                c.does_not_fit = does_not_fit(x, gpu);
                all_fit = all_fit && c.does_not_fit.empty();
                base_seeds_.push_back(x.seed);
                base_replicas_.push_back(x.replicas);
                result_.configurations.push_back(std::move(c));
            }
            if (all_fit) {
                // Any other start-up error is bad input: the checked load reports it at its file and key.
                (void)load_scenario_text(r_.scenario_text, r_.scenario_path, layered(o));
            }
        }
        // Every probe's overrides must load: try the first value of each configuration now.
        for (std::size_t c = 0; c < result_.configurations.size(); ++c) {
            const double first = r_.target_load ? 1.0 : r_.load_start;
            (void)experiment_for(c, first, 0);
        }
    }

    [[nodiscard]] planner::ThresholdSearchOptions search_options(std::size_t c) const {
        planner::ThresholdSearchOptions o;
        if (r_.target_load) {
            o.pass_side = planner::PassSide::kAbove;
            o.integer = true;
            const int given = base_replicas_[c];
            if (r_.search_replicas) {
                o.min_value = 1;
                o.max_value = r_.max_replicas;
                o.start = std::clamp(given, 1, r_.max_replicas);
            } else {
                o.min_value = o.max_value = o.start = given;
            }
        } else {
            o.pass_side = planner::PassSide::kBelow;
            o.integer = r_.load_is_integer;
            o.min_value = r_.load_min;
            o.max_value = r_.load_max;
            o.start = r_.load_start;
            o.rel_tolerance = r_.rel_tolerance;
        }
        return o;
    }

    [[nodiscard]] ExperimentConfig experiment_for(std::size_t c, double value, int replicate) const {
        const PlanConfiguration& conf = result_.configurations[c];
        std::vector<Override> o = grid_overrides(conf);
        if (r_.target_load) {
            o.push_back(planner_value(r_.load_key, value_text(*r_.target_load),
                                      fmt::format("the target load ({} = {})", r_.load_key, value_text(*r_.target_load))));
            o.push_back(planner_value("cluster.replicas", value_text(value),
                                      fmt::format("the planner's probe of {} replicas (cluster.replicas)", value_text(value))));
        } else {
            o.push_back(planner_value(r_.load_key, value_text(value),
                                      fmt::format("the planner's probe load ({} = {}; --load-key)", r_.load_key,
                                                  value_text(value))));
        }
        const std::uint64_t seed = base_seeds_[c] + static_cast<std::uint64_t>(replicate);
        return load_one(o, conf.experiment_index, seed);
    }

    // Why a replicate does not sustain `load` under the SLOs (empty: it does).
    [[nodiscard]] std::vector<std::string> violations(const ExperimentResult& er, double load) const {
        std::vector<std::string> why;
        const metrics::Summary& s = er.sim.summary;
        if (er.sim.stopped_overloaded) {
            why.push_back(fmt::format("stopped early: more than {} requests waiting at once, the queue only grows",
                                      er.config.stop_when_waiting_exceeds.value_or(0)));
            return why;
        }
        if (er.sim.hit_max_time) {
            why.push_back("stopped at max_time with requests unfinished");
        }
        if (s.num_requests_sent == 0) {
            why.push_back("no requests measured");
            return why;
        }
        if (s.num_requests_rejected > 0) {
            why.push_back(fmt::format("{} of {} requests rejected", s.num_requests_rejected, s.num_requests_sent));
        }
        if (s.num_requests_timed_out > 0) {  // workload.request_timeout: clients gave up on them
            why.push_back(fmt::format("{} of {} requests timed out", s.num_requests_timed_out, s.num_requests_sent));
        }
        // The backlog at the last send: requests sent but unfinished, less those a server that keeps up would
        // still be running then (Little's law: sent rate × mean time from first schedule to finish). A server that
        // keeps up has a backlog of a few waiting requests; one that falls behind has (1 − served/offered) of all.
        const double backlog = backlog_fraction(s);
        if (backlog > r_.max_shortfall) {
            why.push_back(fmt::format("{:.1f} % of requests still queued at the last send: the queue grows",
                                      100.0 * backlog));
        }
        if (is_rate_key(r_.load_key) && s.send_window_s > 0) {
            const double sent_rps = static_cast<double>(s.num_requests_sent - 1) / s.send_window_s;
            if (sent_rps < (1.0 - r_.max_shortfall) * load) {
                why.push_back(fmt::format("sent {:.3g} req/s of the {:.3g} offered: the clients were held back",
                                          sent_rps, load));
            }
        }
        const planner::SloVerdict v = planner::check_slo(r_.slo, s);
        why.insert(why.end(), v.violations.begin(), v.violations.end());
        // The run's status (docs/OUTPUTS.md "Status"), as `run` and `sweep` decide it: a load is not sustained by a
        // run that was overloaded, too short to show a steady state, or lost requests.
        if (er.status != RunStatus::kOk) {
            why.push_back(fmt::format("{}: {}", run_status_name(er.status), er.status_reason));
        }
        return why;
    }

    void finish_configuration(std::size_t c, const planner::ThresholdAnswer& a) {
        PlanConfiguration& conf = result_.configurations[c];
        conf.answer = a;
        if (!a.best) {
            return;
        }
        for (std::size_t i = 0; i < result_.probes.size(); ++i) {
            const PlanProbe& p = result_.probes[i];
            const double v = r_.target_load ? static_cast<double>(p.replicas) : p.load;
            if (p.configuration == c && v == *a.best && p.passed == static_cast<int>(p.summaries.size())) {
                conf.best_probe = i;
            }
        }
        const PlanProbe& best = result_.probes[*conf.best_probe];
        conf.gpus = best.replicas * conf.tensor_parallel_size * conf.pipeline_parallel_size;
        double tokens = 0;
        double output = 0;
        for (const auto& s : best.summaries) {
            tokens += s.input_tokens_per_s + s.output_tokens_per_s;
            output += s.output_tokens_per_s;
        }
        tokens /= static_cast<double>(best.summaries.size());
        output /= static_cast<double>(best.summaries.size());
        conf.tokens_per_s = tokens;
        conf.usd_per_mtok = planner::usd_per_million_tokens(conf.gpus, conf.usd_per_gpu_hour, tokens);
        conf.usd_per_mtok_output = planner::usd_per_million_tokens(conf.gpus, conf.usd_per_gpu_hour, output);
    }

    [[nodiscard]] double rank_value(const PlanConfiguration& c) const {
        return r_.rank_by == "usd_per_mtok_output" ? *c.usd_per_mtok_output : *c.usd_per_mtok;
    }

    void rank() {
        std::vector<std::size_t> priced;
        for (std::size_t c = 0; c < result_.configurations.size(); ++c) {
            const auto& conf = result_.configurations[c];
            if (conf.usd_per_mtok && conf.usd_per_mtok_output) {
                priced.push_back(c);
            }
        }
        std::stable_sort(priced.begin(), priced.end(), [&](std::size_t a, std::size_t b) {
            return rank_value(result_.configurations[a]) < rank_value(result_.configurations[b]);
        });
        result_.ranking = priced;
        // Frontier of cost against the first SLO bound's statistic (the worst replicate at the answer).
        std::vector<double> cost;
        std::vector<double> latency;
        for (std::size_t c : priced) {
            cost.push_back(rank_value(result_.configurations[c]));
            latency.push_back(worst(result_.probes[*result_.configurations[c].best_probe], r_.slo.bounds.front())
                                  .value_or(0.0));
        }
        for (std::size_t i : planner::pareto_frontier(cost, latency)) {
            result_.configurations[priced[i]].on_frontier = true;
        }
    }

public:
    // The worst (largest) value of a bound's statistic over a probe's replicates; nullopt when none measured it.
    static std::optional<double> worst(const PlanProbe& p, const planner::SloBound& b) {
        std::optional<double> out;
        if (p.stopped) {
            return out;  // an early-stopped run's latencies are those of the requests that finished before the stop
        }
        for (const auto& s : p.summaries) {
            if (const auto v = planner::slo_value(s, b.metric, b.statistic)) {
                out = out ? std::max(*out, *v) : *v;
            }
        }
        return out;
    }

private:
    const PlanRequest& r_;
    PlanResult result_;
    std::vector<std::uint64_t> base_seeds_;
    std::vector<int> base_replicas_;
};

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

std::string opt_fixed(const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : "—"; }

std::string answer_kind(const PlanConfiguration& c) {
    if (!c.does_not_fit.empty()) {
        return "does_not_fit";
    }
    const planner::ThresholdAnswer& a = c.answer;
    switch (a.kind) {
        case planner::ThresholdAnswer::Kind::kFound:
            return "found";
        case planner::ThresholdAnswer::Kind::kNoneFeasible:
            return "none_feasible";
        case planner::ThresholdAnswer::Kind::kRangeFeasible:
            return "beyond_range";
        case planner::ThresholdAnswer::Kind::kProbeLimit:
            return "probe_limit";
    }
    return "found";
}

double worst_backlog(const PlanProbe& p) {
    double worst = 0.0;
    for (const auto& s : p.summaries) {
        worst = std::max(worst, backlog_fraction(s));
    }
    return worst;
}

std::string question_text(const PlanRequest& r) {
    if (r.target_load) {
        return r.search_replicas
                   ? fmt::format("fewest replicas (cluster.replicas, 1–{}) meeting the SLOs at {} = {}",
                                 r.max_replicas, r.load_key, value_text(*r.target_load))
                   : fmt::format("each configuration as given at {} = {}", r.load_key, value_text(*r.target_load));
    }
    return fmt::format("largest {} meeting the SLOs (start {}, double or halve in [{}, {}], bisect to {} %)",
                       r.load_key, value_text(r.load_start), value_text(r.load_min), value_text(r.load_max),
                       value_text(100 * r.rel_tolerance));
}

}  // namespace

std::pair<std::string, std::vector<std::string>> parse_grid_axis(const std::string& text) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
        throw ConfigError(fmt::format("--grid '{}': expected key=v1,v2,… e.g. gpu=H100,H200", text));
    }
    std::vector<std::string> values;
    std::stringstream ss(text.substr(eq + 1));
    std::string v;
    while (std::getline(ss, v, ',')) {
        if (v.empty()) {
            throw ConfigError(fmt::format("--grid '{}': an empty value", text));
        }
        values.push_back(v);
    }
    return {text.substr(0, eq), values};
}

void settle_load_key(PlanRequest& r) {
    if (r.load_key_given) {
        return;
    }
    std::vector<Override> o = r.flag_overrides;
    for (const auto& s : r.overrides) {
        o.push_back(parse_set_override(s));
    }
    const Scenario sc = load_scenario_text_without_memory_check(r.scenario_text, r.scenario_path, o);
    const bool bench_serve = std::all_of(sc.experiments.begin(), sc.experiments.end(), [](const ExperimentConfig& x) {
        const YAML::Node type = x.workload["type"];
        return type && type.IsScalar() && type.Scalar() == "bench_serve";
    });
    if (!sc.experiments.empty() && bench_serve) {
        r.load_key = "workload.request_rate";
    }
}

PlanResult run_plan(const PlanRequest& request, const std::function<void(int, int)>& on_round) {
    if (request.replicates < 1) {
        throw ConfigError("--replicates: must be at least 1");
    }
    if (!(request.max_shortfall >= 0 && request.max_shortfall < 1)) {
        throw ConfigError("--max-shortfall: must be in [0, 1)");
    }
    if (request.target_load && !(*request.target_load > 0)) {
        throw ConfigError("--target: the target load must be positive");
    }
    if (request.rank_by != "usd_per_mtok" && request.rank_by != "usd_per_mtok_output") {
        throw ConfigError("--rank-by: '" + request.rank_by + "'; allowed: usd_per_mtok, usd_per_mtok_output");
    }
    std::map<std::string, int> seen;
    for (const auto& [key, values] : request.grid) {
        if (++seen[key] > 1) {
            throw ConfigError("--grid: the key '" + key + "' is given twice");
        }
        if (key == request.load_key || key == "cluster.replicas") {
            throw ConfigError("--grid: '" + key + "' is what the planner searches; it cannot be a grid key");
        }
    }
    Planner p(request);
    return p.run(on_round);
}

std::string format_plan_table(const PlanRequest& r, const PlanResult& res) {
    std::string out;
    out += fmt::format("servesim plan — {}\n", r.scenario_path);
    out += fmt::format("question: {}\n", question_text(r));
    out += fmt::format("SLO: {}; sustained: ≤ {} % of requests queued at the last send{}\n", r.slo.describe(),
                       value_text(100 * r.max_shortfall),
                       is_rate_key(r.load_key) ? fmt::format(", ≥ {} % of the offered rate sent",
                                                             value_text(100 * (1 - r.max_shortfall)))
                                               : "");
    out += fmt::format("replicates: {} per probe (seeds from the scenario's, +1 each); a probe passes when all do\n",
                       r.replicates);
    out += fmt::format("prices: {}\n\n", r.prices.source);

    std::size_t label_w = 6;
    for (const auto& c : res.configurations) {
        label_w = std::max(label_w, c.label.size());
    }
    out += "probes (in the order they ran)\n";
    std::string head = fmt::format("  {:<{}}  {:>12}  {:>8}  {:>5}", "config", label_w,
                                   r.target_load ? "replicas" : r.load_key.substr(r.load_key.rfind('.') + 1),
                                   r.target_load ? "load" : "replicas", "pass");
    for (const auto& b : r.slo.bounds) {
        head += fmt::format("  {:>12}", b.name + "_ms");
    }
    head += fmt::format("  {:>7}  {:<12}  {}\n", "backlog", "status", "verdict");
    out += head;
    for (const auto& p : res.probes) {
        const auto& c = res.configurations[p.configuration];
        std::string line = fmt::format(
            "  {:<{}}  {:>12}  {:>8}  {:>5}", c.label, label_w,
            r.target_load ? std::to_string(p.replicas) : value_text(p.load),
            r.target_load ? value_text(p.load) : std::to_string(p.replicas),
            fmt::format("{}/{}", p.passed, p.summaries.size()));
        for (const auto& b : r.slo.bounds) {
            line += fmt::format("  {:>12}", opt_fixed(Planner::worst(p, b), 1));
        }
        line += fmt::format("  {:>7}  {:<12}  {}\n",
                            p.stopped ? std::string("—") : fmt::format("{:.1f}%", 100.0 * worst_backlog(p)), p.status,
                            p.violations.empty() ? "ok" : p.violations.front());
        out += line;
    }
    out += "\nanswers (cheapest first; * = on the cost / " + r.slo.bounds.front().name + " Pareto frontier)\n";
    out += fmt::format("  {:<{}}  {:>14}  {:>14}  {:>5}  {:>8}  {:>9}  {:>10}  {:>8}  {}\n", "config", label_w,
                       r.target_load ? "replicas" : "max load", "first failing", "gpus", "$/GPU-h", "tokens/s",
                       "$/Mtok", "$/Mtok out", "answer");
    std::vector<std::size_t> order = res.ranking;
    for (std::size_t c = 0; c < res.configurations.size(); ++c) {
        if (std::find(order.begin(), order.end(), c) == order.end()) {
            order.push_back(c);
        }
    }
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        std::string kind = answer_kind(conf);
        if (conf.answer.seed_dependent()) {
            std::string vals;
            for (double v : conf.answer.split_values) {
                vals += (vals.empty() ? "" : ", ") + value_text(v);
            }
            kind += "; seeds disagree at " + vals;
        }
        out += fmt::format("{} {:<{}}  {:>14}  {:>14}  {:>5}  {:>8}  {:>9}  {:>10}  {:>8}  {}\n",
                           conf.on_frontier ? "*" : " ", conf.label, label_w,
                           conf.answer.best ? value_text(*conf.answer.best) : "—",
                           conf.answer.first_failing ? value_text(*conf.answer.first_failing) : "—",
                           conf.best_probe ? std::to_string(conf.gpus) : "—", fixed(conf.usd_per_gpu_hour, 2),
                           conf.best_probe ? fixed(conf.tokens_per_s, 0) : "—", opt_fixed(conf.usd_per_mtok, 4),
                           opt_fixed(conf.usd_per_mtok_output, 4), kind);
    }
    // Configurations vLLM would not start, with its reason (docs/PLANNER.md "Configurations that do not fit").
    bool any_unfit = false;
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        if (!conf.does_not_fit.empty()) {
            if (!any_unfit) {
                out += "\ndoes_not_fit: vLLM would not start these (its start-up memory check), so they were not probed\n";
                any_unfit = true;
            }
            out += fmt::format("  {:<{}}  {}\n", conf.label, label_w, conf.does_not_fit);
        }
    }
    // The error band each answer carries (docs/VALIDATION.md): its cost model against real runs on its GPU.
    out += "\nvalidated accuracy of the time model behind each answer\n";
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        out += fmt::format("  {:<{}}  {}\n", conf.label, label_w, conf.validation);
    }
    return out;
}

namespace {

nlohmann::ordered_json probe_json(const PlanRequest& r, const PlanResult& res, const PlanProbe& p) {
    nlohmann::ordered_json j;
    j["config"] = res.configurations[p.configuration].label;
    j["load"] = p.load;
    j["replicas"] = p.replicas;
    j["passed"] = p.passed;
    j["replicates"] = p.summaries.size();
    for (const auto& b : r.slo.bounds) {
        const auto v = Planner::worst(p, b);
        j[b.name + "_ms"] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    }
    j["backlog_fraction"] = p.stopped ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(worst_backlog(p));
    j["status"] = p.status;
    j["violations"] = p.violations;
    return j;
}

nlohmann::ordered_json opt_json(const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string format_plan_json(const PlanRequest& r, const PlanResult& res) {
    nlohmann::ordered_json j;
    j["scenario"] = r.scenario_path;
    j["question"] = question_text(r);
    j["slo"] = r.slo.describe();
    j["load_key"] = r.load_key;
    j["target_load"] = r.target_load ? nlohmann::ordered_json(*r.target_load) : nlohmann::ordered_json(nullptr);
    j["replicates"] = r.replicates;
    j["max_shortfall"] = r.max_shortfall;
    j["prices"] = r.prices.source;
    j["probes"] = nlohmann::ordered_json::array();
    for (const auto& p : res.probes) {
        j["probes"].push_back(probe_json(r, res, p));
    }
    j["configurations"] = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < res.configurations.size(); ++c) {
        const auto& conf = res.configurations[c];
        nlohmann::ordered_json cj;
        cj["config"] = conf.label;
        for (const auto& [k, v] : conf.columns) {
            cj[k] = v;
        }
        cj["answer"] = answer_kind(conf);
        cj["status_reason"] = conf.does_not_fit.empty() ? nlohmann::ordered_json(nullptr)
                                                        : nlohmann::ordered_json(conf.does_not_fit);
        cj[r.target_load ? "min_replicas" : "max_load"] = opt_json(conf.answer.best);
        cj["first_failing"] = opt_json(conf.answer.first_failing);
        cj["split_values"] = conf.answer.split_values;
        cj["gpus"] = conf.best_probe ? nlohmann::ordered_json(conf.gpus) : nlohmann::ordered_json(nullptr);
        cj["usd_per_gpu_hour"] = conf.usd_per_gpu_hour;
        cj["validation"] = conf.validation;
        cj["usd_per_mtok"] = opt_json(conf.usd_per_mtok);
        cj["usd_per_mtok_output"] = opt_json(conf.usd_per_mtok_output);
        cj["on_frontier"] = conf.on_frontier;
        const auto rank = std::find(res.ranking.begin(), res.ranking.end(), c);
        cj["rank"] = rank == res.ranking.end() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(rank - res.ranking.begin() + 1);
        j["configurations"].push_back(cj);
    }
    return j.dump(2) + "\n";
}

std::string format_plan_csv(const PlanRequest& r, const PlanResult& res) {
    // One row per probe, with its configuration's answer repeated (a flat file for plotting).
    std::string out = "config,load,replicas,passed,replicates";
    for (const auto& b : r.slo.bounds) {
        out += fmt::format(",{}_ms", b.name);
    }
    out += ",backlog_fraction,status,verdict,answer,best,first_failing,gpus,usd_per_mtok,usd_per_mtok_output,on_frontier\n";
    auto csv_opt = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string(); };
    for (const auto& p : res.probes) {
        const auto& conf = res.configurations[p.configuration];
        std::string verdict = p.violations.empty() ? "ok" : p.violations.front();
        std::replace(verdict.begin(), verdict.end(), ',', ';');
        out += fmt::format("\"{}\",{},{},{},{}", conf.label, p.load, p.replicas, p.passed, p.summaries.size());
        for (const auto& b : r.slo.bounds) {
            out += ',';
            out += csv_opt(Planner::worst(p, b));
        }
        out += fmt::format(",{},{},\"{}\",{},{},{},{},{},{},{}\n",
                           p.stopped ? std::string() : fmt::format("{}", worst_backlog(p)), p.status, verdict,
                           answer_kind(conf), csv_opt(conf.answer.best), csv_opt(conf.answer.first_failing),
                           conf.best_probe ? std::to_string(conf.gpus) : "", csv_opt(conf.usd_per_mtok),
                           csv_opt(conf.usd_per_mtok_output), conf.on_frontier ? "true" : "false");
    }
    // One row for each configuration vLLM would not start: no probe, its reason as the verdict.
    for (const auto& conf : res.configurations) {
        if (conf.does_not_fit.empty()) {
            continue;
        }
        std::string reason = conf.does_not_fit;
        std::replace(reason.begin(), reason.end(), ',', ';');
        std::replace(reason.begin(), reason.end(), '"', '\'');
        out += fmt::format("\"{}\",,,0,0", conf.label);
        out += std::string(r.slo.bounds.size(), ',');
        out += fmt::format(",,does_not_fit,\"{}\",does_not_fit,,,,,,false\n", reason);
    }
    return out;
}

}  // namespace servesim::app
