// Tables, CSV and JSON; see output.h.
#include "tools/app/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "models/model_derived.h"

namespace servesim::app {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string cell_text(const Cell& c) {
    if (const auto* s = std::get_if<std::string>(&c)) {
        return *s;
    }
    if (const auto* i = std::get_if<std::int64_t>(&c)) {
        return fmt::format("{}", *i);
    }
    return fmt::format("{:.6g}", std::get<double>(c));
}

std::string csv_escape(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) {
        return s;
    }
    std::string out = "\"";
    for (char ch : s) {
        out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    }
    return out + "\"";
}

nlohmann::ordered_json dist_json(const metrics::Distribution& d) {
    nlohmann::ordered_json j;
    j["p50"] = d.p50;
    j["p90"] = d.p90;
    j["p99"] = d.p99;
    j["mean"] = d.mean;
    j["max"] = d.max;
    j["count"] = d.count;
    return j;
}

void add_dist(std::vector<std::pair<std::string, Cell>>& out, const std::string& name, const metrics::Distribution& d) {
    out.emplace_back(name + "_p50", d.p50);
    out.emplace_back(name + "_p90", d.p90);
    out.emplace_back(name + "_p99", d.p99);
    out.emplace_back(name + "_mean", d.mean);
}

// `mode: order_only`: identity columns, then trace, capacity_tokens and block_size unless swept, then the figures.
std::vector<std::pair<std::string, Cell>> flatten_order_only(const ExperimentResult& r) {
    std::vector<std::pair<std::string, Cell>> out;
    for (const auto& [k, v] : r.config.columns) {
        out.emplace_back(k, v);
    }
    auto add_unless_column = [&](const std::string& name, Cell value) {
        if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.first == name; })) {
            out.emplace_back(name, std::move(value));
        }
    };
    const cache::OrderOnlyResult& o = *r.order_only;
    add_unless_column("trace", std::filesystem::path(r.config.workload["trace"].as<std::string>()).filename().string());
    add_unless_column("capacity_tokens", o.capacity_tokens ? Cell(*o.capacity_tokens) : Cell(std::string("unlimited")));
    add_unless_column("block_size", static_cast<std::int64_t>(o.block_size_tokens));
    out.emplace_back("prefix_cache_hit_rate", o.prefix_cache_hit_rate());
    out.emplace_back("prefix_cache_queries", o.prefix_cache_queries);
    out.emplace_back("prefix_cache_hits", o.prefix_cache_hits);
    out.emplace_back("requests", o.num_requests);
    out.emplace_back("cache_blocks", o.num_cache_blocks);
    out.emplace_back("distinct_blocks", o.num_distinct_blocks);
    out.emplace_back("evictions", o.num_evictions);
    out.emplace_back("truncated_requests", o.num_truncated_requests);
    return out;
}

}  // namespace

