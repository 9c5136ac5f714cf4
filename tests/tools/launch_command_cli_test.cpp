// `run --out` writes launch.sh (tools/app/launch_command.*): the `vllm serve` line of the simulated engine with
// vLLM's defaults made explicit, the `vllm bench serve` line of a bench_serve load, and the `servesim validate` line
// that checks the prediction; a tenants workload says why it has no bench line. The serve line's flags, given back to
// servesim, describe the same configuration (a fixed point).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/catch.h"
#include "tests/tools/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using servesim::test::contains;
using servesim::test::Ran;

std::string out_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("servesim-launch-" + std::to_string(getpid()) + "-" + name);
    fs::remove_all(dir);
    return dir.string();
}

std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The line of `text` that starts with `prefix` (empty when none).
std::string line_starting(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) == 0) {
            return line;
        }
    }
    return "";
}

}  // namespace

TEST_CASE("CLI launch.sh: the vllm serve, vllm bench serve and servesim validate lines of a bench_serve run",
          "[tools][cli][launch]") {
    const std::string dir = out_dir("bench");
    const Ran r = servesim::test::run_servesim(
        "run --model Qwen3-4B --gpu H100 -tp 2 --max-num-seqs 64 --kv-cache-dtype fp8 --request-rate 4 "
        "--num-prompts 50 --random-input-len 200 --random-output-len 20 --out " + dir);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(contains(r.output, dir + "/launch.sh (the vllm serve / bench lines)"));
    const std::string text = read(dir + "/launch.sh");
    // Qwen3-4B is Qwen/Qwen3-4B; the H100's vLLM defaults servesim resolved (max_model_len the model's 40,960,
    // a token budget of 8,192, memory share 0.92) are written out; the user's -tp 2, --max-num-seqs 64 and fp8 KV
    // too; prefix caching is on (vLLM's default for a plain decoder).
    CHECK(line_starting(text, "vllm serve ") ==
          "vllm serve Qwen/Qwen3-4B --tensor-parallel-size 2 --max-model-len 40960 --max-num-seqs 64 "
          "--max-num-batched-tokens 8192 --gpu-memory-utilization 0.92 --kv-cache-dtype fp8 "
          "--enable-prefix-caching");
    CHECK(line_starting(text, "vllm bench serve ") ==
          "vllm bench serve --backend vllm --model Qwen/Qwen3-4B --dataset-name random --random-input-len 200 "
          "--random-output-len 20 --num-prompts 50 --request-rate 4 --seed 1 --ignore-eos --save-result "
          "--save-detailed --result-filename result.json");
    CHECK(line_starting(text, "servesim validate ") ==
          "servesim validate result.json --model Qwen3-4B --gpu H100-SXM --tensor-parallel-size 2 "
          "--max-model-len 40960 --max-num-seqs 64 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.92 "
          "--kv-cache-dtype fp8 --enable-prefix-caching");
    CHECK(contains(text, "# experiment 'command-line' (seed 1): Qwen3-4B on H100-SXM, simulated as vLLM "));
    std::filesystem::remove_all(dir);
}

TEST_CASE("CLI launch.sh: the serve line's flags given back to servesim describe the same engine",
          "[tools][cli][launch]") {
    const std::string first = out_dir("first");
    REQUIRE(servesim::test::run_servesim("run --model Qwen3-4B --gpu H200 --max-num-batched-tokens 4096 "
                                         "--no-enable-prefix-caching --request-rate 2 --num-prompts 20 --out " +
                                         first)
                .status == 0);
    const std::string serve = line_starting(read(first + "/launch.sh"), "vllm serve ");
    REQUIRE(serve.rfind("vllm serve Qwen/Qwen3-4B ", 0) == 0);
    const std::string flags = serve.substr(std::string("vllm serve Qwen/Qwen3-4B ").size());
    const std::string second = out_dir("second");
    const Ran again = servesim::test::run_servesim("run --model Qwen/Qwen3-4B --gpu H200 " + flags +
                                                   " --request-rate 2 --num-prompts 20 --out " + second);
    INFO(again.output);
    REQUIRE(again.status == 0);
    CHECK(line_starting(read(second + "/launch.sh"), "vllm serve ") == serve);
    std::filesystem::remove_all(first);
    std::filesystem::remove_all(second);
}

TEST_CASE("CLI launch.sh: a tenants workload has no bench line and says why; replicas are noted",
          "[tools][cli][launch]") {
    const std::string dir = out_dir("tenants");
    const Ran r = servesim::test::run_servesim("run scenarios/quickstart.yaml --set cluster.replicas=2 --out " + dir);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string text = read(dir + "/launch.sh");
    CHECK(contains(text, "# no vllm bench serve line: the workload (type: tenants) is not vllm bench serve's own"));
    CHECK(contains(text, "# note: 2 replicas: one such server per replica, behind the 'round_robin' router"));
    CHECK(line_starting(text, "vllm bench serve").empty());
    CHECK_FALSE(contains(line_starting(text, "vllm serve "), "--data-parallel-size"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("CLI launch.sh: replicas behind vLLM's own DP load balancer are one server's --data-parallel-size",
          "[tools][cli][launch]") {
    // router vllm_dp is vLLM's DPLBAsyncMPClient: the replicas are the data-parallel engines of one `vllm serve`.
    const std::string dir = out_dir("vllm-dp");
    const Ran r = servesim::test::run_servesim("run scenarios/quickstart.yaml --set cluster.replicas=2 --set "
                                               "cluster.router=vllm_dp --out " + dir);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string text = read(dir + "/launch.sh");
    CHECK(contains(line_starting(text, "vllm serve "), " --data-parallel-size 2 "));
    CHECK_FALSE(contains(text, "one such server per replica"));
    std::filesystem::remove_all(dir);
}
