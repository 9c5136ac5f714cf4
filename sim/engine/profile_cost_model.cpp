// Profile-curve step costs; see profile_cost_model.h.
#include "sim/engine/profile_cost_model.h"

#include <fmt/format.h>


#include "common/error.h"
#include "sim/engine/roofline_cost_model.h"

namespace servesim::engine {

ProfileCostModel::ProfileCostModel(calibration::HardwareProfile profile, std::string path, CudaGraphSizes graphs,
                                   double decode_kv_bytes_scale, TensorParallelComm comm,
                                   AttentionLayerGroups attention)
    : profile_(std::move(profile)),
      path_(std::move(path)),
      graphs_(std::move(graphs)),
      decode_kv_bytes_scale_(decode_kv_bytes_scale),
      comm_(comm),
      attention_(attention),
      gemm_(curve("gemm")),
      lm_head_(curve("lm_head")),
      attn_prefill_(curve("attn_prefill")),
      attn_prefill_span_(curve("attn_prefill_span")),
      attn_decode_(curve("attn_decode")),
      gdn_prefill_(curve("gdn_prefill")),
      gdn_decode_(curve("gdn_decode")),
      overhead_(curve("overhead")) {
    if (attention_.local.count > 0) {
        int layers = attention_.full_layers;
        for (int i = 0; i < attention_.local.count; ++i) {
            layers += attention_.local_layers[i];
        }
        full_share_ = static_cast<double>(attention_.full_layers) / layers;
        for (int i = 0; i < attention_.local.count; ++i) {
            local_share_[i] = static_cast<double>(attention_.local_layers[i]) / layers;
        }
    }
    // The required curves are dereferenced per step: a profile built in code gets the reader's checks too.
    calibration::validate_profile(profile_, path_);
    if (profile_.tensor_parallel_size != comm_.tensor_parallel_size()) {
        throw ConfigError(fmt::format("{}: the profile was measured for tensor_parallel_size {} (one rank's shapes) but "
                                      "the engine runs tensor_parallel_size {}; calibrate with "
                                      "--tensor-parallel-size {} or use cost_model: roofline",
                                      path_, profile_.tensor_parallel_size, comm_.tensor_parallel_size(),
                                      comm_.tensor_parallel_size()));
    }
}

const calibration::Curve* ProfileCostModel::curve(const char* name) const {
    const auto it = profile_.curves.find(name);
    return it == profile_.curves.end() ? nullptr : &it->second;
}

namespace {

// An optional curve absent from the profile adds nothing.
double eval(const calibration::Curve* c, double x) { return c == nullptr ? 0.0 : c->evaluate(x); }

double eval(const calibration::Curve* c, double x0, double x1) {
    const double x[2] = {x0, x1};
    return c == nullptr ? 0.0 : c->evaluate(x);
}

}  // namespace

StepCost ProfileCostModel::step_cost(const BatchShape& s) const {
    StepCost c;
    // CUDA-graph padding of every batch up to the largest capture size (see RooflineCostModel::step_cost).
    const std::int64_t tokens = graphs_.padded_tokens(s.num_tokens);
    c.gemm_ms = eval(gemm_, static_cast<double>(tokens));
    if (s.num_sampled_seqs > 0) {
        c.lm_head_ms = eval(lm_head_, static_cast<double>(s.num_sampled_seqs));
    }
    const int num_local = attention_.local.count;
    // A shape without its local work (num_local_spans differs) costs the local layers at the full context.
    const bool capped = s.num_local_spans == num_local;
    if (s.prefill_attention_work > 0) {
        const auto prefill = [&](double work, std::int64_t span) {
            return calibration::evaluate_attn_prefill(*attn_prefill_, attn_prefill_span_, work,
                                                      static_cast<double>(span));
        };
        if (num_local == 0) {
            c.attn_prefill_ms = prefill(s.prefill_attention_work, s.prefill_max_context_tokens);
        } else {
            c.attn_prefill_ms = full_share_ > 0 ? full_share_ * prefill(s.prefill_attention_work,
                                                                        s.prefill_max_context_tokens)
                                                : 0.0;
            for (int i = 0; i < num_local; ++i) {
                c.attn_prefill_ms +=
                    local_share_[i] * (capped ? prefill(s.local[i].prefill_attention_work,
                                                        s.local[i].prefill_max_context_tokens)
                                              : prefill(s.prefill_attention_work, s.prefill_max_context_tokens));
            }
        }
    }
    if (s.num_decode_seqs > 0) {
        const auto decode = [&](std::int64_t context) {
            return calibration::evaluate_attn_decode(*attn_decode_, static_cast<double>(context),
                                                     static_cast<double>(s.num_decode_seqs));
        };
        double attn = 0;
        if (num_local == 0) {
            attn = decode(s.decode_context_tokens);
        } else {
            attn = full_share_ > 0 ? full_share_ * decode(s.decode_context_tokens) : 0.0;
            for (int i = 0; i < num_local; ++i) {
                attn += local_share_[i] * decode(capped ? s.local[i].decode_context_tokens : s.decode_context_tokens);
            }
        }
        c.attn_decode_ms = decode_kv_bytes_scale_ * attn;
        c.gdn_ms += eval(gdn_decode_, static_cast<double>(s.num_decode_seqs));
    }
    if (s.num_prefill_tokens > 0) {
        c.gdn_ms +=
            eval(gdn_prefill_, static_cast<double>(s.num_prefill_tokens), static_cast<double>(s.num_gdn_chunks));
    }
    // A profile's `snapshot` curve is not used: state copies are priced by the replica, the same way for every
    // scheme (StateSnapshotCost; the RTX 3090 profile's curve was a residual fitted to one prefill, issue 44).
    c.overhead_ms = eval(overhead_, static_cast<double>(s.num_seqs));
    c.comm_ms = comm_.step_ms(tokens);
    return c;
}

std::string ProfileCostModel::describe() const {
    const std::string tp =
        comm_.tensor_parallel_size() > 1 ? fmt::format(", TP {}", comm_.tensor_parallel_size()) : "";
    return fmt::format("profile {} ({} on {}, {}{})", path_, profile_.model, profile_.gpu, profile_.source, tp);
}

}  // namespace servesim::engine