std::vector<std::pair<std::string, Cell>> flatten(const ExperimentResult& r) {
    if (r.order_only) {
        return flatten_order_only(r);
    }
    std::vector<std::pair<std::string, Cell>> out;
    for (const auto& [k, v] : r.config.columns) {
        out.emplace_back(k, v);
    }
    const bool has_model_column =
        std::any_of(out.begin(), out.end(), [](const auto& p) { return p.first == "model"; });
    if (!has_model_column) {
        out.emplace_back("model", r.model_name);
    }
    const auto& s = r.sim.summary;
    const auto& p = r.plan;
    out.emplace_back("gpu", r.gpu_name);
    out.emplace_back("prefix_cache_hit_rate", s.prefix_cache_hit_rate);
    out.emplace_back("total_hit_rate", s.total_hit_rate);
    add_dist(out, "ttft_ms", s.ttft_ms);
    add_dist(out, "itl_ms", s.itl_ms);
    add_dist(out, "e2e_ms", s.e2e_ms);
    add_dist(out, "tpot_ms", s.tpot_ms);
    out.emplace_back("queue_ms_p50", s.queue_ms.p50);
    out.emplace_back("requested_rps", s.requested_rps);
    out.emplace_back("throughput_rps", s.throughput_rps);
    out.emplace_back("output_tokens_per_s", s.output_tokens_per_s);
    out.emplace_back("requests_sent", s.num_requests_sent);
    out.emplace_back("requests_finished", s.num_requests_finished);
    out.emplace_back("requests_rejected", s.num_requests_rejected);
    out.emplace_back("preemptions", s.preemptions);
    out.emplace_back("queue_peak", s.queue_peak);
    out.emplace_back("kv_usage_mean", s.kv_usage_mean);
    out.emplace_back("kv_usage_max", s.kv_usage_max);
    out.emplace_back("mean_prompt_tokens", s.mean_prompt_tokens);
    out.emplace_back("mean_output_tokens", s.mean_output_tokens);
    out.emplace_back("kv_cache_tokens", p.kv_cache_tokens);
    out.emplace_back("num_gpu_blocks", p.num_gpu_blocks);
    out.emplace_back("block_size", static_cast<std::int64_t>(p.block_size));
    out.emplace_back("enable_prefix_caching", std::string(p.enable_prefix_caching ? "true" : "false"));
    out.emplace_back("mamba_cache_mode", std::string(cache::mamba_cache_mode_name(p.mamba_cache_mode)));
    out.emplace_back("kv_cache_memory_gib", static_cast<double>(p.kv_cache_memory_bytes) / kGiB);
    out.emplace_back("duration_s", s.duration_s);
    out.emplace_back("unfinished", r.sim.num_unfinished);
    return out;
}

nlohmann::ordered_json to_json(const ExperimentResult& r) {
    nlohmann::ordered_json j;
    j["name"] = r.config.name;
    if (r.order_only) {
        j["mode"] = "order_only";
        j["workload"] = r.workload;
        for (const auto& [k, v] : flatten_order_only(r)) {
            std::visit([&](const auto& value) { j[k] = value; }, v);
        }
        return j;
    }
    for (const auto& [k, v] : r.config.columns) {
        j[k] = v;
    }
    j["model"] = r.model_name;
    j["gpu"] = r.gpu_name;
    j["cost_model"] = r.cost_model;
    j["workload"] = r.workload;
    j["seed"] = r.config.seed;
    const auto& s = r.sim.summary;
    const auto& p = r.plan;
    j["prefix_cache_hit_rate"] = s.prefix_cache_hit_rate;
    j["prefix_cache_queries"] = s.prefix_cache_queries;
    j["prefix_cache_hits"] = s.prefix_cache_hits;
    j["cached_prompt_fraction"] = s.cached_prompt_fraction;
    j["external_hit_rate"] = s.external_hit_rate;
    j["total_hit_rate"] = s.total_hit_rate;
    j["ttft_ms"] = dist_json(s.ttft_ms);
    j["itl_ms"] = dist_json(s.itl_ms);
    j["e2e_ms"] = dist_json(s.e2e_ms);
    j["tpot_ms"] = dist_json(s.tpot_ms);
    j["queue_ms"] = dist_json(s.queue_ms);
    j["requested_rps"] = s.requested_rps;
    j["throughput_rps"] = s.throughput_rps;
    j["output_tokens_per_s"] = s.output_tokens_per_s;
    j["input_tokens_per_s"] = s.input_tokens_per_s;
    j["requests_sent"] = s.num_requests_sent;
    j["requests_finished"] = s.num_requests_finished;
    j["requests_rejected"] = s.num_requests_rejected;
    j["preemptions"] = s.preemptions;
    j["queue_peak"] = s.queue_peak;
    j["kv_usage_mean"] = s.kv_usage_mean;
    j["kv_usage_max"] = s.kv_usage_max;
    j["num_steps"] = s.num_steps;
    j["mean_batch_tokens"] = s.mean_batch_tokens;
    j["mean_prompt_tokens"] = s.mean_prompt_tokens;
    j["mean_output_tokens"] = s.mean_output_tokens;
    j["duration_s"] = s.duration_s;
    j["unfinished"] = r.sim.num_unfinished;
    j["kv_cache_tokens"] = p.kv_cache_tokens;
    j["num_gpu_blocks"] = p.num_gpu_blocks;
    j["block_size"] = p.block_size;
    j["enable_prefix_caching"] = p.enable_prefix_caching;
    j["mamba_cache_mode"] = cache::mamba_cache_mode_name(p.mamba_cache_mode);
    j["kv_cache_memory_bytes"] = p.kv_cache_memory_bytes;
    const auto& c = r.sim.total_cost;
    j["step_time_ms_total"] = {{"gemm", c.gemm_ms},         {"lm_head", c.lm_head_ms},
                               {"attn_prefill", c.attn_prefill_ms}, {"attn_decode", c.attn_decode_ms},
                               {"gdn", c.gdn_ms},           {"snapshot", c.snapshot_ms},
                               {"overhead", c.overhead_ms},   {"comm", c.comm_ms}};
    return j;
}

