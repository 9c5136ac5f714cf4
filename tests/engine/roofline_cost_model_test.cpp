// Tests of sim/engine/roofline_cost_model.*: the cost model owns what it reads, so the ModelSpec it was built from
// may move or die (app::PreparedExperiment is moved into a vector after its cost model is built).
#include "sim/engine/roofline_cost_model.h"

#include <optional>

#include "models/model_registry.h"
#include "tests/catch.h"

namespace servesim::engine {
namespace {

TEST_CASE("RooflineCostModel does not keep a reference to the caller's ModelSpec", "[engine]") {
    std::optional<models::ModelSpec> spec = models::resolve_model("Qwen3-4B");
    RooflineParams params;
    params.peak_flops_per_s = 989e12;
    params.memory_bandwidth_bytes_per_s = 4.8e12;
    const RooflineCostModel cost(*spec, spec->dtype, params);
    BatchShape decode;
    decode.num_tokens = 8;
    decode.num_decode_seqs = 8;
    decode.num_seqs = 8;
    decode.num_sampled_seqs = 8;
    decode.decode_context_tokens = 8 * 1000;
    const double before = cost.step_cost(decode).total_ms();
    // Another, much larger model in the same storage: a cost model holding a pointer would now price Qwen3-32B.
    spec = models::resolve_model("Qwen3-32B");
    CHECK(cost.step_cost(decode).total_ms() == before);
    spec.reset();
    CHECK(cost.step_cost(decode).total_ms() == before);
}

}  // namespace
}  // namespace servesim::engine
