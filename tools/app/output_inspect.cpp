// `servesim inspect`: vLLM's start-up sizing of the KV cache (JSON and text) and each replica's placement on the
// topology; see output_inspect.h.
#include "tools/app/output_inspect.h"

#include <fmt/format.h>

#include "common/units.h"
#include "models/model_derived.h"

namespace servesim::app {

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
    if (!p.stages.empty()) {
        j["pipeline_parallel_size"] = p.pipeline_parallel_size;
        nlohmann::ordered_json stages = nlohmann::ordered_json::array();
        for (const auto& st : p.stages) {
            stages.push_back({{"first_layer", st.first_layer},
                              {"num_layers", st.num_layers},
                              {"weight_bytes", st.weight_bytes},
                              {"kv_cache_memory_bytes", st.kv_cache_memory_bytes},
                              {"num_gpu_blocks", st.num_gpu_blocks}});
        }
        j["pipeline_stages"] = stages;
    }
    j["weight_bytes"] = p.weight_bytes;
    if (p.draft_attention_layers > 0) {  // --speculative-config's drafter, included in weight_bytes and KV per token
        j["draft_weight_bytes"] = p.draft_weight_bytes;
        j["draft_attention_layers"] = p.draft_attention_layers;
        j["draft_kv_bytes_per_token"] = p.draft_kv_bytes_per_token;
        j["draft_block_bytes"] = p.draft_block_bytes;
    }
    j["weight_bytes_read_per_decode_step"] = models::weight_bytes_read_per_step(model, 1);
    if (model.quantization) {  // docs/QUANTIZATION.md
        j["quantization"] = model.quantization->method;
        j["quantization_scheme"] = model.quantization->description;
        j["weight_bytes_all_ranks"] = models::weight_bytes_total(model);
    }
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
        if (p.draft_attention_layers > 0) {
            line("  of which the drafter", fmt::format("{:.2f} GiB", p.draft_weight_bytes / kGiB));
        }
        if (model.quantization) {
            line("weights, all ranks", fmt::format("{:.2f} GiB ({})", models::weight_bytes_total(model) / kGiB,
                                                  model.quantization->description));
        }
        line("activation peak (modelled)", fmt::format("{:.2f} GiB", p.activation_peak_bytes / kGiB));
        line("non-torch + cuda graphs", fmt::format("{:.2f} GiB", (p.non_torch_bytes + p.cudagraph_bytes) / kGiB));
        line("Available KV cache memory", fmt::format("{:.2f} GiB", p.kv_cache_memory_bytes / kGiB));
    }
    if (p.expert_parallel_size > 1) {
        line("expert parallel", fmt::format("EP {}: each GPU holds its routed experts whole (determine_expert_map)",
                                            p.expert_parallel_size));
    }
    if (!p.stages.empty()) {
        // Pipeline parallelism: one GPU per stage (and TP rank); vLLM keeps the smallest num_blocks of all stages.
        out += fmt::format("\n-- pipeline stages (get_pp_indices; the engine takes the smallest num_blocks) --\n");
        for (std::size_t i = 0; i < p.stages.size(); ++i) {
            const auto& st = p.stages[i];
            // vLLM's decoder layers (Falcon-H1's are two blocks each here: ModelSpec::blocks_per_decoder_layer).
            const int unit = model.blocks_per_decoder_layer;
            line(fmt::format("stage {} layers {}-{}", i, st.first_layer / unit,
                             (st.first_layer + st.num_layers) / unit - 1),
                 fmt::format("weights {:.2f} GiB, KV {:.2f} GiB, {} blocks", st.weight_bytes / kGiB,
                             st.kv_cache_memory_bytes / kGiB, st.num_gpu_blocks));
        }
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
                           100.0 * padding /
                               (padding + static_cast<double>(model.layers.size() + p.draft_attention_layers)));
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
                           : g.kind == cache::KvGroupKind::kChunkedLocal  ? "chunked_local"
                                                                          : "mamba";
        groups += fmt::format("{}{}x{}", groups.empty() ? "" : ", ", kind, g.num_layers);
    }
    line("kv cache groups", fmt::format("{} (group size {}): {}", p.groups.size(), p.group_size, groups));
    line("num_gpu_blocks (incl. null)", fmt::format("{}", p.num_gpu_blocks));
    line("blocks per max-length request", fmt::format("{}", p.blocks_per_request));
    line("kv_bytes_per_token", fmt::format("{}", p.kv_bytes_per_token));
    if (p.draft_attention_layers > 0) {
        line("  of which the drafter", fmt::format("{} ({} attention layers{})", p.draft_kv_bytes_per_token,
                                                   p.draft_attention_layers,
                                                   p.draft_block_bytes > 0
                                                       ? fmt::format(", {} B per block beside the groups",
                                                                     p.draft_block_bytes)
                                                       : std::string(", in the full-attention group")));
    }
    line("state_bytes_per_sequence", fmt::format("{}", p.state_bytes_per_sequence));
    return out;
}

namespace {

void placement_rows(std::string& out, const PreparedExperiment& p, const std::string& pool) {
    const std::string where = pool.empty() ? "" : pool + " ";
    if (p.replica_gpus.empty()) {
        out += fmt::format("{}replicas: {} × {} (no cluster.topology: the catalog GPU's {:.2f} GiB), {} KV blocks, "
                           "{} tokens each\n",
                           where, p.config.replicas, p.gpu.name, static_cast<double>(p.gpu.memory_bytes) / kGiB,
                           p.plan.num_gpu_blocks, p.plan.kv_cache_tokens);
        return;
    }
    out += fmt::format("{:<16}{:<28}{:>16}  {:>14}{:>14}  {}\n", where + "replica", "GPUs (cluster.topology)",
                       "GPU memory GiB", "num_gpu_blocks", "KV tokens", "memory from");
    for (std::size_t i = 0; i < p.replica_gpus.size(); ++i) {
        std::string gpus;
        for (const std::size_t v : p.replica_gpus[i]) {
            gpus += (gpus.empty() ? "" : ",") + p.config.topology->node(v).name;
        }
        if (gpus.size() > 27) {
            gpus = p.config.topology->node(p.replica_gpus[i].front()).name + ".." +
                   p.config.topology->node(p.replica_gpus[i].back()).name;
        }
        const std::int64_t mem = p.replica_gpu_memory_bytes[i];
        const cache::MemoryPlan& plan = replica_plan(p, i);
        const std::string from = mem == p.gpu.memory_bytes
                                     ? "topology = catalog " + p.gpu.name
                                     : fmt::format("topology (catalog {}: {:.2f} GiB, not used)", p.gpu.name,
                                                   static_cast<double>(p.gpu.memory_bytes) / kGiB);
        out += fmt::format("{:<16}{:<28}{:>16.2f}  {:>14}{:>14}  {}\n", i, gpus, static_cast<double>(mem) / kGiB,
                           plan.num_gpu_blocks, plan.kv_cache_tokens, from);
    }
}

}  // namespace

std::string inspect_placement(const PreparedExperiment& p) {
    std::string out = fmt::format("== experiment '{}': {} ==\n", p.config.name, p.model.name);
    if (p.prefill_pool) {
        placement_rows(out, *p.prefill_pool, "prefill");
        placement_rows(out, *p.decode_pool, "decode");
    } else {
        placement_rows(out, p, "");
    }
    return out;
}

}  // namespace servesim::app
