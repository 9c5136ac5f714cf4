// The GPU's compute capability reaches the memory plan (app::memory_plan_request → cache::plan_memory) and picks
// the MLA backend's block size: DeepSeek-V2-Lite on an H200 (sm_90) with a bf16 KV cache takes FLASH_ATTN_MLA's 16,
// with fp8 FLASHMLA's 64, and on a B200 (sm_100) FLASHINFER_MLA's 32 (vllm/platforms/cuda.py).
#include <string>

#include "calibration/gpu_spec.h"
#include "models/model_registry.h"
#include "sim/memory/memory_plan.h"
#include "tests/catch.h"
#include "tools/app/experiment.h"

namespace servesim::app {
namespace {

cache::MemoryPlan mla_plan(const std::string& gpu, bool fp8) {
    EngineSettings e;
    e.kv_cache_dtype_fp8 = fp8;
    e.max_model_len = 32768;
    const auto model =
        models::resolve_model(std::string(SERVESIM_TEST_DATA_DIR) + "/fixtures/hf/DeepSeek-V2-Lite.json");
    return cache::plan_memory(model, memory_plan_request(e, calibration::find_gpu(gpu)));
}

TEST_CASE("MLA block size by GPU: 16 on an H200, 64 with fp8 KV, 32 on a B200", "[tools][mla]") {
    // Page per layer: block · 576 · bytes (V2-Lite's latent is 512 + 64 like V3's).
    const cache::MemoryPlan h200 = mla_plan("H200", false);
    CHECK(h200.block_size == 16);
    CHECK(h200.page_size_bytes == 16 * 576 * 2);
    const cache::MemoryPlan h200_fp8 = mla_plan("H200", true);
    CHECK(h200_fp8.block_size == 64);
    CHECK(h200_fp8.page_size_bytes == 64 * 576);
    CHECK(mla_plan("B200", false).block_size == 32);
}

}  // namespace
}  // namespace servesim::app
