// What a user of the servesim binary reads about statuses and the planner (docs/OUTPUTS.md "Status",
// docs/PLANNER.md): an overloaded closed-loop point says so on stderr and in its status_reason column; `plan --model`
// plans vllm bench serve's random dataset, reports a grid point that does not fit as does_not_fit with vLLM's reason
// and plans the rest; --request-rate is refused there (the planner searches it).
#include <sstream>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

using servesim::test::contains;
using servesim::test::Ran;

Ran servesim(const std::string& args, bool with_stderr = true) {
    return servesim::test::run_servesim(args, "", with_stderr);
}

TEST_CASE("CLI status: the tenant sweep's 40-tenant point is overloaded, with its reason", "[tools][cli][status]") {
    // Qwen3-4B on the RTX 3090 at 6 req/s offered to 40 closed-loop tenants: they could send 2.62 req/s.
    const std::string args = "sweep scenarios/seed-study/tenant-sweep.yaml --format csv -j 2";
    const Ran r = servesim(args);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "servesim: warning: experiment 'Qwen3-4B tenants=40': overloaded: the clients were held "
                             "back: they sent 2.62 req/s of the 6 offered (56 % short"));
    const Ran csv = servesim(args, false);
    std::istringstream in(csv.output);
    std::string line;
    std::getline(in, line);
    CHECK(contains(line, ",status,status_reason,"));
    bool found = false;
    while (std::getline(in, line)) {
        if (line.rfind("Qwen3-4B tenants=40,", 0) == 0) {
            found = true;
            CHECK(contains(line, ",overloaded,\"the clients were held back: they sent 2.62 req/s of the 6 offered"));
        }
    }
    CHECK(found);
}

TEST_CASE("CLI plan: --model plans the random dataset; a grid point that does not fit is a does_not_fit row",
          "[tools][cli][plan]") {
    const Ran r = servesim(
        "plan --model Llama-3.1-70B --quantization fp8 --max-model-len 8192 --num-prompts 200 --random-input-len 512 "
        "--random-output-len 64 --grid gpu=H100,H200 --slo ttft_p99=2s,tpot_p99=50ms --start-load 2 --tolerance 0.1 "
        "-j 2",
        false);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "servesim plan — command line\nquestion: largest workload.request_rate meeting the SLOs"));
    CHECK(contains(r.output, "  does_not_fit\n"));
    CHECK(contains(r.output, "does_not_fit: vLLM would not start these (its start-up memory check), so they were not "
                             "probed\n  gpu=H100  max_model_len: To serve at least one request with the models's max "
                             "seq len (8192), (2.50 GiB KV cache is needed"));
    CHECK(contains(r.output, "* gpu=H200 "));  // planned, and the only priced answer
    // What binds it, with the headroom on each SLO and the band (the roofline is not validated on the H200).
    CHECK(contains(r.output, "  gpu=H200  binds tpot_p99 (at load "));
    CHECK(contains(r.output, "band not validated (two significant digits)"));
    // Each GPU's price with its source and date (docs/GPUS.md "Prices").
    CHECK(contains(r.output, "prices\n  H100-SXM      $4.76/GPU-h (RunPod on-demand rate, as tabulated by "
                             "deploybase.ai/articles/runpod-gpu-pricing"));
    CHECK(contains(r.output, "  H200          $6.35/GPU-h (RunPod on-demand rate"));
    // The launch line of the answer.
    CHECK(contains(r.output, "launch: each answer's configuration\n  # gpu=H200\n  vllm serve meta-llama/Llama-3.1-70B "));
    // The planner searches the rate: vllm bench serve's --request-rate is refused, saying what to use.
    const Ran rate = servesim("plan --model Qwen3-8B --request-rate 5 --slo ttft_p99=2s");
    CHECK(rate.status != 0);
    CHECK(contains(rate.output, "--request-rate: the planner searches the rate"));
}

TEST_CASE("CLI plan: a layout budget that is not whole nodes, and --max-pp without --gpus, are refused",
          "[tools][cli][plan]") {
    const Ran twelve = servesim("plan --model Qwen3-8B --gpus 12 --slo ttft_p99=2s");
    CHECK(twelve.status != 0);
    CHECK(contains(twelve.output, "--gpus: 12 GPUs are not whole nodes of 8 (--gpus-per-node); GPUs come in nodes: "
                                  "give 8 or 16, or the node size with --gpus-per-node"));
    const Ran pp = servesim("plan --model Qwen3-8B --max-pp 2 --slo ttft_p99=2s");
    CHECK(pp.status != 0);
    CHECK(contains(pp.output, "--max-pp: caps the layout search's pipeline stages; give --gpus N to search layouts"));
}

}  // namespace
