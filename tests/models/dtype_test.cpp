// Tests models/dtype.*: the spellings of config.json and vLLM flags map to DTypes; anything else lists them.
#include "models/dtype.h"

#include "tests/catch.h"
#include "tests/models/model_test_util.h"

namespace sm = servesim::models;

TEST_CASE("config.json and vLLM dtype spellings parse", "[models]") {
    CHECK(sm::parse_dtype("bfloat16") == sm::DType::kBFloat16);
    CHECK(sm::parse_dtype("bf16") == sm::DType::kBFloat16);
    CHECK(sm::parse_dtype("torch.bfloat16") == sm::DType::kBFloat16);
    CHECK(sm::parse_dtype("float16") == sm::DType::kFloat16);
    CHECK(sm::parse_dtype("float32") == sm::DType::kFloat32);
    CHECK(sm::parse_dtype("FP8") == sm::DType::kFp8);
    CHECK(sm::parse_dtype("fp8_e5m2") == sm::DType::kFp8);
    CHECK(sm::dtype_bytes(sm::parse_dtype("fp8_e4m3")) == 1);
}

TEST_CASE("dtype_name round-trips through parse_dtype", "[models]") {
    for (auto t : {sm::DType::kFloat32, sm::DType::kBFloat16, sm::DType::kFloat16, sm::DType::kFp8}) {
        CHECK(sm::parse_dtype(sm::dtype_name(t)) == t);
    }
}

TEST_CASE("An unknown dtype lists the allowed spellings", "[models]") {
    const auto msg = sm::test::config_error_of([] { (void)sm::parse_dtype("int4", "s.yaml", 3, "kv_cache_dtype"); });
    CHECK(sm::test::contains(msg, "s.yaml:3"));
    CHECK(sm::test::contains(msg, "'kv_cache_dtype'"));
    CHECK(sm::test::contains(msg, "int4"));
    CHECK(sm::test::contains(msg, "bfloat16, bf16"));
}