std::string format_json(const std::vector<ExperimentResult>& results) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results) {
        arr.push_back(to_json(r));
    }
    return arr.dump(2) + "\n";
}

std::string format_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    const auto header = flatten(results.front());
    for (std::size_t i = 0; i < header.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        out += csv_escape(header[i].first);
    }
    out += "\n";
    for (const auto& r : results) {
        const auto row = flatten(r);
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (i > 0) {
                out += ',';
            }
            out += csv_escape(cell_text(row[i].second));
        }
        out += "\n";
    }
    return out;
}

std::string format_timeseries_csv(const std::vector<ExperimentResult>& results) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    out += "name";
    for (const auto& [k, v] : results.front().config.columns) {
        out += ',';
        out += csv_escape(k);
    }
    out += ",t_s,waiting,running,kv_usage,prefix_cache_hit_rate_cumulative\n";
    for (const auto& r : results) {
        std::string id = csv_escape(r.config.name);
        for (const auto& [k, v] : r.config.columns) {
            id += ',';
            id += csv_escape(v);
        }
        for (const auto& t : r.sim.timeseries) {
            const double hit = t.prefix_cache_queries > 0 ? static_cast<double>(t.prefix_cache_hits) /
                                                                 static_cast<double>(t.prefix_cache_queries)
                                                           : 0.0;
            out += fmt::format("{},{:.6g},{},{},{:.6g},{:.6g}\n", id, t.t_s, t.num_waiting, t.num_running, t.kv_usage,
                               hit);
        }
    }
    return out;
}

