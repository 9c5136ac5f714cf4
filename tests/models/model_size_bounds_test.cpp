// Tests the bounds models/hf_config.cpp puts on config.json dimensions (docs/INPUT-RANGES.md): a dimension of
// 2^31 − 1 and a model whose parameter count no deployment could hold are refused naming the key, before any
// int64 size (weights, KV bytes) is derived from them — they used to wrap (inspect printed 9.2 EB fitting an H200).
#include <string>

#include "models/hf_config.h"
#include "models/model_derived.h"
#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;
using sm::test::config_error_of;
using sm::test::contains;

namespace {

// Llama-3.1-8B's config.json (tests/fixtures/hf/) with the given dimensions.
std::string llama(const std::string& layers, const std::string& hidden, const std::string& inter,
                  const std::string& heads = "32") {
    return R"({"model_type": "llama", "hidden_size": )" + hidden + R"(, "intermediate_size": )" + inter +
           R"(, "max_position_embeddings": 131072, "num_attention_heads": )" + heads +
           R"(, "num_hidden_layers": )" + layers +
           R"(, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "torch_dtype": "bfloat16"})";
}

std::string error_of(const std::string& json) {
    return config_error_of([&] { (void)sm::model_from_hf_config(YAML::Load(json), "m", "config.json"); });
}

}  // namespace

TEST_CASE("num_hidden_layers of 2^31 - 1 is refused before the layers are allocated", "[models][ranges]") {
    const std::string m = error_of(llama("2147483647", "4096", "14336"));
    INFO(m);
    CHECK(contains(m, "config.json:1: 'num_hidden_layers': must be a positive integer up to 10000, got 2147483647"));
}

TEST_CASE("A dimension of 2^31 - 1 is refused naming its key", "[models][ranges]") {
    const std::string m = error_of(llama("32", "2147483647", "14336"));
    INFO(m);
    CHECK(contains(m, "'hidden_size': must be a positive integer up to 1048576, got 2147483647"));
}

TEST_CASE("A model beyond 1e15 parameters is refused naming the dominant key", "[models][ranges]") {
    // Each dimension is within its bound, the product is not: 10,000 layers × 3 · 2^20 · 2^20 (gated MLP) alone
    // is 3.3e16 parameters, beyond 1e15, so the reader refuses it (int64 bytes would still hold it, but no GPU
    // deployment could: the bound is what a deployment can hold, see INPUT-RANGES.md).
    const std::string m = error_of(llama("10000", "1048576", "1048576", "8"));
    INFO(m);
    CHECK(contains(m, "'num_hidden_layers': the model would hold about"));
    CHECK(contains(m, "allowed: at most 1e+15"));
}

TEST_CASE("A large but holdable model reads and its weight bytes stay exact", "[models][ranges]") {
    // Llama-3.1-405B's shape: 126 layers, hidden 16384, 128 query / 8 KV heads of 128, MLP 53248, vocab 128256.
    // Per layer: q 16384·128·128 + k,v 2·16384·8·128 + o 128·128·16384 = 570,425,344; gated MLP 3·16384·53248 =
    // 2,617,245,696; × 126 = 401,646,551,040. Embedding + untied lm_head 2·128256·16384 = 4,202,692,608.
    // 405,849,243,648 parameters × 2 bytes (bf16) = 811,698,487,296 bytes.
    const auto spec = sm::model_from_hf_config(YAML::Load(llama("126", "16384", "53248", "128")), "m", "config.json");
    CHECK(spec.layers.size() == 126);
    CHECK(sm::weight_bytes_total(spec) == 811'698'487'296);
}
