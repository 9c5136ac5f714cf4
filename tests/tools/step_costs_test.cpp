// Tests of tools/app/step_costs.*: the --step-costs batch forms, the shape they build (sums worked by hand as
// Replica::batch_shape takes them), their errors, and `servesim inspect --step-costs` as a user runs it.
#include "tools/app/step_costs.h"

#include <string>

#include "common/error.h"
#include "models/model_registry.h"
#include "sim/engine/roofline_cost_model.h"
#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace servesim::app {
namespace {

std::string error_of(const std::string& spec) {
    try {
        (void)parse_batch_part(spec);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "<no ConfigError>";
}

TEST_CASE("--step-costs parts build the batch shape a step of them would have", "[tools]") {
    const std::vector<BatchPart> parts = {parse_batch_part("prefill=512@4096"), parse_batch_part("decode=64x2048"),
                                          parse_batch_part("prefill=2x100")};
    const engine::BatchShape s = batch_shape_of(parts, {});
    // Tokens 512 + 64 + 2·100 = 776; sequences 1 + 64 + 2 = 67, all sampled.
    CHECK(s.num_tokens == 776);
    CHECK(s.num_seqs == 67);
    CHECK(s.num_sampled_seqs == 67);
    CHECK(s.num_prefill_seqs == 3);
    CHECK(s.num_prefill_tokens == 712);
    // Work 512·(4096 + 256) + 2·100·(0 + 50) = 2,228,224 + 10,000; decode keys 64 · 2048 (the new token included).
    CHECK(s.prefill_attention_work == 2'238'224.0);
    CHECK(s.prefill_max_context_tokens == 4608);
    CHECK(s.num_decode_seqs == 64);
    CHECK(s.decode_context_tokens == 131'072);
    CHECK(s.num_gdn_chunks == 8 + 2 * 2);
    CHECK(describe_batch(parts) ==
          "prefill of 512 tokens after 4096 cached + 64 decodes at context 2048 + 2 × prefill of 100 tokens after 0 "
          "cached");
}

TEST_CASE("--step-costs refuses malformed parts, naming the flag and the forms", "[tools]") {
    CHECK(error_of("prefill").find("command line: --step-costs: 'prefill': expected KIND=SIZE; allowed: "
                                   "prefill=TOKENS") != std::string::npos);
    CHECK(error_of("verify=3").find("'verify' is not a batch part") != std::string::npos);
    CHECK(error_of("decode=8@100").find("a decode's context is written decode=SEQSxCONTEXT") != std::string::npos);
    CHECK(error_of("prefill=0").find("0 is out of range (1 to 2^30)") != std::string::npos);
    CHECK(error_of("decode=4xlots").find("'lots' is not a whole number") != std::string::npos);
    // A separator with nothing after it is not the form without it: decode=64x is not decode=64.
    CHECK(error_of("decode=64x").find("'' is not a whole number") != std::string::npos);
    CHECK(error_of("prefill=2048@").find("'' is not a whole number") != std::string::npos);
    CHECK(error_of("prefill=4x").find("'' is not a whole number") != std::string::npos);
}

TEST_CASE("--step-costs lists terms that add up to the cost model's step", "[tools]") {
    const models::ModelSpec m = models::resolve_model("Qwen3-4B");
    engine::RooflineParams p;
    p.peak_flops_per_s = 989e12;
    p.memory_bandwidth_bytes_per_s = 3.35e12;
    const engine::RooflineCostModel cost(m, m.dtype, p);
    const std::vector<BatchPart> parts = {parse_batch_part("prefill=2048"), parse_batch_part("decode=64x2048")};
    const nlohmann::ordered_json j = step_costs_json(cost, parts);
    CHECK(j["total_ms"].get<double>() == Approx(cost.step_cost(batch_shape_of(parts, {})).total_ms()));
    CHECK(j["num_tokens"] == 2112);
}

TEST_CASE("CLI: inspect --step-costs prints the step term by term", "[tools][cli]") {
    const test::Ran r =
        test::run_servesim("inspect --model Qwen3-4B --gpu H100 --step-costs prefill=2048 decode=64x2048");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(test::contains(r.output, "-- step cost: roofline H100-SXM"));
    CHECK(test::contains(r.output,
                         "batch: prefill of 2048 tokens after 0 cached + 64 decodes at context 2048 (2112 "
                         "tokens, 65 sequences)"));
    CHECK(test::contains(r.output, "attn_decode"));
    const test::Ran bad = test::run_servesim("inspect --model Qwen3-4B --cost-model measured");
    CHECK(bad.status != 0);
    CHECK(test::contains(bad.output, "--cost-model: used only with --step-costs"));
}

TEST_CASE("CLI: inspect --step-costs refuses a sequence longer than max_model_len", "[tools][cli]") {
    // Qwen3-4B's context length is 40,960 tokens (max_position_embeddings), the default max_model_len: a prefill of
    // 40,000 after 960 cached is 40,960 tokens and runs; a decode at context 40,961 would be one token more.
    const test::Ran edge = test::run_servesim("inspect --model Qwen3-4B --gpu H100 --step-costs prefill=40000@960");
    INFO(edge.output);
    CHECK(edge.status == 0);
    CHECK(test::contains(edge.output, "(40000 tokens, 1 sequence)"));
    const test::Ran over = test::run_servesim("inspect --model Qwen3-4B --gpu H100 --step-costs decode=8x40961");
    CHECK(over.status != 0);
    CHECK(test::contains(over.output, "--step-costs: 'decode=8x40961': a sequence of 40961 tokens is longer than "
                                      "max_model_len 40960 of Qwen3-4B"));
    const test::Ran lowered =
        test::run_servesim("inspect --model Qwen3-4B --gpu H100 --max-model-len 4096 --step-costs prefill=4097");
    CHECK(lowered.status != 0);
    CHECK(test::contains(lowered.output, "longer than max_model_len 4096"));
}

}  // namespace
}  // namespace servesim::app