std::string format_table(const std::vector<ExperimentResult>& results, bool sweep) {
    std::string out;
    if (results.empty()) {
        return out;
    }
    if (sweep) {
        // One row per point: identity columns then the headline figures.
        std::vector<std::string> cols;
        for (const auto& [k, v] : results.front().config.columns) {
            cols.push_back(k);
        }
        std::vector<std::string> figures = {"prefix_cache_hit_rate", "ttft_ms_p50", "itl_ms_p50", "itl_ms_mean",
                                            "itl_ms_p99", "throughput_rps", "kv_cache_tokens", "block_size",
                                            "preemptions"};
        if (results.front().order_only) {
            figures.clear();
            for (const auto& [k, v] : flatten(results.front())) {
                if (std::find(cols.begin(), cols.end(), k) == cols.end()) {
                    figures.push_back(k);
                }
            }
        } else if (std::find(cols.begin(), cols.end(), "model") == cols.end()) {
            cols.insert(cols.begin(), "model");
        }
        cols.insert(cols.end(), figures.begin(), figures.end());
        std::vector<std::vector<std::string>> rows;
        for (const auto& r : results) {
            const auto flat = flatten(r);
            std::vector<std::string> row;
            for (const auto& c : cols) {
                const auto it = std::find_if(flat.begin(), flat.end(), [&](const auto& p) { return p.first == c; });
                row.push_back(it == flat.end() ? "" : cell_text(it->second));
            }
            rows.push_back(row);
        }
        std::vector<std::size_t> width(cols.size());
        for (std::size_t i = 0; i < cols.size(); ++i) {
            width[i] = cols[i].size();
            for (const auto& row : rows) {
                width[i] = std::max(width[i], row[i].size());
            }
        }
        for (std::size_t i = 0; i < cols.size(); ++i) {
            out += fmt::format("{:<{}}  ", cols[i], width[i]);
        }
        out += "\n";
        for (const auto& row : rows) {
            for (std::size_t i = 0; i < cols.size(); ++i) {
                out += fmt::format("{:<{}}  ", row[i], width[i]);
            }
            out += "\n";
        }
        return out;
    }
    // Side by side: figures as rows.
    std::vector<std::vector<std::pair<std::string, Cell>>> flats;
    for (const auto& r : results) {
        flats.push_back(flatten(r));
    }
    std::size_t label_width = 0;
    for (const auto& [k, v] : flats.front()) {
        label_width = std::max(label_width, k.size());
    }
    std::vector<std::size_t> width(results.size(), 0);
    for (std::size_t c = 0; c < results.size(); ++c) {
        width[c] = results[c].config.name.size();
        for (const auto& [k, v] : flats[c]) {
            width[c] = std::max(width[c], cell_text(v).size());
        }
    }
    out += fmt::format("{:<{}}", "", label_width + 2);
    for (std::size_t c = 0; c < results.size(); ++c) {
        out += fmt::format("{:>{}}  ", results[c].config.name, width[c]);
    }
    out += "\n";
    for (std::size_t row = 0; row < flats.front().size(); ++row) {
        out += fmt::format("{:<{}}", flats.front()[row].first, label_width + 2);
        for (std::size_t c = 0; c < results.size(); ++c) {
            out += fmt::format("{:>{}}  ", row < flats[c].size() ? cell_text(flats[c][row].second) : "", width[c]);
        }
        out += "\n";
    }
    return out;
}

nlohmann::ordered_json inspect_json(const models::ModelSpec& model, const std::string& gpu,
                                    const cache::MemoryPlan& p) {
    nlohmann::ordered_json j;
    j["model"] = model.name;
    j["gpu"] = gpu;
    j["block_size"] = p.block_size;
    j["block_size_raised"] = p.block_size_raised;
    j["mamba_block_size"] = p.mamba_block_size;
    j["mamba_page_padding_pct"] = p.mamba_page_padding_pct;
    j["page_size_bytes"] = p.page_size_bytes;
    j["num_kv_cache_groups"] = p.groups.size();
    j["group_size"] = p.group_size;
    j["num_gpu_blocks"] = p.num_gpu_blocks;
    j["kv_cache_tokens"] = p.kv_cache_tokens;
    j["max_concurrency"] = p.max_concurrency;
    j["max_model_len"] = p.max_model_len;
    j["kv_bytes_per_token"] = p.kv_bytes_per_token;
    j["state_bytes_per_sequence"] = p.state_bytes_per_sequence;
    j["kv_cache_memory_bytes"] = p.kv_cache_memory_bytes;
    j["kv_cache_dtype"] = models::dtype_name(p.kv_cache_dtype);
    j["enable_prefix_caching"] = p.enable_prefix_caching;
    j["mamba_cache_mode"] = cache::mamba_cache_mode_name(p.mamba_cache_mode);
    j["max_num_batched_tokens"] = p.max_num_batched_tokens;
    j["max_num_seqs"] = p.max_num_seqs;
    j["gpu_memory_utilization"] = p.gpu_memory_utilization;
    j["tensor_parallel_size"] = p.tensor_parallel_size;
    j["weight_bytes"] = p.weight_bytes;
    j["weight_bytes_read_per_decode_step"] = models::weight_bytes_read_per_step(model, 1);
    j["activation_peak_bytes"] = p.activation_peak_bytes;
    j["non_torch_bytes"] = p.non_torch_bytes;
    return j;
}

