// The capacity planner's driver; see plan.h and docs/PLANNER.md.
// Size (~1.3k lines): the planner's driver and its three report formats (table, JSON, CSV) over one PlanResult; left
// whole while issue 39 changes the planner (a split into driver and report is the next step).
#include "tools/app/plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "calibration/gpu_spec.h"
#include "sim/memory/memory_plan.h"
#include "common/error.h"
#include "tools/app/experiment.h"
#include "tools/app/launch_command.h"
#include "tools/app/scenario.h"
#include "tools/app/validation_band.h"

namespace servesim::app {

namespace {

// The fraction of a run's requests that were queued (sent and never scheduled) when the last request was sent; see
// Planner::violations. Counted, not estimated: an estimate by Little's law (unfinished less the send rate × the mean
// service time) read a server that kept up as 5 % behind, because the mean service time of a run includes its
// drain, where the batch is small and service short, and the count in service at one instant swings by tens
// (docs/PLANNER.md).
double backlog_fraction(const metrics::Summary& s) {
    if (s.num_requests_sent == 0 || s.send_window_s <= 0) {
        return 0.0;
    }
    return static_cast<double>(std::max<std::int64_t>(0, s.num_queued_at_last_send)) /
           static_cast<double>(s.num_requests_sent);
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
                if (!probed(result_.configurations[c])) {
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
                    const ReplicateVerdict v = violations(er, p.load);
                    if (rep == 0) {
                        p.vllm_serve = launch_commands(er).serve;
                        p.sent_rps = v.sent_rps;
                    }
                    p.sent_rps = std::min(p.sent_rps, v.sent_rps);
                    p.slo_met = p.slo_met && v.slo_met;
                    p.held_back = p.held_back || v.held_back;
                    if (v.why.empty()) {
                        ++p.passed;
                    } else if (p.violations.empty()) {
                        p.violations = v.why;
                        p.other_reason = v.first_other;
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
            if (probed(result_.configurations[c])) {
                finish_configuration(c, searches[c].answer());
            }
        }
        rank();
        return std::move(result_);
    }

private:
    [[nodiscard]] static bool probed(const PlanConfiguration& c) { return c.does_not_fit.empty() && c.not_accepted.empty(); }

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

    // The grid point's values, then the layout's (the layout search), each naming where it came from.
    [[nodiscard]] std::vector<Override> grid_overrides(const PlanConfiguration& c) const {
        std::vector<Override> o;
        for (const auto& [k, v] : c.grid_values) {
            o.push_back(planner_value(k, v, fmt::format("--grid {}={}", k, v)));
        }
        if (c.layout) {
            const std::string origin = "the layout search's " + c.layout->label();
            o.push_back(planner_value("engine.tensor_parallel_size", std::to_string(c.layout->tensor_parallel_size), origin));
            o.push_back(planner_value("engine.pipeline_parallel_size", std::to_string(c.layout->pipeline_parallel_size),
                                      origin));
            o.push_back(planner_value("cluster.replicas", std::to_string(c.layout->data_parallel_size), origin));
            if (c.layout->enable_expert_parallel) {
                o.push_back(planner_value("engine.enable_expert_parallel", "true", origin));
            }
            // A layout's DP replicas are vLLM's data-parallel engines, balanced by its DP load balancer, unless the
            // scenario names a router (then its router stands in front of them).
            if (c.layout->data_parallel_size > 1 && !scenario_names_router_) {
                o.push_back(planner_value("cluster.router", "vllm_dp", origin));
            }
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
    // `refused`, when given, receives any other start-up error (the layout search's not_accepted: vLLM refusing the
    // layout for this model, e.g. a tensor-parallel size that does not divide its heads).
    [[nodiscard]] static std::string does_not_fit(const ExperimentConfig& x, const calibration::GpuSpec& gpu,
                                                  std::string* refused = nullptr) {
        try {
            const models::ModelSpec model = resolve_engine_model(x.model, x.engine);
            cache::MemoryPlanRequest request = memory_plan_request(x.engine, gpu, x.replicas);
            add_speculative_memory(request, x.engine, model);
            (void)cache::plan_memory(model, request);
        } catch (const cache::DoesNotFitError& e) {
            return e.what();
        } catch (const ConfigError& e) {
            if (refused != nullptr) {
                *refused = e.what();
            }
            return {};
        }
        return {};
    }

    // One configuration per experiment of the scenario loaded with `proto`'s grid values (and layout); appended to
    // the result. In the layout search a layout vLLM refuses for the model becomes a `not_accepted` row.
    void add_configurations(const PlanConfiguration& proto, const std::string& grid_label,
                            std::optional<std::size_t> only_experiment) {
        std::vector<Override> o = grid_overrides(proto);
        if (r_.seed) {
            o.push_back({"seed", YAML::Node(*r_.seed), "--seed"});
        }
        const std::string layout_label = proto.layout ? proto.layout->label() : std::string();
        std::string label = grid_label;
        if (!layout_label.empty()) {
            label += (label.empty() ? "" : " ") + layout_label;
        }
        // vLLM's memory check is the planner's own (does_not_fit below), so that a configuration that does not fit
        // is a row of the answer rather than the end of the plan.
        Scenario sc;
        try {
            sc = load_scenario_text_without_memory_check(r_.scenario_text, r_.scenario_path, layered(o));
        } catch (const ConfigError& e) {
            if (!proto.layout) {
                throw;
            }
            PlanConfiguration c = proto;
            c.label = label;
            c.tensor_parallel_size = proto.layout->tensor_parallel_size;
            c.pipeline_parallel_size = proto.layout->pipeline_parallel_size;
            c.not_accepted = e.what();
            push_configuration(std::move(c), 0, 1);
            return;
        }
        bool all_fit = true;
        for (std::size_t j = 0; j < sc.experiments.size(); ++j) {
            if (only_experiment && j != *only_experiment) {
                continue;
            }
            const ExperimentConfig& x = sc.experiments[j];
            if (x.order_only) {
                throw ConfigError(r_.scenario_path + ": plan: an order-only experiment has no latencies to plan");
            }
            if (x.replicates > 1) {
                // run and sweep repeat an experiment `replicates:` times; the planner has its own seeds per probe.
                const std::string what = fmt::format("{}: experiment '{}': 'replicates: {}' is what run and sweep "
                                                     "repeat; plan does not read it (it runs --replicates N seeds per "
                                                     "probe)",
                                                     r_.scenario_path, x.name, x.replicates);
                if (!r_.replicates_given) {
                    throw ConfigError(what + fmt::format("; give --replicates {} to plan with that many seeds", x.replicates));
                }
                const std::string warning = what + fmt::format("; planning with --replicates {}", r_.replicates);
                if (std::find(result_.warnings.begin(), result_.warnings.end(), warning) == result_.warnings.end()) {
                    result_.warnings.push_back(warning);
                }
            }
            PlanConfiguration c = proto;
            c.experiment_index = j;
            c.columns = x.columns;
            for (const auto& [k, v] : proto.grid_values) {
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
            c.enable_expert_parallel = x.engine.enable_expert_parallel;
            c.price = r_.prices.price_of(gpu);  // nullopt: unpriced, planned without cost figures
            const std::string kind = x.cost_model == "roofline" || x.cost_model == "measured" ? x.cost_model
                                                                                                : "profile";
            c.validation = describe_validation(kind, gpu.name);
            c.does_not_fit = does_not_fit(x, gpu, proto.layout ? &c.not_accepted : nullptr);
            all_fit = all_fit && c.does_not_fit.empty();
            push_configuration(std::move(c), x.seed, x.replicas, kind);
        }
        if (all_fit && !proto.layout) {
            // Any other start-up error is bad input: the checked load reports it at its file and key. (In the layout
            // search, the per-experiment check above made it the layout's not_accepted row.)
            (void)load_scenario_text(r_.scenario_text, r_.scenario_path, layered(o));
        }
    }

    void push_configuration(PlanConfiguration c, std::uint64_t seed, int replicas, const std::string& kind = {}) {
        cost_model_kinds_.push_back(kind);
        base_seeds_.push_back(seed);
        base_replicas_.push_back(replicas);
        result_.configurations.push_back(std::move(c));
    }

    // The model of each experiment of a grid point (for the layout search: a MoE model gets expert-parallel layouts).
    [[nodiscard]] std::vector<bool> experiments_moe(const PlanConfiguration& proto) const {
        std::vector<Override> o = grid_overrides(proto);
        const Scenario sc = load_scenario_text_without_memory_check(r_.scenario_text, r_.scenario_path, layered(o));
        std::vector<bool> moe;
        for (const auto& x : sc.experiments) {
            const models::ModelSpec m = resolve_engine_model(x.model, x.engine);
            moe.push_back(std::any_of(m.layers.begin(), m.layers.end(), [](const models::Layer& l) {
                return std::holds_alternative<models::MoeMlp>(l.mlp);
            }));
        }
        return moe;
    }

    void build_configurations() {
        scenario_names_router_ = names_router();
        for (const auto& point : grid_points(r_.grid)) {
            std::string grid_label;
            PlanConfiguration proto;
            proto.grid_values = point;
            for (const auto& [k, v] : point) {
                grid_label += fmt::format("{}{}={}", grid_label.empty() ? "" : " ", k, v);
            }
            if (!r_.layout_gpus) {
                add_configurations(proto, grid_label, std::nullopt);
                continue;
            }
            // The layout search: every layout of the budget, per experiment (a MoE model's include expert parallel).
            const std::vector<bool> moe = experiments_moe(proto);
            for (std::size_t j = 0; j < moe.size(); ++j) {
                planner::LayoutSpace space;
                space.gpus = *r_.layout_gpus;
                space.gpus_per_node = r_.gpus_per_node;
                space.moe = moe[j];
                space.max_pipeline_parallel_size = r_.max_pipeline_parallel_size;
                for (const planner::Layout& l : planner::enumerate_layouts(space)) {
                    PlanConfiguration q = proto;
                    q.layout = l;
                    add_configurations(q, grid_label, j);
                }
            }
        }
        if (r_.layout_gpus) {
            // A layout search where vLLM refuses every layout is bad input, not a finding: report the first reason.
            const bool any = std::any_of(result_.configurations.begin(), result_.configurations.end(),
                                         [](const PlanConfiguration& c) { return c.not_accepted.empty(); });
            if (!any && !result_.configurations.empty()) {
                throw ConfigError(result_.configurations.front().not_accepted);
            }
        }
        // Every probe's overrides must load: try the first value of each configuration now.
        for (std::size_t c = 0; c < result_.configurations.size(); ++c) {
            if (!result_.configurations[c].not_accepted.empty()) {
                continue;
            }
            const double first = r_.target_load ? 1.0 : r_.load_start;
            (void)experiment_for(c, first, 0);
        }
    }

    // Whether the scenario (or a --set) names cluster.router: then the layout search keeps it for DP replicas.
    [[nodiscard]] bool names_router() const {
        for (const auto& s : r_.overrides) {
            if (s.rfind("cluster.router=", 0) == 0) {
                return true;
            }
        }
        YAML::Node root;
        try {
            root = YAML::Load(r_.scenario_text);
        } catch (const YAML::Exception&) {
            return false;  // the scenario load reports it
        }
        const auto has_router = [](const YAML::Node& n) {
            return n && n.IsMap() && n["cluster"] && n["cluster"].IsMap() && n["cluster"]["router"];
        };
        if (has_router(root)) {
            return true;
        }
        if (root.IsMap() && root["experiments"] && root["experiments"].IsSequence()) {
            for (const auto& e : root["experiments"]) {
                if (has_router(e)) {
                    return true;
                }
            }
        }
        return false;
    }

    [[nodiscard]] planner::ThresholdSearchOptions search_options(std::size_t c) const {
        planner::ThresholdSearchOptions o;
        if (r_.target_load) {
            o.pass_side = planner::PassSide::kAbove;
            o.integer = true;
            const int given = base_replicas_[c];
            if (r_.search_replicas && !r_.layout_gpus) {  // a layout's DP is its replica count
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

    struct ReplicateVerdict {
        std::vector<std::string> why;  // empty: it sustains the load
        bool slo_met = true;           // every SLO bound held (whatever else failed)
        bool held_back = false;        // its clients sent less than the offered rate
        double sent_rps = 0;           // the send rate the held-back test read (rate loads only)
        std::string first_other;       // the first reason that is not an SLO bound
    };

    // Why a replicate does not sustain `load` under the SLOs.
    [[nodiscard]] ReplicateVerdict violations(const ExperimentResult& er, double load) const {
        ReplicateVerdict out;
        std::vector<std::string>& why = out.why;
        const metrics::Summary& s = er.sim.summary;
        if (er.sim.stopped_overloaded) {
            why.push_back(fmt::format("stopped early: more than {} requests waiting at once, the queue only grows",
                                      er.config.stop_when_waiting_exceeds.value_or(0)));
            out.slo_met = false;  // not measured: nothing is promised
            out.first_other = why.front();
            return out;
        }
        if (er.sim.hit_max_time) {
            why.push_back("stopped at max_time with requests unfinished");
        }
        if (s.num_requests_sent == 0) {
            why.push_back("no requests measured");
            out.slo_met = false;
            out.first_other = why.front();
            return out;
        }
        if (s.num_requests_rejected > 0) {
            why.push_back(fmt::format("{} of {} requests rejected", s.num_requests_rejected, s.num_requests_sent));
        }
        if (s.num_requests_timed_out > 0) {  // workload.request_timeout: clients gave up on them
            why.push_back(fmt::format("{} of {} requests timed out", s.num_requests_timed_out, s.num_requests_sent));
        }
        // The backlog at the last send: requests sent and not yet scheduled. A server that keeps up has a few
        // waiting; one that falls behind has about (1 − served/offered) of all.
        const double backlog = backlog_fraction(s);
        if (backlog > r_.max_shortfall) {
            why.push_back(fmt::format("{:.1f} % of requests still queued at the last send: the queue grows",
                                      100.0 * backlog));
        }
        if (is_rate_key(r_.load_key) && s.send_window_s > 0) {
            const double sent_rps = static_cast<double>(s.num_requests_sent - 1) / s.send_window_s;
            out.sent_rps = sent_rps;
            if (sent_rps < (1.0 - r_.max_shortfall) * load) {
                why.push_back(fmt::format("sent {:.3g} req/s of the {:.3g} offered: the clients were held back",
                                          sent_rps, load));
                out.held_back = true;
            }
        }
        const std::size_t others = why.size();
        const planner::SloVerdict v = planner::check_slo(r_.slo, s);
        out.slo_met = v.met;
        why.insert(why.end(), v.violations.begin(), v.violations.end());
        // The run's status (docs/OUTPUTS.md "Status"), as `run` and `sweep` decide it: a load is not sustained by a
        // run that was overloaded, too short to show a steady state, or lost requests.
        if (er.status != RunStatus::kOk) {
            why.push_back(fmt::format("{}: {}", run_status_name(er.status), er.status_reason));
        }
        if (others > 0) {
            out.first_other = why.front();
        } else if (er.status != RunStatus::kOk) {
            out.first_other = why.back();
        }
        return out;
    }

    // The probe of configuration c at `value` (a load, or replicas with a target); nullptr when none ran.
    [[nodiscard]] const PlanProbe* probe_at(std::size_t c, double value) const {
        for (const auto& p : result_.probes) {
            const double v = r_.target_load ? static_cast<double>(p.replicas) : p.load;
            if (p.configuration == c && v == value) {
                return &p;
            }
        }
        return nullptr;
    }

    // The half-width (%) of the validated band for the metric that binds: TTFT's for ttft and queue, ITL's for tpot
    // and itl, E2E's for e2el and for the server's capacity; nullopt when the model is not validated on that GPU.
    void settle_band(PlanConfiguration& conf, std::size_t c) const {
        std::string metric = "E2E";
        if (conf.binding.kind == planner::Binding::Kind::kSlo) {
            switch (r_.slo.bounds[conf.binding.slo_index].metric) {
                case planner::SloMetric::kTtft:
                case planner::SloMetric::kQueue:
                    metric = "TTFT";
                    break;
                case planner::SloMetric::kTpot:
                case planner::SloMetric::kItl:
                    metric = "ITL";
                    break;
                case planner::SloMetric::kE2el:
                    metric = "E2E";
                    break;
            }
        }
        conf.band_metric = metric;
        const auto band = find_validation_band(cost_model_kinds_[c], conf.gpu);
        if (!band) {
            return;
        }
        const ErrorRange& e = metric == "TTFT" ? band->ttft_mean : metric == "ITL" ? band->itl_mean : band->e2e_mean;
        double h = std::max(std::abs(e.lo_pct), std::abs(e.hi_pct));
        if (!r_.target_load) {
            h = std::max(h, 100.0 * r_.rel_tolerance);  // the bisection knows the load no better than its bracket
        }
        conf.band_half_width_pct = h;
    }

    // In words, why the most favourable probe of an answer without a passing value failed; for a target, says when
    // every SLO held but the clients could not send the rate.
    [[nodiscard]] std::string verdict_of(std::size_t c) const {
        const PlanProbe* best = nullptr;
        for (const auto& p : result_.probes) {
            if (p.configuration != c) {
                continue;
            }
            // Most favourable: the most replicas with a target, the lowest load without.
            const bool better = best == nullptr || (r_.target_load ? p.replicas > best->replicas : p.load < best->load);
            if (better) {
                best = &p;
            }
        }
        if (best == nullptr || best->violations.empty()) {
            return {};
        }
        if (best->slo_met && best->held_back) {
            return fmt::format("every SLO held, but the clients sent {:.3g} of the {} req/s offered (held back by the "
                               "server): the {} rate was not reached",
                               best->sent_rps, value_text(best->load), r_.target_load ? "target" : "offered");
        }
        if (best->slo_met) {
            return "every SLO held, but " + (best->other_reason.empty() ? best->violations.front() : best->other_reason);
        }
        return best->violations.front();
    }

    void finish_configuration(std::size_t c, const planner::ThresholdAnswer& a) {
        PlanConfiguration& conf = result_.configurations[c];
        conf.answer = a;
        if (!a.best) {
            conf.verdict = verdict_of(c);
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
        conf.data_parallel_size = best.replicas;
        conf.gpus = best.replicas * conf.tensor_parallel_size * conf.pipeline_parallel_size;
        conf.nodes = (conf.gpus + r_.gpus_per_node - 1) / r_.gpus_per_node;
        conf.vllm_serve = best.vllm_serve;
        double tokens = 0;
        double output = 0;
        double tpot_sum = 0;
        int tpot_n = 0;
        for (const auto& s : best.summaries) {
            tokens += s.input_tokens_per_s + s.output_tokens_per_s;
            output += s.output_tokens_per_s;
            if (s.tpot_ms.count > 0 && s.tpot_ms.mean > 0) {
                tpot_sum += s.tpot_ms.mean;
                ++tpot_n;
            }
        }
        tokens /= static_cast<double>(best.summaries.size());
        output /= static_cast<double>(best.summaries.size());
        conf.tokens_per_s = tokens;
        conf.output_tokens_per_s = output;
        if (output > 0 && conf.gpus > 0) {
            conf.output_tokens_per_s_per_gpu = output / conf.gpus;
        }
        if (tpot_n > 0) {
            conf.tokens_per_s_per_user = 1000.0 / (tpot_sum / tpot_n);
        }
        if (conf.price) {
            conf.usd_per_mtok = planner::usd_per_million_tokens(conf.gpus, conf.price->usd_per_gpu_hour, tokens);
            conf.usd_per_mtok_output = planner::usd_per_million_tokens(conf.gpus, conf.price->usd_per_gpu_hour, output);
        }
        // What binds: the nearest failing probe beside the answer (planner/binding.h).
        std::vector<std::optional<double>> at_answer;
        for (const auto& b : r_.slo.bounds) {
            at_answer.push_back(worst(best, b));
        }
        std::optional<planner::FailingReading> failing;
        if (a.first_failing) {
            if (const PlanProbe* f = probe_at(c, *a.first_failing)) {
                planner::FailingReading fr;
                fr.stopped = f->stopped;
                for (const auto& b : r_.slo.bounds) {
                    fr.slo_values_ms.push_back(worst(*f, b));
                }
                fr.other_reason = f->other_reason;
                failing = fr;
            }
        }
        conf.binding = planner::find_binding(r_.slo, at_answer, failing);
        if (conf.binding.kind == planner::Binding::Kind::kNone && r_.target_load &&
            (!r_.search_replicas || r_.layout_gpus)) {
            conf.binding.reason = "evaluated at the target only: nothing beyond it was probed";
        }
        settle_band(conf, c);
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
        // The frontier is drawn on the SLO that binds the most ranked answers (first in --slo order on a tie): a
        // latency that never bound says nothing about what the money buys. None binds: no frontier.
        std::vector<int> binds(r_.slo.bounds.size(), 0);
        for (std::size_t c : priced) {
            const auto& b = result_.configurations[c].binding;
            if (b.kind == planner::Binding::Kind::kSlo) {
                ++binds[b.slo_index];
            }
        }
        const auto most = std::max_element(binds.begin(), binds.end());
        if (most == binds.end() || *most == 0) {
            return;
        }
        result_.frontier_slo = static_cast<std::size_t>(most - binds.begin());
        std::vector<double> cost;
        std::vector<double> latency;
        for (std::size_t c : priced) {
            cost.push_back(rank_value(result_.configurations[c]));
            latency.push_back(worst(result_.probes[*result_.configurations[c].best_probe],
                                    r_.slo.bounds[*result_.frontier_slo])
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
    std::vector<std::string> cost_model_kinds_;  // per configuration: roofline, measured, profile
    bool scenario_names_router_ = false;
};

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

std::string opt_fixed(const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : "—"; }

// Whether each configuration is evaluated at the target as it is (no search): --no-replica-search, or a layout
// search with a target (a layout's DP is its replica count).
bool fixed_evaluation(const PlanRequest& r) { return r.target_load && (!r.search_replicas || r.layout_gpus); }

std::string answer_kind(const PlanRequest& r, const PlanConfiguration& c) {
    if (!c.does_not_fit.empty()) {
        return "does_not_fit";
    }
    if (!c.not_accepted.empty()) {
        return "not_accepted";
    }
    const planner::ThresholdAnswer& a = c.answer;
    if (fixed_evaluation(r)) {
        return a.best ? "meets_target" : "misses_target";
    }
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
    if (r.layout_gpus) {
        const std::string over = fmt::format(" — in every layout of {} GPUs ({} node{} of {}{})", *r.layout_gpus,
                                             *r.layout_gpus / r.gpus_per_node,
                                             *r.layout_gpus / r.gpus_per_node == 1 ? "" : "s", r.gpus_per_node,
                                             r.max_pipeline_parallel_size
                                                 ? fmt::format(", at most {} pipeline stage{}",
                                                               *r.max_pipeline_parallel_size,
                                                               *r.max_pipeline_parallel_size == 1 ? "" : "s")
                                                 : std::string());
        if (r.target_load) {
            return fmt::format("each layout at {} = {}{}", r.load_key, value_text(*r.target_load), over);
        }
        return fmt::format("largest {} meeting the SLOs (start {}, double or halve in [{}, {}], bisect to {} %){}",
                           r.load_key, value_text(r.load_start), value_text(r.load_min), value_text(r.load_max),
                           value_text(100 * r.rel_tolerance), over);
    }
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
    if (request.gpus_per_node < 1) {
        throw ConfigError(fmt::format("--gpus-per-node: {} is not a GPU count; allowed: 1 or more",
                                      request.gpus_per_node));
    }
    if (request.max_pipeline_parallel_size && !request.layout_gpus) {
        throw ConfigError("--max-pp: caps the layout search's pipeline stages; give --gpus N to search layouts");
    }
    std::map<std::string, int> seen;
    for (const auto& [key, values] : request.grid) {
        if (++seen[key] > 1) {
            throw ConfigError("--grid: the key '" + key + "' is given twice");
        }
        if (key == request.load_key || key == "cluster.replicas") {
            throw ConfigError("--grid: '" + key + "' is what the planner searches; it cannot be a grid key");
        }
        if (request.layout_gpus &&
            (key == "engine.tensor_parallel_size" || key == "engine.pipeline_parallel_size" ||
             key == "engine.enable_expert_parallel")) {
            throw ConfigError("--grid: '" + key + "' is what the layout search (--gpus) varies; it cannot be a grid key");
        }
    }
    Planner p(request);
    return p.run(on_round);
}

std::vector<std::size_t> chosen_answers(const PlanResult& res) {
    // Group: the configuration without its layout (grid point and experiment). The best of a group: first in the
    // cost ranking; for an unpriced group, the most output tokens/s per GPU.
    std::vector<std::size_t> out;
    std::map<std::string, std::size_t> best;
    std::vector<std::string> groups;
    const auto group_of = [](const PlanConfiguration& c) {
        std::string g = c.label;
        if (c.layout) {
            const std::string l = c.layout->label();
            const auto at = g.rfind(l);
            if (at != std::string::npos) {
                g.erase(at, l.size());
            }
        }
        return g;
    };
    const auto better = [&](std::size_t a, std::size_t b) {  // is a better than b
        const auto& ca = res.configurations[a];
        const auto& cb = res.configurations[b];
        const auto ra = std::find(res.ranking.begin(), res.ranking.end(), a);
        const auto rb = std::find(res.ranking.begin(), res.ranking.end(), b);
        if (ra != res.ranking.end() || rb != res.ranking.end()) {
            return ra < rb;  // ranked beats unranked; earlier beats later
        }
        return ca.output_tokens_per_s_per_gpu.value_or(0) > cb.output_tokens_per_s_per_gpu.value_or(0);
    };
    for (std::size_t c = 0; c < res.configurations.size(); ++c) {
        if (!res.configurations[c].best_probe) {
            continue;
        }
        const std::string g = group_of(res.configurations[c]);
        const auto it = best.find(g);
        if (it == best.end()) {
            best[g] = c;
            groups.push_back(g);
        } else if (better(c, it->second)) {
            it->second = c;
        }
    }
    for (const auto& g : groups) {
        out.push_back(best[g]);
    }
    return out;
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
    if (res.frontier_slo) {
        out += "\nanswers (cheapest first; * = on the cost / " + r.slo.bounds[*res.frontier_slo].name +
               " Pareto frontier, the SLO that binds the most answers; figures rounded to the band column)\n";
    } else {
        out += "\nanswers (cheapest first; no SLO binds any answer, so no cost / latency frontier is starred; figures "
               "rounded to the band column)\n";
    }
    out += fmt::format("  {:<{}}  {:>9}  {:>5}  {:>5}  {:>8}  {:>8}  {:>9}  {:>10}  {:>8}  {:>10}  {:<10}  {}\n",
                       "config", label_w, r.target_load ? "replicas" : "max load", "gpus", "nodes", "$/GPU-h",
                       "tokens/s", "out tok/s", "tok/s/user", "$/Mtok", "$/Mtok out", "binds", "answer");
    out += fmt::format("  {:<{}}  {:>9}  {:>5}  {:>5}  {:>8}  {:>8}  {:>9}  {:>10}  {:>8}  {:>10}\n", "", label_w, "", "",
                       "", "", "", "per GPU", "", "", "");
    std::vector<std::size_t> order = res.ranking;
    for (std::size_t c = 0; c < res.configurations.size(); ++c) {
        if (std::find(order.begin(), order.end(), c) == order.end()) {
            order.push_back(c);
        }
    }
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        const auto band = conf.band_half_width_pct;
        const auto rounded = [&](const std::optional<double>& v) {
            return v ? planner::format_to_band(*v, band) : std::string("—");
        };
        std::string kind = answer_kind(r, conf);
        if (conf.answer.seed_dependent()) {
            std::string vals;
            for (double v : conf.answer.split_values) {
                vals += (vals.empty() ? "" : ", ") + value_text(v);
            }
            kind += "; seeds disagree at " + vals;
        }
        const bool answered = conf.best_probe.has_value();
        std::string best = "—";
        if (conf.answer.best) {
            best = r.target_load ? value_text(*conf.answer.best) : planner::format_to_band(*conf.answer.best, band);
        }
        out += fmt::format(
            "{} {:<{}}  {:>9}  {:>5}  {:>5}  {:>8}  {:>8}  {:>9}  {:>10}  {:>8}  {:>10}  {:<10}  {}\n",
            conf.on_frontier ? "*" : " ", conf.label, label_w, best,
            answered ? std::to_string(conf.gpus) : "—", answered ? std::to_string(conf.nodes) : "—",
            conf.price ? fixed(conf.price->usd_per_gpu_hour, 2) : "unpriced",
            answered ? planner::format_to_band(conf.tokens_per_s, band) : "—", rounded(conf.output_tokens_per_s_per_gpu),
            rounded(conf.tokens_per_s_per_user), conf.price ? rounded(conf.usd_per_mtok) : "unpriced",
            conf.price ? rounded(conf.usd_per_mtok_output) : "unpriced",
            answered ? conf.binding.name(r.slo) : "—", kind);
    }
    // What binds each answer and the headroom on the others (docs/PLANNER.md "What binds, and how sure").
    bool any_answer = false;
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        if (!conf.best_probe) {
            continue;
        }
        if (!any_answer) {
            out += "\nwhat binds each answer (the nearest failing probe's first broken limit), the headroom on each SLO "
                   "at the answer, and the error band its figures are rounded to\n";
            any_answer = true;
        }
        std::string line = fmt::format("  {:<{}}  binds {}", conf.label, label_w, conf.binding.name(r.slo));
        if (conf.answer.first_failing) {
            line += fmt::format(" (at {} {}{})", r.target_load ? "replicas" : "load",
                                value_text(*conf.answer.first_failing),
                                conf.binding.reason.empty() ? std::string() : ": " + conf.binding.reason);
        } else if (!conf.binding.reason.empty()) {
            line += " (" + conf.binding.reason + ")";
        }
        line += "; headroom:";
        for (std::size_t i = 0; i < r.slo.bounds.size(); ++i) {
            const auto& h = conf.binding.headroom_pct[i];
            line += fmt::format(" {} {}", r.slo.bounds[i].name, h ? fmt::format("{:.0f} %", *h) : "not measured");
            line += i + 1 < r.slo.bounds.size() ? "," : ";";
        }
        line += conf.band_half_width_pct
                    ? fmt::format(" band ±{:.0f} % ({} of the time model against real runs)", *conf.band_half_width_pct,
                                  conf.band_metric)
                    : " band not validated (two significant digits)";
        out += line + "\n";
    }
    // Answers without a passing value: what their most favourable probe showed (the --target-rate verdict).
    bool any_verdict = false;
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        if (conf.best_probe || conf.verdict.empty()) {
            continue;
        }
        if (!any_verdict) {
            out += "\nwithout an answer: what the most favourable probe showed\n";
            any_verdict = true;
        }
        out += fmt::format("  {:<{}}  {}: {}\n", conf.label, label_w, answer_kind(r, conf), conf.verdict);
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
    bool any_refused = false;
    for (std::size_t c : order) {
        const auto& conf = res.configurations[c];
        if (!conf.not_accepted.empty()) {
            if (!any_refused) {
                out += "\nnot_accepted: layouts vLLM refuses for this model, so they were not probed\n";
                any_refused = true;
            }
            out += fmt::format("  {:<{}}  {}\n", conf.label, label_w, conf.not_accepted);
        }
    }
    // The price behind each GPU's cost, with its citation (docs/GPUS.md "Prices").
    out += "\nprices\n";
    std::vector<std::string> gpus_seen;
    for (const auto& conf : res.configurations) {
        if (conf.gpu.empty() || std::find(gpus_seen.begin(), gpus_seen.end(), conf.gpu) != gpus_seen.end()) {
            continue;
        }
        gpus_seen.push_back(conf.gpu);
        out += fmt::format("  {:<13} {}\n", conf.gpu,
                           conf.price ? conf.price->describe(r.prices.source)
                                      : "unpriced: no cited price (give one with --prices FILE)");
    }
    // The launch command of the chosen answer of each group (docs/PLANNER.md "Launch commands").
    const auto chosen = chosen_answers(res);
    if (!chosen.empty()) {
        out += r.layout_gpus ? "\nlaunch: the best layout of each configuration (cheapest per token; the most output "
                               "tokens/s per GPU where unpriced)\n"
                             : "\nlaunch: each answer's configuration\n";
        for (std::size_t c : chosen) {
            const auto& conf = res.configurations[c];
            out += fmt::format("  # {}{}\n  {}\n", conf.label,
                               conf.nodes > 1 ? fmt::format(" — {} nodes: start it with vLLM's multi-node flags "
                                                            "(--data-parallel-size-local, --data-parallel-address; "
                                                            "Ray for pipeline stages across nodes)",
                                                            conf.nodes)
                                              : std::string(),
                               conf.vllm_serve);
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
    j["data_parallel_size"] = p.replicas;
    j["passed"] = p.passed;
    j["replicates"] = p.summaries.size();
    for (const auto& b : r.slo.bounds) {
        const auto v = Planner::worst(p, b);
        j[b.name + "_ms"] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    }
    j["backlog_fraction"] = p.stopped ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(worst_backlog(p));
    j["status"] = p.status;
    j["sent_rps"] = p.stopped ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.sent_rps);
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
    j["gpus_per_node"] = r.gpus_per_node;
    j["layout_gpus"] = r.layout_gpus ? nlohmann::ordered_json(*r.layout_gpus) : nlohmann::ordered_json(nullptr);
    j["frontier_slo"] = res.frontier_slo ? nlohmann::ordered_json(r.slo.bounds[*res.frontier_slo].name)
                                         : nlohmann::ordered_json(nullptr);
    j["chosen"] = nlohmann::ordered_json::array();
    for (std::size_t c : chosen_answers(res)) {
        j["chosen"].push_back(res.configurations[c].label);
    }
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
        const bool answered = conf.best_probe.has_value();
        const auto band = conf.band_half_width_pct;
        const auto rounded = [&](const std::optional<double>& v) {
            return v ? nlohmann::ordered_json(planner::round_to_band(*v, band)) : nlohmann::ordered_json(nullptr);
        };
        cj["answer"] = answer_kind(r, conf);
        const std::string reason = !conf.does_not_fit.empty() ? conf.does_not_fit : conf.not_accepted;
        cj["status_reason"] = reason.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(reason);
        cj["verdict"] = conf.verdict.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(conf.verdict);
        cj["tensor_parallel_size"] = conf.tensor_parallel_size;
        cj["pipeline_parallel_size"] = conf.pipeline_parallel_size;
        cj["data_parallel_size"] = answered ? nlohmann::ordered_json(conf.data_parallel_size)
                                  : conf.layout ? nlohmann::ordered_json(conf.layout->data_parallel_size)
                                                : nlohmann::ordered_json(nullptr);
        cj["enable_expert_parallel"] = conf.enable_expert_parallel || (conf.layout && conf.layout->enable_expert_parallel);
        cj["layout"] = conf.layout ? nlohmann::ordered_json(conf.layout->label()) : nlohmann::ordered_json(nullptr);
        cj[r.target_load ? "min_replicas" : "max_load"] = opt_json(conf.answer.best);
        if (!r.target_load) {
            cj["max_load_rounded"] = rounded(conf.answer.best);
        }
        cj["first_failing"] = opt_json(conf.answer.first_failing);
        cj["split_values"] = conf.answer.split_values;
        cj["gpus"] = answered ? nlohmann::ordered_json(conf.gpus) : nlohmann::ordered_json(nullptr);
        cj["nodes"] = answered ? nlohmann::ordered_json(conf.nodes) : nlohmann::ordered_json(nullptr);
        cj["gpus_per_node"] = r.gpus_per_node;
        if (conf.price) {
            cj["usd_per_gpu_hour"] = conf.price->usd_per_gpu_hour;
            cj["price_source"] = conf.price->cited() ? nlohmann::ordered_json(conf.price->source)
                                                     : nlohmann::ordered_json(r.prices.source + " (uncited)");
            cj["price_date"] = conf.price->cited() ? nlohmann::ordered_json(conf.price->date)
                                                   : nlohmann::ordered_json(nullptr);
        } else {
            cj["usd_per_gpu_hour"] = "unpriced";
            cj["price_source"] = nullptr;
            cj["price_date"] = nullptr;
        }
        cj["validation"] = conf.validation;
        cj["tokens_per_s"] = answered ? nlohmann::ordered_json(conf.tokens_per_s) : nlohmann::ordered_json(nullptr);
        cj["output_tokens_per_s"] = answered ? nlohmann::ordered_json(conf.output_tokens_per_s)
                                             : nlohmann::ordered_json(nullptr);
        cj["output_tokens_per_s_per_gpu"] = opt_json(conf.output_tokens_per_s_per_gpu);
        cj["tokens_per_s_per_user"] = opt_json(conf.tokens_per_s_per_user);
        cj["usd_per_mtok"] = opt_json(conf.usd_per_mtok);
        cj["usd_per_mtok_output"] = opt_json(conf.usd_per_mtok_output);
        cj["usd_per_mtok_rounded"] = rounded(conf.usd_per_mtok);
        cj["output_tokens_per_s_per_gpu_rounded"] = rounded(conf.output_tokens_per_s_per_gpu);
        cj["tokens_per_s_per_user_rounded"] = rounded(conf.tokens_per_s_per_user);
        cj["binding"] = answered ? nlohmann::ordered_json(conf.binding.name(r.slo)) : nlohmann::ordered_json(nullptr);
        cj["binding_reason"] = answered && !conf.binding.reason.empty() ? nlohmann::ordered_json(conf.binding.reason)
                                                                        : nlohmann::ordered_json(nullptr);
        nlohmann::ordered_json headroom = nlohmann::ordered_json::object();
        for (std::size_t i = 0; i < r.slo.bounds.size(); ++i) {
            headroom[r.slo.bounds[i].name] = answered ? opt_json(conf.binding.headroom_pct[i])
                                                      : nlohmann::ordered_json(nullptr);
        }
        cj["headroom_pct"] = headroom;
        cj["band_half_width_pct"] = answered ? opt_json(band) : nlohmann::ordered_json(nullptr);
        cj["band"] = !answered ? nlohmann::ordered_json(nullptr)
                     : band    ? nlohmann::ordered_json(fmt::format("±{:.0f} % ({})", *band, conf.band_metric))
                               : nlohmann::ordered_json("not validated");
        cj["on_frontier"] = conf.on_frontier;
        cj["vllm_serve"] = answered ? nlohmann::ordered_json(conf.vllm_serve) : nlohmann::ordered_json(nullptr);
        const auto rank = std::find(res.ranking.begin(), res.ranking.end(), c);
        cj["rank"] = rank == res.ranking.end() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(rank - res.ranking.begin() + 1);
        j["configurations"].push_back(cj);
    }
    return j.dump(2) + "\n";
}

std::string format_plan_csv(const PlanRequest& r, const PlanResult& res) {
    // One row per probe, with its configuration's answer repeated (a flat file for plotting).
    std::string out = "config,load,replicas,tensor_parallel_size,pipeline_parallel_size,data_parallel_size,gpus,passed,"
                      "replicates";
    for (const auto& b : r.slo.bounds) {
        out += fmt::format(",{}_ms", b.name);
    }
    out += ",backlog_fraction,status,verdict,answer,best,first_failing,answer_gpus,nodes,usd_per_mtok,"
           "usd_per_mtok_output,binding,on_frontier\n";
    auto csv_opt = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string(); };
    for (const auto& p : res.probes) {
        const auto& conf = res.configurations[p.configuration];
        std::string verdict = p.violations.empty() ? "ok" : p.violations.front();
        std::replace(verdict.begin(), verdict.end(), ',', ';');
        out += fmt::format("\"{}\",{},{},{},{},{},{},{},{}", conf.label, p.load, p.replicas, conf.tensor_parallel_size,
                           conf.pipeline_parallel_size, p.replicas,
                           p.replicas * conf.tensor_parallel_size * conf.pipeline_parallel_size, p.passed,
                           p.summaries.size());
        for (const auto& b : r.slo.bounds) {
            out += ',';
            out += csv_opt(Planner::worst(p, b));
        }
        out += fmt::format(",{},{},\"{}\",{},{},{},{},{},{},{},{},{}\n",
                           p.stopped ? std::string() : fmt::format("{}", worst_backlog(p)), p.status, verdict,
                           answer_kind(r, conf), csv_opt(conf.answer.best), csv_opt(conf.answer.first_failing),
                           conf.best_probe ? std::to_string(conf.gpus) : "",
                           conf.best_probe ? std::to_string(conf.nodes) : "", csv_opt(conf.usd_per_mtok),
                           csv_opt(conf.usd_per_mtok_output), conf.best_probe ? conf.binding.name(r.slo) : "",
                           conf.on_frontier ? "true" : "false");
    }
    // One row for each configuration vLLM would not start: no probe, its reason as the verdict.
    for (const auto& conf : res.configurations) {
        if (conf.does_not_fit.empty() && conf.not_accepted.empty()) {
            continue;
        }
        std::string reason = conf.does_not_fit.empty() ? conf.not_accepted : conf.does_not_fit;
        std::replace(reason.begin(), reason.end(), ',', ';');
        std::replace(reason.begin(), reason.end(), '"', '\'');
        const std::string kind = answer_kind(r, conf);
        const int dp = conf.layout ? conf.layout->data_parallel_size : 1;
        out += fmt::format("\"{}\",,,{},{},{},{},0,0", conf.label, conf.tensor_parallel_size, conf.pipeline_parallel_size, dp,
                           dp * conf.tensor_parallel_size * conf.pipeline_parallel_size);
        out += std::string(r.slo.bounds.size(), ',');
        out += fmt::format(",,{},\"{}\",{},,,,,,,,false\n", kind, reason, kind);
    }
    return out;
}

}  // namespace servesim::app
