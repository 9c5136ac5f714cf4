// Profile-curve step costs; see profile_cost_model.h.
#include "sim/engine/profile_cost_model.h"

#include <fmt/format.h>

#include <vector>

#include "common/error.h"
#include "sim/engine/roofline_cost_model.h"

namespace servesim::engine {

ProfileCostModel::ProfileCostModel(calibration::HardwareProfile profile, std::string path, int max_cudagraph_tokens,
                                   double decode_kv_bytes_scale, TensorParallelComm comm)
    : profile_(std::move(profile)),
      path_(std::move(path)),
      max_cudagraph_tokens_(max_cudagraph_tokens),
      decode_kv_bytes_scale_(decode_kv_bytes_scale),
      comm_(comm) {
    if (profile_.tensor_parallel_size != comm_.tensor_parallel_size) {
        throw ConfigError(fmt::format("{}: the profile was measured for tensor_parallel_size {} (one rank's shapes) but "
                                      "the engine runs tensor_parallel_size {}; calibrate with "
                                      "--tensor-parallel-size {} or use cost_model: roofline",
                                      path_, profile_.tensor_parallel_size, comm_.tensor_parallel_size,
                                      comm_.tensor_parallel_size));
    }
}

double ProfileCostModel::eval(const char* name, std::initializer_list<double> x) const {
    const auto it = profile_.curves.find(name);
    if (it == profile_.curves.end()) {
        return 0.0;  // optional curve absent (the reader enforces the required ones)
    }
    const std::vector<double> v(x);
    return it->second.evaluate(std::span<const double>(v.data(), v.size()));
}

StepCost ProfileCostModel::step_cost(const BatchShape& s) const {
    StepCost c;
    const std::int64_t tokens = s.num_prefill_tokens == 0
                                    ? RooflineCostModel::cudagraph_padded_tokens(s.num_tokens, max_cudagraph_tokens_)
                                    : s.num_tokens;
    c.gemm_ms = eval("gemm", {static_cast<double>(tokens)});
    if (s.num_sampled_seqs > 0) {
        c.lm_head_ms = eval("lm_head", {static_cast<double>(s.num_sampled_seqs)});
    }
    if (s.prefill_attention_work > 0) {
        c.attn_prefill_ms = calibration::evaluate_attn_prefill(profile_, s.prefill_attention_work,
                                                               static_cast<double>(s.prefill_max_context_tokens));
    }
    if (s.num_decode_seqs > 0) {
        c.attn_decode_ms = decode_kv_bytes_scale_ *
                           calibration::evaluate_attn_decode(profile_.curves.at("attn_decode"),
                                                             static_cast<double>(s.decode_context_tokens),
                                                             static_cast<double>(s.num_decode_seqs));
        c.gdn_ms += eval("gdn_decode", {static_cast<double>(s.num_decode_seqs)});
    }
    if (s.num_prefill_tokens > 0) {
        c.gdn_ms += eval("gdn_prefill", {static_cast<double>(s.num_prefill_tokens), static_cast<double>(s.num_gdn_chunks)});
    }
    if (s.num_snapshots > 0) {
        c.snapshot_ms = eval("snapshot", {static_cast<double>(s.num_snapshots)});
    }
    c.overhead_ms = eval("overhead", {static_cast<double>(s.num_seqs)});
    c.comm_ms = comm_.step_ms(tokens);
    return c;
}

std::string ProfileCostModel::describe() const {
    const std::string tp =
        comm_.tensor_parallel_size > 1 ? fmt::format(", TP {}", comm_.tensor_parallel_size) : "";
    return fmt::format("profile {} ({} on {}, {}{})", path_, profile_.model, profile_.gpu, profile_.source, tp);
}

}  // namespace servesim::engine