std::string inspect_table(const models::ModelSpec& model, const std::string& gpu, const cache::MemoryPlan& p) {
    std::string out;
    auto line = [&](const std::string& k, const std::string& v) { out += fmt::format("{:<34}{}\n", k, v); };
    line("model", model.name);
    line("gpu", gpu);
    line("kv cache dtype", models::dtype_name(p.kv_cache_dtype));
    line("prefix caching", p.enable_prefix_caching ? "on" : "off");
    if (p.mamba_block_size > 0) {
        line("mamba_cache_mode", cache::mamba_cache_mode_name(p.mamba_cache_mode));
    }
    line("max_model_len", fmt::format("{}", p.max_model_len));
    line("max_num_batched_tokens / seqs", fmt::format("{} / {}", p.max_num_batched_tokens, p.max_num_seqs));
    out += "\n-- memory (vLLM Worker.determine_available_memory) --\n";
    if (p.kv_cache_memory_overridden) {
        line("kv_cache_memory_bytes (given)", fmt::format("{:.2f} GiB", p.kv_cache_memory_bytes / kGiB));
    } else {
        line("requested (util x total)", fmt::format("{:.2f} GiB ({})", p.requested_memory_bytes / kGiB, p.gpu_memory_utilization));
        line("weights", fmt::format("{:.2f} GiB", p.weight_bytes / kGiB));
        line("activation peak (modelled)", fmt::format("{:.2f} GiB", p.activation_peak_bytes / kGiB));
        line("non-torch + cuda graphs", fmt::format("{:.2f} GiB", (p.non_torch_bytes + p.cudagraph_bytes) / kGiB));
        line("Available KV cache memory", fmt::format("{:.2f} GiB", p.kv_cache_memory_bytes / kGiB));
    }
    out += "\n-- what vLLM's start-up log would say --\n";
    if (p.block_size_raised) {
        out += p.block_size_reason + "\n";
    }
    if (p.mamba_page_padding_pct > 0) {
        out += fmt::format("Padding mamba page size by {:.2f}% to ensure that mamba page size and attention page size "
                           "are exactly equal.\n",
                           p.mamba_page_padding_pct);
    }
    int padding = 0;
    for (const auto& g : p.groups) {
        padding += g.num_padding_layers;
    }
    if (padding > 0) {
        out += fmt::format("Add {} padding layers, may waste at most {:.2f}% KV cache memory\n", padding,
                           100.0 * padding / (padding + static_cast<double>(model.layers.size())));
    }
    out += fmt::format("GPU KV cache size: {} tokens\n", p.kv_cache_tokens);
    out += fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x\n", p.max_model_len, p.max_concurrency);
    out += "\n-- pages and blocks --\n";
    line("block_size", fmt::format("{}", p.block_size));
    if (p.mamba_block_size > 0) {
        line("mamba_block_size", fmt::format("{}", p.mamba_block_size));
        line("mamba page (unpadded)", fmt::format("{} B", p.mamba_page_size_bytes));
        line("mamba_page_padding_pct", fmt::format("{:.2f} %", p.mamba_page_padding_pct));
    }
    line("page_size_bytes (per layer)", fmt::format("{}", p.page_size_bytes));
    std::string groups;
    for (const auto& g : p.groups) {
        const char* kind = g.kind == cache::KvGroupKind::kFullAttention   ? "full_attention"
                           : g.kind == cache::KvGroupKind::kSlidingWindow ? "sliding_window"
                                                                          : "mamba";
        groups += fmt::format("{}{}x{}", groups.empty() ? "" : ", ", kind, g.num_layers);
    }
    line("kv cache groups", fmt::format("{} (group size {}): {}", p.groups.size(), p.group_size, groups));
    line("num_gpu_blocks (incl. null)", fmt::format("{}", p.num_gpu_blocks));
    line("blocks per max-length request", fmt::format("{}", p.blocks_per_request));
    line("kv_bytes_per_token", fmt::format("{}", p.kv_bytes_per_token));
    line("state_bytes_per_sequence", fmt::format("{}", p.state_bytes_per_sequence));
    return out;
}

}  // namespace servesim::app
